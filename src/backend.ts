/**
 * The backend: what the core and the dispatcher share, opened once per process and
 * whole (storage, secrets, the bus, repositories, usage, webhook attempts). Each
 * long-lived part joins the shutdown as it opens: usage is flushed after the servers
 * and the dispatcher stop, and the bus and the database pool close last.
 */
import type { Logger } from 'pino';
import { secretKeyOf } from './auth/secret-key.js';
import { createSecretBox, type SecretBox } from './auth/secret-box.js';
import type { Bus } from './bus/bus.js';
import { createMemoryBus } from './bus/memory-bus.js';
import { CONTROL_TOPIC, MESSAGES_TOPIC, UPDATES_TOPIC, WEBHOOK_UPDATES_TOPIC } from './bus/topics.js';
import type { Config } from './config.js';
import { createAttempts, type Attempts } from './dispatch/attempts.js';
import { createWebhookClient } from './dispatch/webhook-client.js';
import { createUsageRecorder, type UsageRecorder } from './domain/usage.js';
import { openFileLimit, socketCapWithin } from './net/fd-limit.js';
import { parseCidrs } from './net/ssrf.js';
import type { Root } from './process.js';
import { createBotsRepo, type BotsRepo } from './storage/bots-repo.js';
import { createDb, migrateLatest, pingDb, type Db } from './storage/db.js';
import type { Checkpoints } from './storage/sqlite/driver.js';
import { createAttemptsRepo, type AttemptsRepo } from './storage/attempts-repo.js';
import { createDeliveriesRepo, type DeliveriesRepo } from './storage/deliveries-repo.js';
import { createLimitsRepo, type LimitsRepo } from './storage/limits-repo.js';
import { createOutboxRepo, type OutboxRepo } from './storage/outbox-repo.js';
import { createUnitsOfWork, type UnitsOfWork } from './storage/units.js';
import { createUpdatesRepo, type UpdatesRepo } from './storage/updates-repo.js';
import { createWebhooksRepo, type WebhooksRepo } from './storage/webhooks-repo.js';
import type { Telemetry } from './telemetry/metrics.js';

export interface Backend {
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
  /** The webhook requests' turns per origin (WEBHOOK_SOCKETS_PER_ORIGIN, this backend's share): the dispatcher's claims follow them. */
  webhookTurnsPerOrigin: number;
  /** The delivery log (delivery_attempts). */
  attemptsLog: AttemptsRepo;
  /** Whether the database answers: the health of every role with a backend. */
  ready(): Promise<boolean>;
}

/**
 * Opens the backend, in this order: database (migrated), secret box, bus, repositories,
 * usage, webhook attempts. `bus`: the bus to use instead of the configured one's own (the
 * thread bus: src/bus/thread-bus.ts); `migrate: false` for a dispatcher thread, whose
 * process migrated the database before it started; `share`: how many dispatcher threads
 * split the process's webhook connection bounds (WEBHOOK_SOCKETS_PER_ORIGIN,
 * WEBHOOK_MAX_SOCKETS), each taking its part, so the process as a whole keeps them.
 */
export async function openBackend({ config, logger, telemetry, shutdown }: Root, opts: { bus?: Bus; migrate?: boolean; share?: number } = {}): Promise<Backend> {
  // SQLite: a dispatcher thread (`share`) leaves WAL checkpoints to its process's main thread (sqlite/driver.ts).
  const db = await openDatabase(config, logger, telemetry, opts.migrate ?? true, opts.share === undefined ? 'timer' : 'backstop');
  shutdown.add('db', 'database', () => db.destroy());
  const secretBox = createSecretBox(secretKeyOf(config));
  const bus = opts.bus ?? await openBus(config, logger, telemetry);
  shutdown.add('bus', 'bus', () => bus.close());

  const bots = createBotsRepo(db);
  const updates = createUpdatesRepo(db, { idempotencyWindowMs: config.ingestIdempotencyWindowMs });
  const webhooks = createWebhooksRepo(db);
  const deliveries = createDeliveriesRepo(db);
  const attemptsLog = createAttemptsRepo(db);
  const outbox = createOutboxRepo(db);
  const limits = createLimitsRepo(db);
  const units = createUnitsOfWork(db, { idempotencyWindowMs: config.ingestIdempotencyWindowMs, webhookDisableAfterMs: config.webhookDisableAfterMs });

  // Flushed on close after the servers and the dispatcher have stopped, before the pool closes.
  const usage = createUsageRecorder({ repo: limits, flushMs: config.statsFlushMs, logger });
  usage.start();
  shutdown.add('usage', 'usage', () => usage.close());

  const client = createWebhookClient({
    timeoutMs: config.webhookTimeoutMs,
    allowedCidrs: parseCidrs(config.webhookAllowedCidrs),
    allowedPorts: config.webhookAllowedPorts,
    caFile: config.webhookCaFile,
    socketsPerOrigin: Math.max(1, Math.floor(config.webhookSocketsPerOrigin / (opts.share ?? 1))),
    maxSockets: Math.max(16, Math.floor(webhookSocketCap(config.webhookMaxSockets, logger) / (opts.share ?? 1))),
    slowMs: Math.min(1000, Math.floor(config.webhookTimeoutMs / 4)),
  });
  shutdown.add('webhook-client', 'webhook attempts', async () => client.close());
  telemetry.gauge('botplatform_webhook_sockets_open', 'Webhook connections open in this process (at most WEBHOOK_MAX_SOCKETS)', () => client.sockets().open);
  telemetry.gauge('botplatform_webhook_sockets_evicted', 'Idle webhook connections closed to stay under WEBHOOK_MAX_SOCKETS, since start', () => client.sockets().evicted);
  const attempts = createAttempts({
    deliveries,
    webhooks,
    units,
    client,
    secretBox,
    scheduleMs: config.webhookRetryScheduleMs,
    logger,
    onOutcome: (botId, ok, durationMs, dead) => {
      usage.webhookAttempt(botId, ok, durationMs, dead);
      telemetry.webhookAttempt(ok ? 'succeeded' : dead ? 'dead_letter' : 'failed', durationMs / 1000);
    },
  });

  return {
    db, secretBox, bus, bots, updates, webhooks, deliveries, outbox, limits, units, usage, attempts, attemptsLog, webhookTurnsPerOrigin: client.turnsPerOrigin,
    ready: () => pingDb(db).then(() => true, () => false),
  };
}

/** The pool, its statement counter, and the schema migrated; a failed migration closes the pool again. */
async function openDatabase(config: Config, logger: Logger, telemetry: Telemetry, migrate: boolean, checkpoints: Checkpoints): Promise<Db> {
  const db = createDb(config.database, logger, { checkpoints });
  // Statements this process sends to the database (transaction BEGIN and COMMIT included).
  let statements = 0;
  db.on('query', () => statements++);
  telemetry.gauge('botplatform_db_statements', 'Statements this process has sent to the database since it started', () => statements);
  if (config.database.kind === 'sqlite') {
    // Time spent waiting for SQLite's one write lock, held by another thread or process.
    let lockWaitMs = 0;
    db.on('lock-wait', (ms: number) => (lockWaitMs += ms));
    telemetry.gauge('botplatform_db_lock_wait_seconds', 'Time this process has waited for SQLite\'s write lock (held by another thread or process) since it started', () => lockWaitMs / 1000);
  }
  if (!migrate) return db;
  try {
    await migrateLatest(db);
  } catch (err) {
    await db.destroy().catch(() => {});
    throw err;
  }
  return db;
}

/** Kafka when brokers are configured (kafkajs is loaded only then: the embedded default stays smaller), else in-process. */
async function openBus(config: Config, logger: Logger, telemetry: Telemetry): Promise<Bus> {
  if (config.kafkaBrokers.length === 0) return createMemoryBus();
  return (await import('./bus/kafka-bus.js')).createKafkaBus({
    brokers: config.kafkaBrokers,
    clientId: config.kafkaClientId,
    topics: [{ topic: UPDATES_TOPIC, partitions: 8 }, { topic: WEBHOOK_UPDATES_TOPIC, partitions: 8 }, { topic: CONTROL_TOPIC, partitions: 1 }, { topic: MESSAGES_TOPIC, partitions: 8 }],
    logger,
    onLag: (group, topic, partition, lag) => telemetry.kafkaLag(group, topic, partition, lag),
    closeTimeoutMs: config.shutdownTimeoutMs,
  });
}

/** WEBHOOK_MAX_SOCKETS, lowered (and said so) when the process may not open that many files. */
function webhookSocketCap(wanted: number, logger: Logger): number {
  const limit = openFileLimit();
  const cap = socketCapWithin(wanted, limit);
  if (cap < wanted) logger.warn({ wanted, cap, openFileLimit: limit }, `WEBHOOK_MAX_SOCKETS lowered to ${cap}: the process may open ${limit} files`);
  return cap;
}
