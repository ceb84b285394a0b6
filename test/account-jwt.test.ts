/**
 * Account JWT verification for each configuration the contract names: HS256
 * secret, PEM public keys (RSA, EC, Ed25519) and a JWKS URL served over real HTTP;
 * issuer and audience checks; alg none and algorithm confusion refused.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccountJwtVerifier, mintAccountJwt } from '../src/auth/account-jwt.js';
import { ApiError, Code } from '../src/errors.js';

const SECRET = 'a-very-long-test-secret-of-at-least-32-chars';

async function refused(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe(Code.UNAUTHENTICATED);
    return err as ApiError;
  }
  throw new Error('expected the JWT to be refused');
}

const sign = (key: CryptoKey | Uint8Array, alg: string, claims: Record<string, unknown> = {}, kid?: string) =>
  new SignJWT(claims).setProtectedHeader({ alg, ...(kid ? { kid } : {}) }).setSubject('acct-1').setExpirationTime('5m').sign(key);

describe('HS256 secret', () => {
  it('accepts a token it signed, with the roles claim', async () => {
    const v = await createAccountJwtVerifier({ kind: 'secret', secret: SECRET }, {});
    const jwt = await mintAccountJwt(SECRET, { sub: 'acct-1', roles: ['admin', 42 as never] });
    expect(await v.verify(jwt)).toMatchObject({ kind: 'account', accountId: 'acct-1', roles: ['admin'] });
  });

  it('checks issuer and audience when configured', async () => {
    const v = await createAccountJwtVerifier({ kind: 'secret', secret: SECRET }, { issuer: 'https://id.example', audience: 'botplatform' });
    expect((await v.verify(await mintAccountJwt(SECRET, { sub: 'a', issuer: 'https://id.example', audience: 'botplatform' }))).accountId).toBe('a');
    await refused(v.verify(await mintAccountJwt(SECRET, { sub: 'a', issuer: 'https://evil.example', audience: 'botplatform' })));
    await refused(v.verify(await mintAccountJwt(SECRET, { sub: 'a', issuer: 'https://id.example', audience: 'other' })));
    await refused(v.verify(await mintAccountJwt(SECRET, { sub: 'a' })));
  });

  it('remembers a verified token no longer than its exp', async () => {
    const v = await createAccountJwtVerifier({ kind: 'secret', secret: SECRET }, {});
    const jwt = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('short-lived')
      .setExpirationTime(Math.floor(Date.now() / 1000) + 1).sign(new TextEncoder().encode(SECRET));
    expect((await v.verify(jwt)).accountId).toBe('short-lived');
    expect((await v.verify(jwt)).accountId).toBe('short-lived');
    await new Promise((r) => setTimeout(r, 1100 - (Date.now() % 1000) + 1000));
    await refused(v.verify(jwt));
  });

  it('refuses alg none, a missing sub, and an expired token (saying so)', async () => {
    const v = await createAccountJwtVerifier({ kind: 'secret', secret: SECRET }, {});
    const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    await refused(v.verify(`${enc({ alg: 'none' })}.${enc({ sub: 'a', exp: 2e9 })}.`));
    const noSub = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(new TextEncoder().encode(SECRET));
    await refused(v.verify(noSub));
    const expired = await refused(v.verify(await mintAccountJwt(SECRET, { sub: 'a', expiresIn: '-1m' })));
    expect(expired.message).toBe('account token expired');
  });
});

describe('claim types', () => {
  const key = new TextEncoder().encode(SECRET);
  const signed = (claims: Record<string, unknown>) => new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(key);
  const exp = () => Math.floor(Date.now() / 1000) + 300;

  it.each([
    ['an array', ['a']], ['true', true], ['a number', 1], ['empty', ''], ['an object', {}], ['null', null],
    ['blank', '   '], ['padded', ' alice'], ['with a NUL', 'a\u0000b'], ['with a newline', 'a\nb'], ['with a C1 control', 'a\u0085b'],
    ['a lone surrogate', 'a\ud800'], ['longer than 191 characters', 'a'.repeat(192)],
  ])('refuses a sub that is %s', async (_what, sub) => {
    const v = await createAccountJwtVerifier({ kind: 'secret', secret: SECRET }, {});
    const err = await refused(v.verify(await signed({ sub, exp: exp() })));
    expect(err.message).toContain('sub');
  });

  it('accepts any other string sub up to 191 characters, as itself', async () => {
    const v = await createAccountJwtVerifier({ kind: 'secret', secret: SECRET }, {});
    for (const sub of ['1', 'a'.repeat(191), '🤖'.repeat(191), 'auth0|64f1 c2', 'Alice']) {
      expect((await v.verify(await signed({ sub, exp: exp() }))).accountId).toBe(sub);
    }
  });

  it('refuses exp, nbf or iat that are not numbers, and a roles claim that is not an array', async () => {
    const v = await createAccountJwtVerifier({ kind: 'secret', secret: SECRET }, {});
    await refused(v.verify(await signed({ sub: 'a', exp: String(exp()) })));
    await refused(v.verify(await signed({ sub: 'a', exp: exp(), nbf: '0' })));
    await refused(v.verify(await signed({ sub: 'a', exp: exp(), iat: '0' })));
    await refused(v.verify(await signed({ sub: 'a', exp: exp(), roles: 'admin' })));
    await refused(v.verify(await signed({ sub: 'a', exp: exp(), roles: { admin: true } })));
    expect((await v.verify(await signed({ sub: 'a', exp: exp(), roles: ['admin', 7] }))).roles).toEqual(['admin']);
  });
});

describe('PEM public keys', () => {
  it.each([
    ['RS256', { modulusLength: 2048 }],
    ['ES256', {}],
    ['EdDSA', {}],
  ] as const)('verifies %s with the algorithm taken from the key', async (alg, opts) => {
    const { publicKey, privateKey } = await generateKeyPair(alg, { ...opts, extractable: true });
    const pem = crypto.KeyObject.from(publicKey).export({ type: 'spki', format: 'pem' }) as string;
    const v = await createAccountJwtVerifier({ kind: 'public-key', pem }, {});
    expect((await v.verify(await sign(privateKey, alg))).accountId).toBe('acct-1');
  });

  it('refuses algorithm confusion: an HS256 token keyed with the public key PEM', async () => {
    const { publicKey } = await generateKeyPair('RS256', { extractable: true });
    const pem = crypto.KeyObject.from(publicKey).export({ type: 'spki', format: 'pem' }) as string;
    const v = await createAccountJwtVerifier({ kind: 'public-key', pem }, {});
    await refused(v.verify(await sign(new TextEncoder().encode(pem), 'HS256')));
  });
});

describe('JWKS URL', () => {
  let server: http.Server;
  let url: string;
  let privateKey: CryptoKey;

  beforeAll(async () => {
    const pair = await generateKeyPair('ES256', { extractable: true });
    privateKey = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
    server = http.createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('verifies a token signed by a key the JWKS publishes, and refuses an unknown key', async () => {
    const v = await createAccountJwtVerifier({ kind: 'jwks', url }, {});
    expect((await v.verify(await sign(privateKey, 'ES256', { roles: ['admin'] }, 'k1'))).roles).toEqual(['admin']);
    const other = await generateKeyPair('ES256');
    await refused(v.verify(await sign(other.privateKey, 'ES256', {}, 'k1')));
    await refused(v.verify(await sign(new TextEncoder().encode(SECRET), 'HS256', {}, 'k1')));
  });
});
