/**
 * The bus across worker threads (src/bus/thread-bus.ts): a group's keys split among its
 * threads by key, each key to one thread and always the same one; fan-out topics to every
 * thread and the main thread; a thread's publish reaching everyone; a detached thread's
 * share dropped, not sent to the others. Real MessagePorts (MessageChannel), as the
 * dispatcher threads use.
 */
import { MessageChannel } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import type { Bus, BusMessage } from '../src/bus/bus.js';
import { createMemoryBus } from '../src/bus/memory-bus.js';
import { createPortBus, createThreadBusHub, slotOf } from '../src/bus/thread-bus.js';
import { until } from './helpers/until.js';

const opened: Bus[] = [];
afterEach(async () => {
  for (const b of opened.splice(0)) await b.close();
});

/** A hub with `n` thread buses attached, each in its own slot. */
function hubWith(n: number) {
  const hub = createThreadBusHub(createMemoryBus(), n);
  const channels = Array.from({ length: n }, () => new MessageChannel());
  for (const c of channels) hub.attach(c.port1);
  const threads = channels.map((c, i) => createPortBus(c.port2, i));
  opened.push(hub.bus, ...threads);
  return { hub, threads, channels };
}

const updates = (keys: string[]): BusMessage[] => keys.map((key) => ({ topic: 'updates', key, value: '' }));

describe('the thread bus', () => {
  it('splits a group among its threads by key: every key once, always to the same thread', async () => {
    const { hub, threads } = hubWith(3);
    const got = threads.map(() => [] as string[]);
    await Promise.all(threads.map((t, i) => t.subscribeGroup('dispatchers', ['updates'], (keys) => got[i]!.push(...keys))));
    await new Promise((r) => setTimeout(r, 20)); // the subscriptions reach the hub
    const keys = Array.from({ length: 300 }, (_, i) => `bot_${i}`);
    await hub.bus.publish(updates(keys));
    await hub.bus.publish(updates(keys.slice(0, 100)));
    await until(async () => got.flat().length, (n) => n === 400, 2000);
    for (let i = 0; i < 3; i++) {
      // Each thread got only its own keys, and a good share of them.
      expect(got[i]!.every((k) => slotOf(k, 3) === i)).toBe(true);
      expect(new Set(got[i]).size).toBeGreaterThan(50);
    }
    expect(new Set(got.flat()).size).toBe(300);
  });

  it('gives fan-out topics to every thread and to the main thread, whoever publishes', async () => {
    const { hub, threads } = hubWith(2);
    const seen: string[] = [];
    await hub.bus.subscribeAll(['control'], (m) => seen.push(`main:${m.value}`));
    await Promise.all(threads.map((t, i) => t.subscribeAll(['control'], (m) => seen.push(`t${i}:${m.value}`))));
    await new Promise((r) => setTimeout(r, 20));
    await hub.bus.publish([{ topic: 'control', key: 'x', value: 'a' }]);
    await threads[1]!.publish([{ topic: 'control', key: 'x', value: 'b' }]);
    await until(async () => seen.length, (n) => n === 6, 2000);
    expect(seen.sort()).toEqual(['main:a', 'main:b', 't0:a', 't0:b', 't1:a', 't1:b']);
  });

  it('sends a thread nothing of topics it did not take, and drops the share of a detached thread', async () => {
    const { hub, threads, channels } = hubWith(2);
    const got = threads.map(() => [] as string[]);
    await Promise.all(threads.map((t, i) => t.subscribeGroup('dispatchers', ['updates'], (keys) => got[i]!.push(...keys))));
    await new Promise((r) => setTimeout(r, 20));
    hub.detach(channels[1]!.port1);
    const keys = Array.from({ length: 100 }, (_, i) => `bot_${i}`);
    await hub.bus.publish([...updates(keys), { topic: 'messages', key: 'bot_1', value: '' }]);
    await until(async () => got[0]!.length, (n) => n > 0, 2000);
    await new Promise((r) => setTimeout(r, 20));
    expect(got[0]!.sort()).toEqual(keys.filter((k) => slotOf(k, 2) === 0).sort());
    expect(got[1]).toEqual([]);
  });
});
