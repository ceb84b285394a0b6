/**
 * Registering a file (CONTRACT §6): SHA-256 of the file while streaming it, then
 * upload-credentials with that checksum and a reuseRequestId that stays the same
 * across retries of this one upload. The answer decides the rest: a trusted reuse
 * hit is done at once; a possession challenge is answered from the local bytes;
 * otherwise (uploadRequired true, or absent) the bytes are PUT to the returned URL
 * with the returned headers and the upload is completed. The result is the file_id.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { BotClient } from './clients.js';
import { BotPlatformError } from './errors.js';
import type { File, UploadCredentials } from './generated/api.js';

export interface UploadFileOptions {
  /** The file on disk. It is read as a stream: once to hash it, once to upload it. */
  path?: string;
  /** Or the bytes themselves. */
  data?: Uint8Array;
  /** Name the file is registered under (default: the path's base name). */
  fileName?: string;
  /** MIME type (default: the service guesses, or application/octet-stream). */
  fileType?: string;
  /**
   * Identifies this logical upload: every retry sends the same value, so a retry
   * after a lost answer gets the same file_id instead of a second file. Default: a
   * new random id per uploadFile call.
   */
  reuseRequestId?: string;
  /**
   * Attempts of the whole flow on failures that may pass (default 3). A refusal whose
   * retry_after is longer than a minute (a possession lock-out) is not waited out: it is
   * thrown at once, with its retryAfter.
   */
  attempts?: number;
  /** Aborts the upload. */
  signal?: AbortSignal;
}

export interface UploadedFile {
  file_id: string;
  file?: File | null;
  /** How the file was registered: the bytes were sent, or the service already had them. */
  via: 'upload' | 'reuse' | 'possession';
  checksum: string;
  reuseRequestId: string;
}

interface Source {
  read(offset?: number, length?: number): Readable;
}

function sourceOf(o: UploadFileOptions): Source {
  if (o.data && o.path) throw new TypeError('uploadFile: give path or data, not both');
  if (o.data) {
    const data = Buffer.from(o.data.buffer, o.data.byteOffset, o.data.byteLength);
    return { read: (offset = 0, length = data.length - offset) => Readable.from([data.subarray(offset, offset + length)]) };
  }
  if (!o.path) throw new TypeError('uploadFile: give path or data');
  const file = o.path;
  return {
    read: (offset = 0, length) =>
      length === 0 ? Readable.from([]) : fs.createReadStream(file, { start: offset, end: length === undefined ? undefined : offset + length - 1 }),
  };
}

async function sha256(stream: Readable): Promise<{ hex: string; size: number }> {
  const hash = crypto.createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { hex: hash.digest('hex'), size };
}

/** proof = hex SHA-256(nonce bytes ‖ each range's bytes, in order). */
async function possessionProof(source: Source, nonce: string, ranges: { offset: number; length: number }[]): Promise<string> {
  const hash = crypto.createHash('sha256').update(Buffer.from(nonce, 'hex'));
  for (const r of ranges) for await (const chunk of source.read(r.offset, r.length)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

function put(url: string, method: string, headers: Record<string, string>, body: Readable, size: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const lib = url.startsWith('https:') ? https : http;
    const req = lib.request(url, { method, headers: { ...headers, 'content-length': String(size) }, signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode! >= 200 && res.statusCode! < 300) return resolve();
        let parsed: unknown;
        try {
          parsed = JSON.parse(Buffer.concat(chunks).toString());
        } catch {
          parsed = undefined;
        }
        reject(BotPlatformError.fromResponse(res.statusCode!, parsed, new Headers(res.headers as Record<string, string>), 'upload'));
      });
      res.on('error', reject);
    });
    req.on('error', (err) => reject(signal?.aborted ? (signal.reason ?? err) : BotPlatformError.from(err, 'upload')));
    body.on('error', (err) => req.destroy(err));
    body.pipe(req);
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The longest retry_after uploadFile waits out by itself (seconds). */
const MAX_RETRY_WAIT_S = 60;

/** Uploads (or reuses) a file for this bot and returns its file_id, ready for sendPhoto or sendDocument. */
export async function uploadFile(bot: BotClient, options: UploadFileOptions): Promise<UploadedFile> {
  const source = sourceOf(options);
  const fileName = options.fileName ?? (options.path ? path.basename(options.path) : undefined);
  if (!fileName) throw new TypeError('uploadFile: fileName is required with data');
  const { hex: checksum, size } = await sha256(source.read());
  const reuseRequestId = options.reuseRequestId ?? crypto.randomUUID();
  const { signal } = options;
  const attempts = options.attempts ?? 3;

  const once = async (): Promise<UploadedFile> => {
    let creds: UploadCredentials = await bot.createUploadCredentials(
      { fileName, fileSize: size, checksum, fileType: options.fileType, reuseRequestId },
      { signal },
    );
    let via: UploadedFile['via'] = 'reuse';
    if (creds.possessionRequired || creds.possessionChallenge) {
      const challenge = creds.possessionChallenge;
      if (!challenge) throw new BotPlatformError({ httpStatus: 200, code: 'UNKNOWN', message: 'possessionRequired without a possessionChallenge', method: 'createUploadCredentials' });
      const proof = await possessionProof(source, challenge.nonce, challenge.ranges);
      creds = await bot.provePossession({ challengeId: challenge.challengeId, proof }, { signal });
      via = 'possession';
    }
    if (creds.uploadRequired === false && creds.file_id) return { file_id: creds.file_id, file: creds.file, via, checksum, reuseRequestId };
    if (creds.uploadRequired === false) {
      throw new BotPlatformError({ httpStatus: 200, code: 'UNKNOWN', message: 'uploadRequired false without a file_id', method: 'createUploadCredentials' });
    }
    // uploadRequired true, or the flag left out: send the bytes.
    if (!creds.uploadUrl) throw new BotPlatformError({ httpStatus: 200, code: 'UNKNOWN', message: 'upload required but no uploadUrl', method: 'createUploadCredentials' });
    await put(creds.uploadUrl, creds.method ?? 'PUT', creds.headers ?? {}, source.read(), size, signal);
    const done = await bot.completeUpload({ checksum, reuseRequestId }, { signal });
    return { file_id: done.file_id, file: done.file, via: 'upload', checksum, reuseRequestId };
  };

  for (let attempt = 1; ; attempt++) {
    try {
      return await once();
    } catch (err) {
      if (signal?.aborted) throw signal.reason ?? err;
      const e = err instanceof BotPlatformError ? err : undefined;
      if (!e?.retryable || attempt >= attempts || (e.retryAfter ?? 0) > MAX_RETRY_WAIT_S) throw err;
      await sleep(e.retryAfter !== undefined ? e.retryAfter * 1000 : 250 * 2 ** (attempt - 1));
    }
  }
}
