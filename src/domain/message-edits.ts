/**
 * Edits and deletes of a bot's messages, with Telegram's rules (tdlib's
 * MessagesManager: can_edit_message, can_delete_message, can_revoke_message) and its
 * words: a bot edits only messages it sent (not forwards, not ones with a custom
 * keyboard), the text of a text message, the caption of a photo or document; an edit
 * that changes nothing is refused. It deletes its own messages and, in a private chat,
 * ones it received, within 48 hours. Each edit or delete is written with its event on
 * the outbound feed (edited_message, deleted_messages) in one transaction.
 */
import { ApiError } from '../errors.js';
import type { EditMessageCaptionRequest, EditMessageReplyMarkupRequest, EditMessageTextRequest } from '../gen/botplatform/v1/runtime_service.js';
import type { Message, ReplyMarkup } from '../gen/botplatform/v1/update.js';
import { constraintsOf } from '../gen/constraints.js';
import { outgoingCaption, outgoingText } from '../messages/formatted.js';
import { checkReplyMarkup } from '../messages/reply-markup.js';
import type { StoredMessage } from '../storage/messages-repo.js';
import { toWireFeedEvent, toWireMessage } from '../wire.js';
import { chatNotFound, contentOf, inlineOnly, refused, sentAt, withReplyTo, type MessagesDeps } from './message-rules.js';
import type { BotPrincipal, RuntimeRpc } from './rpc.js';
import * as check from './validation.js';

const LIMITS = {
  text: constraintsOf('botplatform.v1.EditMessageTextRequest', 'text'),
  textMessageId: constraintsOf('botplatform.v1.EditMessageTextRequest', 'message_id'),
  caption: constraintsOf('botplatform.v1.EditMessageCaptionRequest', 'caption'),
  captionMessageId: constraintsOf('botplatform.v1.EditMessageCaptionRequest', 'message_id'),
  markupMessageId: constraintsOf('botplatform.v1.EditMessageReplyMarkupRequest', 'message_id'),
  deleteMessageId: constraintsOf('botplatform.v1.DeleteMessageRequest', 'message_id'),
  deleteIds: constraintsOf('botplatform.v1.DeleteMessagesRequest', 'message_ids'),
};

/** How long a bot may delete a message for everyone (tdlib: revoke_time_limit for bots, 2 days). */
const DELETE_WINDOW_S = 2 * 86_400;

/**
 * Why a bot may not delete this message of a chat of this type, in Telegram's words, or
 * undefined when it may. A bot is no administrator here: in a private chat it deletes
 * either side's messages, elsewhere only its own; never after 48 hours.
 */
export function deleteRefusal(chatType: string, stored: StoredMessage, nowS: number): string | undefined {
  const expired = nowS - sentAt(stored) > DELETE_WINDOW_S;
  if (chatType === 'private') return expired ? "message can't be deleted for everyone" : undefined;
  // A basic group: the message is only the bot's to delete for itself (tdlib's can_revoke_message).
  if (chatType === 'group') return expired || !stored.outbound ? "message can't be deleted for everyone" : undefined;
  // Supergroups and channels (can_delete_channel_message).
  return expired || !stored.outbound ? "message can't be deleted" : undefined;
}

/** What "not modified" compares: the content and the keyboard, as stored. */
function visible(m: Message): string {
  const w = toWireMessage({ ...m, editDate: undefined, replyToMessage: undefined });
  return JSON.stringify([w.text, w.entities, w.caption, w.caption_entities, w.reply_markup]);
}

type EditRpc = Pick<RuntimeRpc, 'editMessageText' | 'editMessageCaption' | 'editMessageReplyMarkup' | 'deleteMessage' | 'deleteMessages'>;
type EditRequest = EditMessageTextRequest | EditMessageCaptionRequest | EditMessageReplyMarkupRequest;

export function createMessageEdits(deps: MessagesDeps): EditRpc {
  const now = deps.now ?? Date.now;

  function checkIds(v: check.Violations, req: { chatId: number; messageId: number }, messageId: { readonly minimum: number }) {
    if (!req.chatId) v.add('chat_id', 'REQUIRED', 'is required');
    if (!req.messageId) v.add('message_id', 'REQUIRED', 'is required');
    else check.inRange(v, 'message_id', req.messageId, messageId);
  }

  /** The new inline keyboard of an edit (unset or empty: none). */
  function newKeyboard(markup: ReplyMarkup | undefined): ReplyMarkup | undefined {
    const inline = inlineOnly(markup);
    if (inline) checkReplyMarkup(inline);
    return inline;
  }

  /** A message the bot may edit (tdlib's can_edit_message, for a bot that is no administrator). */
  async function editable(principal: BotPrincipal, req: EditRequest): Promise<{ stored: StoredMessage; message: Message }> {
    const stored = await deps.messages.find(principal.botId, req.chatId, req.messageId);
    if (!stored) {
      if (!(await deps.messages.chatType(principal.botId, req.chatId))) throw chatNotFound();
      throw refused('message_id', 'MESSAGE_NOT_FOUND', 'message to edit not found');
    }
    const message = contentOf(stored);
    const customKeyboard = message?.replyMarkup && message.replyMarkup.inlineKeyboard.length === 0;
    if (!stored.outbound || !message || message.forwardOrigin || customKeyboard) throw refused('message_id', 'MESSAGE_CANT_BE_EDITED', "message can't be edited");
    return { stored, message };
  }

  /** Stores the edited message and puts it on the feed, unless it changes nothing; answers it as it is now. */
  async function edit(principal: BotPrincipal, req: EditRequest, before: Message, after: Message): Promise<Message> {
    if (visible(before) === visible(after)) {
      throw refused('message_id', 'MESSAGE_NOT_MODIFIED',
        'message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message');
    }
    const edited = await withReplyTo(deps.messages, principal.botId, { ...after, editDate: Math.floor(now() / 1000) });
    await deps.events.write([{ botId: principal.botId, chatId: req.chatId, event: toWireFeedEvent({ editedMessage: edited }) }], async (w) => {
      if (!(await deps.messages.replace(principal.botId, req.chatId, req.messageId, toWireMessage(edited), w))) {
        throw refused('message_id', 'MESSAGE_NOT_FOUND', 'message to edit not found');
      }
    });
    return edited;
  }

  /** Deletes messages (already checked) with their event on the feed. */
  async function remove(principal: BotPrincipal, chatId: number, messageIds: number[]): Promise<void> {
    const sorted = [...messageIds].sort((a, b) => a - b);
    await deps.events.write([{ botId: principal.botId, chatId, event: toWireFeedEvent({ deletedMessages: { chatId, messageIds: sorted } }) }],
      async (w) => deps.messages.remove(principal.botId, chatId, sorted, w));
  }

  return {
    async editMessageText(req, { principal }) {
      const v = new check.Violations();
      checkIds(v, req, LIMITS.textMessageId);
      check.messageText(v, 'text', req.text, LIMITS.text);
      v.throwIfAny();
      const keyboard = newKeyboard(req.replyMarkup);
      const text = outgoingText(req.text, { parseMode: req.parseMode, entities: req.entities, parsedMaxLength: LIMITS.text.parsedMaxLength, field: 'text', entitiesField: 'entities' });
      const { message } = await editable(principal, req);
      if (message.text === undefined) throw refused('message_id', 'NO_TEXT', 'there is no text in the message to edit');
      return { result: await edit(principal, req, message, { ...message, text: text.text, entities: text.entities, replyMarkup: keyboard }) };
    },

    async editMessageCaption(req, { principal }) {
      const v = new check.Violations();
      checkIds(v, req, LIMITS.captionMessageId);
      check.optionalText(v, 'caption', req.caption, LIMITS.caption);
      v.throwIfAny();
      const keyboard = newKeyboard(req.replyMarkup);
      const parsed = outgoingCaption(req.caption, { parseMode: req.parseMode, entities: req.captionEntities, parsedMaxLength: LIMITS.caption.parsedMaxLength, field: 'caption', entitiesField: 'caption_entities' });
      const { message } = await editable(principal, req);
      if (!message.photo && !message.document) throw refused('message_id', 'NO_CAPTION', 'there is no caption in the message to edit');
      return {
        result: await edit(principal, req, message, {
          ...message, ...parsed, replyMarkup: keyboard,
        }),
      };
    },

    async editMessageReplyMarkup(req, { principal }) {
      const v = new check.Violations();
      checkIds(v, req, LIMITS.markupMessageId);
      v.throwIfAny();
      const keyboard = newKeyboard(req.replyMarkup);
      const { message } = await editable(principal, req);
      return { result: await edit(principal, req, message, { ...message, replyMarkup: keyboard }) };
    },

    async deleteMessage(req, { principal }) {
      const v = new check.Violations();
      checkIds(v, req, LIMITS.deleteMessageId);
      v.throwIfAny();
      const [chatType, stored] = await Promise.all([
        deps.messages.chatType(principal.botId, req.chatId),
        deps.messages.find(principal.botId, req.chatId, req.messageId),
      ]);
      if (!chatType) throw chatNotFound();
      if (!stored) throw refused('message_id', 'MESSAGE_NOT_FOUND', 'message to delete not found');
      const why = deleteRefusal(chatType, stored, Math.floor(now() / 1000));
      if (why) throw refused('message_id', 'MESSAGE_CANT_BE_DELETED', why);
      await remove(principal, req.chatId, [req.messageId]);
      return { result: true };
    },

    async deleteMessages(req, { principal }) {
      const v = new check.Violations();
      if (!req.chatId) v.add('chat_id', 'REQUIRED', 'is required');
      v.throwIfAny();
      if (req.messageIds.length === 0) throw refused('message_ids', 'REQUIRED', 'message identifiers are not specified');
      if (req.messageIds.length > LIMITS.deleteIds.maxItems) throw ApiError.invalid('message_ids', 'TOO_MANY', `too many message identifiers specified: at most ${LIMITS.deleteIds.maxItems}`);
      const [chatType, found] = await Promise.all([
        deps.messages.chatType(principal.botId, req.chatId),
        deps.messages.findMany(principal.botId, req.chatId, req.messageIds.filter((id) => id > 0)),
      ]);
      if (!chatType) throw chatNotFound();
      // Those not found are skipped; one that may not be deleted refuses them all (tdlib's delete_messages).
      const nowS = Math.floor(now() / 1000);
      for (const stored of found) {
        const why = deleteRefusal(chatType, stored, nowS);
        if (why) throw refused('message_ids', 'MESSAGE_CANT_BE_DELETED', why);
      }
      if (found.length > 0) await remove(principal, req.chatId, found.map((m) => m.messageId));
      return { result: true };
    },
  };
}
