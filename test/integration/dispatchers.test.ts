/**
 * Two dispatchers on one MariaDB and one Kafka share the deliveries: both attempt
 * some, and no delivery is attempted by both (each update reaches the receiver
 * exactly once when nothing fails). Run by the integration pass.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { mintAccountJwt } from '../../src/auth/account-jwt.js';
import { approvedBot, client, createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET, type Harness, type TestDatabase } from '../helpers/harness.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { createTestPki } from '../helpers/tls.js';

describe('two dispatchers', () => {
  const apps: App[] = [];
  let dispatchers: App[];
  let db: TestDatabase;
  let h: Harness;
  let receiver: Receiver;

  beforeAll(async () => {
    const pki = createTestPki();
    receiver = await startReceiver(pki);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-dispatchers-'));
    db = await createTestDatabase(dir);
    const env = {
      DATA_DIR: dir, DATABASE_URL: db.url, ...kafkaEnv(), AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', LOG_LEVEL: 'silent',
      SECRET_KEY: Buffer.alloc(32, 7).toString('base64'), LIMITS_ENABLED: 'false',
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile,
    };
    const logger = createLogger('silent');
    const core = await startApp(loadConfig({ ...env, ROLE: 'core' }), logger);
    apps.push(core);
    apps.push(await startApp(loadConfig({ ...env, ROLE: 'gateway', CORE_GRPC_ADDRESS: `127.0.0.1:${core.grpcPort}` }), logger));
    dispatchers = [await startApp(loadConfig({ ...env, ROLE: 'dispatcher' }), logger), await startApp(loadConfig({ ...env, ROLE: 'dispatcher' }), logger)];
    apps.push(...dispatchers);
    h = { url: apps[1]!.httpUrl!, jwt: (sub: string, o: { admin?: boolean } = {}) => mintAccountJwt(TEST_JWT_SECRET, { sub, roles: o.admin ? ['admin'] : [] }) } as unknown as Harness;
  }, 60_000);
  afterAll(async () => {
    for (const app of apps.reverse()) await app.close();
    await receiver?.close();
    await db?.drop();
  });

  /** Successful attempts made by one dispatcher, from its own Prometheus counters. */
  const attemptsBy = async (app: App) => {
    const text = (await app.telemetry.render()).body;
    const line = text.split('\n').find((l) => l.startsWith('botplatform_webhook_attempts_total{outcome="succeeded"}'));
    return line ? Number(line.split(' ').pop()) : 0;
  };

  it('share the work and never attempt one delivery twice', async () => {
    const ownerJwt = await h.jwt('dispatchers-owner');
    const owner = client(h.url, ownerJwt);
    const bots: string[] = [];
    for (let i = 0; i < 16; i++) {
      const bot = await approvedBot(h, ownerJwt, `two_dispatch_${i}`);
      expect((await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: 'two-dispatchers' })).status).toBe(200);
      bots.push(bot.id);
    }
    // A stream over a few seconds, while the second dispatcher's group join settles.
    const TOTAL = 2000;
    for (let sent = 0; sent < TOTAL; sent += 100) {
      const batch = await Promise.all(Array.from({ length: 100 }, (_, k) =>
        owner.post(`/api/v1/bots/my/${bots[(sent + k) % bots.length]}/test-updates`, { text: `u${sent + k}` })));
      expect(batch.map((r) => r.status)).toEqual(Array(100).fill(201));
    }
    await receiver.waitFor(TOTAL, 120_000);
    await new Promise((r) => setTimeout(r, 1000)); // a second attempt of anything would arrive now
    const ids = receiver.received.map((r) => String(r.headers['x-service-update-id']));
    expect(new Set(ids).size).toBe(TOTAL);
    expect(ids).toHaveLength(TOTAL);
    const T0 = Date.now();
    // Each dispatcher counts an attempt once its outcome is written, a little after the request.
    let [first, second] = [0, 0];
    for (let i = 0; i < 100 && first + second < TOTAL; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      [first, second] = [await attemptsBy(dispatchers[0]!), await attemptsBy(dispatchers[1]!)];
    }
    console.log(`two dispatchers: ${first} and ${second} of ${TOTAL} deliveries (${Date.now() - T0} ms after the last request)`);
    expect(first).toBeGreaterThan(0);
    expect(second).toBeGreaterThan(0);
    expect(first + second).toBe(TOTAL);
  }, 180_000);
});
