/**
 * npm run bench:files — on the embedded default, the service compiled as `npm start`
 * runs it:
 *   - upload throughput over HTTP (PUT to the signed URL, streamed, byte count and
 *     SHA-256 checked), MB/s, and the service's peak RSS;
 *   - the blob store alone, streaming the same bytes with and without checksum
 *     verification: the cost of verification as a ratio;
 *   - latency of a trusted reuse hit (upload-credentials answering a new file on
 *     stored content, no PUT), p50/p99.
 *   - with BLOB_STORE=s3 on the project's s3proxy (scripts/s3proxy.sh; BENCH_S3=0 skips
 *     it): upload through the gateway (the service's design) against a presigned PUT
 *     straight to the store with x-amz-checksum-sha256 (the alternative), each in MB/s and
 *     CPU seconds per GiB of the service and of the store; download through the gateway;
 *     a possession proof (144 ranged GETs).
 * Settings: BENCH_FILE_MB (256), BENCH_UPLOADS (3), BENCH_HITS (500), BENCH_S3 (1).
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
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { createTestBucket } from '../test/helpers/s3.js';
import { cpuSeconds, machine, percentile, startService, stopServices } from './lib.js';

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

/** The s3proxy process serving `endpoint`'s port (for its CPU time), if it runs here. */
function storePid(): number | undefined {
  for (const d of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      if (fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes('org.gaul.s3proxy.Main')) return Number(d);
    } catch { /* gone */ }
  }
  return undefined;
}

/** Median MB/s of `runs` and CPU seconds per GiB of each pid, over the runs. */
async function measured(runs: number, pids: number[], once: (i: number) => Promise<void>) {
  const rates: number[] = [];
  const cpu0 = pids.map(cpuSeconds);
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint();
    await once(i);
    rates.push(FILE_MB / (Number(process.hrtime.bigint() - t) / 1e9));
  }
  const gib = (runs * FILE_MB) / 1024;
  return { rate: rates.sort((a, b) => a - b)[Math.floor(rates.length / 2)]!, cpuPerGiB: pids.map((p, i) => (cpuSeconds(p) - cpu0[i]!) / gib) };
}

async function s3Part() {
  const bucket = await createTestBucket();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-files-s3-'));
  const port = await freePort();
  const child = await startService({ ...bucket.env, DATA_DIR: dir, PORT: String(port), GRPC_PORT: String(await freePort()), AUTH_JWT_SECRET: JWT_SECRET }, { compiled: true });
  const base = `http://127.0.0.1:${port}`;
  const store = storePid();
  const pids = [child.pid!, ...(store ? [store] : [])];
  try {
    const jwt = await mintAccountJwt(JWT_SECRET, { sub: 'bench-files-s3' });
    const app = await json(base, '/api/v1/bots/applications', jwt, { name: 'Files bench S3', username: 'bench_files_s3' });
    await json(base, `/api/v1/admin/bots/${app.body.id}/approve`, await mintAccountJwt(JWT_SECRET, { sub: 'r', roles: ['admin'] }), {});
    const token = (await json(base, `/api/v1/bots/my/${app.body.id}`, jwt)).body.one_time_token as string;

    let last = '';
    const gateway = await measured(UPLOADS, pids, async (i) => {
      const parts = blocks(300 + i);
      const checksum = sha256(parts);
      const cred = await json(base, '/api/v1/bots/files/upload-credentials', token, { fileName: `s${i}.bin`, fileSize: FILE_MB * BLOCK.length, checksum });
      const status = await put(cred.body.result.uploadUrl, parts, cred.body.result.headers);
      if (status !== 200) throw new Error(`PUT answered ${status}`);
      const done = await json(base, '/api/v1/bots/files/complete', token, { checksum });
      if (done.status !== 200) throw new Error(`complete answered ${done.status}`);
      last = done.body.result.file_id;
    });
    const peak = peakMiB(child.pid!);

    // The alternative: the store verifies the checksum of a presigned PUT itself.
    const direct = await measured(UPLOADS, pids, async (i) => {
      const parts = blocks(400 + i);
      const sum = Buffer.from(sha256(parts), 'hex').toString('base64');
      const url = await getSignedUrl(bucket.client, new PutObjectCommand({ Bucket: bucket.name, Key: `staging/direct${i}`, ChecksumSHA256: sum, ContentLength: FILE_MB * BLOCK.length }), { expiresIn: 600 });
      const status = await put(url, parts, { 'x-amz-checksum-sha256': sum });
      if (status !== 200) throw new Error(`presigned PUT answered ${status}`);
    });

    const url = (await json(base, '/api/v1/bots/getFile', token, { file_id: last })).body.result.download_url as string;
    const download = await measured(UPLOADS, pids, async () => {
      const res = await fetch(url);
      let n = 0;
      for await (const c of res.body!) n += (c as Uint8Array).length;
      if (n !== FILE_MB * BLOCK.length) throw new Error(`downloaded ${n} bytes`);
    });

    // Possession proofs: each by a new account, answering a challenge of 144 ranges.
    const parts = blocks(300 + UPLOADS - 1);
    const whole = Buffer.concat(parts);
    const proofs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const other = await mintAccountJwt(JWT_SECRET, { sub: `bench-files-s3-other${i}` });
      const app2 = await json(base, '/api/v1/bots/applications', other, { name: `Files bench S3 ${i}`, username: `bench_files_s3_${i}` });
      await json(base, `/api/v1/admin/bots/${app2.body.id}/approve`, await mintAccountJwt(JWT_SECRET, { sub: 'r', roles: ['admin'] }), {});
      const token2 = (await json(base, `/api/v1/bots/my/${app2.body.id}`, other)).body.one_time_token as string;
      const c = (await json(base, '/api/v1/bots/files/upload-credentials', token2, { fileName: 'p.bin', fileSize: whole.length, checksum: sha256(parts), reuseExisting: true })).body.result.possessionChallenge;
      const hash = crypto.createHash('sha256').update(Buffer.from(c.nonce, 'hex'));
      for (const r of c.ranges as { offset: number; length: number }[]) hash.update(whole.subarray(r.offset, r.offset + r.length));
      const t = process.hrtime.bigint();
      const r = await json(base, '/api/v1/bots/files/possession', token2, { challengeId: c.challengeId, proof: hash.digest('hex') });
      proofs.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (r.status !== 200) throw new Error(`possession answered ${r.status}: ${JSON.stringify(r.body)}`);
    }
    proofs.sort((a, b) => a - b);

    const cpu = (m: { cpuPerGiB: number[] }) => `service ${m.cpuPerGiB[0]!.toFixed(2)} s${store ? `, store ${m.cpuPerGiB[1]!.toFixed(2)} s` : ''}`;
    console.log(`BLOB_STORE=s3 on s3proxy 4.1 (filesystem backend, same machine), ${FILE_MB} MiB files, median of ${UPLOADS}:`);
    console.log(`  upload through the gateway (PUT to the signed URL, size + SHA-256 checked, streamed to the bucket): ${gateway.rate.toFixed(0)} MB/s; CPU per GiB: ${cpu(gateway)}; service peak RSS ${peak.toFixed(0)} MiB`);
    console.log(`  presigned PUT straight to the store (x-amz-checksum-sha256 checked by the store): ${direct.rate.toFixed(0)} MB/s; CPU per GiB: ${cpu(direct)}`);
    console.log(`  download through the gateway (signed URL, streamed from the bucket): ${download.rate.toFixed(0)} MB/s; CPU per GiB: ${cpu(download)}`);
    console.log(`  possession proof (144 ranged GETs, 16 at a time), 5 proofs: median ${proofs[2]!.toFixed(1)} ms, max ${proofs[4]!.toFixed(1)} ms`);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await bucket.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(() => (process.env.BENCH_S3 === '0' ? undefined : s3Part())).then(() => process.exit(0)).catch((err) => {
  console.error(err);
  stopServices();
  process.exit(1);
});
