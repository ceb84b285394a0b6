/**
 * The floor of the long poll's wake-up on MariaDB + Kafka across two processes, for
 * bench:updates (BENCH_ONLY=wake with BENCH_DATABASE_URL and BENCH_KAFKA_BROKERS): what
 * waking a poll held by one process for an update ingested by another cannot do without.
 * Run twice, WAKE_FLOOR_ROLE=poll first (it makes the tables, the bot and the topic), then
 * WAKE_FLOOR_ROLE=ingest; each prints one JSON line when ready.
 *
 *   poll:   POST /api/v1/bots/getUpdates  Fastify; the bearer's bot kept by its SHA-256;
 *           the bot's updates from `offset` on (one mysql2 select), answered at once when
 *           there are some, else held until `timeout` seconds or a Kafka message keyed by
 *           the bot arrives, when the select runs again and answers. A kafkajs consumer of a
 *           group of its own from the newest offset, with the service's fan-out settings
 *           (fetch wait 100 ms, its idle fix). Prints { http, botId, token }.
 *   ingest: gRPC botplatform.v1.InternalService/IngestUpdates, the service's own method
 *           (its generated codec): the update stored in one transaction in one round trip
 *           (the bot's sequence advanced, the row inserted), then the call answered and one
 *           empty message keyed by the bot produced (kafkajs, acks all, as the service's
 *           relay). Prints { grpc }.
 *
 * Both take WAKE_FLOOR_DATABASE_URL, WAKE_FLOOR_KAFKA_BROKERS and WAKE_FLOOR_TOPIC (ingest:
 * also WAKE_FLOOR_BOT_ID). No checks beyond the bearer, no outbox, no control signals, no
 * log line: the same clients and idle pattern as the service's measurement, so the
 * difference is the service's.
 */
import crypto from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import Fastify, { type FastifyReply } from 'fastify';
import { Kafka, logLevel } from 'kafkajs';
import mysql from 'mysql2';
import '../src/bus/kafkajs-idle-fix.js';
import { InternalServiceService, type IngestUpdatesRequest, type IngestUpdatesResponse } from '../src/gen/botplatform/v1/internal_service.js';

const role = process.env.WAKE_FLOOR_ROLE;
const topic = process.env.WAKE_FLOOR_TOPIC!;
const kafka = new Kafka({ clientId: `wake-floor-${role}`, brokers: process.env.WAKE_FLOOR_KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
const conn = mysql.createConnection({ uri: process.env.WAKE_FLOOR_DATABASE_URL!, supportBigNumbers: true, multipleStatements: true });
const q = <R>(sql: string, values: unknown[] = []) =>
  new Promise<R>((resolve, reject) => conn.query(sql, values, (err, rows) => (err ? reject(err) : resolve(rows as R))));
const sha = (s: string) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');

if (role === 'poll') {
  await q('create table floor_bots (id varchar(40) primary key, last_seq bigint not null) engine=InnoDB');
  await q('create table floor_updates (bot_id varchar(40) not null, seq bigint not null, payload mediumtext not null, primary key (bot_id, seq)) engine=InnoDB');
  const botId = crypto.randomUUID();
  const token = `sbot_${crypto.randomBytes(30).toString('base64url').replace(/[-_]/g, 'x').slice(0, 40)}`;
  await q('insert into floor_bots values (?, 0)', [botId]);
  const principals = new Map([[sha(token), botId]]);
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 8 }] });
  await admin.disconnect();

  const pending = async (bot: string, offset: number) =>
    (await q<{ payload: string }[]>('select payload from floor_updates where bot_id = ? and seq >= ? order by seq limit 100', [bot, offset])).map((r) => r.payload);
  interface Waiter { offset: number; reply: FastifyReply; timer: NodeJS.Timeout }
  const waiting = new Map<string, Set<Waiter>>();
  const answer = (reply: FastifyReply, rows: string[]) =>
    reply.type('application/json; charset=utf-8').send(`{"ok":true,"result":[${rows.join(',')}]}`);

  const consumer = kafka.consumer({
    groupId: `wake-floor-${crypto.randomUUID()}`, maxWaitTimeInMs: 100, sessionTimeout: 10_000, heartbeatInterval: 1000, rebalanceTimeout: 10_000,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: false });
  const joined = new Promise<void>((r) => consumer.on(consumer.events.GROUP_JOIN, () => r()));
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message }) => {
      const bot = message.key?.toString() ?? '';
      const set = waiting.get(bot);
      if (!set) return;
      for (const w of [...set]) {
        set.delete(w);
        clearTimeout(w.timer);
        answer(w.reply, await pending(bot, w.offset));
      }
    },
  });
  await joined;

  const app = Fastify({ logger: false });
  app.post<{ Body: { offset?: number; timeout?: number } }>('/api/v1/bots/getUpdates', async (request, reply) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    const bot = m ? principals.get(sha(m[1]!)) : undefined;
    if (!bot) return reply.code(401).send({ ok: false, error_code: 401 });
    const offset = Number(request.body?.offset ?? 0);
    const timeout = Number(request.body?.timeout ?? 0);
    // Registered before the read, so a message arriving meanwhile is not missed.
    const set = waiting.get(bot) ?? new Set<Waiter>();
    waiting.set(bot, set);
    const waiter: Waiter = { offset, reply, timer: setTimeout(() => { set.delete(waiter); answer(reply, []); }, timeout * 1000) };
    set.add(waiter);
    const rows = await pending(bot, offset);
    if ((rows.length > 0 || timeout <= 0) && set.delete(waiter)) {
      clearTimeout(waiter.timer);
      return answer(reply, rows);
    }
    reply.raw.once('close', () => { clearTimeout(waiter.timer); set.delete(waiter); });
    return reply;
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  process.stdout.write(`${JSON.stringify({ http: `http://127.0.0.1:${port}`, botId, token })}\n`);
} else {
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  let nextUpdateId = 1;
  const server = new grpc.Server();
  server.addService(InternalServiceService as unknown as grpc.ServiceDefinition, {
    ingestUpdates: (call: grpc.ServerUnaryCall<IngestUpdatesRequest, IngestUpdatesResponse>, callback: grpc.sendUnaryData<IngestUpdatesResponse>) => {
      const u = call.request.updates[0]!;
      const m = u.message!;
      const updateId = nextUpdateId++;
      // The payload names its seq, known only inside the transaction: made there from LAST_INSERT_ID().
      const head = JSON.stringify({ update_id: updateId }).slice(0, -1);
      const message = JSON.stringify({ message_id: m.messageId, date: m.date, chat: { id: m.chat?.id, type: m.chat?.type }, from: { id: m.from?.id, is_bot: false }, text: m.text });
      q<unknown[]>(
        'START TRANSACTION; UPDATE floor_bots SET last_seq = LAST_INSERT_ID(last_seq + 1) WHERE id = ?; '
        + "INSERT INTO floor_updates VALUES (?, LAST_INSERT_ID(), CONCAT(?, ',\"update_seq\":', LAST_INSERT_ID(), ',\"message\":', ?, '}')); "
        + 'SELECT LAST_INSERT_ID() AS seq; COMMIT',
        [u.botId, u.botId, head, message],
      ).then((results) => {
        const seq = Number((results[3] as { seq: number }[])[0]!.seq);
        callback(null, { results: [{ updateId, updateSeq: seq, filtered: false, duplicate: false }] });
        return producer.send({ topic, acks: -1, messages: [{ key: u.botId, value: '' }] });
      }).catch((err) => callback({ code: grpc.status.INTERNAL, details: String(err) }));
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
  process.stdout.write(`${JSON.stringify({ grpc: `127.0.0.1:${port}` })}\n`);
}
process.on('SIGTERM', () => process.exit(0));
