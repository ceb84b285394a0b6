/**
 * The composition root: storage, auth, domain services and the core, then the
 * servers the configured role runs (all: gRPC core + HTTP gateway calling the
 * core directly; core: gRPC core + /healthz; gateway: HTTP gateway over a gRPC
 * client). One `close()` ends everything, in order.
 */
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';
import { createAccountJwtVerifier, type JwtKeySource } from './auth/account-jwt.js';
import { LOCAL_INTERNAL_TOKEN_FILE, LOCAL_JWT_SECRET_FILE, LOCAL_SECRET_KEY_FILE, loadOrCreateSecret } from './auth/local-secrets.js';
import { CONTROL_TOPIC, type Bus } from './bus/bus.js';
import { createKafkaBus } from './bus/kafka-bus.js';
import { createMemoryBus } from './bus/memory-bus.js';
import { createSecretBox } from './auth/secret-box.js';
import type { Config } from './config.js';
import { createAuthenticator } from './core/authenticate.js';
import { createCore, type Core } from './core/core.js';
import { createHandlers } from './core/handlers.js';
import { createAdminService } from './domain/admin-service.js';
import { createConsoleService } from './domain/console-service.js';
import { createRuntimeService } from './domain/runtime-service.js';
import { createOutboxRelay } from './domain/outbox-relay.js';
import { createUpdateWaiters } from './domain/update-waiters.js';
import { createUpdateWriter } from './domain/update-writer.js';
import { createUpdatesService } from './domain/updates-service.js';
import { parseCidrs } from './net/ssrf.js';
import { startGrpcServer, type GrpcServer } from './grpc/server.js';
import { createBotsRepo } from './storage/bots-repo.js';
import { createUpdatesRepo, UPDATES_TOPIC } from './storage/updates-repo.js';
import { createWebhooksRepo } from './storage/webhooks-repo.js';
import { createDb, migrateLatest, pingDb, type Db } from './storage/db.js';
import { buildGateway } from '../gateway/runtime/gateway.js';
import { createDirectInvoker, createGrpcInvoker, type Invoker } from '../gateway/runtime/invoker.js';
import { routeTable } from '../gateway/generated/routes.js';

export interface App {
  config: Config;
  /** The HTTP address actually bound (port 0 in config binds an ephemeral one). */
  httpUrl?: string;
  grpcPort?: number;
  core?: Core;
  db?: Db;
  /** Set when the embedded default created its own JWT secret. */
  localJwtSecret?: string;
  close(): Promise<void>;
}

/** The JWT key source: configured, or the embedded default's local secret. */
export function jwtKeySource(config: Config): { source: JwtKeySource; localSecret?: string } {
  if (config.auth.kind !== 'local') return { source: config.auth };
  const secret = loadOrCreateSecret(config.dataDir, LOCAL_JWT_SECRET_FILE);
  return { source: { kind: 'secret', secret }, localSecret: secret };
}

/** Runs `task` every `everyMs` until stopped; failures are logged, never thrown. */
function every(everyMs: number, task: () => Promise<unknown>, logger: Logger, what: string) {
  const timer = setInterval(() => {
    task().catch((err) => logger.warn({ err }, `${what} failed`));
  }, everyMs);
  timer.unref();
  return async () => clearInterval(timer);
}

async function startCore(config: Config, logger: Logger, closers: (() => Promise<void>)[]) {
  const db = createDb(config.database);
  closers.push(() => db.destroy());
  await migrateLatest(db);
  const { source, localSecret } = jwtKeySource(config);
  const jwt = await createAccountJwtVerifier(source, config.auth);
  const secretBox = createSecretBox(config.secretKey ?? loadOrCreateSecret(config.dataDir, LOCAL_SECRET_KEY_FILE));
  const internalToken = config.internalApiToken ?? loadOrCreateSecret(config.dataDir, LOCAL_INTERNAL_TOKEN_FILE);

  const bus: Bus = config.kafkaBrokers.length > 0
    ? await createKafkaBus({
      brokers: config.kafkaBrokers,
      clientId: config.kafkaClientId,
      topics: [{ topic: UPDATES_TOPIC, partitions: 8 }, { topic: CONTROL_TOPIC, partitions: 1 }],
      logger,
    })
    : createMemoryBus();
  closers.push(() => bus.close());

  const bots = createBotsRepo(db);
  const updatesRepo = createUpdatesRepo(db);
  const webhooks = createWebhooksRepo(db);
  const relay = createOutboxRelay(updatesRepo, bus, logger);
  relay.start();
  closers.push(() => relay.stop());
  const waiters = createUpdateWaiters(bus, logger);
  await waiters.start();
  const writer = createUpdateWriter(updatesRepo, () => relay.nudge());

  const updates = createUpdatesService({
    bots,
    updates: updatesRepo,
    webhooks,
    waiters,
    writer,
    secretBox,
    allowedCidrs: parseCidrs(config.webhookAllowedCidrs),
    egressIps: config.platformEgressIps,
  });
  const deps = { bots, secretBox, oneTimeTokenRetentionMs: config.oneTimeTokenRetentionMs };
  const core = createCore({
    authenticator: createAuthenticator({ jwt, bots, internalToken }),
    handlers: createHandlers({
      console: createConsoleService({ ...deps, webhookOf: (id) => updates.webhookSummary(id) }),
      admin: createAdminService(deps),
      runtime: createRuntimeService({ bots }),
      updates,
    }),
    logger,
  });
  // Unread one-time tokens are discarded after their retention (reads also ignore
  // expired ones); unconfirmed updates after theirs.
  closers.push(every(Math.min(60_000, Math.max(1000, config.oneTimeTokenRetentionMs)),
    () => bots.purgeExpiredOneTimeTokens(Date.now()), logger, 'one-time token sweep'));
  closers.push(every(Math.min(60_000, Math.max(1000, config.updateRetentionMs / 2)),
    () => updatesRepo.purgeOlderThan(Date.now() - config.updateRetentionMs), logger, 'update retention sweep'));
  return { db, core, localSecret, waiters };
}

export async function startApp(config: Config, logger: Logger): Promise<App> {
  const closers: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch((err) => logger.warn({ err }, 'shutdown step failed'));
  };
  try {
    const app: App = { config, close };
    let invoker: Invoker | undefined;
    let http: FastifyInstance | undefined;

    let endLongPolls = async () => {};
    if (config.role === 'all' || config.role === 'core') {
      const { db, core, localSecret, waiters } = await startCore(config, logger, closers);
      endLongPolls = async () => waiters.close();
      app.db = db;
      app.core = core;
      app.localJwtSecret = localSecret;
      const grpcServer: GrpcServer = await startGrpcServer(core, config.host, config.grpcPort);
      closers.push(() => grpcServer.close());
      app.grpcPort = grpcServer.port;
      const ready = () => pingDb(db).then(() => true, () => false);
      if (config.role === 'all') invoker = createDirectInvoker(core, ready);
      else {
        const coreHttp: FastifyInstance = Fastify({ loggerInstance: logger as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }) }) as unknown as FastifyInstance;
        http = coreHttp;
        coreHttp.get('/healthz', async (_req, reply) => {
          const ok = await ready();
          return reply.code(ok ? 200 : 503).send({ status: ok ? 'ok' : 'unavailable' });
        });
      }
    } else {
      invoker = createGrpcInvoker(config.coreGrpcAddress);
      closers.push(() => invoker!.close());
    }

    if (invoker) {
      const openapi = JSON.parse(fs.readFileSync(new URL('../gateway/generated/openapi.json', import.meta.url), 'utf8'));
      http = buildGateway({ table: routeTable, invoker, logger, maxBodyBytes: config.maxBodyBytes, openapi });
    }
    if (http) {
      const server = http;
      closers.push(() => server.close());
      // A deep accept queue: thousands of long-poll clients may reconnect at once.
      await server.listen({ host: config.host, port: config.port, backlog: 4096 });
      // First step of shutdown: long polls answer now, so the servers can drain.
      closers.push(endLongPolls);
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
