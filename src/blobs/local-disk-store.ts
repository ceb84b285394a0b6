/** The blob store on local disk (under DATA_DIR on the embedded default). */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BlobMismatch, type BlobStore, type Expected } from './blob-store.js';

const KEY = /^(staging|blobs)\/[A-Za-z0-9_-]{1,128}$/;

export function createLocalDiskStore(root: string): BlobStore {
  fs.mkdirSync(path.join(root, 'staging'), { recursive: true });
  fs.mkdirSync(path.join(root, 'blobs'), { recursive: true });
  fs.mkdirSync(path.join(root, 'tmp'), { recursive: true });

  const pathOf = (key: string) => {
    // Keys are built by the service, never taken from a request; this is a last guard.
    if (!KEY.test(key)) throw new Error(`invalid blob key ${JSON.stringify(key)}`);
    return path.join(root, key);
  };

  return {
    async put(key, source, expected: Expected, opts = {}) {
      const verify = opts.verify ?? true;
      const target = pathOf(key);
      const tmp = path.join(root, 'tmp', `${crypto.randomBytes(12).toString('hex')}.part`);
      const hash = verify ? crypto.createHash('sha256') : undefined;
      let count = 0;
      const check = new Transform({
        transform(chunk: Buffer, _enc, done) {
          count += chunk.length;
          // Stop at the first byte past the promise instead of storing the excess.
          if (count > expected.size) return done(new BlobMismatch('TOO_LARGE', `more than the ${expected.size} bytes announced`));
          hash?.update(chunk);
          done(null, chunk);
        },
      });
      try {
        await pipeline(source, check, fs.createWriteStream(tmp, { highWaterMark: 1 << 20 }));
        if (count !== expected.size) {
          throw new BlobMismatch('SIZE_MISMATCH', `received ${count} bytes, ${expected.size} were announced`);
        }
        if (hash && hash.digest('hex') !== expected.sha256) {
          throw new BlobMismatch('CHECKSUM_MISMATCH', 'the SHA-256 of the bytes does not match checksum');
        }
        await fs.promises.rename(tmp, target);
      } catch (err) {
        await fs.promises.rm(tmp, { force: true });
        throw err;
      }
    },

    async promote(from, to) {
      const src = pathOf(from);
      const dst = pathOf(to);
      if (fs.existsSync(dst)) await fs.promises.rm(src, { force: true });
      else await fs.promises.rename(src, dst);
    },

    async size(key) {
      try {
        return (await fs.promises.stat(pathOf(key))).size;
      } catch {
        return undefined;
      }
    },

    read(key, range) {
      return fs.createReadStream(pathOf(key), { ...(range ?? {}), highWaterMark: 1 << 20 }) as Readable;
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
