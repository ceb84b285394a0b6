/**
 * The outbox, and the only module that writes it: bus messages committed together
 * with the rows they announce (by the units of work in units.ts), then claimed,
 * published and deleted by the relay. The topic is the caller's: topic names live
 * in the bus layer. Every method takes the caller's transaction, when it has one,
 * as its last argument.
 */
import { isDeadlockOrLockWait, literalInt, padded, type Db, type Tx, type Writer } from './db.js';
import { marks } from './statement-texts.js';

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
 * The table's statements. A claim differs by engine: on SQLite (one writer: no lock to
 * take first) one UPDATE answering the rows it took; on MySQL a read that locks what it
 * takes, skipping rows another relay holds, then the UPDATE (sent with the COMMIT).
 */
const SQL = {
  sqliteClaim: (limit: number) => `UPDATE outbox SET claimed_until = ?
  WHERE id IN (SELECT id FROM outbox WHERE claimed_until < ? ORDER BY id ASC LIMIT ${literalInt(limit)})
  RETURNING id, topic, msg_key, payload`,
  mysqlClaim: (limit: number) => `SELECT id, topic, msg_key, payload FROM outbox WHERE claimed_until < ? ORDER BY id ASC LIMIT ${literalInt(limit)} FOR UPDATE SKIP LOCKED`,
  setClaimed: (n: number) => `UPDATE outbox SET claimed_until = ? WHERE id IN (${marks(n)})`,
  delete: (n: number) => `DELETE FROM outbox WHERE id IN (${marks(n)})`,
  backlog: 'SELECT COUNT(*) AS n FROM outbox',
};

const OUTBOX_COLUMNS = ['topic', 'msg_key', 'payload', 'created_at'] as const;
const CLAIMED_COLUMNS = [...OUTBOX_COLUMNS, 'claimed_until'] as const;
type ClaimedRow = { id: number | string; topic: string; msg_key: string; payload: string };
const messageOf = (r: ClaimedRow): OutboxMessage => ({ id: Number(r.id), topic: r.topic, key: r.msg_key, payload: r.payload });

export function createOutboxRepo(db: Db) {
  const { sql } = db;
  const retryLocks = { attempts: 5, retryable: isDeadlockOrLockWait };

  /** The claim's statements in the caller's unit (see SQL). */
  const claimIn = sql.dialect === 'sqlite'
    ? async (w: Writer, limit: number, now: number, leaseMs: number) =>
      // RETURNING's order is not the id order.
      (await w.all<ClaimedRow>(SQL.sqliteClaim(limit), [now + leaseMs, now])).map(messageOf).sort((a, b) => a.id - b.id)
    : async (w: Writer, limit: number, now: number, leaseMs: number) => {
      const rows = await w.all<ClaimedRow>(SQL.mysqlClaim(limit), [now]);
      if (rows.length > 0) w.queue(SQL.setClaimed(rows.length), [now + leaseMs, ...rows.map((r) => r.id)]);
      return rows.map(messageOf);
    };

  /** Adds messages, in the caller's unit. */
  const insert = (messages: NewOutboxMessage[], now: number, w: Writer): void => {
    w.insert('outbox', OUTBOX_COLUMNS, messages.map((m) => [m.topic, m.key, m.payload, now]));
  };

  return {
    insert,

    /**
     * Adds messages claimed by the caller until `claimedUntil`, in its unit, where the
     * engine answers their ids with the insert (see Writer.insertIds): their ids once the
     * unit has sent the insert. Otherwise adds them unclaimed, as `insert`, and answers
     * undefined (the relay's next round takes them).
     */
    insertClaimed(messages: NewOutboxMessage[], now: number, claimedUntil: number, w: Writer): Promise<number[]> | undefined {
      if (!w.insertIds) {
        insert(messages, now, w);
        return undefined;
      }
      return w.insertIds('outbox', CLAIMED_COLUMNS, messages.map((m) => [m.topic, m.key, m.payload, now, claimedUntil]));
    },

    /**
     * Claims the oldest unclaimed outbox messages until `now + leaseMs`, in a short
     * transaction of its own: publishing happens outside any transaction, and no
     * ingest waits on it. Several relays (one per core) claim disjoint batches; a claim
     * whose relay died lapses, and the batch goes out again (at least once).
     */
    async claim(limit: number, now: number, leaseMs: number, outer?: Tx): Promise<OutboxMessage[]> {
      if (outer) return claimIn(outer, limit, now, leaseMs);
      // Read committed (MySQL): the claim locks the rows it takes, not the gap new outbox rows go into.
      // SQLite's claim is one statement, atomic by itself.
      return sql.unit((w) => claimIn(w, limit, now, leaseMs), { isolation: 'read committed', transaction: sql.dialect === 'mysql', ...retryLocks });
    },

    /** Deletes published outbox messages. */
    async delete(ids: number[], tx?: Tx): Promise<void> {
      if (ids.length === 0) return;
      const list = padded(sql, ids);
      if (tx) await tx.run(SQL.delete(list.length), list);
      else await sql.run(SQL.delete(list.length), list, retryLocks);
    },

    /** Gives claimed messages back (their publish failed), for the next attempt by any relay. */
    async release(ids: number[], tx?: Tx): Promise<void> {
      if (ids.length === 0) return;
      const list = padded(sql, ids);
      if (tx) await tx.run(SQL.setClaimed(list.length), [0, ...list]);
      else await sql.run(SQL.setClaimed(list.length), [0, ...list], retryLocks);
    },

    /** Outbox messages not yet published (claimed or not). */
    async backlog(tx?: Tx): Promise<number> {
      return Number((await (tx ?? sql).one<{ n: number | string }>(SQL.backlog))!.n);
    },
  };
}

export type OutboxRepo = ReturnType<typeof createOutboxRepo>;
