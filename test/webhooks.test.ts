/**
 * Webhook delivery to real HTTPS receivers on loopback (a test CA given by
 * WEBHOOK_CA_FILE): signatures, the retry schedule to dead_letter (compressed to
 * milliseconds by configuration), manual retry, redirects and timeouts, ordering,
 * isolation between bots, allowed_ips, and mode switches.
 */
import crypto from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusMessage } from '../src/bus/bus.js';
import { NO_DELIVERY, UPDATES_TOPIC, WEBHOOK_UPDATES_TOPIC } from '../src/bus/topics.js';
import { InternalServiceClient, IngestUpdatesRequest } from '../src/gen/botplatform/v1/internal_service.js';
import { approvedBot, call, client, startHarness, TEST_INTERNAL_TOKEN, type Harness } from './helpers/harness.js';
import { startReceiver, type Receiver } from './helpers/receiver.js';
import { until } from './helpers/until.js';
import { createTestPki, type TestPki } from './helpers/tls.js';

const SECRET = 'hook_secret-123';

describe('webhook delivery', () => {
  let h: Harness;
  let pki: TestPki;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      WEBHOOK_CA_FILE: pki.caFile,
      WEBHOOK_RETRY_SCHEDULE: '150ms,300ms,450ms,600ms',
      WEBHOOK_TIMEOUT_MS: '800',
    });
    ownerJwt = await h.jwt('hook-owner');
    owner = client(h.url, ownerJwt);
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await h?.close();
  });

  async function botWithReceiver(name: string, extra: object = {}) {
    const receiver = await startReceiver(pki);
    receivers.push(receiver);
    const bot = await approvedBot(h, ownerJwt, name);
    const set = await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET, ...extra });
    expect(set.status).toBe(200);
    return { ...bot, receiver };
  }
  const inject = (id: string, text: string) => owner.post(`/api/v1/bots/my/${id}/test-updates`, { text });
  const deliveries = async (id: string) => (await owner.get(`/api/v1/bots/my/${id}/deliveries?limit=100`)).body;

  it('POSTs the update with a signature that verifies over timestamp + "." + raw body', async () => {
    const { id, token, receiver } = await botWithReceiver('hook_signed');
    const created = await inject(id, 'signed hello');
    await receiver.waitFor(1);
    const [req] = receiver.received;
    const ts = String(req!.headers['x-service-timestamp']);
    const expected = crypto.createHmac('sha256', SECRET).update(`${ts}.${req!.raw.toString('utf8')}`).digest('hex');
    expect(req!.headers['x-service-signature-v2']).toBe(expected);
    // A webhook set through the native API is signed only: the secret itself never travels.
    expect(req!.headers['x-telegram-bot-api-secret-token']).toBeUndefined();
    expect(Object.values(req!.headers).join(' ')).not.toContain(SECRET);
    expect(Math.abs(Number(ts) - Date.now() / 1000)).toBeLessThan(5);
    expect(req!.headers['x-service-update-id']).toBe(String(created.body.update_id));
    expect(req!.headers['content-type']).toBe('application/json');
    const body = JSON.parse(req!.raw.toString('utf8'));
    expect(body).toMatchObject({ update_id: created.body.update_id, update_seq: 1, message: { text: 'signed hello' } });

    const log = await until(() => deliveries(id), (d) => d.items[0]?.status === 'succeeded');
    expect(log.items[0]).toMatchObject({
      update_id: created.body.update_id, update_seq: 1, status: 'succeeded', attempts: 1, last_status_code: 200, next_attempt_at: null,
    });
    expect(log.items[0].id).toMatch(/^dlv_/);
    expect(log.pagination).toEqual({ page: 1, limit: 100, total: 1, has_more: false });
    const info = await call(h.url, 'POST', '/api/v1/bots/getWebhookInfo', { token });
    expect(info.body.result.pending_update_count).toBe(0);
  });

  it("announces a webhook bot's updates to the dispatchers (their own topic, an empty value), a polling bot's to the long polls (its updates, or that no delivery was written)", async () => {
    const seen: BusMessage[] = [];
    await h.apps[0]!.bus!.subscribeAll([UPDATES_TOPIC, WEBHOOK_UPDATES_TOPIC], (m) => seen.push(m));
    const hooked = await botWithReceiver('hook_announced');
    const polling = await approvedBot(h, ownerJwt, 'hook_not_announced');
    await inject(hooked.id, 'to the webhook');
    await inject(polling.id, 'to the polls');
    await hooked.receiver.waitFor(1);
    await until(async () => seen.filter((m) => m.key === polling.id).length, (n) => n === 1);
    expect(seen.filter((m) => m.key === hooked.id).map((m) => [m.topic, m.value])).toEqual([[WEBHOOK_UPDATES_TOPIC, '']]);
    // Published by the commit itself, the polling bot's message carries its update; by the outbox relay, NO_DELIVERY.
    const [pollingOne] = seen.filter((m) => m.key === polling.id);
    expect(pollingOne!.topic).toBe(UPDATES_TOPIC);
    if (pollingOne!.value !== NO_DELIVERY) expect(JSON.parse(pollingOne!.value)).toMatchObject([[expect.any(Number), 1, 'message', expect.any(Number), { text: 'to the polls' }]]);
  });

  it('a receiver failing 5 times walks the whole schedule to dead_letter; a manual retry after it recovers succeeds', async () => {
    const { id, token, receiver } = await botWithReceiver('hook_dead');
    receiver.always({ status: 500 });
    const created = await inject(id, 'doomed');
    const dead = await until(() => deliveries(id), (d) => d.items[0]?.status === 'dead_letter');
    expect(dead.items[0]).toMatchObject({ status: 'dead_letter', attempts: 5, last_status_code: 500, last_error: 'HTTP 500', next_attempt_at: null });
    expect(receiver.received).toHaveLength(5);
    const gaps = receiver.received.slice(1).map((r, i) => r.at - receiver.received[i]!.at);
    gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual([150, 300, 450, 600][i]! - 20));
    const info = await call(h.url, 'POST', '/api/v1/bots/getWebhookInfo', { token });
    expect(info.body.result).toMatchObject({ last_error_message: 'HTTP 500', pending_update_count: 0 });
    expect(info.body.result.last_error_date).toBeGreaterThan(1_700_000_000);

    receiver.always({ status: 204 });
    const retried = await owner.post(`/api/v1/bots/my/${id}/deliveries/${dead.items[0].id}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ id: dead.items[0].id, status: 'succeeded', attempts: 5, last_status_code: 204 });
    const again = await owner.post(`/api/v1/bots/my/${id}/deliveries/${created.body.update_id}/retry`);
    expect(again.status).toBe(409);
    expect((await owner.post(`/api/v1/bots/my/${id}/deliveries/dlv_nope/retry`)).status).toBe(404);
    const stranger = client(h.url, await h.jwt('stranger'));
    expect((await stranger.post(`/api/v1/bots/my/${id}/deliveries/${dead.items[0].id}/retry`)).status).toBe(404);
    expect((await stranger.get(`/api/v1/bots/my/${id}/deliveries`)).status).toBe(404);
  });

  it('a manual retry by update_id answers with the delivery after the attempt', async () => {
    const { id, receiver } = await botWithReceiver('hook_manual');
    receiver.always({ status: 503 });
    const created = await inject(id, 'retry me');
    await until(() => deliveries(id), (d) => d.items[0]?.attempts >= 1);
    receiver.always({ status: 200 });
    const res = await owner.post(`/api/v1/bots/my/${id}/deliveries/${created.body.update_id}/retry`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ update_id: created.body.update_id, status: 'succeeded', last_status_code: 200 });
  });

  it('redirects are not followed and timeouts fail the attempt', async () => {
    const target = await startReceiver(pki);
    receivers.push(target);
    const { id, receiver } = await botWithReceiver('hook_redirect');
    receiver.script({ status: 302, location: target.url }, { hang: true });
    await inject(id, 'go elsewhere');
    const log = await until(() => deliveries(id), (d) => d.items[0]?.attempts >= 2);
    expect(target.received).toHaveLength(0);
    expect(receiver.received.length).toBeGreaterThanOrEqual(2);
    expect(log.items[0].last_error).toMatch(/timed out after 800 ms/);
    expect(log.items[0].last_duration_ms).toBeGreaterThanOrEqual(790);
  });

  it('first attempts leave in update_seq order', async () => {
    const { id, receiver } = await botWithReceiver('hook_order', { max_connections: 1 });
    for (let i = 1; i <= 8; i++) await inject(id, `n${i}`);
    await receiver.waitFor(8);
    expect(receiver.received.map((r) => JSON.parse(r.raw.toString()).update_seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('allowed_updates given with the webhook decides which kinds are delivered', async () => {
    const internal = new InternalServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
    const m = (text: string, messageId = 0) => ({ messageId, date: 0, chat: { id: 9, type: 'private' }, from: { id: 9, isBot: false }, text });
    const ingest = (updates: object[]) => new Promise<{ results: { filtered: boolean }[] }>((resolve, reject) =>
      internal.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates }), md, (err, r) => (err ? reject(err) : resolve(r as never))));
    // A message the bot received before its webhook (and its filter) was set: the one edited below.
    const bot = await approvedBot(h, ownerJwt, 'hook_kinds');
    await ingest([{ botId: bot.id, message: m('received', 5) }]);
    const receiver = await startReceiver(pki);
    receivers.push(receiver);
    const set = await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, {
      url: receiver.url, secret_token: SECRET, allowed_updates: ['edited_message'], drop_pending_updates: true,
    });
    expect(set.status).toBe(200);
    const { id } = bot;
    const res = await ingest([{ botId: id, message: m('not wanted') }, { botId: id, editedMessage: m('wanted', 5) }]);
    internal.close();
    expect(res.results.map((r) => r.filtered)).toEqual([true, false]);
    await receiver.waitFor(1);
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.received.map((r) => Object.keys(JSON.parse(r.raw.toString())).filter((k) => k.endsWith('message')))).toEqual([['edited_message']]);
    expect((await deliveries(id)).items).toHaveLength(1);
  });

  it('a bot whose endpoint hangs does not delay another bot', async () => {
    const slow = await botWithReceiver('hook_slow', { max_connections: 2 });
    // Two answered attempts open the slow bot's window (it starts at 1) to its max_connections.
    for (let i = 0; i < 2; i++) await inject(slow.id, `warm ${i}`);
    await slow.receiver.waitFor(2);
    await until(() => deliveries(slow.id), (d) => d.items.filter((x: { status: string }) => x.status === 'succeeded').length === 2);
    slow.receiver.always({ hang: true });
    const fast = await botWithReceiver('hook_fast');
    for (let i = 0; i < 4; i++) await inject(slow.id, `slow ${i}`);
    await slow.receiver.waitFor(4);
    const t0 = Date.now();
    await inject(fast.id, 'fast');
    await fast.receiver.waitFor(1);
    expect(Date.now() - t0).toBeLessThan(700); // well under the 800 ms the slow attempts hang for
    expect(slow.receiver.received.length).toBe(4); // max_connections holds the rest back
  });

  it('hanging endpoints cannot use up the dispatcher\'s in-flight budget: other bots still get theirs', async () => {
    const small = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_TIMEOUT_MS: '3000', DISPATCHER_MAX_IN_FLIGHT: '2',
    });
    try {
      const jwt = await small.jwt('budget-owner');
      const hooked = async (name: string, extra: object = {}) => {
        const receiver = await startReceiver(pki);
        receivers.push(receiver);
        const bot = await approvedBot(small, jwt, name);
        await client(small.url, jwt).post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET, ...extra });
        return { ...bot, receiver };
      };
      const slow = await hooked('budget_slow', { max_connections: 4 });
      // Three answered attempts open the slow bot's window (it starts at 1) to its max_connections.
      for (let i = 0; i < 3; i++) await client(small.url, jwt).post(`/api/v1/bots/my/${slow.id}/test-updates`, { text: `warm ${i}` });
      await slow.receiver.waitFor(3);
      await until(async () => (await client(small.url, jwt).get(`/api/v1/bots/my/${slow.id}/deliveries`)).body.items,
        (items) => items.filter((x: { status: string }) => x.status === 'succeeded').length === 3);
      slow.receiver.always({ hang: true });
      const fast = await hooked('budget_fast');
      for (let i = 0; i < 4; i++) await client(small.url, jwt).post(`/api/v1/bots/my/${slow.id}/test-updates`, { text: `slow ${i}` });
      await slow.receiver.waitFor(3 + 2); // the whole budget of 2 is now hanging
      const t0 = Date.now();
      await client(small.url, jwt).post(`/api/v1/bots/my/${fast.id}/test-updates`, { text: 'fast' });
      await fast.receiver.waitFor(1);
      // Parked after 750 ms (a quarter of the timeout), far before the 3 s the hanging attempts last.
      expect(Date.now() - t0).toBeLessThan(2000);
      await slow.receiver.waitFor(3 + 4); // and the slow bot still gets its max_connections
    } finally {
      await small.close();
    }
  });

  it('allowed_ips is respected: a target outside it is never contacted', async () => {
    const { id, receiver } = await botWithReceiver('hook_allowed_ips', { allowed_ips: ['10.0.0.0/8'] });
    await inject(id, 'nope');
    const log = await until(() => deliveries(id), (d) => d.items[0]?.attempts >= 1);
    expect(log.items[0].last_error).toMatch(/outside allowed_ips/);
    expect(receiver.received).toHaveLength(0);
  });

  it('allowed_ips holds for every request: a bot is never carried to a refused address on another bot\'s pooled socket', async () => {
    // Y may only reach 127.0.0.2; its URL names localhost (127.0.0.1), so every attempt is refused.
    const receiver = await startReceiver(pki);
    receivers.push(receiver);
    const port = new URL(receiver.url).port;
    const y = await approvedBot(h, ownerJwt, 'hook_pool_y');
    expect((await owner.post(`/api/v1/bots/my/${y.id}/webhook`, {
      url: `https://localhost:${port}/y`, secret_token: SECRET, allowed_ips: ['127.0.0.2/32'],
    })).status).toBe(200);
    const first = await inject(y.id, 'y before x');
    const refused = await until(() => deliveries(y.id), (d) => d.items[0]?.attempts >= 1);
    expect(refused.items[0].last_error).toMatch(/outside allowed_ips/);

    // X (no allowed_ips) delivers to the same host and port, leaving a keep-alive socket to 127.0.0.1.
    const x = await approvedBot(h, ownerJwt, 'hook_pool_x');
    expect((await owner.post(`/api/v1/bots/my/${x.id}/webhook`, { url: `https://localhost:${port}/x`, secret_token: SECRET })).status).toBe(200);
    await inject(x.id, 'x warms the pool');
    await receiver.waitFor(1);

    // Y's next delivery and a manual retry are still refused, and reach nothing.
    await inject(y.id, 'y after x');
    const after = await until(() => deliveries(y.id), (d) => d.items.length === 2 && d.items[0]?.attempts >= 1);
    expect(after.items[0].last_error).toMatch(/outside allowed_ips/);
    await inject(x.id, 'x again');
    await receiver.waitFor(2);
    // 409 (ABORTED) means an automatic attempt holds the delivery right now: try again, as the answer says.
    const retried = await until(() => owner.post(`/api/v1/bots/my/${y.id}/deliveries/${first.body.update_id}/retry`), (r) => r.status !== 409, 5000);
    expect(retried.status).toBe(200);
    expect(retried.body.status).not.toBe('succeeded');
    expect(retried.body.last_error).toMatch(/outside allowed_ips/);
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.received.map((r) => JSON.parse(r.raw.toString()).message.text)).toEqual(['x warms the pool', 'x again']);
  });

  it('switching to webhook delivers what polling had not confirmed; deleting it hands the undelivered back to polling', async () => {
    const bot = await approvedBot(h, ownerJwt, 'hook_switch');
    await inject(bot.id, 'queued 1');
    await inject(bot.id, 'queued 2');
    const receiver = await startReceiver(pki);
    receivers.push(receiver);
    await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET });
    await receiver.waitFor(2);
    expect(receiver.received.map((r) => JSON.parse(r.raw.toString()).message.text).sort()).toEqual(['queued 1', 'queued 2']);

    receiver.always({ status: 500 });
    await inject(bot.id, 'undelivered');
    await until(() => deliveries(bot.id), (d) => d.items.some((x: { status: string }) => x.status === 'retrying'));
    await call(h.url, 'POST', '/api/v1/bots/deleteWebhook', { token: bot.token });
    const polled = await call(h.url, 'POST', '/api/v1/bots/getUpdates', { token: bot.token });
    expect(polled.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['undelivered']);
  });

  it('many bots setting their first webhook at once all succeed (no deadlock on MySQL)', async () => {
    const receiver = await startReceiver(pki);
    receivers.push(receiver);
    const bots = await Promise.all(Array.from({ length: 24 }, (_, i) => approvedBot(h, ownerJwt, `hook_many_${i}`)));
    const results = await Promise.all(bots.map((b) => owner.post(`/api/v1/bots/my/${b.id}/webhook`, { url: receiver.url, secret_token: SECRET })));
    expect(results.map((r) => r.status)).toEqual(bots.map(() => 200));
    expect(results.every((r) => r.body.delivery_mode === 'webhook')).toBe(true);
  });

  it('the deliveries listing pages and refuses bad bounds', async () => {
    const { id, receiver } = await botWithReceiver('hook_pages');
    for (let i = 0; i < 3; i++) await inject(id, `p${i}`);
    await receiver.waitFor(3);
    const page = await owner.get(`/api/v1/bots/my/${id}/deliveries?page=2&limit=2`);
    expect(page.body.items).toHaveLength(1);
    expect(page.body.pagination).toEqual({ page: 2, limit: 2, total: 3, has_more: false });
    const first = await owner.get(`/api/v1/bots/my/${id}/deliveries?limit=2`);
    expect(first.body.items.map((d: { update_seq: number }) => d.update_seq)).toEqual([3, 2]);
    for (const q of ['limit=0', 'limit=101', 'page=0']) expect((await owner.get(`/api/v1/bots/my/${id}/deliveries?${q}`)).status).toBe(400);
  });
});

describe('webhook targets without an allow-list', () => {
  let h: Harness;
  let ownerJwt: string;
  let bot: { id: string; token: string };
  beforeAll(async () => {
    h = await startHarness('in-process');
    ownerJwt = await h.jwt('strict-hook-owner');
    bot = await approvedBot(h, ownerJwt, 'strict_targets');
  });
  afterAll(async () => {
    await h?.close();
  });

  const viaConsole = (url: string) => client(h.url, ownerJwt).post(`/api/v1/bots/my/${bot.id}/webhook`, { url, secret_token: SECRET });
  const viaRuntime = (url: string) => call(h.url, 'POST', '/api/v1/bots/setWebhook', { token: bot.token, body: { url, secret_token: SECRET } });

  it.each([
    'https://[::127.0.0.1]/h', 'https://[::7f00:1]/h', 'https://[::a9fe:a9fe]/h', 'https://[::10.0.0.1]/h',
    'https://[64:ff9b::a9fe:a9fe]/h', 'https://[2002:a00:1::]/h', 'https://93.184.216.34:22/h', 'https://93.184.216.34:6379/h',
    'https://93.184.216.34:0/h', 'https://[2606:2800:220:1::1]:8080/h',
  ])('%s is refused with 400 by the console and by setWebhook, and the bot stays on polling', async (url) => {
    const res = await viaConsole(url);
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual([{ field: 'url', reason: 'FORBIDDEN_TARGET' }]);
    const runtime = await viaRuntime(url);
    expect(runtime.status).toBe(400);
    expect(runtime.body).toMatchObject({ ok: false, error_code: 400 });
    expect((await client(h.url, ownerJwt).get(`/api/v1/bots/my/${bot.id}`)).body.delivery_mode).toBe('polling');
  });

  it('the refusal names a refused port, and never what a name resolved to', async () => {
    expect((await viaConsole('https://93.184.216.34:22/h')).body.error.message).toMatch(/port 22 is not allowed \(use one of 443, 80, 88, 8443\)/);
    const named = await viaConsole('https://localhost/h');
    expect(named.status).toBe(400);
    expect(named.body.error.message).toMatch(/localhost resolves to a non-public address/);
    expect(JSON.stringify(named.body)).not.toContain('127.0.0.1');
    expect(JSON.stringify((await viaRuntime('https://localhost/h')).body)).not.toContain('127.0.0.1');
  });

  it('a public address on an allowed port is accepted', async () => {
    for (const url of ['https://93.184.216.34:8443/h', 'https://93.184.216.34:88/h', 'https://[2606:2800:220:1::1]/h']) {
      expect((await viaConsole(url)).status, url).toBe(200);
    }
    await call(h.url, 'POST', '/api/v1/bots/deleteWebhook', { token: bot.token });
  });
});

describe('a manual retry is outside the retry schedule', () => {
  let h: Harness;
  let pki: TestPki;
  let receiver: Receiver;
  let ownerJwt: string;

  beforeAll(async () => {
    pki = createTestPki();
    receiver = await startReceiver(pki);
    // One retry, two seconds after the first failure: room for manual retries in between.
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_RETRY_SCHEDULE: '2s', WEBHOOK_TIMEOUT_MS: '800',
      STATS_FLUSH_INTERVAL: '100ms',
    });
    ownerJwt = await h.jwt('manual-owner');
  });
  afterAll(async () => {
    await receiver?.close();
    await h?.close();
  });

  const deadLetters = async () => {
    const text = await (await fetch(`${h.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('botplatform_webhook_attempts_total{outcome="dead_letter"}'));
    return line ? Number(line.split(' ').pop()) : 0;
  };

  it('a failed manual retry leaves attempts, next_attempt_at and status as they were; the schedule then dead-letters it, counted once', async () => {
    const owner = client(h.url, ownerJwt);
    const bot = await approvedBot(h, ownerJwt, 'manual_outside');
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET })).status).toBe(200);
    receiver.always({ status: 500 });
    await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'keeps failing' });
    const list = async () => (await owner.get(`/api/v1/bots/my/${bot.id}/deliveries`)).body.items[0];
    const before = await until(list, (d) => d?.attempts === 1);
    expect(before).toMatchObject({ status: 'retrying', attempts: 1, last_status_code: 500 });

    // On its last automatic step, a manual retry that fails neither uses up that step nor dead-letters it.
    const retried = await owner.post(`/api/v1/bots/my/${bot.id}/deliveries/${before.id}/retry`);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ status: 'retrying', attempts: 1, next_attempt_at: before.next_attempt_at, last_status_code: 500 });
    expect(receiver.received).toHaveLength(2);
    expect(await list()).toMatchObject({ status: 'retrying', attempts: 1, next_attempt_at: before.next_attempt_at });

    // The automatic retry still comes, on time, and is the one that dead-letters it.
    const dead = await until(list, (d) => d.status === 'dead_letter');
    expect(dead).toMatchObject({ status: 'dead_letter', attempts: 2, next_attempt_at: null });
    expect(receiver.received).toHaveLength(3);
    expect(receiver.received[2]!.at).toBeGreaterThanOrEqual(Date.parse(before.next_attempt_at) - 20);
    // The dispatcher thread's count reaches /metrics a moment after its commit (thread-telemetry.ts).
    expect(await until(deadLetters, (n) => n >= 1)).toBe(1);
    const stats = await until(async () => (await owner.get(`/api/v1/bots/my/${bot.id}/metrics`)).body, (m) => m.updates?.dead === 1);
    expect(stats.updates.dead).toBe(1);

    // A manual retry of the dead letter that fails leaves it dead, and is not counted as a second one.
    const again = await owner.post(`/api/v1/bots/my/${bot.id}/deliveries/${before.id}/retry`);
    expect(again.body).toMatchObject({ status: 'dead_letter', attempts: 2, last_status_code: 500 });
    // One that succeeds ends it as succeeded; the count of automatic attempts stays.
    receiver.always({ status: 200 });
    const revived = await owner.post(`/api/v1/bots/my/${bot.id}/deliveries/${before.id}/retry`);
    expect(revived.body).toMatchObject({ status: 'succeeded', attempts: 2, last_status_code: 200 });
    expect(await deadLetters()).toBe(1);
  });
});

describe('the dispatcher keeps nothing for idle bots', () => {
  it('once the work drains, no per-bot state is left', async () => {
    const pki = createTestPki();
    const receiver = await startReceiver(pki);
    const h = await startHarness('in-process', { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile });
    try {
      const jwt = await h.jwt('idle-owner');
      const owner = client(h.url, jwt);
      const bots = await Promise.all(Array.from({ length: 5 }, (_, i) => approvedBot(h, jwt, `idle_bot_${i}`)));
      for (const b of bots) {
        await owner.post(`/api/v1/bots/my/${b.id}/webhook`, { url: receiver.url, secret_token: SECRET, max_connections: 2 });
        for (let i = 0; i < 3; i++) await owner.post(`/api/v1/bots/my/${b.id}/test-updates`, { text: `u${i}` });
      }
      await receiver.waitFor(15);
      const dispatcher = h.apps[0]!.dispatcher!;
      expect(await dispatcher.trackedBots()).toBeGreaterThan(0);
      // Dropped once idle and the cached max_connections (5 s) is stale.
      expect(await until(async () => dispatcher.trackedBots(), (n) => n === 0, 10_000)).toBe(0);
      expect(await dispatcher.inFlight()).toBe(0);
    } finally {
      await h.close();
      await receiver.close();
    }
  }, 20_000);
});
