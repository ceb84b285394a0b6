/**
 * What the message methods share: Telegram's refusals, worded as its Bot API words them
 * (telegram-bot-api's Client.cpp and tdlib's MessagesManager), the lookups of a chat and
 * of a stored message with the refusal each has when it is not there, and the one level
 * of reply_to_message a returned message carries.
 */
import { ApiError, Code } from '../errors.js';
import type { Message, ReplyMarkup } from '../gen/botplatform/v1/update.js';
import type { FeedEventWriter } from '../pipeline/feed-event-writer.js';
import type { SendWriter } from '../pipeline/send-writer.js';
import type { MessagesRepo, StoredMessage } from '../storage/messages-repo.js';
import { fromWireMessage } from '../wire.js';
import type { FilesService } from './files-service.js';

/** What the message services (sends, edits and deletes, chats) are built on. */
export interface MessagesDeps {
  messages: MessagesRepo;
  /** Sending: the message, the bot's message counter, the outbox and the feed, together (group commit: pipeline/send-writer.ts). */
  sender: Pick<SendWriter, 'send' | 'sendMany'>;
  /** The feed's other events (edits, deletes, chat actions), with the writes they announce (pipeline/feed-event-writer.ts). */
  events: Pick<FeedEventWriter, 'announce' | 'write'>;
  files: FilesService;
  now?: () => number;
}

/**
 * A refusal in Telegram's words: the message is exactly the Bot API's description after
 * its "Bad Request: " (so a framework matching "message is not modified" finds it), and
 * the one violation names the field for programs.
 */
export function refused(field: string, reason: string, text: string): ApiError {
  return new ApiError(Code.INVALID_ARGUMENT, text, { details: [{ field, reason, description: text }] });
}

/** A chat that never wrote to the bot (Client.cpp's check_chat). */
export const chatNotFound = (field = 'chat_id') => refused(field, 'CHAT_NOT_FOUND', 'chat not found');

/** An inline keyboard, or nothing: what an edit may set (tdlib's get_inline_reply_markup). */
export function inlineOnly(markup: ReplyMarkup | undefined, field = 'reply_markup'): ReplyMarkup | undefined {
  if (!markup || isEmptyMarkup(markup)) return undefined;
  if (markup.inlineKeyboard.length === 0) throw refused(field, 'INLINE_KEYBOARD_EXPECTED', 'inline keyboard expected');
  return markup;
}

/** A markup that asks for nothing (Telegram ignores it: for an edit, the keyboard goes). */
export const isEmptyMarkup = (m: ReplyMarkup) =>
  m.inlineKeyboard.length === 0 && m.keyboard.length === 0 && !m.removeKeyboard && !m.forceReply;

/** A stored message with something in it (an inbound one recorded before payloads were kept has nothing). */
export function contentOf(stored: StoredMessage | undefined): Message | undefined {
  if (!stored || stored.message.message_id === undefined) return undefined;
  const m = fromWireMessage(stored.message);
  return m.text !== undefined || m.photo || m.document ? m : undefined;
}

/** When a stored message was sent, in unix seconds (its date; else when it was recorded). */
export const sentAt = (stored: StoredMessage) => Number(stored.message.date) || Math.floor(stored.createdAt / 1000);

/** The message a new one replies to, in the same chat, as the reply carries it (one level). */
export async function replyTarget(messages: MessagesRepo, botId: string, chatId: number, messageId: number | undefined, field = 'reply_to_message_id'): Promise<Message | undefined> {
  if (messageId === undefined) return undefined;
  const stored = await messages.find(botId, chatId, messageId);
  if (!stored) throw refused(field, 'MESSAGE_NOT_FOUND', 'message to be replied not found');
  return contentOf(stored) ? { ...fromWireMessage(stored.message), replyToMessage: undefined } : undefined;
}

/** A stored message as it is returned now: its reply_to_message as that message is now (gone when deleted). */
export async function withReplyTo(messages: MessagesRepo, botId: string, m: Message): Promise<Message> {
  if (m.replyToMessageId === undefined || !m.chat) return { ...m, replyToMessage: undefined };
  const stored = await messages.find(botId, m.chat.id, m.replyToMessageId);
  return { ...m, replyToMessage: contentOf(stored) ? { ...fromWireMessage(stored!.message), replyToMessage: undefined } : undefined };
}
