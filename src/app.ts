/**
 * The composition root: what each role runs, as a table of components.
 * all: gRPC core, dispatcher and the HTTP gateway calling the core directly;
 * core: gRPC core + /healthz; dispatcher: webhook delivery + /healthz; gateway:
 * HTTP gateway over a gRPC client. Components start in table order; each returns
 * what stops it, and `close()` stops them by the shutdown phases declared below,
 * whatever the order they started in.
 */
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';
import { createAccountJwtVerifier } from './auth/account-jwt.js';
import { jwtKeySource } from './auth/jwt-key-source.js';
import { LOCAL_INTERNAL_TOKEN_FILE, LOCAL_SECRET_KEY_FILE, loadOrCreateSecret } from './auth/local-secrets.js';
import type { Bus } from './bus/bus.js';
import { CONTROL_TOPIC, MESSAGES_TOPIC, UPDATES_TOPIC } from './bus/topics.js';
import { createMemoryBus } from './bus/memory-bus.js';
import { createSecretBox, type SecretBox } from './auth/secret-box.js';
import type { Config } from './config.js';
import { createAuthenticator } from './core/authenticate.js';
import { createCore, type Core } from './core/core.js';
import { createHandlers } from './core/handlers.js';
import { createAdminService } from './domain/admin-service.js';
import { createConsoleService } from './domain/console-service.js';
import { createRuntimeService } from './domain/runtime-service.js';
import { createOutboxRelay, type OutboxRelay } from './pipeline/outbox-relay.js';
import { createUpdateWaiters, type UpdateWaiters } from './pipeline/update-waiters.js';
import { createSendWriter } from './pipeline/send-writer.js';
import { createIngestWriter } from './pipeline/ingest.js';
import { startSweeps } from './pipeline/sweeps.js';
import { every } from './every.js';
import { createUpdatesService } from './domain/updates-service.js';
import { parseCidrs } from './net/ssrf.js';
import { startGrpcServer } from './grpc/server.js';
import { createBotsRepo, type BotsRepo } from './storage/bots-repo.js';
import { createUpdatesRepo, type UpdatesRepo } from './storage/updates-repo.js';
import { createWebhooksRepo, type WebhooksRepo } from './storage/webhooks-repo.js';
import { createDeliveriesRepo, type DeliveriesRepo } from './storage/deliveries-repo.js';
import { createOutboxRepo, type OutboxRepo } from './storage/outbox-repo.js';
import { createFeedRepo } from './storage/feed-repo.js';
import { createFeedService, createFeedWaker } from './domain/feed-service.js';
import { createUnitsOfWork, type UnitsOfWork } from './storage/units.js';
import { createAttempts, type Attempts } from './dispatch/attempts.js';
import { createDispatcher, type Dispatcher } from './dispatch/dispatcher.js';
import { createWebhookClient } from './dispatch/webhook-client.js';
import { createDeliveriesService } from './domain/deliveries-service.js';
import { createFilesService } from './domain/files-service.js';
import { createMessagesService } from './domain/messages-service.js';
import { createLocalDiskStore } from './blobs/local-disk-store.js';
import { createUrlSigner, type UrlSigner } from './blobs/signed-token.js';
import type { BlobStore } from './blobs/blob-store.js';
import { createFilesRepo } from './storage/files-repo.js';
import { createMessagesRepo } from './storage/messages-repo.js';
import { createDb, migrateLatest, pingDb, type Db } from './storage/db.js';
import { createLimitsRepo, type LimitsRepo } from './storage/limits-repo.js';
import { createLimiter } from './core/limits.js';
import { createMetricsService } from './domain/metrics-service.js';
import { createUsageRecorder, type UsageRecorder } from './domain/usage.js';
import { createTelemetry, type Telemetry } from './telemetry/metrics.js';
import { buildGateway } from '../gateway/runtime/gateway.js';
import { createLocalSignIn, type LocalSignIn } from '../gateway/runtime/console.js';
import { addLifecycle, type Lifecycle } from '../gateway/runtime/lifecycle.js';
import { createDirectInvoker, createGrpcInvoker, type Invoker } from '../gateway/runtime/invoker.js';
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
  /** The webhook dispatcher (roles all and dispatcher). */
  dispatcher?: Dispatcher;
  /** Set when the embedded default created its own JWT secret. */
  localJwtSecret?: string;
  /** One-click sign-in codes for the web console (only with a local signing secret). */
  localSignIn?: LocalSignIn;
  telemetry: Telemetry;
  /** Graceful: stop accepting, finish in-flight calls and deliveries, end long polls, flush, close pools. Once: later calls wait for the same. */
  close(): Promise<void>;
}


/** A started component: `close()` stops it. */
interface Running {
  close(): Promise<void>;
}

/**
 * Shutdown, in the order the phases run: drain (health 503, responses close their
 * connections) for SHUTDOWN_DRAIN, then long polls answer now, then the servers stop
 * accepting and finish what is in flight, then the background work behind them stops,
 * usage is flushed, and the bus and the database pool close last.
 */
const SHUTDOWN_PHASES = [
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
  'bus',
  'db',
] as const;
type Phase = (typeof SHUTDOWN_PHASES)[number];

/** A part of a role: started in its role's table order, stopped in its shutdown phase. */
interface Component {
  name: string;
  /** When what `start` returns is closed (required when it returns something). */
  stop?: Phase;
  start(ctx: Ctx): Promise<Running | void>;
}

/** Storage, secrets, the bus and the repositories: what the core and the dispatcher share. */
interface Backend {
  db: Db;
  secretBox: SecretBox;
  bus: Bus;
  bots: BotsRepo;
  updates: UpdatesRepo;
  webhooks: WebhooksRepo;
  deliveries: DeliveriesRepo;
  outbox: OutboxRepo;
  limits: LimitsRepo;
  /** The writes that span tables. */
  units: UnitsOfWork;
  usage: UsageRecorder;
  attempts: Attempts;
}

/** What the components of a role share: each fills in what later ones use. */
interface Ctx {
  config: Config;
  logger: Logger;
  telemetry: Telemetry;
  app: App;
  /** File bytes and URL signer, opened once and only by the components that use them. */
  files(): FileStore;
  ready: () => Promise<boolean>;
  /** Why this process is degraded (serving, but e.g. the bus is down), if it is. */
  degraded: () => string[];
  backend: Partial<Backend>;
  relay?: OutboxRelay;
  waiters?: UpdateWaiters;
  core?: Core;
  invoker?: Invoker;
  http?: FastifyInstance;
  cancelInFlight?: () => void;
  lifecycle?: Lifecycle;
}

function need<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`composition: ${what} is used before it is started`);
  return value;
}

function backendOf(ctx: Ctx): Backend {
  const b = ctx.backend;
  return {
    db: need(b.db, 'the database'),
    secretBox: need(b.secretBox, 'the secret box'),
    bus: need(b.bus, 'the bus'),
    bots: need(b.bots, 'the bots repository'),
    updates: need(b.updates, 'the updates repository'),
    webhooks: need(b.webhooks, 'the webhooks repository'),
    deliveries: need(b.deliveries, 'the deliveries repository'),
    outbox: need(b.outbox, 'the outbox repository'),
    limits: need(b.limits, 'the limits repository'),
    units: need(b.units, 'the units of work'),
    usage: need(b.usage, 'the usage recorder'),
    attempts: need(b.attempts, 'the webhook attempts'),
  };
}

/** The service's secret key (configured, or created in DATA_DIR on the embedded default). */
const secretKeyOf = (config: Config) => config.secretKey ?? loadOrCreateSecret(config.dataDir, LOCAL_SECRET_KEY_FILE);

/** The file bytes and the signer of their URLs: shared by the core (which signs) and the gateway (which serves). */
type FileStore = { blobs: BlobStore; signer: UrlSigner };
function openBlobs(config: Config): FileStore {
  return { blobs: createLocalDiskStore(config.blobDir), signer: createUrlSigner(Buffer.from(secretKeyOf(config), 'base64')) };
}

// --- The backend: storage, secrets, the bus, repositories, usage, webhook attempts.

const database: Component = {
  name: 'database',
  stop: 'db',
  async start(ctx) {
    const db = createDb(ctx.config.database, ctx.logger);
    ctx.backend.db = ctx.app.db = db;
    ctx.ready = () => pingDb(db).then(() => true, () => false);
    // Statements this process sends to the database (transaction BEGIN and COMMIT included).
    let statements = 0;
    db.on('query', () => statements++);
    ctx.telemetry.gauge('botplatform_db_statements', 'Statements this process has sent to the database since it started', () => statements);
    const running = { close: () => db.destroy() };
    try {
      await migrateLatest(db);
    } catch (err) {
      await running.close().catch(() => {});
      throw err;
    }
    return running;
  },
};

const secrets: Component = {
  name: 'secret box',
  async start(ctx) {
    ctx.backend.secretBox = createSecretBox(secretKeyOf(ctx.config));
  },
};

const bus: Component = {
  name: 'bus',
  stop: 'bus',
  async start({ config, logger, telemetry, backend, app }) {
    // kafkajs is loaded only when Kafka is configured: the embedded default stays smaller.
    const bus: Bus = config.kafkaBrokers.length > 0
      ? await (await import('./bus/kafka-bus.js')).createKafkaBus({
        brokers: config.kafkaBrokers,
        clientId: config.kafkaClientId,
        topics: [{ topic: UPDATES_TOPIC, partitions: 8 }, { topic: CONTROL_TOPIC, partitions: 1 }, { topic: MESSAGES_TOPIC, partitions: 8 }],
        logger,
        onLag: (group, topic, partition, lag) => telemetry.kafkaLag(group, topic, partition, lag),
      })
      : createMemoryBus();
    backend.bus = app.bus = bus;
    return { close: () => bus.close() };
  },
};

const repositories: Component = {
  name: 'repositories',
  async start({ config, backend }) {
    const db = need(backend.db, 'the database');
    backend.bots = createBotsRepo(db);
    backend.updates = createUpdatesRepo(db, { idempotencyWindowMs: config.ingestIdempotencyWindowMs });
    backend.webhooks = createWebhooksRepo(db);
    backend.deliveries = createDeliveriesRepo(db);
    backend.outbox = createOutboxRepo(db);
    backend.limits = createLimitsRepo(db);
    backend.units = createUnitsOfWork(db, { idempotencyWindowMs: config.ingestIdempotencyWindowMs, webhookDisableAfterMs: config.webhookDisableAfterMs });
  },
};

/** Flushed on close after the servers and the dispatcher have stopped, before the pool closes. */
const usage: Component = {
  name: 'usage',
  stop: 'usage',
  async start({ config, logger, backend }) {
    const usage = createUsageRecorder({ repo: need(backend.limits, 'the limits repository'), flushMs: config.statsFlushMs, logger });
    usage.start();
    backend.usage = usage;
    return { close: () => usage.close() };
  },
};

const webhookAttempts: Component = {
  name: 'webhook attempts',
  stop: 'webhook-client',
  async start({ config, logger, telemetry, backend }) {
    const client = createWebhookClient({
      timeoutMs: config.webhookTimeoutMs,
      allowedCidrs: parseCidrs(config.webhookAllowedCidrs),
      allowedPorts: config.webhookAllowedPorts,
      caFile: config.webhookCaFile,
      socketsPerOrigin: config.webhookSocketsPerOrigin,
      slowMs: Math.min(1000, Math.floor(config.webhookTimeoutMs / 4)),
    });
    const usage = need(backend.usage, 'the usage recorder');
    backend.attempts = createAttempts({
      deliveries: need(backend.deliveries, 'the deliveries repository'),
      webhooks: need(backend.webhooks, 'the webhooks repository'),
      units: need(backend.units, 'the units of work'),
      client,
      secretBox: need(backend.secretBox, 'the secret box'),
      scheduleMs: config.webhookRetryScheduleMs,
      logger,
      onOutcome: (botId, ok, durationMs, dead) => {
        usage.webhookAttempt(botId, ok, durationMs, dead);
        telemetry.webhookAttempt(ok ? 'succeeded' : dead ? 'dead_letter' : 'failed', durationMs / 1000);
      },
    });
    return { close: async () => client.close() };
  },
};

const BACKEND: Component[] = [database, secrets, bus, repositories, usage, webhookAttempts];

// --- The webhook dispatcher.

const dispatcher: Component = {
  name: 'dispatcher',
  stop: 'dispatcher',
  async start(ctx) {
    const { config, logger, telemetry } = ctx;
    const b = backendOf(ctx);
    const dispatcher = createDispatcher({
      deliveries: b.deliveries,
      webhooks: b.webhooks,
      attempts: b.attempts,
      bus: b.bus,
      logger,
      timeoutMs: config.webhookTimeoutMs,
      maxInFlight: config.dispatcherMaxInFlight,
      sweepMs: Math.max(50, Math.min(1000, Math.min(...config.webhookRetryScheduleMs) / 4)),
    });
    await dispatcher.start();
    telemetry.gauge('botplatform_webhook_attempts_in_flight', 'Webhook delivery attempts in flight in this process', () => dispatcher.inFlight());
    ctx.app.dispatcher = dispatcher;
    return { close: () => dispatcher.stop() };
  },
};

// --- The core: the update pipeline, the RPC services, the gRPC server.

const outboxRelay: Component = {
  name: 'outbox relay',
  stop: 'relay',
  async start(ctx) {
    const b = backendOf(ctx);
    const relay = createOutboxRelay(b.outbox, b.bus, ctx.logger, { lingerMs: ctx.config.outboxLingerMs, onFailure: () => ctx.telemetry.relayFailure() });
    relay.start();
    ctx.relay = relay;
    // Why this core is degraded: the relay cannot publish, or the bus delivers nothing.
    ctx.degraded = () => [relay.problem(), b.bus.problem?.()].filter((r): r is string => Boolean(r));
    return { close: () => relay.stop() };
  },
};

/** Long polls waiting in this process: they answer at once when shutdown reaches them. */
const longPolls: Component = {
  name: 'long polls',
  stop: 'long-polls',
  async start(ctx) {
    const b = backendOf(ctx);
    const waiters = createUpdateWaiters(b.bus, ctx.logger);
    await waiters.start();
    ctx.waiters = waiters;
    ctx.telemetry.gauge('botplatform_long_polls_open', 'getUpdates calls waiting in this process', () => waiters.size());
    ctx.telemetry.gauge('botplatform_outbox_backlog', 'Outbox messages committed but not yet published to the bus',
      () => b.outbox.backlog().catch(() => NaN));
    return { close: async () => waiters.close() };
  },
};

/**
 * While the bus is degraded (and a while after), waiting polls re-read the database
 * every second: updates committed by other instances may never be announced to them.
 */
const longPollRecheck: Component = {
  name: 'long-poll recheck',
  stop: 'timers',
  async start(ctx) {
    const waiters = need(ctx.waiters, 'the long polls');
    let recheckUntil = 0;
    return {
      close: every(1000, async () => {
        if (ctx.degraded().length > 0) recheckUntil = Date.now() + 5000;
        if (Date.now() < recheckUntil) waiters.recheckAll();
      }, ctx.logger, 'long-poll recheck'),
    };
  },
};

const core: Component = {
  name: 'core',
  stop: 'timers',
  async start(ctx) {
    const { config, logger, telemetry } = ctx;
    const b = backendOf(ctx);
    const relay = need(ctx.relay, 'the outbox relay');
    const waiters = need(ctx.waiters, 'the long polls');
    const { source, localSecret } = jwtKeySource(config);
    const jwt = await createAccountJwtVerifier(source, config.auth);
    const internalToken = config.internalApiToken ?? loadOrCreateSecret(config.dataDir, LOCAL_INTERNAL_TOKEN_FILE);

    const updates = createUpdatesService({
      bots: b.bots,
      updates: b.updates,
      webhooks: b.webhooks,
      units: b.units,
      waiters,
      writer: createIngestWriter({ units: b.units, relay, waiters, telemetry }),
      secretBox: b.secretBox,
      allowedCidrs: parseCidrs(config.webhookAllowedCidrs),
      allowedPorts: config.webhookAllowedPorts,
      egressIps: config.platformEgressIps,
      openDeliveries: (botId) => b.deliveries.openCount(botId),
      usage: b.usage,
    });
    const deps = { bots: b.bots, secretBox: b.secretBox, oneTimeTokenRetentionMs: config.oneTimeTokenRetentionMs };
    // Verified bot principals are kept briefly; a credential change drops them on every instance.
    const authenticator = createAuthenticator({
      jwt, bots: b.bots, internalToken, cacheTtlMs: config.authCacheTtlMs, cacheUsable: () => !b.bus.problem?.(),
    });
    waiters.onCredentialsChanged((botId) => authenticator.invalidateBot(botId));
    const credentialsChanged = (botId: string) => waiters.credentialsChanged(botId);
    const { blobs, signer } = ctx.files();
    const files = createFilesService({
      files: createFilesRepo(b.db),
      blobs,
      signer,
      maxFileBytes: config.maxFileBytes,
      urlTtlMs: config.fileUrlTtlMs,
      publicBaseUrl: config.publicBaseUrl,
      possession: config.possession,
    });
    const limitSettings = config.limits.enabled ? config.limits : { botRate: null, chatRate: null, dailyQuota: 0 };
    const limiter = config.limits.enabled && (limitSettings.botRate || limitSettings.chatRate || limitSettings.dailyQuota > 0)
      ? createLimiter({ repo: b.limits, settings: limitSettings, telemetry, logger, recheckFullMs: config.statsFlushMs })
      : undefined;
    const feedWaker = createFeedWaker();
    // Each committed batch wakes this instance's feed streams, and its relay (the batch's outbox messages).
    const sendWriter = createSendWriter(b.units, () => {
      feedWaker.sent();
      relay.nudge();
    });
    const core = createCore({
      authenticator,
      handlers: createHandlers({
        console: createConsoleService({ ...deps, credentialsChanged, webhookOf: (id) => updates.webhookSummary(id) }),
        admin: createAdminService(deps),
        runtime: createRuntimeService({ bots: b.bots }),
        updates,
        deliveries: createDeliveriesService({ bots: b.bots, deliveries: b.deliveries, attempts: b.attempts, timeoutMs: config.webhookTimeoutMs }),
        messages: createMessagesService({
          messages: createMessagesRepo(b.db),
          // A message sent here wakes this instance's feed streams at once (others poll).
          // Concurrent sends share a transaction (group commit); each committed batch
          // wakes this instance's feed streams at once (others poll).
          sender: sendWriter,
          files,
        }),
        files,
        metrics: createMetricsService({
          bots: b.bots, updates: b.updates, deliveries: b.deliveries, limits: b.limits, usage: b.usage, settings: limitSettings,
          settleLimits: limiter ? (botId) => limiter.releaseBot(botId) : undefined,
        }),
        feed: createFeedService({
          feed: createFeedRepo(b.db), waker: feedWaker,
          maxGroupMembers: config.feed.maxGroupMembers, maxStreamsPerConnection: config.feed.maxStreamsPerConnection,
        }),
      }),
      logger,
      limiter,
      usage: b.usage,
      telemetry,
    });
    ctx.core = ctx.app.core = core;
    ctx.app.localJwtSecret = localSecret;
    return {
      close: startSweeps(config, logger, {
        bots: b.bots, updates: b.updates, limits: b.limits, files, limiter,
      }),
    };
  },
};

const grpc: Component = {
  name: 'gRPC server',
  stop: 'grpc',
  async start(ctx) {
    const { config } = ctx;
    const server = await startGrpcServer(need(ctx.core, 'the core'), config.host, config.grpcPort);
    ctx.app.grpcPort = server.port;
    // The core's gRPC health follows its database: a gateway in front of several
    // cores asks each, and reports healthy while any of them can serve.
    const stopProbe = every(1000, async () => {
      server.health.setStatus('', (await ctx.ready()) ? 'SERVING' : 'NOT_SERVING');
    }, ctx.logger, 'health probe');
    return {
      close: async () => {
        await stopProbe();
        await server.close(config.shutdownTimeoutMs);
      },
    };
  },
};

const CORE: Component[] = [outboxRelay, longPolls, longPollRecheck, core, grpc];

// --- HTTP: the gateway (over the core in this process, or over gRPC), or a bare health server.

const directInvoker: Component = {
  name: 'direct invoker',
  async start(ctx) {
    ctx.invoker = createDirectInvoker(need(ctx.core, 'the core'), ctx.ready);
  },
};

const grpcInvoker: Component = {
  name: 'gRPC invoker',
  stop: 'invoker',
  async start(ctx) {
    const invoker = createGrpcInvoker(ctx.config.coreGrpcAddress);
    ctx.invoker = invoker;
    ctx.ready = () => invoker.ready();
    return { close: () => invoker.close() };
  },
};

const gateway: Component = {
  name: 'gateway',
  async start(ctx) {
    const { config, logger, telemetry } = ctx;
    const openapi = JSON.parse(fs.readFileSync(new URL('../gateway/generated/openapi.json', import.meta.url), 'utf8'));
    if (ctx.app.localJwtSecret) ctx.app.localSignIn = createLocalSignIn();
    const gateway = buildGateway({
      table: routeTable, invoker: need(ctx.invoker, 'the invoker'), logger, maxBodyBytes: config.maxBodyBytes, maxFileBytes: config.maxFileBytes, uploads: config.uploads,
      requestTimeoutMs: config.requestTimeoutMs, bodyIdleTimeoutMs: config.bodyIdleTimeoutMs, openapi, telemetry, files: ctx.files(),
      console: { localSignIn: ctx.app.localSignIn },
    });
    ctx.cancelInFlight = () => gateway.cancelInFlight();
    ctx.http = gateway;
  },
};

/** A bare HTTP server (for /healthz and /metrics), for roles without the gateway. */
const healthServer: Component = {
  name: 'health server',
  async start(ctx) {
    ctx.http = Fastify({
      loggerInstance: ctx.logger as FastifyBaseLogger,
      logController: new LogController({ disableRequestLogging: true }),
      return503OnClosing: true,
      forceCloseConnections: false,
    }) as unknown as FastifyInstance;
  },
};

const http: Component = {
  name: 'HTTP server',
  stop: 'http',
  async start(ctx) {
    const { config } = ctx;
    const server = need(ctx.http, 'the HTTP server');
    const lifecycle = addLifecycle(server, {
      ready: () => ctx.ready(), telemetry: ctx.telemetry, cancelInFlight: ctx.cancelInFlight, degraded: () => ctx.degraded(),
    });
    ctx.lifecycle = lifecycle;
    const running = { close: () => lifecycle.close(config.shutdownTimeoutMs) };
    // A deep accept queue: thousands of long-poll clients may reconnect at once.
    try {
      await server.listen({ host: config.host, port: config.port, backlog: 4096 });
    } catch (err) {
      await running.close().catch(() => {});
      throw err;
    }
    const address = server.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    ctx.app.httpUrl = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
    return running;
  },
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The first phase of shutdown: health answers 503 and responses close their connections, for SHUTDOWN_DRAIN. */
const drain: Component = {
  name: 'drain',
  stop: 'drain',
  async start(ctx) {
    const lifecycle = need(ctx.lifecycle, 'the HTTP server');
    return {
      close: async () => {
        lifecycle.drain();
        if (ctx.config.shutdownDrainMs > 0) await sleep(ctx.config.shutdownDrainMs);
      },
    };
  },
};

/** What each role runs, in start order. */
const ROLES: Record<Config['role'], Component[]> = {
  all: [...BACKEND, dispatcher, ...CORE, directInvoker, gateway, http, drain],
  core: [...BACKEND, ...CORE, healthServer, http, drain],
  dispatcher: [...BACKEND, dispatcher, healthServer, http, drain],
  gateway: [grpcInvoker, gateway, http, drain],
};

export async function startApp(config: Config, logger: Logger): Promise<App> {
  const started: { name: string; stop: Phase; running: Running }[] = [];
  // Runs once, by phase; a later call waits for the same shutdown.
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= (async () => {
    for (const phase of SHUTDOWN_PHASES) {
      for (const c of started.filter((s) => s.stop === phase).reverse()) {
        await c.running.close().catch((err) => logger.warn({ err, component: c.name }, 'shutdown step failed'));
      }
    }
  })());
  const telemetry = createTelemetry(config.metricsEnabled);
  const app: App = { config, close, telemetry };
  let files: FileStore | undefined;
  const ctx: Ctx = {
    config,
    logger,
    telemetry,
    app,
    files: () => (files ??= openBlobs(config)),
    ready: async () => true,
    degraded: () => [],
    backend: {},
  };
  try {
    for (const component of ROLES[config.role]) {
      const running = await component.start(ctx);
      if (!running) continue;
      started.push({ name: component.name, stop: need(component.stop, `the shutdown phase of ${component.name}`), running });
    }
    return app;
  } catch (err) {
    await close();
    throw err;
  }
}
