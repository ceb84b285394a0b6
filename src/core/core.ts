/**
 * The transport-agnostic core: every RPC is a plain async function behind one
 * interceptor chain (errors → auth → handler). The gRPC server and the in-process
 * gateway invoker are both adapters over `invoke`, so behaviour cannot differ.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import { ApiError, Code } from '../errors.js';
import { methodSettings } from '../gen/methods.js';
import type { Authenticator } from './authenticate.js';
import type { CallContext, CallMetadata, Principal } from './context.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Handler = (request: any, ctx: CallContext<any>) => Promise<unknown>;

export interface Core {
  /** Runs one call through the chain. Rejects only with ApiError. */
  invoke(path: string, request: unknown, metadata: CallMetadata, signal?: AbortSignal): Promise<unknown>;
  /** The RPC paths that have a handler. */
  paths(): string[];
}

export interface CoreDeps {
  authenticator: Authenticator;
  handlers: Record<string, Handler>;
  logger: Logger;
}

export function createCore(deps: CoreDeps): Core {
  for (const path of Object.keys(deps.handlers)) {
    if (!methodSettings[path]) throw new Error(`handler for unknown RPC ${path}`);
  }
  const never = new AbortController().signal;

  return {
    paths: () => Object.keys(deps.handlers),

    async invoke(path, request, metadata, signal = never) {
      const requestId = metadata['x-request-id'] || crypto.randomUUID();
      try {
        const handler = deps.handlers[path];
        const settings = methodSettings[path];
        if (!handler || !settings) throw new ApiError(Code.UNIMPLEMENTED, `unknown method ${path}`);
        const principal: Principal = await deps.authenticator.authenticate(settings.credential, metadata);
        return await handler(request, { principal, requestId, metadata, signal });
      } catch (err) {
        const apiError = ApiError.from(err);
        if (apiError.code === Code.INTERNAL || apiError.code === Code.UNKNOWN) {
          deps.logger.error({ err: apiError.internalCause ?? err, rpc: path, requestId }, 'call failed');
        }
        throw apiError;
      }
    },
  };
}
