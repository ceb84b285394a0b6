/**
 * Files: the upload flow (credentials → PUT to a signed URL → complete), content
 * reuse (a trusted hit, or a possession challenge first when another account
 * brought the content) and getFile with a signed download URL. Contract §6.
 */
import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { imageSize } from 'image-size';
import { randomBase62 } from '../auth/bot-token.js';
import { blobKey, hashRanges, stagingKey, type BlobStore } from '../blobs/blob-store.js';
import type { UrlSigner } from '../blobs/signed-token.js';
import { ApiError, Code } from '../errors.js';
import type { File } from '../gen/botplatform/v1/update.js';
import type { UploadCredentials } from '../gen/botplatform/v1/runtime_service.js';
import { constraintsOf } from '../gen/constraints.js';
import { BlobGone, type FileRecord, type FileSpec, type FilesRepo, type ImageSize } from '../storage/files-repo.js';
import { PUBLIC_BASE_URL_METADATA, type CallMetadata, type RuntimeRpc } from './rpc.js';
import * as check from './validation.js';

export interface FilesDeps {
  files: FilesRepo;
  blobs: BlobStore;
  signer: UrlSigner;
  maxFileBytes: number;
  /** How long upload and download URLs work. */
  urlTtlMs: number;
  /** Base of the URLs handed out; else the gateway's, as it tells in call metadata. */
  publicBaseUrl?: string;
  /** Possession challenges an account may be handed per content and window; default 5 per hour. */
  possession?: { maxTries: number; tryWindowMs: number };
  /** UNREFERENCED_BLOB_RETENTION: how long content no file refers to keeps its bytes (default a day). */
  unreferencedBlobRetentionMs?: number;
  now?: () => number;
}


/** The limits of the files requests, declared in the protos. */
const LIMITS = {
  create: {
    fileName: constraintsOf('botplatform.v1.CreateUploadCredentialsRequest', 'file_name'),
    fileSize: constraintsOf('botplatform.v1.CreateUploadCredentialsRequest', 'file_size'),
    checksum: constraintsOf('botplatform.v1.CreateUploadCredentialsRequest', 'checksum'),
    fileType: constraintsOf('botplatform.v1.CreateUploadCredentialsRequest', 'file_type'),
    reuseRequestId: constraintsOf('botplatform.v1.CreateUploadCredentialsRequest', 'reuse_request_id'),
  },
  complete: {
    checksum: constraintsOf('botplatform.v1.CompleteUploadRequest', 'checksum'),
    reuseRequestId: constraintsOf('botplatform.v1.CompleteUploadRequest', 'reuse_request_id'),
  },
  proof: constraintsOf('botplatform.v1.ProvePossessionRequest', 'proof'),
};
const HEX = 'SHA-256 hex string';
const CHALLENGE_TTL_MS = 10 * 60_000;

/**
 * What a possession challenge reads of a file. Up to `wholeFileBytes` the whole
 * file: one range, answerable only with every byte. Larger files are cut into
 * blocks of `rangeBytes` (4 KiB, growing with the file so that it is about
 * `targetBlocks` blocks, up to 64 KiB) and `ranges` distinct blocks are drawn
 * uniformly. A taker missing a tenth of the bytes misses some byte of at least a
 * tenth of the blocks however it chose them, so it passes with probability at most
 * (0.9 + 1/(10·blocks))^ranges < 2.8e-7 per try (blocks ≥ 257); the test computes
 * the exact bound from these parameters.
 */
export const POSSESSION_SAMPLE = {
  wholeFileBytes: 1024 * 1024,
  ranges: 144,
  minRangeBytes: 4096,
  maxRangeBytes: 64 * 1024,
  targetBlocks: 65_536,
} as const;

/** The sample of a `size`-byte file: block length, number of blocks, blocks drawn. */
export function possessionSample(size: number): { rangeBytes: number; blocks: number; ranges: number } {
  const s = POSSESSION_SAMPLE;
  if (size <= s.wholeFileBytes) return { rangeBytes: size, blocks: 1, ranges: 1 };
  const scaled = Math.ceil(size / s.targetBlocks / s.minRangeBytes) * s.minRangeBytes;
  const rangeBytes = Math.min(s.maxRangeBytes, Math.max(s.minRangeBytes, scaled));
  return { rangeBytes, blocks: Math.ceil(size / rangeBytes), ranges: s.ranges };
}

function sampleRanges(size: number): { offset: number; length: number }[] {
  const { rangeBytes, blocks, ranges } = possessionSample(size);
  const picked = new Set<number>();
  while (picked.size < ranges) picked.add(crypto.randomInt(0, blocks));
  return [...picked].sort((a, b) => a - b).map((b) => ({ offset: b * rangeBytes, length: Math.min(rangeBytes, size - b * rangeBytes) }));
}

const newFileId = () => `file_${randomBase62(24)}`;

/**
 * A blob sweep's claim older than this is taken to be of a sweep that stopped (a crash
 * between its claim and the row's removal): another sweep finishes the removal.
 */
const STALE_BLOB_CLAIM_MS = 10 * 60_000;
/** How long a completion waits for the blob sweep to finish removing the same content (then 503, retry). */
const BLOB_REMOVAL_WAIT_MS = 3000;

/** Same for every file with this content; not usable to send or download. */
export const fileUniqueId = (checksum: string) =>
  `fu_${crypto.createHash('sha256').update(`file_unique_id:${checksum}`).digest('base64url').slice(0, 22)}`;

export function toFile(f: FileRecord, downloadUrl?: string): File {
  return {
    fileId: f.id,
    fileUniqueId: fileUniqueId(f.checksum),
    fileName: f.fileName,
    fileSize: f.size,
    mimeType: f.mimeType,
    checksum: f.checksum,
    downloadUrl,
    width: f.image?.width,
    height: f.image?.height,
  };
}

/** How much of an image is read for its header: its dimensions are within the first bytes of every format image-size reads (a JPEG's frame header comes after its EXIF block, at most 64 KiB). */
const IMAGE_HEADER_BYTES = 256 * 1024;

/**
 * An image's width and height, from its header (image-size: PNG, JPEG, GIF, WebP, BMP,
 * TIFF, AVIF/HEIF, SVG and others); undefined for a file that is not an image/* or whose
 * header does not say.
 */
export async function readImageSize(blobs: Pick<BlobStore, 'read'>, key: string, mimeType: string, size: number): Promise<ImageSize | undefined> {
  if (!mimeType.startsWith('image/') || size <= 0) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of blobs.read(key, { start: 0, end: Math.min(size, IMAGE_HEADER_BYTES) - 1 })) chunks.push(chunk as Buffer);
  try {
    const { width, height } = imageSize(new Uint8Array(Buffer.concat(chunks)));
    return width > 0 && height > 0 ? { width, height } : undefined;
  } catch {
    return undefined;
  }
}

type Hex = typeof LIMITS.proof;

/** A hex digest of its exact length (min_length = max_length). */
function hexDigest(v: check.Violations, field: string, value: string, limits: Hex): void {
  const length = check.charLength(value);
  if (length < limits.minLength || length > limits.maxLength || !limits.pattern.test(value)) {
    v.add(field, 'INVALID_FORMAT', `must be a ${limits.maxLength}-character ${HEX}`);
  }
}

function checksumOf(v: check.Violations, value: string, limits: Hex): string {
  if (!value) v.add('checksum', 'REQUIRED', `is required (${limits.maxLength}-character SHA-256 hex of the whole file)`);
  else hexDigest(v, 'checksum', value, limits);
  return value.toLowerCase();
}

function reuseIdOf(v: check.Violations, value: string, limits: typeof LIMITS.create.reuseRequestId): string | null {
  if (!value) return null;
  if (check.charLength(value) > limits.maxLength || !limits.pattern.test(value)) {
    v.add('reuseRequestId', 'INVALID_FORMAT', `must be 1 to ${limits.maxLength} of A-Z a-z 0-9 . _ : -`);
  }
  return value;
}

type FilesRpc = Pick<RuntimeRpc, 'createUploadCredentials' | 'completeUpload' | 'provePossession' | 'getFile'>;

export function createFilesService(deps: FilesDeps): FilesRpc & {
  fileForSend(botId: string, fileId: string, field?: string): Promise<FileRecord>;
  sweep(): Promise<void>;
  sweepUnreferencedBlobs(limit?: number): Promise<number>;
} {
  const now = deps.now ?? Date.now;
  const tries = deps.possession ?? { maxTries: 5, tryWindowMs: 3_600_000 };
  const baseUrl = (md: CallMetadata) => (deps.publicBaseUrl ?? md[PUBLIC_BASE_URL_METADATA] ?? '').replace(/\/+$/, '');
  const hit = (f: FileRecord): UploadCredentials => ({
    uploadRequired: false, headers: {}, fileId: f.id, file: toFile(f), possessionChallenge: undefined,
  });

  /** A new challenge, one of the account's limited tries at this content (RESOURCE_EXHAUSTED past them). */
  async function challenge(spec: FileSpec): Promise<UploadCredentials> {
    const ranges = sampleRanges(spec.size);
    const id = `pc_${randomBase62(24)}`;
    const nonce = crypto.randomBytes(16).toString('hex');
    const at = now();
    const expiresAt = at + CHALLENGE_TTL_MS;
    const issued = await deps.files.issueChallenge({ id, ...spec, nonce, ranges, expiresAt }, at,
      { maxTries: tries.maxTries, windowMs: tries.tryWindowMs });
    if (!issued.ok) {
      const retryAfterSeconds = Math.max(1, Math.ceil((issued.retryAt - at) / 1000));
      throw new ApiError(Code.RESOURCE_EXHAUSTED,
        `too many possession challenges for this content: at most ${tries.maxTries} per ${tries.tryWindowMs / 1000}s, answered or not; `
        + `retry after ${retryAfterSeconds}s, or upload the bytes (reuseExisting: false)`, { retryAfterSeconds });
    }
    return {
      uploadRequired: false,
      headers: {},
      file: undefined,
      possessionRequired: true,
      possessionChallenge: { challengeId: id, nonce, ranges, expiresAt: Math.floor(expiresAt / 1000) },
    };
  }

  /** A new file on stored content, or undefined when the blob sweep has removed it or is removing it. */
  async function reuse(spec: FileSpec): Promise<FileRecord | undefined> {
    try {
      const image = await readImageSize(deps.blobs, blobKey(spec.checksum), spec.mimeType, spec.size).catch(async (err) => {
        if (await deps.blobs.size(blobKey(spec.checksum)) === undefined) throw new BlobGone(spec.checksum, true);
        throw err;
      });
      return await deps.files.addFile(newFileId(), spec, now(), image);
    } catch (err) {
      if (err instanceof BlobGone) return undefined;
      throw err;
    }
  }

  return {
    async createUploadCredentials(req, { principal, metadata }) {
      const v = new check.Violations();
      check.fileName(v, 'fileName', req.fileName, LIMITS.create.fileName);
      // The upper bound is the deployment's (MAX_FILE_BYTES), not the proto's.
      const minSize = LIMITS.create.fileSize.minimum;
      if (!(req.fileSize >= minSize && req.fileSize <= deps.maxFileBytes)) {
        v.add('fileSize', 'OUT_OF_RANGE', `must be ${minSize} to ${deps.maxFileBytes} bytes`);
      }
      const checksum = checksumOf(v, req.checksum, LIMITS.create.checksum);
      const fileType = LIMITS.create.fileType;
      if (req.fileType && (check.charLength(req.fileType) > fileType.maxLength || !fileType.pattern.test(req.fileType))) {
        v.add('fileType', 'INVALID_FORMAT', 'must be a MIME type such as image/png');
      }
      const mimeType = req.fileType ? req.fileType.toLowerCase() : 'application/octet-stream';
      const reuseRequestId = reuseIdOf(v, req.reuseRequestId, LIMITS.create.reuseRequestId);
      v.throwIfAny();
      const spec: FileSpec = {
        botId: principal.botId, accountId: principal.ownerId, checksum, size: req.fileSize, fileName: req.fileName, mimeType, reuseRequestId,
      };

      // The same reuseRequestId always answers the same file.
      if (reuseRequestId) {
        const done = await deps.files.fileByReuseId(principal.botId, reuseRequestId);
        if (done) {
          if (done.checksum !== checksum || done.size !== spec.size) {
            throw ApiError.failedPrecondition('reuseRequestId was already used for a different file; a new upload needs a new reuseRequestId');
          }
          return { result: hit(done) };
        }
      }
      const wantsReuse = req.reuseExisting !== false && (reuseRequestId !== null || req.reuseExisting === true);
      if (wantsReuse) {
        const size = await deps.files.blobSize(checksum);
        if (size !== undefined) {
          if (size !== spec.size) throw ApiError.invalid('fileSize', 'SIZE_MISMATCH', 'does not match the size of the content with this checksum');
          if (await deps.files.isBlobOwner(checksum, principal.ownerId)) {
            // Content the blob sweep removes meanwhile (no file referred to it for
            // UNREFERENCED_BLOB_RETENTION) is no hit: its bytes are asked for below.
            const file = await reuse(spec);
            if (file) return { result: hit(file) };
          } else {
            return { result: await challenge(spec) };
          }
        }
      }

      let upload = await deps.files.openUpload(spec, now());
      if (!upload) {
        upload = { id: `up_${randomBase62(24)}`, ...spec, fileId: null, createdAt: now(), expiresAt: now() + deps.urlTtlMs };
        await deps.files.createUpload(upload);
      }
      const exp = Math.floor(upload.expiresAt / 1000);
      const token = deps.signer.sign({ kind: 'upload', id: upload.id, size: spec.size, sha256: checksum, exp });
      const credentials: UploadCredentials = {
        uploadRequired: true,
        uploadUrl: `${baseUrl(metadata)}/api/v1/files/upload/${token}`,
        method: 'PUT',
        headers: { 'Content-Type': mimeType },
        expiresAt: exp,
        file: undefined,
        possessionChallenge: undefined,
      };
      return { result: credentials };
    },

    async completeUpload(req, { principal }) {
      const v = new check.Violations();
      const checksum = checksumOf(v, req.checksum, LIMITS.complete.checksum);
      const reuseRequestId = reuseIdOf(v, req.reuseRequestId, LIMITS.complete.reuseRequestId);
      v.throwIfAny();
      if (reuseRequestId) {
        const done = await deps.files.fileByReuseId(principal.botId, reuseRequestId);
        if (done && done.checksum === checksum) return { result: { fileId: done.id, file: toFile(done) } };
      }
      const upload = await deps.files.uploadFor(principal.botId, checksum, reuseRequestId);
      if (!upload) throw new ApiError(Code.NOT_FOUND, 'no upload with this checksum: call files/upload-credentials first');
      if (upload.fileId) {
        const done = await deps.files.fileOfBot(principal.botId, upload.fileId);
        if (done) return { result: { fileId: done.id, file: toFile(done) } };
      }
      const staged = await deps.blobs.size(stagingKey(upload.id));
      if (staged === undefined) {
        throw ApiError.failedPrecondition(upload.expiresAt <= now()
          ? 'the upload expired before its bytes arrived: ask files/upload-credentials again'
          : 'the bytes have not been uploaded: PUT them to uploadUrl first');
      }
      const image = await readImageSize(deps.blobs, stagingKey(upload.id), upload.mimeType, staged);
      // The staged bytes go to their content address before the transaction (no store call
      // inside it) and leave staging only after it commits: a failed commit can be retried.
      // While the blob sweep removes the same content (claimed: no file referred to it for
      // UNREFERENCED_BLOB_RETENTION), the copy may have found its old bytes: wait for the
      // removal, then copy again.
      let file: FileRecord | undefined;
      for (const waitUntil = now() + BLOB_REMOVAL_WAIT_MS; !file;) {
        await deps.blobs.copy(stagingKey(upload.id), blobKey(checksum));
        try {
          file = await deps.files.completeUpload(upload, newFileId(), now(), image);
        } catch (err) {
          if (!(err instanceof BlobGone)) throw err;
          if (now() >= waitUntil) {
            throw new ApiError(Code.UNAVAILABLE, 'the same content is being removed from storage just now: complete the upload again in a few seconds', { retryAfterSeconds: 5 });
          }
          await sleep(100);
        }
      }
      // A file refers to the content from the commit on, so no sweep claims it any more; one
      // that removed it between the copy and the commit (its claim ended before the
      // transaction) took the bytes the copy found there: they are copied again.
      if (await deps.blobs.size(blobKey(checksum)) === undefined) await deps.blobs.copy(stagingKey(upload.id), blobKey(checksum));
      await deps.blobs.delete(stagingKey(upload.id));
      return { result: { fileId: file.id, file: toFile(file) } };
    },

    async provePossession(req, { principal }) {
      const v = new check.Violations();
      if (!req.challengeId) v.add('challengeId', 'REQUIRED', 'is required');
      if (!req.proof) v.add('proof', 'REQUIRED', 'is required');
      else hexDigest(v, 'proof', req.proof, LIMITS.proof);
      v.throwIfAny();
      const c = await deps.files.takeChallenge(principal.botId, req.challengeId, now());
      if (c === 'NOT_FOUND') throw ApiError.notFound('possession challenge');
      if (c === 'USED') {
        throw ApiError.failedPrecondition('this challenge was already tried, or replaced by a newer one: ask files/upload-credentials for a new one');
      }
      if (c === 'EXPIRED') throw ApiError.failedPrecondition('this challenge expired: ask files/upload-credentials for a new one');
      const gone = () => ApiError.failedPrecondition('the content is no longer stored (no file referred to it): upload the bytes (reuseExisting: false)');
      const hash = crypto.createHash('sha256').update(Buffer.from(c.nonce, 'hex'));
      try {
        await hashRanges(deps.blobs, blobKey(c.checksum), c.ranges, hash);
      } catch (err) {
        if (await deps.blobs.size(blobKey(c.checksum)) === undefined) throw gone();
        throw err;
      }
      const expected = hash.digest();
      const given = Buffer.from(req.proof.toLowerCase(), 'hex');
      if (!crypto.timingSafeEqual(expected, given)) {
        throw ApiError.invalid('proof', 'PROOF_MISMATCH', 'does not prove possession of the file; the challenge is used up');
      }
      const file = await reuse(c);
      if (!file) throw gone();
      return { result: hit(file) };
    },

    async getFile(req, { principal, metadata }) {
      if (!req.fileId) throw ApiError.invalid('file_id', 'REQUIRED', 'is required');
      const f = await deps.files.fileOfBot(principal.botId, req.fileId);
      if (!f) throw ApiError.notFound('file');
      const exp = Math.floor((now() + deps.urlTtlMs) / 1000);
      const token = deps.signer.sign({ kind: 'download', sha256: f.checksum, size: f.size, name: f.fileName, type: f.mimeType, exp });
      return { result: toFile(f, `${baseUrl(metadata)}/api/v1/files/download/${token}`) };
    },

    /** A file of this bot, for the send methods (400 naming `field`, the request's field that gave it, when it is not the bot's: contract §6). */
    async fileForSend(botId: string, fileId: string, field = 'file_id'): Promise<FileRecord> {
      const f = fileId ? await deps.files.fileOfBot(botId, fileId) : undefined;
      if (!f) throw ApiError.invalid(field, 'FILE_NOT_FOUND', 'is not a file of this bot');
      return f;
    },

    /** Forgets expired uploads and challenges, and staged bytes nobody completed. */
    async sweep(): Promise<void> {
      await deps.files.purgeExpired(now(), now() - tries.tryWindowMs);
      await deps.blobs.sweepStaging(now() - 2 * deps.urlTtlMs);
    },

    /**
     * Removes content no file has referred to for UNREFERENCED_BLOB_RETENTION (a deleted
     * bot's, once purged, when no other file shares it), up to `limit` a run: claimed under
     * its row's lock (still no file; from then on no reuse or completion makes one on it),
     * its bytes deleted from the store, then its row. Answers how many were removed.
     */
    async sweepUnreferencedBlobs(limit = 100): Promise<number> {
      const at = now();
      const before = at - (deps.unreferencedBlobRetentionMs ?? 86_400_000);
      let removed = 0;
      for (const checksum of await deps.files.blobsUnreferencedBefore(before, limit)) {
        const claimer = randomBase62(16);
        if (!(await deps.files.claimUnreferencedBlob(checksum, before, at, claimer, at - STALE_BLOB_CLAIM_MS))) continue;
        await deps.blobs.delete(blobKey(checksum));
        if (await deps.files.dropClaimedBlob(checksum, claimer)) removed += 1;
      }
      return removed;
    },
  };
}

export type FilesService = ReturnType<typeof createFilesService>;
