/**
 * The web console's files (built by `npm run build` into console/dist, beside the
 * code that serves them) and the local one-click sign-in. The console is a client of
 * the public /api/v1 API like any other: nothing here gives it a privilege.
 *
 * - `/` is index.html: `no-cache`, so a new build is picked up at once.
 * - `/console/assets/<name>` are content-hashed: cached for a year, `immutable`.
 * - Every answer carries a strict Content-Security-Policy (no inline script or style,
 *   nothing from another origin) and refuses framing.
 * - `POST /console/local-sign-in` exchanges a short-lived, single-use code (printed by
 *   `npm start` on the embedded default) for an account JWT; the JWT itself never
 *   appears in a URL.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, Code } from '../../src/errors.js';

/** The built console: console/dist from the repository root, or from dist/ once compiled. */
export const CONSOLE_DIR = path.resolve(import.meta.dirname, '../../console/dist');

export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
};

/** Single-use sign-in codes for the local developer, each redeemed for a freshly minted JWT. */
export interface LocalSignIn {
  /** A new code, valid for `ttlMs`, that signs in with the JWT `mint` makes. */
  issue(mint: () => Promise<string>, ttlMs?: number): string;
  /** The JWT for a code not yet used nor expired (and the code is spent); undefined otherwise. */
  redeem(code: string): Promise<string | undefined>;
}

export const LOCAL_SIGN_IN_TTL_MS = 15 * 60_000;

export function createLocalSignIn(now: () => number = Date.now): LocalSignIn {
  const codes = new Map<string, { mint: () => Promise<string>; expiresAt: number }>();
  const digest = (code: string) => crypto.createHash('sha256').update(code).digest('base64url');
  return {
    issue(mint, ttlMs = LOCAL_SIGN_IN_TTL_MS) {
      for (const [k, v] of codes) if (v.expiresAt <= now()) codes.delete(k);
      const code = crypto.randomBytes(24).toString('base64url');
      codes.set(digest(code), { mint, expiresAt: now() + ttlMs });
      return code;
    },
    async redeem(code) {
      const key = digest(code);
      const entry = codes.get(key);
      if (!entry) return undefined;
      codes.delete(key);
      if (entry.expiresAt <= now()) return undefined;
      return entry.mint();
    },
  };
}

export interface ConsoleRoutesOptions {
  dir?: string;
  localSignIn?: LocalSignIn;
}

export function registerConsoleRoutes(app: FastifyInstance, opts: ConsoleRoutesOptions = {}): void {
  const dir = opts.dir ?? CONSOLE_DIR;
  const assets = path.join(dir, 'assets');
  let index: Buffer | undefined;

  const secure = (reply: FastifyReply) => reply.headers(SECURITY_HEADERS);

  app.get('/', async (_request, reply) => {
    index ??= readOrUndefined(path.join(dir, 'index.html'));
    secure(reply).header('cache-control', 'no-cache');
    if (!index) {
      return reply.code(503).type('text/plain; charset=utf-8')
        .send('The console is not built: run `npm run build` (or `npm start`, which builds it).\n');
    }
    return reply.type('text/html; charset=utf-8').send(index);
  });

  // Text assets go compressed (brotli, else gzip, as the browser accepts), each compressed
  // once, at its first request: the files are content-hashed and never change.
  const compressed = new Map<string, { br: Buffer; gzip: Buffer }>();
  const send = (request: FastifyRequest, reply: FastifyReply, key: string, body: Buffer) => {
    reply.header('vary', 'accept-encoding');
    if (body.length < 1024 || !/^(text\/|application\/json|image\/svg)/.test(String(reply.getHeader('content-type')))) return reply.send(body);
    let c = compressed.get(key);
    if (!c) {
      c = {
        br: zlib.brotliCompressSync(body, { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 11 } }),
        gzip: zlib.gzipSync(body, { level: 9 }),
      };
      compressed.set(key, c);
    }
    const accepts = String(request.headers['accept-encoding'] ?? '');
    const encoding = /\bbr\b/.test(accepts) ? 'br' : /\bgzip\b/.test(accepts) ? 'gzip' : undefined;
    return encoding ? reply.header('content-encoding', encoding).send(c[encoding]) : reply.send(body);
  };

  app.get('/console/assets/:name', async (request, reply) => {
    const { name } = request.params as { name: string };
    const type = TYPES[path.extname(name)];
    const body = /^[\w.-]+$/.test(name) && !name.startsWith('.') && type ? readOrUndefined(path.join(assets, name)) : undefined;
    if (!body) throw new ApiError(Code.NOT_FOUND, 'no such console file');
    return send(request, secure(reply).header('cache-control', 'public, max-age=31536000, immutable').type(type!), name, body);
  });

  app.post('/console/local-sign-in', async (request, reply) => {
    const code = (request.body as { code?: unknown } | undefined)?.code;
    if (typeof code !== 'string' || code === '' || code.length > 100) {
      throw ApiError.invalid('code', 'REQUIRED', 'is required');
    }
    const jwt = opts.localSignIn ? await opts.localSignIn.redeem(code) : undefined;
    if (!jwt) {
      throw new ApiError(Code.UNAUTHENTICATED, 'this sign-in link has expired or was already used; restart the service for a new one, or paste a JWT');
    }
    return secure(reply).header('cache-control', 'no-store').send({ jwt });
  });
}

function readOrUndefined(file: string): Buffer | undefined {
  try {
    return fs.readFileSync(file);
  } catch {
    return undefined;
  }
}
