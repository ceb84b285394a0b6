/**
 * The outbox relay's pace: a commit's nudge publishes at once, however long the relay
 * has been idle; rows nobody nudged for (a writer that died after its commit) still go
 * out, at the idle poll's pace once the relay has been idle a while; under sustained
 * writes it lingers, so that one publish carries what several rounds would.
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
  const bus: Bus = {
    ...memory,
    publish: async (messages) => {
      publishes.push(messages.length);
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
