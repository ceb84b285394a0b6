/**
 * The dispatcher role: delivers due webhook deliveries. Woken per bot by the
 * updates topic (a consumer group shared by every dispatcher: one bot's updates
 * go to one dispatcher at a time), and sweeping the database for what is due
 * (retries, deliveries whose dispatcher died mid-attempt) so nothing depends on
 * the bus for correctness. Each attempt runs under a lease. A bot never has more
 * than its max_connections attempts in flight, and first attempts start in
 * update_seq order.
 *
 * Per bot, the dispatcher keeps one small state object (attempts in flight, the
 * max_connections read last): kept while the bot has attempts in flight or its
 * limit is fresh, dropped after, so the process holds nothing for idle bots.
 *
 * Isolation: the process-wide budget (maxInFlight) counts only attempts that are
 * progressing. An attempt still waiting for its answer after slowMs is parked: it
 * goes on (until the timeout) outside the budget, in a second pool four times its
 * size, so endpoints that hang cannot use up the slots of the bots that answer.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.js';
import type { DeliveriesRepo, LeasedDelivery } from '../storage/deliveries-repo.js';
import { UPDATES_TOPIC } from '../storage/updates-repo.js';
import type { WebhooksRepo } from '../storage/webhooks-repo.js';
import { leaseFor, type Attempts } from './attempts.js';

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
  /** How long a bot's max_connections is used before it is read again (default 5 s). */
  limitTtlMs?: number;
}

export const DISPATCHER_GROUP = 'botplatform-dispatchers';
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
}

export function createDispatcher(opts: DispatcherOptions) {
  const holder = `dispatcher-${crypto.randomUUID()}`;
  const leaseMs = leaseFor(opts.timeoutMs);
  const bots = new Map<string, BotState>();
  const limitTtlMs = opts.limitTtlMs ?? 5000;
  const running = new Set<Promise<void>>();
  const slowMs = opts.slowMs ?? Math.min(1000, Math.floor(opts.timeoutMs / 4));
  let total = 0; // attempts counted against the budget
  let parked = 0; // slow attempts, outside it
  let stopped = false;
  let sweepTimer: NodeJS.Timeout | null = null;
  const kicked = new Set<string>();
  let kicking: Promise<void> | null = null;

  const fresh = (s: BotState, now: number) => now - s.readAt < limitTtlMs;
  /** Drops the state of bots with nothing in flight whose limit is stale (`all`: any idle bot). */
  function forgetIdle(all = false) {
    const now = Date.now();
    for (const [botId, s] of bots) if (s.inFlight === 0 && (all || !fresh(s, now))) bots.delete(botId);
  }

  /** max_connections of each bot (read in one query for those not read in the last limitTtlMs). */
  async function maxConnections(botIds: string[]): Promise<Map<string, number>> {
    const stale = botIds.filter((b) => !(bots.has(b) && fresh(bots.get(b)!, Date.now())));
    if (stale.length > 0) {
      const found = await opts.webhooks.maxConnectionsOf(stale);
      const readAt = Date.now();
      if (bots.size + stale.length > MAX_IDLE_BOTS) forgetIdle(true);
      for (const b of stale) {
        const s = bots.get(b);
        if (s) Object.assign(s, { max: found.get(b) ?? 0, readAt });
        else bots.set(b, { inFlight: 0, max: found.get(b) ?? 0, readAt });
      }
    }
    return new Map(botIds.map((b) => [b, bots.get(b)?.max ?? 0]));
  }

  function launch(d: LeasedDelivery) {
    let bot = bots.get(d.botId);
    if (!bot) bots.set(d.botId, (bot = { inFlight: 0, max: 0, readAt: 0 }));
    bot.inFlight++;
    total++;
    let isParked = false;
    // Still unanswered after slowMs: park it (when the parking pool has room), freeing a budget slot.
    const park = setTimeout(() => {
      if (parked >= PARKED_PER_SLOT * opts.maxInFlight) return;
      isParked = true;
      parked++;
      total--;
      kickWaiting();
    }, slowMs);
    park.unref();
    const p = opts.attempts.attempt(d, d.leaseToken, { webhook: d.webhook })
      .catch((err) => opts.logger.error({ err, delivery: d.id }, 'delivery attempt failed unexpectedly'))
      .then(() => {
        clearTimeout(park);
        bot.inFlight--;
        if (bot.inFlight === 0 && !fresh(bot, Date.now()) && bots.get(d.botId) === bot) bots.delete(d.botId);
        if (isParked) parked--;
        else total--;
        running.delete(p);
        // A slot of this bot is free: its next due delivery may go.
        kick(d.botId);
        if (starved.size > 0) kickWaiting();
      });
    running.add(p);
  }

  /** Bots left without a slot when the budget ran out get the next freed one. */
  const starved = new Set<string>();
  function kickWaiting() {
    const bots = [...starved];
    starved.clear();
    for (const b of bots) kick(b);
  }

  /** Claims and starts what is due for these bots, each up to its free slots, in one round. */
  async function runBots(botIds: string[]) {
    const max = await maxConnections(botIds);
    let budget = opts.maxInFlight - total;
    const free = new Map<string, number>();
    for (const b of botIds) {
      const own = max.get(b)! - (bots.get(b)?.inFlight ?? 0);
      const n = Math.min(own, budget);
      if (n > 0) {
        free.set(b, n);
        budget -= n;
      } else if (own > 0) starved.add(b); // its own slots are free, the budget is not
    }
    if (free.size === 0 || stopped) return;
    const claimed = await opts.deliveries.claimForBots({ now: Date.now(), leaseMs, holder, free });
    for (const d of claimed) launch(d);
  }

  function kick(botId: string) {
    if (stopped) return;
    kicked.add(botId);
    if (kicking) return;
    kicking = (async () => {
      try {
        while (kicked.size > 0 && !stopped) {
          // Every bot kicked meanwhile is served by the next round.
          const round = [...kicked].slice(0, 500);
          for (const b of round) kicked.delete(b);
          await runBots(round).catch((err) => opts.logger.warn({ err }, 'dispatch failed'));
        }
      } finally {
        kicking = null;
      }
    })();
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

  /** Everything due, any bot (retries, abandoned leases): each such bot is kicked. */
  async function sweepDue() {
    const bots = await opts.deliveries.botsWithDue(Date.now(), 1000);
    for (const botId of bots) kick(botId);
  }

  return {
    async start() {
      await opts.bus.subscribeGroup(DISPATCHER_GROUP, [UPDATES_TOPIC], (keys) => {
        for (const botId of keys) kick(botId);
      });
      void sweepLoop();
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
      await kicking;
      await Promise.allSettled([...running]);
    },
  };
}

export type Dispatcher = ReturnType<typeof createDispatcher>;
