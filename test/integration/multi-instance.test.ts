/**
 * Several core instances on one MariaDB and one Kafka (run by the integration pass:
 * TEST_DATABASE_URL and TEST_KAFKA_BROKERS). A getUpdates waiting on one instance
 * wakes when the update was ingested on another, and answers what a read would; the newest poll wins across
 * instances; a webhook set on one instance ends a poll waiting on another; a token
 * regenerated on one instance, or its bot deleted there, is refused by the other within
 * 100 ms.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { InternalServiceClient, IngestUpdatesRequest } from '../../src/gen/botplatform/v1/internal_service.js';
import { createLogger } from '../../src/logger.js';
import { mintAccountJwt } from '../../src/auth/account-jwt.js';
import { call, client, createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET, type TestDatabase } from '../helpers/harness.js';
import { until } from '../helpers/until.js';


/**
 * `token` polled with getMe on `base` every few ms, before, during and after `act` (run
 * elsewhere): accepted throughout before it, then refused (401) within 100 ms of its
 * answer, and never accepted again after the first refusal. Answers `act`'s answer.
 */
async function refusedAfter<T extends { status: number }>(base: string, token: string, what: string, act: () => Promise<T>): Promise<T> {
  const seen: { at: number; status: number }[] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const res = await call(base, 'POST', '/api/v1/bots/getMe', { token });
      seen.push({ at: performance.now(), status: res.status });
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  let answer: T;
  let answered: number;
  try {
    // A few answers before (counted, not timed: on a loaded machine 150 ms held three).
    await until(async () => seen.length, (n) => n > 5);
    expect(seen.length).toBeGreaterThan(5);
    expect(seen.every((s) => s.status === 200)).toBe(true);
    answer = await act();
    answered = performance.now();
    expect(answer.status).toBe(200);
    await new Promise((r) => setTimeout(r, 400));
  } finally {
    // Stopped whatever failed: a poller left running meets the closed instances after the test.
    polling = false;
    await poller;
  }
  const accepted = seen.filter((s) => s.status === 200 && s.at > answered).map((s) => Math.round(s.at - answered));
  const refused = seen.filter((s) => s.status !== 200);
  expect(refused.length).toBeGreaterThan(0);
  expect(refused.map((s) => s.status).filter((st) => st !== 401)).toEqual([]);
  // Accepted only in the first 100 ms after the answer, and never once refused.
  expect(accepted.every((ms) => ms < 100), `accepted ${accepted.join(', ')} ms after ${what}`).toBe(true);
  expect(seen.some((s) => s.status === 200 && s.at > refused[0]!.at)).toBe(false);
  return answer;
}

describe('two core instances on MariaDB + Kafka', () => {
  let a: App;
  let b: App;
  let db: TestDatabase;
  let botId: string;
  let token: string;
  /** Past every update so far, so waiting polls have nothing to return at once. */
  let nextOffset = 0;

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-multi-'));
    db = await createTestDatabase(dir);
    const env = {
      DATA_DIR: dir, DATABASE_URL: db.url, ...kafkaEnv(), AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', LOG_LEVEL: 'silent',
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      // A bot polls getMe every few ms below: far past the default 30 calls a second.
      RATE_LIMIT_BOT: '100000/1s',
    };
    const logger = createLogger('silent');
    a = await startApp(loadConfig(env), logger);
    b = await startApp(loadConfig(env), logger);
    const jwt = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'multi-owner' });
    const created = await client(a.httpUrl!, jwt).post('/api/v1/bots/applications', { name: 'Multi', username: 'multi_bot' });
    botId = created.body.id;
    await client(a.httpUrl!, await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] })).post(`/api/v1/admin/bots/${botId}/approve`);
    token = (await client(b.httpUrl!, jwt).get(`/api/v1/bots/my/${botId}`)).body.one_time_token;
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await db?.drop();
  });

  const ingestOn = (app: App, text: string) => {
    const c = new InternalServiceClient(`127.0.0.1:${app.grpcPort}`, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
    return new Promise<void>((resolve, reject) =>
      c.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates: [{ botId, message: { messageId: 0, date: 0, chat: { id: 1, type: 'private' }, from: { id: 1, isBot: false }, text } }] }),
        md, (err) => { c.close(); if (err) reject(err); else resolve(); }),
    );
  };

  it('a poll waiting on B answers promptly when the update is ingested on A', async () => {
    const latencies: number[] = [];
    let offset = 0;
    for (let i = 0; i < 5; i++) {
      const waiting = call(b.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token, body: { offset, timeout: 20 } });
      await new Promise((r) => setTimeout(r, 300));
      const t0 = performance.now();
      await ingestOn(a, `cross ${i}`);
      const res = await waiting;
      latencies.push(performance.now() - t0);
      expect(res.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual([`cross ${i}`]);
      // What the woken poll answered (from the Kafka message's updates, or a read) is what a read of the same offset answers.
      expect((await call(b.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token, body: { offset } })).body).toEqual(res.body);
      offset = res.body.result[0].update_seq + 1;
    }
    nextOffset = offset;
    // Woken by Kafka, not by the 20 s timeout (the figure itself is reported by bench:updates).
    expect(Math.max(...latencies)).toBeLessThan(2000);
  });

  it('the newest poll wins across instances', async () => {
    const older = call(a.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token, body: { offset: nextOffset, timeout: 20 } });
    await new Promise((r) => setTimeout(r, 300));
    const newer = call(b.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token, body: { offset: nextOffset, timeout: 1 } });
    expect((await older).status).toBe(409);
    expect((await newer).status).toBe(200);
  });

  it('a short poll (timeout 0) through B ends a poll waiting on A, as a long one does', async () => {
    const older = call(a.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token, body: { offset: nextOffset, timeout: 20 } });
    await new Promise((r) => setTimeout(r, 300));
    const asked = Date.now();
    const newer = await call(b.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token, body: { offset: nextOffset } });
    expect(newer.body).toEqual({ ok: true, result: [] });
    expect((await older).status).toBe(409);
    // Ended by B's signal, not answered at its 20 s timeout.
    expect(Date.now() - asked).toBeLessThan(5000);
  });

  it('a webhook set through B ends a poll waiting on A', async () => {
    const waiting = call(a.httpUrl!, 'POST', '/api/v1/bots/getUpdates', { token, body: { offset: nextOffset, timeout: 20 } });
    await new Promise((r) => setTimeout(r, 300));
    const set = await call(b.httpUrl!, 'POST', '/api/v1/bots/setWebhook', { token, body: { url: 'https://127.0.0.1:9/h', secret_token: 's' } });
    expect(set.status).toBe(200);
    const cut = await waiting;
    expect(cut.status).toBe(409);
    await call(b.httpUrl!, 'POST', '/api/v1/bots/deleteWebhook', { token });
  });

  it('a token regenerated on A is refused by B within 100 ms, and never accepted after', async () => {
    const owner = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'multi-owner' });
    const created = await client(a.httpUrl!, owner).post('/api/v1/bots/applications', { name: 'Regen', username: 'multi_regen' });
    await client(a.httpUrl!, await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] })).post(`/api/v1/admin/bots/${created.body.id}/approve`);
    let old: string = (await client(a.httpUrl!, owner).get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token;
    for (let round = 0; round < 3; round++) {
      // B polls getMe with the token every few ms, before, during and after the regeneration on A.
      const regen = await refusedAfter(b.httpUrl!, old, 'regeneration', () => client(a.httpUrl!, owner).post(`/api/v1/bots/my/${created.body.id}/regenerate-token`));
      old = regen.body.one_time_token;
    }
  });

  it('a bot deleted on A: B refuses its token within 100 ms of the answer, and never accepts it after', async () => {
    const owner = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'multi-owner' });
    const created = await client(a.httpUrl!, owner).post('/api/v1/bots/applications', { name: 'Doomed', username: 'multi_deleted' });
    await client(a.httpUrl!, await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] })).post(`/api/v1/admin/bots/${created.body.id}/approve`);
    const doomed: string = (await client(a.httpUrl!, owner).get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token;
    await refusedAfter(b.httpUrl!, doomed, 'the deletion', () => call(a.httpUrl!, 'DELETE', `/api/v1/bots/my/${created.body.id}`, { token: owner, body: {} }));
    expect((await client(b.httpUrl!, owner).get(`/api/v1/bots/my/${created.body.id}`)).status).toBe(404);
  });
});
