/**
 * The baselines bench:gateway measures the service against, in a process of their
 * own (so that its CPU time is theirs alone). Prints one JSON line when listening:
 * { http, grpc, token, jwt, botId } (the floors' bot token, account JWT and bot id).
 *
 *   GET  /const  raw Fastify, a constant JSON body: the HTTP stack's limit here.
 *   POST /floor  what getMe cannot do without: Fastify, SHA-256 of the bearer, the bot
 *                found by a prepared better-sqlite3 lookup by token hash and kept for a
 *                second (as the service keeps a verified principal), the row as JSON.
 *   GET  /floor/my  what GET /bots/my (6 bots) cannot do without: Fastify, the account
 *                JWT's verified principal kept by its text (verified with jose once), one
 *                page of the account's bots (and a count when the page is full), the rows
 *                as the same JSON the service writes (the same fields, about 3 KB).
 *   GET  /floor/my/:id  the same for GET /bots/my/{id}: the bot by id and owner, and its
 *                webhook when it is in webhook mode (on MySQL in the same statement), as
 *                the service's JSON.
 *   POST /floor/send  what sendMessage cannot do without (see its code below: the chat
 *                checked, the message stored, the feed row written, the bus told: on SQLite
 *                from the commit, on MySQL/MariaDB by an outbox row relayed; to Kafka when
 *                BASELINE_KAFKA_BROKERS names brokers, as the service there).
 *   POST /floor/updates  what getUpdates (timeout 0, nothing pending) cannot do without:
 *                the kept principal, the bot's polling state read, the offset confirmed,
 *                the pending updates read when there may be some, the same JSON.
 *   POST /floor/webhook-info  the same for getWebhookInfo: the bot's state, its webhook
 *                and its pending count read, the same JSON.
 *                These five read and write on SQLite (better-sqlite3, prepared statements,
 *                in this process's file), or on MySQL/MariaDB (mysql2) when
 *                BASELINE_DATABASE_URL names a database there: the same tables, indexes and
 *                rows in InnoDB, hand-written statements as a raw client would send them.
 *   gRPC /bench.Echo/Echo  a raw grpc-js unary echo (bytes in, the same bytes out).
 *   gRPC /botplatform.v1.RuntimeService/GetMe  what gRPC getMe cannot do without: grpc-js,
 *                the generated protobuf codec, the bearer's principal kept by SHA-256.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import Database from 'better-sqlite3';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { jwtVerify, SignJWT } from 'jose';
import { EventEmitter } from 'node:events';
import { Kafka, logLevel } from 'kafkajs';
// kafkajs's 1 ms timer loop on every idle broker connection, stopped as the service stops it:
// a floor spends nothing a raw client need not.
import '../src/bus/kafkajs-idle-fix.js';
import { createGroupCommit } from '../src/group-commit.js';
import { outgoingText } from '../src/messages/formatted.js';
import { FEED_PARTITIONS, feedPartitionOf } from '../src/storage/feed-repo.js';
import { RuntimeServiceService, type GetMeRequest, type GetMeResponse } from '../src/gen/botplatform/v1/runtime_service.js';

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

/**
 * BASELINE_DATABASE_URL (MySQL/MariaDB): the floors of the reading calls and sendMessage
 * do their database work there (getMe's keeps its bot for a second: it stays on SQLite).
 * The reading floors share one mysql2 pool of the service's size (DATABASE_POOL_MAX's
 * default, 10), their statements sent as text (query(), as the service sends them), one
 * statement and round trip per read, rows as arrays: a raw client's way.
 * BENCH_FLOOR_SHARED_READS=1: the identical reads asked in one event-loop turn share one
 * statement, sent after the turn, as the service's driver shares them. The bench's
 * requests to a call are all alike (one account, one bot), so under its 32 connections
 * the service sends one statement for several requests (GET /bots/my: about one for 14),
 * which a raw client does not.
 */
const mysqlUrl = process.env.BASELINE_DATABASE_URL;
const mysql = mysqlUrl ? (await import('mysql2')).default : undefined;
const readPool = mysql?.createPool({ uri: mysqlUrl, supportBigNumbers: true, connectionLimit: 10 });
/** One statement on the reading floors' pool: its result (rows as arrays for a select). */
const myQuery = <R = unknown>(sql: string, values: unknown[] = [], rowsAsArray = false) => new Promise<R>((resolve, reject) =>
  readPool!.query({ sql, rowsAsArray }, values, (err, result) => (err ? reject(err) : resolve(result as R))));
/** The reads asked in this turn by text and values, when they are shared: their statement's callers. */
let asked = new Map<string, { sql: string; values: unknown[]; waiting: { resolve: (rows: unknown[]) => void; reject: (err: unknown) => void }[] }>();
function sendAsked() {
  const reads = asked;
  asked = new Map();
  for (const r of reads.values()) {
    myQuery<unknown[]>(r.sql, r.values, true).then((rows) => { for (const w of r.waiting) w.resolve(rows); }, (err) => { for (const w of r.waiting) w.reject(err); });
  }
}
/** A select's rows, each an array of its columns' values (shared with this turn's identical reads when BENCH_FLOOR_SHARED_READS=1). */
const myRows: <R extends unknown[]>(sql: string, values: unknown[]) => Promise<R[]> = process.env.BENCH_FLOOR_SHARED_READS === '1'
  ? <R extends unknown[]>(sql: string, values: unknown[]) => new Promise<R[]>((resolve, reject) => {
    const key = `${sql}\0${values.join('\0')}`;
    let read = asked.get(key);
    if (!read) {
      if (asked.size === 0) setImmediate(sendAsked);
      asked.set(key, (read = { sql, values, waiting: [] }));
    }
    read.waiting.push({ resolve: resolve as (rows: unknown[]) => void, reject });
  })
  : <R extends unknown[]>(sql: string, values: unknown[]) => myQuery<R[]>(sql, values, true);

const app = Fastify({ logger: false });
app.get('/const', async () => ({ ok: true, result: { id: 'a6f1c2e4-0000-4000-8000-000000000000', is_bot: true, name: 'Constant' } }));
/** Bots by token hash as read, kept for a second (the service keeps a verified principal AUTH_CACHE_TTL, 1 s). */
const keptRows = new Map<string, { row: Record<string, unknown> | undefined; until: number }>();
app.post('/floor', async (request, reply) => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  let row: Record<string, unknown> | undefined;
  if (m) {
    const hash = sha(m[1]!);
    const kept = keptRows.get(hash);
    if (kept && kept.until > Date.now()) row = kept.row;
    else {
      row = byHash.get(hash) as Record<string, unknown> | undefined;
      if (row) keptRows.set(hash, { row, until: Date.now() + 1000 });
    }
  }
  if (!row || row.status !== 'active') return reply.code(401).send({ ok: false, error_code: 401 });
  return {
    ok: true,
    result: { id: row.id, is_bot: true, name: row.name, username: row.username, supports_inline_queries: row.supports_inline_queries === 1, can_join_groups: row.can_join_groups === 1 },
  };
});
// The console floors: bots as the bench seeds them (5 applications and one approved bot),
// the columns the service's bots table has for what the answer shows.
db.exec(`create table console_bots (id text primary key, owner_id text not null, name text not null, username text not null unique,
  description text, avatar text, scopes text not null, review_status text not null, status text not null, token_prefix text,
  short_description text, about text, cover_url text, links text not null, contact text, supports_inline_queries integer not null,
  friend_request_mode text not null, group_privacy integer not null, can_join_groups integer not null, command_menu text not null,
  delivery_mode text not null, review_reason text, created_at integer not null, updated_at integer not null)`);
db.exec('create index console_bots_by_owner on console_bots (owner_id, created_at)');
db.exec('create table console_webhooks (bot_id text primary key, url text not null, created_at integer not null)');
const addBot = db.prepare(`insert into console_bots values (?, ?, ?, ?, null, null, '["send","receive"]', ?, ?, ?, null, null, null, '[]', null,
  0, 'manual', 1, 1, '[]', 'polling', null, ?, ?)`);
const owner = 'floor-account';
/** The seeded bots' values for addBot (the same rows in MySQL/MariaDB when the floors read there). */
const consoleSeeds: unknown[][] = [];
for (let o = 0; o < 20; o++) {
  for (let i = 0; i < 6; i++) {
    const id = `bot_${crypto.randomBytes(15).toString('base64url').replace(/[-_]/g, 'x').slice(0, 20)}`;
    const mine = o === 0;
    const approved = mine && i === 5;
    const at = Date.now() + i;
    consoleSeeds.push([id, mine ? owner : `account-${o}`, approved ? 'Bench bot' : `Bench ${i}`, `floor_bot_${o}_${i}`,
      approved ? 'approved' : 'pending', approved ? 'active' : 'inactive', approved ? 'sbot_a1b2c3d' : null, at, at]);
  }
}
for (const values of consoleSeeds) addBot.run(...values);
const [approvedId] = db.prepare("select id from console_bots where owner_id = ? and review_status = 'approved'").raw().get(owner) as [string];
// Each row as one JSON array of its values (json_array), as the service reads bots: for rows
// this wide, cheaper than the driver building each row's object key by key.
const columns = ['id', 'owner_id', 'name', 'username', 'description', 'avatar', 'scopes', 'review_status', 'status', 'token_prefix',
  'short_description', 'about', 'cover_url', 'links', 'contact', 'supports_inline_queries', 'friend_request_mode', 'group_privacy',
  'can_join_groups', 'command_menu', 'delivery_mode', 'review_reason', 'created_at', 'updated_at'] as const;
const asArray = `json_array(${columns.join(', ')})`;
const page = db.prepare(`select ${asArray} from console_bots where owner_id = ? order by created_at desc, id desc limit 20`).pluck();
const countOf = db.prepare('select count(*) from console_bots where owner_id = ?').pluck();
const byOwnerAndId = db.prepare(`select ${asArray} from console_bots where owner_id = ? and id = ?`).pluck();
const webhookOf = db.prepare('select url from console_webhooks where bot_id = ?');
const jwtKey = crypto.randomBytes(32);
const jwt = await new SignJWT({}).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setSubject(owner).setIssuedAt().setExpirationTime('1h').sign(jwtKey);
const principals = new Map<string, { sub: string; until: number }>();
/** The account of a bearer JWT: verified once, then kept by its text until it expires (as the service keeps it). */
async function accountOf(authorization: string | undefined): Promise<string | undefined> {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!m) return undefined;
  const kept = principals.get(m[1]!);
  if (kept && kept.until > Date.now()) return kept.sub;
  try {
    const { payload } = await jwtVerify(m[1]!, jwtKey, { algorithms: ['HS256'] });
    principals.set(m[1]!, { sub: payload.sub!, until: payload.exp! * 1000 });
    return payload.sub;
  } catch {
    return undefined;
  }
}
/** Each column's index in a row's array. */
const I = Object.fromEntries(columns.map((c, i) => [c, i])) as Record<(typeof columns)[number], number>;
/** A bot as the console writes it (no bot of the floors' is in webhook mode: none is disabled). */
const botJson = (v: any[], webhook?: unknown) => ({
  id: v[I.id], name: v[I.name], username: v[I.username],
  ...(v[I.description] !== null && { description: v[I.description] }), ...(v[I.avatar] !== null && { avatar: v[I.avatar] }),
  scopes: JSON.parse(v[I.scopes]), review_status: v[I.review_status], status: v[I.status], has_token: v[I.token_prefix] !== null,
  token_prefix: v[I.token_prefix], ...(v[I.short_description] !== null && { short_description: v[I.short_description] }),
  ...(v[I.about] !== null && { about: v[I.about] }), ...(v[I.cover_url] !== null && { cover_url: v[I.cover_url] }),
  links: JSON.parse(v[I.links]), contact: v[I.contact] === null ? null : JSON.parse(v[I.contact]),
  supports_inline_queries: v[I.supports_inline_queries] === 1, friend_request_mode: v[I.friend_request_mode],
  group_privacy: v[I.group_privacy] === 1, can_join_groups: v[I.can_join_groups] === 1, webhook: webhook ?? null,
  command_menu: JSON.parse(v[I.command_menu]), delivery_mode: v[I.delivery_mode],
  ...(v[I.review_reason] !== null && { review_reason: v[I.review_reason] }), owner_id: v[I.owner_id],
  created_at: new Date(v[I.created_at]).toISOString(), updated_at: new Date(v[I.updated_at]).toISOString(), webhook_disabled: false,
});
/** GET /bots/my's answer: the page's bots (rows as arrays of `columns`) and the account's total. */
const listJson = (rows: unknown[][], total: number) =>
  JSON.stringify({ items: rows.map((v) => botJson(v)), pagination: { page: 1, limit: 20, total, has_more: total > 20 } });
/** GET /bots/my/{id}'s answer: the bot itself (the route's response_body), with its webhook's url when it has one. */
const detailJson = (row: unknown[], url: string | null | undefined) => JSON.stringify(botJson(row, url != null ? { url } : undefined));
if (mysql) {
  // On MySQL/MariaDB the same tables (InnoDB), index and rows, each row again as one JSON
  // array (JSON_ARRAY: about 15% less of the client's CPU than mysql2 making 24 values a
  // row, which the service does there). GET /bots/my: the page (the count only when the
  // page is full), one statement as the service's. GET /bots/my/{id}: the bot by owner and
  // id and its webhook in one statement (a left join); the service sends two, one after
  // the other (the bot, then its webhook).
  await myQuery(`create table console_bots (id varchar(40) primary key, owner_id varchar(64) not null, name varchar(128) not null,
    username varchar(64) not null unique, description text, avatar text, scopes text not null, review_status varchar(16) not null,
    status varchar(16) not null, token_prefix varchar(32), short_description text, about text, cover_url text, links text not null,
    contact text, supports_inline_queries tinyint not null, friend_request_mode varchar(16) not null, group_privacy tinyint not null,
    can_join_groups tinyint not null, command_menu text not null, delivery_mode varchar(16) not null, review_reason text,
    created_at bigint not null, updated_at bigint not null, index console_bots_by_owner (owner_id, created_at)) engine=InnoDB`);
  await myQuery('create table console_webhooks (bot_id varchar(40) primary key, url text not null, created_at bigint not null) engine=InnoDB');
  await myQuery(`insert into console_bots values ${consoleSeeds.map(() => `(?, ?, ?, ?, null, null, '["send","receive"]', ?, ?, ?, null, null, null, '[]', null,
    0, 'manual', 1, 1, '[]', 'polling', null, ?, ?)`).join(', ')}`, consoleSeeds.flat());
  const pageSql = `select ${asArray} from console_bots where owner_id = ? order by created_at desc, id desc limit 20`;
  const countSql = 'select count(*) from console_bots where owner_id = ?';
  const detailSql = `select json_array(${columns.map((c) => `b.${c}`).join(', ')}), w.url from console_bots b
    left join console_webhooks w on w.bot_id = b.id where b.owner_id = ? and b.id = ?`;
  /** A row's JSON array: mysql2 parses a JSON column itself (MariaDB marks JSON_ARRAY's as JSON), or its text. */
  const arrayOf = (v: unknown) => (typeof v === 'string' ? JSON.parse(v) : v) as unknown[];
  app.get('/floor/my', async (request, reply) => {
    const account = await accountOf(request.headers.authorization);
    if (!account) return reply.code(401).send({ error: { code: 401 } });
    const rows = (await myRows<[unknown]>(pageSql, [account])).map((r) => arrayOf(r[0]));
    // As the service: a first page that is not full is the whole list.
    const total = rows.length < 20 ? rows.length : Number((await myRows<[number]>(countSql, [account]))[0]![0]);
    return reply.type('application/json; charset=utf-8').send(listJson(rows, total));
  });
  app.get<{ Params: { id: string } }>('/floor/my/:id', async (request, reply) => {
    const account = await accountOf(request.headers.authorization);
    if (!account) return reply.code(401).send({ error: { code: 401 } });
    const [found] = await myRows<[unknown, string | null]>(detailSql, [account, request.params.id]);
    if (found === undefined) return reply.code(404).send({ error: { code: 404 } });
    return reply.type('application/json; charset=utf-8').send(detailJson(arrayOf(found[0]), found[1]));
  });
} else {
  app.get('/floor/my', async (request, reply) => {
    const account = await accountOf(request.headers.authorization);
    if (!account) return reply.code(401).send({ error: { code: 401 } });
    const rows = (page.all(account) as string[]).map((text) => JSON.parse(text) as unknown[]);
    // As the service: a first page that is not full is the whole list.
    const total = rows.length < 20 ? rows.length : (countOf.get(account) as number);
    return reply.type('application/json; charset=utf-8').send(listJson(rows, total));
  });
  app.get<{ Params: { id: string } }>('/floor/my/:id', async (request, reply) => {
    const account = await accountOf(request.headers.authorization);
    if (!account) return reply.code(401).send({ error: { code: 401 } });
    const text = byOwnerAndId.get(account, request.params.id) as string | undefined;
    if (text === undefined) return reply.code(404).send({ error: { code: 404 } });
    const row = JSON.parse(text) as unknown[];
    // As the service: a bot has a webhook only in webhook mode.
    const hook = row[I.delivery_mode] === 'webhook' ? webhookOf.get(row[I.id]) as { url: string } | undefined : undefined;
    return reply.type('application/json; charset=utf-8').send(detailJson(row, hook?.url));
  });
}

// The floor of sendMessage: what a send cannot do without. The bearer's principal kept
// by its SHA-256 (as the service keeps verified principals), the chat checked (it must
// have written to the bot), and the message stored with the bot's next message id: the
// sends that arrive together share one transaction (begun after the current event-loop
// turn, one at a time, as the service's group commit): the bots' rows locked, the chats
// read, the counters set, the messages inserted, in as many statements. On SQLite
// (better-sqlite3, prepared) in this process's file; on MySQL/MariaDB (mysql2, one
// connection, the same hand-written statements a raw client would send) in the database
// BASELINE_DATABASE_URL names: there the floor's CPU less raw Fastify's is what the
// database costs a send on the client's side. A send also reaches the platform's
// messaging services, in the same transaction: a row of the outbound feed at its chat's
// partition's next seq (the partition's row read and advanced) and, on MySQL/MariaDB, an
// outbox row (the bus's message) that a relay reads after the commit, publishes and
// deletes: to Kafka with BASELINE_KAFKA_BROKERS (a raw kafkajs producer, as the service's
// bus sends: one batch a round, key the bot, acks from all replicas, a topic of 8
// partitions), which the service on MariaDB + Kafka must do (the interface's
// botplatform.messages); else to an in-process emitter. On SQLite, as the embedded service
// (whose bus is the in-process one), no outbox row: each commit's messages are published
// from it. The text is parsed as the service parses it (entities detected: the service's
// own outgoingText).
interface Send { botId: string; chatId: number; text: string }
interface Sender { username: string; name: string; lastMessageId: number }
const sendPrincipals = new Map<string, { botId: string }>();
const sendBotId = crypto.randomUUID();
sendPrincipals.set(sha(token), { botId: sendBotId });
/** Stores one batch in one transaction: for each send, its message as JSON, or undefined if its chat is unknown. */
let storeBatch: (batch: Send[]) => Promise<(string | undefined)[]>;
const chatKeyOf = (botId: string, chatId: number) => `${botId}:${chatId}`;
/**
 * A batch's messages, given each bot's row and the known chats: each send's message
 * (its id the bot's next) as JSON, or undefined; the bots' new last ids; the rows to insert.
 */
function planBatch(batch: Send[], bots: Map<string, Sender>, chats: Map<string, string>) {
  const last = new Map<string, number>();
  const now = Date.now();
  const date = Math.floor(now / 1000);
  const rows: unknown[][] = [];
  const messages = batch.map((m) => {
    const bot = bots.get(m.botId);
    const type = chats.get(chatKeyOf(m.botId, m.chatId));
    if (!bot || !type) return undefined;
    const id = (last.get(m.botId) ?? bot.lastMessageId) + 1;
    last.set(m.botId, id);
    // In the service's order of fields.
    const json = JSON.stringify({ message_id: id, date, chat: { id: m.chatId, type }, from: { id: 7_000_000_001, is_bot: true, username: bot.username, first_name: bot.name }, text: m.text });
    rows.push([m.botId, m.chatId, id, 1, json, now]);
    return json;
  });
  /** Each stored message's bus and feed value, its chat's feed partition. */
  const events = batch.flatMap((m, i) => messages[i] === undefined ? [] : [{
    key: m.botId, chatId: m.chatId, partition: feedPartitionOf(m.botId, m.chatId), payload: `{"bot_id":${JSON.stringify(m.botId)},"message":${messages[i]}}`,
  }]);
  return { messages, last, rows, events, now };
}
/** The feed's places for a batch's events: each partition's next seqs, from its last. */
function feedPlaces(events: { partition: number }[], lastSeqs: Map<number, number>) {
  return events.map((e) => {
    const seq = lastSeqs.get(e.partition)! + 1;
    lastSeqs.set(e.partition, seq);
    return seq;
  });
}
/** The floor's own topic on BASELINE_KAFKA_BROKERS (the service's messages topic is botplatform.messages). */
const FLOOR_MESSAGES_TOPIC = 'bench_floor.messages';
const kafkaBrokers = process.env.BASELINE_KAFKA_BROKERS;
/**
 * Publishes a commit's or a relay round's messages: to Kafka (awaited, as the service's relay
 * awaits its batch), or to an in-process emitter with no subscriber, as the embedded service's bus.
 */
const publish: (messages: { key: string; value: string }[]) => Promise<void> = await (async () => {
  if (!kafkaBrokers) {
    const bus = new EventEmitter();
    const done = Promise.resolve();
    return (messages) => (bus.emit('messages', messages), done);
  }
  const kafka = new Kafka({ clientId: 'bench-floor', brokers: kafkaBrokers.split(','), logLevel: logLevel.WARN });
  const admin = kafka.admin();
  await admin.connect();
  if (!(await admin.listTopics()).includes(FLOOR_MESSAGES_TOPIC)) {
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic: FLOOR_MESSAGES_TOPIC, numPartitions: 8 }] });
  }
  await admin.disconnect();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  return async (messages) => void await producer.sendBatch({ acks: -1, topicMessages: [{ topic: FLOOR_MESSAGES_TOPIC, messages }] });
})();
/** Publishes the outbox after commits, one round at a time, until it is empty. */
function relayOf(round: () => Promise<number>) {
  let running = false;
  let again = false;
  return () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    setImmediate(async () => {
      do {
        again = false;
        while ((await round()) > 0);
      } while (again);
      running = false;
    });
  };
}
if (mysql) {
  const conn = mysql.createConnection({ uri: mysqlUrl, supportBigNumbers: true });
  const q = <R>(sql: string, values: unknown[] = []) =>
    new Promise<R>((resolve, reject) => conn.query(sql, values, (err, rows) => (err ? reject(err) : resolve(rows as R))));
  await q(`create table send_bots (id varchar(40) primary key, username varchar(64) not null, name varchar(128) not null,
    last_message_id bigint not null) engine=InnoDB`);
  await q('create table send_chats (bot_id varchar(40) not null, chat_id bigint not null, type varchar(16) not null, primary key (bot_id, chat_id)) engine=InnoDB');
  await q(`create table send_messages (bot_id varchar(40) not null, chat_id bigint not null, message_id bigint not null, outbound tinyint not null,
    payload mediumtext, created_at bigint not null, primary key (bot_id, chat_id, message_id)) engine=InnoDB`);
  await q('create table send_outbox (id bigint auto_increment primary key, topic varchar(64) not null, msg_key varchar(64) not null, payload mediumtext not null, created_at bigint not null) engine=InnoDB');
  await q('create table send_feed_partitions (partition_no int primary key, last_seq bigint not null) engine=InnoDB');
  await q(`create table send_feed (partition_no int not null, seq bigint not null, bot_id varchar(40) not null, chat_id bigint not null,
    payload mediumtext not null, created_at bigint not null, primary key (partition_no, seq)) engine=InnoDB`);
  await q(`insert into send_feed_partitions values ${Array.from({ length: FEED_PARTITIONS }, (_, p) => `(${p}, 0)`).join(', ')}`);
  await q('insert into send_bots values (?, ?, ?, 0)', [sendBotId, 'floor_bot', 'Floor bot']);
  await q("insert into send_chats values (?, 4242, 'private')", [sendBotId]);
  const relay = relayOf(async () => {
    const rows = await q<{ id: number; topic: string; msg_key: string; payload: string }[]>('SELECT id, topic, msg_key, payload FROM send_outbox ORDER BY id LIMIT 500');
    if (rows.length === 0) return 0;
    await publish(rows.map((r) => ({ key: r.msg_key, value: r.payload })));
    await q(`DELETE FROM send_outbox WHERE id IN (${rows.map(() => '?').join(', ')})`, rows.map((r) => r.id));
    return rows.length;
  });
  storeBatch = async (batch) => {
    const botIds = [...new Set(batch.map((m) => m.botId))].sort();
    const pairs = [...new Map(batch.map((m) => [chatKeyOf(m.botId, m.chatId), [m.botId, m.chatId]])).values()];
    await q('START TRANSACTION');
    try {
      const botRows = await q<{ id: string; username: string; name: string; last_message_id: number }[]>(
        `SELECT id, username, name, last_message_id FROM send_bots WHERE id IN (${botIds.map(() => '?').join(', ')}) ORDER BY id FOR UPDATE`, botIds);
      const chatRows = await q<{ bot_id: string; chat_id: number; type: string }[]>(
        `SELECT bot_id, chat_id, type FROM send_chats WHERE (bot_id, chat_id) IN (${pairs.map(() => '(?, ?)').join(', ')})`, pairs.flat());
      const bots = new Map(botRows.map((r) => [r.id, { username: r.username, name: r.name, lastMessageId: Number(r.last_message_id) }]));
      const chats = new Map(chatRows.map((r) => [chatKeyOf(r.bot_id, Number(r.chat_id)), r.type]));
      const { messages, last, rows, events, now } = planBatch(batch, bots, chats);
      if (last.size > 0) {
        const set = [...last];
        await q(`UPDATE send_bots SET last_message_id = CASE id ${set.map(() => 'WHEN ? THEN ?').join(' ')} END WHERE id IN (${set.map(() => '?').join(', ')})`,
          [...set.flat(), ...set.map(([id]) => id)]);
        await q(`INSERT INTO send_messages (bot_id, chat_id, message_id, outbound, payload, created_at) VALUES ${rows.map(() => '(?, ?, ?, ?, ?, ?)').join(', ')}`, rows.flat());
        await q(`INSERT INTO send_outbox (topic, msg_key, payload, created_at) VALUES ${events.map(() => '(?, ?, ?, ?)').join(', ')}`,
          events.flatMap((e) => ['botplatform.messages', e.key, e.payload, now]));
        const held = [...new Set(events.map((e) => e.partition))].sort((a, b) => a - b);
        const heads = await q<{ partition_no: number; last_seq: number }[]>(
          `SELECT partition_no, last_seq FROM send_feed_partitions WHERE partition_no IN (${held.map(() => '?').join(', ')}) ORDER BY partition_no FOR UPDATE`, held);
        const lastSeqs = new Map(heads.map((h) => [h.partition_no, Number(h.last_seq)]));
        const seqs = feedPlaces(events, lastSeqs);
        await q(`UPDATE send_feed_partitions SET last_seq = CASE partition_no ${held.map(() => 'WHEN ? THEN ?').join(' ')} END WHERE partition_no IN (${held.map(() => '?').join(', ')})`,
          [...held.flatMap((p) => [p, lastSeqs.get(p)]), ...held]);
        await q(`INSERT INTO send_feed (partition_no, seq, bot_id, chat_id, payload, created_at) VALUES ${events.map(() => '(?, ?, ?, ?, ?, ?)').join(', ')}`,
          events.flatMap((e, i) => [e.partition, seqs[i], e.key, e.chatId, e.payload, now]));
      }
      await q('COMMIT');
      if (events.length > 0) relay();
      return messages;
    } catch (err) {
      await q('ROLLBACK').catch(() => {});
      throw err;
    }
  };
} else {
  db.exec('create table send_bots (id text primary key, username text not null, name text not null, last_message_id integer not null)');
  db.exec('create table send_chats (bot_id text not null, chat_id integer not null, type text not null, primary key (bot_id, chat_id))');
  db.exec(`create table send_messages (bot_id text not null, chat_id integer not null, message_id integer not null, outbound integer not null,
    payload text, created_at integer not null, primary key (bot_id, chat_id, message_id))`);
  db.exec('create table send_feed_partitions (partition_no integer primary key, last_seq integer not null)');
  db.exec(`create table send_feed (partition_no integer not null, seq integer not null, bot_id text not null, chat_id integer not null,
    payload text not null, created_at integer not null, primary key (partition_no, seq))`);
  for (let p = 0; p < FEED_PARTITIONS; p++) db.prepare('insert into send_feed_partitions values (?, 0)').run(p);
  db.prepare('insert into send_bots values (?, ?, ?, 0)').run(sendBotId, 'floor_bot', 'Floor bot');
  db.prepare("insert into send_chats values (?, 4242, 'private')").run(sendBotId);
  const headOf = db.prepare('select last_seq from send_feed_partitions where partition_no = ?').pluck();
  const setHead = db.prepare('update send_feed_partitions set last_seq = ? where partition_no = ?');
  const addFeed = db.prepare('insert into send_feed values (?, ?, ?, ?, ?, ?)');
  const botOf = db.prepare('select username, name, last_message_id from send_bots where id = ?');
  const chatOf = db.prepare('select type from send_chats where bot_id = ? and chat_id = ?').pluck();
  const setLast = db.prepare('update send_bots set last_message_id = ? where id = ?');
  const addMessage = db.prepare('insert into send_messages values (?, ?, ?, ?, ?, ?)');
  const store = db.transaction((batch: Send[]) => {
    const bots = new Map<string, Sender>();
    for (const id of new Set(batch.map((m) => m.botId))) {
      const r = botOf.get(id) as { username: string; name: string; last_message_id: number } | undefined;
      if (r) bots.set(id, { username: r.username, name: r.name, lastMessageId: r.last_message_id });
    }
    const chats = new Map<string, string>();
    for (const m of batch) {
      const key = chatKeyOf(m.botId, m.chatId);
      if (chats.has(key)) continue;
      const type = chatOf.get(m.botId, m.chatId) as string | undefined;
      if (type) chats.set(key, type);
    }
    const { messages, last, rows, events, now } = planBatch(batch, bots, chats);
    for (const [id, n] of last) setLast.run(n, id);
    for (const row of rows) addMessage.run(...row);
    const held = [...new Set(events.map((e) => e.partition))];
    const lastSeqs = new Map(held.map((p) => [p, headOf.get(p) as number]));
    const seqs = feedPlaces(events, lastSeqs);
    for (const p of held) setHead.run(lastSeqs.get(p), p);
    events.forEach((e, i) => addFeed.run(e.partition, seqs[i], e.key, e.chatId, e.payload, now));
    return { messages, events };
  });
  storeBatch = async (batch) => {
    const { messages, events } = store.immediate(batch);
    if (events.length > 0) void publish(events.map((e) => ({ key: e.key, value: e.payload })));
    return messages;
  };
}
// One batch at a time, begun after the current event-loop turn: the service's group commit.
const sends = createGroupCommit<Send, string | undefined>(storeBatch, { gather: 'turn' });
app.post<{ Body: { chat_id?: unknown; text?: unknown } }>('/floor/send', async (request, reply) => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
  const principal = m ? sendPrincipals.get(sha(m[1]!)) : undefined;
  if (!principal) return reply.code(401).send({ ok: false, error_code: 401 });
  const { chat_id: chatId, text } = request.body ?? {};
  if (typeof chatId !== 'number' || !Number.isSafeInteger(chatId) || chatId === 0 || typeof text !== 'string' || text.length === 0 || text.length > 4096) {
    return reply.code(400).send({ ok: false, error_code: 400 });
  }
  const parsed = outgoingText(text, { entities: [], parsedMaxLength: 4096, field: 'text', entitiesField: 'entities' });
  const [message] = await sends.write([{ botId: principal.botId, chatId, text: parsed.text }]);
  if (!message) return reply.code(400).send({ ok: false, error_code: 400, description: 'chat not found' });
  return reply.type('application/json; charset=utf-8').send(`{"ok":true,"result":${message}}`);
});

// The floors of getUpdates (timeout 0, nothing pending) and getWebhookInfo, for the send
// floor's bot: the bearer's principal kept by its SHA-256 (as the service keeps verified
// principals), the request's fields checked, the bot's rows read, and the same JSON as the
// service's answer. getUpdates reads the bot's polling state (delivery mode, newest
// update_seq), confirms the offset (deletes what is below it, once: as the service, a
// confirmation already made in this process is not made again), and reads the pending
// updates only when the state says there may be some: with nothing pending, one read, as
// the service's. getWebhookInfo reads the bot's delivery mode and allowed updates, its
// webhook (none) and its pending count: on SQLite three prepared statements; on
// MySQL/MariaDB one (the bot left-joined to its webhook, the count a subquery), where the
// service sends three in two round trips (the state and the webhook together, then the count).
db.exec('create table poll_bots (id text primary key, delivery_mode text not null, last_update_seq integer not null, allowed_updates text)');
db.exec('create table poll_updates (update_id integer primary key, bot_id text not null, update_seq integer not null, payload text not null)');
db.exec('create index poll_updates_by_bot on poll_updates (bot_id, update_seq)');
db.exec(`create table poll_webhooks (bot_id text primary key, url text not null, max_connections integer not null, allowed_ips text not null,
  last_error_date integer, last_error_message text, disabled_at integer)`);
// As the bench leaves the service's bot: one update received and confirmed, offset 2.
db.prepare("insert into poll_bots values (?, 'polling', 1, null)").run(sendBotId);
const pollState = db.prepare('select delivery_mode, last_update_seq from poll_bots where id = ?').raw();
const pollBelow = db.prepare('select update_id from poll_updates where bot_id = ? and update_seq < ? order by update_seq limit 1000').pluck();
const pollDelete = db.prepare('delete from poll_updates where update_id = ?');
const pollRead = db.prepare('select payload from poll_updates where bot_id = ? and update_seq >= ? order by update_seq limit ?').pluck();
const infoState = db.prepare('select delivery_mode, allowed_updates from poll_bots where id = ?').raw();
const infoWebhook = db.prepare('select url, max_connections, allowed_ips, last_error_date, last_error_message, disabled_at from poll_webhooks where bot_id = ?');
const infoPending = db.prepare('select count(*) from poll_updates where bot_id = ?').pluck();
const confirmedBelow = new Map<string, number>();
const keptBot = (authorization: string | undefined) => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  return m ? sendPrincipals.get(sha(m[1]!)) : undefined;
};
const isInt = (v: unknown, min: number, max: number) => v === undefined || (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max);
type UpdatesBody = { Body: { offset?: unknown; limit?: unknown; timeout?: unknown } | undefined };
/**
 * A getUpdates floor's call: its bot (the kept principal) and fields, or undefined once the
 * refusal is sent (401 without a known bearer, 400 with a field out of its range).
 */
function updatesCall(request: FastifyRequest<UpdatesBody>, reply: FastifyReply) {
  const principal = keptBot(request.headers.authorization);
  if (!principal) return void reply.code(401).send({ ok: false, error_code: 401 });
  const { offset = 0, limit = 100, timeout = 0 } = request.body ?? {};
  if (!(isInt(offset, -(2 ** 31), 2 ** 31 - 1) && isInt(limit, 1, 100) && isInt(timeout, 0, 50))) return void reply.code(400).send({ ok: false, error_code: 400 });
  return { botId: principal.botId, from: offset as number, limit: limit as number };
}
interface PollWebhook { url: string; max_connections: number; allowed_ips: string; last_error_date: number | null; last_error_message: string | null; disabled_at: number | null }
/** getWebhookInfo's answer from the bot's mode and allowed updates, its webhook and its pending count. */
const webhookInfoJson = (mode: string, allowed: string | null, hook: PollWebhook | undefined, pending: number) => JSON.stringify({
  ok: true,
  result: {
    url: hook?.url ?? '', delivery_mode: mode, pending_update_count: pending, max_connections: hook?.max_connections ?? 0,
    allowed_updates: allowed === null ? [] : JSON.parse(allowed),
    ...(hook?.last_error_date != null && { last_error_date: hook.last_error_date }), ...(hook?.last_error_message != null && { last_error_message: hook.last_error_message }),
    platform_egress_ips: [], allowed_ips: hook ? JSON.parse(hook.allowed_ips) : [], disabled: hook?.disabled_at != null,
  },
});
if (mysql) {
  await myQuery('create table poll_bots (id varchar(40) primary key, delivery_mode varchar(16) not null, last_update_seq bigint not null, allowed_updates text) engine=InnoDB');
  await myQuery(`create table poll_updates (update_id bigint primary key, bot_id varchar(40) not null, update_seq bigint not null, payload mediumtext not null,
    index poll_updates_by_bot (bot_id, update_seq)) engine=InnoDB`);
  await myQuery(`create table poll_webhooks (bot_id varchar(40) primary key, url text not null, max_connections int not null, allowed_ips text not null,
    last_error_date bigint, last_error_message text, disabled_at bigint) engine=InnoDB`);
  await myQuery("insert into poll_bots values (?, 'polling', 1, null)", [sendBotId]);
  const stateSql = 'select delivery_mode, last_update_seq from poll_bots where id = ?';
  const belowSql = 'select update_id from poll_updates where bot_id = ? and update_seq < ? order by update_seq limit 1000';
  const readSql = 'select payload from poll_updates where bot_id = ? and update_seq >= ? order by update_seq limit ?';
  const infoSql = `select b.delivery_mode, b.allowed_updates, w.url, w.max_connections, w.allowed_ips, w.last_error_date, w.last_error_message,
    w.disabled_at, (select count(*) from poll_updates u where u.bot_id = b.id) from poll_bots b left join poll_webhooks w on w.bot_id = b.id where b.id = ?`;
  app.post<UpdatesBody>('/floor/updates', async (request, reply) => {
    const call = updatesCall(request, reply);
    if (!call) return reply;
    const { botId, from, limit } = call;
    const [[mode, last]] = (await myRows<[string, number]>(stateSql, [botId])) as [[string, number]];
    if (mode === 'webhook') return reply.code(409).send({ ok: false, error_code: 409 });
    if (from > last + 1) return reply.code(400).send({ ok: false, error_code: 400 });
    if (from > 1 && (confirmedBelow.get(botId) ?? 0) < from) {
      const ids = (await myRows<[number]>(belowSql, [botId, from])).map((r) => r[0]);
      if (ids.length > 0) await myQuery(`delete from poll_updates where update_id in (${ids.map(() => '?').join(', ')})`, ids);
      confirmedBelow.set(botId, from);
    }
    const rows = Math.max(from, 1) <= last ? (await myRows<[string]>(readSql, [botId, from, limit])).map((r) => r[0]) : [];
    return reply.type('application/json; charset=utf-8').send(`{"ok":true,"result":[${rows.join(',')}]}`);
  });
  app.post('/floor/webhook-info', async (request, reply) => {
    const principal = keptBot(request.headers.authorization);
    if (!principal) return reply.code(401).send({ ok: false, error_code: 401 });
    const [[mode, allowed, url, maxConnections, allowedIps, lastErrorDate, lastErrorMessage, disabledAt, pending]] =
      (await myRows(infoSql, [principal.botId])) as [[string, string | null, string | null, number, string, number | null, string | null, number | null, number]];
    const hook = url === null ? undefined : {
      url, max_connections: maxConnections, allowed_ips: allowedIps, last_error_date: lastErrorDate, last_error_message: lastErrorMessage, disabled_at: disabledAt,
    };
    return reply.type('application/json; charset=utf-8').send(webhookInfoJson(mode, allowed, hook, Number(pending)));
  });
} else {
  app.post<UpdatesBody>('/floor/updates', async (request, reply) => {
    const call = updatesCall(request, reply);
    if (!call) return reply;
    const { botId, from, limit } = call;
    const [mode, last] = pollState.get(botId) as [string, number];
    if (mode === 'webhook') return reply.code(409).send({ ok: false, error_code: 409 });
    if (from > last + 1) return reply.code(400).send({ ok: false, error_code: 400 });
    if (from > 1 && (confirmedBelow.get(botId) ?? 0) < from) {
      for (const id of pollBelow.all(botId, from) as number[]) pollDelete.run(id);
      confirmedBelow.set(botId, from);
    }
    const rows = Math.max(from, 1) <= last ? (pollRead.all(botId, from, limit) as string[]) : [];
    return reply.type('application/json; charset=utf-8').send(`{"ok":true,"result":[${rows.join(',')}]}`);
  });
  app.post('/floor/webhook-info', async (request, reply) => {
    const principal = keptBot(request.headers.authorization);
    if (!principal) return reply.code(401).send({ ok: false, error_code: 401 });
    const [mode, allowed] = infoState.get(principal.botId) as [string, string | null];
    const hook = infoWebhook.get(principal.botId) as PollWebhook | undefined;
    const pending = infoPending.get(principal.botId) as number;
    return reply.type('application/json; charset=utf-8').send(webhookInfoJson(mode, allowed, hook, pending));
  });
}

await app.listen({ host: '127.0.0.1', port: 0 });
const httpPort = (app.server.address() as { port: number }).port;

const server = new grpc.Server();
const identity = (b: Buffer) => b;
server.addService({
  Echo: { path: '/bench.Echo/Echo', requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity },
} as grpc.ServiceDefinition, {
  Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => callback(null, call.request),
});
// The floor of gRPC getMe: grpc-js with the generated GetMe codec (protobuf in and out,
// as the service's server decodes and encodes), the bearer from the call's metadata, its
// principal kept by SHA-256 (as the service keeps it; read once by a prepared lookup).
const grpcPrincipals = new Map<string, Record<string, unknown>>();
server.addService({ getMe: RuntimeServiceService.getMe } as unknown as grpc.ServiceDefinition, {
  getMe: (call: grpc.ServerUnaryCall<GetMeRequest, GetMeResponse>, callback: grpc.sendUnaryData<GetMeResponse>) => {
    const [header] = call.metadata.get('authorization');
    const m = /^Bearer\s+(\S+)\s*$/i.exec(typeof header === 'string' ? header : '');
    const hash = m ? sha(m[1]!) : undefined;
    let row = hash === undefined ? undefined : grpcPrincipals.get(hash);
    if (!row && hash !== undefined) {
      row = byHash.get(hash) as Record<string, unknown> | undefined;
      if (row?.status === 'active') grpcPrincipals.set(hash, row);
    }
    if (!row || row.status !== 'active') return callback({ code: grpc.status.UNAUTHENTICATED, details: 'invalid bot token' });
    callback(null, { result: { id: row.id as string, isBot: true, name: row.name as string, username: row.username as string,
      supportsInlineQueries: row.supports_inline_queries === 1, canJoinGroups: row.can_join_groups === 1 } } as GetMeResponse);
  },
});
const grpcPort = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));

process.stdout.write(`${JSON.stringify({ http: `http://127.0.0.1:${httpPort}`, grpc: `127.0.0.1:${grpcPort}`, token, jwt, botId: approvedId })}\n`);
process.on('SIGTERM', () => process.exit(0));
