/**
 * The auth interceptor's decision: which principal a call's credential proves,
 * for the credential its method requires. Console methods refuse bot tokens;
 * runtime methods refuse account JWTs; both answer UNAUTHENTICATED.
 *
 * A verified bot principal is kept for a short while (AUTH_CACHE_TTL, 1 s) by the
 * hash of its token, so a bot's calls in a burst cost one lookup. A kept principal
 * is dropped at once when its bot's credentials change (`invalidateBot`: token
 * regenerated, bot suspended or revoked, here or, through the control topic, on
 * another instance), and none is used while the bus that carries those signals is
 * down (`cacheUsable`): then every call reads the database.
 *
 * The principal carries getMe's fields as read with it (`profile`), so getMe reads
 * nothing more; a profile change drops the kept principal the same way (the console
 * signals it as a credential change), so getMe shows the change at once on the
 * instance that made it and within the bus's delivery elsewhere (at most the TTL
 * when the signal is lost).
 */
import type { AccountJwtVerifier } from '../auth/account-jwt.js';
import { isBotGrant, type BotGrants } from '../auth/bot-grants.js';
import { hashBotToken, hashesEqual, looksLikeBotToken } from '../auth/bot-token.js';
import { ApiError, Code } from '../errors.js';
import type { Credential } from '../gen/methods.js';
import type { BotsRepo } from '../storage/bots-repo.js';
import type { BotPrincipal, CallMetadata, Principal } from './context.js';

export interface AuthenticatorDeps {
  jwt: AccountJwtVerifier;
  bots: BotsRepo;
  /** The credential of the platform's internal services. */
  internalToken: string;
  /**
   * Grants with which the platform calls the runtime API as a bot (a webhook answer's
   * method, src/auth/bot-grants.ts): taken where a bot token is, proving that bot while it is active.
   */
  grants?: BotGrants;
  /** How long a verified bot principal is kept, in ms; 0: never kept. */
  cacheTtlMs?: number;
  /** At most this many kept principals (the least recently used goes first). */
  cacheSize?: number;
  /** Whether kept principals may be used now: false while invalidations could be missed. */
  cacheUsable?: () => boolean;
  now?: () => number;
}

interface Kept {
  principal: BotPrincipal;
  expires: number;
  /** When it was last moved to the most recently used end. */
  touched: number;
}

/**
 * A kept principal used again within this long stays where it is in the least recently
 * used order: moving it (a Map delete and set) on every call of a busy bot costs more
 * than the order gains; it is at most this stale.
 */
const TOUCH_MS = 100;

/** The credential of "authorization: Bearer <credential>", or undefined. */
function bearer(metadata: CallMetadata): string | undefined {
  const header = metadata.authorization;
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw ApiError.unauthenticated('authorization must be "Bearer <credential>"');
  return m[1];
}

export function createAuthenticator(deps: AuthenticatorDeps) {
  // Compared as SHA-256 digests in constant time, like bot tokens.
  const internalHash = hashBotToken(deps.internalToken);
  const ttl = deps.cacheTtlMs ?? 0;
  const maxKept = deps.cacheSize ?? 10_000;
  const now = deps.now ?? Date.now;
  /** Verified bot principals by token hash, least recently used first. */
  const kept = new Map<string, Kept>();
  /** Bumped by every invalidation: a lookup that began before one does not keep its answer. */
  let epoch = 0;

  async function bot(token: string): Promise<BotPrincipal> {
    const hash = hashBotToken(token);
    const usable = ttl > 0 && (deps.cacheUsable?.() ?? true);
    if (usable) {
      const hit = kept.get(hash);
      if (hit) {
        const at = now();
        if (hit.expires > at) {
          if (at - hit.touched >= TOUCH_MS) {
            kept.delete(hash);
            kept.set(hash, hit);
            hit.touched = at;
          }
          return hit.principal;
        }
        kept.delete(hash);
      }
    }
    const started = epoch;
    const found = await deps.bots.findByTokenHash(hash);
    if (!found || !hashesEqual(found.tokenHash, hash)) throw ApiError.unauthenticated('invalid or revoked bot token');
    if (found.status !== 'active') throw new ApiError(Code.PERMISSION_DENIED, `bot is ${found.status}`);
    const principal: BotPrincipal = {
      kind: 'bot',
      botId: found.id,
      ownerId: found.ownerId,
      profile: { name: found.name, username: found.username, supportsInlineQueries: found.supportsInlineQueries, canJoinGroups: found.canJoinGroups },
    };
    if (usable && started === epoch) {
      if (kept.size >= maxKept) kept.delete(kept.keys().next().value!);
      const at = now();
      kept.set(hash, { principal, expires: at + ttl, touched: at });
      sweepLater();
    }
    return principal;
  }

  /**
   * Expired principals are dropped a TTL after they were kept, not only when looked up
   * again: 10,000 bots polling once each would otherwise stay kept (the map's bound) for
   * good. One timer, not holding the process open, while anything is kept; each round
   * drops from the least recently used end up to the first principal still valid (one
   * moved behind it expires, and goes, by the next round).
   */
  let sweeping: NodeJS.Timeout | undefined;
  function sweepLater() {
    if (sweeping) return;
    sweeping = setTimeout(sweep, ttl);
    sweeping.unref();
  }
  function sweep() {
    sweeping = undefined;
    const at = now();
    for (const [hash, k] of kept) {
      if (k.expires > at) break;
      kept.delete(hash);
    }
    if (kept.size > 0) sweepLater();
  }

  /** A bot grant's bot, read now (grants are rare and short-lived: nothing is kept). */
  async function granted(grant: string): Promise<BotPrincipal> {
    const verified = deps.grants?.verify(grant);
    if (!verified || !('botId' in verified)) throw ApiError.unauthenticated('invalid bot grant');
    const found = await deps.bots.findById(verified.botId);
    if (!found || found.tokenPrefix === null) throw ApiError.unauthenticated('invalid bot grant');
    if (found.status !== 'active') throw new ApiError(Code.PERMISSION_DENIED, `bot is ${found.status}`);
    return {
      kind: 'bot',
      botId: found.id,
      ownerId: found.ownerId,
      profile: { name: found.name, username: found.username, supportsInlineQueries: found.supportsInlineQueries, canJoinGroups: found.canJoinGroups },
    };
  }

  async function account(metadata: CallMetadata) {
    const credential = bearer(metadata);
    if (!credential) throw ApiError.unauthenticated('missing credential: send "Authorization: Bearer <account JWT>"');
    if (looksLikeBotToken(credential)) throw ApiError.unauthenticated('bot tokens are not accepted on the console API');
    return deps.jwt.verify(credential);
  }

  return {
    async authenticate(credential: Credential, metadata: CallMetadata): Promise<Principal> {
      switch (credential) {
        case 'account_jwt':
          return account(metadata);
        case 'admin_jwt': {
          const principal = await account(metadata);
          if (!principal.roles.includes('admin')) throw new ApiError(Code.PERMISSION_DENIED, 'the admin role is required');
          return principal;
        }
        case 'bot_token': {
          const token = bearer(metadata);
          if (!token) throw ApiError.unauthenticated('missing credential: send "Authorization: Bearer <bot token>"');
          if (isBotGrant(token)) return granted(token);
          if (!looksLikeBotToken(token)) {
            throw ApiError.unauthenticated(
              token.split('.').length === 3 ? 'account JWTs are not accepted on the runtime API' : 'invalid bot token',
            );
          }
          return bot(token);
        }
        case 'internal': {
          const credential = bearer(metadata);
          if (!credential) throw ApiError.unauthenticated('missing credential: send "Authorization: Bearer <internal API token>"');
          if (!hashesEqual(hashBotToken(credential), internalHash)) throw ApiError.unauthenticated('invalid internal credential');
          return { kind: 'internal' };
        }
        default:
          throw ApiError.unauthenticated('this method is not callable with the given credential');
      }
    },

    /** The bot's credentials or profile changed (token regenerated, bot suspended or revoked, profile edited): forget what was kept of it. */
    invalidateBot(botId: string) {
      epoch++;
      for (const [hash, k] of kept) if (k.principal.botId === botId) kept.delete(hash);
    },
  };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;
