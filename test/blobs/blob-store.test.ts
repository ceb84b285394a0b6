/**
 * The blob store's contract, on both stores: the local disk and an S3-compatible bucket
 * on a real server (s3proxy, scripts/s3proxy.sh). Verified PUTs keep nothing on a
 * mismatch or an interrupted body (the bucket is listed to prove it), measured PUTs
 * (multipart past 8 MiB) answer size and SHA-256, ranges read what they say, copies are
 * whole, and the sweep removes old staging objects only.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobMismatch, type BlobStore } from '../../src/blobs/blob-store.js';
import { createLocalDiskStore } from '../../src/blobs/local-disk-store.js';
import { createS3Store } from '../../src/blobs/s3-store.js';
import { createTestBucket, TEST_S3_CREDENTIALS, type TestBucket } from '../helpers/s3.js';

const sha256 = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');
const key = (prefix: 'staging' | 'blobs') => `${prefix}/${crypto.randomBytes(8).toString('hex')}`;
/** `bytes` in chunks of `size` (a socket's shape). */
const chunks = (bytes: Buffer, size = 64 * 1024) => Readable.from(Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size)));
async function readAll(s: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of s) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

interface Subject { store: BlobStore; keys(prefix: string): Promise<string[]>; pendingMultipart(): Promise<string[]>; close(): Promise<void> }

const subjects: Record<string, () => Promise<Subject>> = {
  'local disk': async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-blobs-'));
    const store = createLocalDiskStore(dir);
    const list = (p: string) => fs.readdirSync(path.join(dir, p)).map((n) => `${p}/${n}`);
    return {
      store,
      keys: async (prefix) => (prefix ? list(prefix.replace(/\/$/, '')) : [...list('staging'), ...list('blobs'), ...list('tmp')]).sort(),
      pendingMultipart: async () => [],
      close: async () => fs.rmSync(dir, { recursive: true, force: true }),
    };
  },
  's3 (s3proxy)': async () => {
    const bucket: TestBucket = await createTestBucket();
    const store = createS3Store({ endpoint: bucket.endpoint, bucket: bucket.name, region: 'us-east-1', credentials: TEST_S3_CREDENTIALS, forcePathStyle: true });
    return {
      store,
      keys: (prefix) => bucket.keys(prefix),
      pendingMultipart: () => bucket.pendingMultipart(),
      close: async () => {
        (store as unknown as { client: { destroy(): void } }).client.destroy();
        await bucket.drop();
      },
    };
  },
};

describe.each(Object.keys(subjects))('blob store: %s', (name) => {
  let s: Subject;
  beforeAll(async () => {
    s = await subjects[name]!();
  }, 300_000);
  afterAll(async () => {
    await s?.close();
  });

  it('stores verified bytes, and reads them whole and by inclusive byte ranges', async () => {
    const bytes = crypto.randomBytes(3 * 1024 * 1024 + 17);
    const k = key('staging');
    await s.store.put(k, chunks(bytes), { size: bytes.length, sha256: sha256(bytes) });
    expect(await s.store.size(k)).toBe(bytes.length);
    expect((await readAll(s.store.read(k))).equals(bytes)).toBe(true);
    for (const [start, end] of [[0, 0], [10, 4105], [bytes.length - 5, bytes.length - 1]] as const) {
      expect((await readAll(s.store.read(k, { start, end }))).equals(bytes.subarray(start, end + 1))).toBe(true);
    }
    expect(await s.store.size(key('blobs'))).toBeUndefined();
    await s.store.delete(k);
    expect(await s.store.size(k)).toBeUndefined();
    await s.store.delete(k); // deleting what is gone is no error
  });

  it('keeps nothing when the bytes are not the ones announced: checksum, too many, too few, an interrupted body', async () => {
    const bytes = crypto.randomBytes(2 * 1024 * 1024);
    const before = await s.keys('');
    const refused = async (source: Readable, expected: { size: number; sha256: string }) => {
      const k = key('staging');
      const err = await s.store.put(k, source, expected).then(() => undefined, (e: unknown) => e);
      expect(await s.store.size(k)).toBeUndefined();
      return err;
    };
    const other = Buffer.from(bytes);
    other[other.length - 1] = other[other.length - 1]! ^ 1; // differs in the very last byte
    expect(await refused(chunks(other), { size: bytes.length, sha256: sha256(bytes) })).toMatchObject({ reason: 'CHECKSUM_MISMATCH' });
    expect(await refused(chunks(bytes), { size: bytes.length - 1, sha256: sha256(bytes) })).toMatchObject({ reason: 'TOO_LARGE' });
    expect(await refused(chunks(bytes.subarray(1)), { size: bytes.length, sha256: sha256(bytes) })).toMatchObject({ reason: 'SIZE_MISMATCH' });
    const broken = new Readable({ read() {} });
    broken.push(bytes.subarray(0, 1024 * 1024));
    setTimeout(() => broken.destroy(new Error('client went away')), 50);
    const err = await refused(broken, { size: bytes.length, sha256: sha256(bytes) });
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(BlobMismatch);
    expect(await s.keys('')).toEqual(before);
    expect(await s.pendingMultipart()).toEqual([]);
  });

  it('measures a body of unknown length (multipart past 8 MiB), and keeps nothing past the limit', async () => {
    for (const n of [0, 1000, 9 * 1024 * 1024 + 3]) {
      const bytes = crypto.randomBytes(n);
      const k = key('staging');
      expect(await s.store.putMeasured(k, chunks(bytes), 20 * 1024 * 1024)).toEqual({ size: n, sha256: sha256(bytes) });
      expect((await readAll(s.store.read(k))).equals(bytes)).toBe(true);
      await s.store.delete(k);
    }
    const k = key('staging');
    const big = crypto.randomBytes(10 * 1024 * 1024);
    await expect(s.store.putMeasured(k, chunks(big), 9 * 1024 * 1024)).rejects.toMatchObject({ reason: 'TOO_LARGE' });
    expect(await s.store.size(k)).toBeUndefined();
    expect(await s.pendingMultipart()).toEqual([]);
  });

  it('copies whole, keeps an existing content address, and promotes (copy, then the source goes)', async () => {
    const bytes = crypto.randomBytes(100_000);
    const a = key('staging');
    const b = key('blobs');
    await s.store.put(a, chunks(bytes), { size: bytes.length, sha256: sha256(bytes) });
    await s.store.copy(a, b);
    await s.store.copy(a, b); // `to` exists: nothing to do
    expect((await readAll(s.store.read(b))).equals(bytes)).toBe(true);
    expect(await s.store.size(a)).toBe(bytes.length);
    await s.store.delete(a);
    await s.store.copy(a, b); // `from` gone, `to` there: a concurrent completion did it
    const c = key('staging');
    await s.store.put(c, chunks(bytes), { size: bytes.length, sha256: sha256(bytes) });
    const d = key('blobs');
    await s.store.promote(c, d);
    expect(await s.store.size(c)).toBeUndefined();
    expect(await s.store.size(d)).toBe(bytes.length);
    await expect(s.store.copy(key('staging'), key('blobs'))).rejects.toThrow();
  });

  it('sweeps staging objects written before the cut-off, and no content address', async () => {
    const bytes = crypto.randomBytes(10);
    const staged = key('staging');
    const blob = key('blobs');
    await s.store.put(staged, chunks(bytes), { size: 10, sha256: sha256(bytes) });
    await s.store.put(blob, chunks(bytes), { size: 10, sha256: sha256(bytes) });
    expect(await s.store.sweepStaging(Date.now() - 60_000)).toBe(0);
    expect(await s.store.size(staged)).toBe(10);
    expect(await s.store.sweepStaging(Date.now() + 5_000)).toBeGreaterThanOrEqual(1);
    expect(await s.store.size(staged)).toBeUndefined();
    expect(await s.store.size(blob)).toBe(10);
    expect(await s.keys('staging/')).toEqual([]);
  });
});
