/** A periodic background task of a process (a sweep, a probe): never overlaps shutdown, never throws. */
import type { Logger } from 'pino';

/** Runs `task` every `everyMs` until the returned stop is called; failures are logged, never thrown. */
export function every(everyMs: number, task: () => Promise<unknown>, logger: Logger, what: string): () => Promise<void> {
  const timer = setInterval(() => {
    task().catch((err) => logger.warn({ err }, `${what} failed`));
  }, everyMs);
  timer.unref();
  return async () => clearInterval(timer);
}
