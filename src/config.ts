/**
 * Configuration: one typed, validated module. Every setting comes from the
 * environment; a bad value stops start-up with one line per problem.
 */
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { isValidIpOrCidr } from './net/ssrf.js';

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses "250ms", "15s", "5m", "1h", "7d" (or a bare number of milliseconds). */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) return undefined;
  return Math.round(Number(m[1]) * DURATION_UNITS[m[2] ?? 'ms']!);
}

const duration = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      const ms = parseDuration(value);
      if (ms === undefined) {
        ctx.addIssue({ code: 'custom', message: `not a duration (e.g. 250ms, 15s, 5m, 1h, 7d): "${value}"` });
        return z.NEVER;
      }
      return ms;
    });

/**
 * ROLE=all's dispatcher threads by default: on the embedded default's in-process bus, one
 * per core beyond the one the main thread (ingest, the gateway, the core) keeps, at most 3
 * (past that SQLite's one writer is the limit: docs/capacity.md). With Kafka none: a
 * deployment there grows by dispatcher processes (ROLE=dispatcher), and a thread's consumer
 * would join the dispatchers' group whatever the broker's state.
 */
function defaultDispatcherThreads(kafkaBrokers: string | undefined): number {
  if (kafkaBrokers?.trim()) return 0;
  return Math.max(0, Math.min(3, os.availableParallelism() - 1));
}

/** An integer setting within [min, max]. */
const int = (fallback: number, min: number, max: number) => z.string().default(String(fallback)).transform(integerWithin(min, max));
/** An integer setting within [min, max], undefined when unset (its default derived elsewhere). */
const intOr = (min: number, max: number) => z.string().transform(integerWithin(min, max)).optional();
function integerWithin(min: number, max: number) {
  return (value: string, ctx: z.RefinementCtx) => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || n < min || n > max) {
      ctx.addIssue({ code: 'custom', message: `must be an integer from ${min} to ${max}: "${value}"` });
      return z.NEVER;
    }
    return n;
  };
}
const port = (fallback: number) => int(fallback, 0, 65535);

/** A limit of calls per window: "30/1s", "20/1m"; "off" (or "0") disables it. */
export interface RateSetting { count: number; windowMs: number }
const rate = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx): RateSetting | null => {
      const v = value.trim();
      if (v === 'off' || v === '0') return null;
      const m = /^(\d+)\/(.+)$/.exec(v);
      const windowMs = m ? parseDuration(m[2]!) : undefined;
      if (!m || Number(m[1]) < 1 || Number(m[1]) > 1_000_000_000 || windowMs === undefined || windowMs < 1000 || windowMs > 86_400_000) {
        ctx.addIssue({ code: 'custom', message: `must be "<count>/<window>" with a window from 1s to 24h (e.g. 30/1s, 20/1m), or off: "${value}"` });
        return z.NEVER;
      }
      return { count: Number(m[1]), windowMs };
    });
const bool = (fallback: boolean) =>
  z
    .string()
    .default(String(fallback))
    .transform((value, ctx) => {
      const v = value.trim().toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(v)) return true;
      if (['false', '0', 'no', 'off'].includes(v)) return false;
      ctx.addIssue({ code: 'custom', message: `must be true or false: "${value}"` });
      return z.NEVER;
    });
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

export type AuthConfig =
  | { kind: 'secret'; secret: string }
  | { kind: 'public-key'; pem: string }
  | { kind: 'jwks'; url: string }
  /** No auth setting: a signing secret is created in DATA_DIR (the embedded default). */
  | { kind: 'local' };

export type DatabaseConfig =
  | { kind: 'sqlite'; filename: string }
  | { kind: 'mysql'; url: string; poolMax: number; acquireTimeoutMs?: number };

const list = (v: string) => v.split(',').map((x) => x.trim()).filter(Boolean);

/**
 * Every setting, by its environment variable, with its default. The configuration table
 * of the docs is checked against it, name by name and default by default
 * (test/readme-config.test.ts).
 */
export const settingsSchema = z.object({
  ROLE: z.enum(['all', 'core', 'gateway', 'dispatcher']).default('all'),
  HOST: z.string().default('127.0.0.1'),
  PORT: port(8080),
  GRPC_PORT: port(50051),
  CORE_GRPC_ADDRESS: z.string().default('127.0.0.1:50051'),
  DATA_DIR: z.string().default('./data'),
  DATABASE_URL: optionalText.refine(
    (v) => v === undefined || /^(mysql|mariadb):\/\//.test(v) || v.startsWith('sqlite:'),
    'must start with mysql://, mariadb:// or sqlite:',
  ),
  DATABASE_POOL_MAX: int(10, 1, 200),
  DATABASE_ACQUIRE_TIMEOUT_MS: int(5000, 100, 120_000),
  AUTH_JWT_SECRET: optionalText.refine((v) => v === undefined || v.length >= 32, 'must be at least 32 characters'),
  AUTH_JWT_PUBLIC_KEY: optionalText,
  AUTH_JWKS_URL: optionalText.refine((v) => v === undefined || /^https?:\/\//.test(v), 'must be an http(s) URL'),
  AUTH_JWT_ISSUER: optionalText,
  AUTH_JWT_AUDIENCE: optionalText,
  SECRET_KEY: optionalText.refine(
    (v) => v === undefined || Buffer.from(v, 'base64').length === 32,
    'must be 32 bytes, base64-encoded',
  ),
  ONE_TIME_TOKEN_RETENTION: duration('7d'),
  AUTH_CACHE_TTL: duration('1s').refine((ms) => ms <= 10_000, 'must be at most 10s'),
  KAFKA_BROKERS: optionalText.refine(
    (v) => v === undefined || v.split(',').every((b) => /^[^\s:,]+:\d+$/.test(b.trim())),
    'must be host:port[,host:port...]',
  ),
  KAFKA_CLIENT_ID: z.string().regex(/^[A-Za-z0-9._-]+$/).default('botplatform'),
  INTERNAL_API_TOKEN: optionalText.refine((v) => v === undefined || v.length >= 32, 'must be at least 32 characters'),
  UPDATE_RETENTION: duration('24h').refine((ms) => ms >= 1000, 'must be at least 1s'),
  DELETED_BOT_RETENTION: duration('30d').refine((ms) => ms >= 1000 && ms <= 365 * 86_400_000, 'must be from 1s to 365d'),
  UNREFERENCED_BLOB_RETENTION: duration('1d').refine((ms) => ms >= 1000 && ms <= 365 * 86_400_000, 'must be from 1s to 365d'),
  DELIVERY_LOG_RETENTION: duration('3d').refine((ms) => ms >= 1000 && ms <= 90 * 86_400_000, 'must be from 1s to 90d'),
  OUTBOX_LINGER: duration('5ms').refine((ms) => ms <= 1000, 'must be at most 1s'),
  FEED_MAX_GROUP_MEMBERS: int(100, 1, 10_000),
  FEED_MAX_STREAMS_PER_CONNECTION: int(100, 1, 100_000),
  INGEST_IDEMPOTENCY_WINDOW: duration('24h').refine((ms) => ms >= 1000 && ms <= 30 * 86_400_000, 'must be from 1s to 30d'),
  QUERY_ANSWER_TIMEOUT: duration('15s').refine((ms) => ms >= 100 && ms <= 3_600_000, 'must be from 100ms to 1h'),
  WEBHOOK_ALLOWED_CIDRS: z.string().default('').refine(
    (v) => v.trim() === '' || v.split(',').every((c) => isValidIpOrCidr(c.trim())),
    'must be a comma-separated list of IPs or CIDR ranges',
  ),
  WEBHOOK_ALLOWED_PORTS: z.string().default('443,80,88,8443').transform((value, ctx) => {
    const ports = value.split(',').map((p) => p.trim());
    if (ports.some((p) => !/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535)) {
      ctx.addIssue({ code: 'custom', message: `must be a comma-separated list of ports 1-65535 (e.g. 443,80,88,8443): "${value}"` });
      return z.NEVER;
    }
    return ports.map(Number);
  }),
  WEBHOOK_RETRY_SCHEDULE: z.string().default('1m,5m,15m,1h').transform((value, ctx) => {
    const steps = value.split(',').map((v) => parseDuration(v.trim()));
    if (steps.length === 0 || steps.some((ms) => ms === undefined)) {
      ctx.addIssue({ code: 'custom', message: `must be a comma-separated list of durations (e.g. 1m,5m,15m,1h): "${value}"` });
      return z.NEVER;
    }
    return steps as number[];
  }),
  WEBHOOK_TIMEOUT_MS: int(15_000, 100, 120_000),
  WEBHOOK_CA_FILE: optionalText,
  WEBHOOK_DISABLE_AFTER: duration('5d').refine((ms) => ms >= 1000, 'must be at least 1s'),
  DISPATCHER_MAX_IN_FLIGHT: int(1000, 1, 100_000),
  DISPATCHER_THREADS: intOr(0, 16),
  WEBHOOK_SOCKETS_PER_ORIGIN: int(256, 1, 100_000),
  WEBHOOK_MAX_SOCKETS: int(8192, 16, 1_000_000),
  PLATFORM_EGRESS_IPS: z.string().default('').refine(
    (v) => v.trim() === '' || v.split(',').every((c) => isValidIpOrCidr(c.trim())),
    'must be a comma-separated list of IPs or CIDR ranges',
  ),
  MAX_BODY_BYTES: int(1024 * 1024, 1024, 64 * 1024 * 1024),
  MAX_FILE_BYTES: int(2 * 1024 ** 3, 1, 1024 ** 4),
  UPLOADS_PER_BOT: int(4, 1, 10_000),
  UPLOADS_MAX: int(32, 1, 100_000),
  REQUEST_TIMEOUT: duration('15m').refine((ms) => ms >= 1000 && ms <= 86_400_000, 'must be from 1s to 24h'),
  BODY_IDLE_TIMEOUT: duration('30s').refine((ms) => ms >= 100 && ms <= 3_600_000, 'must be from 100ms to 1h'),
  FILE_URL_TTL: duration('1h').refine((ms) => ms >= 1000, 'must be at least 1s'),
  POSSESSION_MAX_TRIES: int(5, 1, 100),
  POSSESSION_TRY_WINDOW: duration('1h').refine((ms) => ms >= 1000 && ms <= 7 * 86_400_000, 'must be from 1s to 7d'),
  BLOB_DIR: optionalText,
  BLOB_STORE: z.enum(['local', 's3']).default('local'),
  S3_ENDPOINT: optionalText.refine(
    (v) => v === undefined || /^https?:\/\/[^/?#\s@]+\/?$/.test(v),
    'must be an http(s) URL of the store alone, without path or credentials, e.g. https://s3.eu-west-1.amazonaws.com',
  ),
  S3_BUCKET: optionalText.refine((v) => v === undefined || /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(v), 'must be a bucket name: 3 to 63 of a-z 0-9 . -'),
  S3_REGION: z.string().default('us-east-1'),
  S3_ACCESS_KEY_ID: optionalText,
  S3_SECRET_ACCESS_KEY: optionalText,
  S3_FORCE_PATH_STYLE: bool(false),
  PUBLIC_BASE_URL: optionalText.refine(
    (v) => v === undefined || /^https?:\/\/[^/?#\s]+(\/[^?#\s]*)?$/.test(v),
    'must be an http(s) URL without query, e.g. https://bots.example.com',
  ),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LIMITS_ENABLED: bool(true),
  RATE_LIMIT_BOT: rate('30/1s'),
  RATE_LIMIT_CHAT: rate('20/1m'),
  QUOTA_DAILY: int(100_000, 0, 1_000_000_000),
  METRICS_ENABLED: bool(true),
  STATS_FLUSH_INTERVAL: duration('1s').refine((ms) => ms >= 10 && ms <= 60_000, 'must be from 10ms to 1m'),
  SHUTDOWN_DRAIN: duration('0ms').refine((ms) => ms <= 60_000, 'must be at most 1m'),
  SHUTDOWN_TIMEOUT: duration('30s').refine((ms) => ms >= 1000 && ms <= 600_000, 'must be from 1s to 10m'),
});

const schema = settingsSchema
  .refine((c) => c.ROLE !== 'dispatcher' || /^(mysql|mariadb):\/\//.test(c.DATABASE_URL ?? ''), {
    message: 'a separate dispatcher process shares the database with the core: set DATABASE_URL=mysql://... (on the embedded default, ROLE=all runs the dispatcher in the same process)',
    path: ['ROLE'],
  })
  // A key made up by the gateway itself would not verify the file URLs its cores sign.
  .refine((c) => c.ROLE !== 'gateway' || c.SECRET_KEY !== undefined, {
    message: 'ROLE=gateway needs the SECRET_KEY its cores use (file URLs are signed with it): set the same base64 32-byte key on both',
    path: ['SECRET_KEY'],
  })
  .refine((c) => c.BLOB_STORE !== 's3' || c.S3_BUCKET !== undefined, {
    message: 'BLOB_STORE=s3 needs S3_BUCKET (and S3_ENDPOINT for a store other than AWS S3)',
    path: ['S3_BUCKET'],
  })
  .refine((c) => (c.S3_ACCESS_KEY_ID === undefined) === (c.S3_SECRET_ACCESS_KEY === undefined), {
    message: 'set both S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY, or neither (then the AWS SDK\'s default credential chain is used)',
    path: ['S3_ACCESS_KEY_ID'],
  })
  // An object is made whole by one CopyObject when its upload completes; S3 copies at most 5 GiB so.
  .refine((c) => c.BLOB_STORE !== 's3' || c.MAX_FILE_BYTES <= 5 * 1024 ** 3, {
    message: 'BLOB_STORE=s3 takes files of at most 5 GiB (5368709120): lower MAX_FILE_BYTES',
    path: ['MAX_FILE_BYTES'],
  })
  .refine(
    (c) => [c.AUTH_JWT_SECRET, c.AUTH_JWT_PUBLIC_KEY, c.AUTH_JWKS_URL].filter(Boolean).length <= 1,
    { message: 'set at most one of AUTH_JWT_SECRET, AUTH_JWT_PUBLIC_KEY, AUTH_JWKS_URL', path: ['AUTH_JWT_SECRET'] },
  )
  // The settings as the service uses them: derived values resolved, names in camelCase.
  .transform((c) => {
    const dataDir = path.resolve(c.DATA_DIR);
    let database: DatabaseConfig;
    if (c.DATABASE_URL === undefined) database = { kind: 'sqlite', filename: path.join(dataDir, 'botplatform.sqlite') };
    else if (c.DATABASE_URL.startsWith('sqlite:')) {
      const file = c.DATABASE_URL.slice('sqlite:'.length).replace(/^\/\//, '');
      database = { kind: 'sqlite', filename: file === ':memory:' ? file : path.resolve(file) };
    } else database = { kind: 'mysql', url: c.DATABASE_URL.replace(/^mariadb:/, 'mysql:'), poolMax: c.DATABASE_POOL_MAX, acquireTimeoutMs: c.DATABASE_ACQUIRE_TIMEOUT_MS };

    const auth: AuthConfig = c.AUTH_JWT_SECRET
      ? { kind: 'secret', secret: c.AUTH_JWT_SECRET }
      : c.AUTH_JWT_PUBLIC_KEY
        ? { kind: 'public-key', pem: c.AUTH_JWT_PUBLIC_KEY }
        : c.AUTH_JWKS_URL
          ? { kind: 'jwks', url: c.AUTH_JWKS_URL }
          : { kind: 'local' };
    const authSettings: AuthConfig & { issuer?: string; audience?: string } = { ...auth, issuer: c.AUTH_JWT_ISSUER, audience: c.AUTH_JWT_AUDIENCE };

    return {
      role: c.ROLE,
      host: c.HOST,
      port: c.PORT,
      grpcPort: c.GRPC_PORT,
      coreGrpcAddress: c.CORE_GRPC_ADDRESS,
      dataDir,
      database,
      auth: authSettings,
      /** base64 32-byte key for secrets at rest and signed file URLs; created in DATA_DIR when unset (required by ROLE=gateway). */
      secretKey: c.SECRET_KEY,
      oneTimeTokenRetentionMs: c.ONE_TIME_TOKEN_RETENTION,
      authCacheTtlMs: c.AUTH_CACHE_TTL,
      /** Kafka brokers; none selects the in-process bus. */
      kafkaBrokers: list(c.KAFKA_BROKERS ?? ''),
      kafkaClientId: c.KAFKA_CLIENT_ID,
      /** Credential of internal services; created in DATA_DIR when unset. */
      internalApiToken: c.INTERNAL_API_TOKEN,
      updateRetentionMs: c.UPDATE_RETENTION,
      /** How long closed webhook deliveries and every delivery attempt are kept (the delivery log). */
      deliveryLogRetentionMs: c.DELIVERY_LOG_RETENTION,
      /** How long a deleted bot's data (and an approved one's username) is kept before the sweep removes it. */
      deletedBotRetentionMs: c.DELETED_BOT_RETENTION,
      /** How long content no file refers to any more keeps its bytes before the blob sweep removes them. */
      unreferencedBlobRetentionMs: c.UNREFERENCED_BLOB_RETENTION,
      /** How long an ingest idempotency key is remembered. */
      ingestIdempotencyWindowMs: c.INGEST_IDEMPOTENCY_WINDOW,
      /** How long after its ingest a callback or inline query may be answered. */
      queryAnswerTimeoutMs: c.QUERY_ANSWER_TIMEOUT,
      webhookAllowedCidrs: list(c.WEBHOOK_ALLOWED_CIDRS),
      webhookAllowedPorts: c.WEBHOOK_ALLOWED_PORTS,
      platformEgressIps: list(c.PLATFORM_EGRESS_IPS),
      webhookRetryScheduleMs: c.WEBHOOK_RETRY_SCHEDULE,
      webhookTimeoutMs: c.WEBHOOK_TIMEOUT_MS,
      webhookCaFile: c.WEBHOOK_CA_FILE,
      /** How long a webhook may fail without a success before it is disabled. */
      webhookDisableAfterMs: c.WEBHOOK_DISABLE_AFTER,
      dispatcherMaxInFlight: c.DISPATCHER_MAX_IN_FLIGHT,
      /** ROLE=all: worker threads running the dispatcher (0: on the main thread), each with its own connections to the database. */
      dispatcherThreads: c.DISPATCHER_THREADS ?? defaultDispatcherThreads(c.KAFKA_BROKERS),
      /** Most connections the dispatcher keeps to one webhook origin (see webhook-client.ts). */
      webhookSocketsPerOrigin: c.WEBHOOK_SOCKETS_PER_ORIGIN,
      /** Most webhook connections a dispatcher process keeps open, all origins together (held under its file-descriptor limit at start). */
      webhookMaxSockets: c.WEBHOOK_MAX_SOCKETS,
      maxBodyBytes: c.MAX_BODY_BYTES,
      /** Largest file accepted by upload-credentials. */
      maxFileBytes: c.MAX_FILE_BYTES,
      /** Multipart uploads the Telegram surface reads at once, per bot and in all. */
      uploads: { perBot: c.UPLOADS_PER_BOT, total: c.UPLOADS_MAX },
      /** Longest a request's body may take to arrive, and longest it may pause. */
      requestTimeoutMs: c.REQUEST_TIMEOUT,
      bodyIdleTimeoutMs: c.BODY_IDLE_TIMEOUT,
      /** How long signed upload and download URLs work. */
      fileUrlTtlMs: c.FILE_URL_TTL,
      /** Possession challenges an account may be handed for one content per window, answered or not. */
      possession: { maxTries: c.POSSESSION_MAX_TRIES, tryWindowMs: c.POSSESSION_TRY_WINDOW },
      /** Where the local-disk blob store keeps file bytes. */
      blobDir: path.resolve(c.BLOB_DIR ?? path.join(dataDir, 'files')),
      /** Which blob store holds file bytes: the local disk (BLOB_DIR) or an S3-compatible bucket. */
      blobStore: c.BLOB_STORE === 's3'
        ? {
          kind: 's3' as const,
          endpoint: c.S3_ENDPOINT?.replace(/\/+$/, ''),
          bucket: c.S3_BUCKET!,
          region: c.S3_REGION,
          credentials: c.S3_ACCESS_KEY_ID ? { accessKeyId: c.S3_ACCESS_KEY_ID, secretAccessKey: c.S3_SECRET_ACCESS_KEY! } : undefined,
          forcePathStyle: c.S3_FORCE_PATH_STYLE,
        }
        : { kind: 'local' as const },
      /** Base of upload and download URLs; else the base the request came to the gateway on. */
      publicBaseUrl: c.PUBLIC_BASE_URL?.replace(/\/+$/, ''),
      logLevel: c.LOG_LEVEL,
      /** Rate limits and quota of runtime calls; null: that limit is off. */
      limits: { enabled: c.LIMITS_ENABLED, botRate: c.RATE_LIMIT_BOT, chatRate: c.RATE_LIMIT_CHAT, dailyQuota: c.QUOTA_DAILY },
      metricsEnabled: c.METRICS_ENABLED,
      statsFlushMs: c.STATS_FLUSH_INTERVAL,
      /** Under sustained writes, how long the outbox relay waits after a busy round to carry more per bus publish. */
      outboxLingerMs: c.OUTBOX_LINGER,
      /** The outbound feed's caps: live members of one consumer group, and StreamSentMessages streams on one gRPC connection. */
      feed: { maxGroupMembers: c.FEED_MAX_GROUP_MEMBERS, maxStreamsPerConnection: c.FEED_MAX_STREAMS_PER_CONNECTION },
      shutdownDrainMs: c.SHUTDOWN_DRAIN,
      shutdownTimeoutMs: c.SHUTDOWN_TIMEOUT,
    };
  });

/** The validated settings: the output of the schema above. */
export type Config = z.output<typeof schema>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Reads and validates the configuration; throws ConfigError listing every bad value. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => `${i.path.join('.') || '(config)'}: ${i.message}`),
    );
  }
  return parsed.data;
}
