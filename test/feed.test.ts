/**
 * The outbound feed (InternalService.StreamSentMessages) on the embedded default (SQLite,
 * no bus), over real gRPC: what bots send reaches a consumer in order per chat with the
 * content the send answered; a consumer killed mid-stream and resumed from its cursor
 * loses nothing; a group's committed positions carry over to a new member; two members of
 * a group split the partitions and together see everything; bad requests and missing
 * credentials are refused; shutting down ends open feeds at once.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InternalServiceClient } from '../src/gen/botplatform/v1/internal_service.js';
import { fromServiceError } from '../src/grpc/status-details.js';
import { byChat, openFeed, type FeedConsumer } from './helpers/feed-consumer.js';
import { approvedBot, call, client, startHarness, TEST_INTERNAL_TOKEN, type Harness } from './helpers/harness.js';

describe('outbound feed', () => {
  let h: Harness;
  let owner: ReturnType<typeof client>;
  const open: FeedConsumer[] = [];

  beforeAll(async () => {
    h = await startHarness('in-process', { LIMITS_ENABLED: 'false' });
    owner = client(h.url, await h.jwt('feed-owner'));
  });
  afterAll(async () => {
    for (const c of open) c.kill();
    await h?.close();
  });

  const feed = (group: string, start?: { partition: number; seq: number }[]) => {
    const c = openFeed(h.grpcAddress, group, start);
    open.push(c);
    return c;
  };
  /** A bot with chats that have written to it. */
  async function botWithChats(username: string, chats: number[]) {
    const bot = await approvedBot(h, await h.jwt('feed-owner'), username);
    for (const chat of chats) {
      const r = await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'hi', chat_id: chat, from: { id: chat, is_bot: false, username: 'u' } });
      if (r.status !== 201) throw new Error(JSON.stringify(r.body));
    }
    return bot;
  }
  const send = async (token: string, chatId: number, text: string) => {
    const r = await call(h.url, 'POST', '/api/v1/bots/sendMessage', { token, body: { chat_id: chatId, text } });
    if (r.status !== 200) throw new Error(JSON.stringify(r.body));
    return r.body.result;
  };
  const commit = (group: string, positions: { partition: number; seq: number }[]) =>
    new Promise<void>((resolve, reject) => {
      const c = new InternalServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
      c.commitSentMessages({ group, positions }, md, (err) => {
        c.close();
        if (err) reject(err);
        else resolve();
      });
    });

  it('delivers every message bots send, in order per chat, with what the send answered', async () => {
    const consumer = feed('order');
    await consumer.waitFor(() => consumer.partitions().length === 16);
    const a = await botWithChats('feed_order_a', [101, 102, 103]);
    const b = await botWithChats('feed_order_b', [101, 201]);
    const sent: { botId: string; result: Record<string, unknown> }[] = [];
    const expected = new Map<string, string[]>();
    for (let i = 0; i < 6; i++) {
      for (const [bot, chat] of [[a, 101], [a, 102], [b, 101], [a, 103], [b, 201]] as const) {
        const text = `${bot.id.slice(-4)}-${chat}-${i}`;
        sent.push({ botId: bot.id, result: await send(bot.token, chat, text) });
        expected.set(`${bot.id}/${chat}`, [...(expected.get(`${bot.id}/${chat}`) ?? []), text]);
      }
    }
    await consumer.waitFor(() => consumer.messages.length >= sent.length);
    expect(consumer.messages).toHaveLength(sent.length);
    expect(byChat(consumer.messages)).toEqual(expected);
    // Content: the bot and the message exactly as sendMessage answered them.
    for (const s of sent) {
      const got = consumer.messages.find((m) => m.botId === s.botId && m.message!.messageId === s.result.message_id)!;
      expect(got.message).toMatchObject({
        messageId: s.result.message_id, date: s.result.date, text: s.result.text,
        chat: { id: (s.result.chat as { id: number }).id, type: 'private' },
        from: { id: (s.result.from as { id: number }).id, isBot: true, username: (s.result.from as { username: string }).username },
      });
    }
    // Positions count 1, 2, 3... per partition, in arrival order.
    const perPartition = new Map<number, number[]>();
    for (const m of consumer.messages) perPartition.set(m.partition, [...(perPartition.get(m.partition) ?? []), m.seq]);
    for (const seqs of perPartition.values()) expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
  });

  it('a consumer killed mid-stream and resumed from its cursor loses nothing', async () => {
    const bot = await botWithChats('feed_resume', [301, 302, 303, 304]);
    const first = feed('resume');
    await first.waitFor(() => first.partitions().length === 16);
    const texts: string[] = [];
    const sending = (async () => {
      for (let i = 0; i < 60; i++) {
        const text = `r${i}`;
        await send(bot.token, 301 + (i % 4), text);
        texts.push(text);
      }
    })();
    await first.waitFor(() => first.messages.length >= 15);
    first.kill();
    await first.ended;
    const cursor = first.cursor();
    const before = first.messages.filter((m) => m.botId === bot.id);
    await new Promise((r) => setTimeout(r, 200)); // sends go on while no consumer runs
    const second = feed('resume', cursor);
    await sending;
    await second.waitFor(() => before.length + second.messages.filter((m) => m.botId === bot.id).length >= 60);
    const all = [...before, ...second.messages.filter((m) => m.botId === bot.id)];
    // Nothing lost, nothing twice (the cursor said exactly where to go on), and each chat in order.
    expect(all.map((m) => m.message!.text).sort()).toEqual([...texts].sort());
    expect([...byChat(all).values()].every((t) => t.join() === [...t].sort((x, y) => Number(x.slice(1)) - Number(y.slice(1))).join())).toBe(true);
  });

  it('a new member of a group starts after the positions the group committed', async () => {
    const bot = await botWithChats('feed_commit', [401, 402]);
    const first = feed('committed');
    await first.waitFor(() => first.partitions().length === 16);
    for (let i = 0; i < 6; i++) await send(bot.token, 401 + (i % 2), `c${i}`);
    await first.waitFor(() => first.messages.filter((m) => m.botId === bot.id).length === 6);
    const handled = first.messages.filter((m) => m.botId === bot.id).slice(0, 4);
    // Commit what was handled: for each partition, the last seq handled.
    const last = new Map<number, number>();
    for (const m of first.messages) if (handled.includes(m) || m.botId !== bot.id) last.set(m.partition, Math.max(last.get(m.partition) ?? 0, m.seq));
    await commit('committed', [...last].map(([partition, seq]) => ({ partition, seq })));
    first.kill();
    await first.ended;
    const second = feed('committed');
    await second.waitFor(() => second.messages.filter((m) => m.botId === bot.id).length >= 2);
    await new Promise((r) => setTimeout(r, 300));
    expect(second.messages.filter((m) => m.botId === bot.id).map((m) => m.message!.text).sort()).toEqual(['c4', 'c5']);
  });

  it('two consumers of one group split the partitions and together see everything, each chat by one of them', async () => {
    const chats = Array.from({ length: 24 }, (_, i) => 501 + i);
    const bot = await botWithChats('feed_split', chats);
    const a = feed('split');
    await a.waitFor(() => a.partitions().length === 16);
    const b = feed('split');
    await b.waitFor(() => a.partitions().length === 8 && b.partitions().length === 8);
    expect([...a.partitions(), ...b.partitions()].sort((x, y) => x - y)).toEqual(Array.from({ length: 16 }, (_, i) => i));
    for (let round = 0; round < 3; round++) for (const chat of chats) await send(bot.token, chat, `${chat}-${round}`);
    const mine = (c: FeedConsumer) => c.messages.filter((m) => m.botId === bot.id);
    await a.waitFor(() => mine(a).length + mine(b).length >= chats.length * 3);
    const seenA = byChat(mine(a));
    const seenB = byChat(mine(b));
    expect(seenA.size).toBeGreaterThan(0);
    expect(seenB.size).toBeGreaterThan(0);
    for (const chat of chats) {
      const key = `${bot.id}/${chat}`;
      expect(seenA.has(key) !== seenB.has(key)).toBe(true);
      expect(seenA.get(key) ?? seenB.get(key)).toEqual([0, 1, 2].map((r) => `${chat}-${r}`));
    }
    // One leaves: the other takes every partition again and goes on from where the group was.
    b.kill();
    await a.waitFor(() => a.partitions().length === 16);
  });

  it('ends open feeds UNAVAILABLE when the service shuts down, instead of holding the shutdown for its whole timeout', async () => {
    const own = await startHarness('in-process', { SHUTDOWN_TIMEOUT: '30s' });
    const c = openFeed(own.grpcAddress, 'shutdown');
    await c.waitFor(() => c.partitions().length === 16);
    const t0 = Date.now();
    await own.close();
    expect(Date.now() - t0).toBeLessThan(10_000);
    const status = await c.ended;
    expect(status.code).toBe(grpc.status.UNAVAILABLE);
    expect(status.details).toMatch(/shutting down/);
  });

  it('refuses a bad request INVALID_ARGUMENT naming the field, and a missing credential UNAUTHENTICATED', async () => {
    for (const [group, start, field] of [
      ['', [], 'group'],
      ['bad group!', [], 'group'],
      ['ok', [{ partition: 16, seq: 0 }], 'start[0].partition'],
      ['ok', [{ partition: 1, seq: 0 }, { partition: 1, seq: 3 }], 'start[1].partition'],
    ] as const) {
      const c = feed(group, [...start]);
      const status = await c.ended;
      expect(status.code, field).toBe(grpc.status.INVALID_ARGUMENT);
      expect(fromServiceError(Object.assign(new Error(status.details), status) as grpc.ServiceError).details.map((d) => d.field)).toEqual([field]);
    }
    const anonymous = openFeed(h.grpcAddress, 'ok', [], 'not-the-token');
    expect((await anonymous.ended).code).toBe(grpc.status.UNAUTHENTICATED);
    await expect(commit('ok', [])).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
  });
});
