/**
 * The auth interceptor's decision: which principal a call's credential proves,
 * for the credential its method requires. Console methods refuse bot tokens;
 * runtime methods refuse account JWTs; both answer UNAUTHENTICATED.
 */
import type { AccountJwtVerifier } from '../auth/account-jwt.js';
import { hashBotToken, hashesEqual, looksLikeBotToken } from '../auth/bot-token.js';
import { ApiError, Code } from '../errors.js';
import type { Credential } from '../gen/methods.js';
import type { BotsRepo } from '../storage/bots-repo.js';
import type { CallMetadata, Principal } from './context.js';

export interface AuthenticatorDeps {
  jwt: AccountJwtVerifier;
  bots: BotsRepo;
  /** The credential of the platform's internal services. */
  internalToken: string;
}

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
          if (!looksLikeBotToken(token)) {
            throw ApiError.unauthenticated(
              token.split('.').length === 3 ? 'account JWTs are not accepted on the runtime API' : 'invalid bot token',
            );
          }
          const hash = hashBotToken(token);
          const bot = await deps.bots.findByTokenHash(hash);
          if (!bot || !hashesEqual(bot.tokenHash, hash)) throw ApiError.unauthenticated('invalid or revoked bot token');
          if (bot.status !== 'active') throw new ApiError(Code.PERMISSION_DENIED, `bot is ${bot.status}`);
          return { kind: 'bot', botId: bot.id, ownerId: bot.ownerId };
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
  };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;
