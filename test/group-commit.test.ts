/**
 * createGroupCommit on its own: how calls are gathered into batches (while one is
 * written, in one event-loop turn, within a linger), the batch size cap, results and
 * failures handed back to each call, and onCommitted.
 */
import { describe, expect, it } from 'vitest';
import { createGroupCommit } from '../src/group-commit.js';

/** A commit that records its batches and answers each item doubled, settled when `release` is called. */
function recorder(opts: { fail?: (items: number[]) => boolean } = {}) {
  const batches: number[][] = [];
  const open: (() => void)[] = [];
  const commit = (items: number[]) => {
    batches.push(items);
    return new Promise<number[]>((resolve, reject) => {
      open.push(() => (opts.fail?.(items) ? reject(new Error(`batch ${items.join(',')} failed`)) : resolve(items.map((i) => i * 2))));
    });
  };
  /** Settles the oldest unsettled batch. */
  const release = async () => {
    open.shift()?.();
    await new Promise((r) => setImmediate(r));
  };
  return { batches, commit, release };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('createGroupCommit', () => {
  it('starts a batch at once by default; calls arriving while it is written share the next, each getting its own results', async () => {
    const r = recorder();
    const gc = createGroupCommit(r.commit);
    const first = gc.write([1]);
    expect(r.batches).toEqual([[1]]); // at once, in the caller's turn
    const second = gc.write([2, 3]);
    const third = gc.write([4]);
    expect(r.batches).toEqual([[1]]); // they wait for the batch being written
    await r.release();
    expect(await first).toEqual([2]);
    expect(r.batches).toEqual([[1], [2, 3, 4]]);
    await r.release();
    expect(await second).toEqual([4, 6]);
    expect(await third).toEqual([8]);
  });

  it("with gather 'turn', the calls of one event-loop turn share the first batch", async () => {
    const r = recorder();
    const gc = createGroupCommit(r.commit, { gather: 'turn' });
    const calls = [gc.write([1]), gc.write([2]), gc.write([3])];
    expect(r.batches).toEqual([]);
    await turn();
    expect(r.batches).toEqual([[1, 2, 3]]);
    await r.release();
    expect(await Promise.all(calls)).toEqual([[2], [4], [6]]);
    // The next call after the batch is done waits for its own turn again.
    const later = gc.write([5]);
    expect(r.batches).toHaveLength(1);
    await turn();
    expect(r.batches).toEqual([[1, 2, 3], [5]]);
    await r.release();
    expect(await later).toEqual([10]);
  });

  it('with gather in ms, a batch that is not full waits that long; a full one goes at once', async () => {
    const r = recorder();
    const gc = createGroupCommit(r.commit, { gather: 40, maxBatch: 3 });
    const t0 = Date.now();
    const a = gc.write([1]);
    await new Promise((res) => setTimeout(res, 10));
    const b = gc.write([2]);
    expect(r.batches).toEqual([]);
    await expect.poll(() => r.batches.length, { interval: 2 }).toBe(1);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(35);
    expect(r.batches).toEqual([[1, 2]]);
    await r.release();
    expect(await Promise.all([a, b])).toEqual([[2], [4]]);

    // Full while the previous batch is written: no linger before it.
    const c = gc.write([3]);
    await expect.poll(() => r.batches.length, { interval: 2 }).toBe(2);
    const d = gc.write([4, 5, 6]);
    const t1 = Date.now();
    await r.release();
    expect(r.batches).toEqual([[1, 2], [3], [4, 5, 6]]);
    expect(Date.now() - t1).toBeLessThan(30);
    await r.release();
    expect(await c).toEqual([6]);
    expect(await d).toEqual([8, 10, 12]);
  });

  it('caps a batch at maxBatch items without splitting a call; a larger call goes alone', async () => {
    const r = recorder();
    const gc = createGroupCommit(r.commit, { maxBatch: 3 });
    const calls = [gc.write([0]), gc.write([1, 2]), gc.write([3]), gc.write([4, 5, 6, 7]), gc.write([8])];
    for (let i = 0; i < 4; i++) await r.release();
    expect(r.batches).toEqual([[0], [1, 2, 3], [4, 5, 6, 7], [8]]);
    expect(await Promise.all(calls)).toEqual([[0], [2, 4], [6], [8, 10, 12, 14], [16]]);
  });

  it("a failed batch rejects its own calls only, and onCommitted is told of each batch that committed", async () => {
    const r = recorder({ fail: (items) => items.includes(2) });
    let committed = 0;
    const gc = createGroupCommit(r.commit, { onCommitted: () => committed++ });
    const first = gc.write([1]);
    const failing = [gc.write([2]), gc.write([3])].map((p) => p.then(() => 'committed', (err: Error) => err.message));
    await r.release();
    expect(await first).toEqual([2]);
    expect(committed).toBe(1);
    const after = gc.write([4]);
    await r.release();
    expect(await Promise.all(failing)).toEqual(['batch 2,3 failed', 'batch 2,3 failed']);
    expect(committed).toBe(1);
    await r.release();
    expect(await after).toEqual([8]);
    expect(committed).toBe(2);
    expect(r.batches).toEqual([[1], [2, 3], [4]]);
  });

  it('a commit that throws synchronously rejects its batch, and the next call starts afresh', async () => {
    let n = 0;
    const gc = createGroupCommit<number, number>((items) => {
      if (n++ === 0) throw new Error('no database');
      return Promise.resolve(items);
    });
    await expect(gc.write([1])).rejects.toThrow('no database');
    expect(await gc.write([2])).toEqual([2]);
  });
});
