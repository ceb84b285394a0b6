/**
 * The composition root: storage, auth, domain services and the core, then what
 * the configured role runs. all: gRPC core, dispatcher and the HTTP gateway calling
 * the core directly; core: gRPC core + /healthz; dispatcher: webhook delivery +
 * /healthz; gateway: HTTP gateway over a gRPC client. One `close()` ends
 * everything, in order.
 */
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';
import { createAccountJwtVerifier } from './auth/account-jwt.js';
import { jwtKeySource } from './auth/jwt-key-source.js';
import { LOCAL_INTERNAL_TOKEN_FILE, LOCAL_SECRET_KEY_FILE, loadOrCreateSecret } from './auth/local-secrets.js';
import { CONTROL_TOPIC, type Bus } from './bus/bus.js';
import { createMemoryBus } from './bus/memory-bus.js';
import { createSecretBox } from './auth/secret-box.js';
import type { Config } from './config.js';
import { createAuthenticator } from './core/authenticate.js';
import { createCore, type Core } from './core/core.js';
import { createHandlers } from './core/handlers.js';
import { createAdminService } from './domain/admin-service.js';
import { createConsoleService } from './domain/console-service.js';
import { createRuntimeService } from './domain/runtime-service.js';
import { createOutboxRelay } from './pipeline/outbox-relay.js';
import { createUpdateWaiters } from './pipeline/update-waiters.js';
import { createUpdateWriter } from './pipeline/update-writer.js';
import { createUpdatesService } from './domain/updates-service.js';
import { parseCidrs } from './net/ssrf.js';
import { startGrpcServer, type GrpcServer } from './grpc/server.js';
import { createBotsRepo } from './storage/bots-repo.js';
import { createUpdatesRepo, UPDATES_TOPIC } from './storage/updates-repo.js';
import { createWebhooksRepo } from './storage/webhooks-repo.js';
import { createDeliveriesRepo } from './storage/deliveries-repo.js';
import { createAttempts } from './dispatch/attempts.js';
import { createDispatcher, type Dispatcher } from './dispatch/dispatcher.js';
import { createWebhookClient } from './dispatch/webhook-client.js';
import { createDeliveriesService } from './domain/deliveries-service.js';
import { createFilesService } from './domain/files-service.js';
import { createMessagesService } from './domain/messages-service.js';
import { createLocalDiskStore } from './blobs/local-disk-store.js';
import { createUrlSigner, type UrlSigner } from './blobs/signed-token.js';
import type { BlobStore } from './blobs/blob-store.js';
import { createFilesRepo } from './storage/files-repo.js';
import { createMessagesRepo, MESSAGES_TOPIC } from './storage/messages-repo.js';
import { createDb, migrateLatest, pingDb, type Db } from './storage/db.js';
import { createLimitsRepo } from './storage/limits-repo.js';
import { createLimiter } from './core/limits.js';
import { createMetricsService } from './domain/metrics-service.js';
import { createUsageRecorder } from './domain/usage.js';
import { createTelemetry, type Telemetry } from './telemetry/metrics.js';
import { buildGateway } from '../gateway/runtime/gateway.js';
import { addLifecycle } from '../gateway/runtime/lifecycle.js';
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
  telemetry: Telemetry;
  /** Graceful: stop accepting, finish in-flight calls and deliveries, end long polls, flush, close pools. Once: later calls wait for the same. */
  close(): Promise<void>;
}

/** Runs `task` every `everyMs` until stopped; failures are logged, never thrown. */
function every(everyMs: number, task: () => Promise<unknown>, logger: Logger, what: string) {
  const timer = setInterval(() => {
    task().catch((err) => logger.warn({ err }, `${what} failed`));
  }, everyMs);
  timer.unref();
  return async () => clearInterval(timer);
}

/** The service's secret key (configured, or created in DATA_DIR on the embedded default). */
const secretKeyOf = (config: Config) => config.secretKey ?? loadOrCreateSecret(config.dataDir, LOCAL_SECRET_KEY_FILE);

/** The file bytes and the signer of their URLs: shared by the core (which signs) and the gateway (which serves). */
type FileStore = { blobs: BlobStore; signer: UrlSigner };
function openBlobs(config: Config): FileStore {
  return { blobs: createLocalDiskStore(config.blobDir), signer: createUrlSigner(Buffer.from(secretKeyOf(config), 'base64')) };
}

/** Storage, secrets, the bus and the repositories: what the core and the dispatcher share. */
async function openBackend(config: Config, logger: Logger, closers: (() => Promise<void>)[], telemetry: Telemetry) {
  const db = createDb(config.database, logger);
  closers.push(() => db.destroy());
  await migrateLatest(db);
  const secretBox = createSecretBox(secretKeyOf(config));
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
  closers.push(() => bus.close());
  const bots = createBotsRepo(db);
  const updates = createUpdatesRepo(db, { idempotencyWindowMs: config.ingestIdempotencyWindowMs });
  const webhooks = createWebhooksRepo(db);
  const deliveries = createDeliveriesRepo(db);
  const limits = createLimitsRepo(db);
  // Flushed on close after the servers and the dispatcher have stopped, before the pool closes.
  const usage = createUsageRecorder({ repo: limits, flushMs: config.statsFlushMs, logger });
  usage.start();
  closers.push(() => usage.close());
  const client = createWebhookClient({
    timeoutMs: config.webhookTimeoutMs,
    allowedCidrs: parseCidrs(config.webhookAllowedCidrs),
    allowedPorts: config.webhookAllowedPorts,
    caFile: config.webhookCaFile,
    idleSocketsPerHost: config.dispatcherMaxInFlight,
  });
  closers.push(async () => client.close());
  const attempts = createAttempts({
    deliveries, webhooks, client, secretBox, scheduleMs: config.webhookRetryScheduleMs, logger,
    onOutcome: (botId, ok, durationMs, dead) => {
      usage.webhookAttempt(botId, ok, durationMs, dead);
      telemetry.webhookAttempt(ok ? 'succeeded' : dead ? 'dead_letter' : 'failed', durationMs / 1000);
    },
  });
  return { db, secretBox, bus, bots, updates, webhooks, deliveries, limits, usage, attempts };
}

type Backend = Awaited<ReturnType<typeof openBackend>>;

async function startCore(
  config: Config, logger: Logger, closers: (() => Promise<void>)[], b: Backend, telemetry: Telemetry, fileStore: FileStore,
) {
  const { source, localSecret } = jwtKeySource(config);
  const jwt = await createAccountJwtVerifier(source, config.auth);
  const internalToken = config.internalApiToken ?? loadOrCreateSecret(config.dataDir, LOCAL_INTERNAL_TOKEN_FILE);

  const waiters = createUpdateWaiters(b.bus, logger);
  const relay = createOutboxRelay(b.updates, b.bus, logger, { onFailure: () => telemetry.relayFailure() });
  relay.start();
  closers.push(() => relay.stop());
  await waiters.start();
  telemetry.gauge('botplatform_long_polls_open', 'getUpdates calls waiting in this process', () => waiters.size());
  telemetry.gauge('botplatform_outbox_backlog', 'Outbox messages committed but not yet published to the bus',
    () => b.updates.outboxBacklog().catch(() => NaN));
  // Why this core is degraded: the relay cannot publish, or the bus delivers nothing.
  const degraded = () => [relay.problem(), b.bus.problem?.()].filter((r): r is string => Boolean(r));
  // While the bus is degraded (and a while after), waiting polls re-read the database
  // every second: updates committed by other instances may never be announced to them.
  let recheckUntil = 0;
  closers.push(every(1000, async () => {
    if (degraded().length > 0) recheckUntil = Date.now() + 5000;
    if (Date.now() < recheckUntil) waiters.recheckAll();
  }, logger, 'long-poll recheck'));
  const groupWriter = createUpdateWriter(b.updates, () => relay.nudge());
  const writer: typeof groupWriter = {
    async write(items) {
      const outcomes = await groupWriter.write(items);
      const counts = { stored: 0, duplicate: 0, filtered: 0, rejected: 0 };
      for (const o of outcomes) counts['ok' in o ? 'stored' : 'duplicate' in o ? 'duplicate' : 'filtered' in o ? 'filtered' : 'rejected']++;
      for (const [outcome, n] of Object.entries(counts)) if (n > 0) telemetry.ingested(outcome, n);
      // Polls waiting here are woken directly, not only through the bus.
      waiters.committed(new Set(outcomes.flatMap((o) => ('ok' in o ? [o.ok.botId] : []))));
      return outcomes;
    },
  };

  const updates = createUpdatesService({
    bots: b.bots,
    updates: b.updates,
    webhooks: b.webhooks,
    waiters,
    writer,
    secretBox: b.secretBox,
    allowedCidrs: parseCidrs(config.webhookAllowedCidrs),
    allowedPorts: config.webhookAllowedPorts,
    egressIps: config.platformEgressIps,
    openDeliveries: (botId) => b.deliveries.openCount(botId),
    usage: b.usage,
  });
  const deps = { bots: b.bots, secretBox: b.secretBox, oneTimeTokenRetentionMs: config.oneTimeTokenRetentionMs };
  const { blobs, signer } = fileStore;
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
    ? createLimiter({ repo: b.limits, settings: limitSettings, telemetry, logger })
    : undefined;
  const core = createCore({
    authenticator: createAuthenticator({ jwt, bots: b.bots, internalToken }),
    handlers: createHandlers({
      console: createConsoleService({ ...deps, webhookOf: (id) => updates.webhookSummary(id) }),
      admin: createAdminService(deps),
      runtime: createRuntimeService({ bots: b.bots }),
      updates,
      deliveries: createDeliveriesService({ bots: b.bots, deliveries: b.deliveries, attempts: b.attempts, timeoutMs: config.webhookTimeoutMs }),
      messages: createMessagesService({ messages: createMessagesRepo(b.db), files }),
      files,
      metrics: createMetricsService({
        bots: b.bots, updates: b.updates, deliveries: b.deliveries, limits: b.limits, usage: b.usage, settings: limitSettings,
      }),
    }),
    logger,
    limiter,
    usage: b.usage,
    telemetry,
  });
  // Unread one-time tokens are discarded after their retention (reads also ignore
  // expired ones); unconfirmed updates after theirs.
  closers.push(every(Math.min(60_000, Math.max(1000, config.oneTimeTokenRetentionMs)),
    () => b.bots.purgeExpiredOneTimeTokens(Date.now()), logger, 'one-time token sweep'));
  closers.push(every(Math.min(60_000, Math.max(1000, Math.min(config.updateRetentionMs, config.ingestIdempotencyWindowMs) / 2)), async () => {
    await b.updates.purgeOlderThan(Date.now() - config.updateRetentionMs);
    await b.updates.purgeIngestKeys(Date.now());
  }, logger, 'update retention sweep'));
  closers.push(every(Math.min(60_000, Math.max(1000, config.fileUrlTtlMs / 2)), () => files.sweep(), logger, 'upload sweep'));
  // Counters of ended windows, and statistics older than the longest metrics window (with a day's margin).
  closers.push(every(60_000, async () => {
    await b.limits.purgeCounters(Date.now() - 60_000);
    await b.limits.purgeStats(Date.now() - 2 * 86_400_000);
  }, logger, 'limits and statistics sweep'));
  return { core, localSecret, waiters, degraded };
}

async function startDispatcher(config: Config, logger: Logger, closers: (() => Promise<void>)[], b: Backend, telemetry: Telemetry) {
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
  closers.push(() => dispatcher.stop());
  return dispatcher;
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startApp(config: Config, logger: Logger): Promise<App> {
  const closers: (() => Promise<void>)[] = [];
  // Runs once, last step first; a later call waits for the same shutdown.
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= (async () => {
    for (const c of [...closers].reverse()) await c().catch((err) => logger.warn({ err }, 'shutdown step failed'));
  })());
  const telemetry = createTelemetry(config.metricsEnabled);
  try {
    const app: App = { config, close, telemetry };
    let invoker: Invoker | undefined;
    let http: FastifyInstance | undefined;
    let cancelInFlight: (() => void) | undefined;
    let ready: () => Promise<boolean> = async () => true;
    let degraded: () => string[] = () => [];

    let endLongPolls = async () => {};
    // File bytes and URL signer, opened once and only by the roles that use them: the core
    // signs the URLs, the gateway serves them (role all: both, on the same store).
    let opened: FileStore | undefined;
    const fileStore = () => (opened ??= openBlobs(config));
    if (config.role !== 'gateway') {
      const backend = await openBackend(config, logger, closers, telemetry);
      app.db = backend.db;
      app.bus = backend.bus;
      ready = () => pingDb(backend.db).then(() => true, () => false);
      if (config.role === 'all' || config.role === 'dispatcher') app.dispatcher = await startDispatcher(config, logger, closers, backend, telemetry);
      if (config.role === 'all' || config.role === 'core') {
        const started = await startCore(config, logger, closers, backend, telemetry, fileStore());
        const { core, localSecret, waiters } = started;
        degraded = started.degraded;
        endLongPolls = async () => waiters.close();
        app.core = core;
        app.localJwtSecret = localSecret;
        const grpcServer: GrpcServer = await startGrpcServer(core, config.host, config.grpcPort);
        closers.push(() => grpcServer.close(config.shutdownTimeoutMs));
        // The core's gRPC health follows its database: a gateway in front of several
        // cores asks each, and reports healthy while any of them can serve.
        closers.push(every(1000, async () => {
          grpcServer.health.setStatus('', (await ready()) ? 'SERVING' : 'NOT_SERVING');
        }, logger, 'health probe'));
        app.grpcPort = grpcServer.port;
        if (config.role === 'all') invoker = createDirectInvoker(core, ready);
      }
      if (config.role !== 'all') http = healthServer(logger);
    } else {
      invoker = createGrpcInvoker(config.coreGrpcAddress);
      ready = () => invoker!.ready();
      closers.push(() => invoker!.close());
    }

    if (invoker) {
      const openapi = JSON.parse(fs.readFileSync(new URL('../gateway/generated/openapi.json', import.meta.url), 'utf8'));
      const gateway = buildGateway({
        table: routeTable, invoker, logger, maxBodyBytes: config.maxBodyBytes, openapi, telemetry, files: fileStore(),
      });
      cancelInFlight = () => gateway.cancelInFlight();
      http = gateway;
    }
    if (http) {
      const server = http;
      const lifecycle = addLifecycle(server, { ready, telemetry, cancelInFlight, degraded: () => degraded() });
      closers.push(() => lifecycle.close(config.shutdownTimeoutMs));
      // A deep accept queue: thousands of long-poll clients may reconnect at once.
      await server.listen({ host: config.host, port: config.port, backlog: 4096 });
      // Shutdown, in the order these run: drain (health 503, responses close their
      // connections) for SHUTDOWN_DRAIN, then long polls answer now, then the servers
      // stop accepting and finish what is in flight.
      closers.push(endLongPolls);
      closers.push(async () => {
        lifecycle.drain();
        if (config.shutdownDrainMs > 0) await sleep(config.shutdownDrainMs);
      });
      const address = server.server.address();
      const port = typeof address === 'object' && address ? address.port : config.port;
      app.httpUrl = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
    }
    return app;
  } catch (err) {
    await close();
    throw err;
  }
}
