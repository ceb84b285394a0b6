/**
 * The core's sweeps: what outlives its retention is deleted in the background, and
 * what the limiter reserved ahead goes back to the shared counters. Each runs on its
 * own timer; failures are logged and retried at the next tick.
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { every } from '../every.js';
import type { AttemptsRepo } from '../storage/attempts-repo.js';
import type { BotsRepo } from '../storage/bots-repo.js';
import type { DeliveriesRepo } from '../storage/deliveries-repo.js';
import type { LimitsRepo } from '../storage/limits-repo.js';
import type { QueriesRepo } from '../storage/queries-repo.js';
import type { UpdatesRepo } from '../storage/updates-repo.js';

export interface SweepTargets {
  bots: Pick<BotsRepo, 'purgeExpiredOneTimeTokens'>;
  updates: Pick<UpdatesRepo, 'purgeOlderThan' | 'purgeIngestKeys'>;
  /** Callback and inline queries, kept as long as idempotency keys (and at least as long as they may be answered). */
  queries: Pick<QueriesRepo, 'purgeOlderThan'>;
  limits: Pick<LimitsRepo, 'purgeCounters' | 'purgeStats'>;
  /** The delivery log: closed deliveries and attempts past DELIVERY_LOG_RETENTION. */
  deliveries: Pick<DeliveriesRepo, 'purgeClosedBefore'>;
  attemptsLog: Pick<AttemptsRepo, 'purgeOlderThan'>;
  /** Deleted bots whose DELETED_BOT_RETENTION has ended, and removing what is left of one. */
  deletedBots: { due(now: number, limit: number): Promise<string[]>; purge(botId: string): Promise<void> };
  /** Uploads never completed, and their staged bytes; content no file has referred to for UNREFERENCED_BLOB_RETENTION. */
  files: { sweep(): Promise<void>; sweepUnreferencedBlobs(limit?: number): Promise<number> };
  /** The rate limiter, when limits are on: its unused allowances. */
  limiter?: { release(): Promise<unknown> };
}

/** Starts the sweeps; the returned stop ends them, then gives back what the limiter still holds. */
export function startSweeps(config: Config, logger: Logger, t: SweepTargets): () => Promise<void> {
  const { limiter } = t;
  // Unread one-time tokens are discarded after their retention (reads also ignore
  // expired ones); unconfirmed updates after theirs.
  const sweeps = [
    every(Math.min(60_000, Math.max(1000, config.oneTimeTokenRetentionMs)),
      () => t.bots.purgeExpiredOneTimeTokens(Date.now()), logger, 'one-time token sweep'),
    every(Math.min(60_000, Math.max(1000, Math.min(config.updateRetentionMs, config.ingestIdempotencyWindowMs) / 2)), async () => {
      await t.updates.purgeOlderThan(Date.now() - config.updateRetentionMs);
      await t.updates.purgeIngestKeys(Date.now());
      await t.queries.purgeOlderThan(Date.now() - Math.max(config.ingestIdempotencyWindowMs, config.queryAnswerTimeoutMs));
    }, logger, 'update retention sweep'),
    every(Math.min(60_000, Math.max(1000, config.fileUrlTtlMs / 2)), () => t.files.sweep(), logger, 'upload sweep'),
    // Content no file refers to (a deleted bot's, purged): its bytes and row after their retention.
    every(Math.min(60_000, Math.max(1000, config.unreferencedBlobRetentionMs / 2)), async () => {
      while (await t.files.sweepUnreferencedBlobs(100) === 100);
    }, logger, 'blob sweep'),
    // The delivery log: attempts, and closed deliveries, whose last attempt is older than its retention.
    every(Math.min(60_000, Math.max(1000, config.deliveryLogRetentionMs / 2)), async () => {
      const before = Date.now() - config.deliveryLogRetentionMs;
      await t.attemptsLog.purgeOlderThan(before);
      await t.deliveries.purgeClosedBefore(before, Date.now());
    }, logger, 'delivery log sweep'),
    // Deleted bots past their retention: their remaining rows, then their tombstones (the username is free after).
    every(Math.min(60_000, Math.max(1000, config.deletedBotRetentionMs / 2)), async () => {
      for (const id of await t.deletedBots.due(Date.now(), 100)) await t.deletedBots.purge(id);
    }, logger, 'deleted bot sweep'),
    // Counters of ended windows, and statistics older than the longest metrics window (with a day's margin).
    every(60_000, async () => {
      await t.limits.purgeCounters(Date.now() - 60_000);
      await t.limits.purgeStats(Date.now() - 2 * 86_400_000);
    }, logger, 'limits and statistics sweep'),
    // What the limiter reserved ahead and has not used goes back to the counters, as often as usage is flushed.
    ...(limiter ? [every(config.statsFlushMs, () => limiter.release(), logger, 'limiter allowance release')] : []),
  ];
  return async () => {
    for (const stop of sweeps) await stop();
    await limiter?.release();
  };
}
