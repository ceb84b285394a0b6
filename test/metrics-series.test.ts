/**
 * The metrics read's time series (issue 35): the window as buckets from the per-minute
 * statistics the server keeps (history, not what a page sampled while open): a minute
 * each up to 2 hours, at most 120 buckets beyond, empty ones included, adding up to the
 * window's totals.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seriesOf } from '../src/domain/metrics-service.js';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';

describe('metrics: the window as a series', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness('in-process');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('answers a bucket per minute of the window, summing to its totals', async () => {
    const jwt = await h.jwt('series-owner');
    const bot = await approvedBot(h, jwt, 'series_bot');
    for (let i = 0; i < 4; i++) await call(h.url, 'POST', '/api/v1/bots/getMe', { token: bot.token });
    await call(h.url, 'POST', '/api/v1/bots/sendMessage', { token: bot.token, body: { chat_id: 1, text: 'x' } }); // refused: no such chat
    const m = (await client(h.url, jwt).get(`/api/v1/bots/my/${bot.id}/metrics?window_seconds=300`)).body;
    expect(m.bucket_seconds).toBe(60);
    expect(m.series.length).toBeGreaterThanOrEqual(5);
    expect(m.series.length).toBeLessThanOrEqual(6);
    const sum = (k: string) => m.series.reduce((n: number, b: Record<string, number>) => n + b[k]!, 0);
    expect(sum('calls')).toBe(m.calls_total);
    expect(sum('errors')).toBe(m.errors_total);
    expect(m.calls_total).toBe(5);
    const starts = m.series.map((b: { start: string }) => Date.parse(b.start));
    expect(starts[0]).toBe(Date.parse(m.since));
    starts.slice(1).forEach((t: number, i: number) => expect(t - starts[i]!).toBe(60_000));
    const day = (await client(h.url, jwt).get(`/api/v1/bots/my/${bot.id}/metrics?window_seconds=86400`)).body;
    expect(day.bucket_seconds).toBe(720);
    expect(day.series.length).toBeLessThanOrEqual(121);
    expect(day.series.reduce((n: number, b: { calls: number }) => n + b.calls, 0)).toBe(5);
  });

  it('buckets latency: the mean of the bucket\'s attempts, the slowest, none without attempts', () => {
    const since = 1_800_000_000_000;
    const { series, bucketSeconds } = seriesOf([
      { minute: since, name: 'webhook:ok', count: 2, sumMs: 30, maxMs: 20 },
      { minute: since, name: 'webhook:failed', count: 1, sumMs: 90, maxMs: 90 },
      { minute: since + 120_000, name: 'call:getMe:OK', count: 3, sumMs: 0, maxMs: 0 },
    ], since, since + 150_000, 180);
    expect(bucketSeconds).toBe(60);
    expect(series.map((b) => [b.calls, b.webhookAttempts, b.webhookFailed, b.avgLatencyMs, b.maxLatencyMs])).toEqual([
      [0, 3, 1, 40, 90], [0, 0, 0, undefined, 0], [3, 0, 0, undefined, 0],
    ]);
  });
});
