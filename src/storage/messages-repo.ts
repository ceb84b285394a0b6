/**
 * Chats and messages, and the only module that writes them: which chats a bot may
 * write to, the ids of messages it may reply to, and sent messages. Sending (with
 * the bot's message counter and the outbox message that announces it) and ingest
 * (which records the chats and messages updates bring) are units of work
 * (units.ts). Every method takes the caller's transaction, when it has one, as its
 * last argument.
 */
import { mysqlReaderOf, readerOf, type Db, type MysqlWriter, type SqliteWriter, type Tx } from './db.js';

/** A chat a bot has been written to from, as of `at`. */
export interface ChatSeen {
  botId: string;
  chatId: number;
  type: string;
  at: number;
}

/** A message a bot received (an update): one it may reply to. */
export interface InboundMessage {
  botId: string;
  chatId: number;
  messageId: number;
  at: number;
}

/** The hot reads outside a transaction, past knex (db.ts's SqliteReader and MysqlReader). */
const SQL = {
  chatType: 'SELECT type FROM chats WHERE bot_id = ? AND chat_id = ? LIMIT 1',
  messageExists: 'SELECT message_id FROM messages WHERE bot_id = ? AND chat_id = ? AND message_id = ? LIMIT 1',
};

/** Chats in key order, so concurrent writers (MySQL) lock chat rows in the same order. */
const chatRows = (chats: ChatSeen[]) => chats.map((c) => ({ bot_id: c.botId, chat_id: c.chatId, type: c.type, created_at: c.at, updated_at: c.at }))
  .sort((a, b) => a.bot_id.localeCompare(b.bot_id) || a.chat_id - b.chat_id);
const CHAT_COLUMNS = ['bot_id', 'chat_id', 'type', 'created_at', 'updated_at'] as const;

/** A message a bot sent, with the id it got. */
export interface SentMessage {
  botId: string;
  chatId: number;
  messageId: number;
  message: Record<string, unknown>;
}

const SENT_COLUMNS = ['bot_id', 'chat_id', 'message_id', 'outbound', 'payload', 'created_at'] as const;
const sentRow = (m: SentMessage, now: number) => [m.botId, m.chatId, m.messageId, 1, JSON.stringify(m.message), now];

export function createMessagesRepo(db: Db) {
  const reader = readerOf(db);
  const mysqlReader = mysqlReaderOf(db);
  return {
    /** The chat's type, when it has written to the bot; else undefined. */
    async chatType(botId: string, chatId: number, tx?: Tx): Promise<string | undefined> {
      if (!tx && reader) return reader.one<{ type: string }>(SQL.chatType, botId, chatId)?.type;
      if (!tx && mysqlReader) return (await mysqlReader.one<{ type: string }>(SQL.chatType, botId, chatId))?.type;
      const row = await (tx ?? db)('chats').where({ bot_id: botId, chat_id: chatId }).first('type');
      return row?.type;
    },

    async messageExists(botId: string, chatId: number, messageId: number, tx?: Tx): Promise<boolean> {
      if (!tx && reader) return reader.one(SQL.messageExists, botId, chatId, messageId) !== undefined;
      if (!tx && mysqlReader) return (await mysqlReader.one(SQL.messageExists, botId, chatId, messageId)) !== undefined;
      return Boolean(await (tx ?? db)('messages').where({ bot_id: botId, chat_id: chatId, message_id: messageId }).first('message_id'));
    },

    /**
     * Records chats (new ones, or their type as of now), in key order so concurrent
     * writers lock chat rows in the same order; one statement per 200.
     */
    async upsertChats(chats: ChatSeen[], tx?: Tx): Promise<void> {
      const rows = chatRows(chats);
      for (let k = 0; k < rows.length; k += 200) {
        await (tx ?? db)('chats').insert(rows.slice(k, k + 200)).onConflict(['bot_id', 'chat_id']).merge(['type', 'updated_at']);
      }
    },

    /** Records received messages (ones already recorded stay as they are); one statement per 200. */
    async insertInbound(messages: InboundMessage[], tx?: Tx): Promise<void> {
      const rows = messages.map((m) => ({ bot_id: m.botId, chat_id: m.chatId, message_id: m.messageId, outbound: false, created_at: m.at }));
      for (let k = 0; k < rows.length; k += 200) {
        await (tx ?? db)('messages').insert(rows.slice(k, k + 200)).onConflict(['bot_id', 'chat_id', 'message_id']).ignore();
      }
    },

    /** upsertChats and insertInbound as statements of a synchronous SQLite unit of work (units.ts). */
    sqlite: {
      upsertChats(w: SqliteWriter, chats: ChatSeen[]): void {
        w.insert('chats', CHAT_COLUMNS, chatRows(chats).map((r) => CHAT_COLUMNS.map((c) => r[c])),
          'ON CONFLICT (bot_id, chat_id) DO UPDATE SET type = excluded.type, updated_at = excluded.updated_at');
      },
      insertSent(w: SqliteWriter, sent: SentMessage[], now: number): void {
        w.insert('messages', SENT_COLUMNS, sent.map((m) => sentRow(m, now)));
      },
      insertInbound(w: SqliteWriter, messages: InboundMessage[]): void {
        w.insert('messages', ['bot_id', 'chat_id', 'message_id', 'outbound', 'created_at'],
          messages.map((m) => [m.botId, m.chatId, m.messageId, 0, m.at]), 'ON CONFLICT (bot_id, chat_id, message_id) DO NOTHING');
      },
    },

    /** insertSentMany as a statement of a MySQL unit of work (units.ts). */
    mysql: {
      insertSent(w: MysqlWriter, sent: SentMessage[], now: number): void {
        w.insert('messages', SENT_COLUMNS, sent.map((m) => sentRow(m, now)));
      },
    },

    /** Messages bots sent (one statement per 200). */
    async insertSentMany(sent: SentMessage[], now: number, tx?: Tx): Promise<void> {
      const rows = sent.map((m) => ({
        bot_id: m.botId, chat_id: m.chatId, message_id: m.messageId, outbound: true, payload: JSON.stringify(m.message), created_at: now,
      }));
      for (let k = 0; k < rows.length; k += 200) await (tx ?? db)('messages').insert(rows.slice(k, k + 200));
    },
  };
}

export type MessagesRepo = ReturnType<typeof createMessagesRepo>;
