/**
 * The outbox, and the only module that writes it: bus messages committed together
 * with the rows they announce (by the units of work in units.ts), then claimed,
 * published and deleted by the relay. The topic is the caller's: topic names live
 * in the bus layer. Every method takes the caller's transaction, when it has one,
 * as its last argument.
 */
import { isDeadlockOrLockWait, isMysql, literalInt, mysqlUnitRunner, padded, retryingDeadlocks, sqliteUnitRunner, statement, type Db, type MysqlWriter, type SqliteWriter, type Tx } from './db.js';

/** A bus message to publish once the transaction that adds it commits. */
export interface NewOutboxMessage {
  topic: string;
  key: string;
  payload: string;
}

export interface OutboxMessage extends NewOutboxMessage {
  id: number;
}

/**
 * The relay's SQLite statements, run synchronously on knex's connection (db.ts's
 * sqliteUnitRunner): a claim is one UPDATE answering the rows it took (one writer: no
 * lock to take first), a delete one statement (its id list padded to a power of two).
 */
const WRITER_SQL = {
  claim: (limit: number) => `UPDATE outbox SET claimed_until = ?
  WHERE id IN (SELECT id FROM outbox WHERE claimed_until < ? ORDER BY id ASC LIMIT ${literalInt(limit)})
  RETURNING id, topic, msg_key, payload`,
  delete: (n: number) => `DELETE FROM outbox WHERE id IN (${Array(n).fill('?').join(', ')})`,
};

/** The relay's MySQL statements (db.ts's mysqlUnitRunner): the claim locks what it takes, skipping rows another relay holds. */
const MYSQL_SQL = {
  claim: (limit: number) => `SELECT id, topic, msg_key, payload FROM outbox WHERE claimed_until < ? ORDER BY id ASC LIMIT ${literalInt(limit)} FOR UPDATE SKIP LOCKED`,
  setClaimed: (n: number) => `UPDATE outbox SET claimed_until = ? WHERE id IN (${Array(n).fill('?').join(', ')})`,
};

const OUTBOX_COLUMNS = ['topic', 'msg_key', 'payload', 'created_at'] as const;

export function createOutboxRepo(db: Db) {
  const mysql = isMysql(db);
  const sqliteUnit = sqliteUnitRunner(db);
  const mysqlUnit = mysqlUnitRunner(db);
  return {
    /** Adds messages (one statement per 200). */
    async insert(messages: NewOutboxMessage[], now: number, tx?: Tx): Promise<void> {
      const rows = messages.map((m) => ({ topic: m.topic, msg_key: m.key, payload: m.payload, created_at: now }));
      for (let k = 0; k < rows.length; k += 200) await (tx ?? db)('outbox').insert(rows.slice(k, k + 200));
    },

    /** `insert` as a statement of a synchronous SQLite unit of work (units.ts). */
    sqlite: {
      insert(w: SqliteWriter, messages: NewOutboxMessage[], now: number): void {
        w.insert('outbox', OUTBOX_COLUMNS, messages.map((m) => [m.topic, m.key, m.payload, now]));
      },
    },

    /** `insert` as a statement of a MySQL unit of work (units.ts). */
    mysql: {
      insert(w: MysqlWriter, messages: NewOutboxMessage[], now: number): void {
        w.insert('outbox', OUTBOX_COLUMNS, messages.map((m) => [m.topic, m.key, m.payload, now]));
      },
    },

    /**
     * Claims the oldest unclaimed outbox messages until `now + leaseMs`, in a short
     * transaction of its own: publishing happens outside any transaction, and no
     * ingest waits on it. Several relays (one per core) claim disjoint batches; a claim
     * whose relay died lapses, and the batch goes out again (at least once).
     */
    async claim(limit: number, now: number, leaseMs: number, outer?: Tx): Promise<OutboxMessage[]> {
      const body = async (tx: Tx) => {
        let q = tx('outbox').where('claimed_until', '<', now).orderBy('id', 'asc').limit(limit).select('id', 'topic', 'msg_key', 'payload');
        if (mysql) q = q.forUpdate().skipLocked();
        const rows = await q;
        if (rows.length > 0) await tx('outbox').whereIn('id', rows.map((r) => r.id)).update({ claimed_until: now + leaseMs });
        return rows.map((r) => ({ id: Number(r.id), topic: r.topic, key: r.msg_key, payload: r.payload }));
      };
      if (outer) return body(outer);
      if (sqliteUnit) {
        return sqliteUnit((w) => w.all<{ id: number; topic: string; msg_key: string; payload: string }>(WRITER_SQL.claim(limit), [now + leaseMs, now])
          .map((r) => ({ id: Number(r.id), topic: r.topic, key: r.msg_key, payload: r.payload }))
          .sort((a, b) => a.id - b.id), { transaction: false }); // RETURNING's order is not the id order
      }
      // Read committed: the claim locks the rows it takes, not the gap new outbox rows go into.
      if (mysqlUnit) {
        return mysqlUnit(async (w) => {
          const rows = await w.all<{ id: number | string; topic: string; msg_key: string; payload: string }>(MYSQL_SQL.claim(limit), [now]);
          if (rows.length > 0) w.queue(MYSQL_SQL.setClaimed(rows.length), [now + leaseMs, ...rows.map((r) => r.id)]);
          return rows.map((r) => ({ id: Number(r.id), topic: r.topic, key: r.msg_key, payload: r.payload }));
        }, { isolation: 'read committed', attempts: 5, retryable: isDeadlockOrLockWait });
      }
      return retryingDeadlocks(() => db.transaction(body, mysql ? { isolationLevel: 'read committed' } : undefined), 5, isDeadlockOrLockWait);
    },

    /** Deletes published outbox messages. */
    async delete(ids: number[], tx?: Tx): Promise<void> {
      if (ids.length === 0) return;
      if (!tx && sqliteUnit) {
        const list = padded(db, ids);
        await sqliteUnit((w) => w.run(WRITER_SQL.delete(list.length), list), { transaction: false });
        return;
      }
      if (!tx && mysqlUnit) {
        await mysqlUnit((w) => w.run(WRITER_SQL.delete(ids.length), ids), { transaction: false, attempts: 5, retryable: isDeadlockOrLockWait });
        return;
      }
      await statement(db, tx, (q) => q('outbox').whereIn('id', ids).delete(), 5, isDeadlockOrLockWait);
    },

    /** Gives claimed messages back (their publish failed), for the next attempt by any relay. */
    async release(ids: number[], tx?: Tx): Promise<void> {
      await statement(db, tx, (q) => q('outbox').whereIn('id', ids).update({ claimed_until: 0 }), 5, isDeadlockOrLockWait);
    },

    /** Outbox messages not yet published (claimed or not). */
    async backlog(tx?: Tx): Promise<number> {
      const [{ n }] = (await (tx ?? db)('outbox').count({ n: '*' })) as [{ n: number | string }];
      return Number(n);
    },
  };
}

export type OutboxRepo = ReturnType<typeof createOutboxRepo>;
