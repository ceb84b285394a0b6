/**
 * Boots the real service for a test file: the same startApp as `npm start`, on
 * ephemeral ports, with a fresh SQLite file or — when TEST_DATABASE_URL is set —
 * a fresh MariaDB/MySQL database created for this file and dropped after it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DestinationStream } from 'pino';
import { mintAccountJwt } from '../../src/auth/account-jwt.js';
import { startApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createMysqlDatabase, type TestDatabase } from './database.js';

export const TEST_JWT_SECRET = 'test-secret-test-secret-test-secret-0123456789';
export const TEST_INTERNAL_TOKEN = 'internal-test-token-internal-test-token-0001';
/** The key every process of a test shares (a separate gateway must be given its cores' key). */
export const TEST_SECRET_KEY = Buffer.alloc(32, 42).toString('base64');

/**
 * This test file's Kafka client id, which names its consumer groups. Files run at once (three
 * workers) on one broker: had they shared the dispatchers' group, every process any of them
 * started or stopped would rebalance the others', and a consumer leaving waits for the
 * rebalance it is in (CI: an app's close held past 40 s).
 */
export const TEST_KAFKA_CLIENT_ID = `bp-test-${process.pid}-${crypto.randomBytes(4).toString('hex')}`;

/** Kafka for the integration pass (TEST_KAFKA_BROKERS), with this file's groups; the in-process bus otherwise. */
export const kafkaEnv = (): Record<string, string> =>
  process.env.TEST_KAFKA_BROKERS ? { KAFKA_BROKERS: process.env.TEST_KAFKA_BROKERS, KAFKA_CLIENT_ID: TEST_KAFKA_CLIENT_ID } : {};

export type { TestDatabase };

/** A fresh database: a new SQLite file, or a new schema on the TEST_DATABASE_URL server. */
export async function createTestDatabase(dir: string): Promise<TestDatabase> {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) return { url: `sqlite:${path.join(dir, 'test.sqlite')}`, drop: async () => {} };
  return createMysqlDatabase(server, 'bp_test');
}

export const usingMysql = () => Boolean(process.env.TEST_DATABASE_URL);

export interface Harness {
  /** Base URL of the HTTP gateway. */
  url: string;
  grpcAddress: string;
  apps: App[];
  env: Record<string, string>;
  jwt(sub: string, opts?: { admin?: boolean; expiresIn?: string }): Promise<string>;
  close(): Promise<void>;
}

export type GatewayMode = 'in-process' | 'separate-gateway' | 'separate-dispatcher';

/**
 * Starts the service. 'in-process' is role=all; 'separate-gateway' is a core
 * (role=core) and a gateway (role=gateway) reaching it over gRPC. `logs`, when
 * given, receives the JSON log lines (set LOG_LEVEL in extraEnv to get any).
 */
export async function startHarness(
  mode: GatewayMode = 'in-process',
  extraEnv: Record<string, string> = {},
  logs?: DestinationStream,
): Promise<Harness> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-test-'));
  const db = await createTestDatabase(dir);
  const env = {
    DATA_DIR: dir,
    DATABASE_URL: db.url,
    HOST: '127.0.0.1',
    PORT: '0',
    GRPC_PORT: '0',
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN,
    SECRET_KEY: TEST_SECRET_KEY,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...kafkaEnv(),
    ...extraEnv,
  };
  const logger = createLogger(env.LOG_LEVEL, logs);
  const apps: App[] = [];
  try {
    if (mode === 'in-process') {
      apps.push(await startApp(loadConfig({ ...env, ROLE: 'all' }), logger));
    } else {
      const core = await startApp(loadConfig({ ...env, ROLE: 'core' }), logger);
      apps.push(core);
      // A dispatcher of its own (MySQL only), reaching the core over gRPC as a gateway does.
      if (mode === 'separate-dispatcher') apps.push(await startApp(loadConfig({ ...env, ROLE: 'dispatcher', PORT: '0', CORE_GRPC_ADDRESS: `127.0.0.1:${core.grpcPort}` }), logger));
      apps.push(await startApp(loadConfig({ ...env, ROLE: 'gateway', CORE_GRPC_ADDRESS: `127.0.0.1:${core.grpcPort}` }), logger));
    }
  } catch (err) {
    for (const a of apps.reverse()) await a.close();
    await db.drop();
    throw err;
  }
  const gateway = apps[apps.length - 1]!;
  const core = apps[0]!;
  return {
    url: gateway.httpUrl!,
    grpcAddress: `127.0.0.1:${core.grpcPort}`,
    apps,
    env,
    jwt: (sub, opts = {}) =>
      mintAccountJwt(env.AUTH_JWT_SECRET ?? TEST_JWT_SECRET, { sub, roles: opts.admin ? ['admin'] : [], expiresIn: opts.expiresIn ?? '1h' }),
    async close() {
      for (const a of [...apps].reverse()) await within(() => `closing the ROLE=${a.config.role} app (at ${a.closingStep() ?? 'no step'})`, a.close());
      await within(() => 'dropping the test database', db.drop());
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * `work`, or an error naming it when it takes over 40 s: a test file's afterAll then fails
 * with what hung (and within the 60 s hook timeout), not with vitest's bare "Hook timed out".
 */
async function within<T>(what: () => string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`harness: ${what()} did not end within 40 s`)), 40_000);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

export interface HttpResult {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** A JSON HTTP call against the gateway. */
export async function call(
  base: string,
  method: string,
  pathname: string,
  opts: { token?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<HttpResult> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  let body: string | undefined = opts.rawBody;
  if (opts.body !== undefined) body = JSON.stringify(opts.body);
  if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
  const res = await fetch(base + pathname, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

/** A client bound to one credential. */
export function client(base: string, token?: string) {
  return {
    get: (p: string) => call(base, 'GET', p, { token }),
    post: (p: string, body?: unknown) => call(base, 'POST', p, { token, body }),
    patch: (p: string, body?: unknown) => call(base, 'PATCH', p, { token, body }),
    del: (p: string, body?: unknown) => call(base, 'DELETE', p, { token, body }),
  };
}

/** Creates and approves a bot for `owner`; returns its id and first token. */
export async function approvedBot(h: Harness, ownerJwt: string, username: string) {
  const owner = client(h.url, ownerJwt);
  const created = await owner.post('/api/v1/bots/applications', { name: `Bot ${username}`, username });
  if (created.status !== 201) throw new Error(`create failed: ${JSON.stringify(created.body)}`);
  const admin = client(h.url, await h.jwt('test-reviewer', { admin: true }));
  const approved = await admin.post(`/api/v1/admin/bots/${created.body.id}/approve`);
  if (approved.status !== 200) throw new Error(`approve failed: ${JSON.stringify(approved.body)}`);
  const detail = await owner.get(`/api/v1/bots/my/${created.body.id}`);
  return { id: created.body.id as string, token: detail.body.one_time_token as string };
}
