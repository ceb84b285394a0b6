/**
 * The whole file flow over HTTP with a 1 GiB file against the service as `npm start`
 * runs it (compiled, its own process): the PUT streams, so the service's resident
 * memory stays under 150 MB while the gigabyte goes through, and the bytes that come
 * back from download_url hash to the same SHA-256.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { call, client, createTestDatabase, kafkaEnv, TEST_JWT_SECRET } from './helpers/harness.js';
import { freePort } from './helpers/ports.js';
import { serviceProcesses } from './helpers/processes.js';
import { buildService } from './helpers/service-process.js';

const GIB = 1024 ** 3;
const BLOCK = crypto.randomBytes(1024 * 1024);
const services = serviceProcesses();

/** Resident set size (and its peak so far) of a process, in bytes. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/** PUTs `blocks` copies of BLOCK with Content-Length, honouring backpressure. */
function putStream(url: string, blocks: number, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'PUT', headers: { ...headers, 'content-length': String(blocks * BLOCK.length) } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    let sent = 0;
    const pump = () => {
      while (sent < blocks) {
        sent += 1;
        if (!req.write(BLOCK)) return req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
}

describe('a 1 GiB file', () => {
  it('goes through upload-credentials, a streamed PUT, complete and download with the service under 150 MB resident', async () => {
    buildService();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-large-'));
    const db = await createTestDatabase(dir);
    try {
      const env = {
        DATA_DIR: dir, DATABASE_URL: db.url, AUTH_JWT_SECRET: TEST_JWT_SECRET, LOG_LEVEL: 'warn',
        PORT: String(await freePort()), GRPC_PORT: String(await freePort()), ...kafkaEnv(),
      };
      const child = await services.start(env, 'ignore', { compiled: true });
      const base = `http://127.0.0.1:${env.PORT}`;
      const jwt = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'large-owner' });
      const created = await client(base, jwt).post('/api/v1/bots/applications', { name: 'Large', username: 'large_files' });
      await client(base, await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] })).post(`/api/v1/admin/bots/${created.body.id}/approve`);
      const token = (await client(base, jwt).get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token as string;

      const blocks = GIB / BLOCK.length;
      const hash = crypto.createHash('sha256');
      for (let i = 0; i < blocks; i++) hash.update(BLOCK);
      const checksum = hash.digest('hex');
      const cred = await call(base, 'POST', '/api/v1/bots/files/upload-credentials', {
        token, body: { fileName: 'big.bin', fileSize: GIB, checksum },
      });
      expect(cred.status).toBe(200);

      const before = memoryOf(child.pid!);
      let maxRss = before.rss;
      const sampler = setInterval(() => (maxRss = Math.max(maxRss, memoryOf(child.pid!).rss)), 50);
      const started = Date.now();
      const res = await putStream(cred.body.result.uploadUrl, blocks, cred.body.result.headers);
      const seconds = (Date.now() - started) / 1000;
      clearInterval(sampler);
      const after = memoryOf(child.pid!);
      console.log(`1 GiB PUT: ${seconds.toFixed(1)} s (${(1024 / seconds).toFixed(0)} MB/s); service RSS before ${(before.rss / 2 ** 20).toFixed(0)} MB, `
        + `max sampled ${(maxRss / 2 ** 20).toFixed(0)} MB, peak (VmHWM) ${(after.peak / 2 ** 20).toFixed(0)} MB`);
      expect(res.status).toBe(200);
      expect(after.peak).toBeLessThan(150 * 2 ** 20);

      const done = await call(base, 'POST', '/api/v1/bots/files/complete', { token, body: { checksum } });
      expect(done.status).toBe(200);
      expect(done.body.result.file).toMatchObject({ file_size: GIB, checksum });
      const got = await call(base, 'POST', '/api/v1/bots/getFile', { token, body: { file_id: done.body.result.file_id } });
      const download = await fetch(got.body.result.download_url);
      expect(download.headers.get('content-length')).toBe(String(GIB));
      const back = crypto.createHash('sha256');
      let size = 0;
      for await (const chunk of download.body as unknown as AsyncIterable<Uint8Array>) {
        back.update(chunk);
        size += chunk.length;
      }
      expect(size).toBe(GIB);
      expect(back.digest('hex')).toBe(checksum);
      const peak = memoryOf(child.pid!).peak;
      console.log(`peak after the download (VmHWM) ${(peak / 2 ** 20).toFixed(1)} MB`);
      expect(peak).toBeLessThan(150 * 2 ** 20);
    } finally {
      services.killAll();
      await db.drop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
