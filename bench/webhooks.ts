/**
 * npm run bench:webhooks — webhook delivery with 1,000 bots to a fast HTTPS
 * receiver on loopback (a test CA, as in the tests):
 *   - throughput: a burst of BENCH_BURST updates spread over the bots, deliveries/s
 *     until every one has arrived;
 *   - first-attempt latency (ingest acknowledged → request at the receiver) of
 *     healthy bots at a steady rate, without and then with 10% of the bots'
 *     endpoints hanging until the timeout.
 * Runs on the embedded default; with BENCH_DATABASE_URL and BENCH_KAFKA_BROKERS
 * also with a core and a dispatcher process on MariaDB + Kafka.
 * Each latency run starts after BENCH_SETTLE seconds without load, so that the
 * burst's aftermath (the database purging what it deleted, on the same 2 cores)
 * is not counted against the run without hanging bots.
 * Beside the service, in the same run, the ceiling (bench/ceiling.ts, its own process):
 * a minimal HTTPS client posting the same number of signed bodies to the same receiver,
 * BENCH_BOTS targets round robin, keep-alive. Also printed: CPU per delivery (the
 * service's processes during the burst), statements per delivery during the burst (as
 * counted by each process's botplatform_db_statements gauge, and on MariaDB its global
 * `Questions` counter, which counts whatever else uses that server too) and the
 * dispatcher's peak RSS during the hanging-bots run.
 * Settings: BENCH_BOTS (1000), BENCH_BURST (10000), BENCH_RATE (200/s), BENCH_SECONDS (10), BENCH_SETTLE (5),
 * BENCH_THREADS (unset: the service's default DISPATCHER_THREADS; e.g. 0,1,2: one embedded row per number of
 * dispatcher threads, each on a fresh data directory), BENCH_CEILING_CONCURRENCY (256), BENCH_DISPATCHERS (1; e.g. 1,2,3: one MariaDB row per number of
 * dispatcher processes, each on a fresh database; RSS and the dispatcher statement column are the last one's).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { InternalServiceClient, IngestUpdatesRequest } from '../src/gen/botplatform/v1/internal_service.js';
import { createMysqlDatabase } from '../test/helpers/database.js';
import { freePort } from '../test/helpers/ports.js';
import { createTestPki } from '../test/helpers/tls.js';
import { cpuSeconds, machine, percentile, rssMiB, startService, stopServices } from './lib.js';

const BOTS = Number(process.env.BENCH_BOTS ?? 1000);
const BURST = Number(process.env.BENCH_BURST ?? 10_000);
const RATE = Number(process.env.BENCH_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const SETTLE_MS = Number(process.env.BENCH_SETTLE ?? 5) * 1000;
const TIMEOUT_MS = 15_000;
const JWT_SECRET = 'bench-secret-bench-secret-bench-secret-000';
const INTERNAL = 'bench-internal-token-bench-internal-token-00';

/** Fast receiver: 200 at once, except paths under /slow/, which never answer. */
async function startReceiver(pki: { key: string; cert: string }) {
  const arrivals = new Map<string, number>(); // update id → first arrival (ms, performance clock)
  let requests = 0;
  const server = https.createServer({ key: pki.key, cert: pki.cert, keepAliveTimeout: 60_000 }, (req, res) => {
    req.resume();
    req.on('end', () => {
      requests++;
      const id = String(req.headers['x-service-update-id']);
      if (!arrivals.has(id)) arrivals.set(id, performance.now());
      if (req.url?.startsWith('/slow/')) return; // hang: the dispatcher's timeout ends it
      res.end('ok');
    });
  });
  let connections = 0;
  server.on('connection', (s) => (s as import('node:net').Socket).setNoDelay(true));
  server.on('secureConnection', () => connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { base: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, arrivals, requests: () => requests, connections: () => connections, server };
}

async function post(url: string, token: string, body?: unknown) {
  const res = await fetch(url, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body ?? {}),
  });
  return res.json() as Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function makeBots(http: string, receiverBase: string, prefix: string) {
  const owner = await mintAccountJwt(JWT_SECRET, { sub: `bench-${prefix}` });
  const admin = await mintAccountJwt(JWT_SECRET, { sub: 'bench-admin', roles: ['admin'] });
  const ids: string[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < BOTS) {
      const i = next++;
      const created = await post(`${http}/api/v1/bots/applications`, owner, { name: `w${i}`, username: `${prefix}_${i}` });
      const approved = await post(`${http}/api/v1/admin/bots/${created.id}/approve`, admin);
      if (approved.review_status !== 'approved') throw new Error(`approve failed: ${JSON.stringify(approved)}`);
      // Bots 0, 10, 20, ... get a /slow/ path: switched to hanging in the second latency run.
      const hooked = await post(`${http}/api/v1/bots/my/${created.id}/webhook`, owner, { url: `${receiverBase}/fast/${i}`, secret_token: 'bench' });
      if (hooked.delivery_mode !== 'webhook') throw new Error(`setting the webhook failed: ${JSON.stringify(hooked)}`);
      ids[i] = created.id;
    }
  }));
  return { ids, owner };
}

function ingester(address: string) {
  const client = new InternalServiceClient(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${INTERNAL}`);
  const message = { messageId: 0, date: 0, chat: { id: 5, type: 'private' }, from: { id: 5, isBot: false }, text: 'bench' };
  return {
    send: (botIds: string[]) =>
      new Promise<{ updateId: number }[]>((resolve, reject) =>
        client.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates: botIds.map((botId) => ({ botId, message })) }), md, (err, res) =>
          err ? reject(err) : resolve(res!.results))),
    close: () => client.close(),
  };
}

async function waitAll(ids: number[], arrivals: Map<string, number>, ms: number) {
  const end = Date.now() + ms;
  while (ids.some((id) => !arrivals.has(String(id))) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}

/** The ceiling client (bench/ceiling.ts) against this receiver: requests/s and its CPU seconds per request. */
async function ceiling(receiverBase: string, caFile: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'ceiling.ts')], {
    env: {
      ...process.env, CEILING_BASE: receiverBase, CEILING_CA: caFile, CEILING_COUNT: String(BURST), CEILING_TARGETS: String(BOTS),
      CEILING_CONCURRENCY: process.env.BENCH_CEILING_CONCURRENCY ?? '256',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  if (code !== 0) throw new Error(`the ceiling client failed (${code})`);
  const r = JSON.parse(out.trim().split('\n').pop()!) as { requests: number; seconds: number; cpuSeconds: number };
  return { rate: r.requests / r.seconds, cpuMs: (1000 * r.cpuSeconds) / r.requests };
}

/** CPU seconds of each thread of a process so far (thread id → seconds). */
function threadCpu(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      out.set(Number(t), cpuSeconds(pid, Number(t)));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** A gauge of a process's /metrics (NaN when it has none). */
async function gaugeOf(httpBase: string, name: string): Promise<number> {
  const text = await (await fetch(`${httpBase}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : NaN;
}
/** A process's botplatform_db_statements gauge (statements it has sent to its database, its dispatcher threads' included). */
const statementsOf = (httpBase: string) => gaugeOf(httpBase, 'botplatform_db_statements');

/** MariaDB's global Questions counter (every client's statements on that server). */
async function questions(serverUrl: string | undefined): Promise<number> {
  if (!serverUrl) return NaN;
  const mysql = await import('mysql2/promise');
  const conn = await mysql.createConnection(serverUrl);
  try {
    const [rows] = await conn.query("SHOW GLOBAL STATUS LIKE 'Questions'");
    return Number((rows as { Value: string }[])[0]!.Value) - 1; // this statement itself
  } finally {
    await conn.end();
  }
}

async function burst(grpcAddress: string, ids: string[], arrivals: Map<string, number>) {
  const ing = ingester(grpcAddress);
  const start = performance.now();
  const sent: number[] = [];
  for (let k = 0; k < BURST; k += 500) {
    const res = await ing.send(Array.from({ length: Math.min(500, BURST - k) }, (_, j) => ids[(k + j) % ids.length]!));
    sent.push(...res.map((r) => r.updateId));
  }
  await waitAll(sent, arrivals, 300_000);
  const got = sent.map((id) => arrivals.get(String(id))).filter((t): t is number => t !== undefined);
  ing.close();
  return { rate: got.length / ((Math.max(...got) - start) / 1000), arrived: got.length };
}

/** Steady rate to healthy bots (and, when `hanging`, to the hanging ones too); first-attempt latency of the healthy. */
async function steady(grpcAddress: string, ids: string[], arrivals: Map<string, number>, hanging: Set<number>) {
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const ing = ingester(grpcAddress);
  const healthy = ids.filter((_, i) => !hanging.has(i));
  const slow = ids.filter((_, i) => hanging.has(i));
  const samples: { id: number; t0: number }[] = [];
  // A new gRPC channel connects on its first call (~0.4 s here): pay that before timing, or
  // the first tick's updates measure the load generator's own connection set-up.
  await ing.send([healthy[0]!]);
  const tickMs = 50;
  const perTick = Math.max(1, Math.round((RATE * tickMs) / 1000));
  const start = performance.now();
  const inflight: Promise<void>[] = [];
  let k = 0;
  for (let tick = 0; tick < (SECONDS * 1000) / tickMs; tick++) {
    const due = start + tick * tickMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const batch = Array.from({ length: perTick }, () => (slow.length > 0 && k % 10 === 0 ? slow[k++ % slow.length]! : healthy[k++ % healthy.length]!));
    const t0 = performance.now();
    inflight.push(ing.send(batch).then((res) => {
      res.forEach((r, j) => { if (!slow.includes(batch[j]!)) samples.push({ id: r.updateId, t0 }); });
    }));
  }
  await Promise.all(inflight);
  await waitAll(samples.map((s) => s.id), arrivals, 60_000);
  ing.close();
  const lat = samples.filter((s) => arrivals.has(String(s.id))).map((s) => arrivals.get(String(s.id))! - s.t0).sort((a, b) => a - b);
  return { p50: percentile(lat, 50), p99: percentile(lat, 99), n: lat.length, of: samples.length };
}

async function run(
  name: string, pki: ReturnType<typeof createTestPki>, envs: Record<string, string>[], http: string, grpcAddress: string, serverUrl?: string,
) {
  const receiver = await startReceiver(pki);
  const procs: ChildProcess[] = [];
  for (const env of envs) procs.push(await startService(env));
  // The last process runs the dispatcher (role all or dispatcher); statements are counted in those with a database.
  const dispatcher = procs.at(-1)!;
  const withDb = envs.map((e, i) => ({ base: `http://127.0.0.1:${e.PORT}`, pid: procs[i]!.pid! })).filter((_, i) => envs[i]!.ROLE !== 'gateway');
  const prefix = `w${crypto.randomBytes(3).toString('hex')}`;
  const { ids, owner } = await makeBots(http, receiver.base, prefix);
  // One delivery before anything is timed: on the embedded default the dispatcher threads
  // start with the first open delivery, and the burst measures them running, not starting.
  const warm = ingester(grpcAddress);
  const [first] = await warm.send([ids[0]!]);
  await waitAll([first!.updateId], receiver.arrivals, 30_000);
  warm.close();
  const c0 = receiver.connections();
  const top = await ceiling(receiver.base, pki.caFile);
  const c1 = receiver.connections();
  const cpu0 = procs.map((p) => cpuSeconds(p.pid!));
  // The dispatcher process's main thread (ingest, the gateway, the core in role=all) apart from its other threads (dispatcher threads, GC and I/O helpers).
  const main0 = cpuSeconds(dispatcher.pid!, dispatcher.pid!);
  const threads0 = threadCpu(dispatcher.pid!);
  const own0 = await Promise.all(withDb.map((p) => statementsOf(p.base)));
  const q0 = await questions(serverUrl);
  const wait0 = await Promise.all(withDb.map((p) => gaugeOf(p.base, 'botplatform_db_lock_wait_seconds')));
  const burstStart = performance.now();
  const throughput = await burst(grpcAddress, ids, receiver.arrivals);
  const burstSeconds = (performance.now() - burstStart) / 1000;
  const wait1 = await Promise.all(withDb.map((p) => gaugeOf(p.base, 'botplatform_db_lock_wait_seconds')));
  // SQLite: time the threads (or processes) waited for the write lock, per second of the burst.
  const lockWait = wait1.reduce((sum, n, i) => sum + n - wait0[i]!, 0) / burstSeconds;
  const c2 = receiver.connections();
  const q1 = await questions(serverUrl);
  const own1 = await Promise.all(withDb.map((p) => statementsOf(p.base)));
  const cpuMs = (1000 * procs.reduce((sum, p, i) => sum + cpuSeconds(p.pid!) - cpu0[i]!, 0)) / throughput.arrived;
  const mainThreadMs = (1000 * (cpuSeconds(dispatcher.pid!, dispatcher.pid!) - main0)) / throughput.arrived;
  // The dispatcher process's other threads in the burst, busiest first (a dispatcher thread's is the first
  // with BENCH_THREADS=1; then V8's helpers and libuv's pool), ms per delivery.
  const threads1 = threadCpu(dispatcher.pid!);
  const others = [...threads1].filter(([t]) => t !== dispatcher.pid!)
    .map(([t, s]) => (1000 * (s - (threads0.get(t) ?? 0))) / throughput.arrived).filter((ms) => ms >= 0.005).sort((a, b) => b - a);
  const statements = {
    own: own1.reduce((sum, n, i) => sum + n - own0[i]!, 0) / throughput.arrived,
    dispatcher: (own1.at(-1)! - own0.at(-1)!) / throughput.arrived,
    questions: (q1 - q0) / throughput.arrived,
  };
  const calm = await steady(grpcAddress, ids, receiver.arrivals, new Set());
  const c3 = receiver.connections();
  // 10% of the bots now hang until the timeout.
  const hanging = new Set(ids.map((_, i) => i).filter((i) => i % 10 === 0));
  for (const i of hanging) {
    await post(`${http}/api/v1/bots/my/${ids[i]}/webhook`, owner, { url: `${receiver.base}/slow/${i}`, secret_token: 'bench' });
  }
  let peakRss = rssMiB(dispatcher.pid!);
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssMiB(dispatcher.pid!))), 100);
  const stormy = await steady(grpcAddress, ids, receiver.arrivals, hanging);
  clearInterval(sampler);
  const tls = { ceiling: c1 - c0, burst: c2 - c1, calm: c3 - c2, stormy: receiver.connections() - c3 };
  stopServices();
  receiver.server.closeAllConnections();
  receiver.server.close();
  return { name, throughput, top, cpuMs, mainThreadMs, others, statements, calm, stormy, peakRss, tls, lockWait };
}

async function main() {
  const pki = createTestPki();
  const env = async (dir: string, extra: Record<string, string> = {}) => ({
    DATA_DIR: dir, AUTH_JWT_SECRET: JWT_SECRET, INTERNAL_API_TOKEN: INTERNAL, LOG_LEVEL: 'error',
    SECRET_KEY: crypto.createHash('sha256').update('bench').digest('base64'),
    WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    PORT: String(await freePort()), GRPC_PORT: String(await freePort()), ...extra,
  });
  const results = [];
  if (process.env.BENCH_ONLY !== 'mysql') {
    // BENCH_THREADS=0,1,2: one embedded row per DISPATCHER_THREADS, each on a fresh data directory (unset: the service's default).
    const threads = process.env.BENCH_THREADS ? process.env.BENCH_THREADS.split(',').map((n) => n.trim()) : [undefined];
    for (const t of threads) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-hook-'));
      const embedded = await env(dir, t === undefined ? {} : { DISPATCHER_THREADS: t });
      const name = `embedded (SQLite, role=all${t === undefined ? '' : `, DISPATCHER_THREADS=${t}`})`;
      results.push(await run(name, pki, [embedded], `http://127.0.0.1:${embedded.PORT}`, `127.0.0.1:${embedded.GRPC_PORT}`));
    }
  }

  const server = process.env.BENCH_DATABASE_URL;
  const brokers = process.env.BENCH_KAFKA_BROKERS;
  if (server && brokers) {
    // BENCH_DISPATCHERS=1,2,3: one MariaDB row per count of dispatcher processes, each on a fresh database.
    const counts = (process.env.BENCH_DISPATCHERS ?? '1').split(',').map((n) => Number(n.trim())).filter((n) => n >= 1);
    for (const n of counts) {
      const db = await createMysqlDatabase(server, 'bp_bench');
      try {
        const d2 = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-hook-'));
        const shared = { DATABASE_URL: db.url, KAFKA_BROKERS: brokers };
        const core = await env(d2, { ...shared, ROLE: 'core' });
        const gateway = await env(d2, { ROLE: 'gateway', CORE_GRPC_ADDRESS: `127.0.0.1:${core.GRPC_PORT}` });
        const dispatchers = [];
        for (let i = 0; i < n; i++) dispatchers.push(await env(d2, { ...shared, ROLE: 'dispatcher' }));
        const name = n === 1 ? 'MariaDB + Kafka: core, gateway and dispatcher processes' : `MariaDB + Kafka: core, gateway and ${n} dispatcher processes`;
        results.push(await run(name, pki, [core, gateway, ...dispatchers], `http://127.0.0.1:${gateway.PORT}`, `127.0.0.1:${core.GRPC_PORT}`, server));
      } finally {
        if (!process.env.BENCH_KEEP_DB) await db.drop();
        else console.log(`kept database ${db.name}`);
      }
    }
  } else {
    console.log('(MariaDB + Kafka row skipped: set BENCH_DATABASE_URL and BENCH_KAFKA_BROKERS; npm run infra:up starts both)');
  }

  console.log(`\nbench:webhooks — ${BOTS} bots, burst of ${BURST}, steady ${RATE} updates/s for ${SECONDS}s, hanging endpoints time out after ${TIMEOUT_MS / 1000}s`);
  console.log(`machine: ${machine()}\n`);
  console.log('| setup | burst: deliveries/s | ceiling: requests/s | ratio | healthy first attempt p50 / p99 ms, no hanging bots | same, 10% of bots hanging | p99 ratio |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const r of results) {
    const lat = (x: { p50: number; p99: number; n: number; of: number }) =>
      `${x.p50.toFixed(1)} / ${x.p99.toFixed(1)}${x.n < x.of ? ` (only ${x.n}/${x.of} arrived)` : ''}`;
    const burstCell = `${r.throughput.rate.toFixed(0)}${r.throughput.arrived < BURST ? ` (only ${r.throughput.arrived}/${BURST} arrived)` : ''}`;
    console.log(`| ${r.name} | ${burstCell} | ${r.top.rate.toFixed(0)} | ${(r.throughput.rate / r.top.rate).toFixed(2)} | ${lat(r.calm)} | ${lat(r.stormy)} | ${(r.stormy.p99 / r.calm.p99).toFixed(2)} |`);
  }
  console.log('\n| setup | service CPU ms per delivery (burst; in brackets the dispatcher process\'s main thread) | ceiling CPU ms per request | statements per delivery (burst): all processes / dispatcher process / MariaDB Questions | dispatcher peak RSS, hanging run (MiB) | TLS connections to the receiver: ceiling / burst / steady / steady with hanging bots | SQLite write-lock waits, ms per s of burst |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const r of results) {
    const st = r.statements;
    console.log(`| ${r.name} | ${r.cpuMs.toFixed(2)} (${r.mainThreadMs.toFixed(2)}) | ${r.top.cpuMs.toFixed(2)} | ${st.own.toFixed(2)} / ${st.dispatcher.toFixed(2)} / ${Number.isNaN(st.questions) ? '-' : st.questions.toFixed(2)} | ${r.peakRss.toFixed(0)} | ${r.tls.ceiling} / ${r.tls.burst} / ${r.tls.calm} / ${r.tls.stormy} | ${Number.isNaN(r.lockWait) ? '-' : (1000 * r.lockWait).toFixed(1)} |`);
  }
  console.log('');
  for (const r of results) console.log(`${r.name}: the dispatcher process's other threads in the burst, CPU ms per delivery, busiest first: ${r.others.map((ms) => ms.toFixed(3)).join(', ')}`);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => {
    stopServices();
    setTimeout(() => process.exit(), 500).unref();
  });
