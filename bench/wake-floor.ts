/**
 * The floor of the long poll's wake-up, for bench:updates: what waking a waiting poll
 * cannot do without, in a process of its own. Prints one JSON line when listening:
 * { http, grpc, botId, token }.
 *
 *   POST /api/v1/bots/getUpdates  Fastify; the bearer's bot kept by its SHA-256; the
 *        bot's updates from `offset` on (one prepared better-sqlite3 read), answered at
 *        once when there are some, else held until `timeout` seconds or an ingest.
 *   gRPC botplatform.v1.InternalService/IngestUpdates  the service's own method (its
 *        generated codec, so the bench's client is the same): the updates stored in one
 *        transaction (SQLite, WAL, synchronous=NORMAL, as the service's file), each with
 *        its bot's next sequence number; the waiting polls of those bots answered from
 *        the rows just written; then the call's answer.
 *
 * No checks beyond the bearer, no dedupe, no outbox, no log line: the same client and the
 * same idle pattern as the service's measurement, so the difference is the service's.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import Fastify, { type FastifyReply } from 'fastify';
import { InternalServiceService, type IngestUpdatesRequest, type IngestUpdatesResponse } from '../src/gen/botplatform/v1/internal_service.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-bench-wake-floor-'));
const db = new Database(path.join(dir, 'floor.sqlite'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.exec('create table bots (id text primary key, last_seq integer not null)');
db.exec('create table updates (bot_id text not null, seq integer not null, payload text not null, primary key (bot_id, seq))');
const sha = (s: string) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');
const botId = crypto.randomUUID();
const token = `sbot_${crypto.randomBytes(30).toString('base64url').replace(/[-_]/g, 'x').slice(0, 40)}`;
db.prepare('insert into bots values (?, 0)').run(botId);
const principals = new Map([[sha(token), botId]]);

const pending = db.prepare('select payload from updates where bot_id = ? and seq >= ? order by seq limit 100').pluck();
const lastSeq = db.prepare('select last_seq from bots where id = ?').pluck();
const setLast = db.prepare('update bots set last_seq = ? where id = ?');
const insert = db.prepare('insert into updates values (?, ?, ?)');
let nextUpdateId = 1;
/** Stores a batch in one transaction; each update's id and sequence number. */
const store = db.transaction((updates: IngestUpdatesRequest['updates']) => {
  const last = new Map<string, number>();
  const results = updates.map((u) => {
    const seq = (last.get(u.botId) ?? (lastSeq.get(u.botId) as number | undefined) ?? 0) + 1;
    last.set(u.botId, seq);
    const updateId = nextUpdateId++;
    const m = u.message!;
    insert.run(u.botId, seq, JSON.stringify({
      update_id: updateId, update_seq: seq,
      message: { message_id: m.messageId, date: m.date, chat: { id: m.chat?.id, type: m.chat?.type }, from: { id: m.from?.id, is_bot: false }, text: m.text },
    }));
    return { updateId, updateSeq: seq, filtered: false, duplicate: false };
  });
  for (const [id, n] of last) setLast.run(n, id);
  return results;
});

interface Waiter { offset: number; reply: FastifyReply; timer: NodeJS.Timeout }
const waiting = new Map<string, Set<Waiter>>();
const answer = (reply: FastifyReply, rows: string[]) =>
  reply.type('application/json; charset=utf-8').send(`{"ok":true,"result":[${rows.join(',')}]}`);

const app = Fastify({ logger: false });
app.post<{ Body: { offset?: number; timeout?: number; limit?: number } }>('/api/v1/bots/getUpdates', (request, reply) => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  const bot = m ? principals.get(sha(m[1]!)) : undefined;
  if (!bot) return reply.code(401).send({ ok: false, error_code: 401 });
  const offset = Number(request.body?.offset ?? 0);
  const rows = pending.all(bot, offset) as string[];
  const timeout = Number(request.body?.timeout ?? 0);
  if (rows.length > 0 || timeout <= 0) return answer(reply, rows);
  const set = waiting.get(bot) ?? new Set<Waiter>();
  waiting.set(bot, set);
  const waiter: Waiter = { offset, reply, timer: setTimeout(() => { set.delete(waiter); answer(reply, []); }, timeout * 1000) };
  set.add(waiter);
  reply.raw.once('close', () => { clearTimeout(waiter.timer); set.delete(waiter); });
  return reply;
});

const server = new grpc.Server();
server.addService(InternalServiceService as unknown as grpc.ServiceDefinition, {
  ingestUpdates: (call: grpc.ServerUnaryCall<IngestUpdatesRequest, IngestUpdatesResponse>, callback: grpc.sendUnaryData<IngestUpdatesResponse>) => {
    const results = store(call.request.updates);
    for (const id of new Set(call.request.updates.map((u) => u.botId))) {
      const set = waiting.get(id);
      if (!set) continue;
      for (const w of set) {
        clearTimeout(w.timer);
        answer(w.reply, pending.all(id, w.offset) as string[]);
      }
      waiting.delete(id);
    }
    callback(null, { results });
  },
});

await app.listen({ host: '127.0.0.1', port: 0 });
const grpcPort = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
const httpPort = (app.server.address() as { port: number }).port;
process.stdout.write(`${JSON.stringify({ http: `http://127.0.0.1:${httpPort}`, grpc: `127.0.0.1:${grpcPort}`, botId, token })}\n`);
process.on('SIGTERM', () => process.exit(0));
