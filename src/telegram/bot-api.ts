/**
 * Telegram's Bot API types, a leaf at the edge: this platform's updates and messages in
 * Telegram's shape, for the Telegram-compatible surface: its getUpdates and method
 * results (gateway/runtime/telegram.ts) and the bodies of webhooks set through it (the
 * dispatcher), so a framework's webhook handler reads exactly what its getUpdates would.
 * Telegram names: `update_id` is the bot's update_seq, photos are PhotoSize arrays,
 * absent optional fields are left out. Takes the generated message types (a stored webhook body is read
 * back into them first).
 */
import type { CallbackQuery, File, InlineQuery, Message, MessageEntity, Update, User } from '../gen/botplatform/v1/update.js';
import { telegramReplyMarkup } from '../messages/reply-markup.js';
import { toUpdateMessage } from '../wire.js';

type Obj = Record<string, unknown>;

/** Drops undefined values (Telegram leaves absent optional fields out). */
export function compact(o: Obj): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}

export function tgUser(u: User | undefined): Obj | undefined {
  if (!u) return undefined;
  return compact({ id: u.id, is_bot: u.isBot, first_name: u.firstName ?? u.username ?? '', username: u.username });
}

const tgFile = (f: File) => compact({ file_id: f.fileId, file_unique_id: f.fileUniqueId, file_size: f.fileSize });

/** Entities in Telegram's shape (absent when there are none, as Telegram leaves them out). */
function tgEntities(list: MessageEntity[] | undefined): Obj[] | undefined {
  if (!list?.length) return undefined;
  return list.map((e) => compact({ type: e.type, offset: e.offset, length: e.length, url: e.url, user: tgUser(e.user), language: e.language, custom_emoji_id: e.customEmojiId }));
}

export function tgMessage(m: Message | undefined): Obj | undefined {
  if (!m) return undefined;
  return compact({
    message_id: m.messageId,
    from: tgUser(m.from),
    chat: m.chat ? { id: m.chat.id, type: m.chat.type } : undefined,
    date: m.date,
    edit_date: m.editDate,
    reply_to_message: tgMessage(m.replyToMessage),
    text: m.text,
    entities: tgEntities(m.entities),
    caption: m.caption,
    caption_entities: tgEntities(m.captionEntities),
    photo: m.photo ? [{ ...tgFile(m.photo), width: 0, height: 0 }] : undefined,
    document: m.document ? compact({ ...tgFile(m.document), file_name: m.document.fileName, mime_type: m.document.mimeType }) : undefined,
    // Only an inline keyboard is part of a message.
    reply_markup: m.replyMarkup?.inlineKeyboard.length ? telegramReplyMarkup(m.replyMarkup) : undefined,
  });
}

export function tgCallbackQuery(q: CallbackQuery | undefined): Obj | undefined {
  if (!q) return undefined;
  return compact({ id: q.id, from: tgUser(q.from), message: tgMessage(q.message), chat_instance: q.chatInstance, data: q.data });
}

export function tgInlineQuery(q: InlineQuery | undefined): Obj | undefined {
  if (!q) return undefined;
  return compact({ id: q.id, from: tgUser(q.from), query: q.query, offset: q.offset, chat_type: q.chatType });
}

/** An update as a Telegram Update. */
export function tgUpdate(u: Update): Obj {
  return compact({
    update_id: u.updateSeq,
    message: tgMessage(u.message),
    edited_message: tgMessage(u.editedMessage),
    callback_query: tgCallbackQuery(u.callbackQuery),
    inline_query: tgInlineQuery(u.inlineQuery),
  });
}

/** The kinds a native update's JSON may carry, in the order they are looked for. */
const KINDS = ['message', 'edited_message', 'callback_query', 'inline_query'] as const;

/** A stored webhook body (the native update's JSON) as the Telegram Update's JSON. */
export function telegramWebhookBody(payload: string): string {
  const u = JSON.parse(payload) as Record<string, unknown> & { update_id: number; update_seq: number };
  const kind = KINDS.find((k) => u[k] !== undefined) ?? 'message';
  return JSON.stringify(tgUpdate(toUpdateMessage({ updateId: u.update_id, updateSeq: u.update_seq, kind, message: (u[kind] ?? {}) as Record<string, unknown> })));
}
