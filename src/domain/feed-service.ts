/**
 * The outbound feed (InternalService.StreamSentMessages, CommitSentMessages): every
 * message bots send, from the database (feed tables, written with each send), so it
 * works with or without a bus and across service instances.
 *
 * Each stream is a member of its consumer group. One tick a second per process (not per
 * member) works out each group's assignment once: each partition p goes to the member
 * at p mod n among the group's n live members (sorted), through leases. For all the
 * process's members and groups together, it marks the members alive, reads their
 * groups' live members, renews their leases and reads the groups' leases: five
 * statements (per 500 members) whatever their number. It then gives up the partitions
 * its members should no longer hold first (each member stops reading one before its
 * lease goes), and takes one for a member only once the previous holder has given it
 * up or its lease has lapsed: statements only for what changes. A member joining or
 * leaving asks for a tick at once (at most one per 100 ms). Between ticks a stream
 * sends what its partitions have past its positions, in seq order, as fast as the
 * caller reads (each message is yielded only when the transport has room), and
 * otherwise waits for a send on this instance or the next poll; a member holding
 * nothing waits for its assignment to change.
 *
 * Caps (issue 31: a thousand members of one group, each ticking on its own, took the
 * core's CPU): a group takes at most `maxGroupMembers` live members (counted across
 * instances as of the last tick, so instances admitting at the same moment may go a
 * little past it), one connection at most `maxStreamsPerConnection` streams; beyond,
 * RESOURCE_EXHAUSTED naming the setting.
 */
import crypto from 'node:crypto';
import { ApiError, Code } from '../errors.js';
import type { FeedPosition, StreamSentMessagesResponse } from '../gen/botplatform/v1/internal_service.js';
import { FEED_PARTITIONS, type FeedLease, type FeedRepo, type FeedRow } from '../storage/feed-repo.js';
import { constraintsOf } from '../gen/constraints.js';
import { createGroupCommit } from '../group-commit.js';
import type { CallSignal, InternalRpc } from './rpc.js';
import * as check from './validation.js';
import { fromWireFeedEvent, type WireFeedValue } from '../wire.js';

export interface FeedOptions {
  /** How long a member's partitions stay its own without a renewal (ms). */
  leaseTtlMs?: number;
  /** How often the process renews its members, and rebalances their groups (ms). */
  tickMs?: number;
  /** How often a member holding partitions looks for messages sent on other instances (ms). */
  pollMs?: number;
  /** Messages read per partition per step. */
  batch?: number;
  /** Most live members of one consumer group (FEED_MAX_GROUP_MEMBERS). */
  maxGroupMembers?: number;
  /** Most streams on one connection (FEED_MAX_STREAMS_PER_CONNECTION). */
  maxStreamsPerConnection?: number;
  now?: () => number;
}

/** Wakes this instance's feed streams when a message is sent here. */
export function createFeedWaker() {
  const listeners = new Set<() => void>();
  return {
    sent() {
      for (const wake of [...listeners]) wake();
    },
    /** Calls `wake` at each send on this instance until the returned function is called. */
    subscribe(wake: () => void): () => void {
      listeners.add(wake);
      return () => listeners.delete(wake);
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
  const { bot_id: botId, ...event } = JSON.parse(row.payload) as WireFeedValue;
  return { message: { partition: row.partition, seq: row.seq, botId, ...fromWireFeedEvent(event) } };
}

/** One stream: a member of its consumer group, as this process's tick sees it. */
interface Member {
  readonly id: string;
  readonly group: string;
  /** The partitions it holds as of the last tick (one being given up leaves this first). */
  held: number[];
  /** Counts changes of `held`; 0 until a tick has placed the member. */
  version: number;
  /** A tick's failure: the stream ends with it. */
  failure?: unknown;
  /** Ends the stream's wait, when it waits. */
  wake?: () => void;
}

/** A consumer group with members in this process. */
interface Group {
  local: Map<string, Member>;
  /** Its other live members (on other instances), as of the last tick. */
  others: number;
}

const byNumber = (a: number, b: number) => a - b;

/** Leases by group, then partition. */
function byGroup(leases: FeedLease[]): Map<string, Map<number, FeedLease>> {
  const out = new Map<string, Map<number, FeedLease>>();
  for (const l of leases) {
    let group = out.get(l.group);
    if (!group) out.set(l.group, (group = new Map()));
    group.set(l.partition, l);
  }
  return out;
}

export function createFeedService(deps: { feed: FeedRepo; waker: FeedWaker } & FeedOptions): Pick<InternalRpc, 'streamSentMessages' | 'commitSentMessages'> {
  const now = deps.now ?? Date.now;
  const ttl = deps.leaseTtlMs ?? 5000;
  const tickMs = deps.tickMs ?? 1000;
  const pollMs = deps.pollMs ?? 250;
  const batch = deps.batch ?? 100;
  const maxGroupMembers = deps.maxGroupMembers ?? 100;
  const maxStreamsPerConnection = deps.maxStreamsPerConnection ?? 100;

  /** The groups with members here, by name; a group's first member reads how many it has elsewhere. */
  const groups = new Map<string, Group>();
  /** Open streams per connection. */
  const streams = new Map<string, number>();

  /** Ticks and leaves, one at a time: a tick never marks alive a member whose leave has run. */
  let chain: Promise<unknown> = Promise.resolve();
  function serially<T>(fn: () => Promise<T>): Promise<T> {
    const run = chain.then(fn);
    chain = run.catch(() => {});
    return run;
  }

  let ticking = false;
  let again = false;
  let interrupt: (() => void) | undefined;
  /** Asked-for ticks come at most this often: members that come and go do not keep the database busy. */
  const soonestMs = Math.min(100, tickMs);
  /**
   * Asks for a tick soon (a member joined or left): after the one under way, at least
   * soonestMs after its start. Starts the ticks, every tickMs while the process has members.
   */
  function tickSoon() {
    again = true;
    interrupt?.();
    if (ticking) return;
    ticking = true;
    void (async () => {
      try {
        while ([...groups.values()].some((g) => g.local.size > 0)) {
          again = false;
          const started = Date.now();
          await serially(tick);
          await new Promise<void>((resolve) => {
            let timer: NodeJS.Timeout | undefined;
            const done = () => {
              clearTimeout(timer);
              interrupt = undefined;
              resolve();
            };
            const after = (ms: number) => {
              clearTimeout(timer);
              timer = setTimeout(done, Math.max(0, ms));
            };
            interrupt = () => after(started + soonestMs - Date.now());
            if (again) interrupt();
            else after(tickMs);
          });
        }
      } finally {
        ticking = false;
      }
    })();
  }

  /**
   * One tick: every member here alive, each of their groups' assignment worked out once,
   * partitions given up, then taken, for all the groups together.
   */
  async function tick(): Promise<void> {
    const at = now();
    const snapshot: { name: string; group: Group; members: Member[] }[] = [];
    for (const [name, group] of groups) {
      if (group.local.size === 0) groups.delete(name);
      else snapshot.push({ name, group, members: [...group.local.values()] });
    }
    if (snapshot.length === 0) return;
    const members = snapshot.flatMap((g) => g.members);
    const here = new Set(members.map((m) => m.id));
    const pairs = members.map((m) => ({ group: m.group, member: m.id }));
    const names = snapshot.map((g) => g.name);
    try {
      await deps.feed.heartbeat(pairs, at, ttl);
      const live = await deps.feed.liveMembers(names, at);
      await deps.feed.renew(pairs, at, ttl);
      const holders = byGroup(await deps.feed.leases(names));
      const plans = snapshot.map((g) => {
        g.group.others = (live.get(g.name) ?? []).filter((m) => !here.has(m)).length;
        return plan(g.name, g.members, live.get(g.name) ?? [], holders.get(g.name) ?? new Map(), at);
      });
      // Give up first: the member stops reading a partition before its lease goes.
      for (const p of plans) {
        for (const [m, partitions] of p.giveUp) {
          m.held = m.held.filter((x) => !partitions.includes(x));
          m.version++;
          m.wake?.();
          await deps.feed.release(p.group, m.id, partitions);
          for (const x of partitions) holders.get(p.group)?.delete(x);
        }
      }
      // Then take: what has no lease in one go, what has a lapsed one per member; then read who got what.
      const fresh = plans.flatMap((p) => p.fresh);
      if (fresh.length > 0) await deps.feed.claim(fresh, at, ttl);
      for (const p of plans) for (const [m, partitions] of p.lapsed) await deps.feed.takeOver(p.group, m.id, partitions, at, ttl);
      const tried = plans.filter((p) => p.fresh.length > 0 || p.lapsed.size > 0).map((p) => p.group);
      if (tried.length > 0) {
        const taken = byGroup(await deps.feed.leases(tried));
        for (const group of tried) holders.set(group, taken.get(group) ?? new Map());
      }
      for (const p of plans) {
        const leases = [...(holders.get(p.group)?.values() ?? [])];
        for (const m of p.members) {
          const held = leases.filter((l) => l.member === m.id).map((l) => l.partition).sort(byNumber);
          if (m.version > 0 && held.join() === m.held.join()) continue;
          m.held = held;
          m.version++;
          m.wake?.();
        }
      }
    } catch (err) {
      // As when each stream ticked on its own: the streams end (UNAVAILABLE when the database is unreachable).
      for (const m of members) {
        m.failure = err;
        m.wake?.();
      }
    }
  }

  /**
   * A group's assignment (partition p to the member at p mod n of its n live members),
   * and what the members here give up and take for it: partitions with no lease (or one
   * given up here) at once, lapsed ones by taking the lease over; one another member
   * holds waits until it is given up or lapses.
   */
  function plan(group: string, members: Member[], live: string[], holders: Map<number, FeedLease>, at: number) {
    const local = new Map(members.map((m) => [m.id, m]));
    const memberOf = (p: number) => local.get(live[p % Math.max(1, live.length)] ?? '');
    const giveUp = new Map<Member, number[]>();
    for (const l of holders.values()) {
      const m = local.get(l.member);
      if (m && memberOf(l.partition) !== m) giveUp.set(m, [...(giveUp.get(m) ?? []), l.partition]);
    }
    const fresh: { group: string; partition: number; member: string }[] = [];
    const lapsed = new Map<Member, number[]>();
    for (let p = 0; p < FEED_PARTITIONS; p++) {
      const m = memberOf(p);
      const holder = holders.get(p);
      if (!m || holder?.member === m.id) continue;
      if (!holder || local.has(holder.member)) fresh.push({ group, partition: p, member: m.id });
      else if (holder.expiresAt < at) lapsed.set(m, [...(lapsed.get(m) ?? []), p]);
    }
    return { group, members, giveUp, fresh, lapsed };
  }

  /** Joins a group, or refuses: the group is full. */
  async function join(name: string): Promise<Member> {
    for (;;) {
      const group = groups.get(name) ?? (await opened(name));
      if (groups.get(name) !== group) continue; // a tick dropped it meanwhile (it had no member yet)
      if (group.local.size + group.others >= maxGroupMembers) {
        throw new ApiError(Code.RESOURCE_EXHAUSTED, `consumer group "${name}" has ${group.local.size + group.others} members, the most FEED_MAX_GROUP_MEMBERS allows`);
      }
      const member: Member = { id: crypto.randomUUID(), group: name, held: [], version: 0 };
      group.local.set(member.id, member);
      tickSoon();
      return member;
    }
  }

  /**
   * A group new to this process, with how many members it has elsewhere: one read for
   * the groups asked for until it starts, after any leave under way (so that a member
   * that just left is not counted).
   */
  let toOpen = new Set<string>();
  let opening: Promise<Map<string, string[]>> | undefined;
  async function opened(name: string): Promise<Group> {
    toOpen.add(name);
    opening ??= serially(() => {
      const names = [...toOpen];
      toOpen = new Set();
      opening = undefined;
      return deps.feed.liveMembers(names, now());
    });
    const live = await opening;
    let group = groups.get(name);
    if (!group) groups.set(name, (group = { local: new Map(), others: live.get(name)?.length ?? 0 }));
    return group;
  }

  /** Leaves in one go (one transaction for all who left since), after any tick under way. */
  let leaving: { group: string; member: string }[] = [];
  function leave(m: Member): Promise<void> {
    const group = groups.get(m.group);
    group?.local.delete(m.id);
    if (group?.local.size === 0) groups.delete(m.group);
    leaving.push({ group: m.group, member: m.id });
    const done = serially(async () => {
      const gone = leaving;
      leaving = [];
      if (gone.length > 0) await deps.feed.leave(gone);
    });
    // Its partitions go to the group's other members here at once, elsewhere at their next tick.
    tickSoon();
    return done;
  }

  /** Waits for a send on this instance (`sends`), `ms`, a change of the member's assignment, or the caller leaving. */
  function pause(m: Member, ms: number, sends: boolean, signal: CallSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        unsubscribe?.();
        m.wake = undefined;
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = Number.isFinite(ms) ? setTimeout(done, Math.max(0, ms)) : undefined;
      const unsubscribe = sends ? deps.waker.subscribe(done) : undefined;
      m.wake = done;
      signal.addEventListener('abort', done, { once: true });
      if (signal.aborted || m.failure !== undefined) done();
    });
  }

  /**
   * The partitions' heads, one read for every stream that asks in the same turn of the
   * event loop, or while the previous read is under way (a group commit of reads): a
   * read started after a caller asked sees every commit the caller saw.
   */
  const headReads = createGroupCommit<void, Map<number, number>>(async (asks) => {
    const last = await deps.feed.heads();
    return asks.map(() => last);
  }, { gather: 'turn', maxBatch: Infinity });
  const heads = async () => (await headReads.write([undefined]))[0]!;

  return {
    async *streamSentMessages(req, ctx) {
      const v = new check.Violations();
      checkGroup(v, req.group, LIMITS.group);
      checkPositions(v, 'start', req.start, LIMITS.start);
      v.throwIfAny();
      const connection = ctx.connection ?? '';
      const open = streams.get(connection) ?? 0;
      if (open >= maxStreamsPerConnection) {
        throw new ApiError(Code.RESOURCE_EXHAUSTED, `this connection has ${open} feed streams open, the most FEED_MAX_STREAMS_PER_CONNECTION allows`);
      }
      streams.set(connection, open + 1);
      let member: Member | undefined;
      try {
        member = await join(req.group);
        const m = member;
        /** The consumer's own cursor, per partition, applied when the stream first gets it. */
        const starts = new Map(req.start.map((p) => [p.partition, p.seq]));
        /** Partitions held → the seq last sent. */
        const positions = new Map<number, number>();
        let announced: string | undefined;
        let seen = 0;
        while (!ctx.signal.aborted) {
          if (m.failure !== undefined) throw m.failure;
          if (m.version !== seen) {
            seen = m.version;
            const held = m.held;
            for (const p of [...positions.keys()]) if (!held.includes(p)) positions.delete(p);
            const fresh = held.filter((p) => !positions.has(p));
            const committed = fresh.length > 0 ? await deps.feed.positions(req.group, fresh) : new Map<number, number>();
            for (const p of fresh) {
              positions.set(p, starts.get(p) ?? committed.get(p) ?? 0);
              starts.delete(p);
            }
            const key = held.join(',');
            if (key !== announced) {
              announced = key;
              yield { assignment: { partitions: held, partitionCount: FEED_PARTITIONS } };
            }
            continue; // the assignment may have changed again meanwhile
          }
          let sent = false;
          if (positions.size > 0) {
            const last = await heads();
            for (const [p, pos] of positions) {
              if ((last.get(p) ?? 0) <= pos) continue;
              for (const row of await deps.feed.read(p, pos, batch)) {
                // A partition given up is not read on (its next holder starts at the committed position).
                if (!m.held.includes(p) || ctx.signal.aborted) break;
                yield toEvent(row);
                positions.set(p, row.seq);
                sent = true;
              }
              // A new assignment is taken up before a long backlog is read on.
              if (m.version !== seen || ctx.signal.aborted) break;
            }
          }
          if (!sent && m.version === seen) await pause(m, positions.size > 0 ? pollMs : Infinity, positions.size > 0, ctx.signal);
        }
      } finally {
        const left = (streams.get(connection) ?? 1) - 1;
        if (left > 0) streams.set(connection, left);
        else streams.delete(connection);
        // Gone: its partitions go to the group's other members at once.
        if (member) await leave(member).catch(() => {});
      }
    },

    async commitSentMessages(req) {
      const v = new check.Violations();
      checkGroup(v, req.group, LIMITS.commitGroup);
      if (req.positions.length === 0) v.add('positions', 'REQUIRED', 'needs at least one position');
      checkPositions(v, 'positions', req.positions, LIMITS.positions);
      v.throwIfAny();
      // A position past what its partition holds would silence the group for good (a
      // position never goes back): refused. Heads only grow, so one read before is enough.
      const last = await deps.feed.heads();
      req.positions.forEach((p, i) => {
        const head = last.get(p.partition) ?? 0;
        if (p.seq > head) v.add(`positions[${i}].seq`, 'OUT_OF_RANGE', `is past partition ${p.partition}'s last message (seq ${head})`);
      });
      v.throwIfAny();
      await deps.feed.commit(req.group, req.positions, now());
      return {};
    },
  };
}

export type FeedService = ReturnType<typeof createFeedService>;

