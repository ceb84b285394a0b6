/**
 * Builds the Fastify gateway from a route table: binding (path, body, query),
 * auth-header forwarding as call metadata, the status table and the two error
 * envelopes. Routes come only from the table; none is written here.
 * The app is built, not started: callers listen (or inject, in tests) and close.
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { ApiError, Code } from '../../src/errors.js';
import { PUBLIC_BASE_URL_METADATA } from '../../src/core/context.js';
import type { Telemetry } from '../../src/telemetry/metrics.js';
import { requestIdOf } from '../../src/telemetry/request-id.js';
import { createCodec } from './codec.js';
import { errorBody, successBody, surfaceOfPath, type HttpFailure } from './envelopes.js';
import { registerFileRoutes, type FileRoutesOptions } from './file-routes.js';
import type { Invoker } from './invoker.js';
import type { RouteSpec, RouteTable, Surface } from './schema.js';
import { httpStatusOf, statusNameOf } from './status.js';

export interface GatewayOptions {
  table: RouteTable;
  invoker: Invoker;
  logger: Logger;
  maxBodyBytes: number;
  openapi?: unknown;
  /** Serves the signed upload and download URLs of files. */
  files?: FileRoutesOptions;
  telemetry: Telemetry;
}

const FORWARDED_HEADERS = ['authorization'] as const;

function failureOf(err: ApiError): HttpFailure {
  const http = httpStatusOf(err.code);
  return {
    http,
    status: statusNameOf(err.code),
    // 5xx never carry internals: the core already replaced them with a bland message. A
    // deadline is not an internal error: it says so, in words of the gateway's own.
    message: err.code === Code.DEADLINE_EXCEEDED
      ? 'the call did not finish in time; retry it'
      : http >= 500 && err.code !== Code.UNAVAILABLE ? 'internal error' : err.message,
    details: err.details.map(({ field, reason }) => ({ field, reason })),
    retryAfterSeconds: err.retryAfterSeconds,
  };
}

function send(reply: FastifyReply, surface: Surface, f: HttpFailure) {
  if (f.http === 401) reply.header('www-authenticate', 'Bearer');
  if (f.retryAfterSeconds !== undefined) reply.header('retry-after', String(f.retryAfterSeconds));
  return reply.code(f.http).type('application/json').send(errorBody(surface, f));
}

/** Fastify's own errors (body parsing, size) in the contract's terms. */
function failureOfFastify(err: { code?: string; statusCode?: number; message: string }): HttpFailure {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { http: 413, status: 'INVALID_ARGUMENT', message: 'request body is too large' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { http: 415, status: 'INVALID_ARGUMENT', message: 'Content-Type must be application/json' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { http: 400, status: 'INVALID_ARGUMENT', message: 'Content-Length does not match the body' };
    default:
      if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
        return { http: 400, status: 'INVALID_ARGUMENT', message: 'malformed request' };
      }
      return { http: 500, status: 'INTERNAL', message: 'internal error' };
  }
}

/** The gateway app; `cancelInFlight` answers every call still waiting on the core with 503 (shutdown's last resort). */
export type Gateway = FastifyInstance & { cancelInFlight(): void };

const SHUTDOWN = Symbol('shutdown');

export function buildGateway(opts: GatewayOptions): Gateway {
  const codec = createCodec(opts.table);
  const inFlight = new Set<AbortController>();
  const app: FastifyInstance = Fastify({
    loggerInstance: opts.logger as FastifyBaseLogger,
    bodyLimit: opts.maxBodyBytes,
    // Signed file URLs carry their grant in a path parameter.
    routerOptions: { maxParamLength: 2048 },
    // The caller's x-request-id when it is a plain token, else a new one; it goes on
    // to the core as call metadata (over gRPC too) and back in the response.
    requestIdHeader: false,
    genReqId: (req) => requestIdOf(req.headers['x-request-id']),
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    // Connections are closed by the lifecycle's graceful close (lifecycle.ts).
    forceCloseConnections: false,
  }) as unknown as FastifyInstance;

  // One access log line and one sample per request, labelled by route template (not
  // by raw URL: ids would make the label set unbounded).
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unrouted';
    const seconds = reply.elapsedTime / 1000;
    opts.telemetry.http(request.method, route, reply.statusCode, seconds);
    if (route === '/healthz' || route === '/metrics') return;
    request.log.info({ requestId: request.id, method: request.method, route, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 }, 'http');
  });

  // JSON only; an empty body is an empty request. Malformed JSON is a 400 in the route's envelope.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(ApiError.invalid('body', 'MALFORMED_JSON', 'is not valid JSON'), undefined);
    }
  });
  app.addContentTypeParser('*', (_req, payload, done) => {
    // Drain and refuse: only JSON bodies are understood.
    payload.resume();
    done(Object.assign(new Error('unsupported media type'), { code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE', statusCode: 415 }), undefined);
  });

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, request, reply) => {
    const surface = (request.routeOptions.config as { surface?: Surface }).surface ?? surfaceOfPath(request.url);
    const failure = err instanceof ApiError ? failureOf(err) : failureOfFastify(err);
    if (failure.http >= 500) request.log.error({ err }, 'request failed');
    return send(reply, surface, failure);
  });

  app.setNotFoundHandler((request, reply) => {
    const surface = surfaceOfPath(request.url);
    const message = surface === 'runtime' ? 'method not found' : `no route for ${request.method} ${request.url.split('?')[0]}`;
    return send(reply, surface, { http: 404, status: 'NOT_FOUND', message });
  });

  if (opts.openapi) app.get('/api/v1/openapi.json', async () => opts.openapi);
  if (opts.files) registerFileRoutes(app, opts.files);

  for (const spec of opts.table.routes) {
    app.route({
      method: spec.method,
      url: spec.fastifyPath,
      config: { surface: spec.surface },
      handler: (request, reply) => handle(spec, request, reply),
    });
  }

  /** Builds the request message from path, body and query. */
  function bind(spec: RouteSpec, request: FastifyRequest) {
    const message = codec.emptyMessage(spec.requestType);
    const body = request.body;
    if (body !== undefined && spec.body === null) throw ApiError.invalid('body', 'UNEXPECTED_BODY', 'this method takes no body');
    if (body !== undefined && (typeof body !== 'object' || body === null || Array.isArray(body)) && spec.body === '*') {
      throw ApiError.invalid('body', 'INVALID_TYPE', 'must be a JSON object');
    }
    // Query parameters bind every field not taken by the path (or by a named body
    // field); a "*" body, read after them, wins where both give a field.
    const pathFields = new Set<string>(spec.pathParams.map((p) => p.field[0]!));
    const query = request.query as Record<string, string | string[]>;
    for (const [name, raw] of Object.entries(query)) {
      const path = codec.fieldPathOf(spec.requestType, name);
      if (!path || pathFields.has(path[0]!) || path[0] === spec.body) {
        throw ApiError.invalid(name, 'UNKNOWN_FIELD', 'is not a known parameter');
      }
      codec.setFromText(spec.requestType, message, path, Array.isArray(raw) ? raw : [raw], name);
    }
    if (spec.body === '*') {
      if (body !== undefined) codec.decodeMessage(spec.requestType, body as Record<string, unknown>, '', message);
    } else if (spec.body) {
      const field = codec.lookup(spec.requestType).get(spec.body)!;
      if (body !== undefined) message[field.ts] = decodeBodyField(field.proto, body);
    }
    const params = request.params as Record<string, string>;
    for (const p of spec.pathParams) codec.setFromText(spec.requestType, message, p.field, [params[p.param]!], p.field.join('.'));

    // AIP-134: a PATCH with a message body and an update_mask field updates the keys present.
    const mask = codec.lookup(spec.requestType).get('update_mask');
    if (spec.body && spec.body !== '*' && mask?.type.kind === 'fieldmask' && !('update_mask' in query) && !('updateMask' in query)) {
      const target = codec.lookup(spec.requestType).get(spec.body)!;
      const keys = body && typeof body === 'object' ? Object.keys(body) : [];
      message[mask.ts] = target.type.kind === 'message'
        ? keys.map((k) => codec.lookup((target.type as { ref: string }).ref).get(k)?.proto ?? k)
        : [];
    }
    return message;

    function decodeBodyField(proto: string, value: unknown) {
      const f = codec.lookup(spec.requestType).get(proto)!;
      if (f.type.kind === 'message' && !f.repeated) {
        if (typeof value !== 'object' || value === null || Array.isArray(value)) {
          throw ApiError.invalid('body', 'INVALID_TYPE', 'must be a JSON object');
        }
        return codec.decodeMessage(f.type.ref, value as Record<string, unknown>);
      }
      throw ApiError.invalid('body', 'INVALID_TYPE', 'unsupported body binding');
    }
  }

  async function handle(spec: RouteSpec, request: FastifyRequest, reply: FastifyReply) {
    const message = bind(spec, request);
    const metadata: Record<string, string> = {
      'x-request-id': String(request.id),
      // Where this request came in: the base of the file URLs the core hands out.
      [PUBLIC_BASE_URL_METADATA]: `${request.protocol}://${request.host}`,
    };
    for (const h of FORWARDED_HEADERS) {
      const v = request.headers[h];
      if (typeof v === 'string') metadata[h] = v;
    }
    const abort = new AbortController();
    // The response stream closes early only when the client went away.
    const onClose = () => {
      if (!reply.raw.writableEnded) abort.abort();
    };
    reply.raw.once('close', onClose);
    inFlight.add(abort);
    // At the end of a shutdown's grace period, a call still waiting (a long poll on a
    // core that is not stopping) is answered 503 instead of having its connection cut.
    const cancelled = new Promise<never>((_, reject) => abort.signal.addEventListener('abort', () => {
      if (abort.signal.reason === SHUTDOWN) reject(new ApiError(Code.UNAVAILABLE, 'the service is shutting down; retry the call'));
    }, { once: true }));
    cancelled.catch(() => {});
    let response: Record<string, unknown>;
    try {
      response = (await Promise.race([opts.invoker.invoke(spec, message, metadata, abort.signal), cancelled])) as Record<string, unknown>;
    } finally {
      reply.raw.off('close', onClose);
      inFlight.delete(abort);
    }
    const field = spec.responseBody ? codec.lookup(spec.responseType).get(spec.responseBody)! : undefined;
    const result = field
      ? codec.encodeField(field, response[field.ts], spec.surface)
      : codec.encodeMessage(spec.responseType, response, spec.surface);
    return reply.code(spec.successCode).type('application/json').send(successBody(spec.surface, result ?? null));
  }

  return Object.assign(app, {
    cancelInFlight() {
      for (const a of inFlight) a.abort(SHUTDOWN);
    },
  });
}
