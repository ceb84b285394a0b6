import { describe, expect, it } from 'vitest';
import { Slots } from '../src/slots.js';

describe('Slots (calls under way, without a Map)', () => {
  it('keeps what is added until it is deleted, and reuses freed slots', () => {
    const slots = new Slots<string>();
    const a = slots.add('a');
    const b = slots.add('b');
    expect(slots.size).toBe(2);
    expect(slots.values()).toEqual(['a', 'b']);
    slots.delete(a, 'a');
    expect(slots.values()).toEqual(['b']);
    const c = slots.add('c');
    expect(c).toBe(a);
    expect(slots.values().sort()).toEqual(['b', 'c']);
    expect(slots.size).toBe(2);
    slots.delete(b, 'b');
    slots.delete(c, 'c');
    expect(slots.size).toBe(0);
    expect(slots.values()).toEqual([]);
  });

  it('a second delete of an entry whose slot was reused leaves the new entry alone', () => {
    const slots = new Slots<() => void>();
    const first = () => {};
    const slot = slots.add(first);
    slots.delete(slot, first);
    const second = () => {};
    expect(slots.add(second)).toBe(slot);
    slots.delete(slot, first);
    expect(slots.values()).toEqual([second]);
    expect(slots.size).toBe(1);
  });

  it('values() is a copy: entries may delete themselves while it is walked (a shutdown answering every call)', () => {
    const slots = new Slots<{ slot: number; answered: boolean }>();
    const entries = Array.from({ length: 5 }, () => {
      const e = { slot: -1, answered: false };
      e.slot = slots.add(e);
      return e;
    });
    for (const e of slots.values()) {
      e.answered = true;
      slots.delete(e.slot, e);
    }
    expect(entries.every((e) => e.answered)).toBe(true);
    expect(slots.size).toBe(0);
  });
});
