/**
 * The send methods (contract §6): a bot writes to chats that have written to it,
 * may reply to a message of the same chat, and sends files registered by itself;
 * it copies and forwards messages of its chats (sent or received), and sends albums.
 * Each sent message is stored and queued for the platform's messaging services (the
 * bus and the outbound feed). Edits and deletes are message-edits.ts; chat actions and
 * getChat chats-service.ts; this service answers for all of them.
 */
import crypto from 'node:crypto';
import { ApiError } from '../errors.js';
import type { CopyMessageRequest, SendDocumentRequest, SendPhotoRequest } from '../gen/botplatform/v1/runtime_service.js';
import type { Message, MessageOrigin } from '../gen/botplatform/v1/update.js';
import { constraintsOf } from '../gen/constraints.js';
import type { SendItem } from '../storage/units.js';
import { toFile } from './files-service.js';
import type { BotPrincipal, RuntimeRpc } from './rpc.js';
import * as check from './validation.js';
import { outgoingCaption, outgoingText } from '../messages/formatted.js';
import { checkReplyMarkup } from '../messages/reply-markup.js';
import { botUserId, fromWireMessage, toWireMessage } from '../wire.js';
import { chatNotFound, contentOf, refused, replyTarget, type MessagesDeps } from './message-rules.js';
import { createMessageEdits } from './message-edits.js';
import { createChatsService } from './chats-service.js';

const LIMITS = {
  text: constraintsOf('botplatform.v1.SendMessageRequest', 'text'),
  replyTo: constraintsOf('botplatform.v1.SendMessageRequest', 'reply_to_message_id'),
  photo: {
    caption: constraintsOf('botplatform.v1.SendPhotoRequest', 'caption'),
    replyTo: constraintsOf('botplatform.v1.SendPhotoRequest', 'reply_to_message_id'),
  },
  document: {
    caption: constraintsOf('botplatform.v1.SendDocumentRequest', 'caption'),
    replyTo: constraintsOf('botplatform.v1.SendDocumentRequest', 'reply_to_message_id'),
  },
  copy: {
    messageId: constraintsOf('botplatform.v1.CopyMessageRequest', 'message_id'),
    caption: constraintsOf('botplatform.v1.CopyMessageRequest', 'caption'),
    replyTo: constraintsOf('botplatform.v1.CopyMessageRequest', 'reply_to_message_id'),
  },
  forward: { messageId: constraintsOf('botplatform.v1.ForwardMessageRequest', 'message_id') },
  album: {
    media: constraintsOf('botplatform.v1.SendMediaGroupRequest', 'media'),
    caption: constraintsOf('botplatform.v1.InputMedia', 'caption'),
    replyTo: constraintsOf('botplatform.v1.SendMediaGroupRequest', 'reply_to_message_id'),
  },
};

/** Fewest media of an album (Telegram's sendMediaGroup: 2 to 10). */
const MIN_ALBUM = 2;

interface SendInput {
  chatId: number;
  replyToMessageId?: number;
  /** A reply to a message that is not there is sent as a plain message (else refused). */
  allowSendingWithoutReply?: boolean;
}

/** A message's content as a copy or a forward carries it: its text or its file, with their entities. */
const contentFields = (m: Message): Partial<Message> => ({
  text: m.text, entities: m.entities, photo: m.photo, document: m.document, caption: m.caption, captionEntities: m.captionEntities,
});

/** An album's id, as Telegram's: a decimal number, shared by the album's messages. */
const newMediaGroupId = () => (crypto.randomBytes(8).readBigUInt64BE() >> 1n).toString();

type SendRpc = Pick<RuntimeRpc, 'sendMessage' | 'sendPhoto' | 'sendDocument' | 'copyMessage' | 'forwardMessage' | 'sendMediaGroup'>;

export function createMessagesService(deps: MessagesDeps): SendRpc & ReturnType<typeof createMessageEdits> & ReturnType<typeof createChatsService> {
  const now = deps.now ?? Date.now;

  function checkTarget(v: check.Violations, input: SendInput, replyTo: { readonly minimum: number }) {
    if (!input.chatId) v.add('chat_id', 'REQUIRED', 'is required');
    check.inRange(v, 'reply_to_message_id', input.replyToMessageId, replyTo);
  }

  /**
   * The message replied to (of the same chat), checked; how to build each message once its
   * id and its chat are known. The chat (one that has written to the bot) is checked in the
   * unit that stores the messages (units.ts's sendMessages), as a send's floor does.
   */
  async function prepare(principal: BotPrincipal, input: SendInput, bodies: Partial<Message>[]): Promise<SendItem[]> {
    let replyTo = input.replyToMessageId;
    let replyToMessage: Message | undefined;
    try {
      replyToMessage = await replyTarget(deps.messages, principal.botId, input.chatId, input.replyToMessageId);
    } catch (err) {
      // An unknown chat is the refusal, before a reply to nothing (a message found is of a known chat).
      const missing = err instanceof ApiError && err.details.some((d) => d.reason === 'MESSAGE_NOT_FOUND');
      if (missing && !(await deps.messages.chatType(principal.botId, input.chatId))) throw chatNotFound();
      // allow_sending_without_reply: a message that is not there is no reason to refuse the send.
      if (!(input.allowSendingWithoutReply && missing)) throw err;
      replyTo = undefined;
    }
    const date = Math.floor(now() / 1000);
    return bodies.map((body) => ({ botId: principal.botId, chatId: input.chatId, build: (messageId, bot, chat) => toWireMessage({
      messageId,
      date,
      // As Telegram's: the chat with the names it has.
      chat: { id: input.chatId, ...chat },
      from: { id: botUserId(principal.botId), isBot: true, username: bot.username, firstName: bot.name },
      text: undefined,
      replyToMessageId: replyTo,
      photo: undefined,
      document: undefined,
      caption: undefined,
      replyMarkup: undefined,
      forwardOrigin: undefined,
      ...body,
      replyToMessage,
      entities: body.entities ?? [],
      captionEntities: body.captionEntities ?? [],
    }) }));
  }

  /** Checks the replied-to message, then stores and queues the message (refused if its chat has not written to the bot). */
  async function send(principal: BotPrincipal, input: SendInput, body: Partial<Message>): Promise<Message> {
    const [item] = await prepare(principal, input, [body]);
    const stored = await deps.sender.send(item!);
    if (!stored) throw chatNotFound();
    return fromWireMessage(stored);
  }

  /** A caption as Telegram keeps it: parsed, cleaned and trimmed (an empty one is none). */
  const caption = (text: string | undefined, parseMode: string | undefined, entities: Message['captionEntities'], parsedMaxLength: number, field: string, entitiesField: string) =>
    outgoingCaption(text, { parseMode, entities, parsedMaxLength, field, entitiesField });

  async function sendFile(
    principal: BotPrincipal,
    req: SendPhotoRequest | SendDocumentRequest,
    kind: 'photo' | 'document',
  ): Promise<Message> {
    const v = new check.Violations();
    if (!req.fileId) v.add('file_id', 'REQUIRED', 'is required');
    check.optionalText(v, 'caption', req.caption, LIMITS[kind].caption);
    checkTarget(v, req, LIMITS[kind].replyTo);
    v.throwIfAny();
    const parsed = caption(req.caption, req.parseMode, req.captionEntities, LIMITS[kind].caption.parsedMaxLength, 'caption', 'caption_entities');
    if (req.replyMarkup) checkReplyMarkup(req.replyMarkup);
    const file = await deps.files.fileForSend(principal.botId, req.fileId);
    if (kind === 'photo' && !file.mimeType.startsWith('image/')) {
      throw ApiError.invalid('file_id', 'NOT_AN_IMAGE', `is not an image (mime_type ${file.mimeType}); send it with sendDocument`);
    }
    return send(principal, req, { [kind]: toFile(file), ...parsed, replyMarkup: req.replyMarkup });
  }

  /** The message a copy or a forward takes: any of the bot's chats, sent or received, with content. */
  async function original(botId: string, fromChatId: number, messageId: number, what: 'copy' | 'forward'): Promise<Message> {
    const stored = await deps.messages.find(botId, fromChatId, messageId);
    const m = contentOf(stored);
    if (m) return m;
    if (!stored && !(await deps.messages.chatType(botId, fromChatId))) throw chatNotFound('from_chat_id');
    throw refused('message_id', 'MESSAGE_NOT_FOUND', `message to ${what} not found`);
  }

  function checkCopy(req: CopyMessageRequest) {
    const v = new check.Violations();
    checkTarget(v, req, LIMITS.copy.replyTo);
    if (!req.fromChatId) v.add('from_chat_id', 'REQUIRED', 'is required');
    if (!req.messageId) v.add('message_id', 'REQUIRED', 'is required');
    else check.inRange(v, 'message_id', req.messageId, LIMITS.copy.messageId);
    check.optionalText(v, 'caption', req.caption, LIMITS.copy.caption);
    v.throwIfAny();
    if (req.replyMarkup) checkReplyMarkup(req.replyMarkup);
  }

  return {
    async sendMessage(req, { principal }) {
      const v = new check.Violations();
      check.messageText(v, 'text', req.text, LIMITS.text);
      checkTarget(v, req, LIMITS.replyTo);
      v.throwIfAny();
      // As Telegram stores it: parsed, cleaned, trimmed, with the entities it detects.
      const text = outgoingText(req.text, { parseMode: req.parseMode, entities: req.entities, parsedMaxLength: LIMITS.text.parsedMaxLength, field: 'text', entitiesField: 'entities' });
      if (req.replyMarkup) checkReplyMarkup(req.replyMarkup);
      return { result: await send(principal, req, { text: text.text, entities: text.entities, replyMarkup: req.replyMarkup }) };
    },
    sendPhoto: async (req, { principal }) => ({ result: await sendFile(principal, req, 'photo') }),
    sendDocument: async (req, { principal }) => ({ result: await sendFile(principal, req, 'document') }),

    async copyMessage(req, { principal }) {
      checkCopy(req);
      const m = await original(principal.botId, req.fromChatId, req.messageId, 'copy');
      const body = contentFields(m);
      // A new caption (an empty one removes it) replaces a file's; a text has none.
      if (req.caption !== undefined && m.text === undefined) {
        Object.assign(body, caption(req.caption, req.parseMode, req.captionEntities, LIMITS.copy.caption.parsedMaxLength, 'caption', 'caption_entities'));
      }
      // Unset, the original's inline keyboard comes along (a custom keyboard was for its own chat).
      body.replyMarkup = req.replyMarkup ?? (m.replyMarkup?.inlineKeyboard.length ? m.replyMarkup : undefined);
      const sent = await send(principal, req, body);
      return { result: { messageId: sent.messageId } };
    },

    async forwardMessage(req, { principal }) {
      const v = new check.Violations();
      if (!req.chatId) v.add('chat_id', 'REQUIRED', 'is required');
      if (!req.fromChatId) v.add('from_chat_id', 'REQUIRED', 'is required');
      if (!req.messageId) v.add('message_id', 'REQUIRED', 'is required');
      else check.inRange(v, 'message_id', req.messageId, LIMITS.forward.messageId);
      v.throwIfAny();
      const m = await original(principal.botId, req.fromChatId, req.messageId, 'forward');
      // A forward of a forward names where the message was first sent.
      const origin: MessageOrigin = m.forwardOrigin ?? (m.from
        ? { type: 'user', date: m.date, senderUser: m.from, senderChat: undefined }
        : { type: 'chat', date: m.date, senderUser: undefined, senderChat: m.chat });
      return { result: await send(principal, { chatId: req.chatId }, { ...contentFields(m), forwardOrigin: origin }) };
    },

    async sendMediaGroup(req, { principal }) {
      const v = new check.Violations();
      checkTarget(v, req, LIMITS.album.replyTo);
      req.media.forEach((item, i) => check.optionalText(v, `media[${i}].caption`, item.caption, LIMITS.album.caption));
      v.throwIfAny();
      if (req.media.length === 0) throw refused('media', 'REQUIRED', 'there are no messages to send');
      if (req.media.length > LIMITS.album.media.maxItems) throw ApiError.invalid('media', 'TOO_MANY', `too many messages to send as an album: at most ${LIMITS.album.media.maxItems}`);
      if (req.media.length < MIN_ALBUM) throw refused('media', 'TOO_FEW', `an album must have ${MIN_ALBUM} to ${LIMITS.album.media.maxItems} media`);
      req.media.forEach((item, i) => {
        if (item.type !== 'photo' && item.type !== 'document') throw refused(`media[${i}].type`, 'INVALID_VALUE', `can't parse InputMedia: media type "${item.type}" is not supported here: photo or document`);
        if (!item.media) throw refused(`media[${i}].media`, 'REQUIRED', "can't parse InputMedia: media not found");
      });
      // As tdlib's check_message_group_message_contents: documents go only with documents.
      if (new Set(req.media.map((m) => m.type)).size > 1) throw refused('media', 'MIXED_MEDIA', "document can't be mixed with other media types");
      const bodies = await Promise.all(req.media.map(async (item, i): Promise<Partial<Message>> => {
        const parsed = caption(item.caption, item.parseMode, item.captionEntities, LIMITS.album.caption.parsedMaxLength, `media[${i}].caption`, `media[${i}].caption_entities`);
        // Another failure than an unknown file (the database unavailable) is not reported as one.
        const file = await deps.files.fileForSend(principal.botId, item.media, `media[${i}].media`);
        if (item.type === 'photo' && !file.mimeType.startsWith('image/')) {
          throw ApiError.invalid(`media[${i}].media`, 'NOT_AN_IMAGE', `is not an image (mime_type ${file.mimeType}); send it as a document`);
        }
        return { [item.type]: toFile(file), ...parsed };
      }));
      const mediaGroupId = newMediaGroupId();
      const items = await prepare(principal, req, bodies.map((b) => ({ ...b, mediaGroupId })));
      const stored = await deps.sender.sendMany(items);
      // An album's messages share their chat: all stored, or none.
      if (stored.some((m) => !m)) throw chatNotFound();
      return { result: stored.map((w) => fromWireMessage(w!)) };
    },

    ...createMessageEdits(deps),
    ...createChatsService(deps),
  };
}

export type MessagesService = ReturnType<typeof createMessagesService>;
