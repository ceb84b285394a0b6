/**
 * npm run bench:files — on the embedded default, the service compiled as `npm start`
 * runs it:
 *   - upload throughput over HTTP (PUT to the signed URL, streamed, byte count and
 *     SHA-256 checked), MB/s, and the service's peak RSS;
 *   - the blob store alone, streaming the same bytes with and without checksum
 *     verification: the cost of verification as a ratio;
 *   - latency of a trusted reuse hit (upload-credentials answering a new file on
 *     stored content, no PUT), p50/p99.
 * Settings: BENCH_FILE_MB (256), BENCH_UPLOADS (3), BENCH_HITS (500).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { createLocalDiskStore } from '../src/blobs/local-disk-store.js';
import { freePort } from '../test/helpers/ports.js';
import { machine, percentile, startService, stopServices } from './lib.js';

const FILE_MB = Number(process.env.BENCH_FILE_MB ?? 256);
const UPLOADS = Number(process.env.BENCH_UPLOADS ?? 3);
const HITS = Number(process.env.BENCH_HITS ?? 500);
const JWT_SECRET = 'bench-secret-bench-secret-bench-secret-000';
const BLOCK = crypto.randomBytes(1024 * 1024);

async function json(base: string, p: string, token: string, body?: unknown) {
  const res = await fetch(base + p, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** FILE_MB blocks; each upload's first block differs, so every upload is new content. */
function blocks(seed: number): Buffer[] {
  const first = Buffer.from(BLOCK);
  first.writeUInt32BE(seed, 0);
  return [first, ...Array.from({ length: FILE_MB - 1 }, () => BLOCK)];
}

const sha256 = (parts: Buffer[]) => parts.reduce((h, b) => h.update(b), crypto.createHash('sha256')).digest('hex');

function put(url: string, parts: Buffer[], headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'PUT', headers: { ...headers, 'content-length': String(FILE_MB * BLOCK.length) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    let i = 0;
    const pump = () => {
      while (i < parts.length) if (!req.write(parts[i++])) return req.once('drain', pump);
      req.end();
    };
    pump();
  });
}

const peakMiB = (pid: number) => Number(/^VmHWM:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

async function storeRate(verify: boolean, dir: string): Promise<number> {
  const store = createLocalDiskStore(dir);
  const parts = blocks(verify ? 1 : 2);
  const expected = { size: FILE_MB * BLOCK.length, sha256: sha256(parts) };
  const rates = [];
  for (let i = 0; i < UPLOADS; i++) {
    const t = process.hrtime.bigint();
    await store.put(`staging/bench${i}`, Readable.from(parts), expected, { verify });
    rates.push(FILE_MB / (Number(process.hrtime.bigint() - t) / 1e9));
    await store.delete(`staging/bench${i}`);
  }
  return rates.sort((a, b) => a - b)[Math.floor(rates.length / 2)]!;
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-files-'));
  const port = await freePort();
  const child = await startService({ DATA_DIR: dir, PORT: String(port), GRPC_PORT: String(await freePort()), AUTH_JWT_SECRET: JWT_SECRET }, { compiled: true });
  const base = `http://127.0.0.1:${port}`;
  try {
    const jwt = await mintAccountJwt(JWT_SECRET, { sub: 'bench-files' });
    const app = await json(base, '/api/v1/bots/applications', jwt, { name: 'Files bench', username: 'bench_files' });
    await json(base, `/api/v1/admin/bots/${app.body.id}/approve`, await mintAccountJwt(JWT_SECRET, { sub: 'r', roles: ['admin'] }), {});
    const token = (await json(base, `/api/v1/bots/my/${app.body.id}`, jwt)).body.one_time_token as string;

    // Upload over HTTP.
    const rates: number[] = [];
    let lastChecksum = '';
    for (let i = 0; i < UPLOADS; i++) {
      const parts = blocks(100 + i);
      const checksum = sha256(parts);
      const cred = await json(base, '/api/v1/bots/files/upload-credentials', token, { fileName: `f${i}.bin`, fileSize: FILE_MB * BLOCK.length, checksum });
      const t = process.hrtime.bigint();
      const status = await put(cred.body.result.uploadUrl, parts, cred.body.result.headers);
      rates.push(FILE_MB / (Number(process.hrtime.bigint() - t) / 1e9));
      if (status !== 200) throw new Error(`PUT answered ${status}`);
      const done = await json(base, '/api/v1/bots/files/complete', token, { checksum, reuseRequestId: undefined });
      if (done.status !== 200) throw new Error(`complete answered ${done.status}`);
      lastChecksum = checksum;
    }
    const httpRate = rates.sort((a, b) => a - b)[Math.floor(rates.length / 2)]!;
    const peak = peakMiB(child.pid!);

    // Trusted reuse hits.
    const lat: number[] = [];
    for (let i = 0; i < HITS; i++) {
      const t = process.hrtime.bigint();
      const hit = await json(base, '/api/v1/bots/files/upload-credentials', token, {
        fileName: 'again.bin', fileSize: FILE_MB * BLOCK.length, checksum: lastChecksum, reuseRequestId: `hit-${i}`,
      });
      lat.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (hit.body.result?.uploadRequired !== false) throw new Error(`expected a trusted hit: ${JSON.stringify(hit.body)}`);
    }
    lat.sort((a, b) => a - b);

    const storeDir = path.join(dir, 'store-bench');
    const verified = await storeRate(true, storeDir);
    const unverified = await storeRate(false, storeDir);

    console.log(`bench:files — ${machine()}`);
    console.log(`file size ${FILE_MB} MiB, median of ${UPLOADS} runs`);
    console.log(`HTTP upload (PUT, streamed, size + SHA-256 checked): ${httpRate.toFixed(0)} MB/s; service peak RSS ${peak.toFixed(0)} MiB`);
    console.log(`blob store alone: with verification ${verified.toFixed(0)} MB/s, without ${unverified.toFixed(0)} MB/s `
      + `(verification costs x${(unverified / verified).toFixed(2)} in time)`);
    console.log(`trusted reuse hit (upload-credentials, ${HITS} calls): p50 ${percentile(lat, 50).toFixed(2)} ms, p99 ${percentile(lat, 99).toFixed(2)} ms`);
  } finally {
    stopServices();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  stopServices();
  process.exit(1);
});
