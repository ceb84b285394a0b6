/** Shared pieces of the benchmarks: the service as a child process, percentiles, CPU and memory of a pid. */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildService, startServiceProcess } from '../test/helpers/service-process.js';

const children: ChildProcess[] = [];

/**
 * Starts the service with env (warnings to stderr) and waits for /healthz on env.PORT.
 * Rate limits are off unless env says otherwise: a benchmark drives one bot far past
 * them; what the limits cost is measured by bench:gateway's overhead part.
 * The service runs compiled, as `npm start` ships it (built once per run): under tsx
 * it holds about 40 MB more and starts slower. BENCH_TSX=1 runs the sources instead.
 */
let built = false;
export async function startService(env: Record<string, string>, opts: { compiled?: boolean; nodeArgs?: string[] } = {}): Promise<ChildProcess> {
  const compiled = opts.compiled ?? process.env.BENCH_TSX !== '1';
  if (compiled && !built) {
    buildService();
    built = true;
  }
  // BENCH_CPU_PROF=dir: each service process writes a V8 CPU profile there when it exits;
  // BENCH_CPU_PROF_INTERVAL: its sampling interval in µs (V8's default 1000), finer to
  // follow single calls (a long poll's wake-up) sample by sample.
  const prof = process.env.BENCH_CPU_PROF;
  const interval = process.env.BENCH_CPU_PROF_INTERVAL ? ['--cpu-prof-interval', process.env.BENCH_CPU_PROF_INTERVAL] : [];
  // BENCH_NODE_ARGS: more node/V8 flags for every service process (space-separated), to try one.
  const extra = process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ').filter(Boolean) : [];
  const nodeArgs = [...(prof ? ['--cpu-prof', '--cpu-prof-dir', prof, ...interval] : []), ...extra, ...(opts.nodeArgs ?? [])];
  // BENCH_SERVICE_STDOUT=prefix: each service process's stdout (its log lines, and what V8's
  // --trace-gc* flags print, given by BENCH_NODE_ARGS) to prefix.<n>, not discarded.
  const out = process.env.BENCH_SERVICE_STDOUT ? fs.openSync(`${process.env.BENCH_SERVICE_STDOUT}.${children.length + 1}`, 'w') : 'ignore';
  const child = await startServiceProcess({ LOG_LEVEL: 'warn', LIMITS_ENABLED: 'false', ...env }, ['ignore', out, 'inherit'], { compiled, nodeArgs });
  if (typeof out === 'number') fs.closeSync(out);
  children.push(child);
  return child;
}

/**
 * A bench helper process (a baseline: bench/baselines.ts, bench/wake-floor.ts) run under
 * tsx with env, once it prints its first line (one JSON object: where it listens): that
 * object, its pid, and how to stop it. It is stopped when this process exits, too.
 */
export async function startHelper<T>(file: string, env: Record<string, string> = {}): Promise<{ info: T; pid: number; stop: () => void }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, file)], {
    stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env },
  });
  process.on('exit', () => child.kill('SIGTERM'));
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      if (buf.includes('\n')) resolve(buf.slice(0, buf.indexOf('\n')));
    });
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
  });
  return { info: JSON.parse(line) as T, pid: child.pid!, stop: () => child.kill('SIGTERM') };
}

export function stopServices() {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
}

export function percentile(sorted: number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
}

/** CPU seconds (user + system) a process has used so far; `thread`: one of its threads only (its id; the main thread's is the pid). */
export function cpuSeconds(pid: number, thread?: number): number {
  const file = thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`;
  const fields = fs.readFileSync(file, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100 Hz)
}

export function rssMiB(pid: number): number {
  const line = fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.split(/\s+/)[1]) / 1024;
}

/** The machine line every report starts with, and where a run's figures are recorded (docs/benchmarks.md). */
export function machine(): string {
  return `${os.cpus().length} x ${os.cpus()[0]?.model ?? 'unknown CPU'}, node ${process.version}; load generator on the same machine\n`
    + 'latest recorded figures: docs/benchmarks/results.md (a run recorded there replaces its section, with this machine and the command; the replaced one moves to docs/benchmarks/history.md)';
}
