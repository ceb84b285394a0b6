/**
 * The outbound feed, and the only module that writes its tables (see the migration
 * 20261224000001_outbound_feed): the sent messages by (partition, seq), the members and
 * partition leases of consumer groups, and the groups' committed positions. Appending
 * is part of the send unit of work (units.ts) and takes its transaction.
 */
import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { isMysql, padded, transaction, valuePerRow, type Db, type MysqlWriter, type SqliteWriter, type Tx } from './db.js';

/** Partitions of the feed (as many rows as the migration created; cursors name them). */
export const FEED_PARTITIONS = 16;

/** The partition of a chat: hash(bot, chat) mod FEED_PARTITIONS. */
export function feedPartitionOf(botId: string, chatId: number): number {
  return crypto.createHash('sha256').update(`${botId}/${chatId}`).digest().readUInt32BE(0) % FEED_PARTITIONS;
}

export interface FeedRow {
  partition: number;
  seq: number;
  botId: string;
  chatId: number;
  /** The bus message's value: {"bot_id", "message"} as JSON. */
  payload: string;
}

/** The partitions' places for entries in the order given, from each partition's last seq; the new last seqs. */
function place(partitions: number[], last: Map<number, number>): { partition: number; seq: number }[] {
  return partitions.map((partition) => {
    const seq = last.get(partition)! + 1;
    last.set(partition, seq);
    return { partition, seq };
  });
}

/** The feed's read on SQLite's writer (units.ts's synchronous send unit). */
const WRITER_SQL = {
  lastSeqs: (n: number) => `SELECT partition_no, last_seq FROM feed_partitions WHERE partition_no IN (${Array(n).fill('?').join(', ')})`,
  /** On MySQL's writer: the partitions' rows locked in ascending order. */
  lockLastSeqs: (n: number) => `SELECT partition_no, last_seq FROM feed_partitions WHERE partition_no IN (${Array(n).fill('?').join(', ')}) ORDER BY partition_no FOR UPDATE`,
};

const FEED_COLUMNS = ['partition_no', 'seq', 'bot_id', 'chat_id', 'payload', 'created_at'] as const;

export function createFeedRepo(db: Db) {
  const mysql = isMysql(db);
  const q = (tx?: Tx) => tx ?? db;

  return {
    /** appendMany's statements, run on SQLite's writer in the caller's synchronous unit. */
    sqlite: {
      appendMany(w: SqliteWriter, entries: { botId: string; chatId: number; payload: string }[], now: number): { partition: number; seq: number }[] {
        const partitions = entries.map((e) => feedPartitionOf(e.botId, e.chatId));
        const held = [...new Set(partitions)].sort((a, b) => a - b);
        const list = padded(db, held);
        const rows = w.all<{ partition_no: number; last_seq: number }>(WRITER_SQL.lastSeqs(list.length), list);
        const last = new Map<number, number>(rows.map((r) => [Number(r.partition_no), Number(r.last_seq)]));
        const placed = place(partitions, last);
        w.update('feed_partitions', 'partition_no', ['last_seq'], held.map((p) => [p, last.get(p)!]));
        w.insert('feed_messages', FEED_COLUMNS, entries.map((e, i) => [placed[i]!.partition, placed[i]!.seq, e.botId, e.chatId, e.payload, now]));
        return placed;
      },
    },

    /** appendMany's statements on MySQL's writer (units.ts's send unit), the partitions' rows locked in ascending order. */
    mysql: {
      async appendMany(w: MysqlWriter, entries: { botId: string; chatId: number; payload: string }[], now: number): Promise<{ partition: number; seq: number }[]> {
        const partitions = entries.map((e) => feedPartitionOf(e.botId, e.chatId));
        const held = [...new Set(partitions)].sort((a, b) => a - b);
        const rows = await w.all<{ partition_no: number; last_seq: number | string }>(WRITER_SQL.lockLastSeqs(held.length), held);
        const last = new Map<number, number>(rows.map((r) => [Number(r.partition_no), Number(r.last_seq)]));
        const placed = place(partitions, last);
        w.update('feed_partitions', 'partition_no', ['last_seq'], held.map((p) => [p, last.get(p)!]));
        w.insert('feed_messages', FEED_COLUMNS, entries.map((e, i) => [placed[i]!.partition, placed[i]!.seq, e.botId, e.chatId, e.payload, now]));
        return placed;
      },
    },

    /**
     * Appends a sent message to its chat's partition, with the partition's next seq. The
     * partition's row stays locked until the caller's transaction ends, so seqs commit in
     * order (a reader never sees seq n+1 before n).
     */
    /**
     * Appends several messages, each at its chat's partition's next seq, in the order
     * given; the partitions' rows are locked (on MySQL) in ascending order, one read.
     */
    async appendMany(entries: { botId: string; chatId: number; payload: string }[], now: number, tx: Tx): Promise<{ partition: number; seq: number }[]> {
      const partitions = entries.map((e) => feedPartitionOf(e.botId, e.chatId));
      let sel = tx('feed_partitions').whereIn('partition_no', [...new Set(partitions)].sort((a, b) => a - b)).orderBy('partition_no').select('partition_no', 'last_seq');
      if (mysql) sel = sel.forUpdate();
      const last = new Map<number, number>(((await sel) as { partition_no: number; last_seq: number | string }[]).map((r) => [Number(r.partition_no), Number(r.last_seq)]));
      const placed = place(partitions, last);
      const held = [...last.keys()].sort((a, b) => a - b);
      await tx('feed_partitions').whereIn('partition_no', padded(tx, held))
        .update({ last_seq: valuePerRow(tx, 'partition_no', held, held.map((p) => last.get(p)!)) as number | Knex.Raw });
      const rows = entries.map((e, i) => ({ partition_no: placed[i]!.partition, seq: placed[i]!.seq, bot_id: e.botId, chat_id: e.chatId, payload: e.payload, created_at: now }));
      for (let k = 0; k < rows.length; k += 200) await tx('feed_messages').insert(rows.slice(k, k + 200));
      return placed;
    },

    /** Each partition's last seq. */
    async heads(tx?: Tx): Promise<Map<number, number>> {
      const rows = await q(tx)('feed_partitions').select('partition_no', 'last_seq');
      return new Map(rows.map((r) => [Number(r.partition_no), Number(r.last_seq)]));
    },

    /** Messages of a partition after `afterSeq`, in order, at most `limit`. */
    async read(partition: number, afterSeq: number, limit: number, tx?: Tx): Promise<FeedRow[]> {
      const rows = await q(tx)('feed_messages').where('partition_no', partition).andWhere('seq', '>', afterSeq)
        .orderBy('seq', 'asc').limit(limit).select('seq', 'bot_id', 'chat_id', 'payload');
      return rows.map((r) => ({ partition, seq: Number(r.seq), botId: r.bot_id, chatId: Number(r.chat_id), payload: r.payload }));
    },

    /** Marks a member of a group alive until `now + ttlMs`; forgets members long gone. */
    async heartbeat(group: string, member: string, now: number, ttlMs: number): Promise<void> {
      await db('feed_members').insert({ group_name: group, member, expires_at: now + ttlMs })
        .onConflict(['group_name', 'member']).merge(['expires_at']);
      await db('feed_members').where('group_name', group).andWhere('expires_at', '<', now - ttlMs).delete();
    },

    /** The group's live members, in a stable order. */
    async liveMembers(group: string, now: number): Promise<string[]> {
      const rows = await db('feed_members').where('group_name', group).andWhere('expires_at', '>', now).orderBy('member').select('member');
      return rows.map((r) => r.member as string);
    },

    /** Takes (or keeps) a partition's lease for a member: true when the member holds it now. */
    async acquire(group: string, partition: number, member: string, now: number, ttlMs: number): Promise<boolean> {
      const updated = await db('feed_leases').where({ group_name: group, partition_no: partition })
        .andWhere((w) => w.where('expires_at', '<', now).orWhere('member', member))
        .update({ member, expires_at: now + ttlMs });
      if (Number(updated) > 0) return true;
      // No lease row yet, or another member's live one: whoever inserts first has it.
      await db('feed_leases').insert({ group_name: group, partition_no: partition, member, expires_at: now + ttlMs })
        .onConflict(['group_name', 'partition_no']).ignore();
      const row = await db('feed_leases').where({ group_name: group, partition_no: partition }).first('member');
      return row?.member === member;
    },

    /** Extends the member's leases; returns the partitions it still holds. */
    async renew(group: string, member: string, now: number, ttlMs: number): Promise<number[]> {
      await db('feed_leases').where({ group_name: group, member }).update({ expires_at: now + ttlMs });
      const rows = await db('feed_leases').where({ group_name: group, member }).select('partition_no');
      return rows.map((r) => Number(r.partition_no));
    },

    /** Gives partitions up (all of the member's when none are named). */
    async release(group: string, member: string, partitions?: number[]): Promise<void> {
      let del = db('feed_leases').where({ group_name: group, member });
      if (partitions) del = del.whereIn('partition_no', partitions);
      await del.delete();
    },

    /** The member leaves its group: its leases and its membership go at once. */
    async leave(group: string, member: string): Promise<void> {
      await transaction(db, async (tx) => {
        await tx('feed_leases').where({ group_name: group, member }).delete();
        await tx('feed_members').where({ group_name: group, member }).delete();
      });
    },

    /** The group's committed positions of the partitions asked for. */
    async positions(group: string, partitions: number[]): Promise<Map<number, number>> {
      const rows = await db('feed_positions').where('group_name', group).whereIn('partition_no', partitions).select('partition_no', 'seq');
      return new Map(rows.map((r) => [Number(r.partition_no), Number(r.seq)]));
    },

    /** Records positions; a position never goes back. */
    async commit(group: string, positions: { partition: number; seq: number }[], now: number): Promise<void> {
      await transaction(db, async (tx) => {
        for (const p of [...positions].sort((a, b) => a.partition - b.partition)) {
          await tx('feed_positions').insert({ group_name: group, partition_no: p.partition, seq: p.seq, updated_at: now })
            .onConflict(['group_name', 'partition_no']).ignore();
          await tx('feed_positions').where({ group_name: group, partition_no: p.partition }).andWhere('seq', '<', p.seq)
            .update({ seq: p.seq, updated_at: now });
        }
      });
    },
  };
}

export type FeedRepo = ReturnType<typeof createFeedRepo>;
