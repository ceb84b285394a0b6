/**
 * The dispatcher's leases and ramp-up, against real HTTPS receivers: an attempt that
 * outlives its (short) lease keeps it, renewed by the heartbeat, and is made once; a
 * backlog reaches a receiver in growing waves, never past max_connections.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveriesRepo, type DeliveryWrite } from '../src/storage/deliveries-repo.js';
import { approvedBot, client, startHarness, type Harness } from './helpers/harness.js';
import { startReceiver, type Receiver } from './helpers/receiver.js';
import { createTestPki, type TestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

const SECRET = 'lease_secret-123';
/** How long a dispatcher's lease lasts unless renewed (docs/architecture.md: a dead dispatcher's deliveries are due again within 3 s). */
const LEASE_MS = 3000;

describe('dispatcher leases and ramp-up', () => {
  let h: Harness;
  let pki: TestPki;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_TIMEOUT_MS: '10000' });
    ownerJwt = await h.jwt('lease-owner');
    owner = client(h.url, ownerJwt);
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await h?.close();
  });

  const newReceiver = async () => {
    const r = await startReceiver(pki);
    receivers.push(r);
    return r;
  };
  const deliveries = async (id: string) => (await owner.get(`/api/v1/bots/my/${id}/deliveries?limit=100`)).body;

  it('an attempt that outlives its lease keeps it (renewed while it runs) and is made once', async () => {
    const receiver = await newReceiver();
    const slowMs = LEASE_MS + 2500;
    receiver.always({ status: 200, delayMs: slowMs });
    const bot = await approvedBot(h, ownerJwt, 'lease_heartbeat');
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET })).status).toBe(200);
    await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'slow answer' });
    await receiver.waitFor(1);

    // While the request runs, the lease is always held and always short: a dead holder's would end within LEASE_MS.
    const db = h.apps[0]!.db!;
    const seen: number[] = [];
    const answeredAt = receiver.received[0]!.at + slowMs;
    while (Date.now() < answeredAt - 200) {
      const row = await db.query(db.knex('deliveries').where({ bot_id: bot.id }).first());
      const now = Date.now();
      const left = Number(row.lease_until) - now;
      seen.push(left);
      expect(left, 'lease held').toBeGreaterThan(0);
      expect(left, 'lease short').toBeLessThanOrEqual(LEASE_MS + 50);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(seen.length).toBeGreaterThan(10);

    const done = await until(() => deliveries(bot.id), (d) => d.items[0]?.status === 'succeeded', 10_000);
    expect(done.items[0]).toMatchObject({ status: 'succeeded', attempts: 1, last_status_code: 200 });
    expect(done.items[0].last_duration_ms).toBeGreaterThan(LEASE_MS);
    await new Promise((r) => setTimeout(r, 1500)); // a second attempt (a lease that ran out) would arrive now
    expect(receiver.received).toHaveLength(1);
    const row = await db.query(db.knex('deliveries').where({ bot_id: bot.id }).first());
    expect(row).toMatchObject({ leased_by: null });
  }, 30_000);

  it('an outcome is written only under the lease its delivery is held by now, even beside a stale attempt of it in the same batch', async () => {
    const bot = await approvedBot(h, ownerJwt, 'lease_stale');
    const db = h.apps[0]!.db!;
    const repo = createDeliveriesRepo(db);
    const next = (status: DeliveryWrite['status'], lastError: string | null): DeliveryWrite => ({
      status, attempts: 1, nextAttemptAt: Date.now() + 60_000, lastStatusCode: lastError ? 500 : 200, lastError,
      lastAttemptAt: Date.now(), lastDurationMs: 5, closed: status === 'succeeded',
    });
    // Two orders: the current holder's outcome after the stale one's, and before it.
    for (const [n, stale] of [[1, 'first'], [2, 'last']] as const) {
      const id = `dlv_stale${n}${'x'.repeat(12)}`;
      // Leased far ahead by "current" (the dispatcher leaves it alone); "stale" held it before.
      await db.query(db.knex('deliveries').insert({
        id, bot_id: bot.id, update_id: 900 + n, update_seq: 900 + n, status: 'pending', attempts: 0, next_attempt_at: 0,
        lease_until: Date.now() + 3_600_000, leased_by: 'current', payload: '{}', created_at: Date.now(),
      }));
      const staleItem = { id, leaseToken: 'stale', next: next('retrying', 'HTTP 500') };
      const currentItem = { id, leaseToken: 'current', next: next('succeeded', null) };
      const items = stale === 'first' ? [staleItem, currentItem] : [currentItem, staleItem];
      const written = await db.sql.unit((w) => repo.writeOutcomes(items, w));
      expect(written.results).toEqual(stale === 'first' ? [false, true] : [true, false]);
      expect(written.closed).toEqual([[bot.id, [900 + n]]]);
      expect(written.failures).toEqual([]);
      const row = await db.query(db.knex('deliveries').where({ id }).first());
      expect(row).toMatchObject({ status: 'succeeded', leased_by: null, last_error: null });
    }
  });

  it('a backlog ramps up: the first wave is smaller than max_connections, and concurrency never exceeds it', async () => {
    const receiver = await newReceiver();
    const answerMs = 300;
    receiver.always({ status: 200, delayMs: answerMs });
    const bot = await approvedBot(h, ownerJwt, 'lease_ramp');
    // The backlog builds up in polling mode, and becomes due all at once when the webhook is set.
    for (let i = 0; i < 50; i++) expect((await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: `b${i}` })).status).toBe(201);
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET, max_connections: 10 })).status).toBe(200);
    await receiver.waitFor(50, 30_000);

    const t0 = receiver.received[0]!.at;
    // Requests that arrived before any could have been answered.
    const firstWave = receiver.received.filter((r) => r.at < t0 + answerMs - 50).length;
    // Most at once in each answerMs-long slice, from the first request on.
    const waves: number[] = [];
    for (const s of receiver.concurrency.samples) {
      const i = Math.floor((s.at - t0) / answerMs);
      waves[i] = Math.max(waves[i] ?? 0, s.now);
    }
    console.log(`ramp-up: first wave ${firstWave}, most at once per ${answerMs} ms: ${waves.map((w) => w ?? 0).join(' ')}`);
    expect(firstWave).toBeLessThan(10);
    expect(receiver.concurrency.max).toBeLessThanOrEqual(10);
    expect(receiver.concurrency.max).toBe(10); // and it does reach max_connections
    expect(new Set(receiver.received.map((r) => r.headers['x-service-update-id'])).size).toBe(50);
  }, 40_000);
});
