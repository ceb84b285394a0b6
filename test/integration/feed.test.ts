/**
 * The outbound feed on MariaDB + Kafka with two core instances (the integration pass:
 * TEST_DATABASE_URL and TEST_KAFKA_BROKERS): two members of one group, each connected to
 * a different instance, split the partitions through the database's leases; bots send
 * through both instances; together the members see every message, each chat by one of
 * them, in order, with the same content as the Kafka topic botplatform.messages. When
 * one member is killed, the other takes its partitions and a consumer resumed from the
 * killed one's cursor loses nothing.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Kafka, logLevel, type Consumer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../../src/app.js';
import { MESSAGES_TOPIC } from '../../src/bus/topics.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { mintAccountJwt } from '../../src/auth/account-jwt.js';
import { byChat, openFeed, type FeedConsumer } from '../helpers/feed-consumer.js';
import { call, client, createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET, type TestDatabase } from '../helpers/harness.js';
import { until } from '../helpers/until.js';

describe('outbound feed: two core instances on MariaDB + Kafka', () => {
  let a: App;
  let b: App;
  let db: TestDatabase;
  let kafkaConsumer: Consumer;
  const kafkaValues: { bot_id: string; message: Record<string, unknown> }[] = [];
  const consumers: FeedConsumer[] = [];

  beforeAll(async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-feed-'));
    db = await createTestDatabase(dir);
    const env = {
      DATA_DIR: dir, DATABASE_URL: db.url, ...kafkaEnv(), AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', LOG_LEVEL: 'silent', LIMITS_ENABLED: 'false',
    };
    const logger = createLogger('silent');
    a = await startApp(loadConfig(env), logger);
    b = await startApp(loadConfig(env), logger);
    // What the bus carries, to compare with the feed.
    const kafka = new Kafka({ clientId: 'feed-test', brokers: process.env.TEST_KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
    kafkaConsumer = kafka.consumer({ groupId: `feed-test-${crypto.randomUUID()}`, maxWaitTimeInMs: 50 });
    await kafkaConsumer.connect();
    await kafkaConsumer.subscribe({ topic: MESSAGES_TOPIC, fromBeginning: false });
    let joined: () => void;
    const ready = new Promise<void>((r) => (joined = r));
    kafkaConsumer.on(kafkaConsumer.events.GROUP_JOIN, () => joined());
    await kafkaConsumer.run({ eachMessage: async ({ message }) => { kafkaValues.push(JSON.parse(message.value!.toString())); } });
    await ready;
  }, 90_000);
  afterAll(async () => {
    for (const c of consumers) c.kill();
    await kafkaConsumer?.disconnect();
    await b?.close();
    await a?.close();
    await db?.drop();
  });

  const feedOn = (app: App, group: string, start?: { partition: number; seq: number }[]) => {
    const c = openFeed(`127.0.0.1:${app.grpcPort}`, group, start);
    consumers.push(c);
    return c;
  };

  it('two members on two instances split the chats, see everything in order with the bus content, and survive one being killed', async () => {
    const jwt = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'feed-owner' });
    const created = await client(a.httpUrl!, jwt).post('/api/v1/bots/applications', { name: 'Feed', username: 'feed_multi_bot' });
    const botId = created.body.id as string;
    await client(a.httpUrl!, await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] })).post(`/api/v1/admin/bots/${botId}/approve`);
    const token = (await client(b.httpUrl!, jwt).get(`/api/v1/bots/my/${botId}`)).body.one_time_token as string;
    const chats = Array.from({ length: 16 }, (_, i) => 901 + i);
    for (const chat of chats) {
      await client(a.httpUrl!, jwt).post(`/api/v1/bots/my/${botId}/test-updates`, { text: 'hi', chat_id: chat, from: { id: chat, is_bot: false } });
    }

    const m1 = feedOn(a, 'multi');
    await m1.waitFor(() => m1.partitions().length === 16);
    const m2 = feedOn(b, 'multi');
    await m2.waitFor(() => m1.partitions().length === 8 && m2.partitions().length === 8, 20_000);

    const expected = new Map<string, string[]>();
    const send = async (round: number) => {
      for (const [i, chat] of chats.entries()) {
        const text = `${chat}-${round}`;
        const via = i % 2 === 0 ? a : b; // through both instances
        const r = await call(via.httpUrl!, 'POST', '/api/v1/bots/sendMessage', { token, body: { chat_id: chat, text } });
        expect(r.status).toBe(200);
        expected.set(`${botId}/${chat}`, [...(expected.get(`${botId}/${chat}`) ?? []), text]);
      }
    };
    for (let round = 0; round < 3; round++) await send(round);
    const total = () => m1.messages.length + m2.messages.length;
    await m1.waitFor(() => total() >= chats.length * 3, 20_000);
    const s1 = byChat(m1.messages);
    const s2 = byChat(m2.messages);
    expect(s1.size).toBeGreaterThan(0);
    expect(s2.size).toBeGreaterThan(0);
    for (const [key, texts] of expected) {
      expect(s1.has(key) !== s2.has(key), key).toBe(true);
      expect(s1.get(key) ?? s2.get(key)).toEqual(texts);
    }
    // The same content as the bus topic: bot and message, field for field.
    // The topic is shared with every other test running meanwhile: this bot's messages are the ones compared.
    const ours = () => kafkaValues.filter((v) => v.bot_id === botId);
    await until(async () => ours().length, (n) => n >= chats.length * 3, 20_000);
    const feedByKey = new Map([...m1.messages, ...m2.messages].map((m) => [`${m.botId}/${m.message!.chat!.id}/${m.message!.messageId}`, m]));
    expect(ours()).toHaveLength(chats.length * 3);
    for (const v of ours()) {
      const chat = v.message.chat as { id: number; type: string };
      const from = v.message.from as { id: number; is_bot: boolean; username: string; first_name: string };
      const m = feedByKey.get(`${v.bot_id}/${chat.id}/${v.message.message_id}`);
      expect(m?.message).toMatchObject({
        messageId: v.message.message_id, date: v.message.date, text: v.message.text, chat: { id: chat.id, type: chat.type },
        from: { id: from.id, isBot: from.is_bot, username: from.username, firstName: from.first_name },
      });
    }

    // m1 is killed (nothing committed): m2 takes every partition; a consumer resumed from
    // m1's cursor in a group of its own gets only what came after it, and nothing is lost.
    const cursor = m1.cursor();
    const seenBy1 = m1.messages.length;
    m1.kill();
    await m1.ended;
    await m2.waitFor(() => m2.partitions().length === 16, 20_000);
    await send(3);
    const resumed = feedOn(b, 'multi-resumed', [...cursor, ...Array.from({ length: 16 }, (_, p) => p)
      .filter((p) => !cursor.some((c) => c.partition === p)).map((p) => ({ partition: p, seq: Number.MAX_SAFE_INTEGER }))]);
    await resumed.waitFor(() => resumed.partitions().length === 16);
    await m2.waitFor(() => m2.messages.filter((m) => m.message!.text!.endsWith('-3')).length === chats.length, 20_000);
    // Round 3 of m1's former chats reached the resumed consumer, in order after what m1 saw.
    const m1Chats = [...s1.keys()].map((k) => Number(k.split('/')[1]));
    await resumed.waitFor(() => resumed.messages.length >= m1Chats.length, 20_000);
    await new Promise((r) => setTimeout(r, 500)); // and nothing more comes
    const resumedTexts = resumed.messages.map((m) => m.message!.text!);
    expect(resumedTexts.sort()).toEqual(m1Chats.map((c) => `${c}-3`).sort());
    expect(seenBy1).toBe([...s1.values()].flat().length);
  }, 120_000);
});
