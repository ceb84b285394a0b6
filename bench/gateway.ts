/**
 * npm run bench:gateway — first (BENCH_ONLY=calls, the default), each call of the
 * performance goals against the baselines in one run: raw Fastify (constant JSON), a
 * raw grpc-js echo server, and each call's own hand-made floor (what the call cannot do
 * without: the credential checked and kept as the service keeps it, the call's reads
 * and writes as prepared statements, the same JSON; printed as "× its own floor", and
 * the goal of issue 37, CPU per request ≤ 1.3 × the floor's, as met or not): getMe's
 * (Fastify + SHA-256 of the bearer + a prepared better-sqlite3 lookup, kept 1 s), GET /bots/my's
 * and /bots/my/{id}'s, getUpdates' and getWebhookInfo's, sendMessage's, and gRPC
 * getMe's (grpc-js + the generated codec) — bench/baselines.ts, a process of its own; with a
 * MySQL/MariaDB BENCH_DATABASE_URL the floors of the reading calls and sendMessage read and
 * write there (mysql2, a database of their own on the same server), getMe's stays on SQLite;
 * before the rounds each HTTP floor's answer is checked to have its call's status and body
 * shape, and a difference is printed under the table — beside the
 * service (role=all, limits and metrics on, as shipped, LOG_LEVEL=info to /dev/null). For each call: throughput, the service's
 * CPU per request (its process's own CPU time, /proc/PID/stat), and the ratios to
 * the baselines, rounds alternated so that load from elsewhere hits all alike
 * (medians). BENCH_PIN=1 pins the service (and the baselines) to CPU 0 and this
 * load generator to CPU 1 (taskset).
 *
 * BENCH_ONLY=paths — GET /api/v1/bots/my through the HTTP gateway and the
 * same call (ConsoleService/ListMyBots) made directly over gRPC, side by side in
 * one run, at the same concurrency, against the service running as real
 * processes: role=all (gateway calls the core in-process), and a separate
 * gateway process reaching a core process over gRPC.
 *
 * Then the overhead of rate limits and metrics: role=all with both on (limits set
 * high enough never to refuse, so every runtime call still goes through the
 * counter transaction) and with both off (LIMITS_ENABLED=false
 * METRICS_ENABLED=false), for a runtime call (POST getMe, bot token: limited and
 * counted) and a console call (GET /bots/my: metrics only), as on/off ratios.
 *
 * Settings (env): BENCH_SECONDS (10), BENCH_CONNECTIONS (32), BENCH_DATABASE_URL
 * (default: a fresh SQLite file), BENCH_KAFKA_BROKERS (calls, with a MySQL/MariaDB
 * BENCH_DATABASE_URL: the service on Kafka too, as at scale), BENCH_ROUNDS (3), BENCH_ONLY (calls | paths |
 * overhead | all), BENCH_PIN (0), BENCH_CALLS (calls: only the service's calls whose
 * names contain one of these comma-separated strings), BENCH_CPU_PROF (a directory: each
 * service process writes a V8 CPU profile there when it exits), BENCH_ENV (calls: a JSON
 * object of settings for the service under test, over the shipped ones, for ablations:
 * '{"LIMITS_ENABLED":"false"}', '{"LOG_LEVEL":"warn"}'), BENCH_FLOOR_SHARED_READS (1: on MySQL/MariaDB the
 * reading floors' identical reads of one event-loop turn share one statement, as the
 * service's driver shares them; by default each request sends its own, as a raw client).
 */
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import * as grpc from '@grpc/grpc-js';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { ConsoleServiceClient } from '../src/gen/botplatform/v1/console_service.js';
import { RuntimeServiceClient } from '../src/gen/botplatform/v1/runtime_service.js';
import { createMysqlDatabase } from '../test/helpers/database.js';
import { freePort } from '../test/helpers/ports.js';
import { cpuSeconds, machine, percentile, startHelper, startService as start, stopServices } from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SECRET = 'bench-secret-bench-secret-bench-secret-000';

interface Figures { rps: number; p50: number; p99: number; errors: number; /** CPU ms the service used per request (when its pid is known). */ cpuMs?: number }

async function benchHttp(url: string, jwt: string, method: 'GET' | 'POST' = 'GET', pid?: number, body?: unknown, warmup = 2): Promise<Figures> {
  const headers: Record<string, string> = { authorization: `Bearer ${jwt}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const run = (duration: number) =>
    autocannon({ url, method, connections: CONNECTIONS, duration, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (warmup > 0) await run(warmup);
  const cpu0 = pid ? cpuSeconds(pid) : 0;
  const r = await run(SECONDS);
  const cpuMs = pid ? ((cpuSeconds(pid) - cpu0) * 1000) / Math.max(1, r.requests.total) : undefined;
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.non2xx + r.errors, cpuMs };
}

async function benchGrpc(address: string, jwt: string): Promise<Figures> {
  const client = new ConsoleServiceClient(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${jwt}`);
  const once = () =>
    new Promise<boolean>((resolve) => client.listMyBots({}, md, (err) => resolve(!err)));
  const figures = await benchUnary(once);
  client.close();
  return figures;
}

/** CONNECTIONS concurrent loops of one unary call (true: it succeeded), warm-up then SECONDS; CPU of `pid` per call. */
async function benchUnary(once: () => Promise<boolean>, pid?: number, warmup = 2): Promise<Figures> {
  const run = async (seconds: number) => {
    const latencies: number[] = [];
    let errors = 0;
    const end = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        while (performance.now() < end) {
          const t = performance.now();
          if (!(await once())) errors++;
          latencies.push(performance.now() - t);
        }
      }),
    );
    latencies.sort((a, b) => a - b);
    const pct = (p: number) => percentile(latencies, p);
    return { rps: latencies.length / seconds, p50: pct(50), p99: pct(99), errors };
  };
  if (warmup > 0) await run(warmup);
  const cpu0 = pid ? cpuSeconds(pid) : 0;
  const figures: Figures = await run(SECONDS);
  const total = figures.rps * SECONDS;
  if (pid) figures.cpuMs = ((cpuSeconds(pid) - cpu0) * 1000) / Math.max(1, total);
  return figures;
}

async function seed(base: string, jwt: string, tag = 'main') {
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${base}/api/v1/bots/applications`, {
      method: 'POST',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `Bench ${i}`, username: `bench_bot_${tag}_${i}` }),
    });
    if (res.status !== 201) throw new Error(`seed failed: ${res.status} ${await res.text()}`);
  }
}

/** A bot approved by an admin, and its token. */
async function approvedBotToken(base: string, jwt: string, username: string): Promise<string> {
  const post = (p: string, token: string, body?: unknown) => fetch(`${base}${p}`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  }).then((r) => r.json());
  const created = await post('/api/v1/bots/applications', jwt, { name: 'Bench bot', username });
  const admin = await mintAccountJwt(SECRET, { sub: 'bench-admin', roles: ['admin'] });
  await post(`/api/v1/admin/bots/${created.id}/approve`, admin);
  const detail = await fetch(`${base}/api/v1/bots/my/${created.id}`, { headers: { authorization: `Bearer ${jwt}` } }).then((r) => r.json());
  return detail.one_time_token;
}

/** role=all with limits and metrics on or off, ready for getMe (runtime) and GET /bots/my (console). */
async function startOverheadService(database: (dir: string) => string, on: boolean) {
  const jwt = await mintAccountJwt(SECRET, { sub: `bench-account-${on ? 'on' : 'off'}` });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-ovh-'));
  const port = String(await freePort());
  const switches: Record<string, string> = on
    ? { LIMITS_ENABLED: 'true', METRICS_ENABLED: 'true', RATE_LIMIT_BOT: '1000000000/1s', RATE_LIMIT_CHAT: '1000000000/1s', QUOTA_DAILY: '1000000000' }
    : { LIMITS_ENABLED: 'false', METRICS_ENABLED: 'false' };
  const child = await start({ AUTH_JWT_SECRET: SECRET, DATA_DIR: dataDir, DATABASE_URL: database(dataDir), ROLE: 'all', PORT: port, GRPC_PORT: String(await freePort()), ...switches });
  const base = `http://127.0.0.1:${port}`;
  await seed(base, jwt, `${on ? 'on' : 'off'}_${Date.now() % 1_000_000}`);
  const token = await approvedBotToken(base, jwt, `bench_${on ? 'on' : 'off'}_${Date.now() % 100000}`);
  return {
    runtime: () => benchHttp(`${base}/api/v1/bots/getMe`, token, 'POST', child.pid),
    console: () => benchHttp(`${base}/api/v1/bots/my`, jwt, 'GET', child.pid),
  };
}

/** The goal of issue 37: each call's CPU per request at most this × its own floor's. */
const GOAL = 1.3;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-'));
  const database = process.env.BENCH_DATABASE_URL ?? `sqlite:${path.join(dataDir, 'bench.sqlite')}`;
  // A separate gateway needs its core's SECRET_KEY.
  const common = { DATA_DIR: dataDir, DATABASE_URL: database, SECRET_KEY: crypto.randomBytes(32).toString('base64') };
  const jwt = await mintAccountJwt(SECRET, { sub: 'bench-account' });

  const all = { PORT: String(await freePort()), GRPC_PORT: String(await freePort()) };
  await start({ AUTH_JWT_SECRET: SECRET, ...common, ROLE: 'all', ...all });
  const allBase = `http://127.0.0.1:${all.PORT}`;
  await seed(allBase, jwt);

  const gatewayPort = String(await freePort());
  await start({ AUTH_JWT_SECRET: SECRET, ...common, ROLE: 'gateway', PORT: gatewayPort, CORE_GRPC_ADDRESS: `127.0.0.1:${all.GRPC_PORT}` });

  const rows: [string, Figures][] = [];
  rows.push(['HTTP gateway, in-process core (role=all)', await benchHttp(`${allBase}/api/v1/bots/my`, jwt)]);
  rows.push(['HTTP gateway process -> gRPC -> core', await benchHttp(`http://127.0.0.1:${gatewayPort}/api/v1/bots/my`, jwt)]);
  rows.push(['gRPC direct (ListMyBots)', await benchGrpc(`127.0.0.1:${all.GRPC_PORT}`, jwt)]);

  const grpcRps = rows[2]![1].rps;
  console.log(`\nbench:gateway — GET /api/v1/bots/my (5 bots), ${CONNECTIONS} concurrent, ${SECONDS}s per row, ${database.split(':')[0]}`);
  console.log(`machine: ${machine()}\n`);
  console.log('| path | requests/s | p50 ms | p99 ms | errors | vs gRPC direct |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const [name, f] of rows) {
    console.log(`| ${name} | ${f.rps.toFixed(0)} | ${f.p50.toFixed(2)} | ${f.p99.toFixed(2)} | ${f.errors} | ${(f.rps / grpcRps).toFixed(2)}x |`);
  }
  stopServices();
}

async function overhead() {
  // Each configuration on a fresh database (a MySQL URL is shared: the usernames differ).
  // Both run side by side and are measured in alternation, ROUNDS times, so that load
  // from elsewhere on the machine hits both alike; the ratios are medians of the rounds.
  const overheadDb = (dir: string) => process.env.BENCH_DATABASE_URL ?? `sqlite:${path.join(dir, 'bench.sqlite')}`;
  const off = await startOverheadService(overheadDb, false);
  const on = await startOverheadService(overheadDb, true);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const results = { runtime: { off: [] as Figures[], on: [] as Figures[] }, console: { off: [] as Figures[], on: [] as Figures[] } };
  for (let i = 0; i < rounds; i++) {
    for (const key of ['runtime', 'console'] as const) {
      results[key].off.push(await off[key]());
      results[key].on.push(await on[key]());
    }
  }
  console.log(`\nrate limits + metrics, role=all, ${CONNECTIONS} concurrent, ${rounds} alternating rounds of ${SECONDS}s per configuration (medians)\n`);
  console.log('| call | off: requests/s | on: requests/s | on/off throughput | off: CPU ms/request | on: CPU ms/request | on/off CPU per request | off: p50 / p99 ms | on: p50 / p99 ms | errors (on) |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const [name, key] of [['POST getMe (runtime: limited + metered)', 'runtime'], ['GET /bots/my (console: metered)', 'console']] as const) {
    const r = results[key];
    const m = (xs: Figures[], f: keyof Figures) => median(xs.map((x) => x[f] ?? NaN));
    const ratio = median(r.on.map((x, j) => x.rps / r.off[j]!.rps));
    const cpuRatio = median(r.on.map((x, j) => x.cpuMs! / r.off[j]!.cpuMs!));
    console.log(`| ${name} | ${m(r.off, 'rps').toFixed(0)} | ${m(r.on, 'rps').toFixed(0)} | ${ratio.toFixed(2)} | ${m(r.off, 'cpuMs').toFixed(3)} | ${m(r.on, 'cpuMs').toFixed(3)} | ${cpuRatio.toFixed(2)} | ${m(r.off, 'p50').toFixed(1)} / ${m(r.off, 'p99').toFixed(1)} | ${m(r.on, 'p50').toFixed(1)} / ${m(r.on, 'p99').toFixed(1)} | ${r.on.reduce((n, x) => n + x.errors, 0)} |`);
  }
}

/** Pins a process (all its threads) to one CPU, when BENCH_PIN=1 and taskset exists. */
function pin(pid: number, cpu: number) {
  if (process.env.BENCH_PIN !== '1') return;
  try {
    execFileSync('taskset', ['-a', '-pc', String(cpu), String(pid)], { stdio: 'ignore' });
  } catch {
    console.warn('taskset failed: not pinned');
  }
}

/** bench/baselines.ts as a child process: its addresses, the floor's bot token and its pid. */
async function startBaselines(env: Record<string, string> = {}) {
  const { info, pid, stop } = await startHelper<{ http: string; grpc: string; token: string; jwt: string; botId: string }>('baselines.ts', env);
  return { ...info, pid, stop };
}

interface Target {
  name: string;
  run: (warmup: number) => Promise<Figures>;
  /** A gRPC call: its throughput is compared with the echo server's (HTTP calls': raw Fastify's). */
  grpc?: boolean;
  /**
   * The call's own hand-made floor among the baselines: what the call cannot do without.
   * The goal (issue 37): the service's CPU per request at most GOAL × the floor's.
   */
  floor?: Target;
  /**
   * Its floor does the call's database work on the service's database (the reading calls'
   * and sendMessage's floors on MySQL/MariaDB): that floor's CPU less raw Fastify's is what
   * the database costs the call on the client's side, and the service's CPU less that is
   * what the service adds.
   */
  floorOnServiceDb?: boolean;
  /** An HTTP target's answer to one request, "<status> <body>" (a floor's must have its call's shape). */
  answer?: () => Promise<string>;
}

/**
 * An answer's shape: its status, and its body's keys in their order with each value's type
 * (ids, names and times differ between the service and a floor; nothing else may).
 */
function shapeOf(answer: string): string {
  const [status, body] = [answer.slice(0, answer.indexOf(' ')), answer.slice(answer.indexOf(' ') + 1)];
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return `${status} (not JSON) ${body}`;
  }
  return `${status} ${JSON.stringify(parsed, (_k, v) => (typeof v === 'string' ? 's' : typeof v === 'number' ? 0 : typeof v === 'boolean' ? 'b' : v))}`;
}

async function calls() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-calls-'));
  // On MySQL/MariaDB: a throwaway database on that server, dropped at the end.
  const server = process.env.BENCH_DATABASE_URL;
  const mysql = server ? await createMysqlDatabase(server, 'bp_bench') : undefined;
  const database = mysql?.url ?? `sqlite:${path.join(dataDir, 'bench.sqlite')}`;
  // The floors' own database on the same server (their tables are their own).
  const floorDb = server ? await createMysqlDatabase(server, 'bp_floor') : undefined;
  // With Kafka, sendMessage's floor publishes its relay's messages there, as the service must.
  const floorKafka = floorDb ? process.env.BENCH_KAFKA_BROKERS : undefined;
  const baselines = await startBaselines(floorDb ? { BASELINE_DATABASE_URL: floorDb.url, ...(floorKafka ? { BASELINE_KAFKA_BROKERS: floorKafka } : {}) } : {});
  const port = String(await freePort());
  const grpcPort = String(await freePort());
  // As shipped: limits on (set high enough never to refuse, so every runtime call still
  // counts), metrics on, request logs at info (to /dev/null).
  const child = await start({
    AUTH_JWT_SECRET: SECRET, DATA_DIR: dataDir, DATABASE_URL: database, ROLE: 'all', PORT: port, GRPC_PORT: grpcPort, LOG_LEVEL: 'info',
    ...(mysql && process.env.BENCH_KAFKA_BROKERS ? { KAFKA_BROKERS: process.env.BENCH_KAFKA_BROKERS } : {}),
    LIMITS_ENABLED: 'true', METRICS_ENABLED: 'true', RATE_LIMIT_BOT: '1000000000/1s', RATE_LIMIT_CHAT: '1000000000/1s', QUOTA_DAILY: '1000000000',
    ...JSON.parse(process.env.BENCH_ENV ?? '{}'),
  });
  const pid = child.pid!;
  pin(pid, 0);
  pin(baselines.pid, 0);
  pin(process.pid, 1);
  const base = `http://127.0.0.1:${port}`;
  const tag = `c${Date.now() % 1_000_000}`;
  const jwt = await mintAccountJwt(SECRET, { sub: `bench-calls-${tag}` });
  await seed(base, jwt, tag);
  const token = await approvedBotToken(base, jwt, `bench_${tag}`);
  const json = (p: string, auth: string, method = 'GET', body?: unknown) => fetch(`${base}${p}`, {
    method, headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  }).then(async (r) => ({ status: r.status, body: await r.json() }));
  const me = await json('/api/v1/bots/getMe', token, 'POST');
  const botId = me.body.result.id as string;
  // sendMessage needs a chat that wrote to the bot; getUpdates then confirms it, leaving nothing pending.
  await json(`/api/v1/bots/my/${botId}/test-updates`, jwt, 'POST', { text: 'hello', chat_id: 4242, from: { id: 4242, is_bot: false, username: 'bench' } });
  const pending = await json('/api/v1/bots/getUpdates', token, 'POST', { timeout: 0 });
  const offset = (pending.body.result.at(-1)?.update_seq ?? 0) + 1;
  await json('/api/v1/bots/getUpdates', token, 'POST', { offset, timeout: 0 });
  const sent = await json('/api/v1/bots/sendMessage', token, 'POST', { chat_id: 4242, text: 'bench' });
  if (sent.status !== 200) throw new Error(`sendMessage setup failed: ${sent.status} ${JSON.stringify(sent.body)}`);

  const runtime = new RuntimeServiceClient(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${token}`);
  const echo = new grpc.Client(baselines.grpc, grpc.credentials.createInsecure());
  const payload = Buffer.alloc(96, 1); // about a getMe answer's size
  const identity = (b: Buffer) => b;

  // The baselines, each named, so that a call's ratios name the baseline they divide by.
  /** An HTTP target: its bench, and its answer to one request (for the shapes' check). */
  const http = (url: string, auth: string, method: 'GET' | 'POST', of: number, body?: unknown) => ({
    run: (w: number) => benchHttp(url, auth, method, of, body, w),
    answer: () => fetch(url, { method, headers: { authorization: `Bearer ${auth}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body) }).then(async (r) => `${r.status} ${await r.text()}`),
  });
  const b = baselines.http;
  /** Where the floors of the reading calls and sendMessage do their database work (getMe's stays on SQLite: it reads about once a second). */
  const floorDbName = floorDb ? 'MySQL/MariaDB, mysql2' : 'SQLite, prepared';
  const raw: Target = { name: 'baseline: raw Fastify, constant JSON', ...http(`${b}/const`, 'x', 'GET', baselines.pid) };
  const getMeFloor: Target = { name: 'baseline: floor of getMe (Fastify + SHA-256 + prepared SQLite lookup, kept 1 s as the service keeps it)', ...http(`${b}/floor`, baselines.token, 'POST', baselines.pid) };
  const echoServer: Target = { name: 'baseline: raw grpc-js echo', run: (w) => benchUnary(() => new Promise<boolean>((resolve) =>
    echo.makeUnaryRequest('/bench.Echo/Echo', identity, identity, payload, (err) => resolve(!err))), baselines.pid, w) };
  const listFloor: Target = { name: `baseline: floor of GET /bots/my (Fastify + kept JWT principal + the page read, same JSON; ${floorDbName})`,
    ...http(`${b}/floor/my`, baselines.jwt, 'GET', baselines.pid) };
  const detailFloor: Target = { name: `baseline: floor of GET /bots/my/{id} (Fastify + kept JWT principal + the bot and its webhook read, same JSON; ${floorDbName})`,
    ...http(`${b}/floor/my/${baselines.botId}`, baselines.jwt, 'GET', baselines.pid) };
  const sendFloor: Target = { name: `baseline: floor of sendMessage (Fastify + kept principal + the text parsed, the chat check, the stored message with its feed row, one transaction per batch, published from the commit (SQLite) or by an outbox row relayed (MySQL/MariaDB)${floorKafka ? ' to Kafka' : ''}; ${floorDbName})`,
    ...http(`${b}/floor/send`, baselines.token, 'POST', baselines.pid, { chat_id: 4242, text: 'bench' }) };
  const updatesFloor: Target = { name: `baseline: floor of getUpdates (Fastify + kept principal + the polling state read, the offset confirmed, same JSON; ${floorDbName})`,
    ...http(`${b}/floor/updates`, baselines.token, 'POST', baselines.pid, { offset: 2, timeout: 0 }) };
  const webhookInfoFloor: Target = { name: `baseline: floor of getWebhookInfo (Fastify + kept principal + the bot's state, webhook and pending count read, same JSON; ${floorDbName})`,
    ...http(`${b}/floor/webhook-info`, baselines.token, 'POST', baselines.pid) };
  const grpcClient = new RuntimeServiceClient(baselines.grpc, grpc.credentials.createInsecure());
  const grpcFloorMd = new grpc.Metadata();
  grpcFloorMd.set('authorization', `Bearer ${baselines.token}`);
  const grpcGetMeFloor: Target = { name: 'baseline: floor of gRPC getMe (grpc-js + generated codec + kept principal)', run: (w) =>
    benchUnary(() => new Promise<boolean>((resolve) => grpcClient.getMe({}, grpcFloorMd, (err) => resolve(!err))), baselines.pid, w) };
  const serviceCalls: Target[] = [
    { name: 'POST /bots/getMe', floor: getMeFloor, ...http(`${base}/api/v1/bots/getMe`, token, 'POST', pid) },
    { name: 'GET /bots/my (6 bots)', floor: listFloor, floorOnServiceDb: !!floorDb, ...http(`${base}/api/v1/bots/my`, jwt, 'GET', pid) },
    { name: 'GET /bots/my/{id}', floor: detailFloor, floorOnServiceDb: !!floorDb, ...http(`${base}/api/v1/bots/my/${botId}`, jwt, 'GET', pid) },
    { name: 'POST /bots/getUpdates (timeout 0, nothing pending)', floor: updatesFloor, floorOnServiceDb: !!floorDb,
      ...http(`${base}/api/v1/bots/getUpdates`, token, 'POST', pid, { offset, timeout: 0 }) },
    { name: 'POST /bots/getWebhookInfo', floor: webhookInfoFloor, floorOnServiceDb: !!floorDb, ...http(`${base}/api/v1/bots/getWebhookInfo`, token, 'POST', pid) },
    { name: 'POST /bots/sendMessage', floor: sendFloor, floorOnServiceDb: !!floorDb, ...http(`${base}/api/v1/bots/sendMessage`, token, 'POST', pid, { chat_id: 4242, text: 'bench' }) },
    { name: 'gRPC getMe direct (grpc-js client -> core)', grpc: true, floor: grpcGetMeFloor, run: (w) => benchUnary(() => new Promise<boolean>((resolve) =>
      runtime.getMe({}, md, (err) => resolve(!err))), pid, w) },
  ];

  // BENCH_CALLS=a,b keeps only the service's calls whose names contain one of these, with
  // raw Fastify, the echo and their own floors: with BENCH_CPU_PROF, a profile of those calls alone.
  const wanted = process.env.BENCH_CALLS?.split(',').map((s) => s.trim()).filter(Boolean);
  const chosen = serviceCalls.filter((t) => !wanted?.length || wanted.some((w) => t.name.includes(w)));
  const baselineTargets = [raw, getMeFloor, echoServer, listFloor, detailFloor, sendFloor, updatesFloor, webhookInfoFloor, grpcGetMeFloor];
  const targets: Target[] = [
    ...baselineTargets.filter((b) => b === raw || b === echoServer || chosen.some((t) => t.floor === b)),
    ...chosen,
  ];
  // Each floor answers as its call does: one request to each, their shapes compared.
  const unlike: string[] = [];
  for (const t of chosen) {
    if (!t.answer || !t.floor?.answer) continue;
    const [call, floor] = [shapeOf(await t.answer()), shapeOf(await t.floor.answer())];
    if (call !== floor) unlike.push(`${t.name}:\n  the service: ${call}\n  its floor:   ${floor}`);
  }
  const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
  const results = targets.map(() => [] as Figures[]);
  for (let i = 0; i < rounds; i++) {
    for (const [j, t] of targets.entries()) results[j]!.push(await t.run(i === 0 ? 2 : 1));
  }
  const med = (j: number, f: keyof Figures) => median(results[j]!.map((x) => x[f] ?? NaN));
  // Ratios per round (the baseline measured beside it), then their median.
  const ratio = (j: number, b: number, f: 'rps' | 'cpuMs') => median(results[j]!.map((x, r) => x[f]! / results[b]![r]![f]!));

  console.log(`\nbench:gateway — each call against the baselines, ${database.split(':')[0]}, role=all, limits + metrics on, LOG_LEVEL=info; ${CONNECTIONS} concurrent, ${rounds} alternating rounds of ${SECONDS}s (medians)${process.env.BENCH_PIN === '1' ? '; service pinned to CPU 0, load to CPU 1' : ''}`);
  console.log(`machine: ${machine()}\n`);
  console.log(`| call | requests/s | CPU ms/request | p50 / p99 ms | errors | × raw throughput | its own floor's CPU ms/request | × its own floor: throughput, CPU | goal: CPU ≤ ${GOAL} × its own floor | met |`);
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---|---|');
  for (const [j, t] of targets.entries()) {
    const tput = ratio(j, targets.indexOf(t.grpc ? echoServer : raw), 'rps');
    const errors = results[j]!.reduce((n, x) => n + x.errors, 0);
    const floor = t.floor && targets.indexOf(t.floor);
    let own = '', floorCpu = '', goal = '', met = '';
    if (floor !== undefined) {
      const cpu = ratio(j, floor, 'cpuMs');
      own = `${ratio(j, floor, 'rps').toFixed(2)}, ${cpu.toFixed(2)}`;
      floorCpu = med(floor, 'cpuMs').toFixed(3);
      goal = `≤ ${GOAL}`;
      met = cpu <= GOAL ? 'yes' : 'no';
    }
    console.log(`| ${t.name} | ${med(j, 'rps').toFixed(0)} | ${med(j, 'cpuMs').toFixed(3)} | ${med(j, 'p50').toFixed(1)} / ${med(j, 'p99').toFixed(1)} | ${errors} | ${tput.toFixed(2)}${t.grpc || t === echoServer ? ' (× echo)' : ''} | ${floorCpu} | ${own} | ${goal} | ${met} |`);
  }
  const compared = chosen.filter((t) => t.answer && t.floor?.answer).length;
  console.log(unlike.length === 0
    ? `\nanswers: each of the ${compared} HTTP floors answers with its call's status and body shape (keys in order, value types)`
    : `\nanswers: ${unlike.length} of ${compared} HTTP floors do NOT answer as their calls (shapes: keys in order, value types):\n${unlike.join('\n')}`);
  if (mysql) {
    // The goal on MySQL/MariaDB: the service adds at most 0.15 ms of CPU per call to
    // what the database costs. Where a floor did the call's database work on the same
    // server, that cost is the floor's CPU less raw Fastify's (per round, then the median);
    // elsewhere it is not measured and counts as nothing (the call's whole CPU is "added").
    console.log(`\n${database.split(':')[0]}${process.env.BENCH_KAFKA_BROKERS ? ' + Kafka' : ''}: what the service adds to the database's cost, CPU ms per request (goal ≤ 0.15)\n`);
    console.log("| call | service CPU | the database's cost (its floor less raw Fastify) | the service adds | met |");
    console.log('|---|---:|---:|---:|---|');
    const rawAt = targets.indexOf(raw);
    for (const [j, t] of targets.entries()) {
      if (!t.floor) continue;
      const floor = t.floorOnServiceDb && t.floor ? targets.indexOf(t.floor) : -1;
      const cost = (r: number) => (floor < 0 ? 0 : results[floor]![r]!.cpuMs! - results[rawAt]![r]!.cpuMs!);
      const adds = median(results[j]!.map((x, r) => x.cpuMs! - cost(r)));
      const costText = floor < 0 ? 'not measured (0)' : median(results[j]!.map((_, r) => cost(r))).toFixed(3);
      console.log(`| ${t.name} | ${med(j, 'cpuMs').toFixed(3)} | ${costText} | ${adds.toFixed(3)} | ${adds <= 0.15 ? 'yes' : 'no'} |`);
    }
  }
  runtime.close();
  grpcClient.close();
  echo.close();
  baselines.stop();
  stopServices();
  await new Promise((r) => setTimeout(r, 500));
  await mysql?.drop();
  await floorDb?.drop();
}

const only = process.env.BENCH_ONLY ?? 'calls';
(only === 'overhead' ? overhead() : only === 'paths' ? main() : only === 'all' ? calls().then(main).then(overhead) : calls())
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => {
    stopServices();
    // Clients and the baselines' child would keep the loop alive.
    setTimeout(() => process.exit(), 500).unref();
  });
