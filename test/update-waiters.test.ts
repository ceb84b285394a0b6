/**
 * A long poll whose client is already gone when the wait would begin is released
 * at once: at the domain level (an already-aborted signal), and over real HTTP
 * (clients that close their connection at different moments of the call's start;
 * on MariaDB the close lands during the queries before the wait, while SQLite's
 * synchronous driver runs them without yielding, so there the wait begins first).
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Bus, BusMessage } from '../src/bus/bus.js';
import { createMemoryBus } from '../src/bus/memory-bus.js';
import { createUpdateWaiters, encodeArrived } from '../src/pipeline/update-waiters.js';
import { NO_DELIVERY, UPDATES_TOPIC } from '../src/bus/topics.js';
import { Code } from '../src/errors.js';
import { createLogger } from '../src/logger.js';
import { approvedBot, client, startHarness, type Harness } from './helpers/harness.js';
import { until } from './helpers/until.js';

describe('a long poll whose client left before the wait', () => {
  it('an already-aborted signal ends the wait at once and the waiter is no longer counted', async () => {
    const waiters = createUpdateWaiters(createMemoryBus(), createLogger('silent'));
    await waiters.start();
    const waiter = waiters.claim('bot-gone', false);
    expect(waiters.size()).toBe(1);
    const gone = new AbortController();
    gone.abort();
    const started = Date.now();
    const outcome = await Promise.race([
      waiter.wait(Date.now() + 5000, gone.signal).then(() => 'resolved', (err) => err),
      new Promise((r) => setTimeout(() => r('still waiting after 1 s'), 1000)),
    ]);
    expect(outcome).toMatchObject({ code: Code.CANCELLED });
    expect(Date.now() - started).toBeLessThan(500);
    expect(waiters.size()).toBe(0);
    waiter.release();
    waiters.close();
  });

  /** How `p` ends within `ms`: 'resolved:<value>', the error, or 'still waiting'. */
  const within = (p: Promise<unknown>, ms: number) => Promise.race([
    p.then((v) => `resolved:${String(v)}`, (err) => err),
    new Promise((r) => setTimeout(() => r('still waiting'), ms)),
  ]);

  it('a long poll between its claim and its wait when shutdown begins answers at once, not at its timeout', async () => {
    const waiters = createUpdateWaiters(createMemoryBus(), createLogger('silent'));
    await waiters.start();
    // Claimed (the call is reading the database before it waits) when close() runs.
    const reading = waiters.claim('bot-reading', false);
    waiters.close();
    const started = Date.now();
    expect(await within(reading.wait(Date.now() + 5000, new AbortController().signal), 1000)).toBe('resolved:false');
    expect(Date.now() - started).toBeLessThan(500);
    // Woken by an update just before shutdown (it reads again, then waits): also at once.
    const waiters2 = createUpdateWaiters(createMemoryBus(), createLogger('silent'));
    await waiters2.start();
    const woken = waiters2.claim('bot-woken', false);
    const first = woken.wait(Date.now() + 5000, new AbortController().signal);
    waiters2.committed(['bot-woken']);
    expect(await first).toBe(true);
    waiters2.close();
    expect(await within(woken.wait(Date.now() + 5000, new AbortController().signal), 1000)).toBe('resolved:false');
    expect(waiters.size() + waiters2.size()).toBe(0);
  });

  it('a wait begun in the same tick as close() answers at once, whichever comes first', async () => {
    const waiters = createUpdateWaiters(createMemoryBus(), createLogger('silent'));
    await waiters.start();
    const a = waiters.claim('bot-a', false);
    const b = waiters.claim('bot-b', false);
    const before = a.wait(Date.now() + 5000, new AbortController().signal);
    waiters.close();
    const after = b.wait(Date.now() + 5000, new AbortController().signal);
    expect(await within(before, 1000)).toBe('resolved:false');
    expect(await within(after, 1000)).toBe('resolved:false');
    // And a poll arriving after close() began is refused, not held.
    expect(() => waiters.claim('bot-c', false)).toThrow(expect.objectContaining({ code: Code.UNAVAILABLE }));
  });

  describe('over HTTP', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness('in-process');
    });
    afterAll(async () => {
      await h?.close();
    });

    const metric = async (name: string, labels = '') => {
      const text = await (await fetch(`${h.url}/metrics`)).text();
      return text.split('\n').filter((l) => l.startsWith(`${name}${labels}`)).reduce((n, l) => n + Number(l.split(' ').pop()), 0);
    };

    /**
     * Sends getUpdates (timeout 30 s; offset and allowed_updates add queries before
     * the wait) on a raw connection and closes it `ms` after sending.
     */
    const pollAndLeave = (token: string, ms: number) => new Promise<void>((resolve) => {
      const { hostname, port } = new URL(h.url);
      const body = JSON.stringify({ timeout: 30, offset: 2, allowed_updates: ['message'] });
      const socket = net.connect(Number(port), hostname, () => {
        socket.write([
          'POST /api/v1/bots/getUpdates HTTP/1.1', `host: ${hostname}:${port}`, `authorization: Bearer ${token}`,
          'content-type: application/json', `content-length: ${Buffer.byteLength(body)}`, '', body,
        ].join('\r\n'));
        setTimeout(() => socket.destroy(), ms);
      });
      socket.on('error', () => {});
      socket.on('close', () => resolve());
      socket.resume();
    });

    it('a client that disconnects right as its long poll starts does not hold it open', async () => {
      const jwt = await h.jwt('leaver');
      const bots = await Promise.all(Array.from({ length: 40 }, (_, i) => approvedBot(h, jwt, `leaver_${i}`)));
      const owner = client(h.url, jwt);
      for (const b of bots) await owner.post(`/api/v1/bots/my/${b.id}/test-updates`, { text: 'first' });
      // Each bot's client leaves at a different moment of the call's start (0 to 9 ms after sending).
      await Promise.all(bots.map((b, i) => pollAndLeave(b.token, i % 10)));
      // Every call ends within moments, far before its 30 s, and none is left counted as open.
      const ended = await until(() => metric('botplatform_rpc_calls_total', '{method="GetUpdates"'), (n) => n === bots.length, 5000);
      expect(ended).toBe(bots.length);
      expect(await metric('botplatform_long_polls_open')).toBe(0);
    });
  });
});

describe('poll takeover signals between instances', () => {
  /** A memory bus whose publishes take `ms` to be acknowledged, each one recorded. */
  function slowBus(ms: number) {
    const inner = createMemoryBus();
    const publishes: BusMessage[][] = [];
    const bus: Bus = {
      ...inner,
      async publish(messages) {
        publishes.push(messages);
        await new Promise((r) => setTimeout(r, ms));
        await inner.publish(messages);
      },
    };
    return { bus, publishes };
  }
  /** Two instances' waiters, started, on one slowBus(ms). */
  async function twoInstances(ms: number) {
    const { bus, publishes } = slowBus(ms);
    const here = createUpdateWaiters(bus, createLogger('silent'));
    const there = createUpdateWaiters(bus, createLogger('silent'));
    await here.start();
    await there.start();
    return { publishes, here, there };
  }
  const closeAll = (...waiters: { close(): void }[]) => waiters.forEach((w) => w.close());
  /** The poll signals a publish carried (a message of them: `polls`, [bot id, generation] pairs). */
  const polls = (batch: BusMessage[]) => batch.flatMap((m) => {
    const value = JSON.parse(m.value) as { polls?: [string, number][] };
    return (value.polls ?? []).map(([botId, generation]) => ({ type: 'poll', botId, generation }));
  });

  /** Waits on a claim for up to 5 s: 'answered', or the error it failed with. */
  const held = (claim: { wait(until: number, signal: AbortSignal): Promise<boolean> }) =>
    claim.wait(Date.now() + 5000, new AbortController().signal).then(() => 'answered', (err: unknown) => err);

  it("a burst of waiting polls for one bot goes out as its newest poll alone, and still ends the other instance's older poll", async () => {
    const { publishes, here, there } = await twoInstances(200);
    // Another instance holds a long poll for bot-a (its own signal goes out first).
    const waiting = held(there.claim('bot-a', true));
    await until(async () => publishes.length, (n) => n === 1, 1000);
    // Here, 20 waiting polls of bot-a and 20 of bot-b in one tick (each ending the one
    // before it here), then 10 more of bot-a while that publish is on its way (it takes
    // 200 ms; the check below looks within 50 ms of its start).
    const claims = Array.from({ length: 20 }, () => [here.claim('bot-a', true), here.claim('bot-b', true)]).flat();
    for (const c of claims) void held(c);
    await until(async () => publishes.length, (n) => n === 2, 1000);
    const later = Array.from({ length: 10 }, () => here.claim('bot-a', true));
    for (const c of later) void held(c);
    await until(async () => publishes.length, (n) => n === 3, 1000);
    // Each publish carries one poll per bot: the newest one raised before it left.
    expect(polls(publishes[1]!).map((s) => s.botId).sort()).toEqual(['bot-a', 'bot-b']);
    expect(polls(publishes[1]!).find((s) => s.botId === 'bot-a')!.generation).toBe(claims.at(-2)!.generation);
    expect(polls(publishes[2]!)).toEqual([expect.objectContaining({ botId: 'bot-a', generation: later.at(-1)!.generation })]);
    // The other instance's poll was ended by the newer one.
    expect(await waiting).toMatchObject({ code: Code.ABORTED });
    // And nothing more goes out (the other's signal, heard here, is older than what here told).
    await new Promise((r) => setTimeout(r, 300));
    expect(publishes).toHaveLength(3);
    closeAll(here, there);
  });

  it('a poll that answers without waiting tells no other instance; one that waits tells them once', async () => {
    const { bus, publishes } = slowBus(0);
    const here = createUpdateWaiters(bus, createLogger('silent'));
    await here.start();
    // Short polls (timeout 0, or updates already there): claimed, answered, released.
    for (let i = 0; i < 50; i++) here.claim('bot-s', true).release();
    await new Promise((r) => setTimeout(r, 50));
    expect(publishes).toHaveLength(0);
    // A long poll tells when it begins to wait; woken and waiting again, it does not tell twice.
    const claim = here.claim('bot-s', true);
    const first = claim.wait(Date.now() + 5000, new AbortController().signal);
    await until(async () => publishes.length, (n) => n === 1, 1000);
    expect(polls(publishes[0]!)).toEqual([expect.objectContaining({ botId: 'bot-s', generation: claim.generation })]);
    here.committed(['bot-s']);
    expect(await first).toBe(true);
    claim.takeDirty();
    const second = claim.wait(Date.now() + 50, new AbortController().signal);
    expect(await second).toBe(false);
    expect(publishes).toHaveLength(1);
    claim.release();
    here.close();
  });

  it("a short poll here, then an older poll elsewhere that begins to wait: here tells, and the older one ends", async () => {
    const { publishes, here, there } = await twoInstances(0);
    // There, a poll is claimed first and reads for a while before it waits.
    const older = there.claim('bot-r', true);
    await new Promise((r) => setTimeout(r, 5));
    // Here, a newer short poll comes and goes, telling no one.
    const newer = here.claim('bot-r', true);
    newer.release();
    expect(newer.generation).toBeGreaterThan(older.generation);
    await new Promise((r) => setTimeout(r, 20));
    expect(publishes).toHaveLength(0);
    // The older poll waits and tells; here hears of it, and tells of the newer, which ends it.
    expect(await held(older)).toMatchObject({ code: Code.ABORTED });
    expect(publishes.flatMap(polls)).toEqual([
      expect.objectContaining({ botId: 'bot-r', generation: older.generation }),
      expect.objectContaining({ botId: 'bot-r', generation: newer.generation }),
    ]);
    closeAll(here, there);
  });

  it("a burst of polls for 1,200 bots, each waiting on another instance: here's claims go out in three messages and end each one", async () => {
    const { publishes, here, there } = await twoInstances(0);
    const bots = Array.from({ length: 1200 }, (_, i) => `bot-${i}`);
    const waiting = bots.map((b) => held(there.claim(b, true)));
    // There's polls told in three messages, heard here.
    await until(async () => publishes.length, (n) => n === 3, 1000);
    await new Promise((r) => setTimeout(r, 20));
    // Here, short polls: each bot's poll elsewhere is the newest known here, so each claim tells at once.
    for (const b of bots) here.claim(b, true).release();
    const ended = await Promise.all(waiting);
    expect(ended.every((e) => (e as { code?: number }).code === Code.ABORTED)).toBe(true);
    // Publishes of at most 500 signals (the group commit's batch), each in one message.
    expect(publishes.map((p) => p.length)).toEqual([1, 1, 1, 1, 1, 1]);
    expect(publishes.slice(3).flatMap(polls).map((s) => s.botId).sort()).toEqual([...bots].sort());
    closeAll(here, there);
  });

  it('a poll signal sent alone, as instances before poll packs sent them, still ends an older poll here', async () => {
    const bus = createMemoryBus();
    const here = createUpdateWaiters(bus, createLogger('silent'));
    await here.start();
    const claim = here.claim('bot-old', false);
    const waiting = claim.wait(Date.now() + 5000, new AbortController().signal).then(() => 'answered', (err) => err);
    await bus.publish([{ topic: 'botplatform.control', key: 'bot-old', value: JSON.stringify({ type: 'poll', botId: 'bot-old', generation: claim.generation + 1, origin: 'an-older-instance' }) }]);
    expect(await waiting).toMatchObject({ code: Code.ABORTED });
    here.close();
  });
});

describe('a woken poll answered from what the wake-ups carried', () => {
  const update = (seq: number) => ({ updateId: 100 + seq, botId: 'bot-c', updateSeq: seq, kind: 'message', message: { text: `u${seq}` }, createdAt: 1 });
  const texts = (rows: { updateSeq: number; message: Record<string, unknown> }[] | undefined) => rows?.map((u) => `${u.updateSeq}:${String(u.message.text)}`);

  it('answers the updates from its offset on when the carried ones hold them with no gap, else asks for a read', async () => {
    const waiters = createUpdateWaiters(createMemoryBus(), createLogger('silent'));
    await waiters.start();
    // Two commits' arrivals (the second repeating one, as the bus and the local wake-up both bring it): 5, 6, 7.
    const a = waiters.claim('bot-c', false);
    waiters.committed(['bot-c'], () => [update(5), update(6)]);
    waiters.committed(['bot-c'], () => [update(6), update(7)]);
    expect(texts(a.takeArrived(5, 100))).toEqual(['5:u5', '6:u6', '7:u7']);
    // Taken: nothing is left to answer from, and nothing flagged.
    expect(a.takeArrived(5, 100)).toBeUndefined();
    expect(a.takeDirty()).toBe(false);
    // From a later offset, and up to the limit.
    waiters.committed(['bot-c'], () => [update(5), update(6), update(7)]);
    expect(texts(a.takeArrived(6, 1))).toEqual(['6:u6']);
    // A gap before the carried ones (update 8 announced elsewhere, not yet here): a read.
    waiters.committed(['bot-c'], () => [update(9)]);
    expect(a.takeArrived(8, 100)).toBeUndefined();
    expect(a.takeDirty()).toBe(true);
    // A wake-up that did not say what arrived (an older core's, the relay's, a recheck): a read, whatever else came.
    waiters.committed(['bot-c'], () => [update(8)]);
    waiters.recheckAll();
    waiters.committed(['bot-c'], () => [update(9)]);
    expect(a.takeArrived(8, 100)).toBeUndefined();
    expect(a.takeDirty()).toBe(true);
    // Too long to carry: said without them.
    expect(encodeArrived([{ ...update(10), message: { text: 'x'.repeat(20_000) } }])).toBeUndefined();
    a.release();
    waiters.close();
  });

  it('over the bus: a message carrying the updates wakes the waiter with them; one saying only NO_DELIVERY asks for a read', async () => {
    const bus = createMemoryBus();
    const waiters = createUpdateWaiters(bus, createLogger('silent'));
    await waiters.start();
    const a = waiters.claim('bot-c', false);
    const woken = a.wait(Date.now() + 5000, new AbortController().signal);
    await bus.publish([{ topic: UPDATES_TOPIC, key: 'bot-c', value: encodeArrived([update(3)])! }]);
    expect(await woken).toBe(true);
    expect(texts(a.takeArrived(3, 100))).toEqual(['3:u3']);
    await bus.publish([{ topic: UPDATES_TOPIC, key: 'bot-c', value: encodeArrived([update(4)])! }, { topic: UPDATES_TOPIC, key: 'bot-c', value: NO_DELIVERY }]);
    expect(a.takeArrived(4, 100)).toBeUndefined();
    a.release();
    waiters.close();
  });

  it('a commit of this process and a bus message from another together: the run they make from the offset', async () => {
    const bus = createMemoryBus();
    const waiters = createUpdateWaiters(bus, createLogger('silent'));
    await waiters.start();
    const a = waiters.claim('bot-c', false);
    waiters.committed(['bot-c'], () => [update(4)]);
    await bus.publish([{ topic: UPDATES_TOPIC, key: 'bot-c', value: encodeArrived([update(5), update(6)])! }]);
    waiters.committed(['bot-c'], () => [update(7)]);
    expect(texts(a.takeArrived(4, 100))).toEqual(['4:u4', '5:u5', '6:u6', '7:u7']);
    a.release();
    waiters.close();
  });
});
