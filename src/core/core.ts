/**
 * The transport-agnostic core: every RPC is a plain async function behind one
 * interceptor chain (telemetry and logs → errors → auth → limits → handler). The
 * gRPC server and the in-process gateway invoker are both adapters over
 * `invoke`, so behaviour — limits included — cannot differ.
 */
import type { Logger } from 'pino';
import { ApiError, Code } from '../errors.js';
import { methodSettings } from '../gen/methods.js';
import type { ServiceImpl } from '../domain/rpc.js';
import type { UsageRecorder } from '../domain/usage.js';
import { isStorageUnavailable } from '../storage/errors.js';
import type { Telemetry } from '../telemetry/metrics.js';
import { requestIdOf } from '../telemetry/request-id.js';
import type { Authenticator } from './authenticate.js';
import type { CallContext, CallMetadata, Principal } from './context.js';
import { methodNameOf, type Limiter } from './limits.js';

/** One RPC's implementation as the chain calls it: typed where it is bound (bindService), by path here. */
export type Handler = (request: unknown, ctx: CallContext) => Promise<unknown>;

/**
 * The handlers of a generated service definition, by RPC path. `impl` is checked
 * against the definition at compile time (every method, its request and response
 * types, the principal its credential proves); the chain then calls a handler only
 * with a request decoded by that definition and that principal.
 */
export function bindService<S extends Record<string, { path: string }>>(definition: S, impl: ServiceImpl<S>): Record<string, Handler> {
  const table: Record<string, Handler> = {};
  for (const key of Object.keys(definition) as (keyof S & string)[]) {
    const method = impl[key] as unknown as Handler | undefined;
    if (typeof method === 'function') table[definition[key]!.path] = method.bind(impl);
  }
  return table;
}

/**
 * What a transport passes in place of a request it could not decode, so that the
 * chain still answers the call (with `error`, INVALID_ARGUMENT naming the field)
 * and logs and counts it under its method like any other.
 */
export class UndecodableRequest {
  constructor(readonly error: ApiError) {}
}

export interface Core {
  /** Runs one call through the chain. Rejects only with ApiError. */
  invoke(path: string, request: unknown, metadata: CallMetadata, signal?: AbortSignal): Promise<unknown>;
  /** The RPC paths that have a handler. */
  paths(): string[];
}

export interface CoreDeps {
  authenticator: Pick<Authenticator, 'authenticate'>;
  /** A handler for every RPC of methodSettings, by path (createCore throws naming any missing). */
  handlers: Record<string, Handler>;
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
  const missing = Object.keys(methodSettings).filter((path) => typeof deps.handlers[path] !== 'function');
  if (missing.length > 0) throw new Error(`no handler for RPC ${missing.map((p) => p.slice(1)).join(', ')}`);
  const handlers = new Map(Object.entries(deps.handlers));
  const never = new AbortController().signal;
  // Per path, worked out once: the RPC name (GetMe) and the name bots call it by (getMe).
  const names = new Map(Object.keys(methodSettings).map((p) => [p, { rpc: methodNameOf(p), bot: botMethodName(methodNameOf(p)) }]));

  return {
    paths: () => [...handlers.keys()],

    async invoke(path, request, metadata, signal = never) {
      const started = performance.now();
      const requestId = requestIdOf(metadata['x-request-id']);
      const name = names.get(path);
      const method = name?.rpc ?? 'unknown';
      let principal: Principal | undefined;
      let code = Code.OK;
      try {
        const handler = handlers.get(path);
        const settings = methodSettings[path];
        if (!handler || !settings) throw new ApiError(Code.UNIMPLEMENTED, `unknown method ${path}`);
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
        const apiError = isStorageUnavailable(err) ? storageUnavailable(err) : ApiError.from(err);
        code = apiError.code;
        if (apiError.code === Code.INTERNAL || apiError.code === Code.UNKNOWN) {
          deps.logger.error({ err: apiError.internalCause ?? err, rpc: method, requestId }, 'call failed');
        } else if (apiError.internalCause && apiError.code === Code.UNAVAILABLE) {
          deps.logger.warn({ err: apiError.internalCause, rpc: method, requestId }, 'call failed: database unavailable');
        }
        throw apiError;
      } finally {
        // The caller left first (its transport aborted with the status it answered): that is the outcome.
        if (signal.aborted && signal.reason instanceof ApiError) code = signal.reason.code;
        const ms = performance.now() - started;
        const status = Code[code] ?? 'UNKNOWN';
        deps.telemetry?.rpc(method, status, ms / 1000);
        if (principal?.kind === 'bot') deps.usage?.call(principal.botId, name?.bot ?? method, status);
        if (deps.logger.isLevelEnabled('info')) {
          deps.logger.info({
            requestId, rpc: method, code: status, ms: Math.round(ms * 10) / 10,
            ...(principal?.kind === 'bot' ? { bot: principal.botId } : principal?.kind === 'account' ? { account: principal.accountId } : {}),
          }, 'rpc');
        }
      }
    },
  };
}
