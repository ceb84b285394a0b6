/**
 * What every part of a process is built with: its settings, its log, its metrics, and
 * the one shutdown path it joins. Parts register what stops them in a phase as they
 * start; `close()` runs the phases in order, whatever the order the parts started in.
 */
import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Telemetry } from './telemetry/metrics.js';

/**
 * Shutdown, in the order the phases run: drain (health 503, responses close their
 * connections) for SHUTDOWN_DRAIN, then long polls answer now, then the servers stop
 * accepting and finish what is in flight, then the background work behind them stops,
 * usage is flushed, the blob store's connections close, and the bus and the database
 * pool close last.
 */
export const SHUTDOWN_PHASES = [
  'drain',
  'long-polls',
  'http',
  'invoker',
  'grpc',
  'timers',
  'relay',
  'dispatcher',
  'webhook-client',
  'usage',
  'blobs',
  'bus',
  'db',
] as const;
export type Phase = (typeof SHUTDOWN_PHASES)[number];

export interface Shutdown {
  /** What stops a started part (`name` in logs), run in `phase`; within a phase, the last added runs first. */
  add(phase: Phase, name: string, close: () => Promise<void>): void;
  /** Graceful, by phase; a failing step is logged and the next runs. Once: later calls wait for the same. */
  close(): Promise<void>;
  /** The step close() is waiting on ("phase/name"), for whoever must say what holds a shutdown up. */
  waitingOn(): string | undefined;
}

export function createShutdown(logger: Logger): Shutdown {
  const steps: { phase: Phase; name: string; close: () => Promise<void> }[] = [];
  let closing: Promise<void> | undefined;
  let current: string | undefined;
  return {
    add(phase, name, close) {
      steps.push({ phase, name, close });
    },
    close: () => (closing ??= (async () => {
      for (const phase of SHUTDOWN_PHASES) {
        for (const s of steps.filter((x) => x.phase === phase).reverse()) {
          current = `${phase}/${s.name}`;
          await s.close().catch((err) => logger.warn({ err, component: s.name }, 'shutdown step failed'));
        }
      }
      current = undefined;
    })()),
    waitingOn: () => current,
  };
}

/** The givens of a process, passed to each part the composition root starts. */
export interface Root {
  config: Config;
  logger: Logger;
  telemetry: Telemetry;
  shutdown: Shutdown;
}
