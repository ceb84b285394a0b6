/**
 * Builds the Fastify gateway from a route table: binding (path, body, query:
 * binding.ts), auth-header forwarding as call metadata, and one error path for every
 * failure (errors.ts, envelopes.ts). Routes come only from the table; none is written here.
 * The app is built, not started: callers listen (or inject, in tests) and close.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { ApiError, Code } from '../../src/errors.js';
import { CallAbort, PUBLIC_BASE_URL_METADATA } from '../../src/core/context.js';
import type { Telemetry } from '../../src/telemetry/metrics.js';
import { requestIdOf } from '../../src/telemetry/request-id.js';
import { infoLine } from '../../src/logger.js';
import { Slots } from '../../src/slots.js';
import { bindRequest, parseJsonBody } from './binding.js';
import { createCodec } from './codec.js';
import { renderError, surfaceOfPath } from './envelopes.js';
import { apiErrorOf, methodNotAllowed, routeNotFound, unsupportedMediaType } from './errors.js';
import { answerClientError } from './client-errors.js';
import { registerFileRoutes, type FileRoutesOptions } from './file-routes.js';
import { registerConsoleRoutes, type ConsoleRoutesOptions } from './console.js';
import { registerDocsRoutes } from './docs.js';
import { registerTelegramRoutes } from './telegram.js';
import type { RpcLogSink } from '../../src/core/core.js';
import type { Invoker } from './invoker.js';
import type { FieldSchema, RouteSpec, RouteTable, Surface } from './schema.js';

export interface GatewayOptions {
  table: RouteTable;
  invoker: Invoker;
  logger: Logger;
  maxBodyBytes: number;
  /** Largest file part of a multipart body on the Telegram surface (MAX_FILE_BYTES). */
  maxFileBytes: number;
  /** Multipart uploads the Telegram surface reads at once, per bot and in all (UPLOADS_PER_BOT, UPLOADS_MAX). */
  uploads: { perBot: number; total: number };
  /** Longest a request's body may take to arrive (REQUEST_TIMEOUT), and longest it may pause (BODY_IDLE_TIMEOUT); ms. */
  requestTimeoutMs: number;
  bodyIdleTimeoutMs: number;
  openapi?: unknown;
  /** Serves the signed upload and download URLs of files. */
  files?: FileRoutesOptions;
  telemetry: Telemetry;
  /** The web console's files and local sign-in (console.ts). */
  console?: ConsoleRoutesOptions;
}

const FORWARDED_HEADERS = ['authorization'] as const;

/**
 * What a credential may hold: printable ASCII (as gRPC metadata values must be). A stray
 * character (a pasted no-break space, a token file's newline) is a bad credential, refused
 * before any call metadata is built, whatever the transport to the core.
 */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/** The gateway app; `cancelInFlight` answers every call still waiting on the core with 503 (shutdown's last resort). */
export type Gateway = FastifyInstance & { cancelInFlight(): void };

const SHUTDOWN = Symbol('shutdown');

/** A request's log state: the `rpc` fields of its core call, and whether its `http` line is written. */
type LoggedRequest = FastifyRequest & RpcLogSink & {
  rpcLog: { written: boolean; fields: Record<string, unknown> | undefined } | null;
  /**
   * The route template, set by the route table's handler: Fastify's `routeOptions` builds
   * an object of a dozen fields at every read, which the log line and the metric would
   * pay on every request.
   */
  routeUrl: string | null;
};


/** The reason of a call aborted because its client went away. */
const CLIENT_GONE = Symbol('client gone');

/** onSend hooks: `Cache-Control: no-store`, unless the route set its own; and in any case. */
function noStore(_request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void) {
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  done(null, payload);
}
function forceNoStore(_request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void) {
  reply.header('cache-control', 'no-store');
  done(null, payload);
}

/** Each path template of the table (as a pattern of the raw path) with the methods it takes, in the table's order. */
function methodsByTemplate(table: RouteTable): { pattern: RegExp; methods: string[] }[] {
  const byPath = new Map<string, Set<string>>();
  for (const r of table.routes) {
    const methods = byPath.get(r.fastifyPath) ?? new Set<string>();
    methods.add(r.method);
    if (r.method === 'GET') methods.add('HEAD');
    byPath.set(r.fastifyPath, methods);
  }
  const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return [...byPath].map(([path, methods]) => ({
    pattern: new RegExp(`^${path.split('/').map((part) => (part.startsWith(':') ? '[^/]+' : escape(part))).join('/')}$`),
    methods: [...methods],
  }));
}

/**
 * The OpenAPI document as this deployment serves it: a bound the protos leave to a
 * setting ((botplatform.v1.constraints).maximum_setting, written `x-maximum-setting`)
 * becomes the setting's value, so the document says what this service accepts.
 */
function withSettings(document: unknown, settings: Readonly<Record<string, number>>): unknown {
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (typeof node !== 'object' || node === null) return node;
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(node)) out[key] = walk(value);
    const setting = out['x-maximum-setting'];
    if (typeof setting === 'string') {
      if (settings[setting] === undefined) throw new Error(`the OpenAPI document names an unknown setting ${setting}`);
      out.maximum = settings[setting];
    }
    return out;
  };
  return walk(document);
}

/** A request's body has ended (or the request closed): its socket's idle limit is lifted (limitBodyIdle). */
function bodyEnded(this: IncomingMessage) {
  this.off('end', bodyEnded);
  this.off('close', bodyEnded);
  this.socket?.setTimeout(0);
}

/** The answer to a request that arrives while the gateway is closing, and to a call still waiting at its end. */
const CLOSING = new ApiError(Code.UNAVAILABLE, 'the service is shutting down; retry the call');

export function buildGateway(opts: GatewayOptions): Gateway {
  const codec = createCodec(opts.table);
  /**
   * Calls waiting on the core: what answers each 503 at shutdown's last resort (its abort
   * signalled first). Slots, not a Map: see src/slots.ts.
   */
  const inFlight = new Slots<(err: unknown, shutdown?: true) => void>();
  const app: FastifyInstance = Fastify({
    loggerInstance: opts.logger as FastifyBaseLogger,
    bodyLimit: opts.maxBodyBytes,
    // A body must arrive within REQUEST_TIMEOUT (Node's requestTimeout), and pause no longer
    // than BODY_IDLE_TIMEOUT (the onRequest hook): a slow or stalled upload holds its socket
    // and its staged bytes no longer than that. Waiting for an answer (a long poll) is not
    // receiving a body, so neither limits it.
    requestTimeout: opts.requestTimeoutMs,
    // Given to Node's server at its creation too: set only afterwards (as Fastify does), Node
    // 20 never enforces it. Node checks for overdue requests every connectionsCheckingInterval
    // (30 s by default, which would hold a socket up to 30 s past a short timeout).
    http: { requestTimeout: opts.requestTimeoutMs, connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(opts.requestTimeoutMs / 4))) },
    // Signed file URLs carry their grant in a path parameter.
    routerOptions: { maxParamLength: 2048 },
    // The caller's x-request-id when it is a plain token, else a new one; it goes on
    // to the core as call metadata (over gRPC too) and back in the response.
    requestIdHeader: false,
    genReqId: (req) => requestIdOf(req.headers['x-request-id']),
    logController: new LogController({ disableRequestLogging: true }),
    // No pino child per request (about 240 bytes, held by every waiting long poll): the
    // lines written here carry the request id themselves (`requestId`, as the core's do).
    childLoggerFactory: (logger) => logger,
    // While closing, requests still arriving (on open keep-alive connections) are
    // refused by the onRequest hook below, in the contract's envelope.
    return503OnClosing: false,
    // Connections are closed by the lifecycle's graceful close (lifecycle.ts).
    forceCloseConnections: false,
    // The router's own failures (a path that does not percent-decode, an over-long
    // parameter) take the one error path too, instead of Fastify's body echoing the path.
    frameworkErrors: (err, request, reply) => sendError(err, request, reply),
    // What Node's parser refuses (malformed request, headers too large: 431, too slow: 408)
    // is answered in the contract's envelope too, and logged without its bytes.
    clientErrorHandler: (err, socket) => answerClientError(err, socket, app.log),
  }) as unknown as FastifyInstance;

  /**
   * The one error path (grpc-gateway's DefaultHTTPErrorHandler): any failure, as an
   * ApiError, rendered in the envelope of the route's surface (or, unrouted, the path's).
   */
  function sendError(err: unknown, request: FastifyRequest, reply: FastifyReply) {
    const error = apiErrorOf(err);
    const config = request.routeOptions?.config as { surface?: Surface } | undefined;
    const surface = config?.surface ?? surfaceOfPath(request.url);
    const { status, headers, body } = renderError(error, surface);
    if (status >= 500 && error !== CLOSING) request.log.error({ err, requestId: request.id }, 'request failed');
    return reply.code(status).headers(headers).send(body);
  }

  /**
   * A request with a body: its socket is closed once no byte of the body has come for
   * BODY_IDLE_TIMEOUT (Node destroys a timed-out socket nobody answers for), until the body
   * has ended (read, or drained after the answer). Waiting for the answer is not limited.
   */
  function limitBodyIdle(req: IncomingMessage) {
    req.socket.setTimeout(opts.bodyIdleTimeoutMs);
    // One function for every request (the request is its `this`), added with on(), not
    // once(): no closure and no once() wrapper per request, held by a waiting long poll's
    // request until it ends.
    req.on('end', bodyEnded);
    req.on('close', bodyEnded);
  }

  /** Whether a request has a body to receive (else the message ends with its headers). */
  const hasBody = (headers: IncomingHttpHeaders) =>
    headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');

  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });

  // The hooks every request runs take Fastify's callback form: an async hook costs a
  // promise and a microtask turn per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    if (hasBody(request.headers)) limitBodyIdle(request.raw);
    done(closing ? CLOSING : undefined);
  });
  // One access log line and one sample per request, labelled by route template (not
  // by raw URL: ids would make the label set unbounded). In one process, the core hands
  // a call's `rpc` fields to the request (logSinkOf) and they go on its `http` line, the
  // core's `ms` as `rpcMs`: one line per request.
  app.decorateRequest('rpcLog', null);
  app.decorateRequest('routeUrl', null);
  app.addHook('onResponse', (request, reply, done) => {
    const route = (request as LoggedRequest).routeUrl ?? request.routeOptions.url ?? 'unrouted';
    const elapsed = reply.elapsedTime;
    opts.telemetry.http(request.method, route, reply.statusCode, elapsed / 1000);
    const state = (request as LoggedRequest).rpcLog;
    if (state) state.written = true;
    if (route !== '/healthz' && route !== '/metrics') {
      const line: Record<string, unknown> = { requestId: request.id, method: request.method, route, status: reply.statusCode, ms: Math.round(elapsed * 10) / 10 };
      const rpc = state?.fields;
      if (rpc) for (const key in rpc) if (key !== 'requestId') line[key === 'ms' ? 'rpcMs' : key] = rpc[key];
      infoLine(request.log as Logger, line, 'http');
    }
    done();
  });

  /**
   * Where the core puts a call's `rpc` log fields for this request's line: the request
   * itself (a method of every request, not a closure per call). Once that line is written
   * (the client left before the call ended), or for a request's second call, the core's
   * fields get a line of their own.
   */
  app.decorateRequest('takeRpcLog', function takeRpcLog(this: FastifyRequest, fields: Record<string, unknown>) {
    const state = ((this as LoggedRequest).rpcLog ??= { written: false, fields: undefined });
    if (state.written || state.fields) return false;
    state.fields = fields;
    return true;
  });
  const logSinkOf = (request: FastifyRequest) => request as LoggedRequest;

  // JSON only; an empty body is an empty request. Malformed JSON is a 400 in the route's envelope.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parseJsonBody);
  app.addContentTypeParser('*', (_req, payload, done) => {
    // Drain and refuse: only JSON bodies are understood.
    payload.resume();
    done(unsupportedMediaType(), undefined);
  });

  // A path of the route table asked with another method is a 405 naming the methods it
  // takes (HEAD with GET, as Fastify answers it); any other unrouted request is a 404.
  const allowedMethods = methodsByTemplate(opts.table);
  /** The 405 of a request to a known path in a method it does not take (undefined: not such a request). */
  function wrongMethod(request: FastifyRequest, reply: FastifyReply): ApiError | undefined {
    const path = request.url.split('?', 1)[0]!;
    const allowed = [...new Set(allowedMethods.filter((t) => t.pattern.test(path)).flatMap((t) => t.methods))];
    if (allowed.length === 0 || allowed.includes(request.method)) return undefined;
    reply.header('allow', allowed.join(', '));
    return methodNotAllowed(request.method, allowed);
  }
  // Fastify may fail an unrouted request before its not-found handler (a QUERY without a
  // Content-Type is a 400 there): in a method its path does not take, it is still a 405.
  app.setErrorHandler((err, request, reply) => sendError((request.is404 && wrongMethod(request, reply)) || err, request, reply));
  app.setNotFoundHandler((request, reply) =>
    sendError(wrongMethod(request, reply) ?? routeNotFound(surfaceOfPath(request.url), request.method), request, reply));

  // The API's answers (the route table's, the signed file URLs', the Telegram surface's)
  // are per caller and carry tokens, secrets and chats' messages: no cache may keep them.
  // `Cache-Control: no-store` goes on every answer of a route with a surface, errors
  // included (renderError sets it on every error answer as well). A route may set its own
  // (a signed download URL's file: `private, max-age=3600`), except on the Telegram surface,
  // whose URLs carry the bot's token (/bot<token>/..., /file/bot<token>/...). Route hooks,
  // added as the routes are: /healthz, /metrics, /docs and the console pay nothing.
  app.addHook('onRoute', (route) => {
    if (!(route.config as { surface?: Surface } | undefined)?.surface) return;
    const telegram = route.url.startsWith('/bot') || route.url.startsWith('/file/bot');
    const hooks = route.onSend === undefined ? [] : Array.isArray(route.onSend) ? route.onSend : [route.onSend];
    route.onSend = [...hooks, telegram ? forceNoStore : noStore] as typeof route.onSend;
  });

  if (opts.openapi) {
    const openapi = withSettings(opts.openapi, { MAX_FILE_BYTES: opts.maxFileBytes });
    app.get('/api/v1/openapi.json', async () => openapi);
    registerDocsRoutes(app);
  }
  if (opts.files) registerFileRoutes(app, opts.files);
  if (opts.console) registerConsoleRoutes(app, opts.console);
  registerTelegramRoutes(app, {
    table: opts.table, codec, files: opts.files, maxBodyBytes: opts.maxBodyBytes, maxFileBytes: opts.maxFileBytes, uploads: opts.uploads,
    call: (spec, message, metadata, request, reply) => invokeCore(spec, message, metadata, request, reply),
  });

  for (const spec of opts.table.routes) {
    app.route({
      method: spec.method,
      url: spec.fastifyPath,
      config: { surface: spec.surface },
      handler: (request, reply) => {
        (request as LoggedRequest).routeUrl = spec.fastifyPath;
        return handle(spec, request, reply);
      },
    });
  }

  /** The route's response_body field, when it answers one field of its response (looked up once per route). */
  const responseFields = new Map<RouteSpec, FieldSchema | undefined>();
  function responseFieldOf(spec: RouteSpec): FieldSchema | undefined {
    if (!spec.responseBody) return undefined;
    let field = responseFields.get(spec);
    if (!field) responseFields.set(spec, (field = codec.lookup(spec.responseType).get(spec.responseBody)!));
    return field;
  }

  /**
   * A route's request: bound, called, answered. Not an async function: a long poll waits
   * here by the thousand, each holding one reaction (the answer's) rather than a
   * suspended frame.
   */
  function handle(spec: RouteSpec, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    let message: unknown;
    try {
      message = bindRequest(codec, spec, {
        body: request.body,
        query: request.query as Record<string, string | string[]>,
        params: request.params as Record<string, string>,
      });
    } catch (err) {
      return Promise.reject(err);
    }
    const metadata: Record<string, string> = {};
    for (const h of FORWARDED_HEADERS) {
      const v = request.headers[h];
      if (typeof v === 'string') metadata[h] = v;
    }
    return invokeCore(spec, message, metadata, request, reply, answer);
  }

  /** A call's response, written: the body as JSON text, once, from the descriptors (codec.encodeMessageJson). */
  function answer(spec: RouteSpec, reply: FastifyReply, response: Record<string, unknown>): FastifyReply {
    // The same bytes as JSON.stringify(successBody(…)) of the encoded object.
    const field = responseFieldOf(spec);
    const result = (field
      ? codec.encodeFieldJson(field, response[field.ts], spec.surface)
      : codec.encodeMessageJson(spec.responseType, response, spec.surface)) ?? 'null';
    return reply.code(spec.successCode).type('application/json').send(spec.surface === 'runtime' ? `{"ok":true,"result":${result}}` : result);
  }

  /**
   * One call through the invoker (the core's whole chain) for a request: request id and
   * public base URL as metadata, cancelled when the client goes away or at shutdown.
   * Answers the core's response message, or what `then` makes of it (the route's written
   * answer: one promise per call, not one more on top).
   */
  function invokeCore(
    spec: RouteSpec, message: unknown, extra: Record<string, string>, request: FastifyRequest, reply: FastifyReply,
  ): Promise<Record<string, unknown>>;
  function invokeCore<T>(
    spec: RouteSpec, message: unknown, extra: Record<string, string>, request: FastifyRequest, reply: FastifyReply,
    then: (spec: RouteSpec, reply: FastifyReply, response: Record<string, unknown>) => T,
  ): Promise<T>;
  function invokeCore(
    spec: RouteSpec, message: unknown, extra: Record<string, string>, request: FastifyRequest, reply: FastifyReply,
    then?: (spec: RouteSpec, reply: FastifyReply, response: Record<string, unknown>) => unknown,
  ): Promise<unknown> {
    // Every call's metadata is built here: native and console routes (handle) and the
    // Telegram surface (its `call`, with `Bearer <the path's token>`). A credential that is
    // not printable ASCII is a 401 whatever the role, and its value is never repeated.
    const authorization = extra.authorization;
    if (authorization !== undefined && !PRINTABLE_ASCII.test(authorization)) {
      return Promise.reject(ApiError.unauthenticated('the credential must be printable ASCII: look for a stray character around it (a line break, a no-break space)'));
    }
    // Built by assignment, not spread from `extra`: V8 gave every spread copy a hidden
    // class (map) of its own, about 0.1 KiB more per call, held while a long poll waits.
    const metadata: Record<string, string> = {
      'x-request-id': String(request.id),
      // Where this request came in: the base of the file URLs the core hands out.
      [PUBLIC_BASE_URL_METADATA]: `${request.protocol}://${request.host}`,
    };
    for (const key in extra) metadata[key] = extra[key]!;
    const abort = new CallAbort();
    // The response stream closes early only when the client went away.
    const onClose = () => {
      if (!reply.raw.writableEnded) abort.abort(CLIENT_GONE);
    };
    // on, not once: 'close' comes once, and once() would wrap onClose (held while the call waits).
    reply.raw.on('close', onClose);
    // No async frame of its own: a long poll waits here by the thousand, each holding
    // only this promise and its two reactions. At the end of a shutdown's grace period, a
    // call still waiting (a long poll on a core that is not stopping) is answered 503
    // instead of having its connection cut: cancelInFlight rejects it (no listener or race
    // per call).
    return new Promise<unknown>((resolve, reject) => {
      const fail = (err: unknown, shutdown?: true) => {
        if (shutdown) abort.abort(SHUTDOWN);
        reply.raw.off('close', onClose);
        inFlight.delete(slot, fail);
        reject(err);
      };
      const slot = inFlight.add(fail);
      opts.invoker.invoke(spec, message, metadata, abort, logSinkOf(request)).then((response) => {
        reply.raw.off('close', onClose);
        inFlight.delete(slot, fail);
        if (!then) return resolve(response);
        try {
          resolve(then(spec, reply, response as Record<string, unknown>));
        } catch (err) {
          reject(err);
        }
      }, fail);
    });
  }

  return Object.assign(app, {
    cancelInFlight() {
      for (const fail of inFlight.values()) fail(CLOSING, true);
    },
  });
}
