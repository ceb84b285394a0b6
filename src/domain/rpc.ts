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

/** What every RPC implementation receives besides its request. */
export interface CallContext<P extends Principal = Principal> {
  principal: P;
  requestId: string;
  metadata: CallMetadata;
  /** Aborted when the caller goes away (client cancel, HTTP connection closed, shutdown). */
  signal: AbortSignal;
}

/** The implementation of one method: its request in, its whole response out. */
export type MethodImpl<M> = M extends {
  path: infer P extends RpcPath;
  requestDeserialize: (bytes: Buffer) => infer I;
  responseSerialize: (value: infer O) => Buffer;
}
  ? (request: I, ctx: CallContext<PrincipalByCredential[SettingsOf<P>['credential']]>) => Promise<O>
  : never;

/** A complete implementation of a generated service: one method per RPC. */
export type ServiceImpl<S> = { [K in keyof S]: MethodImpl<S[K]> };

export type ConsoleRpc = ServiceImpl<ConsoleServiceService>;
export type AdminRpc = ServiceImpl<AdminServiceService>;
export type RuntimeRpc = ServiceImpl<RuntimeServiceService>;
export type InternalRpc = ServiceImpl<InternalServiceService>;
