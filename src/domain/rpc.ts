/**
 * What an RPC implementation is given and must answer, derived from the generated
 * service definitions (connect-es's ServiceImpl<T>, over ts-proto's grpc-js
 * definitions): each method takes its generated request type and the call's
 * context, and resolves to its full generated response message. The principal in
 * the context follows from the credential the service declares in its proto
 * (botplatform.v1.service_settings), so a proto change is a compile error where
 * the method is implemented.
 */
import type { AccountPrincipal } from '../auth/account-jwt.js';
import type { ApiError } from '../errors.js';
import type { AdminServiceService } from '../gen/botplatform/v1/admin_service.js';
import type { ConsoleServiceService } from '../gen/botplatform/v1/console_service.js';
import type { InternalServiceService } from '../gen/botplatform/v1/internal_service.js';
import type { RuntimeServiceService } from '../gen/botplatform/v1/runtime_service.js';
import type { Credential, RpcPath, SettingsOf } from '../gen/methods.js';

export interface BotPrincipal {
  kind: 'bot';
  botId: string;
  ownerId: string;
  /**
   * getMe's fields as the auth step read them with the token (kept with the principal
   * for at most AUTH_CACHE_TTL; a profile change drops it like a credential change).
   * Absent when the principal was not proved by a bot lookup.
   */
  profile?: BotProfileSnapshot;
}

/** The bot's public identity, as getMe answers it. */
export interface BotProfileSnapshot {
  name: string;
  username: string;
  supportsInlineQueries: boolean;
  canJoinGroups: boolean;
}

export interface InternalPrincipal {
  kind: 'internal';
}

export type Principal = AccountPrincipal | BotPrincipal | InternalPrincipal;

/** The principal the core's auth interceptor proves for each credential. */
export interface PrincipalByCredential extends Record<Credential, Principal> {
  account_jwt: AccountPrincipal;
  admin_jwt: AccountPrincipal;
  bot_token: BotPrincipal;
  internal: InternalPrincipal;
}

/** Metadata key in which the gateway tells the core the base URL a request came in on. */
export const PUBLIC_BASE_URL_METADATA = 'x-public-base-url';
/**
 * Call metadata the Telegram-compatible surface sets on its calls. A webhook set with it
 * also gets Telegram's secret-token header on its deliveries (what Telegram frameworks
 * check); one set any other way is signed only. It can only ask for the caller's own
 * webhook to carry the caller's own secret, so it needs no credential of its own.
 */
export const SURFACE_METADATA = 'x-botplatform-surface';

/** Call metadata as plain lower-case keys (gRPC metadata or forwarded HTTP headers). */
export type CallMetadata = Record<string, string | undefined>;

/**
 * How an implementation learns that its caller went away: the part of AbortSignal it
 * uses (an AbortSignal is one). The transports pass a lighter one per call (CallAbort,
 * below): a waiting long poll holds it for its whole wait.
 */
export interface CallSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: AbortListener, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: AbortListener): void;
}

/** A function, or (as EventTarget takes it) an object whose handleEvent is called: a record waiting needs no closure to listen. */
export type AbortListener = (() => void) | { handleEvent(): void };

/**
 * A call's abort signal as its transport makes it: aborted when the caller goes away (or
 * at shutdown). The part of AbortSignal the core uses (CallSignal), without an
 * EventTarget per call: an AbortController costs microseconds to make, and its signal
 * with one listener holds about 0.9 KB for as long as the call waits (every waiting long
 * poll). The gateway makes one per request, the gRPC server one per unary call.
 */
export class CallAbort implements CallSignal {
  aborted = false;
  reason: unknown = undefined;
  private listeners: AbortListener[] | null = null;

  addEventListener(_type: 'abort', listener: AbortListener): void {
    // As AbortSignal: a listener added once aborted is never called.
    if (!this.aborted) (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: AbortListener): void {
    const i = this.listeners?.indexOf(listener) ?? -1;
    if (i >= 0) this.listeners!.splice(i, 1);
  }

  /** Aborts once (listeners called once each, then dropped); later calls do nothing. */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = null;
    if (listeners) for (const listener of listeners) typeof listener === 'function' ? listener() : listener.handleEvent();
  }
}

/** What every RPC implementation receives besides its request. */
export interface CallContext<P extends Principal = Principal> {
  principal: P;
  requestId: string;
  metadata: CallMetadata;
  /** Aborted when the caller goes away (client cancel, HTTP connection closed, shutdown). */
  signal: CallSignal;
  /**
   * Streaming calls only: the connection the call came on, as its transport names it
   * (gRPC: the peer's address and port, one per open connection), for limits per
   * connection. Absent when the transport does not say.
   */
  connection?: string;
  /**
   * Streaming calls only: runs one unit of the stream (a batch, say) as the chain runs a
   * call, so each is accounted like a unary call of the method: an error becomes the
   * ApiError a call would answer (the database unreachable: UNAVAILABLE with a retry
   * hint), counted in the RPC metrics and logged on one "rpc" line with `fields`.
   * Resolves with fn's result or rejects with that ApiError.
   */
  part?: <T>(fields: Record<string, unknown>, fn: () => Promise<T>) => Promise<T>;
}

/** The context a method of path P is given: the principal its credential proves. */
type ContextOf<P extends RpcPath> = CallContext<PrincipalByCredential[SettingsOf<P>['credential']]>;

/**
 * The implementation of one method, by the streaming flags of its generated definition:
 * unary, request in and whole response out; server streaming, request in and responses
 * out as an async iterable (each one is sent as it is yielded, and yielding waits while
 * the caller is not reading: flow control); client streaming, requests in as an async
 * iterable, one response out; bidirectional, requests in and responses out, both async
 * iterables. A request that did not decode reaches a streaming method as an
 * UndecodableMessage in its place.
 */
export type MethodImpl<M> = M extends {
  path: infer P extends RpcPath;
  requestStream: infer RS extends boolean;
  responseStream: infer SS extends boolean;
  requestDeserialize: (bytes: Buffer) => infer I;
  responseSerialize: (value: infer O) => Buffer;
}
  ? RS extends true
    ? SS extends true
      ? (requests: AsyncIterable<I | UndecodableMessage>, ctx: ContextOf<P>) => AsyncIterable<O>
      : (requests: AsyncIterable<I | UndecodableMessage>, ctx: ContextOf<P>) => Promise<O>
    : SS extends true
      ? (request: I, ctx: ContextOf<P>) => AsyncIterable<O>
      : (request: I, ctx: ContextOf<P>) => Promise<O>
  : never;

/**
 * A message of a client stream that did not decode: `error` is the INVALID_ARGUMENT
 * naming the field (as a unary call would have answered), `fields` the top-level
 * varint fields that could still be read by number (e.g. a batch's sequence).
 */
export interface UndecodableMessage {
  readonly undecodable: true;
  readonly error: ApiError;
  readonly fields: ReadonlyMap<number, bigint>;
}

/** A complete implementation of a generated service: one method per RPC. */
export type ServiceImpl<S> = { [K in keyof S]: MethodImpl<S[K]> };

export type ConsoleRpc = ServiceImpl<ConsoleServiceService>;
export type AdminRpc = ServiceImpl<AdminServiceService>;
export type RuntimeRpc = ServiceImpl<RuntimeServiceService>;
export type InternalRpc = ServiceImpl<InternalServiceService>;
