/**
 * Rough edges from issue 31, over real HTTP: impossible dates refused, /docs's headers,
 * Fastify's and Node's own 400/431 answers in the contract's envelopes, and
 * `Cache-Control: no-store` on the Telegram surface and the API's answers.
 */
import crypto from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';

let h: Harness;
let ownerJwt: string;
let bot: { id: string; token: string };

beforeAll(async () => {
  h = await startHarness('in-process');
  ownerJwt = await h.jwt('rough-owner');
  bot = await approvedBot(h, ownerJwt, 'rough_bot');
});
afterAll(async () => {
  await h?.close();
});

/** Raw bytes to the gateway; the answer's status, headers and body (JSON) once the connection closes. */
function rawRequest(bytes: string, base = h.url): Promise<{ status: number; headers: Record<string, string>; body: unknown }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(bytes, 'latin1'));
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (d) => (answer += d));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', text = ''] = answer.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // not JSON: kept as text
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
    });
  });
}

describe('timestamps', () => {
  it('recovery refuses impossible dates with INVALID_ARGUMENT naming the field', async () => {
    const owner = client(h.url, ownerJwt);
    for (const [field, value] of [['since', '2026-02-30T00:00:00Z'], ['since', '2026-04-31T12:00:00+02:00'], ['since', '2026-01-01T24:00:00Z'], ['until', '2025-02-29T00:00:00Z']]) {
      const body = { since: '2026-01-01T00:00:00Z', [field!]: value };
      const res = await owner.post(`/api/v1/bots/my/${bot.id}/deliveries/recover`, body);
      expect(res.status, `${field}: ${value}`).toBe(400);
      expect(res.body).toEqual({
        error: { code: 400, status: 'INVALID_ARGUMENT', message: `${field}: must be an RFC 3339 timestamp`, details: [{ field, reason: 'INVALID_TYPE' }] },
      });
    }
    // A real date gets past the codec (the bot has no webhook: 409).
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/deliveries/recover`, { since: '2024-02-29T00:00:00Z' })).status).toBe(409);
  });
});

describe('requests Node\'s parser refuses', () => {
  it('a malformed request is a 400 in the envelope of its path\'s surface', async () => {
    const telegram = await rawRequest(`GET /bot${bot.token}/getMe HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${bot.token}\r\nBad Header\r\n\r\n`);
    expect(telegram).toMatchObject({ status: 400, headers: { 'content-type': 'application/json', connection: 'close' } });
    expect(telegram.body).toEqual({ ok: false, error_code: 400, description: 'Bad Request: malformed HTTP request' });

    const runtime = await rawRequest(`POST /api/v1/bots/getMe HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ten\r\n\r\n`);
    expect([runtime.status, runtime.body]).toEqual([400, { ok: false, error_code: 400, description: 'Bad Request: malformed HTTP request' }]);

    const consoleAnswer = await rawRequest(`GET /api/v1/bots/my HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Junk: a\x01b\r\n\r\n`);
    expect([consoleAnswer.status, consoleAnswer.body]).toEqual([400, { error: { code: 400, status: 'INVALID_ARGUMENT', message: 'malformed HTTP request' } }]);

    const garbage = await rawRequest('NOT HTTP AT ALL\r\n\r\n');
    expect([garbage.status, garbage.body]).toEqual([400, { error: { code: 400, status: 'INVALID_ARGUMENT', message: 'malformed HTTP request' } }]);
  });

  it('headers past Node\'s size limit are a 431 in the envelope of the path\'s surface', async () => {
    const big = `X-Big: ${'a'.repeat(20_000)}\r\n`;
    const runtime = await rawRequest(`GET /bot${bot.token}/getMe HTTP/1.1\r\nHost: 127.0.0.1\r\n${big}\r\n`);
    expect(runtime).toMatchObject({ status: 431, headers: { 'content-type': 'application/json' } });
    expect(runtime.body).toEqual({ ok: false, error_code: 431, description: 'Request Header Fields Too Large: the request headers are too large' });
    const consoleAnswer = await rawRequest(`GET /api/v1/bots/my HTTP/1.1\r\nHost: 127.0.0.1\r\n${big}\r\n`);
    expect([consoleAnswer.status, consoleAnswer.body]).toEqual([431, { error: { code: 431, status: 'INVALID_ARGUMENT', message: 'the request headers are too large' } }]);
    // The service still answers.
    expect((await call(h.url, 'GET', `/bot${bot.token}/getMe`)).status).toBe(200);
  });
});

describe('a request whose body does not arrive within REQUEST_TIMEOUT', () => {
  let slow: Harness;
  beforeAll(async () => {
    slow = await startHarness('in-process', { REQUEST_TIMEOUT: '1s', BODY_IDLE_TIMEOUT: '1h' });
  });
  afterAll(async () => {
    await slow?.close();
  });

  it('is a 408 in the envelope of its path\'s surface', async () => {
    const started = Date.now();
    const res = await rawRequest(
      `POST /bot${bot.token}/sendMessage HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"chat_id":`,
      slow.url,
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(res).toMatchObject({ status: 408, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' } });
    expect(res.body).toEqual({ ok: false, error_code: 408, description: 'Request Timeout: the call did not finish in time; retry it' });
  });
});

describe('Cache-Control: no-store', () => {
  const noStore = (res: { headers: Headers }) => res.headers.get('cache-control');

  it('on every answer of the Telegram surface, errors included', async () => {
    const { token } = bot;
    expect(noStore(await call(h.url, 'GET', `/bot${token}/getMe`))).toBe('no-store');
    expect(noStore(await call(h.url, 'POST', `/bot${token}/getUpdates`, { body: { timeout: 0 } }))).toBe('no-store');
    expect(noStore(await call(h.url, 'GET', `/bot${token}/getWebhookInfo`))).toBe('no-store');
    for (const [method, p] of [['GET', `/bot${token}/sendSticker`], ['GET', `/botsbot_${'x'.repeat(40)}/getMe`], ['POST', `/bot${token}/sendMessage`], ['GET', `/file/bot${token}/no-such-file`], ['POST', `/file/bot${token}/x`]]) {
      const res = await call(h.url, method!, p!);
      expect(res.status, `${method} ${p!.replace(token, '<token>')}`).toBeGreaterThanOrEqual(400);
      expect(noStore(res), `${method} ${p!.replace(token, '<token>')}`).toBe('no-store');
    }
  });

  it('on a file downloaded at /file/bot<token>/..., while the signed download URL keeps its own caching', async () => {
    const bytes = crypto.randomBytes(1000);
    const sha = crypto.createHash('sha256').update(bytes).digest('hex');
    const rt = (method: string, body: object) => call(h.url, 'POST', `/api/v1/bots/${method}`, { token: bot.token, body });
    const creds = await rt('files/upload-credentials', { fileName: 'a.bin', fileSize: bytes.length, fileType: 'application/octet-stream', checksum: sha, reuseRequestId: 'r1' });
    expect(creds.status).toBe(200);
    expect(noStore(creds)).toBe('no-store');
    expect((await fetch(creds.body.result.uploadUrl, { method: 'PUT', body: bytes, headers: { 'content-type': 'application/octet-stream' } })).status).toBe(200);
    const done = await rt('files/complete', { checksum: sha, reuseRequestId: 'r1' });
    const fileId = done.body.result.file_id as string;
    const file = await call(h.url, 'GET', `/bot${bot.token}/getFile?file_id=${encodeURIComponent(fileId)}`);
    const viaTelegram = await fetch(`${h.url}/file/bot${bot.token}/${file.body.result.file_path}`);
    expect(viaTelegram.status).toBe(200);
    expect(noStore(viaTelegram)).toBe('no-store');
    expect(Buffer.from(await viaTelegram.arrayBuffer()).equals(bytes)).toBe(true);
    const native = await rt('getFile', { file_id: fileId });
    const signed = await fetch(native.body.result.download_url);
    expect([signed.status, noStore(signed)]).toEqual([200, 'private, max-age=3600']);
    await signed.arrayBuffer();
  });

  it('on the native API\'s answers (tokens, secrets, messages) and its errors; not on /docs, the console or /healthz', async () => {
    const owner = client(h.url, ownerJwt);
    expect(noStore(await call(h.url, 'POST', '/api/v1/bots/getMe', { token: bot.token }))).toBe('no-store');
    expect(noStore(await owner.get(`/api/v1/bots/my/${bot.id}`))).toBe('no-store');
    expect(noStore(await owner.post(`/api/v1/bots/my/${bot.id}/regenerate-token`))).toBe('no-store');
    expect(noStore(await owner.get('/api/v1/bots/my/bot_nope'))).toBe('no-store');
    expect(noStore(await call(h.url, 'POST', '/api/v1/bots/sendSmokeSignal'))).toBe('no-store');
    expect(noStore(await call(h.url, 'GET', '/elsewhere'))).toBe('no-store');
    expect(noStore(await call(h.url, 'GET', '/docs/swagger-ui.css'))).toBe('public, max-age=3600');
    expect(noStore(await call(h.url, 'GET', '/healthz'))).toBeNull();
  });
});
