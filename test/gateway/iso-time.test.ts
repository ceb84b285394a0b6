/**
 * The console's and the runtime API's times are written by gateway/runtime/iso-time.ts: the
 * same text as Date.prototype.toISOString for every time, at the edges of days, months, leap
 * years, centuries and the four-digit years, and beyond them (left to toISOString).
 */
import { expect, it } from 'vitest';
import { isoTime } from '../../gateway/runtime/iso-time.js';

const same = (ms: number) => expect(isoTime(new Date(ms)), String(ms)).toBe(new Date(ms).toISOString());

it('writes what toISOString writes, at the calendar\'s edges', () => {
  const edges = [
    '1970-01-01T00:00:00.000Z', '1969-12-31T23:59:59.999Z', '2000-02-29T12:00:00.500Z', '1900-02-28T23:59:59.999Z',
    '1900-03-01T00:00:00.000Z', '2100-03-01T00:00:00.001Z', '2024-12-31T23:59:59.999Z', '2026-11-28T21:34:05.123Z',
    '0000-01-01T00:00:00.000Z', '0000-02-29T00:00:00.000Z', '0099-12-31T23:59:59.999Z', '0999-01-01T00:00:00.010Z',
    '9999-12-31T23:59:59.999Z',
  ];
  for (const text of edges) {
    expect(isoTime(new Date(text))).toBe(text);
  }
  // Past the four-digit years, and an invalid date, as toISOString.
  same(Date.parse('9999-12-31T23:59:59.999Z') + 1);
  same(Date.parse('0000-01-01T00:00:00.000Z') - 1);
  expect(() => isoTime(new Date(NaN))).toThrow(RangeError);
});

it('writes what toISOString writes, for 20,000 times over 9,999 years', () => {
  let seed = 42;
  const random = () => (seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) / 2 ** 32;
  const span = Date.parse('9999-12-31T23:59:59.999Z') - Date.parse('0000-01-01T00:00:00.000Z');
  for (let i = 0; i < 20_000; i++) same(Date.parse('0000-01-01T00:00:00.000Z') + Math.floor(random() * span));
});
