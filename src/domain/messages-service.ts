/**
 * The send methods (contract §6): a bot writes to chats that have written to it,
 * may reply to a message of the same chat, and sends files registered by itself.
 * Each sent message is stored and queued for the platform's messaging services.
 */
import { ApiError } from '../errors.js';
import type { SendDocumentRequest, SendPhotoRequest } from '../gen/botplatform/v1/runtime_service.js';
import type { Message } from '../gen/botplatform/v1/update.js';
import { constraintsOf } from '../gen/constraints.js';
import type { MessagesRepo } from '../storage/messages-repo.js';
import type { SendWriter } from '../pipeline/send-writer.js';
import type { FilesService } from './files-service.js';
import { toFile } from './files-service.js';
import type { BotPrincipal, RuntimeRpc } from './rpc.js';
import * as check from './validation.js';
import { outgoingText } from '../messages/formatted.js';
import { checkReplyMarkup } from '../messages/reply-markup.js';
import { botUserId, fromWireMessage, toWireMessage } from '../wire.js';

export interface MessagesDeps {
  messages: MessagesRepo;
  /** Sending: the message, the bot's message counter, the outbox and the feed, together (group commit: pipeline/send-writer.ts). */
  sender: Pick<SendWriter, 'send'>;
  files: FilesService;
  now?: () => number;
}

/**
 * The bot's numeric id as a chat participant (Message.from.id): bot ids are opaque
 * strings, user ids are integers. Derived from the bot id, in [2^52, 2^53).
 */
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
};

interface SendInput {
  chatId: number;
  replyToMessageId?: number;
}

export function createMessagesService(deps: MessagesDeps): Pick<RuntimeRpc, 'sendMessage' | 'sendPhoto' | 'sendDocument'> {
  const now = deps.now ?? Date.now;

  function checkTarget(v: check.Violations, input: SendInput, replyTo: { readonly minimum: number }) {
    if (!input.chatId) v.add('chat_id', 'REQUIRED', 'is required');
    check.inRange(v, 'reply_to_message_id', input.replyToMessageId, replyTo);
  }

  /** Checks the chat and the replied-to message, then stores and queues the message. */
  async function send(principal: BotPrincipal, input: SendInput, body: Partial<Message>): Promise<Message> {
    const chatType = await deps.messages.chatType(principal.botId, input.chatId);
    if (!chatType) throw ApiError.invalid('chat_id', 'CHAT_NOT_FOUND', 'chat not found: the chat must have written to the bot first');
    if (input.replyToMessageId !== undefined
      && !(await deps.messages.messageExists(principal.botId, input.chatId, input.replyToMessageId))) {
      throw ApiError.invalid('reply_to_message_id', 'MESSAGE_NOT_FOUND', 'message to reply to not found in this chat');
    }
    const at = now();
    const wire = await deps.sender.send({ botId: principal.botId, chatId: input.chatId, build: (messageId, bot) => toWireMessage({
      messageId,
      date: Math.floor(at / 1000),
      chat: { id: input.chatId, type: chatType },
      from: { id: botUserId(principal.botId), isBot: true, username: bot.username, firstName: bot.name },
      text: undefined,
      replyToMessageId: input.replyToMessageId,
      photo: undefined,
      document: undefined,
      caption: undefined,
      replyMarkup: undefined,
      replyToMessage: undefined,
      forwardOrigin: undefined,
      ...body,
      entities: body.entities ?? [],
      captionEntities: body.captionEntities ?? [],
    }) });
    return fromWireMessage(wire);
  }

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
    const caption = req.caption
      ? outgoingText(req.caption, { parseMode: req.parseMode, entities: req.captionEntities, maxLength: LIMITS[kind].caption.maxLength, field: 'caption', entitiesField: 'caption_entities' })
      : undefined;
    if (req.replyMarkup) checkReplyMarkup(req.replyMarkup);
    const file = await deps.files.fileForSend(principal.botId, req.fileId);
    if (kind === 'photo' && !file.mimeType.startsWith('image/')) {
      throw ApiError.invalid('file_id', 'NOT_AN_IMAGE', `is not an image (mime_type ${file.mimeType}); send it with sendDocument`);
    }
    return send(principal, req, {
      [kind]: toFile(file), caption: caption?.text || undefined, captionEntities: caption?.entities ?? [], replyMarkup: req.replyMarkup,
    });
  }

  return {
    async sendMessage(req, { principal }) {
      const v = new check.Violations();
      check.messageText(v, 'text', req.text, LIMITS.text);
      checkTarget(v, req, LIMITS.replyTo);
      v.throwIfAny();
      // As Telegram stores it: parsed, cleaned, trimmed, with the entities it detects.
      const text = outgoingText(req.text, { parseMode: req.parseMode, entities: req.entities, maxLength: LIMITS.text.maxLength, field: 'text', entitiesField: 'entities' });
      if (req.replyMarkup) checkReplyMarkup(req.replyMarkup);
      return { result: await send(principal, req, { text: text.text, entities: text.entities, replyMarkup: req.replyMarkup }) };
    },
    sendPhoto: async (req, { principal }) => ({ result: await sendFile(principal, req, 'photo') }),
    sendDocument: async (req, { principal }) => ({ result: await sendFile(principal, req, 'document') }),
  };
}

export type MessagesService = ReturnType<typeof createMessagesService>;
