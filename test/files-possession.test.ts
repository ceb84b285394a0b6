/**
 * The possession proof against a taker who holds only part of a file (issue 12):
 * what a challenge samples (the whole of a small file; for a larger one, enough
 * distinct blocks that knowing any 90% of the bytes passes with probability below
 * 1e-6 per try, the bound computed here from the service's own parameters), and
 * the tries per (account, checksum): every challenge handed out is one, answered or
 * not, a new one replaces the unanswered one, and past the cap the ask is refused
 * with 429 and retry_after until the window lets a try go — in the database, so a
 * second instance refuses too.
 */
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp } from '../src/app.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { POSSESSION_SAMPLE, possessionSample } from '../src/domain/files-service.js';
import { createLogger } from '../src/logger.js';
import { approvedBot, call, startHarness, type Harness } from './helpers/harness.js';

const sha256 = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');
type Range = { offset: number; length: number };
interface Challenge { challengeId: string; nonce: string; ranges: Range[] }

/** The proof a taker holding `data` gives (bytes it lacks are whatever `data` has there). */
function proofFrom(data: Buffer, c: Challenge): string {
  const hash = crypto.createHash('sha256').update(Buffer.from(c.nonce, 'hex'));
  for (const r of c.ranges) hash.update(data.subarray(r.offset, r.offset + r.length));
  return hash.digest('hex');
}

/**
 * The most a taker knowing a fraction `f` of an n-byte file passes one challenge
 * with. Ranges are distinct blocks of `rangeBytes` (the last one may be shorter),
 * drawn uniformly without replacement; a range is answerable only when every byte
 * of its block is known. The n − ⌊f·n⌋ unknown bytes lie in at least
 * ⌈unknown / rangeBytes⌉ blocks however they are placed, so at most
 * g = blocks − that many blocks are fully known, and all k draws land on them with
 * probability g/B · (g−1)/(B−1) · … · (g−k+1)/(B−k+1). A file read whole (one
 * range covering it) is answerable only with every byte: probability 0 for f < 1.
 */
function passBound(size: number, f: number): number {
  const { rangeBytes, blocks, ranges } = possessionSample(size);
  const unknown = size - Math.floor(f * size);
  if (unknown <= 0) return 1;
  const good = blocks - Math.ceil(unknown / rangeBytes);
  let p = 1;
  for (let i = 0; i < ranges; i++) p *= Math.max(0, good - i) / (blocks - i);
  return p;
}

describe('possession sample', () => {
  it('a taker who knows any 90% of the bytes passes one challenge with probability below 1e-6, at every size', () => {
    const sizes = [
      1, 100, 64 * 1024, POSSESSION_SAMPLE.wholeFileBytes, POSSESSION_SAMPLE.wholeFileBytes + 1, 1_500_000, 3 * 1024 ** 2 + 17,
      64 * 1024 ** 2, 268_435_457, 2 * 1024 ** 3, 2 * 1024 ** 3 + 1, 10 * 1024 ** 3, 1024 ** 4,
    ];
    for (let i = 0; i < 200; i++) sizes.push(POSSESSION_SAMPLE.wholeFileBytes + crypto.randomInt(1, 2 ** 40 - POSSESSION_SAMPLE.wholeFileBytes));
    for (const size of sizes) {
      const s = possessionSample(size);
      if (size <= POSSESSION_SAMPLE.wholeFileBytes) expect(s).toEqual({ rangeBytes: size, blocks: 1, ranges: 1 });
      else {
        expect(s.blocks).toBe(Math.ceil(size / s.rangeBytes));
        expect(s.ranges).toBeLessThan(s.blocks);
      }
      expect(passBound(size, 0.9), `size ${size}`).toBeLessThan(1e-6);
    }
    // The sample grows with the file, and what a proof reads stays bounded.
    expect(possessionSample(2 * 1024 ** 3).rangeBytes).toBeGreaterThan(possessionSample(2 * 1024 ** 2).rangeBytes);
    const largest = possessionSample(1024 ** 4);
    expect(largest.rangeBytes * largest.ranges).toBeLessThanOrEqual(16 * 1024 ** 2);
  });
});

describe('possession challenges', () => {
  let h: Harness;
  let ownerJwt: string;

  beforeAll(async () => {
    // The bot rate limit is off: the asks here meet the possession cap, not it.
    h = await startHarness('separate-gateway', { MAX_FILE_BYTES: String(4 * 1024 * 1024), RATE_LIMIT_BOT: 'off' });
    ownerJwt = await h.jwt('possession-owner');
  });
  afterAll(async () => {
    await h?.close();
  });

  const rt = (token: string, method: string, body: object, base = h.url) => call(base, 'POST', `/api/v1/bots/${method}`, { token, body });
  const ask = (token: string, bytes: Buffer, reuseRequestId: string, base = h.url) =>
    rt(token, 'files/upload-credentials', { fileName: 'data.bin', fileSize: bytes.length, checksum: sha256(bytes), reuseRequestId }, base);

  async function upload(token: string, bytes: Buffer) {
    const reuseRequestId = `orig-${crypto.randomBytes(4).toString('hex')}`;
    const cred = await ask(token, bytes, reuseRequestId);
    expect(cred.body.result.uploadRequired).toBe(true);
    const put = await fetch(cred.body.result.uploadUrl, { method: 'PUT', body: new Uint8Array(bytes) });
    expect(put.status).toBe(200);
    const done = await rt(token, 'files/complete', { checksum: sha256(bytes), reuseRequestId });
    expect(done.status).toBe(200);
  }

  it('the attack of the report: the checksum and the first 75% of a 64 KiB file never get a file_id, and the sixth ask is refused', async () => {
    const owner = await approvedBot(h, ownerJwt, 'pos_attack_owner');
    const bytes = crypto.randomBytes(64 * 1024);
    await upload(owner.token, bytes);

    const thiefJwt = await h.jwt('possession-thief');
    const thief = await approvedBot(h, thiefJwt, 'pos_attack_thief');
    // What the taker has: the first 48 KiB; the 16 KiB it never had, it guesses as zeros.
    const held = Buffer.concat([bytes.subarray(0, 48 * 1024), Buffer.alloc(16 * 1024)]);
    const outcomes: number[] = [];
    for (let i = 0; i < 20; i++) {
      const cred = await ask(thief.token, bytes, `steal-${i}`);
      if (cred.status !== 200) {
        outcomes.push(cred.status);
        continue;
      }
      const c = cred.body.result.possessionChallenge as Challenge;
      const answer = await rt(thief.token, 'files/possession', { challengeId: c.challengeId, proof: proofFrom(held, c) });
      expect(answer.body.result?.file_id, `ask ${i + 1} got a file_id`).toBeUndefined();
      outcomes.push(answer.status);
    }
    expect(outcomes).toEqual([400, 400, 400, 400, 400, ...Array(15).fill(429)]);

    const refused = await ask(thief.token, bytes, 'steal-last');
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ ok: false, error_code: 429, parameters: { retry_after: expect.any(Number) } });
    const retryAfter = refused.body.parameters.retry_after as number;
    expect(retryAfter).toBeGreaterThan(3500);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    expect(refused.headers.get('retry-after')).toBe(String(retryAfter));
    // The account is locked out of this content, whichever of its bots asks; its own uploads go on.
    const thief2 = await approvedBot(h, thiefJwt, 'pos_attack_thief2');
    expect((await ask(thief2.token, bytes, 'other-bot')).status).toBe(429);
    const own = crypto.randomBytes(1000);
    expect((await ask(thief.token, own, 'own-1')).body.result.uploadRequired).toBe(true);
    // Other accounts holding the real bytes are not affected.
    const honest = await approvedBot(h, await h.jwt('possession-honest'), 'pos_attack_honest');
    const c = (await ask(honest.token, bytes, 'h-1')).body.result.possessionChallenge as Challenge;
    expect((await rt(honest.token, 'files/possession', { challengeId: c.challengeId, proof: proofFrom(bytes, c) })).status).toBe(200);
  });

  it('a small file is read whole; a larger one by distinct blocks of the advertised sample, and the real bytes pass', async () => {
    const owner = await approvedBot(h, ownerJwt, 'pos_sample_owner');
    const other = await approvedBot(h, await h.jwt('possession-sampler'), 'pos_sample_other');
    const small = crypto.randomBytes(64 * 1024);
    const large = crypto.randomBytes(3 * 1024 * 1024 + 123);
    await upload(owner.token, small);
    await upload(owner.token, large);

    const cs = (await ask(other.token, small, 's-1')).body.result.possessionChallenge as Challenge;
    expect(cs.ranges).toEqual([{ offset: 0, length: small.length }]);
    expect((await rt(other.token, 'files/possession', { challengeId: cs.challengeId, proof: proofFrom(small, cs) })).status).toBe(200);

    const sample = possessionSample(large.length);
    const cl = (await ask(other.token, large, 'l-1')).body.result.possessionChallenge as Challenge;
    expect(cl.ranges).toHaveLength(sample.ranges);
    const blocks = cl.ranges.map((r) => {
      expect(r.offset % sample.rangeBytes).toBe(0);
      expect(r.length).toBe(Math.min(sample.rangeBytes, large.length - r.offset));
      return r.offset / sample.rangeBytes;
    });
    expect(new Set(blocks).size).toBe(sample.ranges);
    expect(Math.max(...blocks)).toBeLessThan(sample.blocks);
    // 90% of the bytes (the last tenth zeroed) do not answer it; this challenge still can be answered once.
    const partial = Buffer.from(large);
    partial.fill(0, Math.floor(large.length * 0.9));
    expect(proofFrom(partial, cl)).not.toBe(proofFrom(large, cl));
    const proved = await rt(other.token, 'files/possession', { challengeId: cl.challengeId, proof: proofFrom(large, cl) });
    expect(proved.status).toBe(200);
    expect(proved.body.result.file.checksum).toBe(sha256(large));
  });
});

describe('possession tries', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness('in-process', { POSSESSION_MAX_TRIES: '3', POSSESSION_TRY_WINDOW: '3s' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const rt = (token: string, method: string, body: object, base = h.url) => call(base, 'POST', `/api/v1/bots/${method}`, { token, body });
  const ask = (token: string, bytes: Buffer, reuseRequestId: string, base = h.url) =>
    rt(token, 'files/upload-credentials', { fileName: 'data.bin', fileSize: bytes.length, checksum: sha256(bytes), reuseRequestId }, base);

  it('unanswered challenges count: a new one replaces the old, the ask past the cap is a 429 on every instance, and the window lets it go', async () => {
    const owner = await approvedBot(h, await h.jwt('tries-owner'), 'tries_owner');
    const bytes = crypto.randomBytes(10_000);
    const cred = await ask(owner.token, bytes, 'o-1');
    await fetch(cred.body.result.uploadUrl, { method: 'PUT', body: new Uint8Array(bytes) });
    expect((await rt(owner.token, 'files/complete', { checksum: sha256(bytes), reuseRequestId: 'o-1' })).status).toBe(200);

    const taker = await approvedBot(h, await h.jwt('tries-taker'), 'tries_taker');
    const first = (await ask(taker.token, bytes, 't-1')).body.result.possessionChallenge as Challenge;
    const second = (await ask(taker.token, bytes, 't-1')).body.result.possessionChallenge as Challenge;
    const third = (await ask(taker.token, bytes, 't-1')).body.result.possessionChallenge as Challenge;
    expect(new Set([first.challengeId, second.challengeId, third.challengeId]).size).toBe(3);
    // The replaced challenge is spent, even with the right bytes.
    const stale = await rt(taker.token, 'files/possession', { challengeId: first.challengeId, proof: proofFrom(bytes, first) });
    expect(stale.status).toBe(409);
    expect(stale.body.description).toMatch(/newer|replaced/);

    const refused = await ask(taker.token, bytes, 't-1');
    expect(refused.status).toBe(429);
    expect(refused.body.parameters.retry_after).toBeGreaterThanOrEqual(1);
    expect(refused.body.parameters.retry_after).toBeLessThanOrEqual(3);
    // The count is in the database: another instance on it refuses the same.
    const instance2 = await startApp(loadConfig({ ...h.env, ROLE: 'all' }), createLogger('silent'));
    try {
      expect((await ask(taker.token, bytes, 't-1', instance2.httpUrl!)).status).toBe(429);
    } finally {
      await instance2.close();
    }
    // The last challenge handed out still takes its one try.
    expect((await rt(taker.token, 'files/possession', { challengeId: third.challengeId, proof: proofFrom(bytes, third) })).status).toBe(200);

    // Another taker: once the window has passed, asks are handed challenges again.
    const late = await approvedBot(h, await h.jwt('tries-late'), 'tries_late');
    for (let i = 0; i < 3; i++) expect((await ask(late.token, bytes, 'l-1')).status).toBe(200);
    const locked = await ask(late.token, bytes, 'l-1');
    expect(locked.status).toBe(429);
    await new Promise((r) => setTimeout(r, locked.body.parameters.retry_after * 1000 + 100));
    const again = await ask(late.token, bytes, 'l-1');
    expect(again.status).toBe(200);
    const c = again.body.result.possessionChallenge as Challenge;
    expect((await rt(late.token, 'files/possession', { challengeId: c.challengeId, proof: proofFrom(bytes, c) })).status).toBe(200);
  });

  it('asks at the same time cannot pass the cap together', async () => {
    const owner = await approvedBot(h, await h.jwt('race-owner'), 'race_owner');
    const bytes = crypto.randomBytes(5_000);
    const cred = await ask(owner.token, bytes, 'o-1');
    await fetch(cred.body.result.uploadUrl, { method: 'PUT', body: new Uint8Array(bytes) });
    expect((await rt(owner.token, 'files/complete', { checksum: sha256(bytes), reuseRequestId: 'o-1' })).status).toBe(200);
    const takerJwt = await h.jwt('race-taker');
    const bots = [await approvedBot(h, takerJwt, 'race_taker_a'), await approvedBot(h, takerJwt, 'race_taker_b')];
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => ask(bots[i % 2]!.token, bytes, `r-${i}`)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 429, 429, 429, 429, 429, 429, 429]);
    // Only the newest of the three is still open.
    const open = [];
    for (const [i, a] of answers.entries()) {
      if (a.status !== 200) continue;
      const c = a.body.result.possessionChallenge as Challenge;
      open.push((await rt(bots[i % 2]!.token, 'files/possession', { challengeId: c.challengeId, proof: proofFrom(bytes, c) })).status);
    }
    expect(open.sort()).toEqual([200, 409, 409]);
  });

  it('the settings are validated', () => {
    expect(loadConfig({}).possession).toEqual({ maxTries: 5, tryWindowMs: 3_600_000 });
    let err: ConfigError | undefined;
    try {
      loadConfig({ POSSESSION_MAX_TRIES: '0', POSSESSION_TRY_WINDOW: 'forever' });
    } catch (e) {
      err = e as ConfigError;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const text = err!.problems.join('\n');
    expect(text).toContain('POSSESSION_MAX_TRIES');
    expect(text).toContain('POSSESSION_TRY_WINDOW');
  });
});
