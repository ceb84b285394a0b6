/**
 * The database goes away under a running service (a TCP proxy in front of MariaDB is
 * cut, then restored): calls answer UNAVAILABLE / 503 with Retry-After, quickly, not
 * INTERNAL / 500 and not after a minute's hang; /healthz says unavailable; every line
 * the process writes stays one JSON object; service is back within 5 s of the
 * database returning.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { mintAccountJwt } from '../../src/auth/account-jwt.js';
import { RuntimeServiceClient } from '../../src/gen/botplatform/v1/runtime_service.js';
import { call, client, createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET } from '../helpers/harness.js';
import { freePort } from '../helpers/ports.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { until } from '../helpers/until.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('database outage', () => {
  let child: ChildProcess | undefined;
  let proxy: TcpProxy | undefined;
  afterAll(async () => {
    child?.kill('SIGKILL');
    await proxy?.close();
  });

  it('answers 503 with Retry-After while the database is down, and recovers within 5 s', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-dbdown-'));
    const db = await createTestDatabase(dir);
    const real = new URL(db.url);
    proxy = await startTcpProxy(real.hostname, Number(real.port || 3306));
    const viaProxy = new URL(db.url);
    viaProxy.port = String(proxy.port);
    const env = {
      DATA_DIR: dir, DATABASE_URL: viaProxy.toString(), AUTH_JWT_SECRET: TEST_JWT_SECRET, INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN,
      LOG_LEVEL: 'info', PORT: String(await freePort()), GRPC_PORT: String(await freePort()), DATABASE_ACQUIRE_TIMEOUT_MS: '2000',
      ...kafkaEnv(),
    };
    const out: string[] = [];
    child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let pending = '';
    const collect = (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      const lines = pending.split('\n');
      pending = lines.pop()!;
      out.push(...lines.filter((l) => l.trim() !== ''));
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    const base = `http://127.0.0.1:${env.PORT}`;
    expect(await until(async () => (await fetch(`${base}/healthz`).catch(() => undefined))?.ok === true, Boolean, 60_000)).toBe(true);

    const jwt = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'outage-owner' });
    const created = await client(base, jwt).post('/api/v1/bots/applications', { name: 'Outage', username: 'outage_bot' });
    await client(base, await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] })).post(`/api/v1/admin/bots/${created.body.id}/approve`);
    const token = (await client(base, jwt).get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token as string;
    expect((await call(base, 'POST', '/api/v1/bots/getUpdates', { token, body: { timeout: 0 } })).status).toBe(200);

    let unavailableMs = NaN;
    const outageMs = Number(process.env.DB_OUTAGE_MS ?? 10_000);
    // getUpdates rather than getMe: a getMe may be answered from the verified-principal
    // cache (1 s) without the database; the queue read always needs it.
    await proxy.cut();
    const cutAt = Date.now();
    try {
      // Runtime surface: 503 in Telegram's envelope, with a retry hint, within the acquire timeout.
      const started = Date.now();
      const me = await call(base, 'POST', '/api/v1/bots/getUpdates', { token, body: { timeout: 0 } });
      unavailableMs = Date.now() - started;
      expect(unavailableMs).toBeLessThan(5000);
      expect(me.status).toBe(503);
      expect(me.body).toMatchObject({ ok: false, error_code: 503 });
      expect(Number(me.headers.get('retry-after'))).toBeGreaterThan(0);
      // Console surface: 503 in its envelope.
      const list = await client(base, jwt).get('/api/v1/bots/my');
      expect(list.status).toBe(503);
      expect(list.body.error.status).toBe('UNAVAILABLE');
      // gRPC: UNAVAILABLE, retryable.
      const grpcClient = new RuntimeServiceClient(`127.0.0.1:${env.GRPC_PORT}`, grpc.credentials.createInsecure());
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${token}`);
      const code = await new Promise<number | undefined>((resolve) => grpcClient.getUpdates({ timeout: 0, allowedUpdates: [] } as never, md, (err) => resolve(err?.code)));
      grpcClient.close();
      expect(code).toBe(grpc.status.UNAVAILABLE);
      // Health reflects it.
      expect(await until(async () => (await fetch(`${base}/healthz`)).status, (s) => s === 503, 10_000)).toBe(503);
      // For the rest of the outage every call keeps answering 503 promptly: no 500, no hang.
      const seen = new Set<number>();
      while (Date.now() - cutAt < outageMs) {
        const t0 = Date.now();
        seen.add((await call(base, 'POST', '/api/v1/bots/getUpdates', { token, body: { timeout: 0 } })).status);
        unavailableMs = Math.max(unavailableMs, Date.now() - t0);
        await new Promise((r) => setTimeout(r, 500));
      }
      expect([...seen]).toEqual([503]);
      expect(unavailableMs).toBeLessThan(5000);
    } finally {
      await proxy.restore();
    }
    const back = Date.now();
    expect(await until(async () => (await call(base, 'POST', '/api/v1/bots/getUpdates', { token, body: { timeout: 0 } })).status, (s) => s === 200, 10_000)).toBe(200);
    expect(await until(async () => (await fetch(`${base}/healthz`)).status, (s) => s === 200, 10_000)).toBe(200);
    const recoveredMs = Date.now() - back;
    console.log(`[fault figures] database away ${outageMs / 1000} s: every call answered 503 (Retry-After) within ${unavailableMs} ms; calls and /healthz back ${recoveredMs} ms after the database returned`);
    expect(recoveredMs).toBeLessThan(5000);

    // Every line the process wrote, outage included, is one JSON object.
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
    expect(out.length).toBeGreaterThan(0);
    const notJson = out.filter((l) => { try { return typeof JSON.parse(l) !== 'object'; } catch { return true; } });
    expect(notJson).toEqual([]);
    // The outage is logged as such, not as internal errors.
    const parsed = out.map((l) => JSON.parse(l) as { level: number; code?: string; msg?: string });
    expect(parsed.some((l) => l.code === 'UNAVAILABLE')).toBe(true);
    expect(parsed.filter((l) => l.code === 'INTERNAL')).toEqual([]);
    await db.drop();
  }, 90_000);
});
