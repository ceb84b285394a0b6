/**
 * The whole file flow with BLOB_STORE=s3, against a real S3-compatible server (s3proxy,
 * started by scripts/s3proxy.sh; TEST_S3_ENDPOINT when the infra pass runs it), with the
 * gateway as its own process-like instance over gRPC: upload, content reuse, the
 * possession challenge (answered from ranged GETs of the object), getFile and the
 * download, sendPhoto (by file_id, and as a Telegram multipart upload), refused and
 * interrupted uploads leaving no object in the bucket, and abandoned uploads swept.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import { CreateMultipartUploadCommand, UploadPartCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';
import { collectLogLines } from './helpers/log-lines.js';
import { createTestBucket, type TestBucket } from './helpers/s3.js';
import { until } from './helpers/until.js';

const sha256 = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');

describe('files on an S3-compatible store', () => {
  let h: Harness;
  let bucket: TestBucket;
  let ownerJwt: string;

  beforeAll(async () => {
    bucket = await createTestBucket();
    h = await startHarness('separate-gateway', { ...bucket.env, MAX_FILE_BYTES: String(8 * 1024 * 1024) });
    ownerJwt = await h.jwt('s3-owner');
  }, 300_000);
  afterAll(async () => {
    await h?.close();
    await bucket?.drop();
  });

  const rt = (token: string, method: string, body: object) => call(h.url, 'POST', `/api/v1/bots/${method}`, { token, body });
  const put = (url: string, body: Buffer, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'PUT', headers, body: new Uint8Array(body) }).then(async (r) => ({ status: r.status, body: await r.json() }));
  const credentials = (token: string, bytes: Buffer, extra: object = {}) =>
    rt(token, 'files/upload-credentials', { fileName: 'data.bin', fileSize: bytes.length, checksum: sha256(bytes), ...extra });

  async function upload(token: string, bytes: Buffer, extra: object = {}) {
    const cred = await credentials(token, bytes, extra);
    expect(cred.body.result.uploadRequired).toBe(true);
    expect((await put(cred.body.result.uploadUrl, bytes, cred.body.result.headers)).status).toBe(200);
    const done = await rt(token, 'files/complete', { checksum: sha256(bytes) });
    expect(done.status).toBe(200);
    return done.body.result as { file_id: string; file: Record<string, unknown> };
  }

  it('uploads, completes into one content-addressed object, and downloads through getFile', async () => {
    const { token } = await approvedBot(h, ownerJwt, 's3_flow');
    const bytes = crypto.randomBytes(2 * 1024 * 1024 + 5);
    const cred = (await credentials(token, bytes, { fileName: 'photo.png', fileType: 'image/png' })).body.result;
    expect(cred.uploadUrl.startsWith(`${h.url}/api/v1/files/upload/`)).toBe(true); // through the gateway
    expect((await rt(token, 'files/complete', { checksum: sha256(bytes) })).status).toBe(409); // no bytes yet
    expect(await put(cred.uploadUrl, bytes, cred.headers)).toEqual({ status: 200, body: { ok: true, result: { file_size: bytes.length, checksum: sha256(bytes) } } });
    const done = await rt(token, 'files/complete', { checksum: sha256(bytes) });
    expect(done.status).toBe(200);
    expect(await bucket.keys()).toEqual([`blobs/${sha256(bytes)}`]); // staging emptied, one object

    const got = (await rt(token, 'getFile', { file_id: done.body.result.file_id })).body.result;
    const dl = await fetch(got.download_url);
    expect(dl.status).toBe(200);
    expect(dl.headers.get('content-type')).toBe('image/png');
    expect(dl.headers.get('content-length')).toBe(String(bytes.length));
    expect(Buffer.from(await dl.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it('reuses content: a trusted hit shares the object, another account proves possession from byte ranges', async () => {
    const a = await approvedBot(h, ownerJwt, 's3_reuse_a');
    const b = await approvedBot(h, ownerJwt, 's3_reuse_b');
    const bytes = crypto.randomBytes(3 * 1024 * 1024); // past 1 MiB: the challenge samples ranges
    await upload(a.token, bytes);
    const objects = await bucket.keys();

    const hit = (await credentials(b.token, bytes, { reuseExisting: true })).body.result;
    expect(hit).toMatchObject({ uploadRequired: false, file_id: expect.any(String) });

    const stranger = await approvedBot(h, await h.jwt('s3-stranger'), 's3_stranger');
    const c = (await credentials(stranger.token, bytes, { reuseExisting: true })).body.result;
    expect(c.possessionRequired).toBe(true);
    const { challengeId, nonce, ranges } = c.possessionChallenge as { challengeId: string; nonce: string; ranges: { offset: number; length: number }[] };
    expect(ranges.length).toBeGreaterThan(1);
    const proof = ranges.reduce((hash, r) => hash.update(bytes.subarray(r.offset, r.offset + r.length)), crypto.createHash('sha256').update(Buffer.from(nonce, 'hex'))).digest('hex');
    const proved = await rt(stranger.token, 'files/possession', { challengeId, proof });
    expect(proved.status).toBe(200);
    expect(proved.body.result.file).toMatchObject({ checksum: sha256(bytes), file_size: bytes.length });
    const guesser = await approvedBot(h, await h.jwt('s3-guesser'), 's3_guesser');
    const wrong = (await credentials(guesser.token, bytes, { reuseExisting: true })).body.result.possessionChallenge;
    expect((await rt(guesser.token, 'files/possession', { challengeId: wrong.challengeId, proof: 'ab'.repeat(32) })).status).toBe(400);

    expect(await bucket.keys()).toEqual(objects); // three files, one object
    const dl = await fetch((await rt(stranger.token, 'getFile', { file_id: proved.body.result.file_id })).body.result.download_url);
    expect(Buffer.from(await dl.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it('sends a photo by file_id, and as a Telegram multipart upload that lands in the bucket', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 's3_photo');
    await client(h.url, ownerJwt).post(`/api/v1/bots/my/${id}/test-updates`, { text: 'hi', chat_id: 777 });
    const bytes = crypto.randomBytes(40_000);
    const { file_id } = await upload(token, bytes, { fileName: 'p.png', fileType: 'image/png' });
    const sent = await rt(token, 'sendPhoto', { chat_id: 777, file_id });
    expect(sent.status).toBe(200);

    const tgBytes = crypto.randomBytes(6 * 1024 * 1024); // within MAX_FILE_BYTES, past MAX_BODY_BYTES
    const form = new FormData();
    form.set('chat_id', '777');
    form.set('photo', new Blob([new Uint8Array(tgBytes)], { type: 'image/jpeg' }), 'pic.jpg');
    const res = await fetch(`${h.url}/bot${token}/sendPhoto`, { method: 'POST', body: form });
    const body = await res.json();
    expect(res.status).toBe(200);
    const photo = body.result.photo[0];
    expect(photo.file_size).toBe(tgBytes.length);
    const file = (await call(h.url, 'POST', `/bot${token}/getFile`, { body: { file_id: photo.file_id } })).body.result;
    const dl = await fetch(`${h.url}/file/bot${token}/${file.file_path}`);
    expect(Buffer.from(await dl.arrayBuffer()).equals(tgBytes)).toBe(true);
    expect(await bucket.keys('staging/')).toEqual([]);
    expect(await bucket.keys()).toContain(`blobs/${sha256(tgBytes)}`);
    expect(await bucket.pendingMultipart()).toEqual([]);
  });

  it('refused and interrupted uploads leave no object, and complete then finds no bytes', async () => {
    const { token } = await approvedBot(h, ownerJwt, 's3_refused');
    const before = await bucket.keys();
    const bytes = crypto.randomBytes(1024 * 1024);
    const cred = (await credentials(token, bytes)).body.result;
    const other = crypto.randomBytes(bytes.length);
    const mismatch = await put(cred.uploadUrl, other);
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.description).toMatch(/nothing was kept/);
    expect((await put(cred.uploadUrl, bytes.subarray(1))).status).toBe(400); // fewer bytes than announced

    // A body cut off halfway: the client goes away after 512 KiB.
    await new Promise<void>((resolve) => {
      const req = http.request(cred.uploadUrl, { method: 'PUT', headers: { 'content-length': String(bytes.length) } });
      req.on('error', () => resolve());
      req.write(bytes.subarray(0, 512 * 1024), () => setTimeout(() => {
        req.destroy();
        resolve();
      }, 200));
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(await bucket.keys()).toEqual(before);
    expect((await rt(token, 'files/complete', { checksum: sha256(bytes) })).status).toBe(409);
  });

  /**
   * A Telegram multipart sendDocument whose file part is `bytes` long, sent chunked (no
   * length declared, so the store gets it in 8 MiB parts); `cutAfter`: the client goes away
   * once that many file bytes are out. Answers the status and body, or undefined when cut.
   */
  function streamDocument(token: string, bytes: number, cutAfter?: number) {
    const boundary = `----s3test${crypto.randomBytes(8).toString('hex')}`;
    const head = `--${boundary}\r\ncontent-disposition: form-data; name="chat_id"\r\n\r\n777\r\n`
      + `--${boundary}\r\ncontent-disposition: form-data; name="document"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`;
    const block = crypto.randomBytes(1024 * 1024);
    return new Promise<{ status: number; body: { ok: boolean; error_code?: number; description?: string } } | undefined>((resolve, reject) => {
      const req = http.request(`${h.url}/bot${token}/sendDocument`, { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
        res.on('error', reject);
      });
      let answered = false;
      req.on('response', () => (answered = true));
      req.on('error', (err) => {
        if (answered) return;
        if (cutAfter === undefined) reject(err);
        else resolve(undefined);
      });
      void (async () => {
        const write = (b: Buffer | string) => new Promise<void>((r) => (req.write(b) ? r() : req.once('drain', () => r())));
        await write(head);
        for (let sent = 0; sent < bytes && !answered && !req.destroyed; sent += block.length) {
          if (cutAfter !== undefined && sent >= cutAfter) {
            req.destroy();
            resolve(undefined);
            return;
          }
          await write(block.subarray(0, Math.min(block.length, bytes - sent)));
        }
        if (!answered && !req.destroyed) req.end(`\r\n--${boundary}--\r\n`);
      })();
    });
  }

  it('a Telegram multipart body past MAX_FILE_BYTES (413), or cut off by its client, leaves no object and no multipart upload', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 's3_tg_refused');
    await client(h.url, ownerJwt).post(`/api/v1/bots/my/${id}/test-updates`, { text: 'hi', chat_id: 777 });
    const before = await bucket.keys();

    // 9 MiB against MAX_FILE_BYTES of 8 MiB: the limit is found past 8 MiB, when a first part may be in the store.
    const big = await streamDocument(token, 9 * 1024 * 1024);
    expect(big?.status).toBe(413);
    expect(big?.body).toEqual({ ok: false, error_code: 413, description: expect.stringMatching(/^Request Entity Too Large: /) });
    // Within the limit, the client gone after 6 MiB: the body is never whole.
    expect(await streamDocument(token, 8 * 1024 * 1024 - 10, 6 * 1024 * 1024)).toBeUndefined();

    const left = async () => ({ keys: await bucket.keys(), multipart: await bucket.pendingMultipart() });
    expect(await until(left, (l) => l.multipart.length === 0 && l.keys.length === before.length, 10_000)).toEqual({ keys: before, multipart: [] });
    // The bot can still send files afterwards.
    const small = crypto.randomBytes(20_000);
    const form = new FormData();
    form.set('chat_id', '777');
    form.set('document', new Blob([new Uint8Array(small)]), 'ok.bin');
    expect((await fetch(`${h.url}/bot${token}/sendDocument`, { method: 'POST', body: form })).status).toBe(200);
  });
});

describe('abandoned uploads on an S3-compatible store', () => {
  it('are swept from the bucket once their URLs have long expired, multipart uploads left behind aborted', async () => {
    const bucket = await createTestBucket();
    const h = await startHarness('in-process', { ...bucket.env, FILE_URL_TTL: '1s' });
    try {
      const { token } = await approvedBot(h, await h.jwt('s3-sweep-owner'), 's3_sweep');
      const bytes = crypto.randomBytes(10_000);
      const cred = await call(h.url, 'POST', '/api/v1/bots/files/upload-credentials', { token, body: { fileName: 'x.bin', fileSize: bytes.length, checksum: sha256(bytes) } });
      expect((await fetch(cred.body.result.uploadUrl, { method: 'PUT', body: new Uint8Array(bytes) })).status).toBe(200);
      expect((await bucket.keys('staging/')).length).toBe(1); // staged, never completed
      // A multipart upload a process left when it died mid-body (the Telegram surface's bodies of unknown length).
      const { UploadId } = await bucket.client.send(new CreateMultipartUploadCommand({ Bucket: bucket.name, Key: 'staging/tg_abandoned' }));
      await bucket.client.send(new UploadPartCommand({ Bucket: bucket.name, Key: 'staging/tg_abandoned', UploadId, PartNumber: 1, Body: crypto.randomBytes(1000) }));
      expect(await bucket.pendingMultipart('staging/')).toEqual(['staging/tg_abandoned']);
      const left = async () => ({ keys: await bucket.keys('staging/'), multipart: await bucket.pendingMultipart('staging/') });
      expect(await until(left, (l) => l.keys.length === 0 && l.multipart.length === 0, 15_000)).toEqual({ keys: [], multipart: [] });
    } finally {
      await h.close();
      await bucket.drop();
    }
  }, 60_000);
});

describe('a store that refuses the service', () => {
  it('answers 503 naming the operation and S3\'s error code, with no credential in the answer or the logs', async () => {
    const bucket = await createTestBucket();
    const secret = `wrong-${crypto.randomBytes(12).toString('hex')}`;
    const logs = collectLogLines();
    const h = await startHarness('separate-gateway', { ...bucket.env, S3_SECRET_ACCESS_KEY: secret, LOG_LEVEL: 'trace' }, logs.sink);
    try {
      const { token } = await approvedBot(h, await h.jwt('s3-refused-owner'), 's3_wrong_key');
      const bytes = crypto.randomBytes(1024 * 1024); // long enough for the store to refuse it before its end (then the connection must close)
      const cred = await call(h.url, 'POST', '/api/v1/bots/files/upload-credentials', { token, body: { fileName: 'x.bin', fileSize: bytes.length, checksum: sha256(bytes) } });
      expect(cred.status).toBe(200);
      const res = await fetch(cred.body.result.uploadUrl, { method: 'PUT', body: new Uint8Array(bytes) });
      const text = await res.text();
      expect(res.status).toBe(503);
      // The code is the store's (SignatureDoesNotMatch), or the SDK's when the store answered before the body was sent.
      expect(JSON.parse(text)).toMatchObject({ ok: false, error_code: 503, description: expect.stringMatching(/^Service Unavailable: the file store failed to store an upload: \w+( \(403\))?; retry later$/) });
      // complete, on the core, cannot look at the store either: the core's 503 as it said it, through the gateway.
      const done = await call(h.url, 'POST', '/api/v1/bots/files/complete', { token, body: { checksum: sha256(bytes) } });
      expect(done.status).toBe(503);
      expect(done.body).toEqual({ ok: false, error_code: 503, description: expect.stringMatching(/^Service Unavailable: the file store failed to read an object: \w+ \(403\); retry later$/) });
      // The Telegram surface's multipart upload likewise; through the same client, which had the PUT's
      // connection to reuse had the gateway not closed it (left open, the next call on it never got an answer).
      const form = new FormData();
      form.set('chat_id', '777');
      form.set('document', new Blob([new Uint8Array(bytes)]), 'x.bin');
      const tg = await fetch(`${h.url}/bot${token}/sendDocument`, { method: 'POST', body: form });
      const tgText = await tg.text();
      expect(tg.status).toBe(503);
      expect(JSON.parse(tgText)).toEqual({ ok: false, error_code: 503, description: expect.stringMatching(/^Service Unavailable: the file store failed to store an upload: \w+( \(403\))?; retry later$/) });
      expect(await bucket.keys()).toEqual([]);
      // The start-up check said so, by bucket and endpoint.
      expect(logs.lines.some((l) => l.msg === 'blob store: S3 bucket does not answer' && l.bucket === bucket.name)).toBe(true);
      for (const line of [text, JSON.stringify(done.body), tgText, ...logs.raw]) {
        expect(line).not.toContain(secret);
        expect(line).not.toMatch(/X-Amz-Signature|Signature=|AWS4-HMAC-SHA256 Credential/);
      }
    } finally {
      await h.close();
      await bucket.drop();
    }
  }, 60_000);
});
