/**
 * Publishes committed outbox messages to the bus and deletes them once the bus has
 * them: at least once, in commit order. Nudged right after each commit; also
 * polls, so messages left by a process that died after its commit go out too.
 */
import type { Logger } from 'pino';
import type { Bus } from '../bus/bus.js';
import type { UpdatesRepo } from '../storage/updates-repo.js';

export function createOutboxRelay(repo: UpdatesRepo, bus: Bus, logger: Logger, pollMs = 250) {
  let running = false;
  let wake: (() => void) | null = null;
  let nudged = false;
  let loop: Promise<void> | null = null;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = null;
        resolve();
      }
      wake = done;
    });

  async function run() {
    let backoff = 0;
    while (running) {
      nudged = false;
      try {
        const n = await repo.relayOutbox(500, (messages) =>
          bus.publish(messages.map((m) => ({ topic: m.topic, key: m.key, value: m.payload }))),
        );
        backoff = 0;
        if (n === 500 || nudged) continue;
        await sleep(pollMs);
      } catch (err) {
        backoff = Math.min(5000, backoff ? backoff * 2 : 200);
        logger.warn({ err, retryInMs: backoff }, 'outbox relay: publish failed; will retry');
        await sleep(backoff);
      }
    }
  }

  return {
    start() {
      running = true;
      loop = run();
    },
    /** Something was committed: publish now rather than at the next poll. */
    nudge() {
      nudged = true;
      wake?.();
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
    },
  };
}

export type OutboxRelay = ReturnType<typeof createOutboxRelay>;
