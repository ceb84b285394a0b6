/**
 * Files over real HTTP, with the gateway as its own process-like instance over
 * gRPC: the upload flow (credentials → PUT to the signed URL → complete), reuse
 * (trusted hit, the possession challenge across accounts, reuseRequestId
 * idempotency, the legacy flag), getFile with its streaming download_url, and
 * every bad input of the issue with its status and nothing half-stored.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, call, startHarness, type Harness } from './helpers/harness.js';

const sha256 = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');

describe('files', () => {
  let h: Harness;
  let ownerJwt: string;

  beforeAll(async () => {
    h = await startHarness('separate-gateway', { MAX_FILE_BYTES: String(1024 * 1024) });
    ownerJwt = await h.jwt('files-owner');
  });
  afterAll(async () => {
    await h?.close();
  });

  const rt = (token: string, method: string, body: object) => call(h.url, 'POST', `/api/v1/bots/${method}`, { token, body });
  const put = (url: string, body: Buffer, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'PUT', headers, body: new Uint8Array(body) }).then(async (r) => ({ status: r.status, body: await r.json() }));
  const credentials = (token: string, bytes: Buffer, extra: object = {}) =>
    rt(token, 'files/upload-credentials', { fileName: 'data.bin', fileSize: bytes.length, checksum: sha256(bytes), ...extra });
  const stagedFiles = () => {
    const dir = path.join(h.env.DATA_DIR!, 'files');
    return ['staging', 'tmp'].flatMap((d) => fs.readdirSync(path.join(dir, d)));
  };

  async function upload(token: string, bytes: Buffer, extra: object = {}) {
    const cred = await credentials(token, bytes, extra);
    expect(cred.status).toBe(200);
    expect(cred.body.result.uploadRequired).toBe(true);
    expect((await put(cred.body.result.uploadUrl, bytes, cred.body.result.headers)).status).toBe(200);
    const done = await rt(token, 'files/complete', { checksum: sha256(bytes), ...('reuseRequestId' in extra ? { reuseRequestId: extra.reuseRequestId } : {}) });
    expect(done.status).toBe(200);
    return done.body.result as { file_id: string; file: Record<string, unknown> };
  }

  it('uploads through the signed URL, completes, and serves the bytes back through getFile\'s download_url', async () => {
    const { token } = await approvedBot(h, ownerJwt, 'files_flow');
    const bytes = crypto.randomBytes(300_000);
    const cred = await credentials(token, bytes, { fileName: 'photo 1.png', fileType: 'image/png' });
    expect(cred.status).toBe(200);
    const r = cred.body.result;
    expect(r).toMatchObject({ uploadRequired: true, method: 'PUT', headers: { 'Content-Type': 'image/png' } });
    expect(r.uploadUrl.startsWith(`${h.url}/api/v1/files/upload/`)).toBe(true);
    expect(r.expiresAt).toBeGreaterThan(Date.now() / 1000 + 60);

    // complete before the bytes arrive is refused, and registers nothing.
    const early = await rt(token, 'files/complete', { checksum: sha256(bytes) });
    expect(early.status).toBe(409);
    expect(early.body.description).toMatch(/PUT/);

    const uploaded = await put(r.uploadUrl, bytes, r.headers);
    expect(uploaded).toEqual({ status: 200, body: { ok: true, result: { file_size: bytes.length, checksum: sha256(bytes) } } });
    const done = await rt(token, 'files/complete', { checksum: sha256(bytes).toUpperCase() });
    expect(done.status).toBe(200);
    const { file_id, file } = done.body.result;
    expect(file_id).toMatch(/^file_/);
    expect(file).toEqual({
      file_id, file_unique_id: expect.any(String), file_name: 'photo 1.png', file_size: bytes.length, mime_type: 'image/png', checksum: sha256(bytes),
    });
    // complete again: the same file, not a second one.
    expect((await rt(token, 'files/complete', { checksum: sha256(bytes) })).body.result.file_id).toBe(file_id);

    const got = await rt(token, 'getFile', { file_id });
    expect(got.status).toBe(200);
    expect(got.body.result).toMatchObject({ file_id, file_size: bytes.length, download_url: expect.stringContaining('/api/v1/files/download/') });
    const download = await fetch(got.body.result.download_url);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('image/png');
    expect(download.headers.get('content-disposition')).toContain("filename*=UTF-8''photo%201.png");
    expect(Buffer.from(await download.arrayBuffer()).equals(bytes)).toBe(true);
    expect(stagedFiles()).toEqual([]);
  });

  it('a PUT with the wrong length or content keeps nothing and cannot be completed', async () => {
    const { token } = await approvedBot(h, ownerJwt, 'files_mismatch');
    const bytes = crypto.randomBytes(50_000);
    const { uploadUrl } = (await credentials(token, bytes)).body.result;

    const short = await put(uploadUrl, bytes.subarray(0, 49_999));
    expect(short.status).toBe(400);
    expect(short.body).toMatchObject({ ok: false, error_code: 400 });
    const long = await put(uploadUrl, Buffer.concat([bytes, Buffer.from('x')]));
    expect(long.status).toBe(400);
    const altered = Buffer.from(bytes);
    altered[123] = altered[123]! ^ 0xff;
    const wrong = await put(uploadUrl, altered);
    expect(wrong.status).toBe(400);
    expect(wrong.body.description).toMatch(/SHA-256/);
    // A streamed body without Content-Length that runs past the promise is cut off too.
    const streamed = await fetch(uploadUrl, {
      method: 'PUT',
      body: new ReadableStream({ start(c) { c.enqueue(new Uint8Array(bytes)); c.enqueue(new Uint8Array(10)); c.close(); } }),
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(400);

    expect(stagedFiles()).toEqual([]);
    expect((await rt(token, 'files/complete', { checksum: sha256(bytes) })).status).toBe(409);
    // The right bytes still go through afterwards.
    expect((await put(uploadUrl, bytes)).status).toBe(200);
    expect((await rt(token, 'files/complete', { checksum: sha256(bytes) })).status).toBe(200);
  });

  it('a tampered or expired upload URL is refused with 403', async () => {
    const { token } = await approvedBot(h, ownerJwt, 'files_tamper');
    const bytes = crypto.randomBytes(1000);
    const { uploadUrl } = (await credentials(token, bytes)).body.result as { uploadUrl: string };
    const [base, tokenPart] = uploadUrl.split('/api/v1/files/upload/') as [string, string];
    const [grant, sig] = tokenPart.split('.') as [string, string];
    const claims = JSON.parse(Buffer.from(grant, 'base64url').toString());
    const bigger = Buffer.from(JSON.stringify({ ...claims, size: 10 })).toString('base64url');
    const expired = Buffer.from(JSON.stringify({ ...claims, exp: 1 })).toString('base64url');
    for (const t of [`${bigger}.${sig}`, `${expired}.${sig}`, `${grant}.${sig.slice(0, -2)}AA`, 'garbage', `${grant}`]) {
      const res = await put(`${base}/api/v1/files/upload/${t}`, bytes);
      expect(res.status).toBe(403);
      expect(res.body.ok).toBe(false);
    }
    expect(stagedFiles()).toEqual([]);
  });

  it('an upload URL past its lifetime answers 403, and complete says it expired', async () => {
    const short = await startHarness('in-process', { FILE_URL_TTL: '1s' });
    try {
      const { token } = await approvedBot(short, await short.jwt('ttl-owner'), 'files_ttl');
      const bytes = crypto.randomBytes(100);
      const cred = await call(short.url, 'POST', '/api/v1/bots/files/upload-credentials', {
        token, body: { fileName: 'a', fileSize: 100, checksum: sha256(bytes) },
      });
      await new Promise((r) => setTimeout(r, 2100));
      const res = await put(cred.body.result.uploadUrl, bytes);
      expect(res.status).toBe(403);
      expect(res.body.description).toMatch(/expired/);
      const done = await call(short.url, 'POST', '/api/v1/bots/files/complete', { token, body: { checksum: sha256(bytes) } });
      expect([404, 409]).toContain(done.status);
    } finally {
      await short.close();
    }
  });

  const sum = sha256(Buffer.from('x'));
  it.each([
    ['no checksum', { fileName: 'a', fileSize: 1 }, 'checksum'],
    ['short checksum', { fileName: 'a', fileSize: 1, checksum: 'abc' }, 'checksum'],
    ['non-hex checksum', { fileName: 'a', fileSize: 1, checksum: 'z'.repeat(64) }, 'checksum'],
    ['zero size', { fileName: 'a', fileSize: 0, checksum: sum }, 'fileSize'],
    ['negative size', { fileName: 'a', fileSize: -5, checksum: sum }, 'fileSize'],
    ['size over the limit', { fileName: 'a', fileSize: 1024 * 1024 + 1, checksum: sum }, 'fileSize'],
    ['fractional size', { fileName: 'a', fileSize: 1.5, checksum: sum }, 'fileSize'],
    ['no file name', { fileSize: 1, checksum: sum }, 'fileName'],
    ['a slash in the name', { fileName: '../etc/passwd', fileSize: 1, checksum: sum }, 'fileName'],
    ['a backslash in the name', { fileName: 'a\\b.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['a control character in the name', { fileName: 'a\nb.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['a NUL in the name', { fileName: 'a\u0000.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['the name ..', { fileName: '..', fileSize: 1, checksum: sum }, 'fileName'],
    ['a right-to-left override in the name', { fileName: 'invoice\u202Egpj.exe', fileSize: 1, checksum: sum }, 'fileName'],
    ['a bidi embedding in the name', { fileName: 'a\u202Ab.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['a bidi isolate in the name', { fileName: '\u2067exe.txt\u2069', fileSize: 1, checksum: sum }, 'fileName'],
    ['a left-to-right mark in the name', { fileName: 'a\u200E.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['a right-to-left mark in the name', { fileName: 'a\u200F.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['an Arabic letter mark in the name', { fileName: 'a\u061C.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['a DEL in the name', { fileName: 'a\u007F.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['a C1 control in the name', { fileName: 'a\u0085.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['a line separator in the name', { fileName: 'a\u2028.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['a lone surrogate in the name', { fileName: 'a\uD800.txt', fileSize: 1, checksum: sum }, 'fileName'],
    ['a bad MIME type', { fileName: 'a', fileSize: 1, checksum: sum, fileType: 'not a type' }, 'fileType'],
    ['a bad reuseRequestId', { fileName: 'a', fileSize: 1, checksum: sum, reuseRequestId: 'has spaces' }, 'reuseRequestId'],
  ])('upload-credentials with %s is a 400 naming the field', async (_label, body, field) => {
    const { token } = await approvedBot(h, ownerJwt, `files_bad_${crypto.randomBytes(3).toString('hex')}`);
    const res = await rt(token, 'files/upload-credentials', body);
    expect(res.status).toBe(400);
    expect(res.body.description).toContain(field);
  });

  it('a lone surrogate sent as a JSON escape is refused, not stored as a replacement character', async () => {
    const { token } = await approvedBot(h, ownerJwt, 'files_surrogate');
    const res = await call(h.url, 'POST', '/api/v1/bots/files/upload-credentials', {
      token, rawBody: `{"fileName":"report\\udc00.pdf","fileSize":1,"checksum":"${sum}"}`,
    });
    expect(res.status).toBe(400);
    expect(res.body.description).toContain('fileName');
  });

  it('names in any script, with emoji, are accepted as sent', async () => {
    const { token } = await approvedBot(h, ownerJwt, 'files_unicode_names');
    for (const fileName of ['تقرير.pdf', 'דוח שנתי.pdf', '👩‍👩‍👧 family.jpg', 'résumé (1).docx']) {
      const bytes = crypto.randomBytes(64);
      const { file } = await upload(token, bytes, { fileName });
      expect(file.file_name).toBe(fileName);
    }
  });

  it('complete needs a valid checksum and an upload; getFile and files of other bots are 404', async () => {
    const { token } = await approvedBot(h, ownerJwt, 'files_complete_bad');
    expect((await rt(token, 'files/complete', {})).status).toBe(400);
    expect((await rt(token, 'files/complete', { checksum: 'nothex' })).status).toBe(400);
    expect((await rt(token, 'files/complete', { checksum: sha256(Buffer.from('never')) })).status).toBe(404);
    const other = await approvedBot(h, await h.jwt('files-other-owner'), 'files_other_bot');
    const theirs = await upload(other.token, crypto.randomBytes(500));
    const res = await rt(token, 'getFile', { file_id: theirs.file_id });
    expect(res.status).toBe(404);
    expect((await rt(token, 'getFile', { file_id: 'file_nope' })).status).toBe(404);
    expect((await rt(token, 'getFile', {})).status).toBe(400);
  });

  it('same account: a trusted hit gives a new file on the shared blob with no PUT; the same reuseRequestId gives the same file_id', async () => {
    const a = await approvedBot(h, ownerJwt, 'files_reuse_a');
    const b = await approvedBot(h, ownerJwt, 'files_reuse_b');
    const bytes = crypto.randomBytes(20_000);
    const first = await upload(a.token, bytes, { reuseRequestId: 'send-1' });

    const hitA = await credentials(a.token, bytes, { reuseRequestId: 'send-2', fileName: 'again.bin' });
    expect(hitA.body.result).toMatchObject({ uploadRequired: false, file_id: expect.any(String), file: { file_name: 'again.bin', checksum: sha256(bytes) } });
    expect(hitA.body.result.uploadUrl).toBeUndefined();
    expect(hitA.body.result.file_id).not.toBe(first.file_id);
    expect(hitA.body.result.file.file_unique_id).toBe(first.file.file_unique_id);
    // A retry of the same logical upload answers the same file.
    expect((await credentials(a.token, bytes, { reuseRequestId: 'send-2', fileName: 'again.bin' })).body.result.file_id).toBe(hitA.body.result.file_id);
    expect((await credentials(a.token, bytes, { reuseRequestId: 'send-1' })).body.result.file_id).toBe(first.file_id);
    // The same reuseRequestId for different content is a conflict.
    expect((await credentials(a.token, crypto.randomBytes(10), { reuseRequestId: 'send-1' })).status).toBe(409);

    // Another bot of the same account: trusted, its own file_id.
    const hitB = await credentials(b.token, bytes, { reuseRequestId: 'b-1' });
    expect(hitB.body.result.uploadRequired).toBe(false);
    const got = await rt(b.token, 'getFile', { file_id: hitB.body.result.file_id });
    expect(Buffer.from(await (await fetch(got.body.result.download_url)).arrayBuffer()).equals(bytes)).toBe(true);
    // Bot b cannot use bot a's file_id.
    expect((await rt(b.token, 'getFile', { file_id: first.file_id })).status).toBe(404);

    // Legacy flag: reuseExisting true asks for reuse without an id; false refuses it.
    expect((await credentials(a.token, bytes, { reuseExisting: true })).body.result.uploadRequired).toBe(false);
    expect((await credentials(a.token, bytes, { reuseExisting: false })).body.result.uploadRequired).toBe(true);
    // Without either, the bytes are uploaded again (and deduplicated on complete).
    expect((await credentials(a.token, bytes)).body.result.uploadRequired).toBe(true);
  });

  it('another account must prove possession: a correct proof gives a file, a wrong one burns the challenge', async () => {
    const owner1 = await approvedBot(h, ownerJwt, 'files_pos_one');
    const owner2Jwt = await h.jwt('files-second-account');
    const two = await approvedBot(h, owner2Jwt, 'files_pos_two');
    const bytes = crypto.randomBytes(100_000);
    const original = await upload(owner1.token, bytes, { reuseRequestId: 'orig' });

    const challenged = await credentials(two.token, bytes, { reuseRequestId: 'mine-1' });
    expect(challenged.status).toBe(200);
    const c = challenged.body.result;
    expect(c).toMatchObject({ uploadRequired: false, possessionRequired: true });
    expect(c.file_id).toBeUndefined();
    const { challengeId, nonce, ranges } = c.possessionChallenge;
    expect(nonce).toMatch(/^[0-9a-f]+$/);
    expect(ranges.length).toBeGreaterThan(0);
    const proofOf = (data: Buffer) => {
      const hash = crypto.createHash('sha256').update(Buffer.from(nonce, 'hex'));
      for (const r of ranges as { offset: number; length: number }[]) hash.update(data.subarray(r.offset, r.offset + r.length));
      return hash.digest('hex');
    };

    // A wrong proof is refused and burns the challenge: the right proof no longer works.
    const wrong = await rt(two.token, 'files/possession', { challengeId, proof: proofOf(crypto.randomBytes(100_000)) });
    expect(wrong.status).toBe(400);
    const burnt = await rt(two.token, 'files/possession', { challengeId, proof: proofOf(bytes) });
    expect(burnt.status).toBe(409);

    // A new challenge, answered from the real bytes.
    const again = (await credentials(two.token, bytes, { reuseRequestId: 'mine-1' })).body.result.possessionChallenge;
    const bot1Challenge = await rt(owner1.token, 'files/possession', { challengeId: again.challengeId, proof: 'a'.repeat(64) });
    expect(bot1Challenge.status).toBe(404); // not that bot's challenge (and not burnt by the attempt)
    const hashAgain = crypto.createHash('sha256').update(Buffer.from(again.nonce, 'hex'));
    for (const r of again.ranges as { offset: number; length: number }[]) hashAgain.update(bytes.subarray(r.offset, r.offset + r.length));
    const proved = await rt(two.token, 'files/possession', { challengeId: again.challengeId, proof: hashAgain.digest('hex') });
    expect(proved.status).toBe(200);
    expect(proved.body.result).toMatchObject({ uploadRequired: false, file_id: expect.any(String), file: { checksum: sha256(bytes) } });
    const mine = proved.body.result.file_id;
    expect(mine).not.toBe(original.file_id);

    // Neither bot can use the other's file_id; each can use its own.
    expect((await rt(two.token, 'getFile', { file_id: original.file_id })).status).toBe(404);
    expect((await rt(owner1.token, 'getFile', { file_id: mine })).status).toBe(404);
    expect((await rt(two.token, 'getFile', { file_id: mine })).status).toBe(200);
    // Having proved it, the second account is trusted from now on, and the id stays idempotent.
    expect((await credentials(two.token, bytes, { reuseRequestId: 'mine-1' })).body.result.file_id).toBe(mine);
    expect((await credentials(two.token, bytes, { reuseRequestId: 'mine-2' })).body.result.uploadRequired).toBe(false);
    // A malformed proof is a 400 that does not use the challenge up.
    const third = await approvedBot(h, await h.jwt('files-third-account'), 'files_pos_three');
    const c3 = (await credentials(third.token, bytes, { reuseRequestId: 'x' })).body.result.possessionChallenge;
    expect((await rt(third.token, 'files/possession', { challengeId: c3.challengeId, proof: 'short' })).status).toBe(400);
    const h3 = crypto.createHash('sha256').update(Buffer.from(c3.nonce, 'hex'));
    for (const r of c3.ranges as { offset: number; length: number }[]) h3.update(bytes.subarray(r.offset, r.offset + r.length));
    expect((await rt(third.token, 'files/possession', { challengeId: c3.challengeId, proof: h3.digest('hex') })).status).toBe(200);
  });
});
