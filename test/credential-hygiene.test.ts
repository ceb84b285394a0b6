/**
 * Credentials with a stray character, and credentials in logs (issue 31): a bot token
 * or console JWT followed by a pasted no-break space (0xA0) or a token file's newline
 * is a 401 in the surface's envelope on every role — with the gateway as its own
 * process, grpc-js used to refuse the metadata value, answer 500 and log the whole
 * credential in the error's message and stack — and no log line carries a credential.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { approvedBot, call, startHarness, type GatewayMode, type Harness } from './helpers/harness.js';
import { collectLogLines } from './helpers/log-lines.js';

const NBSP = '\u00a0';

/**
 * A log line as a reader of the log sees it, bytes included: any logged bytes (a Buffer's
 * JSON, {type: 'Buffer', data: [...]}, or its indices as keys, {"0": 71, ...}) decoded.
 */
function readable(line: string): string {
  const bytes = (v: unknown): number[] | undefined => {
    const values = Array.isArray(v) ? v : v && typeof v === 'object' && Object.keys(v).every((k) => /^\d+$/.test(k)) ? Object.values(v) : undefined;
    return values && values.length > 0 && values.every((b) => Number.isInteger(b) && b >= 0 && b <= 255) ? values : undefined;
  };
  const decoded = JSON.stringify(JSON.parse(line), (_key, v) => {
    const b = bytes(v) ?? (v && typeof v === 'object' && v.type === 'Buffer' ? bytes(v.data) : undefined);
    return b ? Buffer.from(b).toString('latin1') : v;
  });
  return `${line}\n${decoded}`;
}

/** Sends raw bytes to the gateway and answers what came back before the connection closed. */
function rawRequest(base: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(bytes, 'latin1'));
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (d) => (answer += d));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe.each<GatewayMode>(['separate-gateway', 'in-process'])('a credential that is not printable ASCII (%s)', (mode) => {
  let h: Harness;
  const logs = collectLogLines();
  let jwt: string;
  let token: string;
  let id: string;

  beforeAll(async () => {
    h = await startHarness(mode, { LOG_LEVEL: 'trace' }, logs.sink);
    jwt = await h.jwt('stray-dev');
    ({ id, token } = await approvedBot(h, jwt, 'stray_bot'));
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Every log line so far, none holding the credentials (flushed: the harness logger writes synchronously to the sink). */
  const expectNoCredentialLogged = () => {
    expect(logs.raw.length).toBeGreaterThan(0);
    for (const line of logs.raw.map(readable)) {
      expect(line).not.toContain(token);
      expect(line).not.toContain(jwt);
      // Nor the token's random part alone (as a path or error text could cut it).
      expect(line).not.toContain(token.slice(5));
    }
  };

  const UNPRINTABLE = 'the credential must be printable ASCII: look for a stray character around it (a line break, a no-break space)';

  it('Authorization: Bearer <bot token> + 0xA0 on a native runtime route is a 401 in the runtime envelope', async () => {
    for (const header of [`Bearer ${token}${NBSP}`, `Bearer\t${token}`, `Bearer${NBSP}${token}`]) {
      const res = await call(h.url, 'POST', '/api/v1/bots/getMe', { headers: { authorization: header } });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(res.body).toEqual({ ok: false, error_code: 401, description: `Unauthorized: ${UNPRINTABLE}` });
    }
    // The same token without the stray character still works.
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token })).status).toBe(200);
    expectNoCredentialLogged();
  });

  it('/bot<token>%0A/getMe (a token read with its newline) and /file/bot<token>%C2%A0/... are 401s in Telegram\'s envelope', async () => {
    const paths = [
      `/bot${token}%0A/getMe`,
      `/bot${token}%C2%A0/getMe`,
      `/bot${token}%0D%0A/sendMessage?chat_id=1&text=hi`,
      `/file/bot${token}%0A/some-file-id`,
    ];
    for (const p of paths) {
      for (const method of ['GET', 'POST']) {
        if (method === 'POST' && p.startsWith('/file/')) continue;
        const res = await call(h.url, method, p);
        expect(res.status, `${method} ${p.replace(token, '<token>')}`).toBe(401);
        expect(res.body).toEqual({ ok: false, error_code: 401, description: `Unauthorized: ${UNPRINTABLE}` });
        expect(JSON.stringify(res.body)).not.toContain(token);
      }
    }
    // Telegram's "<bot user id>:<token>" form with the newline: the same 401.
    const me = await call(h.url, 'GET', `/bot${token}/getMe`);
    expect(me.status).toBe(200);
    const res = await call(h.url, 'GET', `/bot${me.body.result.id}:${token}%0A/getMe`);
    expect([res.status, res.body.error_code]).toEqual([401, 401]);
    expectNoCredentialLogged();
  });

  it('a console JWT + 0xA0 is a 401 in the console envelope', async () => {
    for (const [method, p] of [['GET', '/api/v1/bots/my'], ['GET', `/api/v1/bots/my/${id}`], ['POST', `/api/v1/bots/my/${id}/regenerate-token`]] as const) {
      const res = await call(h.url, method, p, { headers: { authorization: `Bearer ${jwt}${NBSP}` } });
      expect(res.status, `${method} ${p}`).toBe(401);
      expect(res.body).toEqual({ error: { code: 401, status: 'UNAUTHENTICATED', message: UNPRINTABLE } });
    }
    expect((await call(h.url, 'GET', '/api/v1/bots/my', { token: jwt })).status).toBe(200);
    expectNoCredentialLogged();
  });
});

describe('a malformed request at LOG_LEVEL=trace', () => {
  let h: Harness;
  const logs = collectLogLines();
  let token: string;

  beforeAll(async () => {
    h = await startHarness('in-process', { LOG_LEVEL: 'trace' }, logs.sink);
    ({ token } = await approvedBot(h, await h.jwt('malformed-dev'), 'malformed_bot'));
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is logged without its bytes: neither the path\'s token nor its Authorization header reaches the log', async () => {
    const requests = [
      // An invalid header line after the request line and the credential.
      `GET /bot${token}/getMe HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nBad Header\r\n\r\n`,
      // A header value with a control character.
      `POST /api/v1/bots/getMe HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nX-Junk: a\x01b\r\n\r\n`,
      // A Content-Length that is not a number.
      `POST /bot${token}/sendMessage HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Length: ten\r\n\r\n`,
    ];
    const before = logs.raw.length;
    for (const bytes of requests) {
      const answer = await rawRequest(h.url, bytes);
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    }
    // The client errors were logged (at trace), and none of their lines, nor any other, holds the token.
    const lines = logs.raw.slice(before);
    expect(lines.some((l) => /"level":10/.test(l) && /client error/i.test(l))).toBe(true);
    for (const line of logs.raw.map(readable)) {
      expect(line).not.toContain(token);
      expect(line).not.toContain(token.slice(5));
    }
  });
});

describe('the logger', () => {
  it('scrubs credentials from an error\'s message and stack (grpc-js quotes a refused metadata value whole)', () => {
    const logs = collectLogLines();
    const logger = createLogger('trace', logs.sink);
    const token = 'sbot_Abcdefghijklmnopqrstuvwxyz0123456789';
    const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLXNpZ25hdHVyZQ';
    const internal = 'internal-secret-internal-secret-0001';
    const cause = new Error(`Metadata string value "Bearer ${internal}\n" contains illegal characters`);
    const err = Object.assign(new Error(`Metadata string value "Bearer ${token}\u00a0" contains illegal characters`, { cause }), {
      url: `/bot${token}/getMe`,
      nested: { jwt_text: `token ${jwt} here`, path: `/file/bot123:${token}/f` },
      // As Node's clientError carries the request's bytes.
      rawPacket: Buffer.from(`GET /bot${token}/getMe HTTP/1.1\r\nAuthorization: Bearer ${token}\r\n`),
      body: new Uint8Array(Buffer.from(token)),
      at: new Date(0),
    });
    logger.error({ err }, `request to /bot${token}/getMe failed`);
    logger.warn({ err: new Error(`bearer ${jwt}`) }, 'x');
    logger.flush();
    expect(logs.raw).toHaveLength(2);
    for (const line of logs.raw.map(readable)) {
      for (const secret of [token, token.slice(5), jwt, internal]) expect(line).not.toContain(secret);
    }
    const first = logs.lines[0] as { msg: string; err: { message: string; stack: string; url: string; nested: Record<string, string> } };
    // (pino writes the causes' messages after the error's own, their stacks after its stack.)
    expect(first.err.message).toBe('Metadata string value "Bearer [redacted]\u00a0" contains illegal characters: Metadata string value "Bearer [redacted]\n" contains illegal characters');
    expect(first.err.stack).toMatch(/^Error: Metadata string value "Bearer \[redacted\]\u00a0" contains illegal characters\n {4}at /);
    expect(first.err.stack).toContain('caused by: Error: Metadata string value "Bearer [redacted]\n" contains illegal characters');
    expect(first.err.url).toBe('/bot[redacted]/getMe');
    expect(first.err.nested).toEqual({ jwt_text: 'token [redacted JWT] here', path: '/file/bot[redacted]/f' });
    expect(first.err).not.toHaveProperty('rawPacket');
    expect(first.err).toMatchObject({ body: `[${token.length} bytes]`, at: '1970-01-01T00:00:00.000Z' });
    expect(first.msg).toBe('request to /bot[redacted]/getMe failed');
    // Native paths are left as they are.
    logger.info({ err: new Error('GET /api/v1/bots/my/bot_123 and /api/v1/bots failed') }, 'fine');
    logger.flush();
    expect((logs.lines[2] as { err: { message: string } }).err.message).toBe('GET /api/v1/bots/my/bot_123 and /api/v1/bots failed');
  });
});
