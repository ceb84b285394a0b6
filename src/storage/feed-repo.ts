/**
 * The outbound feed, and the only module that writes its tables (see the migration
 * 20261224000001_outbound_feed): the sent messages by (partition, seq), the members and
 * partition leases of consumer groups, and the groups' committed positions. Appending
 * is part of the send unit of work (units.ts) and takes its transaction.
 */
import crypto from 'node:crypto';
import { exec, literalInt, padded, type Db, type Tx, type Writer } from './db.js';
import { marks } from './statement-texts.js';
import { sha256 } from '../sha256.js';

/** Partitions of the feed (as many rows as the migration created; cursors name them). */
export const FEED_PARTITIONS = 16;

/** The partition of a chat: hash(bot, chat) mod FEED_PARTITIONS. */
export function feedPartitionOf(botId: string, chatId: number): number {
  return sha256(`${botId}/${chatId}`).readUInt32BE(0) % FEED_PARTITIONS;
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

/** The partitions' last seqs, in the send unit, their rows locked (MySQL: `lock` is ` FOR UPDATE`) in ascending order. */
const LOCK_LAST_SEQS = (n: number, lock: string) => `SELECT partition_no, last_seq FROM feed_partitions WHERE partition_no IN (${marks(n)}) ORDER BY partition_no${lock}`;

const FEED_COLUMNS = ['partition_no', 'seq', 'bot_id', 'chat_id', 'payload', 'created_at'] as const;
const LAST_SEQ = ['last_seq'] as const;

/** A partition's lease in a consumer group: its holder, until `expiresAt` (epoch ms). */
export interface FeedLease {
  group: string;
  partition: number;
  member: string;
  expiresAt: number;
}

/** Members, groups or rows per statement of the consumer groups' upkeep (well within both engines' limits on placeholders). */
const CHUNK = 500;
const chunks = <T>(list: readonly T[]): T[][] => {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += CHUNK) out.push(list.slice(i, i + CHUNK));
  return out;
};
const distinct = <T>(list: readonly T[]): T[] => [...new Set(list)];
/** Code-unit order: the same in every process (member ids are lower-case UUIDs, ordered alike by the databases' collations). */
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function createFeedRepo(db: Db) {
  const { sql, knex } = db;
  const lock = sql.dialect === 'mysql' ? ' FOR UPDATE' : '';
  const q = (tx?: Tx) => tx ?? sql;

  return {
    /**
     * Appends several messages, in the caller's unit, each at its chat's partition's next
     * seq, in the order given. The partitions' rows stay locked (on MySQL) until the unit
     * ends, so seqs commit in order (a reader never sees seq n+1 before n).
     */
    async appendMany(entries: { botId: string; chatId: number; payload: string }[], now: number, w: Writer): Promise<{ partition: number; seq: number }[]> {
      const partitions = entries.map((e) => feedPartitionOf(e.botId, e.chatId));
      const held = [...new Set(partitions)].sort((a, b) => a - b);
      const list = padded(sql, held);
      const rows = await w.all<{ partition_no: number; last_seq: number | string }>(LOCK_LAST_SEQS(list.length, lock), list);
      const last = new Map<number, number>(rows.map((r) => [Number(r.partition_no), Number(r.last_seq)]));
      const placed = place(partitions, last);
      w.update('feed_partitions', 'partition_no', LAST_SEQ, held.map((p) => [p, last.get(p)!]));
      w.insert('feed_messages', FEED_COLUMNS, entries.map((e, i) => [placed[i]!.partition, placed[i]!.seq, e.botId, e.chatId, e.payload, now]));
      return placed;
    },

    /** Each partition's last seq. */
    async heads(tx?: Tx): Promise<Map<number, number>> {
      const rows = await q(tx).all<{ partition_no: number; last_seq: number | string }>('SELECT partition_no, last_seq FROM feed_partitions');
      return new Map(rows.map((r) => [Number(r.partition_no), Number(r.last_seq)]));
    },

    /** Messages of a partition after `afterSeq`, in order, at most `limit`. */
    async read(partition: number, afterSeq: number, limit: number, tx?: Tx): Promise<FeedRow[]> {
      const rows = await q(tx).all<{ seq: number | string; bot_id: string; chat_id: number | string; payload: string }>(
        `SELECT seq, bot_id, chat_id, payload FROM feed_messages WHERE partition_no = ? AND seq > ? ORDER BY seq ASC LIMIT ${literalInt(limit)}`, [partition, afterSeq]);
      return rows.map((r) => ({ partition, seq: Number(r.seq), botId: r.bot_id, chatId: Number(r.chat_id), payload: r.payload }));
    },

    /**
     * Marks members (of any groups) alive until `now + ttlMs`, and forgets their groups'
     * members long gone: one statement per CHUNK members, and one per CHUNK groups.
     */
    async heartbeat(members: readonly { group: string; member: string }[], now: number, ttlMs: number): Promise<void> {
      const rows = [...members].sort((a, b) => cmp(a.group, b.group) || cmp(a.member, b.member))
        .map((m) => ({ group_name: m.group, member: m.member, expires_at: now + ttlMs }));
      for (const part of chunks(rows)) {
        await exec(sql, knex('feed_members').insert(part).onConflict(['group_name', 'member']).merge(['expires_at']));
      }
      for (const groups of chunks(distinct(members.map((m) => m.group)))) {
        await exec(sql, knex('feed_members').whereIn('group_name', groups).andWhere('expires_at', '<', now - ttlMs).delete());
      }
    },

    /** The groups' live members, each group's in a stable order (the same on every instance). */
    async liveMembers(groups: readonly string[], now: number): Promise<Map<string, string[]>> {
      const out = new Map<string, string[]>(groups.map((g) => [g, []]));
      for (const part of chunks(distinct(groups))) {
        const rows = await exec(sql, knex('feed_members').whereIn('group_name', part).andWhere('expires_at', '>', now).select('group_name', 'member'));
        for (const r of rows) out.get(r.group_name as string)?.push(r.member as string);
      }
      for (const list of out.values()) list.sort(cmp);
      return out;
    },

    /** The groups' partition leases. */
    async leases(groups: readonly string[]): Promise<FeedLease[]> {
      const out: FeedLease[] = [];
      for (const part of chunks(distinct(groups))) {
        const rows = await exec(sql, knex('feed_leases').whereIn('group_name', part).select('group_name', 'partition_no', 'member', 'expires_at'));
        for (const r of rows) out.push({ group: r.group_name, partition: Number(r.partition_no), member: r.member, expiresAt: Number(r.expires_at) });
      }
      return out;
    },

    /**
     * Takes the partitions that have no lease in their group for the members named (one
     * statement per CHUNK): a partition another instance took meanwhile stays its own.
     * Read the leases to learn which were taken.
     */
    async claim(leases: readonly { group: string; partition: number; member: string }[], now: number, ttlMs: number): Promise<void> {
      const rows = [...leases].sort((a, b) => cmp(a.group, b.group) || a.partition - b.partition)
        .map((l) => ({ group_name: l.group, partition_no: l.partition, member: l.member, expires_at: now + ttlMs }));
      for (const part of chunks(rows)) {
        await exec(sql, knex('feed_leases').insert(part).onConflict(['group_name', 'partition_no']).ignore());
      }
    },

    /** Takes a group's partitions whose leases have lapsed for a member (one statement). Read the leases to learn which were taken. */
    async takeOver(group: string, member: string, partitions: readonly number[], now: number, ttlMs: number): Promise<void> {
      await exec(sql, knex('feed_leases').where('group_name', group).whereIn('partition_no', [...partitions])
        .andWhere('expires_at', '<', now).update({ member, expires_at: now + ttlMs }));
    },

    /** Extends the leases these members (of any groups) hold: one statement per CHUNK members. */
    async renew(members: readonly { group: string; member: string }[], now: number, ttlMs: number): Promise<void> {
      for (const part of chunks([...members])) {
        await exec(sql, knex('feed_leases').whereIn('group_name', distinct(part.map((m) => m.group)))
          .whereIn('member', part.map((m) => m.member)).update({ expires_at: now + ttlMs }));
      }
    },

    /** Gives partitions up (all of the member's when none are named). */
    async release(group: string, member: string, partitions?: number[]): Promise<void> {
      let del = knex('feed_leases').where({ group_name: group, member });
      if (partitions) del = del.whereIn('partition_no', partitions);
      await exec(sql, del.delete());
    },

    /** Members leave their groups: their leases and their memberships go at once, in one transaction. */
    async leave(members: readonly { group: string; member: string }[]): Promise<void> {
      await sql.unit(async (w) => {
        for (const part of chunks(members)) {
          const groups = distinct(part.map((m) => m.group));
          const ids = part.map((m) => m.member);
          await exec(w, knex('feed_leases').whereIn('group_name', groups).whereIn('member', ids).delete());
          await exec(w, knex('feed_members').whereIn('group_name', groups).whereIn('member', ids).delete());
        }
      });
    },

    /** The group's committed positions of the partitions asked for. */
    async positions(group: string, partitions: number[]): Promise<Map<number, number>> {
      if (partitions.length === 0) return new Map();
      const rows = await sql.all<{ partition_no: number; seq: number | string }>(
        `SELECT partition_no, seq FROM feed_positions WHERE group_name = ? AND partition_no IN (${marks(partitions.length)})`, [group, ...partitions]);
      return new Map(rows.map((r) => [Number(r.partition_no), Number(r.seq)]));
    },

    /** Records positions; a position never goes back. */
    async commit(group: string, positions: { partition: number; seq: number }[], now: number): Promise<void> {
      await sql.unit(async (w) => {
        for (const p of [...positions].sort((a, b) => a.partition - b.partition)) {
          await exec(w, knex('feed_positions').insert({ group_name: group, partition_no: p.partition, seq: p.seq, updated_at: now })
            .onConflict(['group_name', 'partition_no']).ignore());
          await exec(w, knex('feed_positions').where({ group_name: group, partition_no: p.partition }).andWhere('seq', '<', p.seq)
            .update({ seq: p.seq, updated_at: now }));
        }
      });
    },
  };
}

export type FeedRepo = ReturnType<typeof createFeedRepo>;
