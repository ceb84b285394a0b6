/**
 * What a Prometheus scrape reads of the per-call metrics (TimedEvents): the same
 * exposition, line for line, as prom-client's own Counter and Histogram give for the
 * same events, label values that need escaping and durations on and past the bounds included.
 */
import client, { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { TimedEvents } from '../src/telemetry/timed-events.js';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

describe('TimedEvents', () => {
  it('exposes what prom-client’s Counter and Histogram expose for the same events', async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const labelNames = ['method', 'route', 'status'];
    const counter = new client.Counter({ name: 'x_requests_total', help: 'Requests', labelNames, registers: [theirs] });
    const histogram = new client.Histogram({ name: 'x_request_seconds', help: 'Latency, "quoted" \\ help', labelNames, buckets: BUCKETS, registers: [theirs] });
    const events = new TimedEvents(ours, labelNames, BUCKETS, { name: 'x_requests_total', help: 'Requests' }, { name: 'x_request_seconds', help: 'Latency, "quoted" \\ help' });
    const seen: [string, string, number, number][] = [
      ['GET', '/a/:id', 200, 0.0004], ['GET', '/a/:id', 200, 0.001], ['GET', '/a/:id', 200, 0.0010001],
      ['POST', '/b/"x"\\y\nz', 404, 0.7], ['GET', '/a/:id', 200, 100], ['GET', '/a/:id', 500, 0.0025], ['GET', '/c', 200, 0],
    ];
    for (const [method, route, status, seconds] of seen) {
      const labels = { method, route, status: String(status) };
      counter.inc(labels);
      histogram.observe(labels, seconds);
      events.record(seconds, method, route, status);
    }
    const expected = await theirs.metrics();
    expect(expected).toContain('x_request_seconds_bucket{le="+Inf",method="GET",route="/a/:id",status="200"} 4');
    expect(await ours.metrics()).toBe(expected);
    // The registry's reset forgets the label sets, as prom-client's own metrics do.
    theirs.resetMetrics();
    ours.resetMetrics();
    events.record(0.003, 'GET', '/c', 200);
    histogram.observe({ method: 'GET', route: '/c', status: '200' }, 0.003);
    counter.inc({ method: 'GET', route: '/c', status: '200' });
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('takes one or two labels as well as three, and refuses other counts', async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const counter = new client.Counter({ name: 'y_calls_total', help: 'Calls', labelNames: ['method', 'code'], registers: [theirs] });
    const histogram = new client.Histogram({ name: 'y_seconds', help: 'Latency', labelNames: ['method', 'code'], buckets: BUCKETS, registers: [theirs] });
    const events = new TimedEvents(ours, ['method', 'code'], BUCKETS, { name: 'y_calls_total', help: 'Calls' }, { name: 'y_seconds', help: 'Latency' });
    for (const [method, code, seconds] of [['GetMe', 'OK', 0.002], ['GetMe', 'OK', 0.02], ['GetMe', 'UNAUTHENTICATED', 0.0001], ['SendMessage', 'OK', 3]] as const) {
      counter.inc({ method, code });
      histogram.observe({ method, code }, seconds);
      events.record(seconds, method, code);
    }
    const attempts = new client.Counter({ name: 'w_attempts_total', help: 'Attempts', labelNames: ['outcome'], registers: [theirs] });
    const attemptSeconds = new client.Histogram({ name: 'w_seconds', help: 'Latency', labelNames: ['outcome'], buckets: [0.1, 1], registers: [theirs] });
    const byOutcome = new TimedEvents(ours, ['outcome'], [0.1, 1], { name: 'w_attempts_total', help: 'Attempts' }, { name: 'w_seconds', help: 'Latency' });
    for (const [outcome, seconds] of [['succeeded', 0.05], ['failed', 2], ['succeeded', 0.1]] as const) {
      attempts.inc({ outcome });
      attemptSeconds.observe({ outcome }, seconds);
      byOutcome.record(seconds, outcome);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    for (const labels of [[], ['a', 'b', 'c', 'd']]) {
      expect(() => new TimedEvents(new Registry(), labels, BUCKETS, { name: 'z_total', help: 'z' }, { name: 'z_seconds', help: 'z' })).toThrow(/one to three labels/);
    }
  });
});
