/**
 * The blob store on an S3-compatible bucket (BLOB_STORE=s3): AWS S3, or any store
 * speaking its API (MinIO, Ceph RGW, SeaweedFS, s3proxy; the tests run s3proxy,
 * scripts/s3proxy.sh). Through @aws-sdk/client-s3, AWS's own client: kept current
 * with S3's API (checksums, signing), streams bodies of a known length without
 * buffering, and lib-storage makes multipart uploads of bodies of unknown length.
 *
 * The promises of the interface hold as on local disk:
 *  - A verified PUT streams to its key with Content-Length and x-amz-checksum-sha256,
 *    and holds back its last chunk until the byte count and the SHA-256 it computed
 *    itself match: on a mismatch the request is aborted before its body is whole, so
 *    the store never commits the object, whether or not it checks the checksum too.
 *  - An object becomes visible whole or not at all (S3's PUT, CopyObject and
 *    CompleteMultipartUpload are atomic); `copy` makes content addresses.
 *  - Byte ranges are ranged GETs; sweepStaging lists and deletes old staging objects
 *    and aborts multipart uploads left behind.
 * Errors of the store leave as UNAVAILABLE (503) with the operation and the S3 error
 * code alone: an SDK error carries the request, whose signature is not for logs.
 */
import crypto from 'node:crypto';
import { Agent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand, CopyObjectCommand, DeleteObjectCommand, DeleteObjectsCommand, GetObjectCommand, HeadBucketCommand,
  HeadObjectCommand, ListMultipartUploadsCommand, ListObjectsV2Command, PutObjectCommand, S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { Logger } from 'pino';
import { ApiError, Code } from '../errors.js';
import { BlobMismatch, type BlobStore, type Expected } from './blob-store.js';
import { scavenging } from './scavenging.js';

const KEY = /^(staging|blobs)\/[A-Za-z0-9_-]{1,128}$/;
/** Part size of multipart uploads (bodies of unknown length): memory per upload is about twice this. */
const PART_BYTES = 8 * 1024 * 1024;

export interface S3StoreOptions {
  /** The store's URL; none: AWS S3 of `region`. */
  endpoint?: string;
  bucket: string;
  region: string;
  /** None: the AWS SDK's default chain (AWS_* variables, profile, instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** Bucket in the path (http://host/bucket/key), as most self-hosted stores need. */
  forcePathStyle: boolean;
  /** Connections kept to the store (default 64). */
  maxSockets?: number;
  /** Where the SDK's own remarks go (at debug: the store's errors reach callers as ApiErrors). */
  logger?: Pick<Logger, 'debug'>;
}

/** An S3 error as a status the API can answer, naming no credential. */
function unavailable(op: string, err: unknown): ApiError {
  if (err instanceof ApiError || err instanceof BlobMismatch) return err as ApiError;
  const e = err as { name?: string; Code?: string; $metadata?: { httpStatusCode?: number } };
  const code = e?.Code ?? e?.name ?? 'Error';
  const status = e?.$metadata?.httpStatusCode;
  return new ApiError(Code.UNAVAILABLE, `the file store failed to ${op}: ${code}${status ? ` (${status})` : ''}; retry later`);
}

const notFound = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NotFound' || e?.name === 'NoSuchKey' || e?.$metadata?.httpStatusCode === 404;
};

/**
 * Passes `expected.size` bytes through, hashing them when `verify`, and keeps the last
 * chunk back until the end: only when the count and the digest match does it let that
 * chunk go, so the request carrying the body is whole only for the right bytes.
 */
function holdingLast(expected: Expected, verify: boolean): Transform {
  const hash = verify ? crypto.createHash('sha256') : undefined;
  let count = 0;
  let held: Buffer | undefined;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      count += chunk.length;
      if (count > expected.size) return done(new BlobMismatch('TOO_LARGE', `more than the ${expected.size} bytes announced`));
      hash?.update(chunk);
      const out = held;
      held = chunk;
      done(null, out);
    },
    flush(done) {
      if (count !== expected.size) return done(new BlobMismatch('SIZE_MISMATCH', `received ${count} bytes, ${expected.size} were announced`));
      if (hash && hash.digest('hex') !== expected.sha256) {
        return done(new BlobMismatch('CHECKSUM_MISMATCH', 'the SHA-256 of the bytes does not match checksum'));
      }
      done(null, held);
    },
  });
}

export function createS3Store(opts: S3StoreOptions): BlobStore & { client: S3Client; ping(): Promise<void> } {
  const agentOpts = { keepAlive: true, maxSockets: opts.maxSockets ?? 64 };
  const client = new S3Client({
    endpoint: opts.endpoint,
    region: opts.region,
    credentials: opts.credentials,
    forcePathStyle: opts.forcePathStyle,
    // Checksums only where S3 requires them, and then as plain headers: the service sets
    // x-amz-checksum-sha256 itself (no aws-chunked trailers, which not every store reads).
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    requestHandler: {
      httpAgent: new Agent(agentOpts),
      httpsAgent: new HttpsAgent(agentOpts),
      connectionTimeout: 5000,
      // A socket idle this long is given up (a body that stops arriving included).
      requestTimeout: 60_000,
    },
    maxAttempts: 3,
    // Not the console: an aborted upload is a refusal the caller answers, not a warning.
    logger: { trace() {}, debug() {}, info() {}, warn: (...m: unknown[]) => opts.logger?.debug({ component: 's3' }, m.map(String).join(' ')), error: (...m: unknown[]) => opts.logger?.debug({ component: 's3' }, m.map(String).join(' ')) },
  });
  const Bucket = opts.bucket;
  const checked = (key: string) => {
    // Keys are built by the service, never taken from a request; this is a last guard.
    if (!KEY.test(key)) throw new Error(`invalid blob key ${JSON.stringify(key)}`);
    return key;
  };

  async function exists(key: string): Promise<boolean> {
    try {
      await client.send(new HeadObjectCommand({ Bucket, Key: key }));
      return true;
    } catch (err) {
      if (notFound(err)) return false;
      throw unavailable('read an object', err);
    }
  }

  async function deleteMany(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000);
      const res = await client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }));
      if (res.Errors?.length) throw new Error(`the file store kept ${res.Errors.length} objects it was asked to delete: ${res.Errors[0]!.Code}`);
    }
  }

  async function copy(from: string, to: string): Promise<void> {
    if (await exists(checked(to))) return;
    try {
      await client.send(new CopyObjectCommand({ Bucket, Key: to, CopySource: `${Bucket}/${checked(from)}` }));
    } catch (err) {
      // `from` gone and `to` there: a concurrent completion of the same upload did it.
      if (notFound(err) && await exists(to)) return;
      throw unavailable('copy an object', err);
    }
  }

  async function remove(key: string): Promise<void> {
    try {
      await client.send(new DeleteObjectCommand({ Bucket, Key: checked(key) }));
    } catch (err) {
      if (!notFound(err)) throw unavailable('delete an object', err);
    }
  }

  return {
    client,

    /** Fails (UNAVAILABLE) unless the bucket answers. */
    async ping() {
      try {
        await client.send(new HeadBucketCommand({ Bucket }));
      } catch (err) {
        throw unavailable(`reach bucket ${Bucket}`, err);
      }
    },

    async put(key, source, expected, putOpts = {}) {
      const verify = putOpts.verify ?? true;
      const abort = new AbortController();
      const guard = holdingLast(expected, verify);
      let failure: unknown;
      const fail = (err: unknown) => {
        failure ??= err;
        abort.abort();
      };
      // The source's end of the pipe: an error (a mismatch, the client gone) aborts the PUT.
      const body = new PassThrough({ highWaterMark: 1 << 20 });
      const piped = pipeline(source, guard, scavenging(), body).catch(fail);
      try {
        await client.send(new PutObjectCommand({
          Bucket,
          Key: checked(key),
          Body: body,
          ContentLength: expected.size,
          ...(verify ? { ChecksumSHA256: Buffer.from(expected.sha256, 'hex').toString('base64') } : {}),
        }), { abortSignal: abort.signal });
      } catch (err) {
        // Failed before the source did: the store refused or went away. Ending the body then
        // breaks the pipe from the source, which is no failure of the upload's client.
        const source = failure;
        body.destroy();
        await piped;
        if (source) throw source;
        if ((err as { name?: string }).name === 'BadDigest') throw new BlobMismatch('CHECKSUM_MISMATCH', 'the SHA-256 of the bytes does not match checksum');
        throw unavailable('store an upload', err);
      }
      await piped;
      if (failure) {
        // Cannot happen (the body was whole only after every check); never leave it behind.
        await client.send(new DeleteObjectCommand({ Bucket, Key: key })).catch(() => {});
        throw failure;
      }
    },

    async putMeasured(key, source, maxBytes) {
      const hash = crypto.createHash('sha256');
      let size = 0;
      const counter = new Transform({
        transform(chunk: Buffer, _enc, done) {
          size += chunk.length;
          if (size > maxBytes) return done(new BlobMismatch('TOO_LARGE', `more than ${maxBytes} bytes`));
          hash.update(chunk);
          done(null, chunk);
        },
      });
      let failure: unknown;
      const body = new PassThrough({ highWaterMark: 1 << 20 });
      const upload = new Upload({
        client,
        params: { Bucket, Key: checked(key), Body: body },
        partSize: PART_BYTES,
        queueSize: 1,
        // A failed upload aborts its multipart upload: no part is left, no object appears.
        leavePartsOnError: false,
      });
      const piped = pipeline(source, counter, scavenging(), body).catch((err) => {
        failure ??= err;
        void upload.abort().catch(() => {});
      });
      try {
        await upload.done();
      } catch (err) {
        const source = failure; // as in put: a pipe broken by ending the body is not the source's failure
        body.destroy();
        await piped;
        throw source ?? unavailable('store an upload', err);
      }
      await piped;
      if (failure) {
        await client.send(new DeleteObjectCommand({ Bucket, Key: key })).catch(() => {});
        throw failure;
      }
      return { size, sha256: hash.digest('hex') };
    },

    copy,

    async promote(from, to) {
      await copy(from, to);
      await remove(from);
    },

    async size(key) {
      try {
        return (await client.send(new HeadObjectCommand({ Bucket, Key: checked(key) }))).ContentLength;
      } catch (err) {
        if (notFound(err)) return undefined;
        throw unavailable('read an object', err);
      }
    },

    read(key, range) {
      const abort = new AbortController();
      const out = scavenging();
      out.on('close', () => abort.abort()); // the reader went away: stop the GET
      client.send(new GetObjectCommand({ Bucket, Key: checked(key), Range: range ? `bytes=${range.start}-${range.end}` : undefined }), { abortSignal: abort.signal })
        .then((res) => pipeline(res.Body as Readable, out))
        .catch((err) => out.destroy(unavailable('read an object', err)));
      return out;
    },

    delete: remove,

    async sweepStaging(before) {
      const old: string[] = [];
      let ContinuationToken: string | undefined;
      do {
        const page = await client.send(new ListObjectsV2Command({ Bucket, Prefix: 'staging/', ContinuationToken }));
        for (const o of page.Contents ?? []) if (o.Key && o.LastModified && o.LastModified.getTime() < before) old.push(o.Key);
        ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (ContinuationToken);
      await deleteMany(old);
      // Multipart uploads a process left when it died mid-body (their parts cost storage, invisibly).
      let KeyMarker: string | undefined;
      let UploadIdMarker: string | undefined;
      do {
        const page = await client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: 'staging/', KeyMarker, UploadIdMarker }));
        for (const u of page.Uploads ?? []) {
          if (u.Key && u.UploadId && u.Initiated && u.Initiated.getTime() < before) {
            await client.send(new AbortMultipartUploadCommand({ Bucket, Key: u.Key, UploadId: u.UploadId })).catch((err) => {
              if (!notFound(err)) throw err;
            });
          }
        }
        KeyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
        UploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
      } while (KeyMarker);
      return old.length;
    },
  };
}
