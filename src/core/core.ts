/**
 * The transport-agnostic core: every RPC is a plain async function behind one
 * interceptor chain (telemetry and logs → errors → auth → limits → handler). The
 * gRPC server and the in-process gateway invoker are both adapters over
 * `invoke`, so behaviour — limits included — cannot differ.
 */
import type { Logger } from 'pino';
import { ApiError, Code } from '../errors.js';
import { methodSettings } from '../gen/methods.js';
import type { ServiceImpl, UndecodableMessage } from '../domain/rpc.js';
import type { UsageRecorder } from '../domain/usage.js';
import { isStorageUnavailable } from '../storage/errors.js';
import type { Telemetry } from '../telemetry/metrics.js';
import { requestIdOf } from '../telemetry/request-id.js';
import type { Authenticator } from './authenticate.js';
import type { CallContext, CallMetadata, CallSignal, Principal } from './context.js';
import { methodNameOf, type Limiter } from './limits.js';

/** One unary RPC's implementation as the chain calls it: typed where it is bound (bindService), by path here. */
export type Handler = (request: unknown, ctx: CallContext) => Promise<unknown>;

/**
 * One streaming RPC's implementation as the chain calls it: its input (the request, or
 * for a client stream an async iterable of them) in, an async iterable of responses
 * (server and bidirectional streams) or one response (client streams) out.
 */
export interface StreamingHandler {
  streaming: 'client' | 'server' | 'bidi';
  call: (input: unknown, ctx: CallContext) => AsyncIterable<unknown> | Promise<unknown>;
}

/** What bindService makes of each method: a unary handler, or a streaming one tagged with which side streams. */
export type BoundMethod = Handler | StreamingHandler;

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

/**
 * Takes a call's `rpc` log fields in place of the core writing its own `rpc` line: the
 * in-process gateway adds them to its request's one `http` line. Answers false when it
 * can no longer take them (its line is already written): the core then writes its own.
 */
export type RpcLogSink = (fields: Record<string, unknown>) => boolean;

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
  const handlers = new Map(Object.entries(deps.handlers));
  const never = new AbortController().signal;
  // Per path, worked out once: the RPC name (GetMe) and the name bots call it by (getMe).
  const names = new Map(Object.keys(methodSettings).map((p) => [p, { rpc: methodNameOf(p), bot: botMethodName(methodNameOf(p)) }]));

  /** Anything thrown as the ApiError the caller gets, logged when it is the service's fault. */
  function failure(err: unknown, method: string, requestId: string): ApiError {
    const apiError = isStorageUnavailable(err) ? storageUnavailable(err) : ApiError.from(err);
    if (apiError.code === Code.INTERNAL || apiError.code === Code.UNKNOWN) {
      deps.logger.error({ err: apiError.internalCause ?? err, rpc: method, requestId }, 'call failed');
    } else if (apiError.internalCause && apiError.code === Code.UNAVAILABLE) {
      deps.logger.warn({ err: apiError.internalCause, rpc: method, requestId }, 'call failed: database unavailable');
    }
    return apiError;
  }

  /** Adds the caller's identity to a log line: `bot` or `account`. */
  function withCaller(line: Record<string, unknown>, principal: Principal | undefined) {
    if (principal?.kind === 'bot') line.bot = principal.botId;
    else if (principal?.kind === 'account') line.account = principal.accountId;
    return line;
  }

  /** One call (or one part of a stream) ended: counted, in the bot's usage, and one log line. */
  function record(
    path: string, requestId: string, principal: Principal | undefined, code: Code, ms: number, fields?: Record<string, unknown>, logSink?: RpcLogSink,
  ) {
    const name = names.get(path);
    const method = name?.rpc ?? 'unknown';
    const status = Code[code] ?? 'UNKNOWN';
    deps.telemetry?.rpc(method, status, ms / 1000);
    if (principal?.kind === 'bot') deps.usage?.call(principal.botId, name?.bot ?? method, status);
    if (!deps.logger.isLevelEnabled('info')) return;
    const line: Record<string, unknown> = { requestId, rpc: method, code: status, ms: Math.round(ms * 10) / 10 };
    if (fields) Object.assign(line, fields);
    withCaller(line, principal);
    if (logSink?.(line)) return;
    deps.logger.info(line, 'rpc');
  }

  async function* stream(path: string, input: unknown, metadata: CallMetadata, signal: CallSignal, connection?: string): AsyncGenerator<unknown> {
    const started = performance.now();
    const requestId = requestIdOf(metadata['x-request-id']);
    const method = names.get(path)?.rpc ?? 'unknown';
    let principal: Principal | undefined;
    let code = Code.OK;
    let sent = 0;
    try {
      const handler = handlers.get(path);
      const settings = methodSettings[path];
      if (!handler || typeof handler === 'function' || !settings) throw new ApiError(Code.UNIMPLEMENTED, `unknown streaming method ${path}`);
      if (input instanceof UndecodableRequest) {
        principal = await deps.authenticator.authenticate(settings.credential, metadata).catch(() => undefined);
        throw input.error;
      }
      principal = await deps.authenticator.authenticate(settings.credential, metadata);
      // A server stream is one request: limited as a call. Client streams' parts decide their own.
      if (principal.kind === 'bot' && deps.limiter && handler.streaming === 'server') await deps.limiter.check(principal.botId, path, input);
      const caller = principal;
      const part = async <T>(fields: Record<string, unknown>, fn: () => Promise<T>): Promise<T> => {
        const t0 = performance.now();
        let partCode = Code.OK;
        try {
          return await fn();
        } catch (err) {
          const apiError = failure(err, method, requestId);
          partCode = apiError.code;
          throw apiError;
        } finally {
          record(path, requestId, caller, partCode, performance.now() - t0, fields);
        }
      };
      const out = handler.call(input, { principal, requestId, metadata, signal, connection, part });
      if (Symbol.asyncIterator in (out as object)) {
        for await (const response of out as AsyncIterable<unknown>) {
          sent++;
          yield response;
        }
      } else {
        const response = await out;
        sent++;
        yield response;
      }
    } catch (err) {
      const apiError = failure(err, method, requestId);
      code = apiError.code;
      throw apiError;
    } finally {
      if (signal.aborted && signal.reason instanceof ApiError) code = signal.reason.code;
      const ms = performance.now() - started;
      const status = Code[code] ?? 'UNKNOWN';
      deps.telemetry?.stream(method, status, ms / 1000);
      if (deps.logger.isLevelEnabled('info')) {
        deps.logger.info(withCaller({ requestId, rpc: method, code: status, ms: Math.round(ms * 10) / 10, sent }, principal), 'rpc stream');
      }
    }
  }

  return {
    paths: () => [...handlers.keys()],

    stream: (path, input, metadata, signal = never, connection) => stream(path, input, metadata, signal, connection),

    async invoke(path, request, metadata, signal = never, logSink) {
      const started = performance.now();
      const requestId = requestIdOf(metadata['x-request-id']);
      const method = names.get(path)?.rpc ?? 'unknown';
      let principal: Principal | undefined;
      let code = Code.OK;
      try {
        const handler = handlers.get(path);
        const settings = methodSettings[path];
        if (typeof handler !== 'function' || !settings) throw new ApiError(Code.UNIMPLEMENTED, `unknown method ${path}`);
        if (request instanceof UndecodableRequest) {
          // Refused whatever the credential (nothing of it was read), but still
          // attributed to the caller when the credential holds: log line, bot usage.
          principal = await deps.authenticator.authenticate(settings.credential, metadata).catch(() => undefined);
          throw request.error;
        }
        principal = await deps.authenticator.authenticate(settings.credential, metadata);
        if (principal.kind === 'bot' && deps.limiter) await deps.limiter.check(principal.botId, path, request);
        return await handler(request, { principal, requestId, metadata, signal });
      } catch (err) {
        const apiError = failure(err, method, requestId);
        code = apiError.code;
        throw apiError;
      } finally {
        // The caller left first (its transport aborted with the status it answered): that is the outcome.
        if (signal.aborted && signal.reason instanceof ApiError) code = signal.reason.code;
        record(path, requestId, principal, code, performance.now() - started, undefined, logSink);
      }
    },
  };
}
