/**
 * The outbox relay's pace: a commit's nudge publishes at once, however long the relay
 * has been idle; rows nobody nudged for (a writer that died after its commit) still go
 * out, at the idle poll's pace once the relay has been idle a while; under sustained
 * writes it lingers, so that one publish carries what several rounds would. Where the
 * engine answers an insert's ids (MariaDB), a writer's rows claimed as it commits them go
 * out from the commit, once, and a failed or never-made publish leaves them to the relay.
 * On MariaDB when TEST_DATABASE_URL is set, else on SQLite.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus } from '../src/bus/memory-bus.js';
import type { Bus, BusMessage } from '../src/bus/bus.js';
import { createLogger } from '../src/logger.js';
import { createOutboxRelay, type OutboxRelayOptions } from '../src/pipeline/outbox-relay.js';
import { createDb, migrateLatest } from '../src/storage/db.js';
import { createOutboxRepo } from '../src/storage/outbox-repo.js';
import { createTestDatabase } from './helpers/harness.js';

const POLL_MS = 40;
const IDLE_POLL_MS = 600;

/**
 * A relay on a database of its own, publishing `topic` to a memory bus whose publishes
 * take `publishMs` each (a broker's acknowledgement); it notes each publish's size and
 * each key's first arrival.
 */
async function startRelay(topic: string, opts: OutboxRelayOptions, publishMs = 0) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${topic}-`));
  const dbHandle = await createTestDatabase(dir);
  const url = dbHandle.url;
  const db = createDb(url.startsWith('sqlite:') ? { kind: 'sqlite', filename: url.slice('sqlite:'.length) } : { kind: 'mysql', url, poolMax: 3 });
  await migrateLatest(db);
  const memory = createMemoryBus();
  const arrived = new Map<string, number>();
  await memory.subscribeAll([topic], (m: BusMessage) => {
    if (!arrived.has(m.key)) arrived.set(m.key, performance.now());
  });
  /** Messages per bus publish, in order. */
  const publishes: number[] = [];
  /** Every key published, in order (a key twice: published twice). */
  const keys: string[] = [];
  let failures = 0;
  const bus: Bus = {
    ...memory,
    publish: async (messages) => {
      if (failures > 0) {
        failures--;
        throw new Error('broker unavailable');
      }
      publishes.push(messages.length);
      keys.push(...messages.map((m) => m.key));
      if (publishMs > 0) await new Promise((r) => setTimeout(r, publishMs));
      return memory.publish(messages);
    },
  };
  const repo = createOutboxRepo(db);
  const relay = createOutboxRelay(repo, bus, createLogger('silent'), opts);
  relay.start();
  return {
    relay,
    publishes,
    /** Commits one outbox row, as a writer would, and returns when it committed. */
    async commit(key: string) {
      await db.sql.unit(async (w) => repo.insert([{ topic, key, payload: '{}' }], Date.now(), w));
      return performance.now();
    },
    /**
     * Commits one outbox row claimed by this process, as ingest does: its id and message
     * where the engine answers the insert's ids (SQLite, MariaDB), else undefined (left unclaimed: MySQL).
     */
    async commitClaimed(key: string) {
      const now = Date.now();
      const message = { topic, key, payload: '{}' };
      let ids: Promise<number[]> | undefined;
      await db.sql.unit(async (w) => {
        ids = repo.insertClaimed([message], now, relay.claimUntil(now), w);
      });
      return ids && { ids: await ids, messages: [message] };
    },
    /** Outbox rows not yet deleted. */
    backlog: () => repo.backlog(),
    /** How many times `key` was published. */
    published: (key: string) => keys.filter((k) => k === key).length,
    /** Makes the bus's next `n` publishes fail. */
    failNext(n: number) {
      failures = n;
    },
    /** When `key` was published (waiting up to `withinMs` for it). */
    async arrival(key: string, withinMs: number) {
      const until = performance.now() + withinMs;
      while (performance.now() < until) {
        const at = arrived.get(key);
        if (at !== undefined) return at;
        await new Promise((r) => setTimeout(r, 5));
      }
      throw new Error(`${key} was not published within ${withinMs} ms`);
    },
    async close() {
      await relay.stop();
      await db.destroy();
      await dbHandle.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('outbox relay pace', () => {
  let r: Awaited<ReturnType<typeof startRelay>>;
  beforeAll(async () => {
    r = await startRelay('relay-pace', { pollMs: POLL_MS, idlePollMs: IDLE_POLL_MS });
  });
  afterAll(async () => r?.close());
  const commit = (key: string) => r.commit(key);
  const arrival = (key: string, withinMs: number) => r.arrival(key, withinMs);

  it('right after work, publishes rows nobody nudged for at the busy pace', async () => {
    const first = await commit('busy-nudged');
    r.relay.nudge();
    await arrival('busy-nudged', 2000);
    expect(performance.now() - first).toBeLessThan(IDLE_POLL_MS);
    // Each row found keeps the relay at its busy pace: three unnudged rows in a row each go out within a few busy polls
    // (at the idle pace, all three that quick would be a 1-in-64 chance).
    for (let i = 0; i < 3; i++) {
      const at = await commit(`busy-unnudged-${i}`);
      expect((await arrival(`busy-unnudged-${i}`, 2000)) - at).toBeLessThan(IDLE_POLL_MS / 4);
    }
  });

  it('once idle, a nudged commit goes out at once and an unnudged one within the idle poll', async () => {
    // Well past four empty rounds at the busy pace: the relay polls at its idle pace now.
    await new Promise((r) => setTimeout(r, POLL_MS * 10));
    const nudgedAt = await commit('idle-nudged');
    r.relay.nudge();
    expect((await arrival('idle-nudged', 2000)) - nudgedAt).toBeLessThan(IDLE_POLL_MS / 4);

    await new Promise((r) => setTimeout(r, POLL_MS * 10));
    const lateAt = await commit('idle-unnudged');
    const lag = (await arrival('idle-unnudged', IDLE_POLL_MS * 3)) - lateAt;
    expect(lag).toBeLessThan(IDLE_POLL_MS + 200);
    // Idle, it did not look at the busy pace: most such rows wait for the idle poll.
    // (Measured over several rows so one lucky phase cannot decide it.)
    const lags: number[] = [lag];
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, POLL_MS * 10 + 37 * i));
      const t = await commit(`idle-unnudged-${i}`);
      lags.push((await arrival(`idle-unnudged-${i}`, IDLE_POLL_MS * 3)) - t);
    }
    expect(Math.max(...lags)).toBeGreaterThan(POLL_MS * 2);
  });
});

describe('outbox relay linger under sustained writes', () => {
  const LINGER_MS = 300;
  let r: Awaited<ReturnType<typeof startRelay>>;
  // Each publish takes 20 ms: commits arrive while a round is on its way.
  beforeAll(async () => {
    r = await startRelay('relay-linger', { pollMs: POLL_MS, idlePollMs: IDLE_POLL_MS, lingerMs: LINGER_MS }, 20);
  });
  afterAll(async () => r?.close());
  const commitAndNudge = async (key: string) => {
    const at = await r.commit(key);
    r.relay.nudge();
    return at;
  };
  const arrival = (key: string, withinMs: number) => r.arrival(key, withinMs);

  it('a commit after a quiet spell goes out at once; a stream of commits goes out in few publishes, none held much past the linger', async () => {
    await new Promise((r) => setTimeout(r, 400));
    const quietAt = await commitAndNudge('quiet');
    expect((await arrival('quiet', 2000)) - quietAt).toBeLessThan(LINGER_MS / 2);

    // 60 commits, each nudging, one every 5 ms: without a linger, each round would carry what came during the one before (about four).
    r.publishes.length = 0;
    const committed = new Map<string, number>();
    for (let i = 0; i < 60; i++) {
      committed.set(`stream-${i}`, await commitAndNudge(`stream-${i}`));
      await new Promise((r) => setTimeout(r, 5));
    }
    const lags: number[] = [];
    for (const [key, at] of committed) lags.push((await arrival(key, 5000)) - at);
    expect(r.publishes.reduce((a, b) => a + b, 0)).toBe(60);
    expect(r.publishes.length).toBeLessThanOrEqual(6);
    expect(Math.max(...r.publishes)).toBeGreaterThan(15);
    expect(Math.max(...lags)).toBeLessThan(LINGER_MS + 200);
  });
});

describe("a writer's own claimed rows", () => {
  const PUBLISH_TIMEOUT_MS = 300;
  let r: Awaited<ReturnType<typeof startRelay>>;
  beforeAll(async () => {
    r = await startRelay('relay-claimed', { pollMs: POLL_MS, idlePollMs: IDLE_POLL_MS, publishTimeoutMs: PUBLISH_TIMEOUT_MS });
  });
  afterAll(async () => r?.close());

  it('go out from the commit, once, and leave the outbox; on an engine without insert ids, the nudged relay takes them', async () => {
    const at = performance.now();
    const claimed = await r.commitClaimed('direct');
    if (claimed) {
      expect(claimed.ids).toHaveLength(1);
      await r.relay.publishClaimed(claimed);
    } else {
      r.relay.nudge();
    }
    expect((await r.arrival('direct', 2000)) - at).toBeLessThan(IDLE_POLL_MS / 4);
    // Several of the relay's polls later: still published once, and deleted.
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 5));
    expect(r.published('direct')).toBe(1);
    expect(await r.backlog()).toBe(0);
  });

  it('a failed publish gives them back to the relay, which publishes them', async () => {
    const claimed = await r.commitClaimed('direct-failed');
    r.failNext(1);
    if (claimed) await r.relay.publishClaimed(claimed);
    else r.relay.nudge();
    await r.arrival('direct-failed', 3000);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 5));
    expect(r.published('direct-failed')).toBe(1);
    expect(await r.backlog()).toBe(0);
  });

  it('a stream of commits goes out in few publishes, each delayed by no more than the linger', async () => {
    const linger = await startRelay('relay-claimed-linger', { pollMs: POLL_MS, idlePollMs: IDLE_POLL_MS, lingerMs: 100 }, 20);
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const committed = new Map<string, number>();
      for (let i = 0; i < 40; i++) {
        const claimed = await linger.commitClaimed(`claimed-stream-${i}`);
        committed.set(`claimed-stream-${i}`, performance.now());
        if (claimed) void linger.relay.publishClaimed(claimed);
        else linger.relay.nudge();
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const lags: number[] = [];
      for (const [key, at] of committed) lags.push((await linger.arrival(key, 5000)) - at);
      expect(linger.publishes.reduce((a, b) => a + b, 0)).toBe(40);
      // One publish a commit would be 40; a publish a round trip without the linger, about ten.
      expect(linger.publishes.length).toBeLessThanOrEqual(8);
      expect(Math.max(...lags)).toBeLessThan(100 + 300);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await linger.backlog()).toBe(0);
    } finally {
      await linger.close();
    }
  });

  it('rows whose writer never published them (it died) go out once their claim lapses', async () => {
    const before = Date.now();
    const claimed = await r.commitClaimed('direct-orphaned');
    // Nobody publishes them from the commit, and nobody nudges.
    const arrivedAt = await r.arrival('direct-orphaned', r.relay.claimUntil(0) + IDLE_POLL_MS * 3);
    const lapse = r.relay.claimUntil(before) - before;
    if (claimed) expect(performance.timeOrigin + arrivedAt).toBeGreaterThanOrEqual(before + lapse);
    expect(r.published('direct-orphaned')).toBe(1);
  });
});
