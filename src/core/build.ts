/**
 * The core's wiring: the RPC services over the backend and the update pipeline,
 * behind one authenticator and one limiter, as one `Core` (served over gRPC, and
 * called directly by a gateway in the same process). Nothing here starts or stops.
 */
import { createAccountJwtVerifier } from '../auth/account-jwt.js';
import { jwtKeySource } from '../auth/jwt-key-source.js';
import { LOCAL_INTERNAL_TOKEN_FILE, loadOrCreateSecret } from '../auth/local-secrets.js';
import type { Backend } from '../backend.js';
import type { FileStore } from '../blobs/file-store.js';
import { createAdminService } from '../domain/admin-service.js';
import { createConsoleService } from '../domain/console-service.js';
import { createDeliveriesService } from '../domain/deliveries-service.js';
import { createFeedService, createFeedWaker } from '../domain/feed-service.js';
import { createFilesService } from '../domain/files-service.js';
import { createMessagesService } from '../domain/messages-service.js';
import { createChatMessagesService } from '../domain/chat-messages-service.js';
import { createMetricsService } from '../domain/metrics-service.js';
import { createRuntimeService } from '../domain/runtime-service.js';
import { createUpdatesService } from '../domain/updates-service.js';
import { parseCidrs } from '../net/ssrf.js';
import { createIngestWriter } from '../pipeline/ingest.js';
import { announceOn } from '../pipeline/outbox-relay.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import { createFeedEventWriter } from '../pipeline/feed-event-writer.js';
import { createSendWriter } from '../pipeline/send-writer.js';
import type { Root } from '../process.js';
import { createFeedRepo } from '../storage/feed-repo.js';
import { createFilesRepo } from '../storage/files-repo.js';
import { createMessagesRepo } from '../storage/messages-repo.js';
import { createQueriesRepo } from '../storage/queries-repo.js';
import { createQueriesService } from '../domain/queries-service.js';
import { createAuthenticator } from './authenticate.js';
import { createBotGrants } from '../auth/bot-grants.js';
import { secretKeyOf } from '../auth/secret-key.js';
import { createCore, type Core } from './core.js';
import { createHandlers } from './handlers.js';
import { createLimiter, type Limiter } from './limits.js';

export interface BuiltCore {
  core: Core;
  /** Set when the embedded default created its own JWT signing secret. */
  localJwtSecret?: string;
  /** The files service: its sweeps drop uploads never completed, and content no file refers to after its retention. */
  files: { sweep(): Promise<void>; sweepUnreferencedBlobs(limit?: number): Promise<number> };
  /** The rate limiter, when limits are on. */
  limiter?: Limiter;
}

export async function buildCore({ config, logger, telemetry }: Omit<Root, 'shutdown'>, b: Backend, pipeline: Pipeline, fileStore: FileStore): Promise<BuiltCore> {
  const { relay, waiters } = pipeline;
  const { source, localSecret } = jwtKeySource(config);
  const jwt = await createAccountJwtVerifier(source, config.auth);
  const internalToken = config.internalApiToken ?? loadOrCreateSecret(config.dataDir, LOCAL_INTERNAL_TOKEN_FILE);

  const messages = createMessagesRepo(b.db);
  const queries = createQueriesRepo(b.db);
  /** The embedded default's bus (SQLite, no Kafka): in this process only. */
  const inProcessBus = config.database.kind === 'sqlite' && config.kafkaBrokers.length === 0 ? b.bus : undefined;
  const updates = createUpdatesService({
    bots: b.bots,
    messages,
    queries,
    updates: b.updates,
    webhooks: b.webhooks,
    units: b.units,
    waiters,
    writer: createIngestWriter({
      units: b.units, relay, waiters, telemetry, logger,
      // The embedded default: its updates announced with no outbox row (pipeline/ingest.ts).
      inProcessBus,
    }),
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
    grants: createBotGrants(secretKeyOf(config)),
  });
  waiters.onCredentialsChanged((botId) => authenticator.invalidateBot(botId));
  const credentialsChanged = (botId: string) => waiters.credentialsChanged(botId);
  const files = createFilesService({
    files: createFilesRepo(b.db),
    blobs: fileStore.blobs,
    signer: fileStore.signer,
    maxFileBytes: config.maxFileBytes,
    urlTtlMs: config.fileUrlTtlMs,
    publicBaseUrl: config.publicBaseUrl,
    possession: config.possession,
    unreferencedBlobRetentionMs: config.unreferencedBlobRetentionMs,
  });
  const limitSettings = config.limits.enabled ? config.limits : { botRate: null, chatRate: null, dailyQuota: 0 };
  const limiter = config.limits.enabled && (limitSettings.botRate || limitSettings.chatRate || limitSettings.dailyQuota > 0)
    ? createLimiter({ repo: b.limits, settings: limitSettings, telemetry, logger, recheckFullMs: config.statsFlushMs, reserveAheadMs: config.statsFlushMs })
    : undefined;
  const feedWaker = createFeedWaker();
  // Concurrent sends share a transaction (group commit); each committed batch wakes this
  // instance's feed streams at once (others poll), and its outbox messages go to the bus
  // from the commit or by the relay (pipeline/send-writer.ts).
  const sendWriter = createSendWriter({
    units: b.units, relay, committed: () => feedWaker.sent(),
    // The embedded default: its messages published from each commit, with no outbox row (the
    // in-process bus ends with the process and has no subscriber of the messages topic; the
    // messaging services read the outbound feed).
    ...(inProcessBus ? { announce: announceOn(inProcessBus, logger, 'sent messages') } : {}),
  });
  // Edits, deletes, chat actions and answers to queries reach the feed and the bus by the
  // relay, which each commit nudges.
  const announced = () => {
    feedWaker.sent();
    relay.nudge();
  };
  const eventWriter = createFeedEventWriter(b.units, announced);
  const core = createCore({
    authenticator,
    handlers: createHandlers({
      console: createConsoleService({
        ...deps, credentialsChanged, webhookOf: (id) => updates.webhookSummary(id),
        units: b.units, deletedBotRetentionMs: config.deletedBotRetentionMs,
        disabledWebhooks: async (ids) => new Set([...(await b.webhooks.limitsOf(ids))].filter(([, l]) => l.max === 0).map(([id]) => id)),
      }),
      admin: createAdminService(deps),
      runtime: createRuntimeService({ bots: b.bots }),
      updates,
      deliveries: createDeliveriesService({
        bots: b.bots, deliveries: b.deliveries, attempts: b.attempts, timeoutMs: config.webhookTimeoutMs,
        attemptsLog: b.attemptsLog, retentionMs: config.deliveryLogRetentionMs,
      }),
      messages: createMessagesService({ messages, sender: sendWriter, events: eventWriter, files }),
      chatMessages: createChatMessagesService({ bots: b.bots, messages }),
      queries: createQueriesService({
        queries, units: b.units, files, answerTimeoutMs: config.queryAnswerTimeoutMs,
        onCommitted: announced,
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
  return { core, localJwtSecret: localSecret, files, limiter };
}
