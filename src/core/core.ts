/**
 * The transport-agnostic core: every RPC is a plain async function behind one
 * interceptor chain, one list of `(next) => (call) => …` steps that unary and
 * streaming calls both run (chain.ts): account (anything thrown becomes the caller's
 * ApiError; metrics, usage, the log line) → route → undecodable → auth → limits → the
 * handler. A stream's parts (CallContext.part) run the chain's first step as calls of
 * their own. The gRPC server and the in-process gateway invoker are
 * both adapters over `invoke` and `stream`, so behaviour — limits included — cannot
 * differ.
 */
import type { Logger } from 'pino';
import { ApiError, Code } from '../errors.js';
import { methodSettings } from '../gen/methods.js';
import type { ServiceImpl, UndecodableMessage } from '../domain/rpc.js';
import type { UsageRecorder } from '../domain/usage.js';
import { isStorageUnavailable } from '../storage/errors.js';
import type { Telemetry } from '../telemetry/metrics.js';
import { requestIdOf } from '../telemetry/request-id.js';
import { infoLine } from '../logger.js';
import type { Authenticator } from './authenticate.js';
import {
  compose, onOutcome, type BoundMethod, type Call, type Interceptor, type Method, type Next, type RpcLogSink, type StreamingHandler,
} from './chain.js';
import type { CallContext, CallMetadata, CallSignal, Principal } from './context.js';
import { methodNameOf, type Limiter } from './limits.js';

export type { BoundMethod, Handler, RpcLogSink, StreamingHandler } from './chain.js';

const streamingOf = (m: { requestStream?: boolean; responseStream?: boolean }): StreamingHandler['streaming'] | undefined =>
  m.requestStream && m.responseStream ? 'bidi' : m.requestStream ? 'client' : m.responseStream ? 'server' : undefined;

/**
 * The handlers of a generated service definition, by RPC path. `impl` is checked
 * against the definition at compile time (every method, its request and response
 * types, streaming or not, the principal its credential proves); the chain then calls
 * a handler only with a request decoded by that definition and that principal.
 */
export function bindService<S extends Record<string, { path: string; requestStream?: boolean; responseStream?: boolean }>>(
  definition: S, impl: ServiceImpl<S>,
): Record<string, BoundMethod> {
  const table: Record<string, BoundMethod> = {};
  for (const key of Object.keys(definition) as (keyof S & string)[]) {
    const method = impl[key] as unknown as ((input: unknown, ctx: CallContext) => never) | undefined;
    if (typeof method !== 'function') continue;
    const streaming = streamingOf(definition[key]!);
    table[definition[key]!.path] = streaming ? { streaming, call: method.bind(impl) } : method.bind(impl);
  }
  return table;
}

/**
 * What a transport passes in place of a request it could not decode, so that the
 * chain still answers the call (with `error`, INVALID_ARGUMENT naming the field)
 * and logs and counts it under its method like any other.
 */
export class UndecodableRequest implements UndecodableMessage {
  readonly undecodable = true as const;
  constructor(
    readonly error: ApiError,
    /** The top-level varint fields still readable by number (for a stream's messages: their sequence, say). */
    readonly fields: ReadonlyMap<number, bigint> = new Map(),
  ) {}
}

export interface Core {
  /**
   * Runs one unary call through the chain. Rejects only with ApiError. With `logSink`, the
   * call's `rpc` log fields go to it (before the call settles) instead of to their own line.
   */
  invoke(path: string, request: unknown, metadata: CallMetadata, signal?: CallSignal, logSink?: RpcLogSink): Promise<unknown>;
  /**
   * Runs one streaming call through the chain: `input` is the request (server streams) or
   * an async iterable of requests (client and bidirectional streams); the responses come
   * out as they are made (a client stream's one response too), each only when the
   * transport asks for it (its flow control). `connection` names the transport connection
   * the call came on (CallContext.connection). Throws only ApiError.
   */
  stream(path: string, input: unknown, metadata: CallMetadata, signal?: CallSignal, connection?: string): AsyncIterable<unknown>;
  /** The RPC paths that have a handler. */
  paths(): string[];
}

export interface CoreDeps {
  authenticator: Pick<Authenticator, 'authenticate'>;
  /**
   * A handler for every RPC of methodSettings, by path, streaming where the RPC streams
   * (createCore throws naming any missing or of the wrong kind).
   */
  handlers: Record<string, BoundMethod>;
  logger: Logger;
  /** Rate limits and quota of runtime calls; none: unlimited. */
  limiter?: Limiter;
  /** Per-bot usage for the console's metrics read. */
  usage?: UsageRecorder;
  telemetry?: Telemetry;
}

/** The database could not be reached or was too busy: retryable, with a hint, never INTERNAL. */
const storageUnavailable = (cause: unknown) =>
  new ApiError(Code.UNAVAILABLE, 'the service cannot reach its database; retry the call', { retryAfterSeconds: 1, cause });

/** "GetUpdates" → "getUpdates": runtime methods as bots call them. */
const botMethodName = (method: string) => method.charAt(0).toLowerCase() + method.slice(1);

export function createCore(deps: CoreDeps): Core {
  for (const path of Object.keys(deps.handlers)) {
    if (!methodSettings[path]) throw new Error(`handler for unknown RPC ${path}`);
  }
  const kindOf = (h: BoundMethod | undefined) => (typeof h === 'function' ? 'unary' : typeof h?.call === 'function' ? h.streaming : undefined);
  const missing = Object.keys(methodSettings).filter((path) => kindOf(deps.handlers[path]) === undefined);
  if (missing.length > 0) throw new Error(`no handler for RPC ${missing.map((p) => p.slice(1)).join(', ')}`);
  const mismatched = Object.entries(methodSettings).filter(([path, s]) => kindOf(deps.handlers[path]) !== (s.streaming ?? 'unary'));
  if (mismatched.length > 0) {
    throw new Error(`handler of the wrong kind for RPC ${mismatched.map(([p, s]) => `${p.slice(1)} (${s.streaming ?? 'unary'}, got ${kindOf(deps.handlers[p])})`).join(', ')}`);
  }
  const never = new AbortController().signal;
  // Per path, worked out once: the RPC's names (GetMe, and getMe as bots call it), credential, kind and handler.
  const methods = new Map<string, Method>(Object.entries(methodSettings).map(([path, s]) => {
    const rpc = methodNameOf(path);
    return [path, { rpc, bot: botMethodName(rpc), credential: s.credential, kind: s.streaming ?? 'unary', handler: deps.handlers[path]! }];
  }));

  /** Adds the caller's identity to a log line: `bot` or `account`. */
  function withCaller(line: Record<string, unknown>, principal: Principal | undefined) {
    if (principal?.kind === 'bot') line.bot = principal.botId;
    else if (principal?.kind === 'account') line.account = principal.accountId;
    return line;
  }

  /** A unary call (or a stream's part) ended: counted, in the bot's usage, and one `rpc` line. */
  function recordCall(call: Call, code: Code, ms: number) {
    const method = call.method?.rpc ?? 'unknown';
    const status = Code[code] ?? 'UNKNOWN';
    deps.telemetry?.rpc(method, status, ms / 1000);
    const principal = call.principal;
    if (principal?.kind === 'bot') deps.usage?.call(principal.botId, call.method?.bot ?? method, status);
    if (!deps.logger.isLevelEnabled('info')) return;
    const line: Record<string, unknown> = { requestId: call.requestId, rpc: method, code: status, ms: Math.round(ms * 10) / 10 };
    if (call.fields) Object.assign(line, call.fields);
    withCaller(line, principal);
    if (call.logSink?.takeRpcLog(line)) return;
    infoLine(deps.logger, line, 'rpc');
  }

  /** A stream ended: counted, and one `rpc stream` line with the responses it sent. */
  function recordStream(call: Call, code: Code, ms: number, sent: number) {
    const method = call.method?.rpc ?? 'unknown';
    const status = Code[code] ?? 'UNKNOWN';
    deps.telemetry?.stream(method, status, ms / 1000);
    if (!deps.logger.isLevelEnabled('info')) return;
    infoLine(deps.logger, withCaller({ requestId: call.requestId, rpc: method, code: status, ms: Math.round(ms * 10) / 10, sent }, call.principal), 'rpc stream');
  }

  /**
   * Every call's outcome, once it is over (a stream's: when its responses stop): anything
   * thrown, before the first response or after, becomes the ApiError the caller gets
   * (logged when it is the service's fault), and the call is counted, in the bot's usage
   * and in one log line. One step, so a call waits in one frame of it, not two.
   */
  const account: Interceptor = (next) => (call) => {
    call.started = performance.now();
    return onOutcome(next, call, accounted);
  };
  /** A call's outcome, accounted (one function for every call, not a closure each: a waiting call holds less). */
  function accounted(call: Call, failed: boolean, err: unknown, sent: number) {
    const apiError = failed ? toApiError(err, call) : undefined;
    let code = apiError ? apiError.code : Code.OK;
    // The caller left first (its transport aborted with the status it answered): that is the outcome.
    if (call.signal.aborted && call.signal.reason instanceof ApiError) code = call.signal.reason.code;
    const ms = performance.now() - call.started;
    if (call.streaming) recordStream(call, code, ms, sent);
    else recordCall(call, code, ms);
    return apiError;
  }

  function toApiError(err: unknown, call: Call): ApiError {
    const apiError = isStorageUnavailable(err) ? storageUnavailable(err) : ApiError.from(err);
    const rpc = call.method?.rpc ?? 'unknown';
    if (apiError.code === Code.INTERNAL || apiError.code === Code.UNKNOWN) {
      deps.logger.error({ err: apiError.internalCause ?? err, rpc, requestId: call.requestId }, 'call failed');
    } else if (apiError.internalCause && apiError.code === Code.UNAVAILABLE) {
      deps.logger.warn({ err: apiError.internalCause, rpc, requestId: call.requestId }, 'call failed: database unavailable');
    }
    return apiError;
  }

  /** A path with no RPC of the kind the transport called (unary or streaming): UNIMPLEMENTED, before any credential is read. */
  const route: Interceptor = (next) => (call) =>
    call.method && (call.method.kind !== 'unary') === call.streaming
      ? next(call)
      : Promise.reject(new ApiError(Code.UNIMPLEMENTED, `unknown ${call.streaming ? 'streaming ' : ''}method ${call.path}`));

  /**
   * A request the transport could not decode is refused whatever the credential (nothing
   * of it was read), but still attributed to the caller when the credential holds: log
   * line, bot usage.
   */
  const undecodable: Interceptor = (next) => (call) => {
    if (!(call.input instanceof UndecodableRequest)) return next(call);
    const { error } = call.input;
    return deps.authenticator.authenticate(call.method!.credential, call.metadata).then(
      (principal) => {
        call.principal = principal;
        throw error;
      },
      () => {
        throw error;
      },
    );
  };

  /**
   * The principal the method's credential proves, or UNAUTHENTICATED / PERMISSION_DENIED.
   * Chained, not an async function: a waiting call (a long poll) holds no suspended frame
   * here, only the adoption of the rest of the chain's promise.
   */
  const auth: Interceptor = (next) => (call) =>
    deps.authenticator.authenticate(call.method!.credential, call.metadata).then((principal) => {
      call.principal = principal;
      return next(call);
    });

  /** A bot's call of one request (unary, or a server stream's) is admitted as a call; a client stream's parts decide their own. */
  const limits = (limiter: Limiter): Interceptor => (next) => {
    // Chained, as auth: no suspended frame per waiting call.
    const admitted = (call: Call, botId: string) => limiter.check(botId, call.path, call.input).then(() => next(call));
    return (call) => {
      const principal = call.principal!;
      const kind = call.method!.kind;
      return principal.kind === 'bot' && (kind === 'unary' || kind === 'server') ? admitted(call, principal.botId) : next(call);
    };
  };

  /** The RPC's implementation: a unary call's response, or a stream's responses (a client stream's one, once made). */
  const handle: Next = (call) => {
    const { handler } = call.method!;
    const { principal, requestId, metadata, signal } = call;
    if (typeof handler === 'function') return handler(call.input, { principal: principal!, requestId, metadata, signal });
    const out = handler.call(call.input, { principal: principal!, requestId, metadata, signal, connection: call.connection, part: partOf(call) });
    return Symbol.asyncIterator in (out as object) ? Promise.resolve(out) : (out as Promise<unknown>).then(single);
  };

  /** The step that accounts for a call, which a stream's parts run too. */
  const run = compose([account, route, undecodable, auth, ...(deps.limiter ? [limits(deps.limiter)] : [])], handle);

  /**
   * CallContext.part of a stream: one part run through the accounting steps as a unary
   * call of the stream's method by its caller (its own `rpc` line with `fields`).
   */
  const partOf = (stream: Call) => <T>(fields: Record<string, unknown>, fn: () => Promise<T>): Promise<T> =>
    compose([account], fn)({
      path: stream.path, method: stream.method, streaming: false, input: undefined, metadata: stream.metadata, signal: never,
      requestId: stream.requestId, fields, principal: stream.principal, started: 0,
    }) as Promise<T>;

  return {
    paths: () => [...methods.keys()],

    stream: (path, input, metadata, signal = never, connection) => lazily(() => run({
      path, method: methods.get(path), streaming: true, input, metadata, signal, requestId: requestIdOf(metadata['x-request-id']), connection, principal: undefined, started: 0,
    })),

    invoke: (path, request, metadata, signal = never, logSink) => run({
      path, method: methods.get(path), streaming: false, input: request, metadata, signal, requestId: requestIdOf(metadata['x-request-id']), logSink, principal: undefined, started: 0,
    }),
  };
}

/** One response as a stream of one. */
async function* single(response: unknown): AsyncGenerator<unknown> {
  yield response;
}

/** A stream's responses, its call begun when the first is asked for (nothing runs for a stream never read). */
async function* lazily(start: () => Promise<unknown>): AsyncGenerator<unknown> {
  yield* (await start()) as AsyncIterable<unknown>;
}
