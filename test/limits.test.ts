/**
 * Rate limits and quotas, enforced in the core's chain: over HTTP (429 with
 * retry_after and Retry-After) and over gRPC (RESOURCE_EXHAUSTED with RetryInfo);
 * a bot that waits the time it was told succeeds; the quota holds across a
 * restart; the per-chat send limit (methods the proto declares chat_limited)
 * counts per (bot, chat) and a refused call takes nothing from the other counters.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLimiter } from '../src/core/limits.js';
import { ApiError, Code } from '../src/errors.js';
import { methodSettings } from '../src/gen/methods.js';
import { RuntimeServiceClient } from '../src/gen/botplatform/v1/runtime_service.js';
import { fromServiceError } from '../src/grpc/status-details.js';
import { createLogger } from '../src/logger.js';
import { createTelemetry } from '../src/telemetry/metrics.js';
import { createDb, migrateLatest } from '../src/storage/db.js';
import { createLimitsRepo } from '../src/storage/limits-repo.js';
import { approvedBot, client, createTestDatabase, kafkaEnv, startHarness, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET, type Harness } from './helpers/harness.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits until a fresh fixed window of `windowMs` has just begun, so a burst falls in one window. */
async function startOfWindow(windowMs: number) {
  const into = Date.now() % windowMs;
  if (into > 200) await sleep(windowMs - into + 20);
}

describe.each(['in-process', 'separate-gateway'] as const)('request rate limit (%s)', (mode) => {
  let h: Harness;
  let token: string;

  beforeAll(async () => {
    h = await startHarness(mode, { RATE_LIMIT_BOT: '5/3s', QUOTA_DAILY: '1000' });
    ({ token } = await approvedBot(h, await h.jwt('limit-owner'), 'limited_bot'));
  });
  afterAll(async () => h?.close());

  it('the call past the limit gets 429 with a usable retry_after; after waiting that long it succeeds', async () => {
    await startOfWindow(3000);
    for (let i = 0; i < 5; i++) expect((await client(h.url, token).post('/api/v1/bots/getMe')).status).toBe(200);
    const refused = await client(h.url, token).post('/api/v1/bots/getMe');
    expect(refused.status).toBe(429);
    const retryAfter = refused.body.parameters.retry_after;
    expect(refused.body).toEqual({
      ok: false, error_code: 429, description: `Too Many Requests: retry after ${retryAfter}`, parameters: { retry_after: retryAfter },
    });
    expect(refused.headers.get('retry-after')).toBe(String(retryAfter));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(3);

    // gRPC callers are bound by the same counter: RESOURCE_EXHAUSTED with google.rpc.RetryInfo.
    const rpc = new RuntimeServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    const err = await new Promise<ApiError>((resolve, reject) =>
      rpc.getMe({}, md, (e) => (e ? resolve(fromServiceError(e)) : reject(new Error('getMe was admitted')))));
    rpc.close();
    expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(err.retryAfterSeconds).toBeLessThanOrEqual(retryAfter);

    await sleep(retryAfter * 1000);
    const again = await client(h.url, token).post('/api/v1/bots/getMe');
    expect(again.status).toBe(200);
    expect(again.body.result.username).toBe('limited_bot');
  }, 20_000);

  it('the limit is per bot: another bot is not refused meanwhile', async () => {
    const other = await approvedBot(h, await h.jwt('limit-owner'), `other_${mode.replace('-', '_')}`);
    await startOfWindow(3000);
    for (let i = 0; i < 6; i++) await client(h.url, token).post('/api/v1/bots/getMe');
    expect((await client(h.url, token).post('/api/v1/bots/getMe')).status).toBe(429);
    expect((await client(h.url, other.token).post('/api/v1/bots/getMe')).status).toBe(200);
  }, 20_000);
});

describe('daily quota', () => {
  it('is kept across a restart, refuses with the time to the next UTC midnight, and shows in the metrics', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-quota-'));
    const db = await createTestDatabase(dir);
    const env = {
      DATA_DIR: dir, DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, LOG_LEVEL: 'silent', QUOTA_DAILY: '3', RATE_LIMIT_BOT: 'off', ...kafkaEnv(),
    };
    const logger = createLogger('silent');
    let app: App | undefined = await startApp(loadConfig(env), logger);
    try {
      const harness = { url: app.httpUrl!, jwt: (sub: string, o: { admin?: boolean } = {}) => import('../src/auth/account-jwt.js').then((m) => m.mintAccountJwt(TEST_JWT_SECRET, { sub, roles: o.admin ? ['admin'] : [] })) } as unknown as Harness;
      const ownerJwt = await harness.jwt('quota-owner');
      const bot = await approvedBot(harness, ownerJwt, 'quota_bot');
      for (let i = 0; i < 3; i++) expect((await client(app.httpUrl!, bot.token).post('/api/v1/bots/getMe')).status).toBe(200);

      await app.close();
      app = await startApp(loadConfig(env), logger);
      const refused = await client(app.httpUrl!, bot.token).post('/api/v1/bots/getMe');
      expect(refused.status).toBe(429);
      const toMidnight = Math.ceil((Math.floor(Date.now() / 86_400_000 + 1) * 86_400_000 - Date.now()) / 1000);
      expect(Math.abs(refused.body.parameters.retry_after - toMidnight)).toBeLessThanOrEqual(2);

      const metrics = await client(app.httpUrl!, ownerJwt).get(`/api/v1/bots/my/${bot.id}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.body.quota).toEqual({
        limit: 3, used: 3, remaining: 0, unlimited: false,
        resets_at: new Date(Math.floor(Date.now() / 86_400_000 + 1) * 86_400_000).toISOString(),
      });
      expect(metrics.body.rate_limit).toBeNull();
      // The refused call is counted as a call, not against the quota.
      expect(metrics.body.calls_by_method.getMe).toBe(4);
      expect(metrics.body.errors_by_status).toEqual({ RESOURCE_EXHAUSTED: 1 });
    } finally {
      await app?.close();
      await db.drop();
    }
  }, 60_000);
});

describe('per-chat send limit (limiter against the real counter store)', () => {
  // No Send* method exists on this branch yet; the limiter is driven the way the
  // core's chain drives it, with the RPC path and the decoded request.
  let db: ReturnType<typeof createDb>;
  let dbHandle: Awaited<ReturnType<typeof createTestDatabase>>;

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-chat-'));
    dbHandle = await createTestDatabase(dir);
    const url = dbHandle.url;
    db = createDb(url.startsWith('sqlite:') ? { kind: 'sqlite', filename: url.slice('sqlite:'.length) } : { kind: 'mysql', url, poolMax: 5 });
    await migrateLatest(db);
  });
  afterAll(async () => {
    await db?.destroy();
    await dbHandle?.drop();
  });

  it('counts per (bot, chat), applies to any Send* method with a chat_id, and refused calls take no quota', async () => {
    const repo = createLimitsRepo(db);
    const limiter = createLimiter({
      repo, telemetry: createTelemetry(false), logger: createLogger('silent'),
      settings: { botRate: { count: 100, windowMs: 60_000 }, chatRate: { count: 2, windowMs: 60_000 }, dailyQuota: 10 },
    });
    const send = (method: string, chatId: number | undefined, bot = 'bot-a') =>
      limiter.check(bot, `/botplatform.v1.RuntimeService/${method}`, chatId === undefined ? {} : { chatId, text: 'hi' })
        .then(() => 'ok', (e: ApiError) => `${Code[e.code]} ${e.retryAfterSeconds}`);

    expect(await send('SendMessage', 1)).toBe('ok');
    expect(await send('SendPhoto', 1)).toBe('ok');
    const refused = await send('SendDocument', 1);
    expect(refused).toMatch(/^RESOURCE_EXHAUSTED \d+$/);
    expect(Number(refused.split(' ')[1])).toBeLessThanOrEqual(60);
    expect(await send('SendMessage', 2)).toBe('ok'); // another chat
    expect(await send('SendMessage', 1, 'bot-b')).toBe('ok'); // another bot, same chat id
    expect(await send('GetMe', undefined)).toBe('ok'); // not a send
    expect(await send('SendMessage', 1)).toMatch(/^RESOURCE_EXHAUSTED/); // refused locally now

    // Calls that were admitted, and only those, used the quota: 4 of bot-a's 10 (once what the limiter reserved ahead is given back).
    await limiter.release();
    const quota = await repo.counter('quota:bot-a');
    expect(quota?.count).toBe(4);
    const chat = await repo.counter('chat:bot-a:1');
    expect(chat?.count).toBe(2);
  });

  it('applies to the methods the proto declares chat_limited, not to any method named Send*', async () => {
    const runtime = '/botplatform.v1.RuntimeService';
    expect(Object.keys(methodSettings).filter((p) => methodSettings[p]!.chatLimited))
      .toEqual([`${runtime}/SendMessage`, `${runtime}/SendPhoto`, `${runtime}/SendDocument`, `${runtime}/CopyMessage`, `${runtime}/ForwardMessage`, `${runtime}/SendMediaGroup`]);
    const limiter = createLimiter({
      repo: createLimitsRepo(db), telemetry: createTelemetry(false), logger: createLogger('silent'),
      settings: { botRate: null, chatRate: { count: 1, windowMs: 60_000 }, dailyQuota: 0 },
    });
    const call = (method: string) => limiter.check('bot-declared', `${runtime}/${method}`, { chatId: 7, text: 'hi' })
      .then(() => 'ok', (e: ApiError) => Code[e.code]);
    expect(await call('SendMessage')).toBe('ok');
    expect(await call('SendDocument')).toBe('RESOURCE_EXHAUSTED');
    // A Send* method the proto does not declare chat_limited (a chat action posts no
    // message) is not counted against the chat.
    expect(await call('SendChatAction')).toBe('ok');
  });

  it('decides concurrent calls exactly: of 50 at once, as many as the limit are admitted', async () => {
    const limiter = createLimiter({
      repo: createLimitsRepo(db), telemetry: createTelemetry(false), logger: createLogger('silent'),
      settings: { botRate: { count: 7, windowMs: 60_000 }, chatRate: null, dailyQuota: 0 },
    });
    const results = await Promise.all(Array.from({ length: 50 }, () =>
      limiter.check('bot-burst', '/botplatform.v1.RuntimeService/GetMe', {}).then(() => true, () => false)));
    expect(results.filter(Boolean)).toHaveLength(7);
  });

  it('two instances deciding a busy counter in memory: most calls without the database, never past the limit, nothing lost', async () => {
    const repo = createLimitsRepo(db);
    /** Transactions each instance asked of the database. */
    const trips = [0, 0];
    const instance = (i: number) => createLimiter({
      repo: { ...repo, admit: (...a: Parameters<typeof repo.admit>) => (trips[i]!++, repo.admit(...a)), admitReserving: (...a: Parameters<typeof repo.admitReserving>) => (trips[i]!++, repo.admitReserving(...a)) },
      telemetry: createTelemetry(false), logger: createLogger('silent'),
      settings: { botRate: { count: 2000, windowMs: 3_600_000 }, chatRate: null, dailyQuota: 4000 },
    });
    const [a, b] = [instance(0), instance(1)];
    const getMe = (l: typeof a) => l.check('bot-busy', '/botplatform.v1.RuntimeService/GetMe', {}).then(() => true, (e: ApiError) => {
      expect(e.code).toBe(Code.RESOURCE_EXHAUSTED);
      return false;
    });
    // The hour's window (and the day's) must not turn during the test.
    const into = Date.now() % 3_600_000;
    if (into > 3_600_000 - 10_000) await sleep(3_600_000 - into + 50);
    const waves = async (count: number) => {
      let admitted = 0;
      for (let w = 0; w < count; w++) {
        const wave = await Promise.all(Array.from({ length: 50 }, (_, k) => getMe(k % 2 ? a : b)));
        admitted += wave.filter(Boolean).length;
        await sleep(5);
      }
      return admitted;
    };
    // 20 waves of 25 calls on each instance, 5 ms apart, well within the limit of 2,000 an hour.
    expect(await waves(20)).toBe(1000);
    // Most waves were decided from memory (deciding each in the database: a transaction per wave on each instance, 40).
    expect(trips[0]! + trips[1]!).toBeLessThan(20);
    // Given back, the counters hold exactly what was admitted: nothing counted twice, nothing lost.
    await a.release();
    await b.release();
    expect((await repo.counter('rate:bot-busy'))?.count).toBe(1000);
    expect((await repo.counter('quota:bot-busy'))?.count).toBe(1000);
    // 40 more waves, 2,000 calls for the 1,000 left: exactly those, never past the limit
    // (near it every call is decided in the database; what either instance held in reserve, its later waves spent).
    expect(await waves(40)).toBe(1000);
    await a.release();
    await b.release();
    expect((await repo.counter('rate:bot-busy'))?.count).toBe(2000);
    expect((await repo.counter('quota:bot-busy'))?.count).toBe(2000);
  });

  it('a burst on one instance holds at most an eighth of a small limit away from another instance', async () => {
    const settings = { botRate: { count: 40, windowMs: 3_600_000 }, chatRate: null, dailyQuota: 0 };
    const instance = () => createLimiter({ repo: createLimitsRepo(db), telemetry: createTelemetry(false), logger: createLogger('silent'), settings, recheckFullMs: 300 });
    const [a, b] = [instance(), instance()];
    const into = Date.now() % 3_600_000;
    if (into > 3_600_000 - 10_000) await sleep(3_600_000 - into + 50);
    const getMe = (l: typeof a) => l.check('bot-small', '/botplatform.v1.RuntimeService/GetMe', {}).then(() => true, () => false);
    // Two calls back to back on A: the second looks like a rate of 100 a second, 100 in the
    // next second, and reserves what it can (at most 40 / 8 = 5).
    expect(await getMe(a)).toBe(true);
    expect(await getMe(a)).toBe(true);
    // B is admitted until the counter is full: all but A's two calls and what A holds.
    let admitted = 0;
    while (await getMe(b)) admitted++;
    expect(admitted).toBeGreaterThanOrEqual(40 - 2 - 5);
    // Given back, B gets the rest once it asks the database again (it refuses a counter
    // it found full without asking, for recheckFullMs): never past the limit, nothing lost.
    await a.release();
    await sleep(350);
    while (await getMe(b)) admitted++;
    expect(admitted).toBe(38);
  });

  it('counts batches exactly: calls that all fit are admitted together, then a batch that overfills admits up to the limit', async () => {
    const repo = createLimitsRepo(db);
    const rules = (bot: string) => [
      { key: `rate:${bot}`, limit: 5, windowStart: 1_000, windowEnd: 2_000 },
      { key: `quota:${bot}`, limit: 100, windowStart: 0, windowEnd: 86_400_000 },
    ];
    // Two bots' calls in one batch: 2 of a, 1 of b.
    expect(await repo.admit([rules('batch-a'), rules('batch-b'), rules('batch-a')])).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
    expect(await repo.counter('rate:batch-a')).toMatchObject({ count: 2, windowStart: 1_000 });
    expect(await repo.counter('quota:batch-a')).toMatchObject({ count: 2 });
    expect(await repo.counter('rate:batch-b')).toMatchObject({ count: 1 });
    // 4 more of a: 3 fit the rate of 5, the 4th is refused and takes nothing from the quota.
    const results = await repo.admit(Array.from({ length: 4 }, () => rules('batch-a')));
    expect(results.map((r) => r.ok)).toEqual([true, true, true, false]);
    expect(await repo.counter('rate:batch-a')).toMatchObject({ count: 5 });
    expect(await repo.counter('quota:batch-a')).toMatchObject({ count: 5 });
    // The next window starts again from the batch's count.
    const next = (bot: string) => rules(bot).map((r) => (r.key.startsWith('rate:') ? { ...r, windowStart: 2_000, windowEnd: 3_000 } : r));
    expect(await repo.admit([next('batch-a'), next('batch-a')])).toEqual([{ ok: true }, { ok: true }]);
    expect(await repo.counter('rate:batch-a')).toMatchObject({ count: 2, windowStart: 2_000, windowEnd: 3_000 });
    expect(await repo.counter('quota:batch-a')).toMatchObject({ count: 7 });
  });
});



describe('per-chat send limit, end to end', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness('in-process', { RATE_LIMIT_CHAT: '3/4s', RATE_LIMIT_BOT: 'off' });
  });
  afterAll(async () => h?.close());

  it('sendMessage past the chat\'s limit gets 429 with retry_after; another chat is not refused; waiting succeeds', async () => {
    const jwt = await h.jwt('chat-limit-owner');
    const { id, token } = await approvedBot(h, jwt, 'chat_limited');
    for (const chat of [801, 802]) {
      await client(h.url, jwt).post(`/api/v1/bots/my/${id}/test-updates`, { text: 'hi', chat_id: chat });
    }
    const send = (chat: number) => client(h.url, token).post('/api/v1/bots/sendMessage', { chat_id: chat, text: 'x' });
    await startOfWindow(4000);
    for (let i = 0; i < 3; i++) expect((await send(801)).status).toBe(200);
    const refused = await send(801);
    expect(refused.status).toBe(429);
    const retryAfter = refused.body.parameters.retry_after as number;
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(4);
    expect((await send(802)).status).toBe(200);
    // Other methods of the bot are not counted against the chat.
    expect((await client(h.url, token).post('/api/v1/bots/getMe')).status).toBe(200);
    await sleep(retryAfter * 1000);
    expect((await send(801)).status).toBe(200);
  }, 20_000);
});
