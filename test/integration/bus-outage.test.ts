/**
 * A Kafka outage (a proxy between one core and the broker, cut and restored) does
 * not stop the service: ingest keeps committing promptly, long polls are answered
 * from the database, webhooks keep going out, /healthz says degraded (still 200) and
 * /metrics shows the outbox backlog and relay failures; when the broker returns the
 * relay catches up and nothing is lost. Run by the integration pass.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { InternalServiceClient, type IngestUpdatesResponse, IngestUpdatesRequest } from '../../src/gen/botplatform/v1/internal_service.js';
import { createLogger } from '../../src/logger.js';
import { mintAccountJwt } from '../../src/auth/account-jwt.js';
import { approvedBot, call, client, createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET, type Harness, type TestDatabase } from '../helpers/harness.js';
import { startKafkaProxy, type KafkaProxy } from '../helpers/kafka-proxy.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { createTestPki } from '../helpers/tls.js';
import { until } from '../helpers/until.js';

describe('a Kafka outage', () => {
  let app: App;
  let db: TestDatabase;
  let proxy: KafkaProxy;
  let receiver: Receiver;
  let internal: InternalServiceClient;
  let h: Harness;

  beforeAll(async () => {
    const pki = createTestPki();
    receiver = await startReceiver(pki);
    proxy = await startKafkaProxy(process.env.TEST_KAFKA_BROKERS!.split(',')[0]!);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-outage-'));
    db = await createTestDatabase(dir);
    const env = {
      DATA_DIR: dir, DATABASE_URL: db.url, ...kafkaEnv(), KAFKA_BROKERS: proxy.address, AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      SECRET_KEY: Buffer.alloc(32, 9).toString('base64'), LIMITS_ENABLED: 'false',
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile,
    };
    app = await startApp(loadConfig(env), createLogger(env.LOG_LEVEL));
    internal = new InternalServiceClient(`127.0.0.1:${app.grpcPort}`, grpc.credentials.createInsecure());
    h = { url: app.httpUrl!, jwt: (sub: string, o: { admin?: boolean } = {}) => mintAccountJwt(TEST_JWT_SECRET, { sub, roles: o.admin ? ['admin'] : [] }) } as unknown as Harness;
  }, 60_000);
  afterAll(async () => {
    internal?.close();
    await app?.close();
    await proxy?.close();
    await receiver?.close();
    await db?.drop();
  });

  const message = (text: string) => ({ messageId: 0, date: 0, chat: { id: 7, type: 'private' }, from: { id: 7, isBot: false }, text });
  /** One IngestUpdates call with a 3 s deadline; resolves with its duration. */
  const ingest = (botId: string, text: string) => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
    const t0 = performance.now();
    return new Promise<{ ms: number; res: IngestUpdatesResponse }>((resolve, reject) =>
      internal.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates: [{ botId, message: message(text) }] }), md, { deadline: Date.now() + 3000 },
        (err, res) => (err ? reject(err) : resolve({ ms: performance.now() - t0, res: res! }))));
  };
  const metric = async (name: string) => {
    const line = (await app.telemetry.render()).body.split('\n').find((l) => l.startsWith(`${name} `));
    return line ? Number(line.split(' ').pop()) : NaN;
  };
  const health = async () => call(app.httpUrl!, 'GET', '/healthz');

  it('keeps ingest, polls and webhooks going, reports degraded, and catches up after', async () => {
    const ownerJwt = await h.jwt('outage-owner');
    const polling = await approvedBot(h, ownerJwt, 'outage_poll_bot');
    const hooked = await approvedBot(h, ownerJwt, 'outage_hook_bot');
    expect((await client(h.url, ownerJwt).post(`/api/v1/bots/my/${hooked.id}/webhook`, { url: receiver.url, secret_token: 'outage' })).status).toBe(200);
    await ingest(polling.id, 'before');
    expect((await health()).body).toEqual({ status: 'ok' });

    await proxy.cut();
    const t0 = Date.now();

    // Ingest commits promptly, call after call (it used to wait on the relay's locks).
    for (let i = 0; i < 3; i++) {
      const { ms } = await ingest(polling.id, `during ${i}`);
      expect(ms).toBeLessThan(1500);
    }
    // Polls are answered from the database.
    const all = await call(app.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token: polling.token, body: { offset: 1 } });
    expect(all.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['before', 'during 0', 'during 1', 'during 2']);
    // A waiting long poll on this instance is answered when an update is committed.
    const waiting = call(app.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token: polling.token, body: { offset: 5, timeout: 20 } });
    await new Promise((r) => setTimeout(r, 300));
    const woke = Date.now();
    await ingest(polling.id, 'during 3');
    const answered = await waiting;
    expect(answered.status).toBe(200);
    expect(answered.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['during 3']);
    expect(Date.now() - woke).toBeLessThan(1500);
    // Webhooks keep going out (the dispatcher sweeps the database).
    await ingest(hooked.id, 'hook during');
    const delivered = await until(async () => receiver.received.map((r) => JSON.parse(r.raw.toString()).message.text), (t) => t.includes('hook during'), 5000);
    expect(delivered).toContain('hook during');

    // Degraded, not down; the backlog and the failures are in /metrics.
    const degraded = await until(health, (r) => r.body?.status === 'degraded', 5000);
    expect(degraded.status).toBe(200);
    expect(degraded.body.reasons.join(' ')).toMatch(/outbox relay cannot publish|kafka/);
    expect(await metric('botplatform_outbox_backlog')).toBeGreaterThanOrEqual(5);
    expect(await until(() => metric('botplatform_outbox_relay_failures_total'), (n) => n > 0, 8000)).toBeGreaterThan(0);
    expect(Date.now() - t0).toBeLessThan(15_000);

    // The broker returns: the relay publishes the backlog, health recovers.
    await proxy.restore();
    const empty = await until(() => metric('botplatform_outbox_backlog'), (n) => n === 0, 20_000);
    expect(empty).toBe(0);
    const healthy = await until(health, (r) => r.body?.status === 'ok', 20_000);
    expect(healthy.body).toEqual({ status: 'ok' });
    // Nothing lost, nothing doubled.
    const after = await call(app.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token: polling.token, body: { offset: 5 } });
    expect(after.body.result.map((u: { update_seq: number }) => u.update_seq)).toEqual([5]);
  }, 60_000);

  /**
   * The operator's run, bounded: the broker is away for BUS_OUTAGE_MS (default 15 s)
   * while updates are ingested at ~20/s and a bot long-polls them with offsets. No
   * call fails, every acknowledged update is read once, in order, and the relay's
   * backlog is gone within 5 s of the broker's return. Prints its figures.
   */
  it('a sustained outage under traffic: nothing fails or is lost, and the backlog drains within 5 s of the return', async () => {
    const outageMs = Number(process.env.BUS_OUTAGE_MS ?? 15_000);
    const ownerJwt = await h.jwt('sustained-owner');
    const bot = await approvedBot(h, ownerJwt, 'sustained_bot');
    const acked: string[] = [];
    const ingestMs: number[] = [];
    const failures: string[] = [];
    let stop = false;
    const producer = (async () => {
      for (let i = 0; !stop; i++) {
        const text = `s${i}`;
        await ingest(bot.id, text).then(({ ms }) => { acked.push(text); ingestMs.push(ms); }, (err: Error) => failures.push(`ingest: ${err.message}`));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const received: string[] = [];
    const pollMs: number[] = [];
    let offset = 0;
    const consumer = (async () => {
      while (!stop || received.length < acked.length) {
        const t0 = performance.now();
        const res = await call(app.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token: bot.token, body: { offset, timeout: 1 } });
        pollMs.push(performance.now() - t0);
        if (res.status !== 200) { failures.push(`poll: ${res.status}`); continue; }
        for (const u of res.body.result as { update_seq: number; message: { text: string } }[]) {
          received.push(u.message.text);
          offset = u.update_seq + 1;
        }
        if (stop && res.body.result.length === 0) break;
      }
    })();

    await new Promise((r) => setTimeout(r, 1000));
    await proxy.cut();
    await new Promise((r) => setTimeout(r, outageMs));
    const backlogAtReturn = await metric('botplatform_outbox_backlog');
    await proxy.restore();
    const returned = Date.now();
    await until(() => metric('botplatform_outbox_backlog'), (n) => n === 0, 20_000);
    const drainedMs = Date.now() - returned;
    await until(health, (r) => r.body?.status === 'ok', 20_000);
    stop = true;
    await producer;
    await consumer;

    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const p = (xs: number[], q: number) => Math.round(sorted(xs)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN);
    console.log(`[fault figures] Kafka away ${outageMs / 1000} s: ${acked.length} updates acknowledged, ${received.length} read, `
      + `ingest p50/p99/max ${p(ingestMs, 0.5)}/${p(ingestMs, 0.99)}/${Math.round(Math.max(...ingestMs))} ms, `
      + `poll p99 ${p(pollMs, 0.99)} ms, backlog at return ${backlogAtReturn}, drained ${drainedMs} ms after return, failures ${failures.length}`);
    expect(failures).toEqual([]);
    expect(received).toEqual(acked);
    expect(backlogAtReturn).toBeGreaterThan(0);
    expect(drainedMs).toBeLessThan(5000);
  }, 90_000);
});
