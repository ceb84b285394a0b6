/**
 * Webhook features for users recovering from outages, against real HTTPS receivers on
 * loopback: bulk recovery of dead_letter deliveries (HTTP and gRPC) with the delivery
 * log's filters, the endpoint disabled after a run of failures (WEBHOOK_DISABLE_AFTER,
 * compressed to 2 s) and enabled again, and the per-bot max_deliveries_per_second.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryStatus } from '../src/gen/botplatform/v1/bot.js';
import { ConsoleServiceClient, type RecoverDeliveriesResponse } from '../src/gen/botplatform/v1/console_service.js';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';
import { startReceiver, type Receiver } from './helpers/receiver.js';
import { until } from './helpers/until.js';
import { createTestPki, type TestPki } from './helpers/tls.js';

const SECRET = 'hook_secret-456';
const DISABLE_AFTER_MS = 2000;

describe('webhook recovery, endpoint health and delivery rate', () => {
  /** The service the tests run against (the health tests get their own, with WEBHOOK_DISABLE_AFTER=2s). */
  let h: Harness;
  const harnesses: Harness[] = [];
  let pki: TestPki;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  const receivers: Receiver[] = [];

  async function start(extra: Record<string, string> = {}) {
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      WEBHOOK_CA_FILE: pki.caFile,
      WEBHOOK_RETRY_SCHEDULE: '100ms,100ms',
      WEBHOOK_TIMEOUT_MS: '800',
      ...extra,
    });
    harnesses.push(h);
    ownerJwt = await h.jwt('hook-features-owner');
    owner = client(h.url, ownerJwt);
  }

  beforeAll(async () => {
    pki = createTestPki();
    await start();
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    for (const x of harnesses) await x.close();
  });

  async function newReceiver() {
    const r = await startReceiver(pki);
    receivers.push(r);
    return r;
  }
  async function botWithReceiver(name: string, extra: object = {}) {
    const receiver = await newReceiver();
    const bot = await approvedBot(h, ownerJwt, name);
    const set = await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET, ...extra });
    expect(set.status).toBe(200);
    return { ...bot, receiver };
  }
  const inject = async (id: string, text: string) => {
    const r = await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text });
    expect(r.status).toBe(201);
    return r.body as { update_id: number; update_seq: number };
  };
  const list = async (id: string, query = '') => (await owner.get(`/api/v1/bots/my/${id}/deliveries?limit=100${query}`)).body;
  const seqOf = (raw: Buffer) => JSON.parse(raw.toString('utf8')).update_seq as number;
  const info = async (token: string) => (await call(h.url, 'POST', '/api/v1/bots/getWebhookInfo', { token })).body.result;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('recover re-queues every dead_letter delivery of the window, in update_seq order, once; the log filters by status and time', async () => {
    const { id, receiver } = await botWithReceiver('hook_recover', { max_connections: 1 });
    receiver.always({ status: 500 });
    const t0 = new Date(Date.now() - 1000).toISOString();
    for (let i = 1; i <= 6; i++) await inject(id, `lost ${i}`);
    const dead = await until(() => list(id, '&status=dead_letter'), (d) => d.pagination.total === 6);
    expect(dead.items).toHaveLength(6);
    expect(dead.items.every((d: { status: string; attempts: number }) => d.status === 'dead_letter' && d.attempts === 3)).toBe(true);
    expect(receiver.received).toHaveLength(18);

    // The log's filters: by status, and by creation time.
    expect((await list(id, '&status=succeeded')).pagination.total).toBe(0);
    const future = encodeURIComponent(new Date(Date.now() + 60_000).toISOString());
    expect((await list(id, `&since=${future}`)).pagination.total).toBe(0);
    expect((await list(id, `&until=${encodeURIComponent(t0)}`)).pagination.total).toBe(0);
    expect((await list(id, `&since=${encodeURIComponent(t0)}&status=dead_letter`)).pagination.total).toBe(6);
    const badStatus = await owner.get(`/api/v1/bots/my/${id}/deliveries?status=lost`);
    expect(badStatus.status).toBe(400);

    // The receiver is back: one recover call queues all six; a second one, none.
    receiver.always({ status: 200 });
    const first = await owner.post(`/api/v1/bots/my/${id}/deliveries/recover`, { since: t0 });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ recovered: 6 });
    const second = await owner.post(`/api/v1/bots/my/${id}/deliveries/recover`, { since: t0 });
    expect(second.body).toEqual({ recovered: 0 });

    await receiver.waitFor(24);
    const redelivered = receiver.received.slice(18).map((r) => seqOf(r.raw));
    expect(redelivered).toEqual([1, 2, 3, 4, 5, 6]);
    const done = await until(() => list(id), (d) => d.items.every((x: { status: string }) => x.status === 'succeeded'));
    // attempts counts on: three scheduled ones, then the recovered one.
    expect(done.items.map((d: { status: string; attempts: number; last_status_code: number }) => [d.status, d.attempts, d.last_status_code]))
      .toEqual(Array(6).fill(['succeeded', 4, 200]));
    // Nothing is sent twice, and a later recover finds nothing.
    await sleep(500);
    expect(receiver.received).toHaveLength(24);
    expect((await owner.post(`/api/v1/bots/my/${id}/deliveries/recover`, { since: t0 })).body).toEqual({ recovered: 0 });
  });

  it('recover over gRPC, and its refusals: no since, a status that cannot be recovered, another owner\'s bot; an empty window recovers none', async () => {
    const { id, receiver } = await botWithReceiver('hook_recover_grpc');
    receiver.always({ status: 503 });
    const since = new Date(Date.now() - 1000);
    await inject(id, 'lost over grpc');
    await until(() => list(id, '&status=dead_letter'), (d) => d.pagination.total === 1);
    receiver.always({ status: 200 });

    const c = new ConsoleServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    try {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${ownerJwt}`);
      const recover = (req: object) => new Promise<RecoverDeliveriesResponse>((resolve, reject) =>
        c.recoverDeliveries({ id, since, ...req } as never, md, (err, res) => (err ? reject(err) : resolve(res))));
      expect(await recover({ status: DeliveryStatus.DELIVERY_STATUS_DEAD_LETTER })).toEqual({ recovered: 1 });
      expect(await recover({})).toEqual({ recovered: 0 });
      await expect(recover({ status: DeliveryStatus.DELIVERY_STATUS_SUCCEEDED })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    } finally {
      c.close();
    }
    await receiver.waitFor(4);
    await until(() => list(id), (d) => d.items[0]?.status === 'succeeded');

    const noSince = await owner.post(`/api/v1/bots/my/${id}/deliveries/recover`, {});
    expect(noSince.status).toBe(400);
    expect(JSON.stringify(noSince.body)).toContain('since');
    // A window that ends at or before its start is empty, not an error: nothing the
    // OpenAPI document can state refuses it.
    const backwards = await owner.post(`/api/v1/bots/my/${id}/deliveries/recover`, { since: since.toISOString(), until: new Date(since.getTime() - 1).toISOString() });
    expect(backwards.status).toBe(200);
    expect(backwards.body).toEqual({ recovered: 0 });
    const succeeded = await owner.post(`/api/v1/bots/my/${id}/deliveries/recover`, { since: since.toISOString(), status: 'succeeded' });
    expect(succeeded.status).toBe(400);
    const notMine = await client(h.url, await h.jwt('someone-else')).post(`/api/v1/bots/my/${id}/deliveries/recover`, { since: since.toISOString() });
    expect(notMine.status).toBe(404);
    // Without a webhook nothing would send them.
    expect((await owner.del(`/api/v1/bots/my/${id}/webhook`, {})).status).toBe(200);
    const polling = await owner.post(`/api/v1/bots/my/${id}/deliveries/recover`, { since: since.toISOString() });
    expect(polling.status).toBe(409);
    expect(JSON.stringify(polling.body)).toContain('no webhook');
  });

  it('max_deliveries_per_second paces a backlog: 15 deliveries at 5/s take about 3 s, never more than ~5 in any second', async () => {
    const receiver = await newReceiver();
    const bot = await approvedBot(h, ownerJwt, 'hook_rate');
    // A backlog: queued while polling, handed to the webhook all at once when it is set.
    for (let i = 0; i < 15; i++) await inject(bot.id, `backlog ${i}`);

    for (const bad of [0, 10_001]) {
      const r = await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET, max_deliveries_per_second: bad });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toContain('max_deliveries_per_second');
    }
    const set = await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET, max_deliveries_per_second: 5 });
    expect(set.status).toBe(200);
    expect(set.body.webhook).toMatchObject({ max_deliveries_per_second: 5, max_connections: 40, disabled: false });
    expect(await info(bot.token)).toMatchObject({ max_deliveries_per_second: 5 });

    await receiver.waitFor(15, 15_000);
    const at = receiver.received.map((r) => r.at);
    const span = at[14]! - at[0]!;
    expect(span).toBeGreaterThanOrEqual(2400);
    expect(span).toBeLessThan(5000);
    const mostInASecond = Math.max(...at.map((t) => at.filter((u) => u >= t && u < t + 1000).length));
    expect(mostInASecond).toBeLessThanOrEqual(6);
    console.log(`rate 5/s: 15 deliveries over ${span} ms, at most ${mostInASecond} in any second`);

    // Without a limit the same backlog is not paced.
    const fast = await newReceiver();
    const other = await approvedBot(h, ownerJwt, 'hook_rate_none');
    for (let i = 0; i < 15; i++) await inject(other.id, `backlog ${i}`);
    await owner.post(`/api/v1/bots/my/${other.id}/webhook`, { url: fast.url, secret_token: SECRET });
    await fast.waitFor(15);
    expect(fast.received[14]!.at - fast.received[0]!.at).toBeLessThan(2000);
  });

  describe('endpoint health (WEBHOOK_DISABLE_AFTER=2s)', () => {
    beforeAll(() => start({ WEBHOOK_DISABLE_AFTER: '2s' }));

    it('a success ends the run of failures: failing for more than 2s in all, with a success between, keeps the webhook enabled', async () => {
      const { id, receiver } = await botWithReceiver('hook_health_flaky');
      const failFor = async (ms: number) => {
        receiver.always({ status: 500 });
        const end = Date.now() + ms;
        for (let i = 0; Date.now() < end; i++) {
          await inject(id, `flaky ${i}`);
          await sleep(200);
        }
      };
      // The run of failures counts from the first one received (a fresh process may start its dispatcher threads first).
      receiver.always({ status: 500 });
      await inject(id, 'flaky first');
      await until(async () => receiver.received.length, (n) => n > 0);
      await failFor(1500);
      receiver.always({ status: 200 });
      const before = receiver.received.length;
      await inject(id, 'one good answer');
      await until(async () => receiver.received.slice(before).some((r) => r.raw.toString('utf8').includes('one good answer')), Boolean);
      await failFor(1500);
      await sleep(300);
      expect(Date.now() - receiver.received[0]!.at).toBeGreaterThan(DISABLE_AFTER_MS + 500);
      const detail = (await owner.get(`/api/v1/bots/my/${id}`)).body;
      expect(detail.webhook).toMatchObject({ disabled: false });
      expect(detail.webhook.disabled_reason).toBeUndefined();
    });

    it('a webhook failing for WEBHOOK_DISABLE_AFTER is disabled (reason in the detail read and getWebhookInfo); updates wait; enabling or setting it again resumes', async () => {
      const a = await botWithReceiver('hook_health_a');
      const b = await botWithReceiver('hook_health_b');
      for (const { receiver } of [a, b]) receiver.always({ status: 500 });

      // Failures keep coming (an update every 200 ms, each tried 3 times) until the webhook is disabled.
      const disabled = await Promise.all([a, b].map(async ({ id }) => {
        const end = Date.now() + 10_000;
        for (let i = 0; Date.now() < end; i++) {
          const detail = (await owner.get(`/api/v1/bots/my/${id}`)).body;
          if (detail.webhook.disabled) return detail.webhook;
          await inject(id, `failing ${i}`);
          await sleep(200);
        }
        throw new Error('the webhook was never disabled');
      }));
      for (const [i, { receiver }] of [a, b].entries()) {
        const w = disabled[i]!;
        expect(w.disabled_reason).toContain('HTTP 500');
        expect(w.disabled_reason).toContain('2s');
        // Said to the developer in words, without the operator's setting's name (issue 35).
        expect(w.disabled_reason).not.toMatch(/\b[A-Z]+_[A-Z_]+\b/);
        // Not before the run of failures lasted WEBHOOK_DISABLE_AFTER.
        expect(Date.parse(w.disabled_at) - receiver.received[0]!.at).toBeGreaterThanOrEqual(DISABLE_AFTER_MS - 50);
        expect(Date.parse(w.disabled_at) - receiver.received[0]!.at).toBeLessThan(DISABLE_AFTER_MS + 3000);
      }
      const infoA = await info(a.token);
      expect(infoA).toMatchObject({ disabled: true, delivery_mode: 'webhook' });
      expect(infoA.disabled_reason).toBe(disabled[0]!.disabled_reason);
      expect(infoA.disabled_date).toBe(Math.floor(Date.parse(disabled[0]!.disabled_at) / 1000));

      // Disabled: updates keep queueing, nothing is attempted.
      await sleep(300);
      const seen = [a.receiver.received.length, b.receiver.received.length];
      for (const { id } of [a, b]) for (let i = 0; i < 3; i++) await inject(id, `while disabled ${i}`);
      await sleep(1000);
      expect([a.receiver.received.length, b.receiver.received.length]).toEqual(seen);
      expect((await info(a.token)).pending_update_count).toBeGreaterThanOrEqual(3);

      for (const { receiver } of [a, b]) receiver.always({ status: 200 });
      // a: the enable route.
      const enabled = await owner.post(`/api/v1/bots/my/${a.id}/webhook/enable`, {});
      expect(enabled.status).toBe(200);
      expect(enabled.body.webhook).toMatchObject({ disabled: false });
      expect(enabled.body.webhook.disabled_reason).toBeUndefined();
      // b: setting the webhook again (runtime API).
      const reset = await call(h.url, 'POST', '/api/v1/bots/setWebhook', { token: b.token, body: { url: b.receiver.url, secret_token: SECRET } });
      expect(reset.status).toBe(200);
      for (const { token } of [a, b]) {
        const after = await until(() => info(token), (x) => x.pending_update_count === 0, 15_000);
        expect(after).toMatchObject({ disabled: false, pending_update_count: 0 });
      }
      for (const [i, { receiver }] of [a, b].entries()) {
        const texts = receiver.received.slice(seen[i]).map((r) => JSON.parse(r.raw.toString('utf8')).message.text);
        expect(texts).toEqual(expect.arrayContaining(['while disabled 0', 'while disabled 1', 'while disabled 2']));
      }

      const polling = await approvedBot(h, ownerJwt, 'hook_health_none');
      const none = await owner.post(`/api/v1/bots/my/${polling.id}/webhook/enable`, {});
      expect(none.status).toBe(409);
      expect(JSON.stringify(none.body)).toContain('no webhook');
    });
  });
});
