/**
 * Where file bytes live, behind one interface: local disk on the embedded default
 * (src/blobs/local-disk-store.ts) or an S3-compatible bucket (src/blobs/s3-store.ts),
 * chosen by BLOB_STORE. Keys are
 * "staging/<upload id>" while an upload waits for `complete`, then
 * "blobs/<sha256>": content-addressed, shared by every logical file with that content.
 */
import type { Readable } from 'node:stream';

export interface Expected {
  size: number;
  /** Lowercase hex SHA-256. */
  sha256: string;
}

/** Why a PUT was refused: the bytes differ from what the upload credentials promised. */
export class BlobMismatch extends Error {
  constructor(readonly reason: 'TOO_LARGE' | 'SIZE_MISMATCH' | 'CHECKSUM_MISMATCH', message: string) {
    super(message);
  }
}

export interface BlobStore {
  /**
   * Streams `source` to `key`. With `verify` (always, on the service's own path)
   * the byte count and SHA-256 must equal `expected`, or nothing is kept and the
   * promise rejects with BlobMismatch. Memory stays flat whatever the size.
   */
  put(key: string, source: Readable, expected: Expected, opts?: { verify?: boolean }): Promise<void>;
  /**
   * Streams `source`, whose size is not known beforehand, to `key` and answers its byte
   * count and SHA-256 (a multipart upload on the Telegram surface: the upload flow is
   * asked for after the bytes are in). More than `maxBytes` rejects with BlobMismatch
   * TOO_LARGE at the first byte past it, and nothing is kept. Memory stays flat.
   */
  putMeasured(key: string, source: Readable, maxBytes: number): Promise<Expected>;
  /** Moves `from` to `to`; when `to` exists already (same content), drops `from`. */
  promote(from: string, to: string): Promise<void>;
  /**
   * Makes `to` a whole copy of `from`, which stays, unless `to` exists already (same
   * content: keys are content addresses). `to` never appears partly written.
   */
  copy(from: string, to: string): Promise<void>;
  /** Size in bytes, or undefined when there is no such object. */
  size(key: string): Promise<number | undefined>;
  /** Streams the object (or the inclusive byte range). */
  read(key: string, range?: { start: number; end: number }): Readable;
  delete(key: string): Promise<void>;
  /** Deletes staging objects last written before `before` (epoch ms); returns how many. */
  sweepStaging(before: number): Promise<number>;
}

export const stagingKey = (uploadId: string) => `staging/${uploadId}`;
export const blobKey = (sha256: string) => `blobs/${sha256}`;

/**
 * Feeds `hash` the bytes of `ranges` of `key`, in order, reading up to `parallel` ranges at
 * once: a possession proof reads 144 small ranges, one round trip each on an object store.
 */
export async function hashRanges(
  store: BlobStore, key: string, ranges: readonly { offset: number; length: number }[], hash: { update(b: Buffer): unknown }, parallel = 16,
): Promise<void> {
  const read = async (r: { offset: number; length: number }) => {
    if (r.length <= 0) return Buffer.alloc(0);
    const parts: Buffer[] = [];
    for await (const chunk of store.read(key, { start: r.offset, end: r.offset + r.length - 1 })) parts.push(chunk as Buffer);
    return Buffer.concat(parts);
  };
  const pending: Promise<Buffer>[] = [];
  let next = 0;
  while (next < ranges.length && pending.length < parallel) pending.push(read(ranges[next++]!));
  while (pending.length) {
    const bytes = await pending.shift()!;
    if (next < ranges.length) pending.push(read(ranges[next++]!));
    hash.update(bytes);
  }
}
