/**
 * Per-bot usage statistics for the console's metrics read: calls by method and
 * status, webhook attempts and their latency, updates delivered and dead. Each
 * process adds up its increments in memory per bot and minute and writes them
 * every `flushMs` in one batch (and on close), so the hot path never waits for
 * the database. Readers see another instance's numbers after its next flush.
 */
import type { Logger } from 'pino';
import type { LimitsRepo, StatIncrement } from '../storage/limits-repo.js';

export const MINUTE_MS = 60_000;

export function createUsageRecorder(deps: { repo: LimitsRepo; flushMs: number; logger: Logger; now?: () => number }) {
  const now = deps.now ?? Date.now;
  let pending = new Map<string, StatIncrement>();
  let timer: NodeJS.Timeout | null = null;
  let flushing: Promise<void> = Promise.resolve();

  /** Adds an increment to what is pending for its bot, minute and name. */
  function merge(inc: StatIncrement) {
    const key = `${inc.botId}\u0000${inc.minute}\u0000${inc.name}`;
    const p = pending.get(key);
    if (p) {
      p.count += inc.count;
      p.sumMs += inc.sumMs;
      p.maxMs = Math.max(p.maxMs, inc.maxMs);
    } else pending.set(key, inc);
  }

  function add(botId: string, name: string, count = 1, ms = 0) {
    const minute = Math.floor(now() / MINUTE_MS) * MINUTE_MS;
    // What every call adds to: found without making an increment first.
    const p = pending.get(`${botId}\u0000${minute}\u0000${name}`);
    if (p) {
      p.count += count;
      p.sumMs += ms;
      p.maxMs = Math.max(p.maxMs, ms);
    } else merge({ botId, minute, name, count, sumMs: ms, maxMs: ms });
  }

  /** Writes what has accumulated; flushes run one after another. */
  function flush(): Promise<void> {
    flushing = flushing.then(async () => {
      if (pending.size === 0) return;
      const batch = [...pending.values()];
      pending = new Map();
      try {
        await deps.repo.addStats(batch);
      } catch (err) {
        deps.logger.warn({ err, increments: batch.length }, 'usage statistics not written; will retry');
        for (const s of batch) merge(s);
      }
    });
    return flushing;
  }

  return {
    /** One runtime call of a bot: `method` as the bot names it (getMe), `status` a gRPC status name. */
    call(botId: string, method: string, status: string) {
      add(botId, `call:${method}:${status}`);
    },
    /** One webhook attempt and its outcome. */
    webhookAttempt(botId: string, ok: boolean, durationMs: number, dead: boolean) {
      add(botId, ok ? 'webhook:ok' : 'webhook:failed', 1, durationMs);
      if (ok) add(botId, 'updates:delivered');
      if (dead) add(botId, 'updates:dead');
    },
    /** Updates handed to a bot by getUpdates. */
    delivered(botId: string, n: number) {
      if (n > 0) add(botId, 'updates:delivered', n);
    },
    flush,
    start() {
      const tick = () => {
        void flush().finally(() => {
          if (timer) timer = setTimeout(tick, deps.flushMs).unref();
        });
      };
      timer = setTimeout(tick, deps.flushMs).unref();
    },
    /** Stops the timer and writes what is left. */
    async close() {
      if (timer) clearTimeout(timer);
      timer = null;
      await flush();
    },
  };
}

export type UsageRecorder = ReturnType<typeof createUsageRecorder>;
