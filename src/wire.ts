/**
 * Messages as they are stored and sent on the JSON wire (snake_case, as webhook
 * receivers get them) ⇄ the generated message types the core works with. A leaf: the
 * domain, the dispatcher and the Telegram mappers (src/telegram/) all read it.
 */
import crypto from 'node:crypto';
import { constraintsOf } from './gen/constraints.js';
import { SentMessage } from './gen/botplatform/v1/internal_service.js';
import { CallbackQuery, InlineQuery, MessageEntity, MessageOrigin, ReplyMarkup, type Chat, type File, type Message, type Update, type User } from './gen/botplatform/v1/update.js';

/** Bots' user ids as derived (a SHA-256 each), the latest few thousand bots'. */
const userIds = new Map<string, number>();
const USER_IDS_KEPT = 4096;

/** The numeric user id a bot's messages carry in from.id (Telegram's getMe id), derived from its opaque id. */
export function botUserId(botId: string): number {
  let id = userIds.get(botId);
  if (id === undefined) {
    id = 2 ** 52 + parseInt(crypto.createHash('sha256').update(botId).digest('hex').slice(0, 13), 16);
    if (userIds.size >= USER_IDS_KEPT) userIds.delete(userIds.keys().next().value!);
    userIds.set(botId, id);
  }
  return id;
}

export type WireMessage = Record<string, unknown>;

function wireUser(u: User): Record<string, unknown> {
  return {
    id: u.id,
    is_bot: u.isBot,
    ...(u.username !== undefined ? { username: u.username } : {}),
    ...(u.firstName !== undefined ? { first_name: u.firstName } : {}),
  };
}

/** A file as it appears in a message (no download URL). */
export function wireFile(f: File): Record<string, unknown> {
  return {
    file_id: f.fileId,
    file_unique_id: f.fileUniqueId,
    file_name: f.fileName,
    file_size: f.fileSize,
    mime_type: f.mimeType,
    checksum: f.checksum,
    ...(f.width !== undefined ? { width: f.width } : {}),
    ...(f.height !== undefined ? { height: f.height } : {}),
  };
}

/** A chat as it appears in a message: its id and type, and the names it came with. */
function wireChat(c: Chat | undefined): Record<string, unknown> {
  return {
    id: c?.id ?? 0,
    type: c?.type ?? 'private',
    ...(c?.title !== undefined ? { title: c.title } : {}),
    ...(c?.username !== undefined ? { username: c.username } : {}),
    ...(c?.firstName !== undefined ? { first_name: c.firstName } : {}),
    ...(c?.lastName !== undefined ? { last_name: c.lastName } : {}),
  };
}

function fromWireChat(w: Wire<Chat> | undefined): Chat {
  return { id: w?.id ?? 0, type: w?.type ?? '', title: w?.title, username: w?.username, firstName: w?.first_name, lastName: w?.last_name };
}

function fromWireFile(w: Wire<File> | undefined): File | undefined {
  if (!w) return undefined;
  return {
    fileId: w.file_id ?? '',
    fileUniqueId: w.file_unique_id ?? '',
    fileName: w.file_name ?? '',
    fileSize: w.file_size ?? 0,
    mimeType: w.mime_type ?? '',
    checksum: w.checksum ?? '',
    width: w.width,
    height: w.height,
  };
}

/**
 * Plain nested data (entities, reply markup, queries) in its wire spelling: keys in
 * snake_case, and what Telegram leaves out left out (undefined, false, empty lists).
 */
function toWireData(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(toWireData);
  if (v === null || typeof v !== 'object' || v instanceof Date) return v;
  const out: Record<string, unknown> = {};
  for (const [k, item] of Object.entries(v)) {
    if (item === undefined || item === false || (Array.isArray(item) && item.length === 0)) continue;
    out[k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = toWireData(item);
  }
  return out;
}

/** A generated property name in the protos' (and the wire's) spelling: replyToMessageId → reply_to_message_id. */
export type Snake<S extends string> = S extends `${infer H}${infer T}` ? `${H extends Lowercase<H> ? H : `_${Lowercase<H>}`}${Snake<T>}` : S;

/**
 * A generated message type as it is stored and sent on the JSON wire: the same fields in
 * snake_case, each possibly left out (the writers here leave out what Telegram leaves out).
 */
export type Wire<T> = T extends Date ? T
  : T extends readonly (infer U)[] ? Wire<U>[]
  : T extends object ? { [K in keyof T & string as Snake<K>]?: Wire<T[K]> }
  : T;

/** Wire data back in the generated types' spelling (camelCase keys); the type's fromPartial fills what was left out. */
function fromWireData<T>(v: Wire<T>): T {
  const convert = (x: unknown): unknown => {
    if (Array.isArray(x)) return x.map(convert);
    if (x === null || typeof x !== 'object') return x;
    const out: Record<string, unknown> = {};
    for (const [k, item] of Object.entries(x)) out[k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())] = convert(item);
    return out;
  };
  return convert(v) as T;
}

const fromWireEntities = (w: Wire<MessageEntity>[] | undefined): MessageEntity[] =>
  (w ?? []).map((e) => MessageEntity.fromPartial(fromWireData<MessageEntity>(e)));
const fromWireMarkup = (w: Wire<ReplyMarkup> | undefined): ReplyMarkup | undefined =>
  (w ? ReplyMarkup.fromPartial(fromWireData<ReplyMarkup>(w)) : undefined);

export function toWireMessage(m: Message): WireMessage {
  return {
    message_id: m.messageId,
    date: m.date,
    chat: wireChat(m.chat),
    ...(m.from ? { from: wireUser(m.from) } : {}),
    ...(m.text !== undefined ? { text: m.text } : {}),
    ...(m.replyToMessageId !== undefined ? { reply_to_message_id: m.replyToMessageId } : {}),
    ...(m.photo ? { photo: wireFile(m.photo) } : {}),
    ...(m.document ? { document: wireFile(m.document) } : {}),
    ...(m.caption !== undefined ? { caption: m.caption } : {}),
    ...(m.entities?.length ? { entities: toWireData(m.entities) } : {}),
    ...(m.captionEntities?.length ? { caption_entities: toWireData(m.captionEntities) } : {}),
    ...(m.replyMarkup ? { reply_markup: toWireData(m.replyMarkup) } : {}),
    ...(m.editDate !== undefined ? { edit_date: m.editDate } : {}),
    ...(m.replyToMessage ? { reply_to_message: toWireMessage({ ...m.replyToMessage, replyToMessage: undefined }) } : {}),
    ...(m.mediaGroupId !== undefined ? { media_group_id: m.mediaGroupId } : {}),
    ...(m.forwardOrigin ? { forward_origin: toWireData(m.forwardOrigin) } : {}),
  };
}

/** A message as stored and sent (wire JSON) as the generated type. */
export function fromWireMessage(w: Wire<Message>): Message {
  return {
    messageId: w.message_id ?? 0,
    date: w.date ?? 0,
    chat: fromWireChat(w.chat),
    from: w.from ? { id: w.from.id ?? 0, isBot: w.from.is_bot ?? false, username: w.from.username, firstName: w.from.first_name } : undefined,
    text: w.text,
    replyToMessageId: w.reply_to_message_id,
    photo: fromWireFile(w.photo),
    document: fromWireFile(w.document),
    caption: w.caption,
    entities: fromWireEntities(w.entities),
    captionEntities: fromWireEntities(w.caption_entities),
    replyMarkup: fromWireMarkup(w.reply_markup),
    editDate: w.edit_date,
    replyToMessage: w.reply_to_message ? fromWireMessage(w.reply_to_message) : undefined,
    mediaGroupId: w.media_group_id,
    forwardOrigin: w.forward_origin ? MessageOrigin.fromPartial(fromWireData<MessageOrigin>(w.forward_origin)) : undefined,
  };
}

/** A callback query as stored and sent on the JSON wire (its message is already wire JSON: as stored). */
export function toWireCallbackQuery(q: Omit<CallbackQuery, 'message'>, message: WireMessage): Record<string, unknown> {
  return {
    id: q.id,
    from: q.from ? wireUser(q.from) : undefined,
    message,
    chat_instance: q.chatInstance,
    ...(q.data !== undefined ? { data: q.data } : {}),
  };
}

/** An inline query as stored and sent on the JSON wire. */
export function toWireInlineQuery(q: InlineQuery): Record<string, unknown> {
  return {
    id: q.id,
    from: q.from ? wireUser(q.from) : undefined,
    query: q.query,
    offset: q.offset,
    ...(q.chatType !== undefined ? { chat_type: q.chatType } : {}),
  };
}

/** A callback query as stored (wire JSON) as the generated type. */
function fromWireCallbackQuery(w: Wire<CallbackQuery>): CallbackQuery {
  const { message, ...rest } = w;
  return CallbackQuery.fromPartial({ ...fromWireData<CallbackQuery>(rest), message: message ? fromWireMessage(message) : undefined });
}

/** An inline query as stored (wire JSON) as the generated type. */
function fromWireInlineQuery(w: Wire<InlineQuery>): InlineQuery {
  return InlineQuery.fromPartial(fromWireData<InlineQuery>(w));
}

/** One event of the outbound feed (internal_service.proto's SentMessage, without its place and bot). */
export type FeedEvent = Omit<SentMessage, 'partition' | 'seq' | 'botId'>;

/**
 * A feed row's value (the bus topic botplatform.messages carries the same JSON): the bot,
 * and exactly one event in its wire spelling — {"bot_id", "message"} for a sent message,
 * {"bot_id", "edited_message"}, {"bot_id", "deleted_messages"}...
 */
export type WireFeedValue = { bot_id: string } & Wire<FeedEvent>;

/** An event as the feed stores it: exactly one of its fields, in its wire spelling. */
export function toWireFeedEvent(e: Partial<FeedEvent>): Wire<FeedEvent> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e)) {
    if (v === undefined) continue;
    out[k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = k === 'message' || k === 'editedMessage' ? toWireMessage(v as Message) : toWireData(v);
  }
  return out as Wire<FeedEvent>;
}

/** A feed row's event back as the generated type. */
export function fromWireFeedEvent(w: Wire<FeedEvent>): FeedEvent {
  const { message, edited_message: edited, ...rest } = w;
  const { partition: _p, seq: _s, botId: _b, ...others } = SentMessage.fromPartial(fromWireData<Partial<SentMessage>>(rest as Wire<Partial<SentMessage>>));
  return {
    ...others,
    message: message ? fromWireMessage(message) : undefined,
    editedMessage: edited ? fromWireMessage(edited) : undefined,
  };
}

/** A stored update (its kind and wire message) as the generated Update. */
export function toUpdateMessage(u: { updateId: number; updateSeq: number; kind: string; message: WireMessage }): Update {
  // The stored JSON is the wire form of the kind's type (what the writers here wrote).
  const message = u.kind === 'message' || u.kind === 'edited_message' ? fromWireMessage(u.message as Wire<Message>) : undefined;
  return {
    updateId: u.updateId,
    updateSeq: u.updateSeq,
    message: u.kind === 'message' ? message : undefined,
    editedMessage: u.kind === 'edited_message' ? message : undefined,
    callbackQuery: u.kind === 'callback_query' ? fromWireCallbackQuery(u.message as Wire<CallbackQuery>) : undefined,
    inlineQuery: u.kind === 'inline_query' ? fromWireInlineQuery(u.message as Wire<InlineQuery>) : undefined,
  };
}


/** The update kinds a bot may ask for: the allowed_values of GetUpdatesRequest.allowed_updates (SetWebhookRequest's and SetBotWebhookRequest's are the same). */
export const UPDATE_KINDS = constraintsOf('botplatform.v1.GetUpdatesRequest', 'allowed_updates').allowedValues;
