/**
 * npm run bench:gateway — GET /api/v1/bots/my through the HTTP gateway and the
 * same call (ConsoleService/ListMyBots) made directly over gRPC, side by side in
 * one run, at the same concurrency, against the service running as real
 * processes: role=all (gateway calls the core in-process), and a separate
 * gateway process reaching a core process over gRPC.
 *
 * Settings (env): BENCH_SECONDS (10), BENCH_CONNECTIONS (32), BENCH_DATABASE_URL
 * (default: a fresh SQLite file).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import * as grpc from '@grpc/grpc-js';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { ConsoleServiceClient } from '../src/gen/botplatform/v1/console_service.js';
import { freePort } from '../test/helpers/ports.js';
import { machine, percentile, startService as start, stopServices } from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SECRET = 'bench-secret-bench-secret-bench-secret-000';

interface Figures { rps: number; p50: number; p99: number; errors: number }

async function benchHttp(url: string, jwt: string): Promise<Figures> {
  const run = (duration: number) =>
    autocannon({ url, connections: CONNECTIONS, duration, headers: { authorization: `Bearer ${jwt}` } });
  await run(2); // warm-up
  const r = await run(SECONDS);
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.non2xx + r.errors };
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

async function seed(base: string, jwt: string) {
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${base}/api/v1/bots/applications`, {
      method: 'POST',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `Bench ${i}`, username: `bench_bot_${i}` }),
    });
    if (res.status !== 201) throw new Error(`seed failed: ${res.status} ${await res.text()}`);
  }
}

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-'));
  const database = process.env.BENCH_DATABASE_URL ?? `sqlite:${path.join(dataDir, 'bench.sqlite')}`;
  const common = { DATA_DIR: dataDir, DATABASE_URL: database };
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
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(stopServices);
