/**
 * Telemetry across worker threads: a thread records into `createThreadTelemetry`, which
 * sends its events to the main thread (gathered: one message per turn of the thread's
 * event loop) and answers its gauges when asked; the main thread replays the events on
 * its own telemetry (`replayEvents`) and adds the threads' gauges to its own
 * (`withThreadGauges`), so /metrics shows the process as one.
 */
import type { Telemetry } from './metrics.js';

/** The recording methods, by name, as sent between threads. */
type EventName = 'rpc' | 'stream' | 'http' | 'ingested' | 'webhookAttempt' | 'limited' | 'webhookAnswer' | 'kafkaLag' | 'relayFailure';
export type TelemetryEvent = [EventName, ...unknown[]];

const EVENTS: EventName[] = ['rpc', 'stream', 'http', 'ingested', 'webhookAttempt', 'limited', 'webhookAnswer', 'kafkaLag', 'relayFailure'];

export interface ThreadTelemetry extends Telemetry {
  /** Sends what is gathered now (before the thread ends). */
  flush(): void;
  /** The current value of every gauge registered in this thread. */
  gauges(): Promise<Record<string, number>>;
}

/** A thread's telemetry: `send` carries its gathered events to the main thread. */
export function createThreadTelemetry(enabled: boolean, send: (events: TelemetryEvent[]) => void): ThreadTelemetry {
  let pending: TelemetryEvent[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending.length === 0) return;
    const events = pending;
    pending = [];
    send(events);
  };
  const gauges = new Map<string, () => number | Promise<number>>();
  const t = {
    enabled,
    gauge(name: string, _help: string, read: () => number | Promise<number>) {
      if (enabled) gauges.set(name, read);
    },
    async render() {
      return { contentType: 'text/plain', body: '' };
    },
    flush,
    async gauges() {
      const out: Record<string, number> = {};
      for (const [name, read] of gauges) out[name] = await read();
      return out;
    },
  } as ThreadTelemetry;
  for (const name of EVENTS) {
    (t as unknown as Record<string, (...args: unknown[]) => void>)[name] = enabled
      ? (...args: unknown[]) => {
        pending.push([name, ...args]);
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      }
      : () => {};
  }
  return t;
}

/** Records a thread's events on the main thread's telemetry. */
export function replayEvents(telemetry: Telemetry, events: TelemetryEvent[]): void {
  for (const [name, ...args] of events) {
    if (EVENTS.includes(name)) (telemetry[name] as (...a: unknown[]) => void)(...args);
  }
}

/**
 * `telemetry` whose gauges add the threads' values of the same name: `threads()` answers
 * them (summed over the threads), set once the threads run.
 */
export function withThreadGauges(telemetry: Telemetry): Telemetry & { addThreads(threads: () => Promise<Record<string, number>>): void } {
  let threads: () => Promise<Record<string, number>> = async () => ({});
  return {
    ...telemetry,
    gauge(name, help, read) {
      telemetry.gauge(name, help, async () => (await read()) + ((await threads())[name] ?? 0));
    },
    addThreads(fn) {
      threads = fn;
    },
  };
}
