/**
 * Telegram's Bot API types, a leaf at the edge: this platform's updates and messages in
 * Telegram's shape, for the Telegram-compatible surface: its getUpdates and method
 * results (gateway/runtime/telegram.ts) and the bodies of webhooks set through it (the
 * dispatcher), so a framework's webhook handler reads exactly what its getUpdates would.
 * Telegram names: `update_id` is the bot's update_seq, photos are PhotoSize arrays,
 * absent optional fields are left out. Takes the generated message types (a stored webhook body is read
 * back into them first).
 */
import { ApiError } from '../errors.js';
import type { InlineQueryResult, InlineQueryResultsButton } from '../gen/botplatform/v1/runtime_service.js';
import { MessageEntity as Entity, type CallbackQuery, type Chat, type File, type InlineQuery, type Message, type MessageEntity, type MessageOrigin, type Update, type User } from '../gen/botplatform/v1/update.js';
import { replyMarkupFromTelegram, telegramReplyMarkup } from '../messages/reply-markup.js';
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

/** A chat as Telegram's Chat: its id and type, and the names it has. */
export function tgChat(c: Chat | undefined): Obj | undefined {
  if (!c) return undefined;
  return compact({ id: c.id, type: c.type, title: c.title, username: c.username, first_name: c.firstName, last_name: c.lastName });
}

/** Where a forwarded message came from, as Telegram's MessageOrigin (MessageOriginUser or MessageOriginChat). */
function tgOrigin(o: MessageOrigin | undefined): Obj | undefined {
  if (!o) return undefined;
  return compact({ type: o.type, date: o.date, sender_user: tgUser(o.senderUser), sender_chat: tgChat(o.senderChat) });
}

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
    chat: tgChat(m.chat),
    date: m.date,
    forward_origin: tgOrigin(m.forwardOrigin),
    edit_date: m.editDate,
    media_group_id: m.mediaGroupId,
    reply_to_message: tgMessage(m.replyToMessage),
    text: m.text,
    entities: tgEntities(m.entities),
    caption: m.caption,
    caption_entities: tgEntities(m.captionEntities),
    // One size: the image as registered, its width and height read from its header (0 when unknown).
    photo: m.photo ? [{ ...tgFile(m.photo), width: m.photo.width ?? 0, height: m.photo.height ?? 0 }] : undefined,
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

/** A JSON parameter as Telegram takes it: the value, or its JSON text (forms, query strings, multipart fields). */
function json(value: unknown, field: string, what: string): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    throw ApiError.invalid(field, 'MALFORMED_JSON', `Can't parse JSON encoded ${what}`);
  }
}

const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** An optional string field of a Telegram object (a number or boolean is taken as its text, as td's JSON reader does). */
function str(o: Obj, name: string, field: string): string | undefined {
  const v = o[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw ApiError.invalid(`${field}.${name}`, 'INVALID_TYPE', `Field "${name}" must be of type String`);
}

/** Telegram's MessageEntity objects (entities, caption_entities) as the platform's. */
function entitiesFromTelegram(value: unknown, field: string): MessageEntity[] {
  const list = json(value, field, 'entities');
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) throw ApiError.invalid(field, 'INVALID_TYPE', 'Expected an Array of MessageEntity');
  return list.map((e, i) => {
    if (!isObject(e)) throw ApiError.invalid(`${field}[${i}]`, 'INVALID_TYPE', 'MessageEntity must be an Object');
    const user = isObject(e.user) ? { id: Number(e.user.id), isBot: Boolean(e.user.is_bot) } : undefined;
    return Entity.fromPartial({
      type: str(e, 'type', `${field}[${i}]`) ?? '', offset: Number(e.offset), length: Number(e.length), url: str(e, 'url', `${field}[${i}]`),
      user, language: str(e, 'language', `${field}[${i}]`), customEmojiId: str(e, 'custom_emoji_id', `${field}[${i}]`),
    });
  });
}

/**
 * answerInlineQuery's `results` (a JSON array, or its text) as the platform's results:
 * InlineQueryResultArticle, InlineQueryResultCachedPhoto (photo_file_id) and
 * InlineQueryResultCachedDocument (document_file_id), read as telegram-bot-api reads them
 * (Client.cpp get_inline_query_result: the legacy message_text of an article, thumb_url
 * for thumbnail_url). Results by URL and the other types are refused: the platform sends
 * only files its bots registered. The answer's own checks are the native method's.
 */
export function inlineResultsFromTelegram(value: unknown): InlineQueryResult[] {
  const list = json(value ?? [], 'results', 'inline query results');
  if (list === null) return [];
  if (!Array.isArray(list)) throw ApiError.invalid('results', 'INVALID_TYPE', 'Expected an Array of inline query results');
  return list.map((r, i) => {
    const at = `results[${i}]`;
    if (!isObject(r)) throw ApiError.invalid(at, 'INVALID_TYPE', "Can't parse inline query result: Inline query result must be an object");
    const type = (str(r, 'type', at) ?? '').toLowerCase();
    for (const byUrl of ['photo_url', 'document_url']) {
      if (r[byUrl] !== undefined && r[`${type}_file_id`] === undefined) {
        throw ApiError.invalid(`${at}.${byUrl}`, 'UNSUPPORTED', `results by URL are not served here: send ${type}_file_id, a file of the bot`);
      }
    }
    const content = isObject(r.input_message_content) ? r.input_message_content : undefined;
    const legacyText = type === 'article' && !content ? str(r, 'message_text', at) : undefined;
    const inputMessageContent = content
      ? { messageText: str(content, 'message_text', `${at}.input_message_content`) ?? '', parseMode: str(content, 'parse_mode', `${at}.input_message_content`), entities: entitiesFromTelegram(content.entities, `${at}.input_message_content.entities`) }
      : legacyText !== undefined
        ? { messageText: legacyText, parseMode: str(r, 'parse_mode', at), entities: entitiesFromTelegram(r.entities, `${at}.entities`) }
        : undefined;
    return {
      type,
      id: str(r, 'id', at) ?? '',
      title: str(r, 'title', at),
      description: str(r, 'description', at),
      inputMessageContent,
      replyMarkup: replyMarkupFromTelegram(r.reply_markup, `${at}.reply_markup`),
      url: r.hide_url === true ? undefined : str(r, 'url', at),
      thumbnailUrl: str(r, 'thumbnail_url', at) ?? str(r, 'thumb_url', at),
      photoFileId: type === 'photo' ? str(r, 'photo_file_id', at) : undefined,
      documentFileId: type === 'document' ? str(r, 'document_file_id', at) : undefined,
      caption: type === 'article' ? undefined : str(r, 'caption', at),
      parseMode: type === 'article' ? undefined : str(r, 'parse_mode', at),
      captionEntities: type === 'article' ? [] : entitiesFromTelegram(r.caption_entities, `${at}.caption_entities`),
    };
  });
}

/** answerInlineQuery's `button` (or the legacy switch_pm_text and switch_pm_parameter) as the platform's. */
export function inlineButtonFromTelegram(value: unknown, switchPmText: unknown, switchPmParameter: unknown): InlineQueryResultsButton | undefined {
  const b = json(value, 'button', 'inline query results button');
  if (b === undefined || b === null || b === '') {
    if (typeof switchPmText !== 'string' || switchPmText === '') return undefined;
    return { text: switchPmText, webApp: undefined, startParameter: typeof switchPmParameter === 'string' ? switchPmParameter : String(switchPmParameter ?? '') };
  }
  if (!isObject(b)) throw ApiError.invalid('button', 'INVALID_TYPE', 'InlineQueryResultsButton must be an Object');
  const webApp = isObject(b.web_app) ? { url: str(b.web_app, 'url', 'button.web_app') ?? '' } : undefined;
  return { text: str(b, 'text', 'button') ?? '', webApp, startParameter: str(b, 'start_parameter', 'button') };
}
