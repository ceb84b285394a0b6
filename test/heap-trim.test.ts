/**
 * When the service gives back what a burst of long polls left in its heap
 * (src/heap-trim.ts): once, after the polls held grew by a burst and stopped arriving.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createBurstTrim } from '../src/heap-trim.js';

describe('the collection after a burst of long polls', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function setup() {
    let held = 0;
    const collect = vi.fn();
    const trim = createBurstTrim({ burst: 1000, quietMs: 1000, held: () => held, collect });
    const arrive = (n: number) => {
      for (let i = 0; i < n; i++) trim.note(++held);
    };
    return { collect, trim, arrive, leave: (n: number) => (held -= n) };
  }

  it('runs once, a second after the last poll of a burst of 1,000 arrived, not while they still arrive', () => {
    const { collect, arrive } = setup();
    for (let wave = 0; wave < 20; wave++) {
      arrive(500);
      vi.advanceTimersByTime(100);
    }
    expect(collect).not.toHaveBeenCalled();
    vi.advanceTimersByTime(899);
    expect(collect).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(collect).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(60_000);
    expect(collect).toHaveBeenCalledTimes(1);
  });

  it('does not run for polls answered as fast as they come, however many', () => {
    const { collect, arrive, leave } = setup();
    for (let i = 0; i < 5000; i++) {
      arrive(1);
      leave(1);
      vi.advanceTimersByTime(10);
    }
    vi.advanceTimersByTime(10_000);
    expect(collect).not.toHaveBeenCalled();
  });

  it('runs again only after the polls held grew by another burst', () => {
    const { collect, arrive } = setup();
    arrive(1000);
    vi.advanceTimersByTime(1000);
    expect(collect).toHaveBeenCalledTimes(1);
    arrive(999);
    vi.advanceTimersByTime(5000);
    expect(collect).toHaveBeenCalledTimes(1);
    arrive(1);
    vi.advanceTimersByTime(1000);
    expect(collect).toHaveBeenCalledTimes(2);
  });

  it('a burst under 1,000 polls held does not run it', () => {
    const { collect, arrive } = setup();
    arrive(999);
    vi.advanceTimersByTime(10_000);
    expect(collect).not.toHaveBeenCalled();
  });
});
