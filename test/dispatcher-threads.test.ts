/**
 * ROLE=all's dispatcher threads (DISPATCHER_THREADS, src/dispatcher-threads.ts): two
 * threads deliver a burst to bots of both threads' shares, each update once; /metrics and
 * the bots' usage statistics add up over the threads; their log lines reach the process's
 * logger; a thread that dies is started again and its bots are served; closing with
 * attempts in flight finishes and records them, so a restart delivers the rest and
 * nothing twice; a process whose bots only poll starts no thread until a delivery is open.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { slotOf } from '../src/bus/thread-bus.js';
import { startApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { approvedBot, client, startHarness, type Harness } from './helpers/harness.js';
import { collectLogLines } from './helpers/log-lines.js';
import { startReceiver, type Receiver } from './helpers/receiver.js';
import { createTestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

const SECRET = 'threads-secret';
const pki = createTestPki();
const hookEnv = { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, LIMITS_ENABLED: 'false', STATS_FLUSH_INTERVAL: '50ms' };

/** Update ids as the receiver got them, one entry per request. */
const arrivedIds = (r: Receiver) => r.received.map((x) => String(x.headers['x-service-update-id']));

/** Bots with webhooks to `receiver` until each of `slots` threads has at least `each` of them. */
async function botsOfEveryThread(h: Harness, receiver: Receiver, prefix: string, slots: number, each: number) {
  const jwt = await h.jwt(`${prefix}-owner`);
  const owner = client(h.url, jwt);
  const bots: { id: string; slot: number }[] = [];
  for (let i = 0; Array.from({ length: slots }, (_, s) => bots.filter((b) => b.slot === s).length).some((n) => n < each); i++) {
    const bot = await approvedBot(h, jwt, `${prefix}_${i}`);
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: SECRET, max_connections: 4 })).status).toBe(200);
    bots.push({ id: bot.id, slot: slotOf(bot.id, slots) });
  }
  return { owner, bots };
}

async function ingest(owner: ReturnType<typeof client>, bots: { id: string }[], perBot: number): Promise<string[]> {
  const ids = await Promise.all(bots.map(async (b) => {
    const out: string[] = [];
    for (let i = 0; i < perBot; i++) {
      const r = await owner.post(`/api/v1/bots/my/${b.id}/test-updates`, { text: `u${i}` });
      expect(r.status).toBe(201);
      out.push(String(r.body.update_id));
    }
    return out;
  }));
  return ids.flat();
}

async function succeededOnMetrics(h: Harness): Promise<number> {
  const text = await (await fetch(`${h.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('botplatform_webhook_attempts_total{outcome="succeeded"}'));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('two dispatcher threads', () => {
  let h: Harness;
  let receiver: Receiver;
  const logs = collectLogLines();
  beforeAll(async () => {
    receiver = await startReceiver(pki);
    h = await startHarness('in-process', { ...hookEnv, DISPATCHER_THREADS: '2', LOG_LEVEL: 'info' }, logs.sink);
  });
  afterAll(async () => {
    await h?.close();
    await receiver?.close();
  });

  it('deliver a burst to both threads\' bots, each update once; /metrics and usage add up over the threads', async () => {
    const { owner, bots } = await botsOfEveryThread(h, receiver, 'thr', 2, 3);
    const ids = await ingest(owner, bots, 8);
    await receiver.waitFor(ids.length, 20_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(arrivedIds(receiver).sort()).toEqual([...ids].sort());
    expect(await until(() => succeededOnMetrics(h), (n) => n === ids.length, 5000)).toBe(ids.length);
    // Each thread's usage statistics are written by that thread; the console's read adds them up.
    for (const b of bots) {
      const m = await until(async () => (await owner.get(`/api/v1/bots/my/${b.id}/metrics`)).body, (x) => x.webhook?.succeeded === 8, 5000);
      expect(m.webhook).toMatchObject({ attempts: 8, succeeded: 8, failed: 0 });
      expect(m.updates.delivered).toBe(8);
    }
    expect(await h.apps[0]!.dispatcher!.inFlight()).toBe(0);
    // The threads' log lines went through the process's logger, saying which thread.
    expect(logs.lines.filter((l) => l.msg === 'dispatcher thread started').map((l) => l.thread).sort()).toEqual([0, 1]);
  });

  it('start a thread that died again, and its bots are served', async () => {
    const threads = h.apps[0]!.dispatcherThreads!;
    const { owner, bots } = await botsOfEveryThread(h, receiver, 'died', 2, 2);
    const before = receiver.received.length;
    await threads.threads()[0]!.terminate();
    expect(await until(async () => threads.restarts(), (n) => n === 1, 10_000)).toBe(1);
    expect(await until(async () => threads.threads().length, (n) => n === 2, 10_000)).toBe(2);
    const ids = await ingest(owner, bots, 3);
    await receiver.waitFor(before + ids.length, 20_000);
    expect(arrivedIds(receiver).slice(before).sort()).toEqual([...ids].sort());
    expect(logs.lines.some((l) => l.msg === 'dispatcher thread exited; starting it again' && l.level === 50)).toBe(true);
  });
});

describe('a process whose bots poll', () => {
  it('runs no dispatcher thread until a webhook delivery is open; the first one starts them and is delivered', async () => {
    const receiver = await startReceiver(pki);
    // The embedded default's in-process bus (on the pass's database): with Kafka, threads start with the process.
    const h = await startHarness('in-process', { ...hookEnv, DISPATCHER_THREADS: '2', KAFKA_BROKERS: '' });
    try {
      const threads = h.apps[0]!.dispatcherThreads!;
      const jwt = await h.jwt('lazy-owner');
      const owner = client(h.url, jwt);
      const poller = await approvedBot(h, jwt, 'lazy_poller');
      expect((await owner.post(`/api/v1/bots/my/${poller.id}/test-updates`, { text: 'polled' })).status).toBe(201);
      const polled = await fetch(`${h.url}/api/v1/bots/getUpdates`, {
        method: 'POST', headers: { authorization: `Bearer ${poller.token}`, 'content-type': 'application/json' }, body: '{"timeout":0}',
      });
      expect((await polled.json()).result).toHaveLength(1);
      await new Promise((r) => setTimeout(r, 1300)); // past a nudge and a poll of the database
      expect(threads.threads()).toHaveLength(0);
      expect(await h.apps[0]!.dispatcher!.inFlight()).toBe(0);

      const { bots } = await botsOfEveryThread(h, receiver, 'lazy', 2, 1);
      expect(threads.threads()).toHaveLength(0); // a webhook set is not yet work
      const ids = await ingest(owner, bots, 2);
      await receiver.waitFor(ids.length, 20_000);
      expect(arrivedIds(receiver).sort()).toEqual([...ids].sort());
      expect(threads.threads()).toHaveLength(2);
    } finally {
      await h.close();
      await receiver.close();
    }
  });
});

describe('closing with attempts in flight', () => {
  it('finishes and records them: the restarted service delivers the rest, nothing twice', async () => {
    const receiver = await startReceiver(pki);
    const h = await startHarness('in-process', { ...hookEnv, DISPATCHER_THREADS: '2' });
    try {
      const { owner, bots } = await botsOfEveryThread(h, receiver, 'inflight', 2, 2);
      // Answers slower than the HTTP server's close (about 1 s here): attempts are in flight when the threads are asked to stop.
      receiver.always({ status: 200, delayMs: 2000 });
      const ids = await ingest(owner, bots, 5);
      await receiver.waitFor(3);
      await h.apps[0]!.close();
      const answered = receiver.received.length;
      expect(receiver.abandoned).toHaveLength(0); // every attempt under way was answered before the threads ended
      receiver.always({ status: 200 });
      const again = await startApp(loadConfig({ ...h.env, ROLE: 'all', DISPATCHER_THREADS: '2' }), createLogger('silent'));
      try {
        await receiver.waitFor(ids.length, 20_000);
        await new Promise((r) => setTimeout(r, 300));
        expect(answered).toBeLessThan(ids.length);
        expect(arrivedIds(receiver).sort()).toEqual([...ids].sort());
      } finally {
        await again.close();
      }
    } finally {
      await h.close();
      await receiver.close();
    }
  });
});
