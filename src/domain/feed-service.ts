/**
 * The outbound feed (InternalService.StreamSentMessages, CommitSentMessages): every
 * message bots send, from the database (feed tables, written with each send), so it
 * works with or without a bus and across service instances.
 *
 * Each stream is a member of its consumer group. Every tick it marks itself alive,
 * reads the group's live members and takes the partitions p with p mod n = its index
 * among them (n members, sorted), through leases: it gives up the partitions it should
 * no longer hold first, and takes a new one only once its previous holder has given it
 * up or its lease has lapsed. Between ticks it sends what its partitions have past its
 * positions, in seq order, as fast as the caller reads (each message is yielded only
 * when the transport has room), and otherwise waits for a send on this instance or the
 * next poll.
 */
import crypto from 'node:crypto';
import type { FeedPosition, StreamSentMessagesResponse } from '../gen/botplatform/v1/internal_service.js';
import { FEED_PARTITIONS, type FeedRepo, type FeedRow } from '../storage/feed-repo.js';
import { constraintsOf } from '../gen/constraints.js';
import type { CallSignal, InternalRpc } from './rpc.js';
import * as check from './validation.js';
import { fromWireMessage } from '../wire.js';

export interface FeedOptions {
  /** How long a member's partitions stay its own without a renewal (ms). */
  leaseTtlMs?: number;
  /** How often a member renews, and rebalances (ms). */
  tickMs?: number;
  /** How often an idle member looks for messages sent on other instances (ms). */
  pollMs?: number;
  /** Messages read per partition per step. */
  batch?: number;
  now?: () => number;
}

/** Wakes this instance's feed streams when a message is sent here. */
export function createFeedWaker() {
  const waiting = new Set<() => void>();
  return {
    sent() {
      for (const wake of [...waiting]) wake();
    },
    /** Resolves at the next send on this instance, after `ms`, or when `signal` aborts. */
    wait(ms: number, signal: CallSignal): Promise<void> {
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          waiting.delete(done);
          signal.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, Math.max(0, ms));
        waiting.add(done);
        signal.addEventListener('abort', done, { once: true });
        if (signal.aborted) done();
      });
    },
  };
}

export type FeedWaker = ReturnType<typeof createFeedWaker>;

/** The feed requests' limits, declared in the protos (internal_service.proto). */
const LIMITS = {
  group: constraintsOf('botplatform.v1.StreamSentMessagesRequest', 'group'),
  commitGroup: constraintsOf('botplatform.v1.CommitSentMessagesRequest', 'group'),
  start: constraintsOf('botplatform.v1.StreamSentMessagesRequest', 'start'),
  positions: constraintsOf('botplatform.v1.CommitSentMessagesRequest', 'positions'),
  partition: constraintsOf('botplatform.v1.FeedPosition', 'partition'),
  seq: constraintsOf('botplatform.v1.FeedPosition', 'seq'),
};
// The protos' partition range is the feed's: a cursor names partitions 0..FEED_PARTITIONS-1.
if (LIMITS.partition.minimum !== 0 || LIMITS.partition.maximum !== FEED_PARTITIONS - 1) {
  throw new Error(`FeedPosition.partition is declared ${LIMITS.partition.minimum}..${LIMITS.partition.maximum}; the feed has ${FEED_PARTITIONS} partitions`);
}

function checkGroup(v: check.Violations, group: string, limits: typeof LIMITS.group) {
  if (!group) v.add('group', 'REQUIRED', 'is required');
  else check.token(v, 'group', group, limits, 'of A-Z a-z 0-9 . _ -');
}

function checkPositions(v: check.Violations, field: string, positions: FeedPosition[], limits: { readonly maxItems: number }) {
  check.maxItems(v, field, positions, limits, 'positions');
  const seen = new Set<number>();
  positions.forEach((p, i) => {
    const before = v.list.length;
    check.inRange(v, `${field}[${i}].partition`, p.partition, LIMITS.partition);
    if (v.list.length === before && seen.has(p.partition)) v.add(`${field}[${i}].partition`, 'DUPLICATE', 'is given twice');
    seen.add(p.partition);
    check.inRange(v, `${field}[${i}].seq`, p.seq, LIMITS.seq);
  });
}

function toEvent(row: FeedRow): StreamSentMessagesResponse {
  const value = JSON.parse(row.payload) as { bot_id: string; message: unknown };
  return { message: { partition: row.partition, seq: row.seq, botId: value.bot_id, message: fromWireMessage(value.message) } };
}

export function createFeedService(deps: { feed: FeedRepo; waker: FeedWaker } & FeedOptions): Pick<InternalRpc, 'streamSentMessages' | 'commitSentMessages'> {
  const now = deps.now ?? Date.now;
  const ttl = deps.leaseTtlMs ?? 5000;
  const tickMs = deps.tickMs ?? 1000;
  const pollMs = deps.pollMs ?? 250;
  const batch = deps.batch ?? 100;

  /** One tick of a member: alive, its share worked out, leases given up and taken. Returns what it holds. */
  async function rebalance(group: string, member: string): Promise<number[]> {
    const at = now();
    await deps.feed.heartbeat(group, member, at, ttl);
    const members = await deps.feed.liveMembers(group, at);
    const index = Math.max(0, members.indexOf(member));
    const n = Math.max(1, members.length);
    const share = new Set(Array.from({ length: FEED_PARTITIONS }, (_, p) => p).filter((p) => p % n === index));
    const held = await deps.feed.renew(group, member, at, ttl);
    const giveUp = held.filter((p) => !share.has(p));
    if (giveUp.length > 0) await deps.feed.release(group, member, giveUp);
    const keep = held.filter((p) => share.has(p));
    for (const p of share) {
      if (!keep.includes(p) && (await deps.feed.acquire(group, p, member, at, ttl))) keep.push(p);
    }
    return keep.sort((a, b) => a - b);
  }

  return {
    async *streamSentMessages(req, ctx) {
      const v = new check.Violations();
      checkGroup(v, req.group, LIMITS.group);
      checkPositions(v, 'start', req.start, LIMITS.start);
      v.throwIfAny();
      const group = req.group;
      const member = crypto.randomUUID();
      /** The consumer's own cursor, per partition, applied when the stream first gets it. */
      const starts = new Map(req.start.map((p) => [p.partition, p.seq]));
      /** Partitions held → the seq last sent. */
      const positions = new Map<number, number>();
      let announced: string | undefined;
      let nextTick = 0;
      try {
        while (!ctx.signal.aborted) {
          if (now() >= nextTick) {
            const held = await rebalance(group, member);
            nextTick = now() + tickMs;
            for (const p of [...positions.keys()]) if (!held.includes(p)) positions.delete(p);
            const fresh = held.filter((p) => !positions.has(p));
            const committed = fresh.length > 0 ? await deps.feed.positions(group, fresh) : new Map<number, number>();
            for (const p of fresh) {
              positions.set(p, starts.get(p) ?? committed.get(p) ?? 0);
              starts.delete(p);
            }
            const key = held.join(',');
            if (key !== announced) {
              announced = key;
              yield { assignment: { partitions: held, partitionCount: FEED_PARTITIONS } };
            }
          }
          let sent = false;
          if (positions.size > 0) {
            const heads = await deps.feed.heads();
            for (const [p, pos] of positions) {
              if ((heads.get(p) ?? 0) <= pos) continue;
              for (const row of await deps.feed.read(p, pos, batch)) {
                yield toEvent(row);
                positions.set(p, row.seq);
                sent = true;
              }
              // A long backlog does not keep the leases from being renewed.
              if (now() >= nextTick || ctx.signal.aborted) break;
            }
          }
          if (!sent) await deps.waker.wait(Math.min(pollMs, nextTick - now()), ctx.signal);
        }
      } finally {
        // Gone: its partitions go to the group's other members at their next tick.
        await deps.feed.leave(group, member).catch(() => {});
      }
    },

    async commitSentMessages(req) {
      const v = new check.Violations();
      checkGroup(v, req.group, LIMITS.commitGroup);
      if (req.positions.length === 0) v.add('positions', 'REQUIRED', 'needs at least one position');
      checkPositions(v, 'positions', req.positions, LIMITS.positions);
      v.throwIfAny();
      await deps.feed.commit(req.group, req.positions, now());
      return {};
    },
  };
}

export type FeedService = ReturnType<typeof createFeedService>;

