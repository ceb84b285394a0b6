/**
 * Attacks on the Telegram surface's file parameters and multipart bodies (issue 31,
 * items 1 and 2), each performed as an outside attacker would over real HTTP:
 *
 * - a JSON, form or query value posing as a part the multipart parser staged
 *   (`{"upload":true,"key":"blobs/<sha256>",…}`) takes no one's file and renames no
 *   stored blob: a file parameter is a file_id string or a part this request staged;
 * - no byte of a multipart body is stored before its token is checked and its method
 *   known to take a file; a body that stalls is cut off after BODY_IDLE_TIMEOUT; uploads
 *   at once are capped per bot and in all.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';
import { until } from './helpers/until.js';

const MIB = 1024 * 1024;

/** Files under a folder, recursively (none when it does not exist). */
function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

/**
 * A multipart request whose body the test sends piece by piece: `head` (text fields and
 * a file part's headers) at once, then the file's bytes as the test says. `answer`
 * settles when the service answers (or closes the connection: status 0).
 */
function openUpload(base: string, pathname: string, fields: Record<string, string>, file: { field: string; name: string }) {
  const boundary = `----attack${crypto.randomBytes(6).toString('hex')}`;
  let head = '';
  for (const [k, v] of Object.entries(fields)) head += `--${boundary}\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
  head += `--${boundary}\r\ncontent-disposition: form-data; name="${file.field}"; filename="${file.name}"\r\ncontent-type: application/octet-stream\r\n\r\n`;
  const req = http.request(base + pathname, { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'transfer-encoding': 'chunked' } });
  const answer = new Promise<{ status: number; body: any }>((resolve) => { // eslint-disable-line @typescript-eslint/no-explicit-any
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
      res.on('error', () => resolve({ status: res.statusCode!, body: undefined }));
    });
    req.on('error', () => resolve({ status: 0, body: undefined }));
    req.on('close', () => resolve({ status: 0, body: undefined }));
  });
  req.write(head);
  return {
    answer,
    send: (bytes: Buffer) => new Promise<void>((resolve) => (req.write(bytes) ? resolve() : req.once('drain', resolve))),
    finish: () => {
      req.end(`\r\n--${boundary}--\r\n`);
    },
    destroy: () => req.destroy(),
  };
}

/** Settles with `p`, or with 'pending' after `ms`. */
const within = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms))]);

describe.each(['in-process', 'separate-gateway'] as const)('Telegram surface (%s): a file parameter is a file_id or a part this request staged', (mode) => {
  let h: Harness;
  let alice: { id: string; token: string };
  let bob: { id: string; token: string };
  let blobs: string;
  const aliceBytes = crypto.randomBytes(20_000);
  const SUM = crypto.createHash('sha256').update(aliceBytes).digest('hex');
  let aliceFile: { file_id: string; file_path: string };

  beforeAll(async () => {
    h = await startHarness(mode);
    blobs = path.join(h.env.DATA_DIR!, 'files');
    const aliceJwt = await h.jwt('attack-alice');
    const bobJwt = await h.jwt('attack-bob');
    alice = await approvedBot(h, aliceJwt, 'attack_alice');
    bob = await approvedBot(h, bobJwt, 'attack_bob');
    await client(h.url, aliceJwt).post(`/api/v1/bots/my/${alice.id}/test-updates`, { text: 'hi', chat_id: 9000 });
    await client(h.url, bobJwt).post(`/api/v1/bots/my/${bob.id}/test-updates`, { text: 'hi', chat_id: 9001 });
    // Alice's file, uploaded as any framework does.
    const form = new FormData();
    form.set('chat_id', '9000');
    form.set('document', new Blob([new Uint8Array(aliceBytes)]), 'alice.bin');
    const sent = await (await fetch(`${h.url}/bot${alice.token}/sendDocument`, { method: 'POST', body: form })).json();
    const file = await call(h.url, 'POST', `/bot${alice.token}/getFile`, { body: { file_id: sent.result.document.file_id } });
    aliceFile = file.body.result;
  });
  afterAll(async () => {
    await h?.close();
  });

  const aliceDownload = async () => {
    const res = await fetch(`${h.url}/file/bot${alice.token}/${aliceFile.file_path}`);
    return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
  };

  it('a JSON object posing as a staged part (known or unknown checksum, keys outside the store) is a 400; Alice keeps her file', async () => {
    const unknown = crypto.randomBytes(32).toString('hex');
    const forged = [
      { upload: true, key: `blobs/${SUM}`, size: 20_000, sha256: SUM },
      { upload: true, key: `blobs/${SUM}`, size: 20_000, sha256: unknown, fileName: 'x', contentType: 'application/octet-stream' },
      { upload: true, key: '../../x', size: 1, sha256: unknown },
      { upload: true, key: '/etc/passwd', size: 1, sha256: unknown },
      { file_id: 'x' },
      ['x'],
      42,
      true,
    ];
    const blobsBefore = filesUnder(path.join(blobs, 'blobs')).sort();
    for (const value of forged) {
      for (const [method, field] of [['sendDocument', 'document'], ['sendPhoto', 'photo']] as const) {
        const r = await call(h.url, 'POST', `/bot${bob.token}/${method}`, { body: { chat_id: 9001, [field]: value } });
        expect(r.status, JSON.stringify(value)).toBe(400);
        expect(r.body).toEqual({ ok: false, error_code: 400, description: `Bad Request: ${field}: must be a file_id or a file uploaded in this multipart body` });
      }
    }
    // Nothing was renamed, moved or added, and Alice's download still answers her bytes.
    expect(filesUnder(path.join(blobs, 'blobs')).sort()).toEqual(blobsBefore);
    const dl = await aliceDownload();
    expect(dl.status).toBe(200);
    expect(dl.bytes.equals(aliceBytes)).toBe(true);
  });

  it('the same object as form, query or multipart text is a file_id string that names no file of Bob\'s', async () => {
    const forged = JSON.stringify({ upload: true, key: `blobs/${SUM}`, size: 20_000, sha256: SUM });
    const form = await call(h.url, 'POST', `/bot${bob.token}/sendDocument`, {
      rawBody: new URLSearchParams({ chat_id: '9001', document: forged }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    const query = await call(h.url, 'GET', `/bot${bob.token}/sendDocument?${new URLSearchParams({ chat_id: '9001', document: forged })}`);
    const multipart = new FormData();
    multipart.set('chat_id', '9001');
    multipart.set('document', forged);
    const mp = await fetch(`${h.url}/bot${bob.token}/sendDocument`, { method: 'POST', body: multipart });
    // attach:// naming a text field (not a file part) stays text too.
    const attach = new FormData();
    attach.set('chat_id', '9001');
    attach.set('doc', forged);
    attach.set('document', 'attach://doc');
    const at = await fetch(`${h.url}/bot${bob.token}/sendDocument`, { method: 'POST', body: attach });
    for (const r of [form, query, { status: mp.status, body: await mp.json() }, { status: at.status, body: await at.json() }]) {
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(r.body.ok).toBe(false);
    }
    // Alice's file_id itself is not Bob's to send either.
    const stolen = await call(h.url, 'POST', `/bot${bob.token}/sendDocument`, { body: { chat_id: 9001, document: aliceFile.file_id } });
    expect(stolen.status).toBeGreaterThanOrEqual(400);
    expect(stolen.status).toBeLessThan(500);
    const dl = await aliceDownload();
    expect(dl.bytes.equals(aliceBytes)).toBe(true);
  });

  it('a file part where a text parameter belongs, or in a method that takes no file, is a 400 and nothing is stored', async () => {
    const staging = path.join(blobs, 'staging');
    const asCaption = new FormData();
    asCaption.set('chat_id', '9001');
    asCaption.set('caption', new Blob([new Uint8Array(crypto.randomBytes(100))]), 'c.bin');
    asCaption.set('document', new Blob([new Uint8Array(crypto.randomBytes(100))]), 'd.bin');
    const r1 = await fetch(`${h.url}/bot${bob.token}/sendDocument`, { method: 'POST', body: asCaption });
    expect(r1.status).toBe(400);
    expect((await r1.json()).description).toBe('Bad Request: caption: must not be a file');
    const inText = new FormData();
    inText.set('chat_id', '9001');
    inText.set('text', new Blob([new Uint8Array(crypto.randomBytes(100))]), 't.bin');
    const r2 = await fetch(`${h.url}/bot${bob.token}/sendMessage`, { method: 'POST', body: inText });
    expect(r2.status).toBe(400);
    expect((await r2.json()).description).toBe('Bad Request: text: this method takes no file');
    await until(async () => filesUnder(staging).length, (n) => n === 0, 2000);
  });
});

describe.each(['in-process', 'separate-gateway'] as const)('Telegram surface (%s): multipart bodies are read only for a checked token, within time and slots', (mode) => {
  let h: Harness;
  let staging: string;
  const bots: { id: string; token: string }[] = [];

  beforeAll(async () => {
    h = await startHarness(mode, { BODY_IDLE_TIMEOUT: '2s', UPLOADS_PER_BOT: '1', UPLOADS_MAX: '2' });
    staging = path.join(h.env.DATA_DIR!, 'files', 'staging');
    const jwt = await h.jwt('attack-slots');
    for (const name of ['slots_a', 'slots_b', 'slots_c']) {
      const bot = await approvedBot(h, jwt, name);
      await client(h.url, jwt).post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'hi', chat_id: 77 });
      bots.push(bot);
    }
  });
  afterAll(async () => {
    await h?.close();
  });

  it('without a valid token, or to a method that takes no file, the answer comes before the body is read and nothing is staged', async () => {
    const block = crypto.randomBytes(MIB);
    for (const [pathname, status] of [
      ['/botnot-a-token/sendDocument', 401],
      [`/bot1:${bots[0]!.token}/sendDocument`, 401], // a Telegram-form id that is not the bot's
      ['/botwhatever/noSuchMethod', 404],
    ] as const) {
      const up = openUpload(h.url, pathname, { chat_id: '77' }, { field: 'document', name: 'fill.bin' });
      await up.send(block);
      // The body is not finished: an answer now means it was refused unread.
      const r = await within(up.answer, 5000);
      expect(r, pathname).not.toBe('pending');
      expect((r as { status: number }).status).toBe(status);
      expect(filesUnder(staging)).toEqual([]);
      up.destroy();
    }
  });

  it('a body that stops arriving is cut off after BODY_IDLE_TIMEOUT, and its staged bytes removed', async () => {
    const up = openUpload(h.url, `/bot${bots[0]!.token}/sendDocument`, { chat_id: '77' }, { field: 'document', name: 'idle.bin' });
    await up.send(crypto.randomBytes(2 * MIB));
    await until(async () => filesUnder(staging).length, (n) => n > 0, 5000);
    // No more bytes: within the idle timeout (2s) and a margin, the connection is closed.
    const r = await within(up.answer, 5000);
    expect(r).not.toBe('pending');
    await until(async () => filesUnder(staging).length, (n) => n === 0, 5000);
    expect(filesUnder(staging)).toEqual([]);
    // The bot's upload slot was given back: its next upload works.
    const form = new FormData();
    form.set('chat_id', '77');
    form.set('document', new Blob([new Uint8Array(crypto.randomBytes(1000))]), 'ok.bin');
    expect((await fetch(`${h.url}/bot${bots[0]!.token}/sendDocument`, { method: 'POST', body: form })).status).toBe(200);
  });

  it('uploads at once are capped per bot (UPLOADS_PER_BOT) and in all (UPLOADS_MAX): 429 with retry_after, the body unread', async () => {
    const [a, b, c] = bots as [typeof bots[0], typeof bots[0], typeof bots[0]];
    const first = openUpload(h.url, `/bot${a.token}/sendDocument`, { chat_id: '77' }, { field: 'document', name: 'a1.bin' });
    // Keep it alive (under the idle timeout) while the others try.
    const keepAlive = setInterval(() => void first.send(Buffer.alloc(1024, 1)), 200);
    try {
      await first.send(Buffer.alloc(1024, 1));
      await until(async () => filesUnder(staging).length, (n) => n > 0, 5000);
      const sameBot = openUpload(h.url, `/bot${a.token}/sendDocument`, { chat_id: '77' }, { field: 'document', name: 'a2.bin' });
      const r1 = await within(sameBot.answer, 5000);
      expect(r1).toEqual({ status: 429, body: { ok: false, error_code: 429, description: expect.stringMatching(/^Too Many Requests: /), parameters: { retry_after: 1 } } });
      sameBot.destroy();

      const other = openUpload(h.url, `/bot${b.token}/sendDocument`, { chat_id: '77' }, { field: 'document', name: 'b1.bin' });
      await other.send(Buffer.alloc(1024, 2));
      const keepOther = setInterval(() => void other.send(Buffer.alloc(1024, 2)), 200);
      try {
        await until(async () => filesUnder(staging).length, (n) => n > 1, 5000);
        const third = openUpload(h.url, `/bot${c.token}/sendDocument`, { chat_id: '77' }, { field: 'document', name: 'c1.bin' });
        const r2 = await within(third.answer, 5000);
        expect((r2 as { status: number }).status).toBe(429);
        third.destroy();
      } finally {
        clearInterval(keepOther);
      }
      other.finish();
      expect((await other.answer).status).toBe(200);
    } finally {
      clearInterval(keepAlive);
    }
    first.finish();
    expect((await first.answer).status).toBe(200);
    await until(async () => filesUnder(staging).length, (n) => n === 0, 5000);
  });

  it('a body that trickles in (never idle) is cut off after REQUEST_TIMEOUT; a long poll longer than that still answers', async () => {
    const h2 = await startHarness(mode, { REQUEST_TIMEOUT: '2s' });
    try {
      const jwt = await h2.jwt('attack-trickle');
      const bot = await approvedBot(h2, jwt, 'trickle_bot');
      await client(h2.url, jwt).post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'hi', chat_id: 77 });
      const up = openUpload(h2.url, `/bot${bot.token}/sendDocument`, { chat_id: '77' }, { field: 'document', name: 'slow.bin' });
      const trickle = setInterval(() => void up.send(Buffer.alloc(16, 3)), 200);
      const started = Date.now();
      try {
        const r = await within(up.answer, 8000);
        expect(r).not.toBe('pending');
        expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
      } finally {
        clearInterval(trickle);
      }
      const staging = path.join(h2.env.DATA_DIR!, 'files', 'staging');
      await until(async () => filesUnder(staging).length, (n) => n === 0, 5000);
      const poll = await call(h2.url, 'POST', `/bot${bot.token}/getUpdates`, { body: { offset: 2, timeout: 3 } });
      expect(poll.status).toBe(200);
    } finally {
      await h2.close();
    }
  });

  it('a long poll is not a stalled body: it waits past BODY_IDLE_TIMEOUT and answers', async () => {
    const started = Date.now();
    const r = await call(h.url, 'POST', `/bot${bots[2]!.token}/getUpdates`, { body: { offset: 2, timeout: 2 } });
    expect(r.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1900);
    // And by GET with the parameters in the query string.
    const g = await call(h.url, 'GET', `/bot${bots[2]!.token}/getUpdates?offset=2&timeout=2`);
    expect(g.status).toBe(200);
  });

  it('a body stalled inside a part header is cut off too (raw socket)', async () => {
    const socket = net.connect(Number(new URL(h.url).port), '127.0.0.1');
    socket.write(`POST /bot${bots[0]!.token}/sendDocument HTTP/1.1\r\nhost: x\r\ncontent-type: multipart/form-data; boundary=z\r\ntransfer-encoding: chunked\r\n\r\n`);
    socket.write('5\r\n--z\r\n\r\n');
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => {});
    expect(await within(closed, 8000)).not.toBe('pending');
  });
});
