/**
 * Account JWTs, verified with jose. One verifier per configuration: an HS256
 * secret, a PEM public key (RS256, ES256/384/512 or EdDSA, chosen from the key
 * itself) or a JWKS URL. `exp` and `sub` are required, and every claim read is
 * type-checked (a malformed one refuses the token, before any handler runs);
 * `alg: none` and algorithm confusion are refused because each verifier accepts
 * only its key's algorithms.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRemoteJWKSet, importSPKI, jwtVerify, SignJWT, errors as joseErrors, type JWTVerifyGetKey } from 'jose';
import { ApiError } from '../errors.js';

export interface AccountPrincipal {
  kind: 'account';
  accountId: string;
  roles: string[];
  /** When the credential stops being valid (epoch ms). */
  expiresAt: number;
}

export interface JwtSettings {
  issuer?: string;
  audience?: string;
}

export type JwtKeySource =
  | { kind: 'secret'; secret: string }
  | { kind: 'public-key'; pem: string }
  | { kind: 'jwks'; url: string };

export interface AccountJwtVerifier {
  verify(jwt: string): Promise<AccountPrincipal>;
}

const ASYMMETRIC_ALGS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

/** The one JWS algorithm a PEM public key is meant for. */
function algorithmOf(pem: string): string {
  const key = crypto.createPublicKey(pem);
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return 'RS256';
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      return curve === 'secp384r1' ? 'ES384' : curve === 'secp521r1' ? 'ES512' : 'ES256';
    }
    case 'ed25519':
      return 'EdDSA';
    default:
      throw new Error(`unsupported public key type ${key.asymmetricKeyType}`);
  }
}

/** A PEM given inline, or a path to a PEM file. */
function readPem(value: string): string {
  return value.includes('-----BEGIN') ? value.replace(/\\n/g, '\n') : fs.readFileSync(value, 'utf8');
}

/** Longest account id: the owner and account columns hold 191 characters. */
export const MAX_ACCOUNT_ID_LENGTH = 191;

// C0, DEL and C1 controls, and unpaired surrogates (which no database stores as sent).
// eslint-disable-next-line no-control-regex
const BAD_ACCOUNT_ID = /[\u0000-\u001f\u007f-\u009f\p{Cs}]/u;

/**
 * The account id a `sub` claim names: a string of 1 to 191 characters, without
 * control characters or surrounding whitespace, so that two different claims are
 * never one account (`1` and `"1"`, or "alice" and "alice " under MySQL's
 * trailing-space padding). Anything else is not a credential.
 */
function accountIdOf(sub: unknown): string {
  const refuse = (why: string) => ApiError.unauthenticated(`invalid account token: sub ${why}`);
  if (typeof sub !== 'string' || sub === '') throw refuse('must be a non-empty string');
  if ([...sub].length > MAX_ACCOUNT_ID_LENGTH) throw refuse(`must be at most ${MAX_ACCOUNT_ID_LENGTH} characters`);
  if (BAD_ACCOUNT_ID.test(sub)) throw refuse('must not contain control characters or unpaired surrogates');
  if (sub.trim() !== sub) throw refuse('must not begin or end with whitespace');
  return sub;
}

export async function createAccountJwtVerifier(source: JwtKeySource, settings: JwtSettings): Promise<AccountJwtVerifier> {
  let key: Uint8Array | CryptoKey | JWTVerifyGetKey;
  let algorithms: string[];
  if (source.kind === 'secret') {
    // Imported once: handing jose raw bytes would re-import the key on every verify.
    key = await crypto.subtle.importKey('raw', new TextEncoder().encode(source.secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
    algorithms = ['HS256'];
  } else if (source.kind === 'public-key') {
    const pem = readPem(source.pem);
    const alg = algorithmOf(pem);
    key = await importSPKI(pem, alg);
    algorithms = [alg];
  } else {
    key = createRemoteJWKSet(new URL(source.url));
    algorithms = ASYMMETRIC_ALGS;
  }

  // Verified tokens are remembered (bounded, at most a minute and never past exp):
  // a console client sends the same JWT on every call, and HMAC or signature
  // verification is most of an authenticated request's cost.
  const cache = new Map<string, { principal: AccountPrincipal; until: number }>();
  const CACHE_MAX = 10_000;
  const CACHE_MS = 60_000;

  return {
    async verify(jwt) {
      const hit = cache.get(jwt);
      if (hit) {
        if (hit.until > Date.now()) return hit.principal;
        cache.delete(jwt);
      }
      const principal = await verifyUncached(jwt);
      if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
      cache.set(jwt, { principal, until: Math.min(Date.now() + CACHE_MS, principal.expiresAt) });
      return principal;
    },
  };

  async function verifyUncached(jwt: string): Promise<AccountPrincipal & { expiresAt: number }> {
    try {
      const { payload } = await jwtVerify(jwt, key as unknown as CryptoKey, {
        algorithms,
        issuer: settings.issuer,
        audience: settings.audience,
        requiredClaims: ['exp', 'sub'],
      });
      // jose has checked that exp, nbf and iat are numbers; sub and roles are ours to check.
      const accountId = accountIdOf(payload.sub);
      if (payload.roles !== undefined && !Array.isArray(payload.roles)) {
        throw ApiError.unauthenticated('invalid account token: roles must be an array');
      }
      const roles = ((payload.roles ?? []) as unknown[]).filter((r): r is string => typeof r === 'string');
      return { kind: 'account', accountId, roles, expiresAt: payload.exp! * 1000 };
    } catch (err) {
      if (err instanceof ApiError) throw err;
      if (err instanceof joseErrors.JWTExpired) throw ApiError.unauthenticated('account token expired');
      if (err instanceof joseErrors.JOSEError) throw ApiError.unauthenticated('invalid account token');
      throw err;
    }
  }
}

export interface MintOptions extends JwtSettings {
  sub: string;
  roles?: string[];
  /** Lifetime, e.g. "30d" (jose's time span syntax). */
  expiresIn?: string;
}

/** Signs an HS256 account JWT: for the embedded default's local secret and for tests. */
export async function mintAccountJwt(secret: string, opts: MintOptions): Promise<string> {
  let jwt = new SignJWT({ roles: opts.roles ?? [] })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(opts.sub)
    .setIssuedAt()
    .setExpirationTime(opts.expiresIn ?? '30d');
  if (opts.issuer) jwt = jwt.setIssuer(opts.issuer);
  if (opts.audience) jwt = jwt.setAudience(opts.audience);
  return jwt.sign(new TextEncoder().encode(secret));
}
