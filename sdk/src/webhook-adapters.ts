/**
 * Webhook receivers for node:http, Fastify and Express. Each one takes the body as
 * raw bytes, verifies it (webhook.ts), hands the update to `onUpdate` and answers:
 * 200 when onUpdate resolved, 401 for a delivery that fails verification (logged
 * by the service as a failed attempt, never retried into success), 500 when
 * onUpdate threw, so the service retries the delivery on its schedule.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyPluginAsync } from 'fastify';
import type { Update } from './generated/api.js';
import { verifyWebhook, WebhookVerificationError, type HeaderSource, type VerifyOptions } from './webhook.js';

export interface WebhookHandlerOptions extends VerifyOptions {
  /** Handles one verified update. A rejection answers 500 and the service retries. */
  onUpdate(update: Update): unknown;
  /** Told of every refused delivery (for logs). */
  onRejected?(error: WebhookVerificationError): void;
  /** Told when onUpdate threw. */
  onError?(error: unknown, update: Update): void;
  /** Largest body accepted, in bytes (default 1 MiB); larger ones answer 413. */
  maxBodyBytes?: number;
}

const DEFAULT_MAX_BODY = 1024 * 1024;

interface Outcome {
  status: number;
  body: Record<string, unknown>;
}

/** The transport-free part every adapter shares. */
export async function handleWebhookDelivery(raw: Uint8Array, headers: HeaderSource, options: WebhookHandlerOptions): Promise<Outcome> {
  let update: Update;
  try {
    update = verifyWebhook(raw, headers, options);
  } catch (err) {
    if (!(err instanceof WebhookVerificationError)) throw err;
    options.onRejected?.(err);
    return { status: err.reason === 'invalid_body' ? 400 : 401, body: { ok: false, reason: err.reason } };
  }
  try {
    await options.onUpdate(update);
  } catch (err) {
    options.onError?.(err, update);
    return { status: 500, body: { ok: false, reason: 'handler_failed' } };
  }
  return { status: 200, body: { ok: true } };
}

class BodyTooLargeError extends Error {}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new BodyTooLargeError());
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, o: Outcome) {
  if (res.headersSent) return;
  const text = JSON.stringify(o.body);
  res.writeHead(o.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function serveNode(req: IncomingMessage, res: ServerResponse, raw: Buffer | undefined, options: WebhookHandlerOptions) {
  if (req.method !== 'POST') {
    res.setHeader('allow', 'POST');
    return send(res, { status: 405, body: { ok: false, reason: 'method_not_allowed' } });
  }
  let body = raw;
  if (!body) {
    try {
      body = await readBody(req, options.maxBodyBytes ?? DEFAULT_MAX_BODY);
    } catch (err) {
      if (err instanceof BodyTooLargeError) return send(res, { status: 413, body: { ok: false, reason: 'body_too_large' } });
      throw err;
    }
  }
  send(res, await handleWebhookDelivery(body, req.headers, options));
}

/**
 * A node:http request listener: `http.createServer(createNodeWebhookHandler({...}))`
 * or `https.createServer(tls, ...)`. It answers every request it is given.
 */
export function createNodeWebhookHandler(options: WebhookHandlerOptions) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    serveNode(req, res, undefined, options).catch(() => send(res, { status: 500, body: { ok: false, reason: 'internal' } }));
  };
}

export interface FastifyWebhookOptions extends WebhookHandlerOptions {
  /** Route path, e.g. "/webhook". */
  path: string;
}

/**
 * A Fastify plugin that adds `POST path`. Register it without fastify-plugin
 * (`app.register(fastifyWebhook({...}))`): its raw-body parser then stays inside
 * the plugin and the app's other routes keep parsing JSON as before.
 */
export function fastifyWebhook(options: FastifyWebhookOptions): FastifyPluginAsync {
  return async (app) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: options.maxBodyBytes ?? DEFAULT_MAX_BODY }, (_req, body, done) => {
      done(null, body);
    });
    app.post(options.path, async (request, reply) => {
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const o = await handleWebhookDelivery(raw, request.headers, options);
      return reply.code(o.status).send(o.body);
    });
  };
}

/** The parts of Express's request this middleware reads; Express 4 and 5 both fit. */
interface ExpressLikeRequest extends IncomingMessage {
  body?: unknown;
}
type Next = (err?: unknown) => void;

/**
 * Express middleware: `app.post('/webhook', expressWebhook({...}))`. It reads the
 * body itself, or takes the Buffer left by `express.raw({ type: 'application/json' })`.
 * After `express.json()` the raw bytes are gone and the signature cannot be checked:
 * that is a configuration error, passed to next() with an explanation.
 */
export function expressWebhook(options: WebhookHandlerOptions) {
  return (req: ExpressLikeRequest, res: ServerResponse, next: Next): void => {
    let raw: Buffer | undefined;
    if (Buffer.isBuffer(req.body)) raw = req.body;
    else if (req.readableEnded || (req as { _body?: boolean })._body) {
      next(new Error('expressWebhook: the request body was already parsed (express.json()?); the signature needs the raw bytes: mount the webhook route before express.json(), or use express.raw({ type: "application/json" })'));
      return;
    }
    serveNode(req, res, raw, options).catch(next);
  };
}
