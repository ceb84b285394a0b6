/**
 * The service as real processes: a newcomer's `npm start` on a fresh data
 * directory (the printed JWTs work end to end, SIGTERM exits cleanly), the CLIs,
 * and the core and gateway roles as two processes.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call, client, createTestDatabase, TEST_SECRET_KEY } from './helpers/harness.js';
import { freePort } from './helpers/ports.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const children: ChildProcess[] = [];

afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

/**
 * Starts the service with env, through `npm start` or (to signal the service
 * itself rather than npm) node directly; resolves once the output matches `ready`.
 */
function start(env: Record<string, string>, ready: RegExp, via: 'npm' | 'node' = 'node'): Promise<{ child: ChildProcess; output: () => string }> {
  const [cmd, args] = via === 'npm' ? ['npm', ['start', '--silent']] as const : [process.execPath, ['--import', 'tsx', 'src/main.ts']] as const;
  const child = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: via === 'npm' });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready in time:\n${out}`)), 45_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (ready.test(out)) {
        clearTimeout(timer);
        resolve({ child, output: () => out });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`exited with ${code}:\n${out}`)));
  });
}

const exited = (child: ChildProcess) => new Promise<number | null>((r) => child.once('exit', (code) => r(code)));

describe('npm start on a fresh machine', () => {
  it('prints working JWTs; create → approve → read the token once → use it; Ctrl+C stops it', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-newcomer-'));
    const env = { DATA_DIR: dataDir, PORT: String(await freePort()), GRPC_PORT: String(await freePort()) };
    const { child, output } = await start(env, /admin .*: (\S+)\n/, 'npm');
    const base = /HTTP (http:\/\/\S+),/.exec(output())![1]!;
    const developer = /console \(sub=developer\):\s+(\S+)/.exec(output())![1]!;
    const reviewer = /admin\s+\(sub=reviewer, admin\):\s+(\S+)/.exec(output())![1]!;

    // The web console, built by npm start, at / (with its one-click sign-in link printed).
    const index = await fetch(`${base}/`);
    expect([index.status, index.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
    expect(output()).toMatch(new RegExp(`as developer: ${base}/#sign-in=[\\w-]+`));

    const dev = client(base, developer);
    const created = await dev.post('/api/v1/bots/applications', { name: 'Hello', username: 'hello_bot' });
    expect(created.status).toBe(201);
    expect((await client(base, reviewer).post(`/api/v1/admin/bots/${created.body.id}/approve`)).status).toBe(200);
    const token = (await dev.get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token;
    expect((await dev.get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token).toBeUndefined();
    expect((await client(base, token).post('/api/v1/bots/getMe')).body.result.username).toBe('hello_bot');

    // mint-jwt signs with the same local secret.
    const minted = spawnSync('npm', ['run', '-s', 'mint-jwt', '--', '--sub', 'alice'], { cwd: ROOT, env: { ...process.env, DATA_DIR: dataDir }, encoding: 'utf8' });
    expect(minted.status).toBe(0);
    expect((await client(base, minted.stdout.trim()).get('/api/v1/bots/my')).body.items).toEqual([]);

    // The log never carries a credential.
    expect(output()).not.toContain(token);

    // Ctrl+C in a terminal: SIGINT to the whole process group (npm and the service).
    const gone = exited(child);
    process.kill(-child.pid!, 'SIGINT');
    await gone;
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  }, 90_000);

  it('refuses a bad configuration with one line per problem and a non-zero exit', () => {
    const res = spawnSync('npm', ['start', '--silent'], { cwd: ROOT, env: { ...process.env, PORT: 'eighty', ROLE: 'both' }, encoding: 'utf8' });
    expect(res.status).not.toBe(0);
    expect(res.stderr).toMatch(/PORT/);
    expect(res.stderr).toMatch(/ROLE/);
  });

  it('refuses ROLE=gateway without SECRET_KEY with one line naming it and a non-zero exit', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-nokey-'));
    const res = spawnSync(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: ROOT, env: { ...process.env, ROLE: 'gateway', DATA_DIR: dir, PORT: '0' }, encoding: 'utf8', timeout: 20_000,
    });
    expect(res.signal).toBeNull(); // it exited on its own, it was not left running
    expect(res.status).not.toBe(0);
    const problems = res.stderr.split('\n').filter((l) => l.includes('SECRET_KEY'));
    expect(problems).toEqual(['  - SECRET_KEY: ROLE=gateway needs the SECRET_KEY its cores use (file URLs are signed with it): set the same base64 32-byte key on both']);
    // Nothing was created in its place.
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('npm run migrate applies the schema, is idempotent, and exits non-zero when the database is unreachable, a migration fails or a setting is bad', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-migrate-'));
    const db = await createTestDatabase(dir);
    try {
      const run = (url: string) => spawnSync('npm', ['run', '-s', 'migrate'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: url, DATA_DIR: dir }, encoding: 'utf8' });
      const first = run(db.url);
      expect(first.status).toBe(0);
      expect(first.stdout).toMatch(/applied: /);
      expect(run(db.url).stdout).toMatch(/up to date/);
      const bad = run(`mysql://nobody:nothing@127.0.0.1:${await freePort()}/none`);
      expect(bad.status).not.toBe(0);
      expect(bad.stderr).toMatch(/migration failed/);

      // A migration that fails half-way (its table is already there) is a failure too.
      const clashing = path.join(dir, 'clash.sqlite');
      const knex = (await import('knex')).default({ client: 'better-sqlite3', connection: { filename: clashing }, useNullAsDefault: true });
      await knex.schema.createTable('rate_counters', (t) => t.string('x'));
      await knex.destroy();
      const failed = run(`sqlite:${clashing}`);
      expect(failed.status).toBe(1);
      expect(failed.stderr).toMatch(/migration failed: .*rate_counters/);

      // A bad setting is named, and nothing is touched.
      const misconfigured = spawnSync('npm', ['run', '-s', 'migrate'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: 'postgres://x' }, encoding: 'utf8' });
      expect(misconfigured.status).toBe(2);
      expect(misconfigured.stderr).toMatch(/DATABASE_URL: must start with/);
    } finally {
      await db.drop();
    }
  }, 60_000);
});

describe('roles as separate processes', () => {
  it('a gateway process serves the API from a core process over gRPC', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-roles-'));
    const db = await createTestDatabase(dir);
    try {
      const grpcPort = await freePort();
      const common = { DATA_DIR: dir, DATABASE_URL: db.url, AUTH_JWT_SECRET: 'roles-test-secret-roles-test-secret-0000', SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'info' };
      const core = await start({ ...common, ROLE: 'core', PORT: String(await freePort()), GRPC_PORT: String(grpcPort) }, /botplatform started/);
      const gatewayPort = await freePort();
      const gateway = await start({ ...common, ROLE: 'gateway', PORT: String(gatewayPort), CORE_GRPC_ADDRESS: `127.0.0.1:${grpcPort}` }, /botplatform started/);
      const base = `http://127.0.0.1:${gatewayPort}`;
      expect((await call(base, 'GET', '/healthz')).status).toBe(200);
      const { mintAccountJwt } = await import('../src/auth/account-jwt.js');
      const jwt = await mintAccountJwt(common.AUTH_JWT_SECRET, { sub: 'split' });
      expect((await client(base, jwt).post('/api/v1/bots/applications', { name: 'Split', username: 'split_bot' })).status).toBe(201);

      // With the core gone, the gateway reports unready and answers 503, not a hang or a 500.
      const coreExit = exited(core.child);
      core.child.kill('SIGTERM');
      expect(await coreExit).toBe(0);
      expect((await call(base, 'GET', '/healthz')).status).toBe(503);
      const down = await client(base, jwt).get('/api/v1/bots/my');
      expect(down.status).toBe(503);
      expect(down.body.error.status).toBe('UNAVAILABLE');
      const gatewayExit = exited(gateway.child);
      gateway.child.kill('SIGTERM');
      expect(await gatewayExit).toBe(0);
    } finally {
      await db.drop();
    }
  }, 90_000);

  it('a core process on a local signing secret (no AUTH_* setting) starts and stays up: it serves no console, so prints no sign-in links', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-core-local-'));
    const db = await createTestDatabase(dir);
    try {
      const port = await freePort();
      const core = await start({ DATA_DIR: dir, DATABASE_URL: db.url, ROLE: 'core', PORT: String(port), GRPC_PORT: String(await freePort()), LOG_LEVEL: 'info' }, /botplatform started/);
      // Up, answering, and not gone while printing a banner it has no console for.
      await new Promise((r) => setTimeout(r, 500));
      expect(core.child.exitCode).toBeNull();
      expect((await call(`http://127.0.0.1:${port}`, 'GET', '/healthz')).status).toBe(200);
      expect(core.output()).not.toContain('One-click sign-in');
      const exit = exited(core.child);
      core.child.kill('SIGTERM');
      expect(await exit).toBe(0);
    } finally {
      await db.drop();
    }
  }, 90_000);

  it('a gateway process answers 401 to a credential with a stray character, and no process logs it', async () => {
    // grpc-js refuses a metadata value that is not printable ASCII: the gateway used to
    // answer 500 and log the whole credential in the error's message and stack.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-stray-'));
    const db = await createTestDatabase(dir);
    try {
      const grpcPort = await freePort();
      const common = { DATA_DIR: dir, DATABASE_URL: db.url, AUTH_JWT_SECRET: 'roles-test-secret-roles-test-secret-0000', SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'trace' };
      const core = await start({ ...common, ROLE: 'core', PORT: String(await freePort()), GRPC_PORT: String(grpcPort) }, /botplatform started/);
      const gatewayPort = await freePort();
      const gateway = await start({ ...common, ROLE: 'gateway', PORT: String(gatewayPort), CORE_GRPC_ADDRESS: `127.0.0.1:${grpcPort}` }, /botplatform started/);
      const base = `http://127.0.0.1:${gatewayPort}`;
      const { mintAccountJwt } = await import('../src/auth/account-jwt.js');
      const jwt = await mintAccountJwt(common.AUTH_JWT_SECRET, { sub: 'stray' });
      const admin = await mintAccountJwt(common.AUTH_JWT_SECRET, { sub: 'stray-admin', roles: ['admin'] });
      const created = await client(base, jwt).post('/api/v1/bots/applications', { name: 'Stray', username: 'stray_bot' });
      expect((await client(base, admin).post(`/api/v1/admin/bots/${created.body.id}/approve`)).status).toBe(200);
      const token = (await client(base, jwt).get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token as string;

      const nbsp = await call(base, 'POST', '/api/v1/bots/getMe', { headers: { authorization: `Bearer ${token}\u00a0` } });
      expect([nbsp.status, nbsp.body.ok, nbsp.body.error_code]).toEqual([401, false, 401]);
      const newline = await call(base, 'GET', `/bot${token}%0A/getMe`);
      expect([newline.status, newline.body.ok, newline.body.error_code]).toEqual([401, false, 401]);
      const consoleAnswer = await call(base, 'GET', '/api/v1/bots/my', { headers: { authorization: `Bearer ${jwt}\u00a0` } });
      expect([consoleAnswer.status, consoleAnswer.body.error?.status]).toEqual([401, 'UNAUTHENTICATED']);
      expect((await call(base, 'POST', '/api/v1/bots/getMe', { token })).status).toBe(200);

      // Logs are written at exit at the latest: stop both, then read everything they wrote.
      const exits = [exited(gateway.child), exited(core.child)];
      gateway.child.kill('SIGTERM');
      core.child.kill('SIGTERM');
      expect(await Promise.all(exits)).toEqual([0, 0]);
      for (const output of [gateway.output(), core.output()]) {
        expect(output).toMatch(/"msg":"http"|"msg":"rpc"/);
        for (const secret of [token, token.slice(5), jwt]) expect(output).not.toContain(secret);
        expect(output).not.toMatch(/"level":50/);
      }
    } finally {
      await db.drop();
    }
  }, 90_000);
});
