/**
 * npm run bench:gateway — GET /api/v1/bots/my through the HTTP gateway and the
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
 * (default: a fresh SQLite file), BENCH_ROUNDS (3), BENCH_ONLY (paths | overhead).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import * as grpc from '@grpc/grpc-js';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { ConsoleServiceClient } from '../src/gen/botplatform/v1/console_service.js';
import { freePort } from '../test/helpers/ports.js';
import { cpuSeconds, machine, percentile, startService as start, stopServices } from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SECRET = 'bench-secret-bench-secret-bench-secret-000';

interface Figures { rps: number; p50: number; p99: number; errors: number; /** CPU ms the service used per request (when its pid is known). */ cpuMs?: number }

async function benchHttp(url: string, jwt: string, method: 'GET' | 'POST' = 'GET', pid?: number): Promise<Figures> {
  const run = (duration: number) =>
    autocannon({ url, method, connections: CONNECTIONS, duration, headers: { authorization: `Bearer ${jwt}` } });
  await run(2); // warm-up
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
  await run(2);
  const figures = await run(SECONDS);
  client.close();
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

(process.env.BENCH_ONLY === 'overhead' ? overhead() : process.env.BENCH_ONLY === 'paths' ? main() : main().then(overhead))
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(stopServices);
