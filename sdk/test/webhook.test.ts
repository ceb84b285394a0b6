/**
 * Webhook verification against real deliveries from the service to HTTPS receivers
 * on loopback (a test CA via WEBHOOK_CA_FILE): the verifier accepts what the service
 * sends and refuses every tampered variant; the node:http, Fastify and Express
 * adapters receive real deliveries and answer 401 to forged ones and 500 (so the
 * service retries) when the handler throws.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../../test/helpers/harness.js';
import { startReceiver, type Received, type Receiver } from '../../test/helpers/receiver.js';
import { createTestPki, type TestPki } from '../../test/helpers/tls.js';
import {
  createNodeWebhookHandler,
  expressWebhook,
  fastifyWebhook,
  signWebhook,
  verifyWebhook,
  WebhookMissingHeaderError,
  WebhookSignatureError,
  WebhookTimestampError,
  WebhookUpdateIdMismatchError,
  WebhookVerificationError,
  type Update,
  type WebhookHandlerOptions,
} from '../src/index.js';
import { sdkAccount, until, type SdkAccount } from './helpers.js';

const SECRET = 'sdk_hook-secret_1';

describe('webhook verification', () => {
  let h: Harness;
  let pki: TestPki;
  let account: SdkAccount;
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      WEBHOOK_CA_FILE: pki.caFile,
      WEBHOOK_RETRY_SCHEDULE: '200ms,400ms,600ms,800ms',
      WEBHOOK_TIMEOUT_MS: '2000',
    });
    account = await sdkAccount(h, 'sdk-hooks');
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
    await h?.close();
  });

  /** One real delivery, as the test receiver recorded it. */
  async function realDelivery(username: string): Promise<{ req: Received; updateId: number }> {
    const receiver: Receiver = await startReceiver(pki);
    closers.push(() => receiver.close());
    const bot = await account.approvedBot(username);
    await account.console.setBotWebhook({ id: bot.id, url: receiver.url, secret_token: SECRET });
    const created = await account.console.createTestUpdate({ id: bot.id, text: 'verify me ✓' });
    await receiver.waitFor(1);
    return { req: receiver.received[0]!, updateId: created.update_id };
  }

  const headersOf = (r: Received) => ({
    'x-service-signature-v2': String(r.headers['x-service-signature-v2']),
    'x-service-timestamp': String(r.headers['x-service-timestamp']),
    'x-service-update-id': String(r.headers['x-service-update-id']),
  });
  const refused = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return err;
    }
    throw new Error('accepted');
  };

  it('accepts a real delivery and refuses each tampered variant with its own error', async () => {
    const { req, updateId } = await realDelivery('sdk_verify');
    const headers = headersOf(req);
    const update = verifyWebhook(req.raw, headers, { secret: SECRET });
    expect(update).toMatchObject({ update_id: updateId, update_seq: 1, message: { text: 'verify me ✓' } });
    // Headers as a fetch Headers object work too.
    expect(verifyWebhook(new Uint8Array(req.raw), new Headers(headers), { secret: SECRET }).update_id).toBe(updateId);

    // A changed body: one byte of the text.
    const changedBody = Buffer.from(req.raw);
    changedBody[changedBody.indexOf('verify')] = 'V'.charCodeAt(0);
    expect(refused(() => verifyWebhook(changedBody, headers, { secret: SECRET }))).toBeInstanceOf(WebhookSignatureError);
    // The same JSON re-serialised with other spacing is not the signed bytes.
    const reserialised = Buffer.from(JSON.stringify(JSON.parse(req.raw.toString()), null, 1));
    expect(refused(() => verifyWebhook(reserialised, headers, { secret: SECRET }))).toBeInstanceOf(WebhookSignatureError);
    // A changed timestamp, still within the tolerance.
    const ts = Number(headers['x-service-timestamp']);
    expect(refused(() => verifyWebhook(req.raw, { ...headers, 'x-service-timestamp': String(ts + 1) }, { secret: SECRET })))
      .toBeInstanceOf(WebhookSignatureError);
    // A wrong secret.
    expect(refused(() => verifyWebhook(req.raw, headers, { secret: 'another-secret' }))).toBeInstanceOf(WebhookSignatureError);
    // A different update id header (the header is not signed; it must match the body).
    const otherId = refused(() => verifyWebhook(req.raw, { ...headers, 'x-service-update-id': String(updateId + 1) }, { secret: SECRET }));
    expect(otherId).toBeInstanceOf(WebhookUpdateIdMismatchError);
    expect(otherId).toMatchObject({ reason: 'update_id_mismatch' });
    // A missing header.
    const { 'x-service-signature-v2': _s, ...unsigned } = headers;
    expect(refused(() => verifyWebhook(req.raw, unsigned, { secret: SECRET }))).toBeInstanceOf(WebhookMissingHeaderError);
    // Parsed JSON is not raw bytes.
    expect(refused(() => verifyWebhook(JSON.parse(req.raw.toString()) as never, headers, { secret: SECRET }))).toBeInstanceOf(TypeError);
  });

  it('tolerates 300 s of clock skew either way and refuses 301 s old or ahead', async () => {
    const { req } = await realDelivery('sdk_skew');
    const headers = headersOf(req);
    const now = Math.floor(Date.now() / 1000);
    const signedAt = (ts: number) => ({ ...headers, 'x-service-timestamp': String(ts), 'x-service-signature-v2': signWebhook(SECRET, ts, req.raw) });
    for (const skew of [-300, 300]) {
      expect(verifyWebhook(req.raw, signedAt(now + skew), { secret: SECRET, now }).update_id).toBeGreaterThan(0);
    }
    for (const skew of [-301, 301]) {
      const err = refused(() => verifyWebhook(req.raw, signedAt(now + skew), { secret: SECRET, now }));
      expect(err).toBeInstanceOf(WebhookTimestampError);
      expect(err).toMatchObject({ reason: 'timestamp_out_of_tolerance' });
      expect((err as Error).message).toMatch(skew < 0 ? /301 s old/ : /301 s ahead/);
    }
    // Without `now`, the clock decides: the real delivery's own timestamp replayed from 301 s later is refused.
    const late = Number(headers['x-service-timestamp']) + 301;
    expect(refused(() => verifyWebhook(req.raw, headers, { secret: SECRET, now: late }))).toBeInstanceOf(WebhookTimestampError);
  });

  // ---- adapters as real receivers ----

  interface Endpoint {
    url: string;
    received: Update[];
    rejected: WebhookVerificationError[];
    /** How onUpdate behaves next. */
    failNext: number;
  }
  const handlerOptions = (e: Endpoint): WebhookHandlerOptions => ({
    secret: SECRET,
    onUpdate: (u) => {
      if (e.failNext > 0) {
        e.failNext--;
        throw new Error('handler failed');
      }
      e.received.push(u);
    },
    onRejected: (err) => e.rejected.push(err),
  });
  const endpoint = (): Endpoint => ({ url: '', received: [], rejected: [], failNext: 0 });

  async function nodeEndpoint(): Promise<Endpoint> {
    const e = endpoint();
    const server = https.createServer({ key: pki.key, cert: pki.cert }, createNodeWebhookHandler(handlerOptions(e)));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }));
    e.url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    return e;
  }
  async function fastifyEndpoint(): Promise<Endpoint> {
    const e = endpoint();
    const app: FastifyInstance = Fastify({ https: { key: pki.key, cert: pki.cert } }) as unknown as FastifyInstance;
    // An ordinary JSON route beside the webhook keeps its JSON parsing.
    app.post('/json', async (req) => ({ echoed: req.body }));
    await app.register(fastifyWebhook({ ...handlerOptions(e), path: '/hook' }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => app.close());
    e.url = `https://127.0.0.1:${(app.server.address() as AddressInfo).port}/hook`;
    return e;
  }
  async function expressEndpoint(): Promise<Endpoint> {
    const e = endpoint();
    const app = express();
    app.post('/hook', expressWebhook(handlerOptions(e)));
    app.use(express.json());
    app.post('/parsed-first', expressWebhook(handlerOptions(e)));
    app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).json({ misconfigured: err.message });
    });
    const server = https.createServer({ key: pki.key, cert: pki.cert }, app);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }));
    e.url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    return e;
  }

  /** POST to an endpoint whose certificate the test CA signed. */
  function post(url: string, body: Buffer, headers: Record<string, string>): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = https.request(url, { method: 'POST', ca: fs.readFileSync(pki.caFile), headers: { 'content-type': 'application/json', ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  describe.each([
    ['node:http', nodeEndpoint],
    ['Fastify', fastifyEndpoint],
    ['Express', expressEndpoint],
  ] as const)('%s adapter', (name, start) => {
    it('receives real deliveries, refuses forged ones with 401, and answers 500 when the handler throws so the service retries', async () => {
      const e = await start();
      const bot = await account.approvedBot(`sdk_${name.replace(/\W/g, '').toLowerCase()}_hook`);
      await account.console.setBotWebhook({ id: bot.id, url: e.url, secret_token: SECRET });

      const first = await account.console.createTestUpdate({ id: bot.id, text: `to ${name}` });
      await until(async () => e.received.length, (n) => n >= 1);
      expect(e.received[0]).toMatchObject({ update_id: first.update_id, message: { text: `to ${name}` } });
      const log = await until(() => account.console.listDeliveries({ id: bot.id }), (d) => d.items[0]?.status === 'succeeded');
      expect(log.items[0]).toMatchObject({ status: 'succeeded', last_status_code: 200 });

      // A forged delivery: right shape, wrong secret.
      const body = Buffer.from(JSON.stringify({ update_id: 999, update_seq: 9, message: { text: 'forged' } }));
      const ts = Math.floor(Date.now() / 1000);
      const forged = await post(e.url, body, {
        'x-service-timestamp': String(ts),
        'x-service-signature-v2': signWebhook('not-the-secret', ts, body),
        'x-service-update-id': '999',
      });
      expect(forged.status).toBe(401);
      expect(JSON.parse(forged.body)).toEqual({ ok: false, reason: 'invalid_signature' });
      expect(e.rejected.at(-1)).toBeInstanceOf(WebhookSignatureError);

      // The handler fails once: 500, then the service's retry succeeds.
      e.failNext = 1;
      const second = await account.console.createTestUpdate({ id: bot.id, text: 'retry me' });
      await until(async () => e.received.length, (n) => n >= 2);
      expect(e.received[1]!.update_id).toBe(second.update_id);
      const retried = await until(
        () => account.console.listDeliveries({ id: bot.id }),
        (d) => d.items.find((x) => x.update_id === second.update_id)?.status === 'succeeded',
      );
      expect(retried.items.find((x) => x.update_id === second.update_id)).toMatchObject({ attempts: 2, status: 'succeeded' });
      expect(e.received.map((u) => u.update_id)).toEqual([first.update_id, second.update_id]);
    });
  });

  it('Fastify: the raw-body parser stays inside the plugin; Express: a body parsed before the middleware is a clear error', async () => {
    const f = await fastifyEndpoint();
    const json = await post(f.url.replace('/hook', '/json'), Buffer.from('{"a":1}'), {});
    expect(JSON.parse(json.body)).toEqual({ echoed: { a: 1 } });

    const x = await expressEndpoint();
    const res = await post(x.url.replace('/hook', '/parsed-first'), Buffer.from('{"update_id":1}'), {
      'x-service-timestamp': '1', 'x-service-signature-v2': 'a'.repeat(64), 'x-service-update-id': '1',
    });
    expect(res.status).toBe(500);
    expect(JSON.parse(res.body).misconfigured).toMatch(/already parsed.*raw bytes.*express\.raw/);
  });

  it('signWebhook is the service\'s scheme: hex HMAC-SHA256 over timestamp + "." + body', () => {
    const body = Buffer.from('{"update_id":1}');
    expect(signWebhook('s', 100, body)).toBe(crypto.createHmac('sha256', 's').update('100.{"update_id":1}').digest('hex'));
  });
});
