/**
 * npm run bench:updates — for the embedded default (SQLite, in-process bus) and
 * for MariaDB + Kafka (two core processes: ingest on one, poll on the other):
 *   - ingest throughput over gRPC (updates/s), 1 and 100 updates per call, and over one
 *     StreamIngestUpdates stream (batches of 100, as fast as its flow control lets them);
 *   - ingest → getUpdates latency p50/p99 at a steady rate;
 *   - memory and CPU of the polling process with N idle long polls held open.
 * MariaDB + Kafka runs when BENCH_DATABASE_URL (a server URL; a fresh database is
 * created) and BENCH_KAFKA_BROKERS are set (`npm run infra:up` starts both).
 * Other settings: BENCH_SECONDS (10), BENCH_RATE (100 updates/s), BENCH_IDLE_POLLS (5000).
 * BENCH_ONLY (comma-separated): `mysql` runs the MariaDB + Kafka setup alone (not the
 * embedded one); `idle` runs the idle-poll phase alone, on services that have served
 * nothing before it but the creation of its bots (the default runs every phase, so the
 * embedded process holds its polls on a heap the ingest phases grew). The idle phase
 * also prints the held RSS per poll, over the RSS before the polls arrived.
 * BENCH_ONLY=ingest measures only the ingesting process's CPU and statements per update (1
 * and 100 per call, one stream), for docs/capacity.md.
 * BENCH_ONLY=wake measures only the waiting poll's wake-up (embedded, and MariaDB + Kafka
 * too when their settings are given), quick to iterate on (under a minute; BENCH_CPU_PROF for
 * profiles): a poll waits (getUpdates timeout 10 over HTTP), 100 ms later one update is
 * ingested over gRPC, and a sample is the time from the ingest call to the poll's answer
 * reaching the client, once the ingest's own answer is in too (as the full run measures it).
 * It prints p50 / p90 / p99 / max of those, the same for the poll's answer alone (its
 * arrival, whichever answer came first), the service's CPU per cycle (/proc), and a
 * baseline: the same ingest call with no poll waiting. Beside it, sample for sample (one of
 * each in turn, so both see the same minutes' load), the same measurement of the wake-up's
 * floor (bench/wake-floor.ts, a process of its own: Fastify holding the poll, the service's
 * own gRPC ingest method storing the update in SQLite and answering the poll from it,
 * nothing else): what this machine allows with the same clients and idle pattern.
 * With BENCH_DATABASE_URL and BENCH_KAFKA_BROKERS it also measures the floor across two
 * processes (bench/wake-floor-kafka.ts: the update stored in MariaDB and produced to Kafka
 * by one, consumed by the other, which reads it and answers the poll).
 * BENCH_WAKE_SAMPLES: wake-ups measured (50, or 200 with BENCH_ONLY=wake). BENCH_WAKE_LOG: each
 * sample's start and times to a file, for what made the slow ones (bench/event-marks.mjs).
 * BENCH_GATEWAY=1: on MariaDB + Kafka, B is two processes: core B (ROLE=core) and a gateway
 * (ROLE=gateway) in front of it, holding the polls' HTTP connections; CPU and RSS are the
 * two processes' sums (the JS heap printed is the gateway's).
 * BENCH_HEAP_SNAPSHOTS=dir: the polling process writes a heap snapshot there before its
 * polls arrive and once they are held, after the measurements (it runs with
 * --heapsnapshot-signal; compare them in Chrome DevTools' Memory tab, "Comparison").
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { Agent, fetch } from 'undici';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { InternalServiceClient, IngestUpdatesRequest, StreamIngestUpdatesRequest } from '../src/gen/botplatform/v1/internal_service.js';
import { createMysqlDatabase } from '../test/helpers/database.js';
import { freePort } from '../test/helpers/ports.js';
import { cpuSeconds, machine, percentile, rssMiB, startHelper, startService, stopServices } from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const RATE = Number(process.env.BENCH_RATE ?? 100);
const IDLE_POLLS = Number(process.env.BENCH_IDLE_POLLS ?? 5000);
const ONLY = new Set((process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim()).filter(Boolean));
const IDLE_ONLY = ONLY.has('idle');
const HEAP_SNAPSHOTS = process.env.BENCH_HEAP_SNAPSHOTS;
/** BENCH_GATEWAY=1: on MariaDB + Kafka, the polls go through a gateway process (ROLE=gateway) to core B (ROLE=core). */
const GATEWAY = process.env.BENCH_GATEWAY === '1';
/**
 * BENCH_IDLE_RESTART=1 (with BENCH_ONLY=idle): the embedded process is restarted on its data
 * between the bots' creation and the polls, so that, as core B on MariaDB + Kafka, the process
 * that holds them has served nothing else (a deploy's restart, the bots polling again).
 */
const IDLE_RESTART = process.env.BENCH_IDLE_RESTART === '1';
const ONLY_WAKE = ONLY.has('wake');
/**
 * BENCH_WAKE_LOG=file: each wake-up sample appended there as a JSON line (setup: its target's
 * index in its measurement, 0 the floor's; at: its start in epoch ms; ms; pollMs), to set
 * beside other processes' marks (bench/event-marks.mjs, bench/wake-tail.mjs).
 */
const WAKE_LOG = process.env.BENCH_WAKE_LOG;
const WAKE_SAMPLES = Number(process.env.BENCH_WAKE_SAMPLES ?? (ONLY_WAKE ? 200 : 50));
const JWT_SECRET = 'bench-secret-bench-secret-bench-secret-000';
const INTERNAL = 'bench-internal-token-bench-internal-token-00';
// Keep-alive, as bot clients do (undici's pipelining: 0 would close each connection after
// its response: every poll and call a new TCP connection, its setup on the measured path).
const dispatcher = new Agent({ connections: null, keepAliveTimeout: 60_000 });

/** Where a setup serves: its HTTP and gRPC addresses, its process, and (behind a gateway) the core process serving with it. */
interface Instance { http: string; grpc: string; pid: number; also?: number[] }
/** CPU seconds of an instance's processes. */
const cpuOf = (at: Instance) => [at.pid, ...(at.also ?? [])].reduce((n, pid) => n + cpuSeconds(pid), 0);
/** RSS MiB of an instance's processes. */
const rssOf = (at: Instance) => [at.pid, ...(at.also ?? [])].reduce((n, pid) => n + rssMiB(pid), 0);

async function json(method: string, url: string, token: string, body?: unknown) {
  const res = await fetch(url, {
    method, dispatcher,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() as any }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** Creates and approves n bots; returns their ids and tokens. */
async function makeBots(base: string, n: number, prefix: string) {
  const owner = await mintAccountJwt(JWT_SECRET, { sub: `bench-${prefix}` });
  const admin = await mintAccountJwt(JWT_SECRET, { sub: 'bench-admin', roles: ['admin'] });
  const bots: { id: string; token: string }[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < n) {
      const i = next++;
      const created = await json('POST', `${base}/api/v1/bots/applications`, owner, { name: `b${i}`, username: `${prefix}_${i}` });
      await json('POST', `${base}/api/v1/admin/bots/${created.body.id}/approve`, admin);
      const detail = await json('GET', `${base}/api/v1/bots/my/${created.body.id}`, owner);
      bots.push({ id: created.body.id, token: detail.body.one_time_token });
    }
  }));
  return bots;
}

function ingester(address: string) {
  const client = new InternalServiceClient(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${INTERNAL}`);
  const message = (text: string) => ({ messageId: 0, date: 0, chat: { id: 9, type: 'private' }, from: { id: 9, isBot: false }, text });
  return {
    send: (updates: { botId: string; text: string }[]) =>
      new Promise<void>((resolve, reject) =>
        client.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates: updates.map((u) => ({ botId: u.botId, message: message(u.text) })) }), md,
          (err) => (err ? reject(err) : resolve()))),
    close: () => client.close(),
  };
}

async function throughput(address: string, bots: { id: string }[], perCall: number): Promise<number> {
  const ing = ingester(address);
  let done = 0;
  const end = Date.now() + SECONDS * 1000;
  let k = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (Date.now() < end) {
      const batch = Array.from({ length: perCall }, () => ({ botId: bots[k++ % bots.length]!.id, text: 'x' }));
      await ing.send(batch);
      done += perCall;
    }
  }));
  ing.close();
  return done / SECONDS;
}

/** Updates/s acknowledged over one StreamIngestUpdates stream, batches of `perBatch`, written as fast as flow control allows. */
async function streamed(address: string, bots: { id: string }[], perBatch: number): Promise<number> {
  const client = new InternalServiceClient(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${INTERNAL}`);
  const stream = client.streamIngestUpdates(md);
  let acked = 0;
  let failed = 0;
  stream.on('data', (ack: { results: unknown[]; error?: unknown }) => {
    if (ack.error) failed++;
    else acked += ack.results.length;
  });
  const ended = new Promise<void>((resolve, reject) => {
    stream.on('status', (s: grpc.StatusObject) => (s.code === grpc.status.OK ? resolve() : reject(new Error(s.details))));
    stream.on('error', () => {});
  });
  const message = { messageId: 0, date: 0, chat: { id: 9, type: 'private' }, from: { id: 9, isBot: false }, text: 'x' };
  const start = performance.now();
  const end = Date.now() + SECONDS * 1000;
  let k = 0;
  let sequence = 0;
  while (Date.now() < end) {
    const updates = Array.from({ length: perBatch }, () => ({ botId: bots[k++ % bots.length]!.id, message }));
    if (!stream.write(StreamIngestUpdatesRequest.fromPartial({ sequence: ++sequence, updates }))) await new Promise((r) => stream.once('drain', r));
  }
  stream.end();
  await ended;
  const seconds = (performance.now() - start) / 1000;
  client.close();
  if (failed > 0) throw new Error(`${failed} streamed batches refused`);
  return acked / seconds;
}

async function latency(ingestAt: Instance, pollAt: Instance, bot: { id: string; token: string }) {
  // Drain what throughput runs left for this bot.
  let offset = 0;
  for (;;) {
    const r = await json('POST', `${pollAt.http}/api/v1/bots/getUpdates`, bot.token, { offset, limit: 100 });
    if (r.body.result.length === 0) break;
    offset = r.body.result.at(-1).update_seq + 1;
  }
  const samples: number[] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const r = await json('POST', `${pollAt.http}/api/v1/bots/getUpdates`, bot.token, { offset, timeout: 2 });
      const now = performance.timeOrigin + performance.now();
      for (const u of r.body.result ?? []) {
        samples.push(now - Number(u.message.text));
        offset = u.update_seq + 1;
      }
    }
  })();
  await new Promise((r) => setTimeout(r, 500));
  const ing = ingester(ingestAt.grpc);
  const total = RATE * SECONDS;
  const start = performance.now();
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    inflight.push(ing.send([{ botId: bot.id, text: String(performance.timeOrigin + performance.now()) }]));
  }
  await Promise.all(inflight);
  await new Promise((r) => setTimeout(r, 1000));
  polling = false;
  await poller;
  ing.close();
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), n: samples.length, sent: total };
}

/** Where a wake-up is measured: the poll held by `pollAt`, the update ingested on `ingestAt`, for `bot`. */
interface WakeTarget { ingestAt: Instance; pollAt: Instance; bot: { id: string; token: string } }

/** A poll waits on one instance; the update is ingested on another: time from ingest to answer. */
async function wakeUp(ingestAt: Instance, pollAt: Instance, bot: { id: string; token: string }) {
  return (await wakeUps([{ ingestAt, pollAt, bot }]))[0]!;
}

/**
 * wakeUp on several targets at once, one sample of each in turn (which goes first rotates),
 * so that each sees the machine's load of the same minutes: a service and its floor
 * measured side by side rather than one after the other.
 */
async function wakeUps(targets: WakeTarget[]) {
  const wakeLog: object[] | undefined = WAKE_LOG ? [] : undefined;
  const runs = await Promise.all(targets.map(async ({ ingestAt, pollAt, bot }) => {
    let offset = 0;
    for (;;) {
      const r = await json('POST', `${pollAt.http}/api/v1/bots/getUpdates`, bot.token, { offset, limit: 100 });
      if (r.body.result.length === 0) break;
      offset = r.body.result.at(-1).update_seq + 1;
    }
    const cpu = () => cpuOf(ingestAt) + (pollAt === ingestAt ? 0 : cpuOf(pollAt));
    /** Both answers in (the ingest's and the poll's): the figure bench:updates has always printed. */
    const samples: number[] = [];
    /** The poll's answer alone, from the ingest call's start. */
    const pollOnly: number[] = [];
    return { ingestAt, pollAt, bot, offset, ing: ingester(ingestAt.grpc), cpu, cpu0: 0, samples, pollOnly };
  }));
  for (const r of runs) r.cpu0 = r.cpu();
  for (let i = 0; i < WAKE_SAMPLES; i++) {
    for (let k = 0; k < runs.length; k++) {
      const r = runs[(i + k) % runs.length]!;
      // When the poll's own answer arrived, whether before or after the ingest's.
      const waiting = json('POST', `${r.pollAt.http}/api/v1/bots/getUpdates`, r.bot.token, { offset: r.offset, timeout: 10 })
        .then((res) => ({ res, at: performance.now() }));
      await new Promise((resolve) => setTimeout(resolve, 100)); // the poll is waiting
      const t0 = performance.now();
      await r.ing.send([{ botId: r.bot.id, text: 'wake' }]);
      const { res, at } = await waiting;
      const ms = performance.now() - t0;
      r.samples.push(ms);
      r.pollOnly.push(at - t0);
      wakeLog?.push({ setup: runs.indexOf(r), i, at: performance.timeOrigin + t0, ms, pollMs: at - t0 });
      r.offset = res.body.result.at(-1).update_seq + 1;
    }
  }
  if (wakeLog) fs.appendFileSync(WAKE_LOG!, `${wakeLog.map((l) => JSON.stringify(l)).join('\n')}\n`);
  return runs.map((r) => {
    // The service's CPU per cycle (the ingest, the woken poll's answer, the relay's round, the next poll's start).
    const cpuMs = ((r.cpu() - r.cpu0) * 1000) / WAKE_SAMPLES;
    r.ing.close();
    r.samples.sort((a, b) => a - b);
    r.pollOnly.sort((a, b) => a - b);
    return {
      cpuMs, p50: percentile(r.samples, 50), p90: percentile(r.samples, 90), p99: percentile(r.samples, 99), max: r.samples.at(-1)!, n: r.samples.length,
      poll: { p50: percentile(r.pollOnly, 50), p90: percentile(r.pollOnly, 90), p99: percentile(r.pollOnly, 99), max: r.pollOnly.at(-1)! },
    };
  });
}

async function heapSnapshot(pid: number) {
  if (!HEAP_SNAPSHOTS) return;
  const count = () => fs.readdirSync(HEAP_SNAPSHOTS).filter((f) => f.endsWith('.heapsnapshot') && f.includes(`.${pid}.`)).length;
  const before = count();
  process.kill(pid, 'SIGUSR2');
  // Written when complete: its size stops changing.
  for (let i = 0; i < 600 && count() === before; i++) await new Promise((r) => setTimeout(r, 500));
  let size = -1;
  for (;;) {
    await new Promise((r) => setTimeout(r, 1000));
    const files = fs.readdirSync(HEAP_SNAPSHOTS).filter((f) => f.includes(`.${pid}.`));
    const now = files.reduce((n, f) => n + fs.statSync(path.join(HEAP_SNAPSHOTS, f)).size, 0);
    if (now === size) break;
    size = now;
  }
}

async function idlePolls(at: Instance, bots: { token: string }[]) {
  const measure = async (ms: number) => {
    const c0 = cpuOf(at);
    await new Promise((r) => setTimeout(r, ms));
    return { cpuPct: ((cpuOf(at) - c0) / (ms / 1000)) * 100, rss: rssOf(at) };
  };
  /** The JS heap, used and total MiB, from the process's /metrics (read after a measurement, outside it). */
  const heap = async () => {
    const text = await (await fetch(`${at.http}/metrics`, { dispatcher })).text();
    const value = (name: string) => Number(text.match(new RegExp(`^botplatform_nodejs_heap_size_${name}_bytes (\\S+)$`, 'm'))?.[1]) / 2 ** 20;
    return { used: value('used'), total: value('total') };
  };
  const before = await measure(3000);
  const heapBefore = await heap();
  await heapSnapshot(at.pid);
  // Their own connection pool, destroyed to hang up every poll at once.
  const pool = new Agent({ connections: null, pipelining: 0 });
  const settled = bots.map(() => false);
  /** How the polls that ended early were answered (HTTP status; 0: no answer). */
  const early = new Map<number, number>();
  let done = false;
  const polls: Promise<number>[] = [];
  const open = (b: { token: string }, i: number) =>
    fetch(`${at.http}/api/v1/bots/getUpdates`, {
      method: 'POST', dispatcher: pool,
      headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ timeout: 50 }),
    }).then(async (r) => {
      const text = await r.text();
      if (!done && !early.has(r.status)) console.log(`a poll ended early: ${r.status} ${text.slice(0, 200)}`);
      return r.status;
    }, (err) => {
      if (!done && !early.has(0)) console.log(`a poll ended early without an answer: ${err?.cause?.code ?? err?.cause?.message ?? err}`);
      return 0;
    }).then((status) => {
      if (!done) early.set(status, (early.get(status) ?? 0) + 1);
      settled[i] = true;
      return status;
    });
  // Clients arrive in waves of 500 a tenth of a second apart, as reconnecting bots would.
  for (let i = 0; i < bots.length; i++) {
    polls.push(open(bots[i]!, i));
    if (i % 500 === 499) await new Promise((r) => setTimeout(r, 100));
  }
  // Measure the cost of holding them once the process has settled (CPU under 20% for a second).
  for (let i = 0; i < 30 && (await measure(1000)).cpuPct > 20; i++);
  const held = await measure(10_000);
  // A second window of the same polls: what holding them costs once whatever followed their
  // burst is done (the service's collection after a burst, src/heap-trim.ts, may fall in the first).
  const heldLater = await measure(10_000);
  const heapHeld = await heap();
  const stillOpen = settled.filter((x) => !x).length;
  done = true;
  if (early.size > 0) console.log(`${bots.length - stillOpen} polls ended before the measurement's end, by status: ${[...early].map(([k, v]) => `${k}: ${v}`).join(', ')}`);
  if (HEAP_SNAPSHOTS) {
    await heapSnapshot(at.pid);
    console.log(`heap snapshots of pid ${at.pid} (before the polls, then with ${stillOpen} held) in ${HEAP_SNAPSHOTS}`);
  }
  await pool.destroy();
  await Promise.allSettled(polls);
  return { before, held, heldLater, open: stillOpen, heap: { before: heapBefore, held: heapHeld } };
}

async function instances(envA: Record<string, string>, envB: Record<string, string> | null) {
  const heapArgs = HEAP_SNAPSHOTS ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${HEAP_SNAPSHOTS}`] : [];
  // The process that holds the polls (B, or the one process) writes the heap snapshots.
  const a = await startService(envA, { nodeArgs: envB ? [] : heapArgs });
  const A: Instance = { http: `http://127.0.0.1:${envA.PORT}`, grpc: `127.0.0.1:${envA.GRPC_PORT}`, pid: a.pid! };
  let B = A;
  if (envB && GATEWAY) {
    // Core B (ROLE=core) behind a gateway process of its own (ROLE=gateway): the polls reach B over gRPC.
    const b = await startService({ ...envB, ROLE: 'core' });
    const port = String(await freePort());
    const g = await startService({ ...envB, ROLE: 'gateway', CORE_GRPC_ADDRESS: `127.0.0.1:${envB.GRPC_PORT}`, PORT: port }, { nodeArgs: heapArgs });
    B = { http: `http://127.0.0.1:${port}`, grpc: `127.0.0.1:${envB.GRPC_PORT}`, pid: g.pid!, also: [b.pid!] };
  } else if (envB) {
    const b = await startService(envB, { nodeArgs: heapArgs });
    B = { http: `http://127.0.0.1:${envB.PORT}`, grpc: `127.0.0.1:${envB.GRPC_PORT}`, pid: b.pid! };
  }
  return { A, B };
}

/**
 * Baseline of the wake-up: the same single-update ingest call, 100 ms apart, with no poll
 * waiting: the time to its answer (the wake-up's sample includes it, as it awaits both).
 * With several targets, one call to each in turn, as wakeUps does.
 */
async function ingestAlone(targets: { at: Instance; bot: { id: string } }[]) {
  const runs = targets.map(({ at, bot }) => ({ ing: ingester(at.grpc), bot, samples: [] as number[] }));
  for (let i = 0; i < WAKE_SAMPLES; i++) {
    for (let k = 0; k < runs.length; k++) {
      const r = runs[(i + k) % runs.length]!;
      await new Promise((resolve) => setTimeout(resolve, 100));
      const t0 = performance.now();
      await r.ing.send([{ botId: r.bot.id, text: 'alone' }]);
      r.samples.push(performance.now() - t0);
    }
  }
  return runs.map((r) => {
    r.ing.close();
    r.samples.sort((a, b) => a - b);
    return { p50: percentile(r.samples, 50), p90: percentile(r.samples, 90), p99: percentile(r.samples, 99), max: r.samples.at(-1)! };
  });
}

/** The wake-up's floor (bench/wake-floor.ts) in a process of its own, as an Instance with its one bot. */
async function startWakeFloor() {
  const { info, pid, stop } = await startHelper<{ http: string; grpc: string; botId: string; token: string }>('wake-floor.ts');
  const at: Instance = { http: info.http, grpc: info.grpc, pid };
  return { name: 'baseline: floor of the wake-up (bench/wake-floor.ts)', ingestAt: at, pollAt: at, bot: { id: info.botId, token: info.token }, stop: async () => stop() };
}

/**
 * The wake-up's floor across two processes on MariaDB + Kafka (bench/wake-floor-kafka.ts:
 * the poll held by one, the update stored and produced by the other, a consumer of the
 * poll's process waking it), in a fresh database.
 */
async function startWakeFloorKafka(server: string, brokers: string) {
  const db = await createMysqlDatabase(server, 'bp_bench_floor');
  const env = { WAKE_FLOOR_DATABASE_URL: db.url, WAKE_FLOOR_KAFKA_BROKERS: brokers, WAKE_FLOOR_TOPIC: `bench-wake-floor-${crypto.randomBytes(4).toString('hex')}`, KAFKAJS_NO_PARTITIONER_WARNING: '1' };
  const poll = await startHelper<{ http: string; botId: string; token: string }>('wake-floor-kafka.ts', { ...env, WAKE_FLOOR_ROLE: 'poll' });
  const ingest = await startHelper<{ grpc: string }>('wake-floor-kafka.ts', { ...env, WAKE_FLOOR_ROLE: 'ingest' });
  return {
    name: 'baseline: floor of the wake-up across two processes, MariaDB + Kafka (bench/wake-floor-kafka.ts)',
    ingestAt: { http: '', grpc: ingest.info.grpc, pid: ingest.pid } satisfies Instance,
    pollAt: { http: poll.info.http, grpc: '', pid: poll.pid } satisfies Instance,
    bot: { id: poll.info.botId, token: poll.info.token },
    async stop() {
      ingest.stop();
      poll.stop();
      await db.drop();
    },
  };
}

/** A process's botplatform_db_statements gauge (statements it has sent to its database). */
async function statementsOf(httpBase: string): Promise<number> {
  const text = await (await fetch(`${httpBase}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('botplatform_db_statements '));
  return line ? Number(line.split(' ')[1]) : NaN;
}

/**
 * BENCH_ONLY=ingest: the ingesting process's cost per update, for the capacity model
 * (docs/capacity.md): updates/s, its CPU ms and its database statements per update,
 * 1 and 100 updates per IngestUpdates call and over one stream.
 */
async function runIngestCost(name: string, envA: Record<string, string>, envB: Record<string, string> | null) {
  const { A } = await instances(envA, envB);
  const workBots = await makeBots(A.http, 50, `u${crypto.randomBytes(3).toString('hex')}c`);
  const rows = [];
  for (const [label, go] of [
    ['1 per call', () => throughput(A.grpc, workBots, 1)],
    ['100 per call', () => throughput(A.grpc, workBots, 100)],
    ['one stream, 100 per batch', () => streamed(A.grpc, workBots, 100)],
  ] as const) {
    const cpu0 = cpuSeconds(A.pid);
    const st0 = await statementsOf(A.http);
    const t0 = performance.now();
    const rate = await go();
    const updates = rate * ((performance.now() - t0) / 1000);
    rows.push({ label, rate, cpuMs: ((cpuSeconds(A.pid) - cpu0) * 1000) / updates, statements: ((await statementsOf(A.http)) - st0) / updates });
  }
  return { name, rows };
}

type WakeFloor = Awaited<ReturnType<typeof startWakeFloor>>;

/**
 * BENCH_ONLY=wake: the wake-up measurement alone, on a fresh service, beside its floor (a
 * sample of each in turn), with their baselines (the ingest call alone, in turn too).
 */
async function runWake(name: string, envA: Record<string, string>, envB: Record<string, string> | null, floor: WakeFloor) {
  const { A, B } = await instances(envA, envB);
  const [bot, other] = await makeBots(A.http, 2, `u${crypto.randomBytes(3).toString('hex')}k`);
  const [floorWake, wake] = await wakeUps([floor, { ingestAt: A, pollAt: B, bot: bot! }]);
  const [floorAlone, alone] = await ingestAlone([{ at: floor.ingestAt, bot: floor.bot }, { at: A, bot: other! }]);
  return [{ name: floor.name, wake: floorWake!, alone: floorAlone! }, { name, wake: wake!, alone: alone! }];
}

interface Result {
  name: string;
  one?: number;
  hundred?: number;
  stream?: number;
  lat?: { p50: number; p99: number; n: number; sent: number };
  wake?: { p50: number; p99: number };
  idle: Awaited<ReturnType<typeof idlePolls>>;
}

async function run(name: string, envA: Record<string, string>, envB: Record<string, string> | null): Promise<Result> {
  const { A, B } = await instances(envA, envB);
  const prefix = `u${crypto.randomBytes(3).toString('hex')}`;
  if (IDLE_ONLY) {
    const idleBots = await makeBots(A.http, IDLE_POLLS, `${prefix}i`);
    if (IDLE_RESTART && !envB) {
      process.kill(A.pid, 'SIGTERM');
      while (fs.existsSync(`/proc/${A.pid}`) && !fs.readFileSync(`/proc/${A.pid}/stat`, 'utf8').includes(') Z')) await new Promise((r) => setTimeout(r, 50));
      const { A: again } = await instances(envA, null);
      return { name: `${name}, restarted after its bots' creation`, idle: await idlePolls(again, idleBots) };
    }
    return { name, idle: await idlePolls(B, idleBots) };
  }
  const workBots = await makeBots(A.http, 50, `${prefix}w`);
  const one = await throughput(A.grpc, workBots, 1);
  const hundred = await throughput(A.grpc, workBots, 100);
  const stream = await streamed(A.grpc, workBots, 100);
  const lat = await latency(A, B, workBots[0]!);
  const wake = await wakeUp(A, B, workBots[1]!);
  const idleBots = await makeBots(A.http, IDLE_POLLS, `${prefix}i`);
  const idle = await idlePolls(B, idleBots);
  return { name, one, hundred, stream, lat, wake, idle };
}

async function main() {
  const env = async (dir: string, extra: Record<string, string> = {}) => ({
    DATA_DIR: dir, AUTH_JWT_SECRET: JWT_SECRET, INTERNAL_API_TOKEN: INTERNAL,
    SECRET_KEY: crypto.createHash('sha256').update('bench').digest('base64'),
    PORT: String(await freePort()), GRPC_PORT: String(await freePort()), ...extra,
  });
  /**
   * Runs `each` on the embedded setup (unless BENCH_ONLY has mysql) and on MariaDB + Kafka
   * (when configured: a fresh database, dropped after), stopping the services after each.
   */
  async function setups<R>(each: (name: string, envA: Record<string, string>, envB: Record<string, string> | null) => Promise<R>): Promise<R[]> {
    const out: R[] = [];
    if (!ONLY.has('mysql')) {
      const embeddedDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-upd-'));
      out.push(await each('embedded (SQLite, in-process bus), one process', await env(embeddedDir), null));
      stopServices();
    }
    const server = process.env.BENCH_DATABASE_URL;
    const brokers = process.env.BENCH_KAFKA_BROKERS;
    if (!server || !brokers) {
      console.log('(MariaDB + Kafka row skipped: set BENCH_DATABASE_URL and BENCH_KAFKA_BROKERS; npm run infra:up starts both)');
      return out;
    }
    const db = await createMysqlDatabase(server, 'bp_bench');
    const shared = { DATABASE_URL: db.url, KAFKA_BROKERS: brokers };
    try {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-upd-'));
      const name = GATEWAY ? 'MariaDB + Kafka, ingest on core A, poll through a gateway process to core B' : 'MariaDB + Kafka, ingest on core A, poll on core B';
      out.push(await each(name, await env(dir, shared), await env(dir, shared)));
    } finally {
      stopServices();
      await db.drop();
    }
    return out;
  }

  if (ONLY_WAKE) {
    const server = process.env.BENCH_DATABASE_URL;
    const brokers = process.env.BENCH_KAFKA_BROKERS;
    const floor = ONLY.has('mysql') ? undefined : await startWakeFloor();
    const kafkaFloor = server && brokers ? await startWakeFloorKafka(server, brokers) : undefined;
    let wakes;
    try {
      wakes = (await setups((name, envA, envB) => runWake(name, envA, envB, envB ? kafkaFloor! : floor!))).flat();
    } finally {
      await floor?.stop();
      await kafkaFloor?.stop();
    }
    console.log(`\nbench:updates, wake-up only — ${WAKE_SAMPLES} samples, a poll waiting 100 ms before each ingest; each setup's samples alternate with its floor's`);
    console.log(`machine: ${machine()}\n`);
    const ms = (p: { p50: number; p90: number; p99: number; max: number }) => [p.p50, p.p90, p.p99, p.max].map((x) => x.toFixed(2)).join(' / ');
    console.log('| setup | waiting poll woken (both answers in): p50 / p90 / p99 / max ms | the poll\'s answer alone | service CPU ms per cycle | baseline: the ingest call alone |');
    console.log('|---|---:|---:|---:|---:|');
    for (const r of wakes) console.log(`| ${r.name} | ${ms(r.wake)} | ${ms(r.wake.poll)} | ${r.wake.cpuMs.toFixed(2)} | ${ms(r.alone)} |`);
    return;
  }
  if (ONLY.has('ingest')) {
    const costs = await setups(runIngestCost);
    console.log(`\nbench:updates BENCH_ONLY=ingest — ${SECONDS}s per run, 16 callers, 50 bots; the ingesting process alone`);
    console.log(`machine: ${machine()}\n`);
    console.log('| setup | ingest | updates/s | its CPU ms per update | its database statements per update |');
    console.log('|---|---|---:|---:|---:|');
    for (const c of costs) for (const r of c.rows) console.log(`| ${c.name} | ${r.label} | ${r.rate.toFixed(0)} | ${r.cpuMs.toFixed(3)} | ${r.statements.toFixed(3)} |`);
    return;
  }
  const results = await setups(run);

  const phases = IDLE_ONLY ? 'the idle-poll phase alone (BENCH_ONLY=idle)' : `${SECONDS}s per throughput run, latency at ${RATE} updates/s`;
  console.log(`\nbench:updates — ${phases}, ${IDLE_POLLS} idle long polls`);
  console.log(`machine: ${machine()}\n`);
  console.log('| setup | ingest/s, 1 per call | ingest/s, 100 per call | ingest/s, one stream (100 per batch) | steady stream: ingest→getUpdates p50 / p99 ms | waiting poll woken: p50 / p99 ms | polls held open | RSS MiB before → with polls | KiB per poll | JS heap MiB used/total before → with polls | CPU % before / with polls held (10 s), the next 10 s | RSS MiB 10 s later |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  const n = (v: number | undefined) => (v === undefined ? '–' : v.toFixed(0));
  for (const r of results) {
    const { before, held, heldLater, open } = r.idle;
    const { before: hb, held: hh } = r.idle.heap;
    const perPoll = open > 0 ? ((held.rss - before.rss) * 1024) / open : NaN;
    console.log(`| ${r.name} | ${n(r.one)} | ${n(r.hundred)} | ${n(r.stream)} | ${r.lat ? `${r.lat.p50.toFixed(1)} / ${r.lat.p99.toFixed(1)} (${r.lat.n}/${r.lat.sent})` : '–'} | ${r.wake ? `${r.wake.p50.toFixed(1)} / ${r.wake.p99.toFixed(1)}` : '–'} | ${open}/${IDLE_POLLS} | ${before.rss.toFixed(0)} → ${held.rss.toFixed(0)} | ${perPoll.toFixed(1)} | ${hb.used.toFixed(0)}/${hb.total.toFixed(0)} → ${hh.used.toFixed(0)}/${hh.total.toFixed(0)} | ${before.cpuPct.toFixed(1)} / ${held.cpuPct.toFixed(1)}, ${heldLater.cpuPct.toFixed(1)} | ${heldLater.rss.toFixed(0)} |`);
  }
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => {
    stopServices();
    void dispatcher.close();
  });
