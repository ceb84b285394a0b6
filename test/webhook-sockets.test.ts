/**
 * The dispatcher's connection cap (WEBHOOK_MAX_SOCKETS): with many webhook origins, the
 * connections open never pass the cap; at the cap the idle one used least recently is
 * closed for a request that needs a new one (the most recent stays warm and is reused),
 * and with every connection busy a request waits for one to end instead of opening more.
 * Real HTTPS servers on loopback, one per origin. The cap is held under the process's
 * open-file limit at start (openFileLimit / socketCapWithin).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookClient } from '../src/dispatch/webhook-client.js';
import { openFileLimit, RESERVED_FDS, socketCapWithin } from '../src/net/fd-limit.js';
import { parseCidrs } from '../src/net/ssrf.js';
import { TEST_SECRET_KEY } from './helpers/harness.js';
import { freePort } from './helpers/ports.js';
import { createTestPki } from './helpers/tls.js';

interface Origin { port: number; connections: number; live: number; server: https.Server; hang: boolean }

describe('webhook connections under a cap, least recently used evicted', () => {
  const pki = createTestPki();
  const origins: Origin[] = [];
  /** Connections open at the receivers, all origins together, and the most seen at once. */
  const seen = { live: 0, max: 0 };

  beforeAll(async () => {
    for (let i = 0; i < 12; i++) {
      const o = { connections: 0, live: 0, hang: false } as Origin;
      o.server = https.createServer({ key: pki.key, cert: pki.cert, keepAliveTimeout: 60_000 }, (req, res) => {
        req.resume();
        req.on('end', () => {
          if (o.hang) setTimeout(() => res.end('late'), 300);
          else res.end('ok');
        });
      });
      o.server.on('secureConnection', (socket) => {
        o.connections++;
        o.live++;
        seen.live++;
        seen.max = Math.max(seen.max, seen.live);
        socket.once('close', () => {
          o.live--;
          seen.live--;
        });
      });
      await new Promise<void>((r) => o.server.listen(0, '127.0.0.1', r));
      o.port = (o.server.address() as AddressInfo).port;
      origins.push(o);
    }
  });
  afterAll(() => {
    for (const o of origins) {
      o.server.closeAllConnections();
      o.server.close();
    }
  });

  const client = (maxSockets: number) => createWebhookClient({
    timeoutMs: 5000, allowedCidrs: parseCidrs(['127.0.0.0/8']), caFile: pki.caFile, maxSockets,
  });
  const send = (c: ReturnType<typeof client>, o: Origin, updateId: number) =>
    c.send({ url: `https://127.0.0.1:${o.port}/hook`, body: '{}', secret: 'sockets', updateId, allowedIps: [] });

  it('keeps at most the cap open across origins, closing the least recently used idle one', async () => {
    const c = client(4);
    seen.max = 0;
    const before = origins.map((o) => o.connections);
    // Round robin over 12 origins, one at a time: each new origin needs a connection.
    for (let round = 0; round < 3; round++) {
      for (const [i, o] of origins.entries()) expect((await send(c, o, round * 100 + i)).ok).toBe(true);
    }
    expect(c.sockets().peak).toBeLessThanOrEqual(4);
    expect(c.sockets().open).toBeLessThanOrEqual(4);
    expect(c.sockets().evicted).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 50));
    expect(seen.max).toBeLessThanOrEqual(5); // the receivers' view (a closed socket's end arrives a moment later)

    // The most recently used origins are still warm: sending to them again opens nothing.
    const recent = origins.slice(-4);
    const warm = recent.map((o) => o.connections);
    for (const [i, o] of recent.entries()) expect((await send(c, o, 1000 + i)).ok).toBe(true);
    expect(recent.map((o) => o.connections)).toEqual(warm);
    // The least recently used was closed: it needs a new connection.
    const first = origins[0]!.connections;
    expect((await send(c, origins[0]!, 2000)).ok).toBe(true);
    expect(origins[0]!.connections).toBe(first + 1);
    expect(origins.reduce((n, o, i) => n + o.connections - before[i]!, 0)).toBeGreaterThan(12);
    c.close();
  });

  it('never closes for room the idle connection a request has just been given (it is busy from then on)', async () => {
    const c = client(2);
    // Two connections, both idle; origin 0's is the least recently used.
    expect((await send(c, origins[0]!, 5000)).ok).toBe(true);
    expect((await send(c, origins[1]!, 5001)).ok).toBe(true);
    // Origin 0's request takes its idle connection; origin 2's, which needs room, comes in the
    // same turn of the event loop, before the first request's 'socket' event (a tick later).
    const reuse = send(c, origins[0]!, 5002);
    let hops: Promise<unknown> = Promise.resolve();
    for (let i = 0; i < 20; i++) hops = hops.then(() => undefined);
    const room = hops.then(() => send(c, origins[2]!, 5003));
    const [a, b] = await Promise.all([reuse, room]);
    expect(a).toMatchObject({ ok: true, error: null });
    expect(b).toMatchObject({ ok: true, error: null });
    expect(c.sockets().peak).toBeLessThanOrEqual(2);
    c.close();
  });

  it('with every connection busy, a request waits for one to end instead of opening more', async () => {
    const c = client(3);
    seen.max = 0;
    for (const o of origins) o.hang = true; // each answer takes 300 ms
    const t0 = Date.now();
    const results = await Promise.all(origins.slice(0, 9).map((o, i) => send(c, o, 3000 + i)));
    for (const o of origins) o.hang = false;
    expect(results.every((r) => r.ok)).toBe(true);
    expect(c.sockets().peak).toBeLessThanOrEqual(3);
    expect(c.sockets().waited).toBeGreaterThan(0);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(850); // three rounds of three, not one of nine
    c.close();
  });

  it('is held under the open-file limit the process has', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-limits-'));
    const file = path.join(dir, 'limits');
    fs.writeFileSync(file, 'Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n');
    expect(openFileLimit(file)).toBe(1024);
    expect(socketCapWithin(8192, 1024)).toBe(16);
    expect(socketCapWithin(30_000, 20_000)).toBe(20_000 - RESERVED_FDS);
    expect(socketCapWithin(8192, 1_048_576)).toBe(8192);
    expect(socketCapWithin(8192, undefined)).toBe(8192);
    expect(openFileLimit(path.join(dir, 'none'))).toBeUndefined();
    expect(openFileLimit()).toBeGreaterThan(0); // this machine's own
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a service started with a low open-file limit raises its soft limit to the hard one, lowers the cap within it, and says so', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-fdlimit-'));
    const port = await freePort();
    // Soft 1100, hard 1600: Node raises the soft limit to 1600 at start; the cap leaves 1024 of it free.
    const child = spawn('prlimit', ['--nofile=1100:1600', process.execPath, '--import', 'tsx', 'src/main.ts'], {
      cwd: path.resolve(import.meta.dirname, '..'),
      env: { ...process.env, ROLE: 'all', DATA_DIR: dir, PORT: String(port), GRPC_PORT: String(await freePort()), SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'warn', WEBHOOK_MAX_SOCKETS: '8192' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    try {
      for (let i = 0; i < 450 && child.exitCode === null; i++) {
        if (await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      const lowered = out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => String(l.msg).startsWith('WEBHOOK_MAX_SOCKETS lowered'));
      expect(lowered).toMatchObject({ level: 40, wanted: 8192, cap: 1600 - RESERVED_FDS, openFileLimit: 1600, msg: `WEBHOOK_MAX_SOCKETS lowered to ${1600 - RESERVED_FDS}: the process may open 1600 files` });
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode === null ? child.once('exit', r) : r(null)));
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
