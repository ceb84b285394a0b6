/**
 * Chats and messages, and the only module that writes them: which chats a bot may
 * write to (and the names they came with), the messages of its chats either way (to
 * reply to, edit, delete, copy or forward), and sent messages. Sending (with the bot's
 * message counter and the outbox message that announces it), ingest (which records the
 * chats and messages updates bring), and an edit's or a delete's write with the feed
 * event announcing it are units of work (units.ts). Every method takes the caller's
 * transaction, when it has one, as its last argument.
 */
import { marks } from './statement-texts.js';
import { padded, pageOf, type Db, type Tx, type Writer } from './db.js';

/** A chat's names, as its latest message gave them (Telegram's Chat fields). */
export interface ChatNames {
  title?: string;
  username?: string;
  firstName?: string;
  lastName?: string;
}

/** A chat a bot has been written to from, as of `at`, with the names it came with. */
export interface ChatSeen extends ChatNames {
  botId: string;
  chatId: number;
  type: string;
  at: number;
}

/** A chat of a bot, as recorded. */
export interface ChatRecord extends ChatNames {
  type: string;
}

/** A message a bot received (an update): one it may reply to, forward or copy. */
export interface InboundMessage {
  botId: string;
  chatId: number;
  messageId: number;
  at: number;
  /** The message as on the JSON wire. */
  message: Record<string, unknown>;
}

/** A stored message of a bot's chat, either way. */
export interface StoredMessage {
  messageId: number;
  /** Whether the bot sent it. */
  outbound: boolean;
  /** As on the JSON wire. */
  message: Record<string, unknown>;
  createdAt: number;
}

/** The hot reads. */
const SQL = {
  chatType: 'SELECT type FROM chats WHERE bot_id = ? AND chat_id = ? LIMIT 1',
  find: 'SELECT message_id, outbound, payload, created_at FROM messages WHERE bot_id = ? AND chat_id = ? AND message_id = ? LIMIT 1',
  findMany: (n: number) => `SELECT message_id, outbound, payload, created_at FROM messages WHERE bot_id = ? AND chat_id = ? AND message_id IN (${marks(n)})`,
  chat: 'SELECT type, title, username, first_name, last_name FROM chats WHERE bot_id = ? AND chat_id = ? LIMIT 1',
  chatsOf: (n: number) => `SELECT chat_id, type, title, username, first_name, last_name FROM chats WHERE bot_id = ? AND chat_id IN (${marks(n)})`,
  replace: 'UPDATE messages SET payload = ? WHERE bot_id = ? AND chat_id = ? AND message_id = ?',
  remove: (n: number) => `DELETE FROM messages WHERE bot_id = ? AND chat_id = ? AND message_id IN (${marks(n)})`,
  replaceInbound: 'UPDATE messages SET payload = ? WHERE bot_id = ? AND chat_id = ? AND message_id = ? AND outbound = 0',
};

type MessageRow = { message_id: number | string; outbound: number | boolean; payload: string | null; created_at: number | string };
const storedOf = (row: MessageRow): StoredMessage => ({
  messageId: Number(row.message_id),
  outbound: Boolean(row.outbound),
  message: row.payload ? JSON.parse(row.payload) as Record<string, unknown> : {},
  createdAt: Number(row.created_at),
});
const nameOrUndefined = (v: string | null) => v ?? undefined;
type ChatRow = { type: string; title: string | null; username: string | null; first_name: string | null; last_name: string | null };
const chatRecordOf = (row: ChatRow): ChatRecord => ({
  type: row.type, title: nameOrUndefined(row.title), username: nameOrUndefined(row.username),
  firstName: nameOrUndefined(row.first_name), lastName: nameOrUndefined(row.last_name),
});

/** Chats in key order, so concurrent writers (MySQL) lock chat rows in the same order. */
const chatRows = (chats: ChatSeen[]) => [...chats].sort((a, b) => a.botId.localeCompare(b.botId) || a.chatId - b.chatId)
  .map((c) => [c.botId, c.chatId, c.type, c.title ?? null, c.username ?? null, c.firstName ?? null, c.lastName ?? null, c.at, c.at]);
const CHAT_COLUMNS = ['bot_id', 'chat_id', 'type', 'title', 'username', 'first_name', 'last_name', 'created_at', 'updated_at'] as const;
/** What a chat's latest message says of it replaces what an earlier one said. */
const CHAT_SET = ['type', 'title', 'username', 'first_name', 'last_name', 'updated_at'] as const;
const INBOUND_COLUMNS = ['bot_id', 'chat_id', 'message_id', 'outbound', 'payload', 'created_at'] as const;

/** A message a bot sent, with the id it got. */
export interface SentMessage {
  botId: string;
  chatId: number;
  messageId: number;
  /** The message as on the JSON wire, as JSON (made once: stored, and carried by the bus and the feed). */
  json: string;
}

const SENT_COLUMNS = ['bot_id', 'chat_id', 'message_id', 'outbound', 'payload', 'created_at'] as const;
const sentRow = (m: SentMessage, now: number) => [m.botId, m.chatId, m.messageId, 1, m.json, now];

export function createMessagesRepo(db: Db) {
  const { sql, knex } = db;
  return {
    /** The chat's type, when it has written to the bot; else undefined. */
    async chatType(botId: string, chatId: number, tx?: Tx): Promise<string | undefined> {
      return (await (tx ?? sql).one<{ type: string }>(SQL.chatType, [botId, chatId]))?.type;
    },

    /** The chat with its names, when it has written to the bot; else undefined. */
    async chat(botId: string, chatId: number, tx?: Tx): Promise<ChatRecord | undefined> {
      const row = await (tx ?? sql).one<ChatRow>(SQL.chat, [botId, chatId]);
      return row && chatRecordOf(row);
    },

    /**
     * The chats of the sends (each a bot and a chat) that have written to their bots, with
     * their names, by bot and chat id: read in the unit `w`, held back to go with its next
     * statement (MySQL: in its round trip), a statement per bot.
     */
    async chatsOf(sends: readonly { botId: string; chatId: number }[], w: Writer): Promise<Map<string, Map<number, ChatRecord>>> {
      const byBot = new Map<string, Set<number>>();
      for (const s of sends) {
        const ids = byBot.get(s.botId);
        if (ids) ids.add(s.chatId);
        else byBot.set(s.botId, new Set([s.chatId]));
      }
      const reads = [...byBot].map(async ([botId, ids]) => {
        const list = padded(w, [...ids]);
        const rows = await w.allLater<ChatRow & { chat_id: number | string }>(SQL.chatsOf(list.length), [botId, ...list]);
        return [botId, new Map(rows.map((r) => [Number(r.chat_id), chatRecordOf(r)]))] as const;
      });
      return new Map(await Promise.all(reads));
    },

    /**
     * One page of the messages the bot sent to a chat, newest (highest message id) first,
     * as stored now (an edit rewrites a message's payload; a deleted message is gone),
     * and how many there are in all.
     */
    async listSent(botId: string, chatId: number, page: number, limit: number, tx?: Tx): Promise<{ items: Record<string, unknown>[]; total: number }> {
      const where = () => knex('messages').where({ bot_id: botId, chat_id: chatId, outbound: 1 });
      const { rows, total } = await pageOf<{ payload: string | null }>(tx ?? sql, knex, where, (b) => b.select('payload').orderBy('message_id', 'desc'), page, limit);
      return { items: rows.map((r) => (r.payload ? JSON.parse(r.payload) as Record<string, unknown> : {})), total };
    },

    /** A message of the bot's chat, either way, as stored (inbound ones recorded before their payloads were kept have an empty one). */
    async find(botId: string, chatId: number, messageId: number, tx?: Tx): Promise<StoredMessage | undefined> {
      const row = await (tx ?? sql).one<MessageRow>(SQL.find, [botId, chatId, messageId]);
      return row ? storedOf(row) : undefined;
    },

    /** The messages of the bot's chat among `messageIds` (those not there left out), in no particular order. */
    async findMany(botId: string, chatId: number, messageIds: readonly number[], tx?: Tx): Promise<StoredMessage[]> {
      if (messageIds.length === 0) return [];
      const on = tx ?? sql;
      const ids = padded(on, [...new Set(messageIds)]);
      return (await on.all<MessageRow>(SQL.findMany(ids.length), [botId, chatId, ...ids])).map(storedOf);
    },

    /** Records chats (new ones, or their type and names as of now), in the caller's unit, in key order so concurrent writers lock chat rows in the same order. */
    upsertChats(chats: ChatSeen[], w: Writer): void {
      w.insert('chats', CHAT_COLUMNS, chatRows(chats), { keys: ['bot_id', 'chat_id'], set: CHAT_SET });
    },

    /** A message of the bot's chat as it is after an edit, in the caller's unit: false when it is no longer there (deleted meanwhile). */
    async replace(botId: string, chatId: number, messageId: number, message: Record<string, unknown>, w: Writer): Promise<boolean> {
      return (await w.run(SQL.replace, [JSON.stringify(message), botId, chatId, messageId])) > 0;
    },

    /** Deletes messages of the bot's chat, in the caller's unit. */
    remove(botId: string, chatId: number, messageIds: readonly number[], w: Writer): void {
      if (messageIds.length === 0) return;
      const ids = padded(w, [...new Set(messageIds)]);
      w.queue(SQL.remove(ids.length), [botId, chatId, ...ids]);
    },

    /** Records received messages (ones already recorded stay as they are), in the caller's unit. */
    insertInbound(messages: InboundMessage[], w: Writer): void {
      w.insert('messages', INBOUND_COLUMNS, messages.map((m) => [m.botId, m.chatId, m.messageId, 0, JSON.stringify(m.message), m.at]), { keys: ['bot_id', 'chat_id', 'message_id'] });
    },

    /**
     * Received messages edited by their senders: each stored copy (an inbound message of
     * the bot's chat) replaced by its edited version, in the caller's unit.
     */
    replaceInbound(edits: InboundMessage[], w: Writer): void {
      for (const m of edits) w.queue(SQL.replaceInbound, [JSON.stringify(m.message), m.botId, m.chatId, m.messageId]);
    },

    /** Messages bots sent, in the caller's unit. */
    insertSent(sent: SentMessage[], now: number, w: Writer): void {
      w.insert('messages', SENT_COLUMNS, sent.map((m) => sentRow(m, now)));
    },
  };
}

export type MessagesRepo = ReturnType<typeof createMessagesRepo>;
