/**
 * Callback and inline queries: the only module that writes the queries table. Ingest
 * writes a query with its update (units.ts); an answer marks it answered in the unit
 * that puts the answer on the outbound feed (units.ts's feedEvents). Every method takes
 * the caller's transaction, when it has one, as its last argument.
 */
import { padded, type Db, type Tx, type Writer } from './db.js';
import { marks } from './statement-texts.js';

export type QueryKind = 'callback_query' | 'inline_query';

/** A query a bot was given. */
export interface StoredQuery {
  botId: string;
  id: string;
  kind: QueryKind;
  /** callback_query: the chat and message whose button was pressed. */
  chatId: number | null;
  messageId: number | null;
  /** Who pressed or typed. */
  userId: number;
  createdAt: number;
  answeredAt: number | null;
}

interface QueryRow {
  kind: string; chat_id: number | string | null; message_id: number | string | null; user_id: number | string;
  created_at: number | string; answered_at: number | string | null;
}

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

const SQL = {
  find: 'SELECT kind, chat_id, message_id, user_id, created_at, answered_at FROM queries WHERE bot_id = ? AND id = ? LIMIT 1',
  /** Which of `n` ids the bot already has (lists padded to a power of two). */
  taken: (n: number) => `SELECT id FROM queries WHERE bot_id = ? AND id IN (${marks(n)})`,
  /** An answer: only the first, and only in time (a concurrent answer matches no row). */
  answer: 'UPDATE queries SET answered_at = ? WHERE bot_id = ? AND id = ? AND kind = ? AND answered_at IS NULL AND created_at >= ?',
  purge: 'DELETE FROM queries WHERE created_at < ?',
};

const COLUMNS = ['bot_id', 'id', 'kind', 'chat_id', 'message_id', 'user_id', 'created_at'] as const;

export function createQueriesRepo(db: Db) {
  const { sql } = db;
  const on = (tx?: Tx) => tx ?? sql;
  return {
    async find(botId: string, id: string, tx?: Tx): Promise<StoredQuery | undefined> {
      const r = await on(tx).one<QueryRow>(SQL.find, [botId, id]);
      return r && {
        botId, id, kind: r.kind as QueryKind, chatId: num(r.chat_id), messageId: num(r.message_id), userId: Number(r.user_id),
        createdAt: Number(r.created_at), answeredAt: num(r.answered_at),
      };
    },

    /** The ids among `ids` the bot already has a query with. */
    async taken(botId: string, ids: string[], tx?: Tx): Promise<Set<string>> {
      const list = padded(sql, [...new Set(ids)]);
      if (list.length === 0) return new Set();
      const rows = await on(tx).all<{ id: string }>(SQL.taken(list.length), [botId, ...list]);
      return new Set(rows.map((r) => r.id));
    },

    /** Records queries given to bots, in the caller's unit (an id the bot already has keeps its first query). */
    insert(queries: Omit<StoredQuery, 'answeredAt'>[], w: Writer): void {
      if (queries.length === 0) return;
      w.insert('queries', COLUMNS, queries.map((q) => [q.botId, q.id, q.kind, q.chatId, q.messageId, q.userId, q.createdAt]), { keys: ['bot_id', 'id'] });
    },

    /** Marks the query answered, in the caller's unit, if it was not yet and was made at or after `notBefore`: whether it did. */
    async answer(botId: string, id: string, kind: QueryKind, notBefore: number, now: number, w: Writer): Promise<boolean> {
      return (await w.run(SQL.answer, [now, botId, id, kind, notBefore])) > 0;
    },

    /** Forgets queries made before `before`. */
    async purgeOlderThan(before: number): Promise<number> {
      return sql.run(SQL.purge, [before]);
    },
  };
}

export type QueriesRepo = ReturnType<typeof createQueriesRepo>;
