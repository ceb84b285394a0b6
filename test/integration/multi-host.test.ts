/**
 * The service across hosts: Linux network namespaces on this machine
 * (scripts/netns-hosts.sh), each with its own address on one private switch, no shared
 * loopback, and its own mount namespace in which the hosts' data root (this test's directory)
 * holds only that host's disk: no shared disk; files in an S3-compatible bucket:
 *
 *   infra 10.77.0.10  MariaDB, Kafka, s3proxy (the project's own scripts, bound to that address)
 *   a     10.77.0.11  core + gateway          b  10.77.0.12  core + gateway
 *   disp  10.77.0.13  dispatcher              world 10.77.0.20  the test's client, the bots' webhook receiver
 *
 * No host sees another's files. Through both gateways: a file uploaded on one host downloads
 * on the other; a token regenerated on one is refused on the other; a long poll on one is
 * woken by ingest on the other; webhooks flow; host a's processes killed -9, host b keeps
 * serving with nothing acknowledged lost. Needs root, `ip`, `unshare` and `nsenter` (CI runs as root); bounded: a
 * few minutes at most.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintAccountJwt } from '../../src/auth/account-jwt.js';
import { InternalServiceClient, IngestUpdatesRequest, type IngestUpdatesResponse } from '../../src/gen/botplatform/v1/internal_service.js';
import { TEST_INTERNAL_TOKEN, TEST_JWT_SECRET, TEST_KAFKA_CLIENT_ID, TEST_SECRET_KEY } from '../helpers/harness.js';
import { TEST_S3_CREDENTIALS } from '../helpers/s3.js';
import { createTestPki } from '../helpers/tls.js';
import { until } from '../helpers/until.js';

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, '../..');
const PREFIX = `bph${process.pid % 100000}`;
const NET = '10.77.0';
const ADDR = { infra: `${NET}.10`, a: `${NET}.11`, b: `${NET}.12`, disp: `${NET}.13`, world: `${NET}.20` };
type Host = keyof typeof ADDR;
const HOSTS = Object.keys(ADDR) as Host[];
const NETNS_HOSTS = path.join(REPO, 'scripts/netns-hosts.sh');
const sha256 = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');

interface Reply { status: number; body: any } // eslint-disable-line @typescript-eslint/no-explicit-any

describe('two hosts, a dispatcher host and an infrastructure host (network namespaces)', () => {
  // The hosts' data root: <dir>/<host> is that host's disk, the only thing a host sees under
  // <dir> (its own mount namespace); this process, the machine, sees all of them, and keeps
  // the processes' logs in <dir> itself, where no host looks.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-multihost-'));
  const disk = (host: Host, ...rest: string[]) => path.join(dir, host, ...rest);
  const sock = (name: string) => disk('world', `${name}.sock`); // the world agent's forwarders
  const procs: Record<string, ChildProcess> = {};
  const infraEnv = { INFRA_DIR: disk('infra') };
  let owner: string;
  let admin: string;

  /** An HTTP call to a host's port through the world namespace's forwarder (`via`: a socket name). */
  function request(via: string, method: string, pathname: string, opts: { token?: string; body?: unknown; raw?: Buffer; host?: string } = {}): Promise<Reply> {
    const data = opts.raw ?? (opts.body === undefined ? undefined : Buffer.from(JSON.stringify(opts.body)));
    const headers: Record<string, string> = { host: opts.host ?? `${via === 'gwA' ? ADDR.a : ADDR.b}:8080` };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (data) {
      headers['content-length'] = String(data.length);
      if (!opts.raw) headers['content-type'] = 'application/json';
    }
    return new Promise((resolve, reject) => {
      const req = http.request({ socketPath: sock(via), method, path: pathname, headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const buf = Buffer.concat(chunks);
          let body: unknown = buf;
          if (String(res.headers['content-type'] ?? '').includes('json')) body = JSON.parse(buf.toString('utf8'));
          resolve({ status: res.statusCode!, body });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(data);
    });
  }
  /** A URL the service handed out (http://10.77.0.1x:8080/...), fetched through its host's forwarder. */
  const viaUrl = (url: string, method: string, raw?: Buffer) => {
    const u = new URL(url);
    return request(u.hostname === ADDR.a ? 'gwA' : 'gwB', method, u.pathname + u.search, { raw, host: u.host });
  };

  function ingest(core: 'coreA' | 'coreB', botId: string, texts: string[]): Promise<IngestUpdatesResponse> {
    const c = new InternalServiceClient(`unix:${sock(core)}`, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
    const updates = texts.map((text) => ({ botId, message: { messageId: 0, date: 0, chat: { id: 5, type: 'private' }, from: { id: 5, isBot: false }, text } }));
    return new Promise((resolve, reject) =>
      c.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates }), md, { deadline: Date.now() + 5000 }, (err, res) => {
        c.close();
        if (err) reject(err);
        else resolve(res!);
      }));
  }

  /** argv run on `host`: in its network and mount namespaces (the command keeps the process id). */
  const on = (host: Host, argv: string[]) => [NETNS_HOSTS, 'exec', PREFIX, host, ...argv];
  async function infra(script: string, env: Record<string, string>) {
    await run('bash', on('infra', ['env', ...Object.entries({ ...infraEnv, ...env }).map(([k, v]) => `${k}=${v}`), 'bash', path.join(REPO, 'scripts', script), 'up']),
      { timeout: 240_000 });
  }

  /** A process in `host`'s namespaces; its output goes to <dir>/<name>.log. */
  function start(name: string, host: Host, argv: string[], env: Record<string, string>): ChildProcess {
    const log = fs.openSync(path.join(dir, `${name}.log`), 'a');
    const child = spawn('bash', on(host, argv), { cwd: REPO, env: { ...process.env, ...env }, stdio: ['ignore', log, log] });
    procs[name] = child;
    return child;
  }

  async function healthy(name: string, via: string) {
    const end = Date.now() + 90_000;
    while (Date.now() < end) {
      if (procs[name]!.exitCode !== null) break;
      const ok = await request(via, 'GET', '/healthz').then((r) => r.status === 200, () => false);
      if (ok) return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`${name} did not become healthy: ${fs.readFileSync(path.join(dir, `${name}.log`), 'utf8').slice(-3000)}`);
  }

  beforeAll(async () => {
    // Jars fetched here, where Maven Central is reachable; the namespaces reach nothing outside.
    const kafkaLibs = execFileSync('bash', [path.join(REPO, 'scripts/kafka.sh'), 'libs'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 600_000 }).trim();
    const s3Libs = execFileSync('bash', [path.join(REPO, 'scripts/s3proxy.sh'), 'libs'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 600_000 }).trim();
    for (const h of HOSTS) fs.mkdirSync(disk(h));
    execFileSync('bash', [NETNS_HOSTS, 'up', PREFIX], { stdio: 'ignore', env: { ...process.env, HOSTS_DATA_ROOT: dir } });

    await Promise.all([
      infra('mariadb.sh', { MARIADB_HOST: ADDR.infra }),
      infra('kafka.sh', { KAFKA_HOST: ADDR.infra, KAFKA_LIBS: kafkaLibs, KAFKA_JAVA_OPTS: '-Xms64m -Xmx384m -XX:+UseSerialGC' }),
      infra('s3proxy.sh', { S3PROXY_HOST: ADDR.infra, S3PROXY_LIBS: s3Libs }),
    ]);

    const pki = createTestPki(`IP:${ADDR.world}`);
    fs.writeFileSync(disk('world', 'hook.key'), pki.key);
    fs.writeFileSync(disk('world', 'hook.pem'), pki.cert);
    // The receiver's CA, trusted by every service process (each reads it at start), on each host's disk.
    for (const h of ['a', 'b', 'disp'] as const) fs.copyFileSync(pki.caFile, disk(h, 'webhook-ca.pem'));
    const bucket = `bp-multihost-${crypto.randomBytes(4).toString('hex')}`;
    const agent = start('agent', 'world', [process.execPath, '--import', 'tsx', path.join(REPO, 'test/helpers/netns-agent.ts')], {
      AGENT_DIR: disk('world'),
      AGENT_FORWARD: JSON.stringify({
        gwA: `${ADDR.a}:8080`, gwB: `${ADDR.b}:8080`, coreA: `${ADDR.a}:50051`, coreB: `${ADDR.b}:50051`,
        healthA: `${ADDR.a}:9001`, healthB: `${ADDR.b}:9001`, healthD: `${ADDR.disp}:9003`,
      }),
      AGENT_RECEIVER: `${ADDR.world}:8443`, AGENT_TLS_KEY: disk('world', 'hook.key'), AGENT_TLS_CERT: disk('world', 'hook.pem'),
      AGENT_BUCKET: bucket, AGENT_S3_ENDPOINT: `http://${ADDR.infra}:19400`,
    });
    await until(async () => fs.readFileSync(path.join(dir, 'agent.log'), 'utf8'), (t) => t.includes('ready') || agent.exitCode !== null, 60_000);
    expect(fs.readFileSync(path.join(dir, 'agent.log'), 'utf8')).toContain('ready');

    const common = {
      DATABASE_URL: `mysql://botplatform:botplatform@${ADDR.infra}:3307/botplatform`, KAFKA_BROKERS: `${ADDR.infra}:19092`, KAFKA_CLIENT_ID: TEST_KAFKA_CLIENT_ID,
      BLOB_STORE: 's3', S3_ENDPOINT: `http://${ADDR.infra}:19400`, S3_BUCKET: bucket, S3_FORCE_PATH_STYLE: 'true',
      S3_ACCESS_KEY_ID: TEST_S3_CREDENTIALS.accessKeyId, S3_SECRET_ACCESS_KEY: TEST_S3_CREDENTIALS.secretAccessKey,
      AUTH_JWT_SECRET: TEST_JWT_SECRET, INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, SECRET_KEY: TEST_SECRET_KEY,
      LOG_LEVEL: 'warn', LIMITS_ENABLED: 'false', WEBHOOK_ALLOWED_CIDRS: `${NET}.0/24`,
      WEBHOOK_RETRY_SCHEDULE: '200ms,500ms,1s', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    };
    const node = () => [process.execPath, '--import', 'tsx', path.join(REPO, 'src/main.ts')];
    // Each process's DATA_DIR and CA on its own host's disk.
    const local = (host: Host, name: string) => {
      fs.mkdirSync(disk(host, name), { recursive: true });
      return { DATA_DIR: disk(host, name), WEBHOOK_CA_FILE: disk(host, 'webhook-ca.pem') };
    };
    // Core a first: it migrates the database; the others find it migrated.
    start('coreA', 'a', node(), { ...common, ...local('a', 'coreA'), ROLE: 'core', HOST: ADDR.a, GRPC_PORT: '50051', PORT: '9001' });
    await healthy('coreA', 'healthA');
    start('coreB', 'b', node(), { ...common, ...local('b', 'coreB'), ROLE: 'core', HOST: ADDR.b, GRPC_PORT: '50051', PORT: '9001' });
    start('gwA', 'a', node(), { ...common, ...local('a', 'gwA'), ROLE: 'gateway', HOST: ADDR.a, PORT: '8080', CORE_GRPC_ADDRESS: `${ADDR.a}:50051` });
    start('gwB', 'b', node(), { ...common, ...local('b', 'gwB'), ROLE: 'gateway', HOST: ADDR.b, PORT: '8080', CORE_GRPC_ADDRESS: `${ADDR.b}:50051` });
    start('disp', 'disp', node(), { ...common, ...local('disp', 'disp'), ROLE: 'dispatcher', HOST: ADDR.disp, PORT: '9003' });
    await Promise.all([healthy('coreB', 'healthB'), healthy('gwA', 'gwA'), healthy('gwB', 'gwB'), healthy('disp', 'healthD')]);

    owner = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'multihost-owner' });
    admin = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'multihost-admin', roles: ['admin'] });
  }, 300_000);

  afterAll(async () => {
    for (const p of Object.values(procs)) if (p.exitCode === null) p.kill('SIGKILL');
    for (const [service, name] of [['mariadb', 'mariadb.pid'], ['kafka', 'kafka.pid'], ['s3proxy', 's3proxy.pid']]) {
      const pidFile = path.join(infraEnv.INFRA_DIR, service!, name!);
      if (fs.existsSync(pidFile)) {
        try {
          process.kill(Number(fs.readFileSync(pidFile, 'utf8')), 'SIGKILL');
        } catch { /* gone */ }
      }
    }
    await new Promise((r) => setTimeout(r, 500)); // the killed leave their namespaces
    execFileSync('bash', [NETNS_HOSTS, 'down', PREFIX], { stdio: 'ignore' });
    fs.rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  /** A bot made on gateway `via`, approved and its token read on the other. */
  async function bot(username: string, via: 'gwA' | 'gwB') {
    const other = via === 'gwA' ? 'gwB' : 'gwA';
    const created = await request(via, 'POST', '/api/v1/bots/applications', { token: owner, body: { name: username, username } });
    expect(created.status).toBe(201);
    expect((await request(other, 'POST', `/api/v1/admin/bots/${created.body.id}/approve`, { token: admin })).status).toBe(200);
    const token = (await request(other, 'GET', `/api/v1/bots/my/${created.body.id}`, { token: owner })).body.one_time_token as string;
    return { id: created.body.id as string, token };
  }

  it('no shared disk: a file written on host a is not there for host b, nor for any other host', async () => {
    const written = disk('a', 'coreA', 'written-on-a');
    await run('bash', on('a', ['sh', '-c', `echo from host a > ${written}`]));
    expect(fs.readFileSync(written, 'utf8')).toBe('from host a\n'); // on a's disk, seen by the machine
    // As the service processes themselves see the filesystem (/proc/<pid>/root: through their mount namespace).
    const seen = (name: string, file: string) => fs.existsSync(`/proc/${procs[name]!.pid}/root${file}`);
    expect(seen('coreA', written)).toBe(true);
    expect(seen('gwA', written)).toBe(true); // another process on the same host shares its disk
    for (const name of ['coreB', 'gwB', 'disp', 'agent']) expect(seen(name, written), name).toBe(false);
    // Every host's view of the data root: its own disk, nothing of the others'.
    for (const h of HOSTS) {
      const { stdout } = await run('bash', on(h, ['ls', '-A', dir]));
      expect(stdout.split('\n').filter(Boolean), h).toEqual([h]);
    }
    for (const h of ['b', 'disp', 'infra', 'world'] as const) await expect(run('bash', on(h, ['cat', written])), h).rejects.toThrow();
    // The database's files are on the infrastructure host's disk, for it alone.
    const db = disk('infra', 'mariadb', 'data');
    expect(fs.existsSync(db)).toBe(true);
    await expect(run('bash', on('infra', ['test', '-d', db]))).resolves.toBeDefined();
    for (const h of ['a', 'b', 'disp', 'world'] as const) await expect(run('bash', on(h, ['test', '-e', db])), h).rejects.toThrow();
  });

  it('a file uploaded through host a downloads through host b (one bucket, no shared disk)', async () => {
    const { token } = await bot('mh_files', 'gwA');
    const bytes = crypto.randomBytes(1_500_000);
    const cred = await request('gwA', 'POST', '/api/v1/bots/files/upload-credentials', { token, body: { fileName: 'x.bin', fileSize: bytes.length, checksum: sha256(bytes) } });
    expect(cred.body.result.uploadUrl).toMatch(new RegExp(`^http://${ADDR.a.replace(/\./g, '\\.')}:8080/`));
    expect((await viaUrl(cred.body.result.uploadUrl, 'PUT', bytes)).status).toBe(200);
    const done = await request('gwA', 'POST', '/api/v1/bots/files/complete', { token, body: { checksum: sha256(bytes) } });
    expect(done.status).toBe(200);
    const got = await request('gwB', 'POST', '/api/v1/bots/getFile', { token, body: { file_id: done.body.result.file_id } });
    expect(got.body.result.download_url).toMatch(new RegExp(`^http://${ADDR.b.replace(/\./g, '\\.')}:8080/`));
    const dl = await viaUrl(got.body.result.download_url, 'GET');
    expect(dl.status).toBe(200);
    expect(Buffer.compare(dl.body as Buffer, bytes)).toBe(0);
  });

  it('a token regenerated through host a is refused through host b', async () => {
    const { id, token } = await bot('mh_token', 'gwB');
    expect((await request('gwB', 'POST', '/api/v1/bots/getMe', { token })).status).toBe(200);
    const regen = await request('gwA', 'POST', `/api/v1/bots/my/${id}/regenerate-token`, { token: owner });
    expect(regen.status).toBe(200);
    const t0 = Date.now();
    const last = await until(() => request('gwB', 'POST', '/api/v1/bots/getMe', { token }), (r) => r.status === 401, 5000);
    expect(last.status).toBe(401);
    expect(Date.now() - t0).toBeLessThan(5000);
    const fresh = regen.body.token ?? regen.body.one_time_token ?? (await request('gwB', 'GET', `/api/v1/bots/my/${id}`, { token: owner })).body.one_time_token;
    expect((await request('gwB', 'POST', '/api/v1/bots/getMe', { token: fresh })).status).toBe(200);
  });

  it('a long poll through host a is woken by an ingest on host b', async () => {
    const { id, token } = await bot('mh_poll', 'gwA');
    const waiting = request('gwA', 'POST', '/api/v1/bots/getUpdates', { token, body: { offset: 0, timeout: 20 } });
    await new Promise((r) => setTimeout(r, 500));
    const t0 = Date.now();
    await ingest('coreB', id, ['across hosts']);
    const res = await waiting;
    expect(res.status).toBe(200);
    expect(res.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['across hosts']);
    expect(Date.now() - t0).toBeLessThan(3000); // woken through Kafka, not by the 20 s timeout
  });

  it('webhooks flow: updates ingested on both hosts reach the bot from the dispatcher host', async () => {
    const { id, token } = await bot('mh_hook', 'gwB');
    const url = `https://${ADDR.world}:8443/hook/${id}`;
    expect((await request('gwA', 'POST', '/api/v1/bots/setWebhook', { token, body: { url, secret_token: 'mh-secret' } })).status).toBe(200);
    const acked = [
      ...(await ingest('coreA', id, Array.from({ length: 10 }, (_, i) => `a${i}`))).results,
      ...(await ingest('coreB', id, Array.from({ length: 10 }, (_, i) => `b${i}`))).results,
    ].map((r) => Number(r.updateId));
    const received = async () => (await request('control', 'GET', '/received', { host: 'agent' })).body as { path: string; update_id: number; signed: boolean }[];
    const mine = (await until(received, (r) => r.filter((x) => x.path === `/hook/${id}`).length >= 20, 20_000)).filter((x) => x.path === `/hook/${id}`);
    expect(mine.map((x) => x.update_id).sort((p, q) => p - q)).toEqual([...acked].sort((p, q) => p - q));
    expect(mine.every((x) => x.signed)).toBe(true);
  });

  it('host a killed -9 mid-ingest: host b keeps serving, and every acknowledged update is there', async () => {
    const { id, token } = await bot('mh_kill', 'gwB');
    const hook = await bot('mh_kill_hook', 'gwB');
    const set = await request('gwB', 'POST', '/api/v1/bots/setWebhook', { token: hook.token, body: { url: `https://${ADDR.world}:8443/hook/${hook.id}`, secret_token: 'mh-secret' } });
    expect(set.status).toBe(200);
    const acked: number[] = [];
    let refusedOnA = 0;
    for (let i = 0; i < 40; i++) {
      if (i === 20) {
        procs.coreA!.kill('SIGKILL');
        procs.gwA!.kill('SIGKILL');
      }
      for (const core of ['coreA', 'coreB'] as const) {
        try {
          acked.push(...(await ingest(core, id, [`${core} ${i}`])).results.map((r) => Number(r.updateId)));
        } catch {
          refusedOnA += core === 'coreA' ? 1 : 0; // not acknowledged: a client would retry elsewhere
          if (core === 'coreB') throw new Error(`host b refused an ingest at ${i}`);
        }
      }
    }
    expect(refusedOnA).toBeGreaterThan(0);
    expect(acked.length).toBeGreaterThanOrEqual(60);
    // Host b serves calls, reads, and webhooks (its core ingests, the dispatcher host delivers).
    expect((await request('gwB', 'POST', '/api/v1/bots/getMe', { token })).status).toBe(200);
    const read: number[] = [];
    let offset = 0;
    for (let round = 0; round < 20 && read.length < acked.length; round++) {
      const res = await request('gwB', 'POST', '/api/v1/bots/getUpdates', { token, body: { offset, timeout: 1, limit: 100 } });
      expect(res.status).toBe(200);
      for (const u of res.body.result as { update_id: number; update_seq: number }[]) {
        read.push(Number(u.update_id));
        offset = Number(u.update_seq) + 1;
      }
    }
    expect(new Set(read)).toEqual(new Set(acked));
    expect(read).toHaveLength(acked.length);
    const hooked = (await ingest('coreB', hook.id, ['after the kill'])).results.map((r) => Number(r.updateId));
    const received = async () => (await request('control', 'GET', '/received', { host: 'agent' })).body as { path: string; update_id: number }[];
    const got = await until(received, (r) => r.some((x) => x.path === `/hook/${hook.id}` && x.update_id === hooked[0]), 15_000);
    expect(got.some((x) => x.path === `/hook/${hook.id}` && x.update_id === hooked[0])).toBe(true);
    expect(procs.coreB!.exitCode).toBeNull();
    expect(procs.gwB!.exitCode).toBeNull();
  });
});
