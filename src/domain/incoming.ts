/**
 * What ingest checks of each kind of incoming update against what the platform knows,
 * and how it stores it (updates-service.ts's checkIngest runs it for IngestUpdates,
 * StreamIngestUpdates and the console's test tools alike):
 *
 * - message: a new message (its entities computed when none were given; a reply carries
 *   the message it answers, as stored, one level deep);
 * - edited_message: a message the bot received in that chat, as it is after the edit
 *   (edit_date defaults to now); the stored copy is replaced by it. The message may be
 *   one of the same batch, before the edit (then not stored yet: the batch's newest copy
 *   of it is what the edit, or a reply, names);
 * - callback_query: a press of a callback button of a message the bot sent, named by
 *   message_id and chat.id; the update carries the message as it is now (edited, or
 *   refused when deleted), data must be one of its buttons' callback_data; the id (a
 *   decimal string) and chat_instance (stable per bot and chat) are filled in when left
 *   empty;
 * - inline_query: for a bot with supports_inline_queries only; the id likewise.
 *
 * Queries are recorded with their updates, so the bot can answer them (queries-service.ts).
 */
import crypto from 'node:crypto';
import { ApiError } from '../errors.js';
import { constraintsOf } from '../gen/constraints.js';
import type { IncomingUpdate } from '../gen/botplatform/v1/internal_service.js';
import type { CallbackQuery, InlineQuery, Message, User } from '../gen/botplatform/v1/update.js';
import { incomingEntities } from '../messages/formatted.js';
import type { MessagesRepo, StoredMessage } from '../storage/messages-repo.js';
import type { QueriesRepo } from '../storage/queries-repo.js';
import type { NewUpdate } from '../storage/units.js';
import { fromWireMessage, toWireCallbackQuery, toWireInlineQuery, toWireMessage, type Wire } from '../wire.js';
import * as check from './validation.js';

const LIMITS = {
  user: {
    username: constraintsOf('botplatform.v1.User', 'username'),
    firstName: constraintsOf('botplatform.v1.User', 'first_name'),
  },
  chat: {
    title: constraintsOf('botplatform.v1.Chat', 'title'),
    username: constraintsOf('botplatform.v1.Chat', 'username'),
    firstName: constraintsOf('botplatform.v1.Chat', 'first_name'),
    lastName: constraintsOf('botplatform.v1.Chat', 'last_name'),
  },
  message: {
    text: constraintsOf('botplatform.v1.Message', 'text'),
    caption: constraintsOf('botplatform.v1.Message', 'caption'),
  },
  callback: {
    id: constraintsOf('botplatform.v1.CallbackQuery', 'id'),
    chatInstance: constraintsOf('botplatform.v1.CallbackQuery', 'chat_instance'),
  },
  inline: {
    id: constraintsOf('botplatform.v1.InlineQuery', 'id'),
    query: constraintsOf('botplatform.v1.InlineQuery', 'query'),
    offset: constraintsOf('botplatform.v1.InlineQuery', 'offset'),
  },
  idempotencyKey: constraintsOf('botplatform.v1.IncomingUpdate', 'idempotency_key'),
};

/** Telegram's InlineQuery.chat_type values. */
const CHAT_TYPES = ['sender', 'private', 'group', 'supergroup', 'channel'];
/** Telegram's limit of a button's callback_data, in bytes. */
const CALLBACK_DATA_BYTES = 64;

/** A query id as Telegram's look: a decimal integer (63 random bits), unique in practice. */
export function newQueryId(): string {
  return (crypto.randomBytes(8).readBigUInt64BE() >> 1n).toString();
}

/** Telegram's chat_instance: a signed decimal integer, the same for every query of one bot in one chat. */
export function chatInstanceOf(botId: string, chatId: number): string {
  return crypto.createHash('sha256').update(`${botId}/${chatId}`).digest().readBigInt64BE().toString();
}

/** The kind an incoming update is: the one field it sets, or undefined when it sets none or several. */
export function kindOf(u: IncomingUpdate): 'message' | 'edited_message' | 'callback_query' | 'inline_query' | undefined {
  const set = ([['message', u.message], ['edited_message', u.editedMessage], ['callback_query', u.callbackQuery], ['inline_query', u.inlineQuery]] as const)
    .filter(([, v]) => v !== undefined);
  return set.length === 1 ? set[0]![0] : undefined;
}

function checkUser(v: check.Violations, field: string, u: User | undefined) {
  if (!u || !u.id) v.add(`${field}.id`, 'REQUIRED', 'is required');
  check.optionalText(v, `${field}.username`, u?.username, LIMITS.user.username);
  check.optionalText(v, `${field}.first_name`, u?.firstName, LIMITS.user.firstName);
}

function checkMessage(v: check.Violations, field: string, m: Message) {
  if (!m.chat || !m.chat.id) v.add(`${field}.chat.id`, 'REQUIRED', 'is required');
  checkUser(v, `${field}.from`, m.from);
  const text = LIMITS.message.text;
  if (m.text !== undefined && check.safeText(v, `${field}.text`, m.text)
    && (check.charLength(m.text) < text.minLength || check.charLength(m.text) > text.maxLength)) {
    v.add(`${field}.text`, 'INVALID_LENGTH', `must be ${text.minLength} to ${text.maxLength} characters`);
  }
  check.optionalText(v, `${field}.caption`, m.caption, LIMITS.message.caption);
  check.safeText(v, `${field}.chat.type`, m.chat?.type);
  check.optionalText(v, `${field}.chat.title`, m.chat?.title, LIMITS.chat.title);
  check.optionalText(v, `${field}.chat.username`, m.chat?.username, LIMITS.chat.username);
  check.optionalText(v, `${field}.chat.first_name`, m.chat?.firstName, LIMITS.chat.firstName);
  check.optionalText(v, `${field}.chat.last_name`, m.chat?.lastName, LIMITS.chat.lastName);
}

/** A query id given by the messaging service: 1 to 64 printable ASCII characters (empty: the platform assigns one). */
function checkQueryId(v: check.Violations, field: string, id: string, limits: { maxLength: number; pattern?: RegExp }) {
  if (id === '') return;
  if (id.length > limits.maxLength || (limits.pattern && !limits.pattern.test(id))) {
    v.add(field, 'INVALID_FORMAT', `must be at most ${limits.maxLength} printable ASCII characters, without spaces`);
  }
}

function checkCallbackQuery(v: check.Violations, field: string, q: CallbackQuery) {
  checkQueryId(v, `${field}.id`, q.id, LIMITS.callback.id);
  checkUser(v, `${field}.from`, q.from);
  if (!q.message?.chat?.id) v.add(`${field}.message.chat.id`, 'REQUIRED', 'is required: the chat of the message whose button was pressed');
  if (!q.message || q.message.messageId < 1) v.add(`${field}.message.message_id`, 'REQUIRED', 'is required: the message whose button was pressed');
  if (!q.data) v.add(`${field}.data`, 'REQUIRED', "is required: the pressed button's callback_data");
  else if (Buffer.byteLength(q.data) > CALLBACK_DATA_BYTES) v.add(`${field}.data`, 'TOO_LONG', `must be at most ${CALLBACK_DATA_BYTES} bytes`);
  else check.safeText(v, `${field}.data`, q.data);
  checkQueryId(v, `${field}.chat_instance`, q.chatInstance, LIMITS.callback.chatInstance);
}

function checkInlineQuery(v: check.Violations, field: string, q: InlineQuery) {
  checkQueryId(v, `${field}.id`, q.id, LIMITS.inline.id);
  checkUser(v, `${field}.from`, q.from);
  check.optionalText(v, `${field}.query`, q.query, LIMITS.inline.query);
  check.optionalText(v, `${field}.offset`, q.offset, LIMITS.inline.offset);
  if (q.chatType !== undefined && !CHAT_TYPES.includes(q.chatType)) v.add(`${field}.chat_type`, 'INVALID_VALUE', `must be one of ${CHAT_TYPES.join(', ')}`);
}

/** Step 1: each update alone, with nothing read. */
export function checkShapes(v: check.Violations, updates: IncomingUpdate[]): void {
  updates.forEach((u, i) => {
    const at = `updates[${i}]`;
    if (!u.botId) v.add(`${at}.bot_id`, 'REQUIRED', 'is required');
    const kind = kindOf(u);
    if (!kind) v.add(at, 'INVALID_VALUE', 'needs exactly one of message, edited_message, callback_query and inline_query');
    if (u.message) checkMessage(v, `${at}.message`, u.message);
    if (u.editedMessage) {
      checkMessage(v, `${at}.edited_message`, u.editedMessage);
      if (u.editedMessage.messageId < 1) v.add(`${at}.edited_message.message_id`, 'REQUIRED', 'is required: the message that was edited');
    }
    if (u.callbackQuery) checkCallbackQuery(v, `${at}.callback_query`, u.callbackQuery);
    if (u.inlineQuery) checkInlineQuery(v, `${at}.inline_query`, u.inlineQuery);
    const key = LIMITS.idempotencyKey;
    if (u.idempotencyKey && check.charLength(u.idempotencyKey) > key.maxLength) {
      v.add(`${at}.idempotency_key`, 'INVALID_LENGTH', `must be at most ${key.maxLength} characters`);
    }
  });
}

/** The callback_data of every callback button of a message's current inline keyboard. */
function callbackData(stored: Record<string, unknown>): Set<string> {
  const rows = ((stored.reply_markup as Wire<{ inlineKeyboard: { buttons: { callbackData?: string }[] }[] }> | undefined)?.inline_keyboard ?? []);
  return new Set(rows.flatMap((r) => (r.buttons ?? []).flatMap((b) => (b.callback_data !== undefined ? [b.callback_data] : []))));
}

/** Whether a stored message is one an update can name: there (a deleted one is gone), with its body (inbound ones stored before bodies were kept have none). */
const present = (m: StoredMessage | undefined): m is StoredMessage => m !== undefined && Object.keys(m.message).length > 0;

export interface IncomingDeps {
  messages: Pick<MessagesRepo, 'find'>;
  queries: Pick<QueriesRepo, 'taken'>;
}

/**
 * Step 2, for updates of approved bots (`inline`: the bots with supports_inline_queries):
 * what each update names is checked against what is stored (INVALID_ARGUMENT naming the
 * field, FAILED_PRECONDITION for an inline query to a bot without inline mode), and the
 * updates are made what ingest stores, with `at` (unix seconds) as their default dates.
 */
export async function prepareIncoming(deps: IncomingDeps, updates: IncomingUpdate[], inline: (botId: string) => boolean, at: number): Promise<NewUpdate[]> {
  updates.forEach((u, i) => {
    if (u.inlineQuery && !inline(u.botId)) {
      throw ApiError.failedPrecondition(`updates[${i}].inline_query: the bot does not take inline queries (its supports_inline_queries is off)`);
    }
  });
  const v = new check.Violations();
  // Query ids the messaging service gave must be new to the bot (a retry with an idempotency key is answered as a duplicate).
  const given = new Map<string, { i: number; id: string; field: string }[]>();
  updates.forEach((u, i) => {
    const q = u.callbackQuery ?? u.inlineQuery;
    if (!q?.id || u.idempotencyKey) return;
    given.set(u.botId, [...(given.get(u.botId) ?? []), { i, id: q.id, field: `updates[${i}].${u.callbackQuery ? 'callback_query' : 'inline_query'}.id` }]);
  });
  // The messages named, those new messages reply to, and the bots' query ids given, read together (one round trip on MySQL).
  const [named, replied, taken] = await Promise.all([
    Promise.all(updates.map((u) => {
      const m = u.callbackQuery?.message ?? u.editedMessage;
      return u.callbackQuery || u.editedMessage ? deps.messages.find(u.botId, m!.chat!.id, m!.messageId) : undefined;
    })),
    Promise.all(updates.map((u) => (u.message?.replyToMessageId && u.message.chat
      ? deps.messages.find(u.botId, u.message.chat.id, u.message.replyToMessageId) : undefined))),
    Promise.all([...given].map(([botId, list]) => deps.queries.taken(botId, list.map((g) => g.id)))),
  ]);
  [...given.values()].forEach((list, b) => {
    const seen = new Set<string>();
    for (const g of list) {
      if (taken[b]!.has(g.id) || seen.has(g.id)) v.add(g.field, 'ALREADY_EXISTS', 'is the id of another query of the bot; leave it empty and the platform assigns one');
      seen.add(g.id);
    }
  });
  // The messages of this batch so far that carry their id, as they will be stored: an edit or a
  // reply later in the batch may name one (what was read above was read before the batch is written).
  const batch = new Map<string, StoredMessage>();
  const keyOf = (botId: string, chatId: number, messageId: number) => `${botId}/${chatId}/${messageId}`;
  const inBatch = (botId: string, m: { chat?: { id: number }; messageId: number } | undefined, id = m?.messageId) =>
    (m?.chat && id ? batch.get(keyOf(botId, m.chat.id, id)) : undefined);
  const items = updates.map((u, i): NewUpdate | undefined => {
    const base = { botId: u.botId, idempotencyKey: u.idempotencyKey || undefined };
    // The newest copy: an earlier update of the batch (a message, or an edit of it), else the stored one.
    const stored = (u.editedMessage && inBatch(u.botId, u.editedMessage)) || named[i];
    const item = prepareOne(u, i, stored);
    if (item && (item.kind === 'message' || item.kind === 'edited_message') && Number(item.message.message_id) > 0) {
      const chat = item.message.chat as { id: number };
      batch.set(keyOf(u.botId, chat.id, Number(item.message.message_id)), { messageId: Number(item.message.message_id), outbound: false, message: item.message, createdAt: at * 1000 });
    }
    return item;
  });
  v.throwIfAny();
  return items as NewUpdate[];

  function prepareOne(u: IncomingUpdate, i: number, stored: StoredMessage | undefined): NewUpdate | undefined {
    const base = { botId: u.botId, idempotencyKey: u.idempotencyKey || undefined };
    if (u.message) {
      const m = u.message;
      const field = `updates[${i}].message`;
      // Entities as Telegram gives them to bots: computed when the messaging service sent none.
      const entities = incomingEntities(m.text, m.entities, `${field}.entities`);
      const captionEntities = incomingEntities(m.caption, m.captionEntities, `${field}.caption_entities`);
      // A reply carries the message it answers as the bot's chat has it (one level), as Telegram's updates do.
      const repliedTo = inBatch(u.botId, m, m.replyToMessageId) ?? replied[i];
      const replyToMessage = present(repliedTo) ? { ...fromWireMessage(repliedTo.message), replyToMessage: undefined } : m.replyToMessage;
      return { ...base, kind: 'message', message: toWireMessage({ ...m, date: m.date || at, entities, captionEntities, replyToMessage }) };
    }
    if (u.editedMessage) {
      const m = u.editedMessage;
      const field = `updates[${i}].edited_message`;
      if (!present(stored) || stored.outbound) {
        v.add(`${field}.message_id`, 'MESSAGE_NOT_FOUND', 'message not found: it must be a message the bot received in this chat');
        return undefined;
      }
      const entities = incomingEntities(m.text, m.entities, `${field}.entities`);
      const captionEntities = incomingEntities(m.caption, m.captionEntities, `${field}.caption_entities`);
      const date = m.date || Number(stored.message.date) || at;
      return { ...base, kind: 'edited_message', message: toWireMessage({ ...m, date, editDate: m.editDate || at, entities, captionEntities }) };
    }
    if (u.callbackQuery) {
      const q = u.callbackQuery;
      const field = `updates[${i}].callback_query`;
      if (!present(stored) || !stored.outbound) {
        v.add(`${field}.message.message_id`, 'MESSAGE_NOT_FOUND', 'message not found: it must be a message the bot sent to this chat');
        return undefined;
      }
      if (!callbackData(stored.message).has(q.data!)) {
        v.add(`${field}.data`, 'BUTTON_NOT_FOUND', "is not the callback_data of any button of the message's inline keyboard");
        return undefined;
      }
      const chatId = q.message!.chat!.id;
      const id = q.id || newQueryId();
      return {
        ...base, kind: 'callback_query',
        message: toWireCallbackQuery({ ...q, id, chatInstance: q.chatInstance || chatInstanceOf(u.botId, chatId) }, stored.message),
        query: { id, chatId, messageId: q.message!.messageId, userId: q.from!.id },
      };
    }
    const q = u.inlineQuery!;
    const id = q.id || newQueryId();
    return { ...base, kind: 'inline_query', message: toWireInlineQuery({ ...q, id }), query: { id, chatId: null, messageId: null, userId: q.from!.id } };
  }
}
