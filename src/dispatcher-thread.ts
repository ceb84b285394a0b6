/**
 * A dispatcher thread of ROLE=all (started by src/dispatcher-threads.ts): the webhook
 * dispatcher on a backend of its own (its own connections to the same database; on the
 * in-process bus, the thread bus's port, in its slot), methods in webhook answers run
 * by the core over its gRPC port. Its log lines, telemetry events and gauges go to the
 * main thread, which logs and serves them as its own.
 *
 * Messages with the main thread (parentPort): to it `ready`, `failed`, `log`, `events`,
 * `gauges` (an answer) and `closed`; from it `gauges` (a question) and `stop` (finish what
 * is in flight, flush, close; the main thread ends the thread on `closed`).
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { openBackend } from './backend.js';
import { createPortBus, slotOf } from './bus/thread-bus.js';
import type { Config } from './config.js';
import { runWebhookAnswers, startDispatcher } from './dispatcher-role.js';
import { createLogger } from './logger.js';
import { createShutdown } from './process.js';
import { createThreadTelemetry } from './telemetry/thread-telemetry.js';
import type { Invoker } from '../gateway/runtime/invoker.js';

export interface DispatcherThreadData {
  config: Config;
  /** This thread's slot among `slots` (the thread bus's, and its sweep's share of the bots). */
  slot: number;
  slots: number;
  /** The thread bus's port (none: the configured bus, Kafka). */
  busPort?: MessagePort;
  /** The core's gRPC address, for methods in webhook answers. */
  coreGrpcAddress: string;
}

const port = parentPort!;
const data = workerData as DispatcherThreadData;
const { config } = data;
const logger = createLogger(config.logLevel, { write: (line: string) => port.postMessage({ t: 'log', line }) }).child({ thread: data.slot });
const telemetry = createThreadTelemetry(config.metricsEnabled, (events) => port.postMessage({ t: 'events', events }));
const shutdown = createShutdown(logger);
const root = { config, logger, telemetry, shutdown };

async function start() {
  const bus = data.busPort ? createPortBus(data.busPort, data.slot) : undefined;
  const backend = await openBackend(root, { bus, migrate: false, share: data.slots });
  const owns = data.busPort ? (botId: string) => slotOf(botId, data.slots) === data.slot : undefined;
  const dispatcher = await startDispatcher(root, backend, owns);
  // The gRPC client for methods in webhook answers, made at the first answer with a body.
  let invoker: Invoker | undefined;
  shutdown.add('webhook-client', 'gRPC invoker for webhook answers', async () => invoker?.close());
  runWebhookAnswers(root, backend, async () => (invoker ??= (await import('../gateway/runtime/invoker.js')).createGrpcInvoker(data.coreGrpcAddress)));
  return dispatcher;
}

start().then(
  (dispatcher) => {
    let stopping = false;
    port.on('message', (msg: { t: 'gauges'; id: number } | { t: 'stop' }) => {
      if (msg.t === 'gauges') {
        void telemetry.gauges().then((values) => port.postMessage({
          t: 'gauges', id: msg.id, values, inFlight: dispatcher.inFlight(), trackedBots: dispatcher.trackedBots(),
        }));
      } else if (msg.t === 'stop' && !stopping) {
        stopping = true;
        void shutdown.close().finally(() => {
          telemetry.flush();
          port.postMessage({ t: 'closed' });
        });
      }
    });
    logger.info('dispatcher thread started');
    port.postMessage({ t: 'ready' });
  },
  async (err: unknown) => {
    await shutdown.close();
    port.postMessage({ t: 'failed', message: err instanceof Error ? err.message : String(err) });
  },
);
