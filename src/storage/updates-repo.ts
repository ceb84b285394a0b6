/**
 * Updates, the platform-wide update id counter (id_counters) and the ingest
 * idempotency keys: the only module that writes those tables. Ingest itself, which
 * writes them together with bots, outbox, deliveries, chats and messages, is a unit
 * of work (units.ts). Every method takes the caller's transaction, when it has one,
 * as its last argument.
 */
import { inTransaction, isDeadlockOrLockWait, LITERAL, literalInt, mysqlReaderOf, padded, powerOfTwoChunks, readerOf, sqliteUnitRunner, statement, type Db, type SqliteWriter, type Tx } from './db.js';

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

/** The hot reads outside a transaction, past knex (db.ts's SqliteReader and MysqlReader): hand-written, literal limits. */
const SQL = {
  read: (limit: number) =>
    `SELECT update_id, bot_id, update_seq, kind, payload, created_at FROM updates WHERE bot_id = ? AND update_seq >= ? ORDER BY update_seq ASC LIMIT ${literalInt(limit)}`,
  pendingCount: 'SELECT COUNT(*) AS n FROM updates WHERE bot_id = ?',
};

/** Ingest's SQLite statements (run by units.ts on knex's connection, synchronously). */
const WRITER_SQL = {
  takeIds: "UPDATE id_counters SET value = value + ? WHERE name = 'update_id' RETURNING value",
  findIngestKeys: (n: number) =>
    `SELECT idempotency_key, update_id, update_seq, created_at FROM ingest_keys WHERE bot_id = ? AND idempotency_key IN (${Array(n).fill('?').join(', ')})`,
  forgetIngestKey: 'DELETE FROM ingest_keys WHERE bot_id = ? AND idempotency_key = ?',
  /** getUpdates' confirmation, 1000 rows per statement (one writer: no gap locks to avoid). */
  confirmBelow: 'DELETE FROM updates WHERE update_id IN (SELECT update_id FROM updates WHERE bot_id = ? AND update_seq < ? ORDER BY update_seq ASC LIMIT 1000)',
};
const UPDATE_COLUMNS = ['update_id', 'bot_id', 'update_seq', 'kind', 'payload', 'created_at'] as const;
const updateRow = (u: StoredUpdate) => [u.updateId, u.botId, u.updateSeq, u.kind, JSON.stringify(u.message), u.createdAt];
const INGEST_KEY_COLUMNS = ['bot_id', 'idempotency_key', 'update_id', 'update_seq', 'created_at'] as const;
const ingestKeyRow = (k: IngestKey & { botId: string }) => [k.botId, k.key, k.updateId, k.updateSeq, k.createdAt];
/* eslint-disable @typescript-eslint/no-explicit-any */
const ingestKeyOf = (r: any): IngestKey => ({ key: r.idempotency_key, updateId: Number(r.update_id), updateSeq: Number(r.update_seq), createdAt: Number(r.created_at) });
/* eslint-enable @typescript-eslint/no-explicit-any */
const objectOf = (columns: readonly string[], values: unknown[]) => Object.fromEntries(columns.map((c, i) => [c, values[i]]));

export function createUpdatesRepo(db: Db, opts: UpdatesRepoOptions = {}) {
  const reader = readerOf(db);
  const mysqlReader = mysqlReaderOf(db);
  const sqliteUnit = sqliteUnitRunner(db);
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

  return {
    /** Takes n consecutive ids from the platform-wide counter: the first of them. */
    async takeIds(n: number, outer?: Tx): Promise<number> {
      return inTransaction(db, outer, async (tx) => {
        await tx('id_counters').where({ name: 'update_id' }).increment('value', n);
        const row = await tx('id_counters').where({ name: 'update_id' }).first('value');
        return Number(row.value) - n + 1;
      });
    },

    /** Stores updates (one statement per 200). */
    async insert(updates: StoredUpdate[], tx?: Tx): Promise<void> {
      const rows = updates.map((u) => objectOf(UPDATE_COLUMNS, updateRow(u)));
      for (let k = 0; k < rows.length; k += 200) await (tx ?? db)('updates').insert(rows.slice(k, k + 200));
    },

    /** Updates of a bot from update_seq `from` on, in order. */
    async read(botId: string, from: number, limit: number, tx?: Tx): Promise<StoredUpdate[]> {
      if (!tx && reader) return reader.all(SQL.read(limit), botId, from).map(updateOf);
      if (!tx && mysqlReader) return (await mysqlReader.all(SQL.read(limit), botId, from)).map(updateOf);
      const rows = await (tx ?? db)('updates')
        .where({ bot_id: botId })
        .andWhere('update_seq', '>=', from)
        .orderBy('update_seq', 'asc')
        .limit(limit, LITERAL); // literal: a bound LIMIT costs SQLite about twice the read
      return rows.map(updateOf);
    },

    /** The bot's queued updates that have no delivery row (not handed to a webhook yet), in order. */
    async withoutDelivery(botId: string, tx?: Tx): Promise<StoredUpdate[]> {
      const q = tx ?? db;
      const rows = await q('updates').where({ bot_id: botId })
        .whereNotExists(q('deliveries').whereRaw('deliveries.bot_id = updates.bot_id and deliveries.update_id = updates.update_id'))
        .orderBy('update_seq', 'asc');
      return rows.map(updateOf);
    },

    /**
     * Confirms (forgets) every update of the bot below update_seq `below`. Deleted by
     * primary key (found by a plain read), so the delete takes no gap locks on the
     * bot's sequence that a concurrent ingest would wait on; a deadlock victim is
     * run again.
     */
    async confirmBelow(botId: string, below: number, tx?: Tx): Promise<number> {
      // Already confirmed by this process: nothing can be below it again (a bot's
      // update_seq only grows, and a client's offset is at most its newest + 1).
      if (!tx && (confirmed.get(botId) ?? 0) >= below) return 0;
      let total = 0;
      if (!tx && sqliteUnit) {
        // SQLite (one writer, no gap locks): 1000 rows per statement, on knex's connection, synchronously.
        for (let n = 1000; n === 1000; total += n) n = await sqliteUnit((w) => w.run(WRITER_SQL.confirmBelow, [botId, below]), { transaction: false });
      } else {
        for (;;) {
          const ids = (await (tx ?? db)('updates').where({ bot_id: botId }).andWhere('update_seq', '<', below)
            .orderBy('update_seq', 'asc').limit(1000, LITERAL).pluck('update_id')) as number[];
          if (ids.length > 0) total += await statement(db, tx, (q) => q('updates').whereIn('update_id', ids).delete(), 5, isDeadlockOrLockWait);
          if (ids.length < 1000) break;
        }
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
     * in primary-key order (update ids are unique across bots).
     */
    async deleteClosed(closed: [string, number[]][], tx?: Tx): Promise<void> {
      const ids = closed.flatMap(([, ids]) => ids).sort((a, b) => a - b);
      if (ids.length === 0) return;
      const q = tx ?? db;
      await q('updates').whereIn('bot_id', padded(q, closed.map(([botId]) => botId))).whereIn('update_id', padded(q, ids)).delete();
    },

    /** Forgets every queued update of the bot. */
    async deleteAllOfBot(botId: string, tx?: Tx): Promise<void> {
      await (tx ?? db)('updates').where({ bot_id: botId }).delete();
    },

    async pendingCount(botId: string, tx?: Tx): Promise<number> {
      if (!tx && reader) return reader.one<{ n: number }>(SQL.pendingCount, botId)!.n;
      if (!tx && mysqlReader) return Number((await mysqlReader.one<{ n: number | string }>(SQL.pendingCount, botId))!.n);
      const [{ n }] = (await (tx ?? db)('updates').where({ bot_id: botId }).count({ n: '*' })) as [{ n: number | string }];
      return Number(n);
    },

    /** Deletes updates stored before `before` (epoch ms), in bounded chunks. */
    async purgeOlderThan(before: number, tx?: Tx): Promise<number> {
      let total = 0;
      for (;;) {
        const ids = (await (tx ?? db)('updates').where('created_at', '<', before).limit(1000).pluck('update_id')) as number[];
        if (ids.length === 0) return total;
        total += await statement(db, tx, (q) => q('updates').whereIn('update_id', ids).delete(), 5, isDeadlockOrLockWait);
      }
    },

    /** The bot's stored idempotency keys among `keys` (fresh or past the window). */
    async findIngestKeys(botId: string, keys: string[], tx?: Tx): Promise<IngestKey[]> {
      const found: IngestKey[] = [];
      for (let k = 0; k < keys.length; k += 200) {
        const rows = await (tx ?? db)('ingest_keys').where({ bot_id: botId }).whereIn('idempotency_key', keys.slice(k, k + 200))
          .select('idempotency_key', 'update_id', 'update_seq', 'created_at');
        for (const r of rows) found.push(ingestKeyOf(r));
      }
      return found;
    },

    /** Forgets one key of the bot. */
    async forgetIngestKey(botId: string, key: string, tx?: Tx): Promise<void> {
      await (tx ?? db)('ingest_keys').where({ bot_id: botId, idempotency_key: key }).delete();
    },

    /** Remembers keys with the ids their updates got (one statement per 200). */
    async insertIngestKeys(keys: (IngestKey & { botId: string })[], tx?: Tx): Promise<void> {
      const rows = keys.map((k) => objectOf(INGEST_KEY_COLUMNS, ingestKeyRow(k)));
      for (let k = 0; k < rows.length; k += 200) await (tx ?? db)('ingest_keys').insert(rows.slice(k, k + 200));
    },

    /** Ingest's writes of these tables as statements of a synchronous SQLite unit of work (units.ts). */
    sqlite: {
      takeIds(w: SqliteWriter, n: number): number {
        const [row] = w.all<{ value: number }>(WRITER_SQL.takeIds, [n]);
        return Number(row!.value) - n + 1;
      },
      insert(w: SqliteWriter, updates: StoredUpdate[]): void {
        w.insert('updates', UPDATE_COLUMNS, updates.map(updateRow));
      },
      findIngestKeys(w: SqliteWriter, botId: string, keys: string[]): IngestKey[] {
        const found: IngestKey[] = [];
        let at = 0;
        for (const size of powerOfTwoChunks(keys.length)) {
          for (const r of w.all(WRITER_SQL.findIngestKeys(size), [botId, ...keys.slice(at, (at += size))])) found.push(ingestKeyOf(r));
        }
        return found;
      },
      forgetIngestKey(w: SqliteWriter, botId: string, key: string): void {
        w.run(WRITER_SQL.forgetIngestKey, [botId, key]);
      },
      insertIngestKeys(w: SqliteWriter, keys: (IngestKey & { botId: string })[]): void {
        w.insert('ingest_keys', INGEST_KEY_COLUMNS, keys.map(ingestKeyRow));
      },
    },

    /** Forgets ingest idempotency keys past their window (swept often: each run has a few minutes' worth). */
    async purgeIngestKeys(now: number, tx?: Tx): Promise<number> {
      return statement(db, tx, (q) => q('ingest_keys').where('created_at', '<', now - idempotencyWindowMs).delete(), 5, isDeadlockOrLockWait);
    },
  };
}

export type UpdatesRepo = ReturnType<typeof createUpdatesRepo>;
