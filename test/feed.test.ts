/**
 * The outbound feed (InternalService.StreamSentMessages) on the embedded default (SQLite,
 * no bus), over real gRPC: what bots send reaches a consumer in order per chat with the
 * content the send answered; a consumer killed mid-stream and resumed from its cursor
 * loses nothing; a group's committed positions carry over to a new member; two members of
 * a group split the partitions and together see everything; bad requests and missing
 * credentials are refused; shutting down ends open feeds at once. Issue 31: a group of
 * 200 members costs the database the same few statements per tick as a group of one,
 * and every message still reaches exactly one member; members per group and streams
 * per connection are capped (RESOURCE_EXHAUSTED beyond); a commit past a partition's
 * last message is refused instead of silencing the group for good.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { up as repairPositions } from '../migrations/20261227000001_feed_positions_within_heads.js';
import { InternalServiceClient } from '../src/gen/botplatform/v1/internal_service.js';
import { fromServiceError } from '../src/grpc/status-details.js';
import { withMigrationConnection } from '../src/storage/db.js';
import { byChat, openFeed, type FeedConsumer } from './helpers/feed-consumer.js';
import { approvedBot, call, client, startHarness, TEST_INTERNAL_TOKEN, type Harness } from './helpers/harness.js';

/** A client with a connection of its own (grpc-js's clients otherwise share one per address). */
const ownConnection = (address: string) =>
  new InternalServiceClient(address, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });

describe('outbound feed', () => {
  let h: Harness;
  let owner: ReturnType<typeof client>;
  const open: FeedConsumer[] = [];

  beforeAll(async () => {
    // Room for the 200-member group below (the defaults are 100 of each).
    h = await startHarness('in-process', { LIMITS_ENABLED: 'false', FEED_MAX_GROUP_MEMBERS: '200', FEED_MAX_STREAMS_PER_CONNECTION: '250' });
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
    // Partitions deliver side by side, so the first four handled need not be c0..c3; within a
    // partition they are a prefix. The new member gets exactly the rest.
    const rest = first.messages.filter((m) => m.botId === bot.id && !handled.includes(m)).map((m) => m.message!.text).sort();
    expect(rest).toHaveLength(2);
    expect(second.messages.filter((m) => m.botId === bot.id).map((m) => m.message!.text).sort()).toEqual(rest);
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

  it('takes over the partitions of a member whose leases lapsed (its instance died), and waits for live ones', async () => {
    const db = h.apps[0]!.db!;
    const ghost = (partition: number, expiresAt: number) => ({ group_name: 'lapsed', partition_no: partition, member: 'ghost-of-a-dead-instance', expires_at: expiresAt });
    // Partitions 0-14 lapsed a second ago; 15 is held for another minute.
    await db.query(db.knex('feed_leases').insert([...Array.from({ length: 15 }, (_, p) => ghost(p, Date.now() - 1000)), ghost(15, Date.now() + 60_000)]));
    const consumer = feed('lapsed');
    await consumer.waitFor(() => consumer.partitions().length === 15);
    expect(consumer.partitions()).toEqual(Array.from({ length: 15 }, (_, p) => p));
    // Lapsed at last: taken too.
    await db.query(db.knex('feed_leases').where({ group_name: 'lapsed', partition_no: 15 }).update({ expires_at: Date.now() - 1 }));
    await consumer.waitFor(() => consumer.partitions().length === 16);
    consumer.kill();
  });

  it('a group of 200 members costs a few statements per tick, not per member, and each message reaches exactly one member', async () => {
    const chats = Array.from({ length: 32 }, (_, i) => 601 + i);
    const bot = await botWithChats('feed_crowd', chats);
    const members = Array.from({ length: 200 }, () => feed('crowd'));
    // Every member has joined (its first event is its assignment), and the 16 partitions
    // are held, each by one member (200 members: the first 16 in the group's order).
    await members[0]!.waitFor(() => members.every((m) => m.assigned()), 60_000);
    const held = () => members.flatMap((m) => m.partitions());
    await members[0]!.waitFor(() => held().length === 16 && new Set(held()).size === 16, 30_000);

    // The group's upkeep (memberships, leases) while getMe is called for 2 s: one tick a
    // second for the whole process, each a few statements, whatever the number of members.
    // (Before, each member ran its own tick: about 5 statements per member per second.)
    const db = h.apps[0]!.db!;
    let statements = 0;
    const count = (q: { sql?: string }) => {
      if (/feed_members|feed_leases/.test(q.sql ?? '')) statements++;
    };
    db.on('query', count);
    const t0 = Date.now();
    const latencies: number[] = [];
    try {
      while (Date.now() - t0 < 2000) {
        const c0 = performance.now();
        const me = await call(h.url, 'POST', '/api/v1/bots/getMe', { token: bot.token });
        latencies.push(performance.now() - c0);
        expect(me.status).toBe(200);
      }
    } finally {
      db.off('query', count);
    }
    const seconds = (Date.now() - t0) / 1000;
    expect(statements).toBeLessThanOrEqual(10 * (Math.ceil(seconds) + 1));
    // A generous bound (the machine is shared): getMe stays responsive.
    expect(Math.max(...latencies)).toBeLessThan(1000);

    const texts: string[] = [];
    for (let round = 0; round < 2; round++) {
      for (const chat of chats) {
        texts.push(`${chat}-${round}`);
        await send(bot.token, chat, `${chat}-${round}`);
      }
    }
    const mine = (c: FeedConsumer) => c.messages.filter((m) => m.botId === bot.id);
    const received = () => members.flatMap(mine);
    await members[0]!.waitFor(() => received().length >= texts.length);
    await new Promise((r) => setTimeout(r, 300)); // nothing comes twice
    expect(received().map((m) => m.message!.text).sort()).toEqual([...texts].sort());
    expect(new Set(received().map((m) => `${m.partition}/${m.seq}`)).size).toBe(texts.length);
    // Each chat's messages went to the one member holding its partition, in order.
    for (const m of members) for (const [, t] of byChat(mine(m))) expect(t).toEqual([...t].sort((x, y) => Number(x.split('-')[1]) - Number(y.split('-')[1])));
    expect(members.filter((m) => mine(m).length > 0).length).toBeLessThanOrEqual(16);
    for (const m of members) m.kill();
    await Promise.all(members.map((m) => m.ended));
  }, 120_000);

  it('refuses a commit past what a partition holds INVALID_ARGUMENT naming the position; the group goes on receiving', async () => {
    const bot = await botWithChats('feed_past_head', [701, 702, 703, 704]);
    // The attack: every partition "handled" up to 2^53-1, far past anything sent.
    const attack = Array.from({ length: 16 }, (_, partition) => ({ partition, seq: Number.MAX_SAFE_INTEGER }));
    const refused = await commit('past-head', attack).then(() => undefined, (err: grpc.ServiceError) => err);
    expect(refused?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(refused!.details).toMatch(/^positions\[0\]\.seq: /);
    expect(fromServiceError(refused!).details.map((d) => d.field)).toEqual(attack.map((_, i) => `positions[${i}].seq`));

    // The group's next consumer gets what is sent from now on.
    const consumer = feed('past-head');
    await consumer.waitFor(() => consumer.partitions().length === 16);
    for (let i = 0; i < 10; i++) await send(bot.token, 701 + (i % 4), `p${i}`);
    const mine = () => consumer.messages.filter((m) => m.botId === bot.id);
    await consumer.waitFor(() => mine().length === 10);
    expect(mine().map((m) => m.message!.text).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `p${i}`).sort());
    for (const [, t] of byChat(mine())) expect(t).toEqual([...t].sort((x, y) => Number(x.slice(1)) - Number(y.slice(1))));

    // A partition's last message is as far as a commit may go: its seq is accepted, one past it refused.
    const last = new Map<number, number>();
    for (const m of consumer.messages) last.set(m.partition, Math.max(last.get(m.partition) ?? 0, m.seq));
    const [partition, seq] = [...last][0]!;
    await commit('past-head', [...last].map(([p, s]) => ({ partition: p, seq: s })));
    const beyond = await commit('past-head', [{ partition, seq: seq + 1 }]).then(() => undefined, (err: grpc.ServiceError) => err);
    expect(beyond?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(beyond!.details).toBe(`positions[0].seq: is past partition ${partition}'s last message (seq ${seq})`);

    // Positions committed past the heads before this check existed are brought back to them (the migration).
    const db = h.apps[0]!.db!;
    await db.query(db.knex('feed_positions').insert(attack.map((p) => ({ group_name: 'poisoned', partition_no: p.partition, seq: p.seq, updated_at: Date.now() }))));
    await db.query(db.knex('feed_positions').insert({ group_name: 'poisoned-one', partition_no: partition, seq: seq - 1, updated_at: Date.now() }));
    await withMigrationConnection(db, repairPositions);
    const heads = new Map((await db.query(db.knex('feed_partitions').select('partition_no', 'last_seq'))).map((r) => [Number(r.partition_no), Number(r.last_seq)]));
    const repaired = await db.query(db.knex('feed_positions').whereIn('group_name', ['poisoned', 'poisoned-one']).select('group_name', 'partition_no', 'seq'));
    expect(repaired.filter((r) => r.group_name === 'poisoned').map((r) => [Number(r.partition_no), Number(r.seq)]).sort((x, y) => x[0]! - y[0]!))
      .toEqual([...heads].sort((x, y) => x[0] - y[0]));
    expect(repaired.filter((r) => r.group_name === 'poisoned-one').map((r) => Number(r.seq))).toEqual([seq - 1]);
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

  it('refuses streams beyond the cap per connection, and members beyond the cap per group, RESOURCE_EXHAUSTED naming the cap', async () => {
    const own = await startHarness('in-process', { FEED_MAX_GROUP_MEMBERS: '3', FEED_MAX_STREAMS_PER_CONNECTION: '4' });
    const opened: FeedConsumer[] = [];
    const clients: InternalServiceClient[] = [];
    const connection = () => {
      const c = ownConnection(own.grpcAddress);
      clients.push(c);
      return c;
    };
    const open = (group: string, client: InternalServiceClient) => {
      const c = openFeed(own.grpcAddress, group, [], undefined, { client });
      opened.push(c);
      return c;
    };
    /**
     * A stream admitted once the server has seen the one before go: a cancelled stream
     * ends on the client at once, and on the server a moment later.
     */
    const admitted = async (group: string, client: InternalServiceClient) => {
      for (let attempt = 1; ; attempt++) {
        const c = open(group, client);
        const outcome = await Promise.race([
          c.ended.then((s) => s.code),
          c.waitFor(() => c.assigned()).then(() => 'assigned' as const, () => 'not assigned' as const),
        ]);
        if (outcome === 'assigned') return c;
        if (outcome !== grpc.status.RESOURCE_EXHAUSTED || attempt === 50) throw new Error(`not admitted: ${outcome}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    /** How a stream was refused: it ends at once (one still open after 10 s was let in). */
    const refusal = async (c: FeedConsumer) => {
      const status = await Promise.race([c.ended, new Promise<undefined>((r) => setTimeout(r, 10_000))]);
      return status ? { code: status.code, details: status.details } : 'still open';
    };
    try {
      // One connection: 4 streams (any groups), the 5th refused; another connection is not held back.
      const one = connection();
      const first = Array.from({ length: 4 }, (_, i) => open(`conn-${i}`, one));
      await first[0]!.waitFor(() => first.every((c) => c.assigned()));
      expect(await refusal(open('conn-4', one))).toEqual({
        code: grpc.status.RESOURCE_EXHAUSTED,
        details: 'this connection has 4 feed streams open, the most FEED_MAX_STREAMS_PER_CONNECTION allows',
      });
      const other = open('conn-4', connection());
      await other.waitFor(() => other.partitions().length === 16);
      // One ends: its connection may open another.
      first[0]!.kill();
      await first[0]!.ended;
      await admitted('conn-5', one);

      // One group: 3 members, on any connections; the 4th refused until one leaves.
      const members = [open('full', connection()), open('full', connection()), open('full', connection())];
      await members[0]!.waitFor(() => members.every((c) => c.assigned()));
      expect(await refusal(open('full', connection()))).toEqual({
        code: grpc.status.RESOURCE_EXHAUSTED,
        details: 'consumer group "full" has 3 members, the most FEED_MAX_GROUP_MEMBERS allows',
      });
      members[0]!.kill();
      await members[0]!.ended;
      const replacement = await admitted('full', connection());
      const group = [members[1]!, members[2]!, replacement];
      await replacement.waitFor(() => group.flatMap((c) => c.partitions()).length === 16 && new Set(group.flatMap((c) => c.partitions())).size === 16);
    } finally {
      for (const c of opened) c.kill();
      await Promise.all(opened.map((c) => c.ended));
      for (const c of clients) c.close();
      await own.close();
    }
  });
});
