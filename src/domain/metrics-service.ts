/**
 * The console's per-bot metrics read: runtime calls by method and status, the
 * daily quota, updates pending, delivered and dead, and webhook attempts, over a
 * window of whole minutes. Counts come from the usage statistics every process
 * writes (this process's own are flushed first) and from the quota counter.
 */
import type { RateSetting } from '../config.js';
import { ApiError } from '../errors.js';
import type { BotMetrics, RateLimit } from '../gen/botplatform/v1/console_service.js';
import { constraintsOf } from '../gen/constraints.js';
import type { BotsRepo } from '../storage/bots-repo.js';
import type { DeliveriesRepo } from '../storage/deliveries-repo.js';
import type { LimitsRepo, StatTotal } from '../storage/limits-repo.js';
import type { UpdatesRepo } from '../storage/updates-repo.js';
import { DAY_MS, quotaKey, windowOf } from './limit-keys.js';
import { createOwnBots } from './own-bot.js';
import type { ConsoleRpc } from './rpc.js';
import { MINUTE_MS, type UsageRecorder } from './usage.js';

export interface MetricsDeps {
  bots: BotsRepo;
  updates: UpdatesRepo;
  deliveries: DeliveriesRepo;
  limits: LimitsRepo;
  usage: UsageRecorder;
  /** The limits in force (null: off); dailyQuota 0: none. */
  settings: { botRate: RateSetting | null; chatRate: RateSetting | null; dailyQuota: number };
  /** Gives back what this process's limiter reserved ahead on the bot's counters (its quota then reads what was used). */
  settleLimits?: (botId: string) => Promise<void>;
  now?: () => number;
}

const WINDOW = constraintsOf('botplatform.v1.GetBotMetricsRequest', 'window_seconds');

const rateOf = (r: RateSetting | null): RateLimit | undefined =>
  r ? { limit: r.count, windowSeconds: Math.round(r.windowMs / 1000) } : undefined;

/**
 * Where a window of the last `windowSeconds` before `at` starts, in whole minutes (the
 * statistics are kept per minute): the start of the minute that holds `at - window`, so
 * the window covers at least what was asked (60 s at 12:00:01 starts at 11:59:00; it
 * used to start at 12:00:00 and cover one second).
 */
export function windowStart(at: number, windowSeconds: number): number {
  return Math.floor((at - windowSeconds * 1000) / MINUTE_MS) * MINUTE_MS;
}

/** Most buckets a window's series has (a minute each up to 2 hours). */
const MAX_BUCKETS = 120;

/** The per-minute statistics of a window as buckets (empty ones included), oldest first. */
export function seriesOf(rows: (StatTotal & { minute: number })[], since: number, at: number, windowSeconds: number): Pick<BotMetrics, 'series' | 'bucketSeconds'> {
  const minutes = Math.max(1, Math.ceil((windowSeconds * 1000) / MINUTE_MS));
  const bucketMs = Math.ceil(minutes / MAX_BUCKETS) * MINUTE_MS;
  const count = Math.floor((at - since) / bucketMs) + 1;
  const series = Array.from({ length: count }, (_, i) => ({
    start: new Date(since + i * bucketMs), calls: 0, errors: 0, webhookAttempts: 0, webhookFailed: 0, sumMs: 0, maxLatencyMs: 0,
  }));
  for (const r of rows) {
    const b = series[Math.floor((r.minute - since) / bucketMs)];
    if (!b) continue;
    const call = /^call:[^:]+:([A-Z_]+)$/.exec(r.name);
    if (call) {
      b.calls += r.count;
      if (call[1] !== 'OK') b.errors += r.count;
    } else if (r.name === 'webhook:ok' || r.name === 'webhook:failed') {
      b.webhookAttempts += r.count;
      if (r.name === 'webhook:failed') b.webhookFailed += r.count;
      b.sumMs += r.sumMs;
      b.maxLatencyMs = Math.max(b.maxLatencyMs, r.maxMs);
    }
  }
  return {
    bucketSeconds: bucketMs / 1000,
    series: series.map(({ sumMs, ...b }) => ({ ...b, avgLatencyMs: b.webhookAttempts > 0 ? sumMs / b.webhookAttempts : undefined })),
  };
}

export function createMetricsService(deps: MetricsDeps): Pick<ConsoleRpc, 'getBotMetrics'> {
  const now = deps.now ?? Date.now;
  const own = createOwnBots(deps.bots);

  return {
    async getBotMetrics(req, { principal }) {
      const windowSeconds = req.windowSeconds ?? 3600;
      if (!Number.isInteger(windowSeconds) || windowSeconds < WINDOW.minimum || windowSeconds > WINDOW.maximum) {
        throw ApiError.invalid('window_seconds', 'OUT_OF_RANGE', `must be from ${WINDOW.minimum} to ${WINDOW.maximum}`);
      }
      const bot = await own.find(principal.accountId, req.id);

      await Promise.all([deps.usage.flush(), deps.settleLimits?.(bot.id)]);
      const at = now();
      const since = windowStart(at, windowSeconds);
      const [totals, rows, quotaCounter, pending] = await Promise.all([
        deps.limits.statTotals(bot.id, since),
        deps.limits.statRows(bot.id, since),
        deps.limits.counter(quotaKey(bot.id)),
        bot.deliveryMode === 'webhook' ? deps.deliveries.openCount(bot.id) : deps.updates.pendingCount(bot.id),
      ]);

      const callsByMethod: Record<string, number> = {};
      const errorsByStatus: Record<string, number> = {};
      let callsTotal = 0;
      let errorsTotal = 0;
      const stat = (name: string) => totals.find((t) => t.name === name);
      for (const t of totals) {
        const m = /^call:([^:]+):([A-Z_]+)$/.exec(t.name);
        if (!m) continue;
        callsTotal += t.count;
        callsByMethod[m[1]!] = (callsByMethod[m[1]!] ?? 0) + t.count;
        if (m[2] !== 'OK') {
          errorsTotal += t.count;
          errorsByStatus[m[2]!] = (errorsByStatus[m[2]!] ?? 0) + t.count;
        }
      }

      const day = windowOf(at, DAY_MS);
      const quotaLimit = deps.settings.dailyQuota;
      const used = quotaCounter && quotaCounter.windowStart === day.windowStart ? quotaCounter.count : 0;
      const ok = stat('webhook:ok');
      const failed = stat('webhook:failed');
      const attempts = (ok?.count ?? 0) + (failed?.count ?? 0);

      const metrics: BotMetrics = {
        windowSeconds,
        since: new Date(since),
        callsTotal,
        errorsTotal,
        callsByMethod,
        errorsByStatus,
        quota: {
          limit: quotaLimit,
          used,
          remaining: quotaLimit > 0 ? Math.max(0, quotaLimit - used) : 0,
          resetsAt: new Date(day.windowEnd),
          unlimited: quotaLimit === 0,
        },
        rateLimit: rateOf(deps.settings.botRate),
        chatRateLimit: rateOf(deps.settings.chatRate),
        updates: { pending, delivered: stat('updates:delivered')?.count ?? 0, dead: stat('updates:dead')?.count ?? 0 },
        webhook: {
          attempts,
          succeeded: ok?.count ?? 0,
          failed: failed?.count ?? 0,
          successRate: attempts > 0 ? (ok?.count ?? 0) / attempts : undefined,
          avgLatencyMs: attempts > 0 ? ((ok?.sumMs ?? 0) + (failed?.sumMs ?? 0)) / attempts : undefined,
          maxLatencyMs: Math.max(ok?.maxMs ?? 0, failed?.maxMs ?? 0),
        },
        ...seriesOf(rows, since, at, windowSeconds),
      };
      return { metrics };
    },
  };
}

export type MetricsService = ReturnType<typeof createMetricsService>;
