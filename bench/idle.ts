/**
 * npm run bench:idle — the CPU of idle service processes (no client, no poll, no update):
 * what a deployment's processes cost while nothing happens (their timers, their bus
 * consumers, their probes). Each setup runs as `npm start` runs it (compiled, its flags),
 * in a process of its own; every process runs at once, and each round measures them all
 * over the same window, so builds compared (BENCH_IDLE_ROOTS) see the same minutes' load.
 *
 * Setups: embedded (SQLite, in-process bus, ROLE=all), and with BENCH_DATABASE_URL and
 * BENCH_KAFKA_BROKERS, MariaDB + Kafka (ROLE=all, a fresh database per process and a Kafka
 * client id of its own, so no two processes share a consumer group).
 * BENCH_IDLE_ROOTS: comma-separated checkouts of this repository to compare (each built
 * with scripts/build.sh first); this one when unset. An entry may give its processes more
 * environment after a `|`: `/tmp/a|METRICS_ENABLED=false LOG_LEVEL=info`.
 * BENCH_SECONDS: each window (30); BENCH_ROUNDS: windows (5); BENCH_SETTLE: seconds
 * after the processes start before the first window (30).
 * BENCH_ONLY=mysql: the MariaDB + Kafka setup alone. BENCH_CPU_PROF=dir: each process writes a
 * V8 CPU profile there as it exits (of its whole life: start included).
 * Prints each process's CPU % of a core per window, their medians, and each process's
 * system calls per second (from /proc: voluntary context switches, a wake-up each).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createMysqlDatabase, type TestDatabase } from '../test/helpers/database.js';
import { freePort } from '../test/helpers/ports.js';
import { START_NODE_FLAGS } from '../test/helpers/service-process.js';
import { cpuSeconds, machine, percentile } from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 30);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const SETTLE = Number(process.env.BENCH_SETTLE ?? 30);
const ONLY = new Set((process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter(Boolean));
const HERE = path.resolve(import.meta.dirname, '..');
/** Each checkout to run, with more environment for its processes after a `|` (`root|NAME=value NAME=value`). */
const ROOTS = (process.env.BENCH_IDLE_ROOTS ?? HERE).split(',').map((r) => r.trim()).filter(Boolean).map((entry) => {
  const [root, vars = ''] = entry.split('|');
  return { root: path.resolve(root!), env: Object.fromEntries(vars.split(' ').filter(Boolean).map((v) => [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)])) };
});

interface Proc {
  name: string;
  child: ChildProcess;
  samples: number[];
  wakeups: number[];
}

/** Voluntary context switches of every thread of `pid` (each a wait that ended: a wake-up). */
function wakeupsOf(pid: number): number {
  let n = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    const m = /voluntary_ctxt_switches:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'));
    n += Number(m?.[1] ?? 0);
  }
  return n;
}

async function start(root: string, env: Record<string, string>): Promise<ChildProcess> {
  // BENCH_CPU_PROF=dir: each process writes a V8 CPU profile there when it exits.
  const prof = process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_CPU_PROF] : [];
  const child = spawn(process.execPath, [...prof, ...START_NODE_FLAGS, 'dist/src/main.js'], {
    cwd: root, env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'ignore', 'inherit'],
  });
  process.on('exit', () => child.kill('SIGTERM'));
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${env.PORT}/healthz`)).ok) return child;
    } catch {
      // not up yet
    }
    if (child.exitCode !== null) throw new Error(`service in ${root} exited with ${child.exitCode} before it was ready`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`service in ${root} never became healthy`);
}

async function main() {
  for (const root of new Set(ROOTS.map((r) => r.root))) execFileSync('bash', ['scripts/build.sh'], { cwd: root, stdio: 'ignore' });
  const server = process.env.BENCH_DATABASE_URL;
  const brokers = process.env.BENCH_KAFKA_BROKERS;
  const dbs: TestDatabase[] = [];
  const procs: Proc[] = [];
  const base = async () => ({
    AUTH_JWT_SECRET: 'bench-secret-bench-secret-bench-secret-000', INTERNAL_API_TOKEN: 'bench-internal-token-bench-internal-token-00',
    SECRET_KEY: crypto.createHash('sha256').update('bench').digest('base64'),
    DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-idle-')), PORT: String(await freePort()), GRPC_PORT: String(await freePort()),
  });
  const label = ({ root, env }: (typeof ROOTS)[number]) => (ROOTS.length > 1
    ? ` (${path.basename(root)} at ${execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim()}${Object.keys(env).length ? `, ${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(' ')}` : ''})`
    : '');
  try {
    for (const r of ROOTS) {
      const { root } = r;
      if (!ONLY.has('mysql')) {
        procs.push({ name: `embedded (SQLite, in-process bus)${label(r)}`, child: await start(root, { ...(await base()), ...r.env }), samples: [], wakeups: [] });
      }
      if (server && brokers) {
        const db = await createMysqlDatabase(server, 'bp_bench_idle');
        dbs.push(db);
        const env = { ...(await base()), DATABASE_URL: db.url, KAFKA_BROKERS: brokers, KAFKA_CLIENT_ID: `bench-idle-${crypto.randomBytes(4).toString('hex')}`, ...r.env };
        procs.push({ name: `MariaDB + Kafka, ROLE=all${label(r)}`, child: await start(root, env), samples: [], wakeups: [] });
      }
    }
    await new Promise((r) => setTimeout(r, SETTLE * 1000));
    for (let round = 0; round < ROUNDS; round++) {
      const c0 = procs.map((p) => cpuSeconds(p.child.pid!));
      const w0 = procs.map((p) => wakeupsOf(p.child.pid!));
      await new Promise((r) => setTimeout(r, SECONDS * 1000));
      procs.forEach((p, i) => {
        p.samples.push(((cpuSeconds(p.child.pid!) - c0[i]!) / SECONDS) * 100);
        p.wakeups.push((wakeupsOf(p.child.pid!) - w0[i]!) / SECONDS);
      });
      console.error(`round ${round + 1}: ${procs.map((p) => `${p.samples.at(-1)!.toFixed(2)}%`).join(', ')} (load ${os.loadavg()[0]!.toFixed(2)})`);
    }
  } finally {
    for (const p of procs) p.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 2000));
    for (const db of dbs) await db.drop();
  }
  console.log(`\nbench:idle — ${ROUNDS} windows of ${SECONDS} s, every process idle at once (started ${SETTLE} s before the first)`);
  console.log(`machine: ${machine()}\n`);
  console.log('| process | CPU % of a core, each window | median | wake-ups/s (median) |');
  console.log('|---|---|---:|---:|');
  for (const p of procs) {
    const sorted = [...p.samples].sort((a, b) => a - b);
    const w = [...p.wakeups].sort((a, b) => a - b);
    console.log(`| ${p.name} | ${p.samples.map((s) => s.toFixed(2)).join(', ')} | ${percentile(sorted, 50).toFixed(2)} | ${percentile(w, 50).toFixed(0)} |`);
  }
}

await main();
