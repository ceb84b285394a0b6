/** What every service method receives besides its request. */
import type { AccountPrincipal } from '../auth/account-jwt.js';

export interface BotPrincipal {
  kind: 'bot';
  botId: string;
  ownerId: string;
}

export interface InternalPrincipal {
  kind: 'internal';
}

export type Principal = AccountPrincipal | BotPrincipal | InternalPrincipal;

/** Metadata key in which the gateway tells the core the base URL a request came in on. */
export const PUBLIC_BASE_URL_METADATA = 'x-public-base-url';

/** Call metadata as plain lower-case keys (gRPC metadata or forwarded HTTP headers). */
export type CallMetadata = Record<string, string | undefined>;

export interface CallContext<P extends Principal = Principal> {
  principal: P;
  requestId: string;
  metadata: CallMetadata;
  /** Aborted when the caller goes away (client cancel, HTTP connection closed, shutdown). */
  signal: AbortSignal;
}
