/**
 * Service telemetry for Prometheus (prom-client): one registry per process role
 * set, served at GET /metrics. Every recording method is a no-op when metrics are
 * switched off (METRICS_ENABLED=false), so the hot path pays nothing then.
 */
import client, { Registry } from 'prom-client';
import { TimedEvents } from './timed-events.js';

/**
 * How often the event loop's lag is sampled (the nodejs_eventloop_lag_* histogram): a
 * timer of this period whose lateness is the lag. Every stall this long or longer is
 * recorded, whole; shorter ones are caught in proportion to their length. prom-client's
 * 10 ms woke an idle process a hundred times a second, about half a percent of a core on
 * its own (bench:idle).
 */
const EVENT_LOOP_SAMPLE_MS = 50;

/** Latency buckets in seconds: 1 ms to 60 s (long polls sit in the top ones). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export interface Telemetry {
  readonly enabled: boolean;
  /** One call through the core's chain: RPC method name, gRPC status name, seconds. */
  rpc(method: string, code: string, seconds: number): void;
  /** One streaming call ended (its parts count as calls, through rpc): RPC method name, gRPC status name, seconds open. */
  stream(method: string, code: string, seconds: number): void;
  /** One HTTP request through the gateway: route template, HTTP status, seconds. */
  http(method: string, route: string, status: number, seconds: number): void;
  /** Updates offered to ingest, by outcome (stored, filtered, rejected). */
  ingested(outcome: string, n: number): void;
  /** One webhook attempt: succeeded, failed (will retry) or dead_letter; seconds. */
  webhookAttempt(outcome: string, seconds: number): void;
  /** A call refused by a limit (rate, chat, quota). */
  limited(limit: string): void;
  /** A Telegram-surface webhook's answer that named a method: executed, invalid or failed. */
  webhookAnswer(outcome: string): void;
  /** Consumer lag of one partition, from the last batch the consumer handled. */
  kafkaLag(group: string, topic: string, partition: number, lag: number): void;
  /** A publish of the outbox relay that failed (bus down or slow). */
  relayFailure(): void;
  /** A gauge read when scraped. */
  gauge(name: string, help: string, read: () => number | Promise<number>): void;
  /** The exposition text and its content type. */
  render(): Promise<{ contentType: string; body: string }>;
}

export function createTelemetry(enabled: boolean): Telemetry {
  if (!enabled) {
    const noop = () => {};
    return {
      enabled: false, rpc: noop, stream: noop, http: noop, ingested: noop, webhookAttempt: noop, limited: noop, webhookAnswer: noop, kafkaLag: noop, relayFailure: noop, gauge: noop,
      render: async () => ({ contentType: 'text/plain', body: '' }),
    };
  }
  const registry = new Registry();
  client.collectDefaultMetrics({ register: registry, prefix: 'botplatform_', eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  // Events counted and timed (each request's, call's, stream's, webhook attempt's) are TimedEvents: prom-client's own classes cost a few objects per event.
  const rpcCalls = new TimedEvents(registry, ['method', 'code'], LATENCY_BUCKETS,
    { name: 'botplatform_rpc_calls_total', help: 'Calls through the core, by RPC method and gRPC status' },
    { name: 'botplatform_rpc_duration_seconds', help: 'Latency of calls through the core, by RPC method and gRPC status' });
  const streams = new TimedEvents(registry, ['method', 'code'], [...LATENCY_BUCKETS, 300, 3600],
    { name: 'botplatform_rpc_streams_total', help: 'Streaming calls ended, by RPC method and gRPC status' },
    { name: 'botplatform_rpc_stream_duration_seconds', help: 'How long streaming calls stayed open, by RPC method and gRPC status' });
  const httpRequests = new TimedEvents(registry, ['method', 'route', 'status'], LATENCY_BUCKETS,
    { name: 'botplatform_http_requests_total', help: 'HTTP requests through the gateway, by method, route and status' },
    { name: 'botplatform_http_request_duration_seconds', help: 'Latency of HTTP requests through the gateway, by method, route and status' });
  const ingested = new client.Counter({ name: 'botplatform_updates_ingested_total', help: 'Updates offered to ingest, by outcome', labelNames: ['outcome'], registers: [registry] });
  const attempts = new TimedEvents(registry, ['outcome'], LATENCY_BUCKETS,
    { name: 'botplatform_webhook_attempts_total', help: 'Webhook delivery attempts, by outcome (succeeded, failed, dead_letter)' },
    { name: 'botplatform_webhook_attempt_duration_seconds', help: 'Latency of webhook delivery attempts' });
  const answers = new client.Counter({ name: 'botplatform_webhook_answers_total', help: 'Methods returned in Telegram-surface webhook answers, by outcome (executed, invalid, failed)', labelNames: ['outcome'], registers: [registry] });
  const limited = new client.Counter({ name: 'botplatform_rate_limited_total', help: 'Runtime calls refused by a rate limit or quota, by limit', labelNames: ['limit'], registers: [registry] });
  const relayFailures = new client.Counter({ name: 'botplatform_outbox_relay_failures_total', help: 'Outbox batches the relay could not publish to the bus (retried)', registers: [registry] });
  const lag = new client.Gauge({ name: 'botplatform_kafka_consumer_lag', help: 'Messages behind the partition end, as of the last batch handled', labelNames: ['group', 'topic', 'partition'], registers: [registry] });

  return {
    enabled: true,
    rpc: (method, code, seconds) => rpcCalls.record(seconds, method, code),
    stream: (method, code, seconds) => streams.record(seconds, method, code),
    http: (method, route, status, seconds) => httpRequests.record(seconds, method, route, status),
    ingested: (outcome, n) => ingested.inc({ outcome }, n),
    webhookAttempt: (outcome, seconds) => attempts.record(seconds, outcome),
    limited: (limit) => limited.inc({ limit }),
    webhookAnswer: (outcome) => answers.inc({ outcome }),
    kafkaLag: (group, topic, partition, value) => lag.set({ group, topic, partition: String(partition) }, value),
    relayFailure: () => relayFailures.inc(),
    gauge(name, help, read) {
      new client.Gauge({ name, help, registers: [registry], async collect() { this.set(await read()); } });
    },
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
