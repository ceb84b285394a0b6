/**
 * The composition root: one block per role, each building its parts as values in
 * start order (svix's `run_with_prefix`). Every part that runs joins the one
 * shutdown path in its phase (src/process.ts), whatever the order it started in.
 * all: gRPC core, dispatcher and the HTTP gateway calling the core directly;
 * core: gRPC core + /healthz; dispatcher: webhook delivery + /healthz; gateway:
 * HTTP gateway over a gRPC client.
 */
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';
import { openBackend, type Backend } from './backend.js';
import { openFileStore, type FileStore } from './blobs/file-store.js';
import type { Bus } from './bus/bus.js';
import type { Config } from './config.js';
import { buildCore } from './core/build.js';
import type { Core } from './core/core.js';
import { createMemoryBus } from './bus/memory-bus.js';
import { createThreadBusHub } from './bus/thread-bus.js';
import { WEBHOOK_UPDATES_TOPIC } from './bus/topics.js';
import { runWebhookAnswers, startDispatcher } from './dispatcher-role.js';
import { startDispatcherThreads, type DispatcherThreads, type StartWhen } from './dispatcher-threads.js';
import { every } from './every.js';
import { startGrpcServer } from './grpc/server.js';
import { startPipeline } from './pipeline/pipeline.js';
import { startSweeps } from './pipeline/sweeps.js';
import { createShutdown, type Root } from './process.js';
import type { Db } from './storage/db.js';
import { createQueriesRepo } from './storage/queries-repo.js';
import { createTelemetry, type Telemetry } from './telemetry/metrics.js';
import { withThreadGauges } from './telemetry/thread-telemetry.js';
import { createLocalSignIn, type LocalSignIn } from '../gateway/runtime/console.js';
import { buildGateway, type Gateway } from '../gateway/runtime/gateway.js';
import { createDirectInvoker, createGrpcInvoker, type Invoker } from '../gateway/runtime/invoker.js';
import { addLifecycle } from '../gateway/runtime/lifecycle.js';
import { routeTable } from '../gateway/generated/routes.js';

export interface App {
  config: Config;
  /** The HTTP address actually bound (port 0 in config binds an ephemeral one). */
  httpUrl?: string;
  grpcPort?: number;
  core?: Core;
  db?: Db;
  /** The update bus (roles with a backend). */
  bus?: Bus;
  /**
   * The webhook dispatcher (roles all and dispatcher): in this thread, or (ROLE=all with
   * DISPATCHER_THREADS) its threads together, asked (promises).
   */
  dispatcher?: { inFlight(): number | Promise<number>; trackedBots(): number | Promise<number> };
  /** ROLE=all's dispatcher threads, when it runs the dispatcher in threads. */
  dispatcherThreads?: DispatcherThreads;
  /** Set when the embedded default created its own JWT secret. */
  localJwtSecret?: string;
  /** One-click sign-in codes for the web console (only with a local signing secret). */
  localSignIn?: LocalSignIn;
  telemetry: Telemetry;
  /** Graceful: stop accepting, finish in-flight calls and deliveries, end long polls, flush, close pools. Once: later calls wait for the same. */
  close(): Promise<void>;
  /** While close() runs: the step it is waiting on ("phase/name"). */
  closingStep(): string | undefined;
}

/** What a role's block hands back; startApp adds the config, the telemetry, close and closingStep. */
type Role = (root: Root) => Promise<Omit<App, 'config' | 'telemetry' | 'close' | 'closingStep'>>;

const ROLES: Record<Config['role'], Role> = {
  async all(root0) {
    // DISPATCHER_THREADS > 0: the dispatcher runs in worker threads (src/dispatcher-threads.ts),
    // on the in-process bus reached through the thread bus; their gauges add to this thread's.
    const threads = root0.config.dispatcherThreads;
    const hub = threads > 0 && root0.config.kafkaBrokers.length === 0 ? createThreadBusHub(createMemoryBus(), threads) : undefined;
    const summed = threads > 0 ? withThreadGauges(root0.telemetry) : undefined;
    const root: Root = summed ? { ...root0, telemetry: summed } : root0;
    const backend = await openBackend(root, { bus: hub?.bus });
    const inProcess = threads === 0 ? await startDispatcher(root, backend) : undefined;
    const files = await openFileStore(root);
    const { core, localJwtSecret, grpcPort, degraded } = await serveCore(root, backend, files);
    const localSignIn = localJwtSecret ? createLocalSignIn() : undefined;
    const invoker = createDirectInvoker(core, backend.ready);
    runWebhookAnswers(root, backend, () => invoker);
    let dispatcherThreads: DispatcherThreads | undefined;
    if (threads > 0) {
      // On the in-process bus the threads start once a webhook delivery is open (each new update asks):
      // a process whose bots poll runs none. On Kafka (threads only when set) they start with the process.
      const startWhen: StartWhen | undefined = hub && {
        due: async () => (await backend.deliveries.botsWithDue(Number.MAX_SAFE_INTEGER, 1)).length > 0,
        // Webhook bots' updates only: a polling bot's open no delivery, no question for them.
        nudges: (nudge) => void hub.bus.subscribeAll([WEBHOOK_UPDATES_TOPIC], () => nudge()),
      };
      const started = await startDispatcherThreads(root, { threads, hub, startWhen, coreGrpcAddress: loopbackAddress(root.config.host, grpcPort) });
      dispatcherThreads = started;
      // Before the gRPC server closes: methods in the threads' webhook answers reach the core through it.
      root.shutdown.add('invoker', 'dispatcher threads', () => started.stop());
      summed!.addThreads(() => started.gauges());
      root.telemetry.gauge('botplatform_webhook_attempts_in_flight', 'Webhook delivery attempts in flight in this process', () => 0);
    }
    const gateway = gatewayServer(root, invoker, files, localSignIn);
    const httpUrl = await serveHttp(root, gateway, { ready: backend.ready, degraded, cancelInFlight: () => gateway.cancelInFlight() });
    const dispatcher = inProcess ?? dispatcherThreads;
    return { db: backend.db, bus: backend.bus, dispatcher, dispatcherThreads, core, grpcPort, localJwtSecret, localSignIn, httpUrl };
  },

  async core(root) {
    const backend = await openBackend(root);
    const { core, localJwtSecret, grpcPort, degraded } = await serveCore(root, backend, await openFileStore(root));
    // The console's manual retry of a delivery runs here: its answer's method too.
    runWebhookAnswers(root, backend, () => createDirectInvoker(core, backend.ready));
    const httpUrl = await serveHttp(root, healthServer(root.logger), { ready: backend.ready, degraded });
    return { db: backend.db, bus: backend.bus, core, grpcPort, localJwtSecret, httpUrl };
  },

  async dispatcher(root) {
    const backend = await openBackend(root);
    const dispatcher = await startDispatcher(root, backend);
    // Methods in webhook answers are calls of the bot: run by a core, reached over gRPC.
    const invoker = createGrpcInvoker(root.config.coreGrpcAddress);
    root.shutdown.add('webhook-client', 'gRPC invoker for webhook answers', () => invoker.close());
    runWebhookAnswers(root, backend, () => invoker);
    const httpUrl = await serveHttp(root, healthServer(root.logger), { ready: backend.ready, degraded: () => [] });
    return { db: backend.db, bus: backend.bus, dispatcher, httpUrl };
  },

  async gateway(root) {
    const invoker = createGrpcInvoker(root.config.coreGrpcAddress);
    root.shutdown.add('invoker', 'gRPC invoker', () => invoker.close());
    const gateway = gatewayServer(root, invoker, await openFileStore(root));
    const httpUrl = await serveHttp(root, gateway, { ready: () => invoker.ready(), degraded: () => [], cancelInFlight: () => gateway.cancelInFlight() });
    return { httpUrl };
  },
};

export async function startApp(config: Config, logger: Logger): Promise<App> {
  const telemetry = createTelemetry(config.metricsEnabled);
  const shutdown = createShutdown(logger);
  try {
    const started = await ROLES[config.role]({ config, logger, telemetry, shutdown });
    return { config, telemetry, ...started, close: () => shutdown.close(), closingStep: () => shutdown.waitingOn() };
  } catch (err) {
    // What had started stops, by phase, before the error goes on.
    await shutdown.close();
    throw err;
  }
}

// --- The parts the roles share.

/** The core: the update pipeline, the RPC services and their sweeps, the gRPC server. */
async function serveCore(root: Root, b: Backend, files: FileStore) {
  const pipeline = await startPipeline(root, b);
  const built = await buildCore(root, b, pipeline, files);
  root.shutdown.add('timers', 'core', startSweeps(root.config, root.logger, {
    bots: b.bots, updates: b.updates, queries: createQueriesRepo(b.db), limits: b.limits, files: built.files, limiter: built.limiter,
    deliveries: b.deliveries, attemptsLog: b.attemptsLog, deletedBots: { due: (now, limit) => b.bots.purgeDue(now, limit), purge: (id) => b.units.purgeDeletedBot(id) },
  }));
  const grpcPort = await serveGrpc(root, built.core, b.ready);
  return { core: built.core, localJwtSecret: built.localJwtSecret, grpcPort, degraded: pipeline.degraded };
}

async function serveGrpc({ config, logger, shutdown }: Root, core: Core, ready: () => Promise<boolean>): Promise<number> {
  const server = await startGrpcServer(core, config.host, config.grpcPort);
  // The core's gRPC health follows its database: a gateway in front of several
  // cores asks each, and reports healthy while any of them can serve.
  const stopProbe = every(1000, async () => {
    server.health.setStatus('', (await ready()) ? 'SERVING' : 'NOT_SERVING');
  }, logger, 'health probe');
  shutdown.add('grpc', 'gRPC server', async () => {
    await stopProbe();
    await server.close(config.shutdownTimeoutMs);
  });
  return server.port;
}

/** The HTTP gateway over `invoker` (the core in this process, or over gRPC). */
function gatewayServer({ config, logger, telemetry }: Root, invoker: Invoker, files: FileStore, localSignIn?: LocalSignIn): Gateway {
  const openapi = JSON.parse(fs.readFileSync(new URL('../gateway/generated/openapi.json', import.meta.url), 'utf8'));
  return buildGateway({
    table: routeTable, invoker, logger, maxBodyBytes: config.maxBodyBytes, maxFileBytes: config.maxFileBytes, uploads: config.uploads,
    requestTimeoutMs: config.requestTimeoutMs, bodyIdleTimeoutMs: config.bodyIdleTimeoutMs, openapi, telemetry, files,
    console: { localSignIn },
  });
}

/** A bare HTTP server (for /healthz and /metrics), for roles without the gateway. */
function healthServer(logger: Logger): FastifyInstance {
  return Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    forceCloseConnections: false,
  }) as unknown as FastifyInstance;
}

/** Where this process's own gRPC server is reached from inside it (a wildcard host through loopback). */
function loopbackAddress(host: string, port: number): string {
  const h = host === '0.0.0.0' || host === '' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return h.includes(':') ? `[${h}]:${port}` : `${h}:${port}`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Listens (health, metrics, drain and close added to `server`) and returns the URL bound.
 * Shutdown's first phase is the drain: health answers 503 and responses close their
 * connections, for SHUTDOWN_DRAIN; the server closes in its own phase later.
 */
async function serveHttp(
  { config, telemetry, shutdown }: Root,
  server: FastifyInstance,
  health: { ready: () => Promise<boolean>; degraded: () => string[]; cancelInFlight?: () => void },
): Promise<string> {
  const lifecycle = addLifecycle(server, { ...health, telemetry });
  const close = () => lifecycle.close(config.shutdownTimeoutMs);
  // A deep accept queue: thousands of long-poll clients may reconnect at once.
  try {
    await server.listen({ host: config.host, port: config.port, backlog: 4096 });
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
  shutdown.add('http', 'HTTP server', close);
  shutdown.add('drain', 'drain', async () => {
    lifecycle.drain();
    if (config.shutdownDrainMs > 0) await sleep(config.shutdownDrainMs);
  });
  const address = server.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  return `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
}
