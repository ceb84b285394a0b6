/**
 * SIGTERM while the service is under load, as a real process: every request is
 * answered (200/201, or 503 while draining) and no connection in use is reset (a new
 * one meeting the listener's close is refused or reset, as any client then sees);
 * waiting long polls end with an empty result; the process exits 0 within a
 * bounded time; and after a restart every acknowledged update has reached the
 * webhook exactly once (deliveries in flight at SIGTERM were finished and
 * recorded, none lost).
 */
import fs from 'node:fs';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import knexFactory from 'knex';
import { Agent, fetch as fetchVia } from 'undici';
import { describe, expect, it } from 'vitest';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { approvedBot, client, createTestDatabase, kafkaEnv, startHarness, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET, TEST_SECRET_KEY, usingMysql, type Harness } from './helpers/harness.js';
import { freePort } from './helpers/ports.js';
import { serviceProcesses } from './helpers/processes.js';
import { createTestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

const services = serviceProcesses();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An HTTPS receiver that answers after `delayMs` and counts deliveries per update id. */
async function slowReceiver(delayMs: number) {
  const pki = createTestPki();
  const seen = new Map<number, number>();
  const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    req.resume();
    req.on('end', () => setTimeout(() => {
      const id = Number(req.headers['x-service-update-id']);
      seen.set(id, (seen.get(id) ?? 0) + 1);
      res.writeHead(200).end('ok');
    }, delayMs));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    caFile: pki.caFile,
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    seen,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

describe('SIGTERM during load', () => {
  it('answers every request, ends long polls, exits 0 in bounded time, and loses no delivery', async () => {
    const receiver = await slowReceiver(300);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-sigterm-'));
    const db = await createTestDatabase(dir);
    const port = await freePort();
    const env = {
      DATA_DIR: dir, DATABASE_URL: db.url, PORT: String(port), GRPC_PORT: String(await freePort()), AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, LOG_LEVEL: 'warn', WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: receiver.caFile,
      RATE_LIMIT_BOT: 'off', SHUTDOWN_TIMEOUT: '10s', ...kafkaEnv(),
    };
    const base = `http://127.0.0.1:${port}`;
    try {
      let child = await services.start(env);
      const h = { url: base, jwt: (sub: string, o: { admin?: boolean } = {}) => mintAccountJwt(TEST_JWT_SECRET, { sub, roles: o.admin ? ['admin'] : [] }) } as unknown as Harness;
      const ownerJwt = await h.jwt('sigterm-owner');
      const poller = await approvedBot(h, ownerJwt, 'sigterm_poller');
      const hooked = await approvedBot(h, ownerJwt, 'sigterm_hooked');
      const set = await fetch(`${base}/api/v1/bots/my/${hooked.id}/webhook`, {
        method: 'POST', headers: { authorization: `Bearer ${ownerJwt}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: receiver.url, secret_token: 'sigterm-secret', max_connections: 20 }),
      });
      expect(set.status).toBe(200);

      const statuses = new Map<number, number>();
      const failures: string[] = [];
      const acknowledged: number[] = [];
      let longPollsEnded = 0;
      let gone = false;
      let killedAt: number | undefined;

      /**
       * Sends requests back to back on a keep-alive connection of its own until the server
       * refuses connections. Its own, so the loop knows when its next request opens a new one
       * (after an answer with Connection: close), and no connection sits idle in a shared pool
       * past the second after which a closing server closes it (HTTP/1.1's own race for an idle
       * connection, which a client retries): what this test holds is that a connection in use
       * is never reset.
       */
      const loop = async (request: (dispatcher: Agent) => ReturnType<typeof fetchVia>, onOk?: (body: any) => void) => { // eslint-disable-line @typescript-eslint/no-explicit-any
        const dispatcher = new Agent({ connections: 1 });
        // The next request opens a new connection (the last answer closed its own).
        let fresh = true;
        try {
          while (!gone) {
            try {
              const res = await request(dispatcher);
              fresh = res.headers.get('connection')?.toLowerCase() === 'close';
              const body = await res.json().catch(() => undefined);
              statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
              if (res.ok) onOk?.(body);
            } catch (err) {
              const cause = (err as { cause?: { code?: string; message?: string } }).cause;
              const code = cause?.code;
              if (code === 'ECONNREFUSED') return; // not listening any more: a client goes elsewhere
              // A new connection reset after SIGTERM: the kernel resets the connections still in
              // the accept queue when the server stops listening, the same answer as a refusal
              // (nothing was read). A reused connection's reset is a failure.
              if (fresh && killedAt !== undefined && (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET')) return;
              failures.push(`${code ?? ''} ${(err as Error).message}: ${cause?.message ?? ''} on a ${fresh ? 'new' : 'reused'} connection ${Date.now() - (killedAt ?? Date.now())} ms after SIGTERM`);
              return;
            }
          }
        } finally {
          await dispatcher.destroy();
        }
      };
      const post = (p: string, token: string, body?: unknown) => (dispatcher: Agent) => fetchVia(`${base}${p}`, {
        dispatcher, method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
      });
      const loops = [
        ...Array.from({ length: 6 }, () => loop(post('/api/v1/bots/getMe', poller.token))),
        ...Array.from({ length: 3 }, () => loop(post(`/api/v1/bots/my/${hooked.id}/test-updates`, ownerJwt, { text: 'load' }), (b) => acknowledged.push(b.update_id))),
        // One poller at a time per bot (a newer poll ends an older one), waiting on an empty queue.
        loop(post('/api/v1/bots/getUpdates', poller.token, { timeout: 30 }), (b) => { if (b.ok && b.result.length === 0) longPollsEnded++; }),
      ];

      await sleep(2000);
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      const t0 = Date.now();
      killedAt = t0;
      child.kill('SIGTERM');
      const code = await exited;
      const shutdownMs = Date.now() - t0;
      gone = true;
      await Promise.all(loops);

      expect(failures).toEqual([]);
      expect(code).toBe(0);
      expect(shutdownMs).toBeLessThan(12_000);
      expect([...statuses.keys()].every((s) => [200, 201, 503].includes(s))).toBe(true);
      expect(statuses.get(200)).toBeGreaterThan(10);
      expect(longPollsEnded).toBe(1); // the waiting long poll answered [] at shutdown
      expect(acknowledged.length).toBeGreaterThan(3);

      // Restart on the same database: every acknowledged update is delivered, once.
      child = await services.start(env);
      const end = Date.now() + 30_000;
      while (acknowledged.some((id) => !receiver.seen.has(id)) && Date.now() < end) await sleep(100);
      expect(acknowledged.filter((id) => !receiver.seen.has(id))).toEqual([]);
      expect([...receiver.seen.values()].filter((n) => n > 1)).toEqual([]);
      const second = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await second;
    } finally {
      await receiver.close();
      await db.drop();
    }
  }, 90_000);

  it('long polls that arrived just before SIGTERM, still reading before their wait, end promptly and the process exits well within SHUTDOWN_TIMEOUT', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-sigterm-polls-'));
    const db = await createTestDatabase(dir);
    const port = await freePort();
    const env = {
      DATA_DIR: dir, DATABASE_URL: db.url, PORT: String(port), GRPC_PORT: String(await freePort()), AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, LOG_LEVEL: 'warn', RATE_LIMIT_BOT: 'off', SHUTDOWN_TIMEOUT: '10s', ...kafkaEnv(),
      // Consumer groups of its own: joining the groups other tests' processes just left can
      // hold a Kafka consumer's shutdown for seconds, which is not what this test measures.
      KAFKA_CLIENT_ID: `sigterm-polls-${process.pid}-${Date.now()}`,
    };
    const base = `http://127.0.0.1:${port}`;
    let lock: { release(): Promise<void> } | undefined;
    try {
      const child = await services.start(env);
      const h = { url: base, jwt: (sub: string, o: { admin?: boolean } = {}) => mintAccountJwt(TEST_JWT_SECRET, { sub, roles: o.admin ? ['admin'] : [] }) } as unknown as Harness;
      const ownerJwt = await h.jwt('sigterm-polls-owner');
      const bots = await Promise.all([0, 1, 2].map((i) => approvedBot(h, ownerJwt, `sigterm_late_poller_${i}`)));
      for (const b of bots) await client(base, ownerJwt).post(`/api/v1/bots/my/${b.id}/test-updates`, { text: 'first' });
      // On MariaDB the bots' rows are held: each poll claims its waiter, then stops on the
      // lock in its first write (allowed_updates), so SIGTERM lands between its claim and
      // its wait every time. (SQLite's synchronous driver gives no such foothold: there the
      // polls are usually already waiting when SIGTERM comes.)
      if (usingMysql()) {
        const k = knexFactory({ client: 'mysql2', connection: db.url, pool: { min: 0, max: 1 } });
        const trx = await k.transaction();
        await trx('bots').whereIn('id', bots.map((b) => b.id)).forUpdate().select('id');
        lock = { release: async () => { await trx.rollback(); await k.destroy(); } };
      }
      const polls = bots.map((b) => fetch(`${base}/api/v1/bots/getUpdates`, {
        method: 'POST', headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ timeout: 30, offset: 2, allowed_updates: ['message'] }),
      }).then(async (r) => ({ status: r.status, body: await r.json() }), (err) => ({ status: 0, body: String(err.cause?.code ?? err) })));
      await sleep(300);
      const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      const t0 = Date.now();
      child.kill('SIGTERM');
      await sleep(300);
      await lock?.release();
      lock = undefined;
      const answered = await Promise.all(polls);
      const answeredMs = Date.now() - t0;
      expect(await exited).toBe(0);
      const exitMs = Date.now() - t0;
      // Each poll answers what it has (nothing) at shutdown, not at its 30 s nor at SHUTDOWN_TIMEOUT.
      expect(answered).toEqual(bots.map(() => ({ status: 200, body: { ok: true, result: [] } })));
      expect(answeredMs).toBeLessThan(3000);
      expect(exitMs).toBeLessThan(5000);
    } finally {
      await lock?.release();
      await db.drop();
    }
  }, 60_000);

  it('a gateway process stopping answers a long poll still waiting on the core with 503 at SHUTDOWN_TIMEOUT, not a reset', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-sigterm-gw-'));
    const db = await createTestDatabase(dir);
    const grpcPort = await freePort();
    const common = {
      DATA_DIR: dir, DATABASE_URL: db.url, AUTH_JWT_SECRET: TEST_JWT_SECRET, INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, SECRET_KEY: TEST_SECRET_KEY,
      LOG_LEVEL: 'warn', ...kafkaEnv(),
    };
    try {
      const core = await services.start({ ...common, ROLE: 'core', PORT: String(await freePort()), GRPC_PORT: String(grpcPort) });
      const port = await freePort();
      const gateway = await services.start({ ...common, ROLE: 'gateway', PORT: String(port), CORE_GRPC_ADDRESS: `127.0.0.1:${grpcPort}`, SHUTDOWN_TIMEOUT: '2s' });
      const base = `http://127.0.0.1:${port}`;
      const h = { url: base, jwt: (sub: string, o: { admin?: boolean } = {}) => mintAccountJwt(TEST_JWT_SECRET, { sub, roles: o.admin ? ['admin'] : [] }) } as unknown as Harness;
      const bot = await approvedBot(h, await h.jwt('gw-owner'), 'gw_long_poller');
      const poll = fetch(`${base}/api/v1/bots/getUpdates`, {
        method: 'POST', headers: { authorization: `Bearer ${bot.token}`, 'content-type': 'application/json' }, body: JSON.stringify({ timeout: 40 }),
      }).then(async (r) => ({ status: r.status, body: await r.json() }), (err) => ({ status: 0, body: String(err.cause?.code ?? err) }));
      await sleep(500);
      const exited = new Promise<number | null>((r) => gateway.once('exit', (code) => r(code)));
      const t0 = Date.now();
      gateway.kill('SIGTERM');
      const answered = await poll;
      expect(answered.status).toBe(503);
      expect(answered.body).toMatchObject({ ok: false, error_code: 503 });
      expect(await exited).toBe(0);
      expect(Date.now() - t0).toBeLessThan(6000);
      const coreExit = new Promise((r) => core.once('exit', r));
      core.kill('SIGTERM');
      await coreExit;
    } finally {
      await db.drop();
    }
  }, 60_000);
});

describe('closing with keep-alive connections open', () => {
  it('a request that reaches a connection idle for over a second just as the closing server looks at it is answered 503, not reset', async () => {
    const h = await startHarness('in-process');
    const socket = net.connect(Number(new URL(h.url).port), '127.0.0.1');
    let received = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (received += d));
    const ended = new Promise<string>((resolve) => {
      socket.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
      socket.on('close', () => resolve('closed'));
    });
    const request = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
    try {
      socket.write(request);
      await until(async () => received, (r) => r.includes('}'), 2000);
      expect(received).toMatch(/^HTTP\/1\.1 200/);
      received = '';
      await sleep(1100); // idle past the second after which a closing server closes a connection

      const closing = h.close();
      // The close reaches the HTTP server's step within this turn (the drain and the long
      // polls' steps have nothing to wait for); its idle check first runs 100 ms later.
      await new Promise((r) => setImmediate(r));
      expect(h.apps[0]!.closingStep()).toBe('http/HTTP server');
      // The request arrives, and the process is busy past that check: when it next turns,
      // the check's timer is due before the request has been read.
      socket.write(request);
      const busyUntil = Date.now() + 150;
      while (Date.now() < busyUntil) { /* busy */ }

      expect(await ended).toBe('closed');
      expect(received).toMatch(/^HTTP\/1\.1 503/);
      expect(received.toLowerCase()).toContain('connection: close');
      await closing;
    } finally {
      socket.destroy();
      await h.close();
    }
  });
});
