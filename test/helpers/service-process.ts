/** The service as a real child process (what `npm start` runs), for crash tests and benchmarks. */
import { execFileSync, spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');

/**
 * The node flags `npm start` gives the service (package.json's start script, between `node`
 * and `dist/src/main.js`), so a compiled service here runs as `npm start` runs it.
 */
export const START_NODE_FLAGS: string[] = (() => {
  const start = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts.start as string;
  const m = /\bnode ((?:--\S+ )*)dist\/src\/main\.js/.exec(start);
  if (!m) throw new Error(`package.json's start script does not run node … dist/src/main.js: ${start}`);
  return (m[1] ?? '').split(' ').filter(Boolean);
})();

/**
 * Starts src/main.ts with env and resolves once GET /healthz on env.PORT answers
 * 200. Output is discarded unless `stdio` says otherwise.
 */
export async function startServiceProcess(
  env: Record<string, string>,
  stdio: StdioOptions = 'ignore',
  opts: { compiled?: boolean; nodeArgs?: string[] } = {},
): Promise<ChildProcess> {
  // compiled: dist/ as `npm start` runs it (built by buildService), without tsx's
  // transpiler in the process; what memory measurements need.
  // nodeArgs: flags NODE_OPTIONS refuses (--cpu-prof for a benchmark's profile).
  const args = [...(opts.nodeArgs ?? []), ...(opts.compiled ? [...START_NODE_FLAGS, 'dist/src/main.js'] : ['--import', 'tsx', 'src/main.ts'])];
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio });
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${env.PORT}/healthz`)).ok) return child;
    } catch {
      // not up yet
    }
    if (child.exitCode !== null) throw new Error(`${env.ROLE ?? 'service'} exited with ${child.exitCode} before it was ready`);
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`${env.ROLE ?? 'service'} on port ${env.PORT} never became healthy`);
}

/** Compiles the service to dist/ (npm run build). */
export function buildService(): void {
  execFileSync('bash', ['scripts/build.sh'], { cwd: ROOT, stdio: 'ignore' });
}
