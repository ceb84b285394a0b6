/**
 * npm run bench:webhooks-scale — BENCH_BOTS (100,000) bots in webhook mode on ONE dispatcher
 * process (core, gateway and dispatcher processes on MariaDB + Kafka: BENCH_DATABASE_URL,
 * BENCH_KAFKA_BROKERS), receivers on loopback: BENCH_ORIGINS (1,000) HTTPS servers on
 * 127.0.0.1, each the webhook host of BENCH_BOTS / BENCH_ORIGINS bots, so the dispatcher
 * faces far more origins than WEBHOOK_MAX_SOCKETS (BENCH_MAX_SOCKETS, 2,048 here) keeps
 * connections to. Each bot gets BENCH_ROUNDS (2) updates, one per round, all bots' update
 * of a round ingested at once (batches of 500).
 * Measured per round: all delivered or not, deliveries/s, first-attempt latency (ingest
 * acknowledged → at the receiver) p50 / p99 / max, and its spread over bots (fairness: the
 * slowest bot's against the median's); the dispatcher's open connections (its gauge) and
 * file descriptors (/proc) at their peak against the cap and its open-file limit, the idle
 * connections it closed to stay under the cap, its RSS before (bots created, nothing due),
 * at the peak and after, and its CPU per delivery.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { InternalServiceClient, IngestUpdatesRequest } from '../src/gen/botplatform/v1/internal_service.js';
import { generateBotToken, hashBotToken, tokenPrefixOf } from '../src/auth/bot-token.js';
import { createSecretBox } from '../src/auth/secret-box.js';
import { loadConfig } from '../src/config.js';
import { openFileLimit } from '../src/net/fd-limit.js';
import { createBotsRepo } from '../src/storage/bots-repo.js';
import { createDb, migrateLatest } from '../src/storage/db.js';
import { createUnitsOfWork } from '../src/storage/units.js';
import { createMysqlDatabase } from '../test/helpers/database.js';
import { freePort } from '../test/helpers/ports.js';
import { createTestPki } from '../test/helpers/tls.js';
import { cpuSeconds, machine, percentile, rssMiB, startService, stopServices } from './lib.js';

const BOTS = Number(process.env.BENCH_BOTS ?? 100_000);
const ORIGINS = Number(process.env.BENCH_ORIGINS ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const MAX_SOCKETS = Number(process.env.BENCH_MAX_SOCKETS ?? 2048);
const JWT_SECRET = 'bench-secret-bench-secret-bench-secret-000';
const INTERNAL = 'bench-internal-token-bench-internal-token-00';

/** ORIGINS receivers: 200 at once; first arrival per update id, connections accepted, open now and at most. */
async function startReceivers(pki: { key: string; cert: string }) {
  const arrivals = new Map<number, number>();
  const conns = { accepted: 0, open: 0, max: 0, bytesIn: 0, bytesOut: 0 };
  const servers: https.Server[] = [];
  const ports: number[] = [];
  for (let i = 0; i < ORIGINS; i++) {
    const server = https.createServer({ key: pki.key, cert: pki.cert, keepAliveTimeout: 120_000 }, (req, res) => {
      req.resume();
      req.on('end', () => {
        const id = Number(req.headers['x-service-update-id']);
        if (!arrivals.has(id)) arrivals.set(id, performance.now());
        res.end('ok');
      });
    });
    server.on('secureConnection', (s) => {
      conns.accepted++;
      conns.open++;
      conns.max = Math.max(conns.max, conns.open);
      s.once('close', () => {
        conns.open--;
        conns.bytesIn += s.bytesRead;
        conns.bytesOut += s.bytesWritten;
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
    ports.push((server.address() as AddressInfo).port);
  }
  return { ports, arrivals, conns, close: () => servers.forEach((s) => { s.closeAllConnections(); s.close(); }) };
}

async function post(url: string, token: string, body?: unknown) {
  const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body ?? {}) });
  return res.json() as Promise<any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/**
 * The embedded default's bots, written before the service starts by the same storage
 * modules its console and setWebhook use (insert, approve with an issued token, the
 * setWebhook unit of work): through the API they would take an hour here.
 */
async function seedBots(dir: string, secretKey: string, ports: number[]): Promise<string[]> {
  const db = createDb(loadConfig({ DATA_DIR: dir, SECRET_KEY: secretKey }).database);
  await migrateLatest(db);
  const bots = createBotsRepo(db);
  const units = createUnitsOfWork(db);
  const box = createSecretBox(secretKey);
  const sealed = box.seal('bench');
  const ids: string[] = [];
  const prefix = `s${crypto.randomBytes(2).toString('hex')}`;
  const t0 = Date.now();
  for (let i = 0; i < BOTS; i++) {
    const id = `bot_${prefix}${String(i).padStart(8, '0')}`;
    const now = Date.now();
    await bots.insert({ id, ownerId: `acct_bench${Math.floor(i / 1000)}`, name: `s${i}`, username: `${prefix}_${i}`, description: null, avatar: null, scopes: ['send', 'receive'], now });
    const token = generateBotToken();
    await bots.approve(id, { hash: hashBotToken(token), prefix: tokenPrefixOf(token), sealed: null, expiresAt: null }, now);
    await units.setWebhook(id, {
      url: `https://127.0.0.1:${ports[i % ports.length]}/b/${i}`, secretSealed: sealed, allowedIps: [], secretHeader: false,
      maxConnections: 40, maxDeliveriesPerSecond: null, allowedUpdates: null,
    }, false, now);
    ids.push(id);
    if ((i + 1) % 10_000 === 0) console.error(`  ${i + 1} bots written (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  }
  await db.destroy();
  return ids;
}

async function makeBots(http: string, ports: number[]): Promise<string[]> {
  const admin = await mintAccountJwt(JWT_SECRET, { sub: 'bench-admin', roles: ['admin'] });
  const prefix = `s${crypto.randomBytes(2).toString('hex')}`;
  const ids: string[] = new Array(BOTS);
  let next = 0;
  let done = 0;
  const t0 = Date.now();
  await Promise.all(Array.from({ length: 48 }, async () => {
    while (next < BOTS) {
      const i = next++;
      const owner = await mintAccountJwt(JWT_SECRET, { sub: `bench-scale-${Math.floor(i / 1000)}` });
      const created = await post(`${http}/api/v1/bots/applications`, owner, { name: `s${i}`, username: `${prefix}_${i}` });
      await post(`${http}/api/v1/admin/bots/${created.id}/approve`, admin);
      const hooked = await post(`${http}/api/v1/bots/my/${created.id}/webhook`, owner, { url: `https://127.0.0.1:${ports[i % ports.length]}/b/${i}`, secret_token: 'bench' });
      if (hooked.delivery_mode !== 'webhook') throw new Error(`setting the webhook failed: ${JSON.stringify(hooked)}`);
      ids[i] = created.id;
      if (++done % 10_000 === 0) console.error(`  ${done} bots made (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
    }
  }));
  return ids;
}

const metric = async (base: string, name: string) => {
  const line = (await (await fetch(`${base}/metrics`)).text()).split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : NaN;
};
const fds = (pid: number) => fs.readdirSync(`/proc/${pid}/fd`).length;

/** One update to one bot, delivered. */
async function warmUp(grpcAddress: string, botId: string, arrivals: Map<number, number>) {
  const client = new InternalServiceClient(grpcAddress, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${INTERNAL}`);
  const message = { messageId: 0, date: 0, chat: { id: 5, type: 'private' }, from: { id: 5, isBot: false }, text: 'warm-up' };
  const [r] = await new Promise<{ updateId: number }[]>((resolve, reject) =>
    client.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates: [{ botId, message }] }), md, (err, res) => (err ? reject(err) : resolve(res!.results))));
  client.close();
  const end = Date.now() + 60_000;
  while (!arrivals.has(Number(r!.updateId)) && Date.now() < end) await new Promise((res) => setTimeout(res, 100));
  if (!arrivals.has(Number(r!.updateId))) throw new Error('the warm-up delivery did not arrive in 60 s');
}

async function round(grpcAddress: string, ids: string[], arrivals: Map<number, number>, conns: { accepted: number }, dispatcher: { pid: number; base: string }) {
  const accepted0 = conns.accepted;
  const client = new InternalServiceClient(grpcAddress, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${INTERNAL}`);
  const message = { messageId: 0, date: 0, chat: { id: 5, type: 'private' }, from: { id: 5, isBot: false }, text: 'scale' };
  const peak = { sockets: 0, fds: 0, rss: 0 };
  const sample = async () => {
    peak.sockets = Math.max(peak.sockets, await metric(dispatcher.base, 'botplatform_webhook_sockets_open').catch(() => 0));
    peak.fds = Math.max(peak.fds, fds(dispatcher.pid));
    peak.rss = Math.max(peak.rss, rssMiB(dispatcher.pid));
  };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await sample();
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  const cpu0 = cpuSeconds(dispatcher.pid);
  const evicted0 = await metric(dispatcher.base, 'botplatform_webhook_sockets_evicted');
  const sent: { id: number; t0: number }[] = [];
  const start = performance.now();
  for (let k = 0; k < ids.length; k += 500) {
    const batch = ids.slice(k, k + 500);
    const t0 = performance.now();
    const res = await new Promise<{ updateId: number }[]>((resolve, reject) =>
      client.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates: batch.map((botId) => ({ botId, message })) }), md, (err, r) => (err ? reject(err) : resolve(r!.results))));
    for (const r of res) sent.push({ id: Number(r.updateId), t0 });
  }
  const ingested = performance.now();
  const end = Date.now() + 600_000;
  while (sent.some((s) => !arrivals.has(s.id)) && Date.now() < end) await new Promise((r) => setTimeout(r, 200));
  sampling = false;
  await sampler;
  client.close();
  const lat = sent.filter((s) => arrivals.has(s.id)).map((s) => arrivals.get(s.id)! - s.t0).sort((a, b) => a - b);
  const last = Math.max(...sent.map((s) => arrivals.get(s.id) ?? 0));
  return {
    delivered: lat.length,
    of: sent.length,
    ingestSeconds: (ingested - start) / 1000,
    rate: lat.length / ((last - start) / 1000),
    p50: percentile(lat, 50), p99: percentile(lat, 99), max: lat.at(-1) ?? NaN,
    peak,
    evicted: (await metric(dispatcher.base, 'botplatform_webhook_sockets_evicted')) - evicted0,
    cpuMs: (1000 * (cpuSeconds(dispatcher.pid) - cpu0)) / Math.max(1, lat.length),
    rssAfter: rssMiB(dispatcher.pid),
    accepted: conns.accepted - accepted0,
  };
}

async function main() {
  const server = process.env.BENCH_DATABASE_URL;
  const brokers = process.env.BENCH_KAFKA_BROKERS;
  // Without them: the embedded default, one process (role=all) that is also the dispatcher.
  const embedded = !server || !brokers;
  const pki = createTestPki();
  const receivers = await startReceivers(pki);
  const db = embedded ? { url: undefined, drop: async () => {} } : await createMysqlDatabase(server, 'bp_scale');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-scale-'));
  try {
    const common = {
      DATA_DIR: dir, ...(embedded ? {} : { DATABASE_URL: db.url!, KAFKA_BROKERS: brokers! }), AUTH_JWT_SECRET: JWT_SECRET, INTERNAL_API_TOKEN: INTERNAL, LOG_LEVEL: 'error',
      SECRET_KEY: crypto.createHash('sha256').update('bench').digest('base64'), WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile,
      WEBHOOK_MAX_SOCKETS: String(MAX_SOCKETS), DATABASE_POOL_MAX: '20',
    };
    const core = { ...common, ROLE: 'core', PORT: String(await freePort()), GRPC_PORT: String(await freePort()) };
    const gateway = { ...common, ROLE: 'gateway', PORT: String(await freePort()), CORE_GRPC_ADDRESS: `127.0.0.1:${core.GRPC_PORT}` };
    const disp = { ...common, ROLE: 'dispatcher', PORT: String(await freePort()) };
    const all = { ...common, ROLE: 'all', PORT: core.PORT, GRPC_PORT: core.GRPC_PORT };
    const t0 = Date.now();
    const seeded = embedded ? await seedBots(dir, common.SECRET_KEY, receivers.ports) : undefined;
    if (!embedded) {
      await startService(core);
      await startService(gateway);
    }
    const dispatcher = await startService(embedded ? all : disp);
    const dbase = `http://127.0.0.1:${embedded ? all.PORT : disp.PORT}`;
    const httpBase = `http://127.0.0.1:${embedded ? all.PORT : gateway.PORT}`;
    const rss0 = rssMiB(dispatcher.pid!);
    const ids = seeded ?? await makeBots(httpBase, receivers.ports);
    const makeSeconds = (Date.now() - t0) / 1000;
    // One delivery before the idle figure: the embedded default starts its dispatcher threads
    // (DISPATCHER_THREADS) with the first webhook delivery, and their memory is no bot's.
    await warmUp(`127.0.0.1:${core.GRPC_PORT}`, ids[0]!, receivers.arrivals);
    const rssIdle = rssMiB(dispatcher.pid!);
    const rounds = [];
    for (let r = 0; r < ROUNDS; r++) rounds.push(await round(`127.0.0.1:${core.GRPC_PORT}`, ids, receivers.arrivals, receivers.conns, { pid: dispatcher.pid!, base: dbase }));
    const limit = Number(/Max open files\s+(\d+)/.exec(fs.readFileSync(`/proc/${dispatcher.pid}/limits`, 'utf8'))?.[1]);

    console.log(`\nbench:webhooks-scale — ${BOTS} bots in webhook mode on one dispatcher process (${embedded ? 'embedded: SQLite, role=all' : 'MariaDB + Kafka'}), ${ORIGINS} receiver origins on loopback, WEBHOOK_MAX_SOCKETS=${MAX_SOCKETS}, ${ROUNDS} rounds of one update per bot`);
    console.log(`machine: ${machine()}`);
    console.log(`bots made in ${makeSeconds.toFixed(0)} s ${embedded ? 'by the storage modules before start' : 'through the gateway'} (create, approve, setWebhook); the bench's own open-file limit ${openFileLimit()}, the dispatcher's ${limit}`);
    console.log(`dispatcher RSS: at start ${rss0.toFixed(0)} MiB, with ${BOTS} bots made, one warm-up delivery done (dispatcher threads started) and nothing due ${rssIdle.toFixed(0)} MiB`);
    console.log('\n| round | delivered | deliveries/s | first attempt p50 / p99 / max ms | slowest ÷ median | dispatcher: peak connections (cap) / peak fds (limit) / idle connections closed for room | dispatcher peak RSS / after, MiB ((peak − idle) ÷ bots, KiB) | dispatcher CPU ms per delivery | receiver connections accepted |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const [i, r] of rounds.entries()) {
      const perBot = ((r.peak.rss - rssIdle) * 1024) / BOTS;
      console.log(`| ${i + 1} | ${r.delivered} / ${r.of} | ${r.rate.toFixed(0)} | ${r.p50.toFixed(0)} / ${r.p99.toFixed(0)} / ${r.max.toFixed(0)} | ${(r.max / r.p50).toFixed(1)} | ${r.peak.sockets} (${MAX_SOCKETS}) / ${r.peak.fds} (${limit}) / ${r.evicted} | ${r.peak.rss.toFixed(0)} / ${r.rssAfter.toFixed(0)} (${perBot.toFixed(2)}) | ${r.cpuMs.toFixed(2)} | ${r.accepted} |`);
    }
    const attempts = async (outcome: string) => (await metric(dbase, `botplatform_webhook_attempts_total{outcome="${outcome}"}`).catch(() => NaN)) || 0;
    console.log(`\nattempts (warm-up included): succeeded ${await attempts('succeeded')}, failed ${await attempts('failed')} (each retried on WEBHOOK_RETRY_SCHEDULE, 1 min first: a bot's slowest delivery), dead-lettered ${await attempts('dead_letter')}`);
    receivers.close();
    await new Promise((r) => setTimeout(r, 500));
    const delivered = rounds.reduce((n, r) => n + r.delivered, 0);
    console.log(`\nreceivers: most connections open at once ${receivers.conns.max}; HTTP bytes per delivery on the wire (inside TLS, handshakes excluded): `
      + `request ${(receivers.conns.bytesIn / delivered).toFixed(0)}, answer ${(receivers.conns.bytesOut / delivered).toFixed(0)}`);
  } finally {
    stopServices();
    receivers.close();
    await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (err) => {
  console.error(err);
  stopServices();
  process.exit(1);
});
