/** The blob store on local disk (under DATA_DIR on the embedded default). */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BlobMismatch, type BlobStore, type Expected } from './blob-store.js';
import { scavenging } from './scavenging.js';

const KEY = /^(staging|blobs)\/[A-Za-z0-9_-]{1,128}$/;

/**
 * Files' bytes are for this service's user alone: directories are created 0700 (root
 * included, when this creates it) and files 0600. A directory that already exists keeps
 * its mode.
 */
export function createLocalDiskStore(root: string): BlobStore {
  for (const dir of ['staging', 'blobs', 'tmp']) fs.mkdirSync(path.join(root, dir), { recursive: true, mode: 0o700 });

  const pathOf = (key: string) => {
    // Keys are built by the service, never taken from a request; this is a last guard.
    if (!KEY.test(key)) throw new Error(`invalid blob key ${JSON.stringify(key)}`);
    return path.join(root, key);
  };

  /**
   * Streams `source` to `key` through a temporary file, counting (no more than `limit`
   * bytes: BlobMismatch TOO_LARGE past them) and hashing when asked; `check` may refuse
   * what was written before it is kept. Nothing is kept on any failure.
   */
  async function write(key: string, source: Readable, limit: number, tooLarge: string, hash: crypto.Hash | undefined, check: (count: number) => void) {
    const target = pathOf(key);
    const tmp = path.join(root, 'tmp', `${crypto.randomBytes(12).toString('hex')}.part`);
    let count = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        count += chunk.length;
        // Stop at the first byte past the limit instead of storing the excess.
        if (count > limit) return done(new BlobMismatch('TOO_LARGE', tooLarge));
        hash?.update(chunk);
        done(null, chunk);
      },
    });
    const out = fs.createWriteStream(tmp, { highWaterMark: 1 << 20, mode: 0o600 });
    try {
      await pipeline(source, counter, scavenging(), out);
      check(count);
      await fs.promises.rename(tmp, target);
    } catch (err) {
      // A refusal can come before the file is even open: wait until it is closed, or the
      // open would create it after the removal below.
      if (!out.closed) await new Promise<void>((resolve) => out.once('close', () => resolve()));
      await fs.promises.rm(tmp, { force: true });
      throw err;
    }
    return count;
  }

  return {
    async put(key, source, expected: Expected, opts = {}) {
      const hash = (opts.verify ?? true) ? crypto.createHash('sha256') : undefined;
      await write(key, source, expected.size, `more than the ${expected.size} bytes announced`, hash, (count) => {
        if (count !== expected.size) {
          throw new BlobMismatch('SIZE_MISMATCH', `received ${count} bytes, ${expected.size} were announced`);
        }
        if (hash && hash.digest('hex') !== expected.sha256) {
          throw new BlobMismatch('CHECKSUM_MISMATCH', 'the SHA-256 of the bytes does not match checksum');
        }
      });
    },

    async putMeasured(key, source, maxBytes) {
      const hash = crypto.createHash('sha256');
      const size = await write(key, source, maxBytes, `more than ${maxBytes} bytes`, hash, () => {});
      return { size, sha256: hash.digest('hex') };
    },

    async promote(from, to) {
      const src = pathOf(from);
      const dst = pathOf(to);
      if (fs.existsSync(dst)) await fs.promises.rm(src, { force: true });
      else await fs.promises.rename(src, dst);
    },

    async copy(from, to) {
      // A hard link: the same bytes under a second name, made at once (files are never rewritten in place).
      // `from` gone and `to` there: a concurrent completion of the same upload did it.
      await fs.promises.link(pathOf(from), pathOf(to)).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'EEXIST' || (err.code === 'ENOENT' && fs.existsSync(pathOf(to)))) return;
        throw err;
      });
    },

    async size(key) {
      try {
        return (await fs.promises.stat(pathOf(key))).size;
      } catch {
        return undefined;
      }
    },

    read(key, range) {
      const file = fs.createReadStream(pathOf(key), { ...(range ?? {}), highWaterMark: 256 * 1024 });
      const out = scavenging();
      file.on('error', (err) => out.destroy(err));
      out.on('close', () => file.destroy()); // the reader went away: close the file
      return file.pipe(out);
    },

    async delete(key) {
      await fs.promises.rm(pathOf(key), { force: true });
    },

    async sweepStaging(before) {
      let removed = 0;
      for (const dir of ['staging', 'tmp']) {
        for (const name of await fs.promises.readdir(path.join(root, dir))) {
          const file = path.join(root, dir, name);
          const stat = await fs.promises.stat(file).catch(() => undefined);
          if (stat && stat.mtimeMs < before) {
            await fs.promises.rm(file, { force: true });
            removed += 1;
          }
        }
      }
      return removed;
    },
  };
}
