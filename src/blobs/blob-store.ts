/**
 * Where file bytes live, behind one interface: local disk on the embedded default
 * (src/blobs/local-disk-store.ts); an object store can take its place. Keys are
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
