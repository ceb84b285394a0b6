/**
 * What an operator and a bot developer see: the console's per-bot metrics and
 * Prometheus /metrics move as a scripted bot works (calls, errors, updates,
 * webhook attempts, open long polls); every log line is JSON, a request id given
 * to the gateway reaches the core's log over gRPC, and no credential is logged.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { startApp, type App } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { windowStart } from '../src/domain/metrics-service.js';
import { approvedBot, call, client, createTestDatabase, kafkaEnv, startHarness, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET, TEST_SECRET_KEY, type Harness, type TestDatabase } from './helpers/harness.js';
import { collectLogLines } from './helpers/log-lines.js';
import { startReceiver, type Receiver } from './helpers/receiver.js';
import { createTestPki } from './helpers/tls.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One sample of a Prometheus exposition, e.g. sample(text, 'x_total', {method: "GetMe"}); 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const m = /^[^{ ]+(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const have = Object.fromEntries([...(m[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) total += Number(m[2]);
  }
  return total;
}

describe('metrics move as a scripted bot works', () => {
  let h: Harness;
  let receiver: Receiver;
  let ownerJwt: string;

  beforeAll(async () => {
    const pki = createTestPki();
    receiver = await startReceiver(pki);
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_RETRY_SCHEDULE: '200ms', STATS_FLUSH_INTERVAL: '100ms',
    });
    ownerJwt = await h.jwt('metrics-owner');
  });
  afterAll(async () => {
    await h?.close();
    await receiver?.close();
  });

  const prom = async () => {
    const res = await fetch(`${h.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    return res.text();
  };

  it('per-bot metrics and /metrics count calls, errors, updates and long polls', async () => {
    const owner = client(h.url, ownerJwt);
    const { id, token } = await approvedBot(h, ownerJwt, 'scripted_bot');
    const bot = client(h.url, token);
    const before = await prom();

    for (let i = 0; i < 3; i++) expect((await bot.post('/api/v1/bots/getMe')).status).toBe(200);
    for (const text of ['one', 'two']) expect((await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text })).status).toBe(201);
    const got = await bot.post('/api/v1/bots/getUpdates', { offset: 0 });
    expect(got.body.result).toHaveLength(2);
    expect((await bot.post('/api/v1/bots/getUpdates', { limit: 500 })).status).toBe(400);

    // A long poll in flight shows as an open long poll.
    const waiting = bot.post('/api/v1/bots/getUpdates', { offset: got.body.result[1].update_seq + 1, timeout: 10 });
    await sleep(200);
    expect(sample(await prom(), 'botplatform_long_polls_open')).toBe(1);
    await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text: 'three' });
    expect((await waiting).body.result).toHaveLength(1);
    expect(sample(await prom(), 'botplatform_long_polls_open')).toBe(0);

    const m = await owner.get(`/api/v1/bots/my/${id}/metrics`);
    expect(m.status).toBe(200);
    expect(m.body).toMatchObject({
      window_seconds: 3600,
      calls_total: 6,
      errors_total: 1,
      calls_by_method: { getMe: 3, getUpdates: 3 },
      errors_by_status: { INVALID_ARGUMENT: 1 },
      quota: { limit: 100000, used: 6, remaining: 99994, unlimited: false },
      rate_limit: { limit: 30, window_seconds: 1 },
      chat_rate_limit: { limit: 20, window_seconds: 60 },
      updates: { pending: 1, delivered: 3, dead: 0 },
      webhook: { attempts: 0, succeeded: 0, failed: 0, max_latency_ms: 0 },
    });
    // The window covers at least the hour asked for (whole minutes, so up to one more).
    expect(Date.parse(m.body.since)).toBeLessThanOrEqual(Date.now() - 3600_000);
    expect(Date.parse(m.body.since)).toBeGreaterThan(Date.now() - 3660_000 - 5_000);
    expect(m.body.webhook.success_rate).toBeUndefined();

    const after = await prom();
    const delta = (name: string, labels: Record<string, string> = {}) => sample(after, name, labels) - sample(before, name, labels);
    expect(delta('botplatform_rpc_calls_total', { method: 'GetMe', code: 'OK' })).toBe(3);
    expect(delta('botplatform_rpc_calls_total', { method: 'GetUpdates', code: 'INVALID_ARGUMENT' })).toBe(1);
    expect(delta('botplatform_rpc_duration_seconds_count', { method: 'GetMe', code: 'OK' })).toBe(3);
    expect(delta('botplatform_http_requests_total', { route: '/api/v1/bots/getMe', status: '200' })).toBe(3);
    expect(delta('botplatform_http_requests_total', { route: '/api/v1/bots/my/:id/test-updates', status: '201' })).toBe(3);
    expect(delta('botplatform_updates_ingested_total', { outcome: 'stored' })).toBe(3);
    expect(sample(after, 'botplatform_process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('webhook attempts: success rate, latency, dead letters, in both views', async () => {
    const owner = client(h.url, ownerJwt);
    const { id } = await approvedBot(h, ownerJwt, 'hooked_bot');
    expect((await owner.post(`/api/v1/bots/my/${id}/webhook`, { url: receiver.url, secret_token: 'metrics-secret' })).status).toBe(200);
    const before = await prom();
    receiver.script({ status: 200 }, { status: 500 }, { status: 500 });
    await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text: 'ok' });
    await receiver.waitFor(receiver.received.length + 1);
    await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text: 'fails twice, then dead' });

    let m;
    for (let i = 0; i < 100; i++) {
      m = (await owner.get(`/api/v1/bots/my/${id}/metrics?window_seconds=60`)).body;
      if (m.updates.dead === 1) break;
      await sleep(100);
    }
    expect(m.window_seconds).toBe(60);
    // The last 60 s, whole minutes: what happened just before a minute began still counts.
    expect(Date.parse(m.since)).toBeLessThanOrEqual(Date.now() - 60_000);
    expect(m.webhook).toMatchObject({ attempts: 3, succeeded: 1, failed: 2 });
    expect(m.webhook.success_rate).toBeCloseTo(1 / 3);
    expect(m.webhook.avg_latency_ms).toBeGreaterThanOrEqual(0);
    expect(m.webhook.max_latency_ms).toBeGreaterThanOrEqual(m.webhook.avg_latency_ms);
    expect(m.updates).toEqual({ pending: 0, delivered: 1, dead: 1 });

    const after = await prom();
    const delta = (labels: Record<string, string>) =>
      sample(after, 'botplatform_webhook_attempts_total', labels) - sample(before, 'botplatform_webhook_attempts_total', labels);
    expect(delta({ outcome: 'succeeded' })).toBe(1);
    expect(delta({ outcome: 'failed' })).toBe(1);
    expect(delta({ outcome: 'dead_letter' })).toBe(1);
  });

  it('a window starts at the minute holding its beginning, so it never covers less than asked', () => {
    const at = (hms: string) => Date.parse(`2026-11-23T${hms}Z`);
    expect(windowStart(at('12:00:01.000'), 60)).toBe(at('11:59:00'));
    expect(windowStart(at('12:00:59.999'), 60)).toBe(at('11:59:00'));
    expect(windowStart(at('12:00:00.000'), 60)).toBe(at('11:59:00'));
    expect(windowStart(at('12:30:10.000'), 3600)).toBe(at('11:30:00'));
    expect(windowStart(at('12:30:10.000'), 90)).toBe(at('12:28:00'));
  });

  it('another account\'s bot is 404; a window out of range is 400', async () => {
    const { id } = await approvedBot(h, ownerJwt, 'private_metrics');
    const stranger = client(h.url, await h.jwt('someone-else'));
    expect((await stranger.get(`/api/v1/bots/my/${id}/metrics`)).status).toBe(404);
    const bad = await client(h.url, ownerJwt).get(`/api/v1/bots/my/${id}/metrics?window_seconds=5`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toEqual([{ field: 'window_seconds', reason: 'OUT_OF_RANGE' }]);
  });
});

describe('logs: JSON, request id from the gateway into the core over gRPC, credentials redacted', () => {
  let core: App;
  let gateway: App;
  let db: TestDatabase;
  const { sink, lines, raw } = collectLogLines();

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-logs-'));
    db = await createTestDatabase(dir);
    const logger = createLogger('info', sink);
    const env = {
      DATA_DIR: dir, DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, SECRET_KEY: TEST_SECRET_KEY, ...kafkaEnv(),
    };
    core = await startApp(loadConfig({ ...env, ROLE: 'core' }), logger.child({ role: 'core' }));
    gateway = await startApp(loadConfig({ ...env, ROLE: 'gateway', CORE_GRPC_ADDRESS: `127.0.0.1:${core.grpcPort}` }), logger.child({ role: 'gateway' }));
  });
  afterAll(async () => {
    await gateway?.close();
    await core?.close();
    await db?.drop();
  });

  it('carries x-request-id to the core, echoes it, makes one up for a bad one, and logs no credential', async () => {
    const jwt = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'log-owner' });
    const h = { url: gateway.httpUrl!, jwt: (sub: string, o: { admin?: boolean } = {}) => mintAccountJwt(TEST_JWT_SECRET, { sub, roles: o.admin ? ['admin'] : [] }) } as unknown as Harness;
    const { id, token } = await approvedBot(h, jwt, 'logged_bot');
    const secret = 'hook-secret-never-logged';
    const res = await call(gateway.httpUrl!, 'POST', '/api/v1/bots/getMe', { token, headers: { 'x-request-id': 'trace-abc-123' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe('trace-abc-123');
    await call(gateway.httpUrl!, 'POST', `/api/v1/bots/my/${id}/webhook`, { token: jwt, body: { url: 'https://127.0.0.1/x', secret_token: secret } });
    await call(gateway.httpUrl!, 'POST', '/api/v1/bots/getMe', { token: `${token}x` }); // a bad token, refused
    const forged = await call(gateway.httpUrl!, 'POST', '/api/v1/bots/getMe', { token, headers: { 'x-request-id': 'bad id {"level":60}' } });
    expect(forged.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    await sleep(100);

    const core = lines.find((l) => l.role === 'core' && l.msg === 'rpc' && l.requestId === 'trace-abc-123');
    expect(core).toMatchObject({ rpc: 'GetMe', code: 'OK', bot: id, service: 'botplatform' });
    const edge = lines.find((l) => l.role === 'gateway' && l.msg === 'http' && l.requestId === 'trace-abc-123');
    expect(edge).toMatchObject({ method: 'POST', route: '/api/v1/bots/getMe', status: 200 });
    expect(lines.some((l) => l.role === 'core' && l.requestId === forged.headers.get('x-request-id'))).toBe(true);

    const all = raw.join('\n');
    expect(all).not.toContain(token);
    expect(all).not.toContain(jwt);
    expect(all).not.toContain(secret);
    expect(all).not.toContain(TEST_JWT_SECRET);
    expect(all).not.toContain(TEST_INTERNAL_TOKEN);
  });
});

describe('logs in one process: one line per HTTP request, with the core call it made', () => {
  let app: App;
  let db: TestDatabase;
  const { sink, lines } = collectLogLines();

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-logs-one-'));
    db = await createTestDatabase(dir);
    app = await startApp(loadConfig({
      DATA_DIR: dir, DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, SECRET_KEY: TEST_SECRET_KEY, ROLE: 'all', ...kafkaEnv(),
    }), createLogger('info', sink));
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  it('writes the http line with the call\'s rpc, code, caller and core time, and no separate rpc line', async () => {
    const jwt = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'one-line-owner' });
    const h = { url: app.httpUrl!, jwt: (sub: string, o: { admin?: boolean } = {}) => mintAccountJwt(TEST_JWT_SECRET, { sub, roles: o.admin ? ['admin'] : [] }) } as unknown as Harness;
    const { id, token } = await approvedBot(h, jwt, 'one_line_bot');
    const ok = await call(app.httpUrl!, 'POST', '/api/v1/bots/getMe', { token, headers: { 'x-request-id': 'one-line-ok' } });
    expect(ok.status).toBe(200);
    const refused = await call(app.httpUrl!, 'POST', '/api/v1/bots/getMe', { token: `${token}x`, headers: { 'x-request-id': 'one-line-refused' } });
    expect(refused.status).toBe(401);
    const listed = await call(app.httpUrl!, 'GET', '/api/v1/bots/my', { token: jwt, headers: { 'x-request-id': 'one-line-console' } });
    expect(listed.status).toBe(200);
    await sleep(100);

    const of = (requestId: string) => lines.filter((l) => l.requestId === requestId);
    expect(of('one-line-ok')).toEqual([expect.objectContaining({
      msg: 'http', method: 'POST', route: '/api/v1/bots/getMe', status: 200, rpc: 'GetMe', code: 'OK', bot: id,
      ms: expect.any(Number), rpcMs: expect.any(Number),
    })]);
    expect(of('one-line-refused')).toEqual([expect.objectContaining({ msg: 'http', status: 401, rpc: 'GetMe', code: 'UNAUTHENTICATED' })]);
    expect(of('one-line-console')).toEqual([expect.objectContaining({ msg: 'http', status: 200, rpc: 'ListMyBots', code: 'OK', account: 'one-line-owner' })]);
  });
});

describe('log redaction', () => {
  it('redacts credentials wherever the service logs them: top level, in an error, in metadata, headers or a request', () => {
    const out: string[] = [];
    const logger = createLogger('info', new Writable({ write(chunk, _enc, done) { out.push(chunk.toString()); done(); } }));
    const s = 'sbot_NEVERLOGGEDNEVERLOGGEDNEVERLOGGED0001';
    logger.info({ authorization: `Bearer ${s}`, token: s, secret_token: s, jwt: s }, 'top');
    logger.error({ err: Object.assign(new Error('boom'), { token: s, headers: { authorization: s }, config: { headers: { authorization: s } } }) }, 'err');
    logger.info({ metadata: { authorization: s }, headers: { authorization: s }, req: { headers: { authorization: s } } }, 'nested');
    logger.info({ body: { secret_token: s, one_time_token: s }, options: { internalToken: s, password: s } }, 'bodies');
    const all = out.join('');
    expect(out).toHaveLength(4);
    expect(all).not.toContain(s);
    expect(all).toContain('[redacted]');
  });
});
