/**
 * Updates, the platform-wide update id counter (id_counters) and the ingest
 * idempotency keys: the only module that writes those tables. Ingest itself, which
 * writes them together with bots, outbox, deliveries, chats and messages, is a unit
 * of work (units.ts). Every method takes the caller's transaction, when it has one,
 * as its last argument.
 */
import { exec, isDeadlockOrLockWait, literalInt, padded, type Db, type Tx, type Writer } from './db.js';
import { marks, powerOfTwoChunks } from './statement-texts.js';

/** Bots whose confirmed offset is remembered. */
const CONFIRMED_KEPT = 10_000;

export interface StoredUpdate {
  updateId: number;
  botId: string;
  updateSeq: number;
  kind: string;
  message: Record<string, unknown>;
  createdAt: number;
}

/** An ingest idempotency key as stored: the ids its update got, and when. */
export interface IngestKey {
  key: string;
  updateId: number;
  updateSeq: number;
  createdAt: number;
}

export interface UpdatesRepoOptions {
  /** How long an ingest idempotency key is remembered (ms). */
  idempotencyWindowMs?: number;
}

/** The table's statements (the same on both engines; literal limits). */
const SQL = {
  read: (limit: number) =>
    `SELECT update_id, bot_id, update_seq, kind, payload, created_at FROM updates WHERE bot_id = ? AND update_seq >= ? ORDER BY update_seq ASC LIMIT ${literalInt(limit)}`,
  pendingCount: 'SELECT COUNT(*) AS n FROM updates WHERE bot_id = ?',
  /** Ingest's ids: the counter advanced, then read, in the unit (its row locked on MySQL until it ends). */
  advanceIds: "UPDATE id_counters SET value = value + ? WHERE name = 'update_id'",
  lastId: "SELECT value FROM id_counters WHERE name = 'update_id'",
  findIngestKeys: (n: number) =>
    `SELECT idempotency_key, update_id, update_seq, created_at FROM ingest_keys WHERE bot_id = ? AND idempotency_key IN (${marks(n)})`,
  forgetIngestKey: 'DELETE FROM ingest_keys WHERE bot_id = ? AND idempotency_key = ?',
  /**
   * getUpdates' confirmation: at most 1000 of the bot's updates below a seq, found by a
   * plain read and deleted by primary key, so the delete takes no gap locks on the bot's
   * sequence that a concurrent ingest would wait on (MySQL).
   */
  below: 'SELECT update_id FROM updates WHERE bot_id = ? AND update_seq < ? ORDER BY update_seq ASC LIMIT 1000',
  deleteIds: (n: number) => `DELETE FROM updates WHERE update_id IN (${marks(n)})`,
  /** The bot's queued updates without a delivery row, in order. */
  withoutDelivery: `SELECT update_id, bot_id, update_seq, kind, payload, created_at FROM updates
    WHERE bot_id = ? AND NOT EXISTS (SELECT 1 FROM deliveries WHERE deliveries.bot_id = updates.bot_id AND deliveries.update_id = updates.update_id)
    ORDER BY update_seq ASC`,
  deleteAllOfBot: 'DELETE FROM updates WHERE bot_id = ?',
  purgeIngestKeys: 'DELETE FROM ingest_keys WHERE created_at < ?',
  deleteClosed: (bots: number, ids: number) => `DELETE FROM updates WHERE bot_id IN (${marks(bots)}) AND update_id IN (${marks(ids)})`,
};
const UPDATE_COLUMNS = ['update_id', 'bot_id', 'update_seq', 'kind', 'payload', 'created_at'] as const;
const updateRow = (u: StoredUpdate) => [u.updateId, u.botId, u.updateSeq, u.kind, JSON.stringify(u.message), u.createdAt];
const INGEST_KEY_COLUMNS = ['bot_id', 'idempotency_key', 'update_id', 'update_seq', 'created_at'] as const;
const ingestKeyRow = (k: IngestKey & { botId: string }) => [k.botId, k.key, k.updateId, k.updateSeq, k.createdAt];
/* eslint-disable @typescript-eslint/no-explicit-any */
const ingestKeyOf = (r: any): IngestKey => ({ key: r.idempotency_key, updateId: Number(r.update_id), updateSeq: Number(r.update_seq), createdAt: Number(r.created_at) });
/* eslint-enable @typescript-eslint/no-explicit-any */

export function createUpdatesRepo(db: Db, opts: UpdatesRepoOptions = {}) {
  const idempotencyWindowMs = opts.idempotencyWindowMs ?? 86_400_000;
  /** Per bot, the update_seq below which this process has confirmed (deleted) everything; bounded. */
  const confirmed = new Map<string, number>();

  /* eslint-disable @typescript-eslint/no-explicit-any */
  const updateOf = (r: any): StoredUpdate => ({
    updateId: Number(r.update_id),
    botId: r.bot_id,
    updateSeq: Number(r.update_seq),
    kind: r.kind,
    message: JSON.parse(r.payload),
    createdAt: Number(r.created_at),
  });
  /* eslint-enable @typescript-eslint/no-explicit-any */

  const { sql, knex } = db;
  const on = (tx?: Tx) => tx ?? sql;
  const retryLocks = { attempts: 5, retryable: isDeadlockOrLockWait };
  /** Deletes these updates by primary key, in the caller's unit or on their own (a deadlock or lock wait timeout victim run again). */
  const deleteIds = (ids: number[], tx?: Tx) => (tx ? tx.run(SQL.deleteIds(ids.length), ids) : sql.run(SQL.deleteIds(ids.length), ids, retryLocks));

  return {
    /** Takes n consecutive ids from the platform-wide counter, in the caller's unit: the first of them. */
    async takeIds(n: number, w: Writer): Promise<number> {
      w.queue(SQL.advanceIds, [n]);
      const row = await w.one<{ value: number | string }>(SQL.lastId);
      return Number(row!.value) - n + 1;
    },

    /** Stores updates, in the caller's unit. */
    insert(updates: StoredUpdate[], w: Writer): void {
      w.insert('updates', UPDATE_COLUMNS, updates.map(updateRow));
    },

    /**
     * Updates of a bot from update_seq `from` on, in order. `urgent`: a long poll woken by
     * their arrival waits on them (Reads.all's urgent read).
     */
    async read(botId: string, from: number, limit: number, tx?: Tx, urgent = false): Promise<StoredUpdate[]> {
      return (await on(tx).all(SQL.read(limit), [botId, from], urgent)).map(updateOf);
    },

    /** The bot's queued updates that have no delivery row (not handed to a webhook yet), in order. */
    async withoutDelivery(botId: string, tx?: Tx): Promise<StoredUpdate[]> {
      return (await on(tx).all(SQL.withoutDelivery, [botId])).map(updateOf);
    },

    /**
     * Confirms (forgets) every update of the bot below update_seq `below`, 1000 at a
     * time (SQL.below); a deadlock victim is run again.
     */
    async confirmBelow(botId: string, below: number, tx?: Tx): Promise<number> {
      // Already confirmed by this process: nothing can be below it again (a bot's
      // update_seq only grows, and a client's offset is at most its newest + 1).
      if (!tx && (confirmed.get(botId) ?? 0) >= below) return 0;
      let total = 0;
      for (;;) {
        const ids = (await on(tx).all<{ update_id: number }>(SQL.below, [botId, below])).map((r) => r.update_id);
        if (ids.length > 0) total += await deleteIds(padded(sql, ids), tx);
        if (ids.length < 1000) break;
      }
      if (!tx) {
        confirmed.delete(botId);
        if (confirmed.size >= CONFIRMED_KEPT) confirmed.delete(confirmed.keys().next().value!);
        confirmed.set(botId, below);
      }
      return total;
    },

    /**
     * Forgets these updates of several bots (their deliveries closed) in one statement,
     * in primary-key order (update ids are unique across bots), in the caller's unit.
     */
    deleteClosed(closed: [string, number[]][], w: Writer): void {
      const ids = padded(sql, closed.flatMap(([, ids]) => ids).sort((a, b) => a - b));
      if (ids.length === 0) return;
      const bots = padded(sql, closed.map(([botId]) => botId));
      w.queue(SQL.deleteClosed(bots.length, ids.length), [...bots, ...ids]);
    },

    /** Forgets every queued update of the bot, in the caller's unit. */
    deleteAllOfBot(botId: string, w: Writer): void {
      w.queue(SQL.deleteAllOfBot, [botId]);
    },

    async pendingCount(botId: string, tx?: Tx): Promise<number> {
      return Number((await on(tx).one<{ n: number | string }>(SQL.pendingCount, [botId]))!.n);
    },

    /** Deletes updates stored before `before` (epoch ms), in bounded chunks. */
    async purgeOlderThan(before: number, tx?: Tx): Promise<number> {
      let total = 0;
      for (;;) {
        const ids = (await exec(on(tx), knex('updates').where('created_at', '<', before).limit(1000).pluck('update_id'))) as number[];
        if (ids.length === 0) return total;
        total += await deleteIds(ids, tx);
      }
    },

    /** The bot's stored idempotency keys among `keys` (fresh or past the window), in the caller's unit. */
    async findIngestKeys(botId: string, keys: string[], w: Writer): Promise<IngestKey[]> {
      const found: IngestKey[] = [];
      let at = 0;
      for (const size of powerOfTwoChunks(keys.length)) {
        for (const r of await w.all(SQL.findIngestKeys(size), [botId, ...keys.slice(at, (at += size))])) found.push(ingestKeyOf(r));
      }
      return found;
    },

    /** Forgets one key of the bot, in the caller's unit. */
    forgetIngestKey(botId: string, key: string, w: Writer): void {
      w.queue(SQL.forgetIngestKey, [botId, key]);
    },

    /** Remembers keys with the ids their updates got, in the caller's unit. */
    insertIngestKeys(keys: (IngestKey & { botId: string })[], w: Writer): void {
      w.insert('ingest_keys', INGEST_KEY_COLUMNS, keys.map(ingestKeyRow));
    },

    /** Forgets ingest idempotency keys past their window (swept often: each run has a few minutes' worth). */
    async purgeIngestKeys(now: number, tx?: Tx): Promise<number> {
      const before = [now - idempotencyWindowMs];
      return tx ? tx.run(SQL.purgeIngestKeys, before) : sql.run(SQL.purgeIngestKeys, before, retryLocks);
    },
  };
}

export type UpdatesRepo = ReturnType<typeof createUpdatesRepo>;
