/**
 * Signed, expiring tokens for the upload and download URLs: the core signs what a
 * URL allows (which upload, how many bytes, which content), the gateway checks it
 * without a database round trip. Token = base64url(JSON payload) "." base64url(HMAC-SHA256).
 */
import crypto from 'node:crypto';

export interface UploadGrant {
  kind: 'upload';
  /** Upload id. */
  id: string;
  size: number;
  sha256: string;
  /** Expiry, unix seconds. */
  exp: number;
}

export interface DownloadGrant {
  kind: 'download';
  sha256: string;
  size: number;
  name: string;
  type: string;
  exp: number;
}

export type Grant = UploadGrant | DownloadGrant;

export type Verified<G> = { ok: G } | { error: 'MALFORMED' | 'BAD_SIGNATURE' | 'EXPIRED' };

export interface UrlSigner {
  sign(grant: Grant): string;
  verify<K extends Grant['kind']>(token: string, kind: K, nowSeconds?: number): Verified<Extract<Grant, { kind: K }>>;
}

/** `secret` is the service's secret key; a purpose-bound key is derived from it. */
export function createUrlSigner(secret: Buffer): UrlSigner {
  const key = Buffer.from(crypto.hkdfSync('sha256', secret, Buffer.alloc(0), 'botplatform file urls v1', 32));
  const mac = (data: string) => crypto.createHmac('sha256', key).update(data).digest();

  return {
    sign(grant) {
      const body = Buffer.from(JSON.stringify(grant)).toString('base64url');
      return `${body}.${mac(body).toString('base64url')}`;
    },

    verify<K extends Grant['kind']>(token: string, kind: K, nowSeconds = Math.floor(Date.now() / 1000)): Verified<Extract<Grant, { kind: K }>> {
      const [body, sig, extra] = token.split('.');
      if (!body || !sig || extra !== undefined) return { error: 'MALFORMED' };
      const given = Buffer.from(sig, 'base64url');
      const expected = mac(body);
      if (given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) return { error: 'BAD_SIGNATURE' };
      let grant: Grant;
      try {
        grant = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Grant;
      } catch {
        return { error: 'MALFORMED' };
      }
      if (grant.kind !== kind) return { error: 'BAD_SIGNATURE' };
      if (!(grant.exp > nowSeconds)) return { error: 'EXPIRED' };
      return { ok: grant as Extract<Grant, { kind: K }> };
    },
  };
}
