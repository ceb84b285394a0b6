/**
 * The dispatcher role: delivers due webhook deliveries. Woken per bot by the
 * updates topic (a consumer group shared by every dispatcher: one bot's updates
 * go to one dispatcher at a time), and sweeping the database for what is due
 * (retries, deliveries whose dispatcher died mid-attempt) so nothing depends on
 * the bus for correctness. Each attempt runs under a short lease (LEASE_MS) that a
 * heartbeat renews every HEARTBEAT_MS, in one statement for all of this process's
 * attempts whose lease is past its first half second, until the outcome is written: a dispatcher killed mid-attempt leaves its
 * deliveries due again within LEASE_MS. The outcome write checks the lease token, so a
 * holder that lost its lease cannot overwrite the next one's. A bot never has more
 * than its max_connections attempts in flight, and first attempts start in
 * update_seq order.
 *
 * Ramp-up: per bot, attempts run within a concurrency window that starts at 1 (a
 * dispatcher's start, or a bot seen afresh), grows by one per success (so doubles per
 * round trip, as TCP's slow start) up to max_connections, and halves on each attempt
 * that says the receiver is overloaded (timeout, connection failure, 429/502/503/504).
 * A backlog thus reaches a receiver gradually instead of all at once.
 *
 * Rate: a bot whose webhook has max_deliveries_per_second gets at most that many
 * attempts started per second, from a token bucket in its state object (refilled
 * continuously, holding at most a tenth of a second's worth, at least one token), so
 * a backlog after an outage reaches the bot's server at that pace. A bot out of
 * tokens is kicked again when its next token is due. The bucket is this process's:
 * a bot's updates go to one dispatcher at a time (the bus's partitioning), but
 * during a rebalance, or when several dispatchers' sweeps find the same bot's
 * retries, each may use its own bucket for a moment.
 *
 * Disabled webhooks (failing for WEBHOOK_DISABLE_AFTER): their max reads as 0, so
 * nothing is claimed for them; the sweep leaves them out.
 *
 * Drained bots: a claim that found fewer due deliveries than it had room for marks the
 * bot drained, and the bot's own attempts ending no longer claim for it (each would be a
 * query that finds nothing); its new updates (the bus) and the sweep (retries falling
 * due, leases running out, recoveries) wake it again.
 *
 * Per bot, the dispatcher keeps one small state object (attempts in flight, the
 * limits read last, the window, the token bucket): kept while the bot has attempts
 * in flight or its limits are fresh, dropped after, so the process holds nothing
 * for idle bots.
 *
 * Isolation: the process-wide budget (maxInFlight) counts only attempts that are
 * progressing. An attempt still waiting for its answer after slowMs is parked: it
 * goes on (until the timeout) outside the budget, in a second pool four times its
 * size, so endpoints that hang cannot use up the slots of the bots that answer.
 *
 * Origins: the webhook client lets at most `perOrigin` requests progress at once at one
 * origin (host and port per allowed_ips policy; WEBHOOK_SOCKETS_PER_ORIGIN), the rest
 * wait there for a turn. The dispatcher claims for an origin no more than those turns
 * and half as many again (ready for the turns freed before its next claim): with many bots
 * behind one endpoint it claimed up to its whole budget, and the attempts waiting for a
 * turn held their leases, rows and requests for longer than two scavenges, so each was
 * promoted and collected as old garbage (bench:webhooks' burst, 1,000 bots on one origin:
 * 744 of 1,000 attempts waiting). A bot held back for its origin is kicked when an attempt
 * there ends or is parked (parked attempts leave the origin's count, as they leave its
 * turns); the sweep finds it too. A bot's origin is read with its limits; bots on other
 * origins are not held.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.js';
import type { DeliveriesRepo, LeasedDelivery } from '../storage/deliveries-repo.js';
import { WEBHOOK_UPDATES_TOPIC } from '../bus/topics.js';
import type { WebhooksRepo } from '../storage/webhooks-repo.js';
import { HEARTBEAT_MS, isCongestion, LEASE_MS, type Attempts } from './attempts.js';
import { Slots } from '../slots.js';

export interface DispatcherOptions {
  deliveries: DeliveriesRepo;
  webhooks: WebhooksRepo;
  attempts: Attempts;
  bus: Bus;
  logger: Logger;
  timeoutMs: number;
  /** Most attempts in flight in this process. */
  maxInFlight: number;
  /** How often the database is swept for due deliveries. */
  sweepMs: number;
  /** After how long an unanswered attempt leaves the budget (default: a quarter of the timeout, at most 1 s). */
  slowMs?: number;
  /** How long a bot's limits (max_connections, max_deliveries_per_second, disabled) are used before they are read again (default 5 s). */
  limitTtlMs?: number;
  /**
   * The bots this dispatcher's sweep takes (default: all). Dispatcher threads sharing one
   * database each take their share (the thread bus's slot of the bot), so one bot is
   * served by one thread: its max_connections and its rate hold across them.
   */
  owns?: (botId: string) => boolean;
  /**
   * The webhook client's turns per origin (see Origins above) and the origin a webhook's
   * requests take them at (null: none); without them, claims are not bounded per origin.
   */
  perOrigin?: number;
  originOf?: (url: string, allowedIps: string[]) => string | null;
}

export const DISPATCHER_GROUP = 'botplatform-dispatchers';
/** The heartbeat renews the leases with less than this left (ms; see heartbeat). */
const RENEW_WITHIN_MS = LEASE_MS - HEARTBEAT_MS / 2;
/** Parked (slow) attempts allowed per budget slot. */
const PARKED_PER_SLOT = 4;
/** Idle bots whose limit may stay cached; past this, idle ones are dropped at once. */
const MAX_IDLE_BOTS = 10_000;

/** The dispatcher's state of one bot. */
interface BotState {
  /** Its attempts in flight in this process. */
  inFlight: number;
  /** Its max_connections, as read at `readAt`. */
  max: number;
  readAt: number;
  /** How many attempts it may have in flight now (at most max): see Ramp-up above. */
  window: number;
  /** Its max_deliveries_per_second (null: none), and its token bucket: tokens as of refilledAt. */
  perSecond: number | null;
  tokens: number;
  refilledAt: number;
  /** A kick is scheduled for when its next token is due. */
  waking: boolean;
  /** Its last claim found all it had due (see Drained bots above). */
  drained: boolean;
  /** Counts the kicks from outside (bus, sweep): a claim marks the bot drained only if none came meanwhile. */
  woken: number;
  /** The origin its requests take turns at, as read with its limits (null: unknown, or none). */
  origin: string | null;
}

const newBotState = (max: number, readAt: number, perSecond: number | null = null, origin: string | null = null): BotState =>
  ({ inFlight: 0, max, readAt, window: 1, perSecond, tokens: perSecond === null ? 0 : burstOf(perSecond), refilledAt: readAt, waking: false, drained: false, woken: 0, origin });

/** The most tokens a bucket holds: a tenth of a second's worth, at least one. */
const burstOf = (perSecond: number) => Math.max(1, perSecond / 10);

/** Refills the bot's bucket up to `now`; answers the whole tokens it holds (Infinity: no limit). */
function tokensOf(s: BotState, now: number): number {
  if (s.perSecond === null) return Infinity;
  s.tokens = Math.min(burstOf(s.perSecond), s.tokens + ((now - s.refilledAt) * s.perSecond) / 1000);
  s.refilledAt = now;
  return Math.floor(s.tokens);
}

export function createDispatcher(opts: DispatcherOptions) {
  const holder = `dispatcher-${crypto.randomUUID()}`;
  const leaseMs = LEASE_MS;
  /** The leases of the attempts running here (delivery id → token, and until when it is known held). */
  const held = new Map<string, { token: string; until: number }>();
  let heartbeatTimer: NodeJS.Timeout | null = null;
  let heartbeatFailures = 0;
  let beating: Promise<void> | null = null;
  const bots = new Map<string, BotState>();
  const limitTtlMs = opts.limitTtlMs ?? 5000;
  /** The attempts under way here, for stop() to wait on (Slots, not a Set: see src/slots.ts). */
  const running = new Slots<Promise<void>>();
  const slowMs = opts.slowMs ?? Math.min(1000, Math.floor(opts.timeoutMs / 4));
  let total = 0; // attempts counted against the budget
  let parked = 0; // slow attempts, outside it
  let stopped = false;
  let sweepTimer: NodeJS.Timeout | null = null;
  const kicked = new Set<string>();
  let kicking: Promise<void> | null = null;
  /** Timers that kick rate-limited bots when their next token is due. */
  const wakers = new Set<NodeJS.Timeout>();
  /** Most attempts progressing at one origin (see Origins above): its turns and half as many again. */
  const originCap = opts.perOrigin === undefined ? Infinity : opts.perOrigin + Math.ceil(opts.perOrigin / 2);
  /**
   * The room an origin needs before its held bots go (a quarter of its turns): they are claimed
   * for in batches, not in a claim statement per freed turn, while the half more keeps its
   * turns busy meanwhile.
   */
  const originBatch = opts.perOrigin === undefined ? 1 : Math.max(1, Math.ceil(opts.perOrigin / 4));
  /** Attempts progressing (not parked) per origin. */
  const atOrigin = new Map<string, number>();
  /** Bots held back while their origin had no room, per origin, first come first served. */
  const heldAt = new Map<string, Set<string>>();
  const originOfLimits = (l: { url?: string; allowedIps?: string[] } | undefined) =>
    (l?.url !== undefined && opts.originOf && opts.perOrigin !== undefined ? opts.originOf(l.url, l.allowedIps ?? []) : null);

  // A bot that may have nothing in flight (its webhook disabled or gone) is read again on
  // each kick: an enabled webhook resumes at once. Such bots are not swept, only woken by
  // their new updates.
  const fresh = (s: BotState, now: number) => s.max > 0 && now - s.readAt < limitTtlMs;
  /** Drops the state of bots with nothing in flight whose limit is stale (`all`: any idle bot). */
  function forgetIdle(all = false) {
    const now = Date.now();
    for (const [botId, s] of bots) if (s.inFlight === 0 && (all || !fresh(s, now))) bots.delete(botId);
  }

  /** max_connections of each bot (its limits read in one query for those not read in the last limitTtlMs). */
  async function maxConnections(botIds: string[]): Promise<Map<string, number>> {
    // Each bot's max as read here: forgetIdle(true) below may drop the state of a bot of
    // this very round (read fresh before, nothing in flight), which must not read as 0 (a
    // bot with a due delivery left out of the round, and of the waiting ones, for good).
    const out = new Map<string, number>();
    const stale: string[] = [];
    const at = Date.now();
    for (const b of botIds) {
      const s = bots.get(b);
      if (s && fresh(s, at)) out.set(b, s.max);
      else stale.push(b);
    }
    if (stale.length > 0) {
      const found = await opts.webhooks.limitsOf(stale);
      const readAt = Date.now();
      if (bots.size + stale.length > MAX_IDLE_BOTS) forgetIdle(true);
      for (const b of stale) {
        const limits = found.get(b);
        const { max, perSecond } = limits ?? { max: 0, perSecond: null };
        const origin = originOfLimits(limits);
        out.set(b, max);
        const s = bots.get(b);
        if (!s) bots.set(b, newBotState(max, readAt, perSecond, origin));
        else {
          tokensOf(s, readAt);
          if (s.perSecond === null && perSecond !== null) s.tokens = burstOf(perSecond);
          Object.assign(s, { max, readAt, perSecond, origin });
        }
      }
    }
    return out;
  }

  function launch(d: LeasedDelivery, claimedAt: number) {
    let bot = bots.get(d.botId);
    if (!bot) bots.set(d.botId, (bot = newBotState(0, 0)));
    bot.inFlight++;
    const lease = { token: d.leaseToken, until: claimedAt + leaseMs };
    held.set(d.id, lease);
    total++;
    // Counted at its bot's origin until it ends or is parked (see Origins above).
    const origin = bot.origin;
    if (origin !== null) atOrigin.set(origin, (atOrigin.get(origin) ?? 0) + 1);
    let isParked = false;
    // Still unanswered after slowMs: park it (when the parking pool has room), freeing a budget slot.
    const park = setTimeout(() => {
      if (parked >= PARKED_PER_SLOT * opts.maxInFlight) return;
      isParked = true;
      parked++;
      total--;
      if (origin !== null) leaveOrigin(origin);
      kickWaiting();
    }, slowMs);
    park.unref();
    const p = opts.attempts.attempt(d, d.leaseToken, {
      webhook: d.webhook,
      leaseHeld: () => Date.now() < lease.until,
      onResult: (r) => {
        if (r.ok) bot.window = Math.min(bot.window + 1, Math.max(1, bot.max));
        else if (isCongestion(r)) bot.window = Math.max(1, Math.floor(bot.window / 2));
      },
    })
      .catch((err) => opts.logger.error({ err, delivery: d.id }, 'delivery attempt failed unexpectedly'))
      .then(() => {
        clearTimeout(park);
        if (held.get(d.id) === lease) held.delete(d.id);
        bot.inFlight--;
        if (bot.inFlight === 0 && !fresh(bot, Date.now()) && bots.get(d.botId) === bot) bots.delete(d.botId);
        if (isParked) parked--;
        else {
          total--;
          if (origin !== null) leaveOrigin(origin);
        }
        running.delete(slot, p);
        // A slot of this bot is free: its next due delivery may go.
        kick(d.botId);
        if (starved.size > 0) kickWaiting();
      });
    const slot = running.add(p);
  }

  /** An attempt at `origin` ended or was parked: bots held back for it may go. */
  function leaveOrigin(origin: string) {
    const n = atOrigin.get(origin)! - 1;
    if (n > 0) atOrigin.set(origin, n);
    else atOrigin.delete(origin);
    kickHeld(origin);
  }

  /** Kicks bots held back for `origin`, first come first served, as many as it has room for. */
  function kickHeld(origin: string) {
    const waiting = heldAt.get(origin);
    if (!waiting) return;
    let room = originCap - (atOrigin.get(origin) ?? 0);
    if (room < originBatch) return;
    for (const b of waiting) {
      if (room <= 0) break;
      waiting.delete(b);
      if (kick(b)) room--;
    }
    if (waiting.size === 0) heldAt.delete(origin);
  }

  function hold(origin: string, botId: string) {
    let waiting = heldAt.get(origin);
    if (!waiting) heldAt.set(origin, (waiting = new Set()));
    waiting.add(botId);
  }

  /**
   * Bots left without a slot when the budget ran out get the next freed ones, first come
   * first served: as many are kicked as the budget has room for, not all of them (with
   * 100,000 bots waiting, each freed slot kicked them all, and the rounds that found no
   * budget for them kept the thread's event loop from ever reading an answer).
   */
  const starved = new Set<string>();
  /**
   * Where the next kickWaiting goes on from: a live iterator of `starved` (it sees bots added
   * after it), so each call starts at the oldest waiting bot without walking the entries
   * deleted before it (a new `for…of` would, the whole set's worth per freed slot).
   */
  let starvedAt: Iterator<string> | undefined;
  function kickWaiting() {
    let room = opts.maxInFlight - total;
    while (room > 0 && starved.size > 0) {
      starvedAt ??= starved.values();
      const next = starvedAt.next();
      if (next.done) {
        starvedAt = undefined;
        continue;
      }
      starved.delete(next.value);
      if (kick(next.value)) room--;
    }
  }

  /** Claims and starts what is due for these bots, each up to its free slots, in one round. */
  async function runBots(round: string[]) {
    // Each bot that starts needs a slot of the budget: bots past the budget's room wait for
    // a freed slot, without their limits read for nothing.
    const room = opts.maxInFlight - total;
    const botIds = round.slice(0, Math.max(0, room));
    for (let i = botIds.length; i < round.length; i++) starved.add(round[i]!);
    if (botIds.length === 0) return;
    const max = await maxConnections(botIds);
    let budget = opts.maxInFlight - total;
    const free = new Map<string, number>();
    /** Slots given in this round per origin (see Origins above). */
    const planned = new Map<string, number>();
    const at = Date.now();
    for (const b of botIds) {
      const s = bots.get(b);
      const slots = Math.min(max.get(b)!, s?.window ?? 1) - (s?.inFlight ?? 0);
      const tokens = s ? tokensOf(s, at) : Infinity;
      const own = Math.min(slots, tokens);
      let n = Math.min(own, budget);
      const origin = s?.origin ?? null;
      if (n > 0 && origin !== null) {
        const given = planned.get(origin);
        const room = originCap - (atOrigin.get(origin) ?? 0) - (given ?? 0);
        // The round's first bot of an origin needs a batch's room; the next ones, what is left.
        if (room <= 0 || (given === undefined && room < originBatch)) {
          hold(origin, b); // its origin's turns are taken: it goes when one is freed
          continue;
        }
        n = Math.min(n, room);
        planned.set(origin, (given ?? 0) + n);
      }
      if (n > 0) {
        free.set(b, n);
        budget -= n;
      } else if (own > 0) starved.add(b); // its own slots are free, the budget is not
      else if (slots > 0 && s) wakeForToken(b, s, at); // its slots are free, its rate is used up
    }
    if (stopped) return;
    if (free.size === 0) {
      // None of these could use the budget: what is left of it goes to waiting bots.
      if (starved.size > 0) kickWaiting();
      return;
    }
    const woken = new Map([...free.keys()].map((b) => [b, bots.get(b)?.woken]));
    const now = Date.now();
    const claimed = await opts.deliveries.claimForBots({ now, leaseMs, holder, free });
    const got = new Map<string, number>();
    for (const d of claimed) {
      const s = bots.get(d.botId);
      if (s && s.perSecond !== null) s.tokens -= 1;
      got.set(d.botId, (got.get(d.botId) ?? 0) + 1);
      launch(d, now);
    }
    for (const [b, n] of free) {
      const s = bots.get(b);
      if (s && (got.get(b) ?? 0) < n && s.woken === woken.get(b)) s.drained = true;
    }
    // A rate-limited bot that used its tokens may have more due: it goes on when the next token is.
    for (const [b] of free) {
      const s = bots.get(b);
      if (s && s.perSecond !== null && s.tokens < 1) wakeForToken(b, s, now);
    }
    // Budget this round left over (bots with nothing due, or no slot of their own) goes to waiting ones.
    if (starved.size > 0) kickWaiting();
    // So does an origin's room left over (bots that had less due than they were given).
    for (const origin of planned.keys()) kickHeld(origin);
  }

  /** Kicks the bot again once its bucket holds a whole token. */
  function wakeForToken(botId: string, s: BotState, now: number) {
    if (s.waking || stopped || s.perSecond === null) return;
    s.waking = true;
    const waitMs = Math.max(1, Math.ceil(((1 - s.tokens) * 1000) / s.perSecond));
    const t = setTimeout(() => {
      wakers.delete(t);
      s.waking = false;
      kick(botId);
    }, waitMs);
    t.unref();
    wakers.add(t);
  }

  /**
   * Runs the bot's due deliveries in the next round. `wake`: from outside (bus, sweep), it
   * may have new ones. Answers whether the bot is in the next round (not when drained).
   */
  function kick(botId: string, wake = false): boolean {
    if (stopped) return false;
    const s = bots.get(botId);
    if (s) {
      if (wake) {
        s.drained = false;
        s.woken++;
      } else if (s.drained) return false;
    }
    kicked.add(botId);
    if (kicking) return true;
    kicking = (async () => {
      try {
        while (kicked.size > 0 && !stopped) {
          // Every bot kicked meanwhile is served by the next round.
          const round = [...kicked].slice(0, 500);
          for (const b of round) kicked.delete(b);
          await runBots(round).catch((err) => opts.logger.warn({ err }, 'dispatch failed'));
          // A turn of the event loop between rounds: the SQLite driver answers without one,
          // and answers, timers and the bus must get their turn while many bots are kicked.
          if (kicked.size > 0) await new Promise<void>((resolve) => setImmediate(resolve));
        }
      } finally {
        kicking = null;
      }
    })();
    return true;
  }

  async function sweepLoop() {
    if (stopped) return;
    forgetIdle();
    try {
      await sweepDue();
    } catch (err) {
      opts.logger.warn({ err }, 'delivery sweep failed');
    }
    if (!stopped) sweepTimer = setTimeout(() => void sweepLoop(), opts.sweepMs);
  }

  /**
   * Renews the leases of the attempts running here (those past RENEW_WITHIN_MS), in one statement. A renewal that
   * fails is tried again on the next beat; leases not renewed in time are no longer
   * trusted (an attempt not yet sent is skipped), and an outcome is written only under
   * a lease still held.
   */
  async function heartbeat() {
    if (held.size === 0) return;
    const now = Date.now();
    // A lease with more than RENEW_WITHIN_MS left is renewed by a later beat (1.5 s before
    // it runs out at the latest): the attempts of a burst, answered within half a second
    // of their claim, are never renewed (renewing all of them cost a statement naming
    // every attempt in flight each second).
    const leases = [...held].filter(([, l]) => l.until - now < RENEW_WITHIN_MS);
    if (leases.length === 0) return;
    const until = now + leaseMs;
    try {
      await opts.deliveries.renewLeases(leases.map(([id, l]) => ({ id, leaseToken: l.token })), until);
      for (const [, l] of leases) l.until = Math.max(l.until, until);
      if (heartbeatFailures > 0) opts.logger.info({ failures: heartbeatFailures }, 'delivery leases renewed again');
      heartbeatFailures = 0;
    } catch (err) {
      heartbeatFailures++;
      opts.logger.warn({ err, failures: heartbeatFailures, leases: leases.length }, 'delivery lease renewal failed');
    }
  }

  async function heartbeatLoop() {
    await (beating = heartbeat());
    beating = null;
    if (heartbeatTimer) heartbeatTimer = setTimeout(() => void heartbeatLoop(), HEARTBEAT_MS);
  }

  /** Everything due, any bot (retries, abandoned leases): each such bot is kicked. */
  async function sweepDue() {
    const bots = await opts.deliveries.botsWithDue(Date.now(), 1000);
    for (const botId of bots) if (!opts.owns || opts.owns(botId)) kick(botId, true);
  }

  return {
    async start() {
      // Webhook bots' updates only: a polling bot's (the updates topic) are not the dispatchers' business.
      await opts.bus.subscribeGroup(DISPATCHER_GROUP, [WEBHOOK_UPDATES_TOPIC], (keys) => {
        for (const botId of keys) kick(botId, true);
      });
      void sweepLoop();
      heartbeatTimer = setTimeout(() => void heartbeatLoop(), HEARTBEAT_MS);
    },
    /** Attempts in flight now (parked slow ones included). */
    inFlight: () => total + parked,
    /** Bots this dispatcher keeps state for (those with attempts in flight or a fresh limit). */
    trackedBots: () => bots.size,
    /**
     * Stops taking work and waits for attempts in flight (bounded by the request
     * timeout), those of a claim round still running included, and their outcomes.
     */
    async stop() {
      stopped = true;
      if (sweepTimer) clearTimeout(sweepTimer);
      for (const t of wakers) clearTimeout(t);
      await kicking;
      await Promise.allSettled(running.values());
      // Leases were renewed until the last outcome was written.
      if (heartbeatTimer) clearTimeout(heartbeatTimer);
      heartbeatTimer = null;
      await beating;
    },
  };
}

export type Dispatcher = ReturnType<typeof createDispatcher>;
