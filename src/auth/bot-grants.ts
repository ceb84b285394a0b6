/**
 * Bot grants: a short-lived credential with which the platform itself calls the runtime
 * API as one bot, on that bot's behalf. Its one use: a method a bot returns in its answer
 * to a webhook delivery (Telegram's "making requests when getting updates"), run by the
 * dispatcher as the bot, which holds no token of the bot (only their hashes are stored).
 *
 * "bgr1_" base64url(JSON {bot, exp}) "." base64url(HMAC-SHA256), under a key derived from
 * SECRET_KEY for this purpose alone, so every process sharing the key (the cores, a
 * dispatcher of its own) mints and checks them without a database read. A grant is made
 * for one delivery's answer, lives GRANT_TTL_MS, travels only between the platform's own
 * processes (in-process, or the dispatcher's gRPC call to a core) and, like any
 * credential, is never logged: it rides in `authorization`, which the logger redacts.
 */
import crypto from 'node:crypto';

export const GRANT_PREFIX = 'bgr1_';
/** How long a grant is good for: one delivery answer's calls. */
export const GRANT_TTL_MS = 60_000;

export interface BotGrants {
  /** A grant to call the runtime API as `botId` for GRANT_TTL_MS. */
  mint(botId: string): string;
  /** The bot a grant names, or why it is refused. */
  verify(grant: string): { botId: string } | { error: 'MALFORMED' | 'BAD_SIGNATURE' | 'EXPIRED' };
}

export const isBotGrant = (credential: string): boolean => credential.startsWith(GRANT_PREFIX);

/** `secretKey`: SECRET_KEY as configured (base64 of 32 bytes). */
export function createBotGrants(secretKey: string, now: () => number = Date.now): BotGrants {
  const key = Buffer.from(crypto.hkdfSync('sha256', Buffer.from(secretKey, 'base64'), Buffer.alloc(0), 'botplatform bot grants v1', 32));
  const mac = (data: string) => crypto.createHmac('sha256', key).update(data).digest();
  return {
    mint(botId) {
      const body = Buffer.from(JSON.stringify({ bot: botId, exp: now() + GRANT_TTL_MS })).toString('base64url');
      return `${GRANT_PREFIX}${body}.${mac(body).toString('base64url')}`;
    },
    verify(grant) {
      if (!isBotGrant(grant)) return { error: 'MALFORMED' };
      const [body, sig, extra] = grant.slice(GRANT_PREFIX.length).split('.');
      if (!body || !sig || extra !== undefined) return { error: 'MALFORMED' };
      const given = Buffer.from(sig, 'base64url');
      const expected = mac(body);
      if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) return { error: 'BAD_SIGNATURE' };
      let claims: { bot?: unknown; exp?: unknown };
      try {
        claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
      } catch {
        return { error: 'MALFORMED' };
      }
      if (typeof claims.bot !== 'string' || typeof claims.exp !== 'number') return { error: 'MALFORMED' };
      if (!(claims.exp > now())) return { error: 'EXPIRED' };
      return { botId: claims.bot };
    },
  };
}
