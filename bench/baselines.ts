/**
 * The baselines bench:gateway measures the service against, in a process of their
 * own (so that its CPU time is theirs alone). Prints one JSON line when listening:
 * { http, grpc, token }.
 *
 *   GET  /const  raw Fastify, a constant JSON body: the HTTP stack's limit here.
 *   POST /floor  what getMe cannot do without: Fastify, SHA-256 of the bearer, one
 *                prepared better-sqlite3 lookup by token hash, the row as JSON.
 *   gRPC /bench.Echo/Echo  a raw grpc-js unary echo (bytes in, the same bytes out).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import Fastify from 'fastify';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-floor-'));
const db = new Database(path.join(dir, 'floor.sqlite'));
db.pragma('journal_mode = WAL');
db.exec(`create table bots (id text primary key, owner_id text not null, name text not null, username text not null,
  token_hash text not null unique, status text not null, supports_inline_queries integer not null, can_join_groups integer not null)`);
const token = `sbot_${crypto.randomBytes(30).toString('base64url').replace(/[-_]/g, 'x').slice(0, 40)}`;
const sha = (s: string) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');
const insert = db.prepare('insert into bots values (?, ?, ?, ?, ?, ?, 0, 1)');
for (let i = 0; i < 100; i++) insert.run(crypto.randomUUID(), 'owner', `Bot ${i}`, `bot_${i}`, sha(`other-${i}`), 'active');
insert.run(crypto.randomUUID(), 'owner', 'Floor bot', 'floor_bot', sha(token), 'active');
const byHash = db.prepare('select id, name, username, status, supports_inline_queries, can_join_groups from bots where token_hash = ?');

const app = Fastify({ logger: false });
app.get('/const', async () => ({ ok: true, result: { id: 'a6f1c2e4-0000-4000-8000-000000000000', is_bot: true, name: 'Constant' } }));
app.post('/floor', async (request, reply) => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  const row = m ? (byHash.get(sha(m[1]!)) as Record<string, unknown> | undefined) : undefined;
  if (!row || row.status !== 'active') return reply.code(401).send({ ok: false, error_code: 401 });
  return {
    ok: true,
    result: { id: row.id, is_bot: true, name: row.name, username: row.username, supports_inline_queries: row.supports_inline_queries === 1, can_join_groups: row.can_join_groups === 1 },
  };
});
await app.listen({ host: '127.0.0.1', port: 0 });
const httpPort = (app.server.address() as { port: number }).port;

const server = new grpc.Server();
const identity = (b: Buffer) => b;
server.addService({
  Echo: { path: '/bench.Echo/Echo', requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity },
} as grpc.ServiceDefinition, {
  Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => callback(null, call.request),
});
const grpcPort = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));

process.stdout.write(`${JSON.stringify({ http: `http://127.0.0.1:${httpPort}`, grpc: `127.0.0.1:${grpcPort}`, token })}\n`);
process.on('SIGTERM', () => process.exit(0));
