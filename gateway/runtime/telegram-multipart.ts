/**
 * multipart/form-data bodies of the Telegram surface, read as a stream: text fields are
 * collected (together at most MAX_BODY_BYTES, headers included), file parts go straight
 * into the blob store as they arrive (together at most MAX_FILE_BYTES), measured on the
 * way (byte count, SHA-256) so the upload flow can be asked for afterwards. Nothing is
 * buffered whole, so a photo or document of any size up to the upload limit works, and
 * anything past a limit stops the read at once: 413, never a 500. Staged objects are the
 * caller's to remove (the route does after answering; the staging sweep is the last
 * guard), and are removed here when the parse fails.
 */
import crypto from 'node:crypto';
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import { parse as parseContentDisposition } from 'content-disposition';
import { BlobMismatch, stagingKey, type BlobStore } from '../../src/blobs/blob-store.js';
import { ApiError, Code } from '../../src/errors.js';

/** Only this module holds it, so only parseMultipartStream can make a StagedFile. */
const MINT: unique symbol = Symbol('StagedFile');

/**
 * A file part of this request's body, staged in the blob store under `key` and measured
 * on the way. Unforgeable: its constructor takes a value private to this module, so no
 * JSON, form or query value can be one (a value's type, not its shape, makes it a file),
 * and the route checks that it is one of the parts its own request staged.
 */
export class StagedFile {
  readonly fileName: string;
  readonly contentType: string;
  readonly key: string;
  readonly size: number;
  readonly sha256: string;
  constructor(mint: typeof MINT, part: { fileName: string; contentType: string; key: string; size: number; sha256: string }) {
    if (mint !== MINT) throw new Error('a StagedFile is made by the multipart parser only');
    this.fileName = part.fileName;
    this.contentType = part.contentType;
    this.key = part.key;
    this.size = part.size;
    this.sha256 = part.sha256;
  }
}

/** A parsed multipart body: its fields, text or staged file, by name. */
export class MultipartBody {
  constructor(readonly fields: ReadonlyMap<string, string | StagedFile>, readonly files: ReadonlySet<StagedFile>) {}
}

export interface MultipartLimits {
  /** Text fields, part headers and anything outside the parts, together. */
  maxTextBytes: number;
  /** File parts' bytes, together. */
  maxFileBytes: number;
  /** Whether file parts are taken at all (the method has a file parameter); else a file part is a 400. */
  files: boolean;
}

/** Most parts (fields and files) in one body. */
const MAX_PARTS = 100;
/** Most file parts in one body (sendMediaGroup's largest album is 10). */
const MAX_FILE_PARTS = 10;
/** Longest header block of one part. */
const MAX_HEADER_BYTES = 16 * 1024;

const malformed = (description: string) => ApiError.invalid('body', 'MALFORMED_MULTIPART', description);
export const tooLarge = (what: string) => new ApiError(Code.INVALID_ARGUMENT, `${what} is too large`, { httpStatus: 413 });

/**
 * A part's name and file name from its Content-Disposition header, quoted or not
 * (`filename=photo.png`, as pyTelegramBotAPI sends it, is as good as `filename="photo.png"`;
 * RFC 5987's `filename*=UTF-8''…` is read too), by the `content-disposition` package
 * (jshttp). A header it finds malformed (an unquoted value with spaces, say) is read
 * leniently: each parameter up to the next `;`.
 */
function dispositionOf(headers: string): { name?: string; fileName?: string } {
  const line = /^content-disposition:[ \t]*([^\r\n]*)/im.exec(headers)?.[1];
  if (line === undefined) return {};
  try {
    const { parameters } = parseContentDisposition(line);
    return { name: parameters.name, fileName: parameters.filename };
  } catch {
    const param = (key: string) => {
      const m = new RegExp(`;\\s*${key}\\s*=\\s*(?:"((?:[^"\\\\]|\\\\.)*)"|([^;]*))`, 'i').exec(line);
      return m ? (m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2]!.trim()) : undefined;
    };
    return { name: param('name'), fileName: param('filename') };
  }
}

interface Open {
  name: string | undefined;
  file?: { fileName: string; contentType: string; key: string; pass: PassThrough; stored: Promise<{ size: number; sha256: string }> };
  text?: Buffer[];
}

/**
 * Reads a multipart body from `source`. `blobs`: where file parts go (absent: a file part
 * is refused). `staged` receives every staging key written, also when the parse fails
 * (they are then already removed).
 */
export async function parseMultipartStream(
  source: AsyncIterable<Buffer>, contentType: string, blobs: BlobStore | undefined, limits: MultipartLimits, staged: string[],
): Promise<MultipartBody> {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType);
  if (!m) throw ApiError.invalid('body', 'MALFORMED_MULTIPART', 'multipart/form-data needs a boundary');
  const delimiter = Buffer.from(`\r\n--${(m[1] ?? m[2])!.trim()}`);
  const out = new Map<string, string | StagedFile>();
  const files = new Set<StagedFile>();
  let fileParts = 0;
  let textBudget = limits.maxTextBytes;
  let fileBudget = limits.maxFileBytes;
  let parts = 0;
  type State = 'preamble' | 'after-delimiter' | 'headers' | 'body' | 'done';
  let state = 'preamble' as State;
  // The body as if it began with CRLF, so the first delimiter looks like every other.
  let pending: Buffer = Buffer.from('\r\n');
  let open: Open | undefined;

  const spendText = (n: number) => {
    textBudget -= n;
    if (textBudget < 0) throw tooLarge('the request body');
  };

  async function startPart(headers: string) {
    if (++parts > MAX_PARTS) throw malformed(`has more than ${MAX_PARTS} parts`);
    const { name, fileName } = dispositionOf(headers);
    const type = /content-type:\s*([^\r\n;]+)/i.exec(headers)?.[1]?.trim() ?? '';
    const isFile = name !== undefined && (fileName !== undefined || (type !== '' && !type.startsWith('text/')));
    if (!isFile) {
      open = { name, text: [] };
      return;
    }
    if (!limits.files) throw ApiError.invalid(name, 'INVALID_TYPE', 'this method takes no file');
    if (!blobs) throw ApiError.invalid(name, 'UPLOAD_UNAVAILABLE', 'file uploads are not served here; send a file_id');
    if (++fileParts > MAX_FILE_PARTS) throw malformed(`has more than ${MAX_FILE_PARTS} files`);
    const key = stagingKey(`tg_${crypto.randomBytes(16).toString('hex')}`);
    staged.push(key);
    const pass = new PassThrough({ highWaterMark: 1 << 20 });
    const stored = blobs.putMeasured(key, pass, fileBudget);
    stored.catch(() => {}); // awaited at the part's end, or raced while writing
    open = { name, file: { fileName: fileName ?? '', contentType: type, key, pass, stored } };
  }

  async function partData(data: Buffer) {
    if (data.length === 0) return;
    if (!open) return spendText(data.length); // the preamble
    if (open.text) {
      spendText(data.length);
      open.text.push(data);
      return;
    }
    const f = open.file!;
    if (!f.pass.write(data)) await Promise.race([once(f.pass, 'drain'), f.stored]);
  }

  async function endPart() {
    const p = open;
    open = undefined;
    if (!p || p.name === undefined) return;
    if (p.text) {
      out.set(p.name, Buffer.concat(p.text).toString('utf8'));
      return;
    }
    const f = p.file!;
    f.pass.end();
    const { size, sha256 } = await f.stored;
    fileBudget -= size;
    const file = new StagedFile(MINT, { fileName: f.fileName, contentType: f.contentType, key: f.key, size, sha256 });
    files.add(file);
    out.set(p.name, file);
  }

  async function feed(chunk: Buffer) {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    for (;;) {
      switch (state) {
        case 'preamble':
        case 'body': {
          const i = pending.indexOf(delimiter);
          if (i < 0) {
            // All but what could be the start of a delimiter belongs to the part.
            const keep = Math.min(pending.length, delimiter.length - 1);
            await partData(pending.subarray(0, pending.length - keep));
            pending = Buffer.from(pending.subarray(pending.length - keep));
            return;
          }
          await partData(pending.subarray(0, i));
          if (state === 'body') await endPart();
          pending = pending.subarray(i + delimiter.length);
          state = 'after-delimiter';
          continue;
        }
        case 'after-delimiter': {
          if (pending.length < 2) return;
          if (pending[0] === 0x2d && pending[1] === 0x2d) {
            state = 'done';
            continue;
          }
          const crlf = pending.indexOf('\r\n');
          if (crlf < 0) {
            if (pending.length > 256) throw malformed('has a malformed delimiter line');
            return;
          }
          // Transport padding (spaces, tabs) may follow a delimiter.
          if (!/^[ \t]*$/.test(pending.subarray(0, crlf).toString('latin1'))) throw malformed('has a malformed delimiter line');
          pending = pending.subarray(crlf + 2);
          state = 'headers';
          continue;
        }
        case 'headers': {
          const end = pending.subarray(0, 2).toString('latin1') === '\r\n' ? -2 : pending.indexOf('\r\n\r\n');
          if (end === -1) {
            if (pending.length > MAX_HEADER_BYTES) throw malformed('has a part header that is too long');
            return;
          }
          const headerBytes = Math.max(end, 0);
          spendText(headerBytes);
          await startPart(pending.subarray(0, headerBytes).toString('utf8'));
          pending = pending.subarray(headerBytes + (end === -2 ? 2 : 4));
          state = 'body';
          continue;
        }
        case 'done':
          // The epilogue is ignored (counted, so it cannot be endless).
          spendText(pending.length);
          pending = Buffer.alloc(0);
          return;
      }
    }
  }

  try {
    for await (const chunk of source) await feed(chunk as Buffer);
    if (state !== 'done') throw state === 'preamble' ? malformed('is not a multipart body') : malformed('has a truncated part');
  } catch (err) {
    open?.file?.pass.destroy();
    await Promise.all(staged.map((k) => blobs!.delete(k).catch(() => {})));
    if (err instanceof BlobMismatch && err.reason === 'TOO_LARGE') throw tooLarge('the file');
    throw err;
  }
  // Telegram's attach://<name> form: a parameter naming another part.
  for (const [k, v] of out) {
    if (typeof v === 'string' && v.startsWith('attach://')) {
      const target = out.get(v.slice(9));
      if (target instanceof StagedFile) out.set(k, target);
    }
  }
  return new MultipartBody(out, files);
}
