/**
 * The delivery log (issue 35), against real HTTPS receivers on loopback: every attempt
 * of a delivery with the request as sent (the signature, never the secret; the body) and
 * the answer as received (status, headers, the first 4 KiB of the body), its error and
 * duration; the log's filter by update id; over HTTP and gRPC; and its retention
 * (DELIVERY_LOG_RETENTION, compressed to 1 s): closed deliveries and their attempts are
 * swept, open ones stay.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleServiceClient, type ListDeliveryAttemptsResponse } from '../src/gen/botplatform/v1/console_service.js';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';
import { startReceiver, type Receiver } from './helpers/receiver.js';
import { createTestPki, type TestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

const SECRET = 'log_secret-789';

describe('the delivery log: attempts with what was sent and what came back', () => {
  const harnesses: Harness[] = [];
  let h: Harness;
  let pki: TestPki;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  const receivers: Receiver[] = [];

  async function start(extra: Record<string, string> = {}) {
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      WEBHOOK_CA_FILE: pki.caFile,
      WEBHOOK_RETRY_SCHEDULE: '100ms,100ms',
      WEBHOOK_TIMEOUT_MS: '600',
      ...extra,
    });
    harnesses.push(h);
    ownerJwt = await h.jwt('delivery-log-owner');
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

  async function hookedBot(name: string) {
    const receiver = await startReceiver(pki);
    receivers.push(receiver);
    const bot = await approvedBot(h, ownerJwt, name);
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET, max_connections: 1 })).status).toBe(200);
    return { ...bot, receiver };
  }
  const inject = async (id: string, text: string) => {
    const r = await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text });
    expect(r.status).toBe(201);
    return r.body as { update_id: number };
  };
  const deliveries = async (id: string, query = '') => (await owner.get(`/api/v1/bots/my/${id}/deliveries?limit=100${query}`)).body;
  const attempts = async (id: string, delivery: string | number) => (await owner.get(`/api/v1/bots/my/${id}/deliveries/${delivery}/attempts`));

  it('a delivery failing and then succeeding shows every attempt, newest first, with the request sent and the answer received', async () => {
    const { id, receiver } = await hookedBot('log_fail_ok');
    const long = 'x'.repeat(5000);
    const other = await inject(id, 'noise'); // another update: the filter must leave it out
    await receiver.waitFor(1);
    receiver.script(
      { status: 500, body: 'boom: database down', headers: { 'x-receiver': 'first' } },
      { status: 200, body: long, headers: { 'x-receiver': 'second' } },
    );
    const { update_id } = await inject(id, 'debug me');
    await until(() => deliveries(id, `&update_id=${update_id}`), (d) => d.items[0]?.status === 'succeeded');
    const filtered = await deliveries(id, `&update_id=${update_id}`);
    expect(filtered.items).toHaveLength(1);
    expect(filtered.pagination.total).toBe(1);
    expect(filtered.retention_seconds).toBe(3 * 86_400);
    expect((await deliveries(id)).pagination.total).toBe(2);
    expect(other.update_id).not.toBe(update_id);

    const sent = receiver.received.filter((r) => JSON.parse(r.raw.toString()).update_id === update_id);
    expect(sent).toHaveLength(2);
    // By delivery id and by update id alike.
    const byUpdate = await attempts(id, update_id);
    expect(byUpdate.status).toBe(200);
    const log = byUpdate.body;
    expect((await attempts(id, filtered.items[0].id)).body).toEqual(log);
    expect(log.retention_seconds).toBe(3 * 86_400);
    expect(log.pagination).toMatchObject({ total: 2, has_more: false });
    const [second, first] = log.items;

    expect(first).toMatchObject({
      delivery_id: filtered.items[0].id, update_id, trigger: 'automatic', ok: false, error: 'HTTP 500',
      request: { url: receiver.url, body: sent[0]!.raw.toString() },
      response: { status_code: 500, body: 'boom: database down', body_truncated: false },
    });
    expect(first.response.headers['x-receiver']).toBe('first');
    // The headers as sent: the signature and timestamp the receiver got.
    for (const h of ['x-service-signature-v2', 'x-service-timestamp', 'x-service-update-id', 'content-type', 'user-agent']) {
      expect(first.request.headers[h], h).toBe(sent[0]!.headers[h]);
    }
    expect(first.duration_ms).toBeGreaterThanOrEqual(0);
    expect(Date.parse(first.attempted_at)).toBeLessThanOrEqual(Date.parse(second.attempted_at));

    expect(second).toMatchObject({ ok: true, trigger: 'automatic', response: { status_code: 200, body_truncated: true } });
    expect(second.error).toBeUndefined();
    expect(second.response.body).toBe('x'.repeat(4096));
    expect(second.response.headers['x-receiver']).toBe('second');
    expect(second.request.headers['x-service-signature-v2']).toBe(sent[1]!.headers['x-service-signature-v2']);
    // Never the secret.
    expect(JSON.stringify(log)).not.toContain(SECRET);
  });

  it('an attempt without an answer has no response, its error says why; a manual retry is logged as manual', async () => {
    const { id, receiver } = await hookedBot('log_timeout');
    receiver.always({ hang: true });
    const { update_id } = await inject(id, 'hang');
    await until(() => deliveries(id), (d) => d.items[0]?.status === 'dead_letter', 15_000);
    receiver.always({ status: 204 });
    const retried = await owner.post(`/api/v1/bots/my/${id}/deliveries/${update_id}/retry`, {});
    expect(retried.body.status).toBe('succeeded');
    const log = (await attempts(id, update_id)).body;
    expect(log.items).toHaveLength(4);
    expect(log.items[0]).toMatchObject({ trigger: 'manual', ok: true, response: { status_code: 204, body: '' } });
    for (const a of log.items.slice(1)) {
      expect(a).toMatchObject({ trigger: 'automatic', ok: false, response: null });
      expect(a.error).toMatch(/timed out after 600 ms/);
    }
  });

  it('a webhook set through the Telegram surface: its secret header is shown redacted; refusals; over gRPC', async () => {
    const receiver = await startReceiver(pki);
    receivers.push(receiver);
    const bot = await approvedBot(h, ownerJwt, 'log_telegram');
    const set = await call(h.url, 'POST', `/bot${bot.token}/setWebhook`, { body: { url: receiver.url, secret_token: SECRET } });
    expect(set.status).toBe(200);
    const { update_id } = await inject(bot.id, 'tg');
    await receiver.waitFor(1);
    expect(receiver.received[0]!.headers['x-telegram-bot-api-secret-token']).toBe(SECRET);
    const log = await until(async () => (await attempts(bot.id, update_id)).body, (l) => l.items?.length === 1);
    expect(log.items[0].request.headers['x-telegram-bot-api-secret-token']).toBe('[redacted]');
    expect(log.items[0].request.body).toBe(receiver.received[0]!.raw.toString());
    expect(JSON.stringify(log)).not.toContain(SECRET);

    expect((await attempts(bot.id, 'dlv_nope')).status).toBe(404);
    const stranger = client(h.url, await h.jwt('delivery-log-stranger'));
    expect((await stranger.get(`/api/v1/bots/my/${bot.id}/deliveries/${update_id}/attempts`)).status).toBe(404);
    const bad = await owner.get(`/api/v1/bots/my/${bot.id}/deliveries?update_id=0`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.details[0]).toMatchObject({ field: 'update_id' });

    const c = new ConsoleServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    try {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${ownerJwt}`);
      const res = await new Promise<ListDeliveryAttemptsResponse>((resolve, reject) =>
        c.listDeliveryAttempts({ id: bot.id, deliveryId: String(update_id) } as never, md, (err, r) => (err ? reject(err) : resolve(r))));
      expect(res.items).toHaveLength(1);
      expect(res.items[0]!.response!.statusCode).toBe(200);
      expect(res.items[0]!.request!.headers['x-service-signature-v2']).toMatch(/^[0-9a-f]{64}$/);
    } finally {
      c.close();
    }
  });

  it('retention: closed deliveries and their attempts are swept after DELIVERY_LOG_RETENTION; open ones stay', async () => {
    await start({ DELIVERY_LOG_RETENTION: '1s', WEBHOOK_RETRY_SCHEDULE: '1h' });
    const { id, receiver } = await hookedBot('log_retention');
    receiver.script({ status: 200 }, { status: 503 });
    const ok = await inject(id, 'delivered');
    await receiver.waitFor(1);
    const open = await inject(id, 'retrying for an hour');
    await receiver.waitFor(2);
    await until(() => deliveries(id), (d) => d.items.length === 2 && d.items.every((x: { attempts: number }) => x.attempts === 1));
    expect((await deliveries(id)).retention_seconds).toBe(1);
    // The sweep runs every second: within a few, the succeeded delivery and every attempt are gone.
    const after = await until(() => deliveries(id), (d) => d.pagination.total === 1, 10_000);
    expect(after.items[0]).toMatchObject({ update_id: open.update_id, status: 'retrying' });
    await until(async () => (await attempts(id, open.update_id)).body, (l) => l.pagination.total === 0, 10_000);
    expect((await attempts(id, ok.update_id)).status).toBe(404);
  });
});
