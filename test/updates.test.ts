/**
 * Updates over real HTTP and gRPC: test updates and internal ingest, getUpdates
 * with offsets, bounds and long polling, the newest-poll-wins rule, delivery modes
 * and their validation, allowed_updates filtering and retention.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InternalServiceClient, type IngestUpdatesResponse, IngestUpdatesRequest } from '../src/gen/botplatform/v1/internal_service.js';
import type { BusMessage } from '../src/bus/bus.js';
import { NO_DELIVERY, UPDATES_TOPIC } from '../src/bus/topics.js';
import { approvedBot, call, client, startHarness, TEST_INTERNAL_TOKEN, type Harness } from './helpers/harness.js';
import { until } from './helpers/until.js';

describe('updates', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  let internal: InternalServiceClient;

  beforeAll(async () => {
    h = await startHarness('in-process', { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8,::1/128', PLATFORM_EGRESS_IPS: '203.0.113.7' });
    ownerJwt = await h.jwt('updates-owner');
    owner = client(h.url, ownerJwt);
    internal = new InternalServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    internal?.close();
    await h?.close();
  });

  const testUpdate = (id: string, text: string, extra: object = {}) => owner.post(`/api/v1/bots/my/${id}/test-updates`, { text, ...extra });
  const poll = (token: string, body: object = {}) => call(h.url, 'POST', '/api/v1/bots/getUpdates', { token, body });
  const ingest = (updates: object[], credential = TEST_INTERNAL_TOKEN) =>
    new Promise<IngestUpdatesResponse>((resolve, reject) => {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${credential}`);
      internal.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates }), md, (err, res) => (err ? reject(err) : resolve(res)));
    });
  const message = (text: string, chatId = 555) => ({
    messageId: 0, date: 0, chat: { id: chatId, type: 'private' }, from: { id: chatId, isBot: false, username: 'alice' }, text,
  });

  it('a test update is delivered by getUpdates with update_id, update_seq from 1, and the contract\'s Message', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'upd_first');
    const a = await testUpdate(id, 'hello');
    expect(a.status).toBe(201);
    expect(a.body).toEqual({ update_id: expect.any(Number), update_seq: 1 });
    const b = await testUpdate(id, 'again', { chat_id: 42, from: { id: 42, is_bot: false, username: 'bob' } });
    expect(b.body.update_seq).toBe(2);
    expect(b.body.update_id).toBeGreaterThan(a.body.update_id);

    const res = await poll(token);
    expect(res.status).toBe(200);
    expect(res.body.ok).toBe(true);
    expect(res.body.result).toHaveLength(2);
    const [first, second] = res.body.result;
    expect(first).toMatchObject({ update_id: a.body.update_id, update_seq: 1, message: { text: 'hello', chat: { type: 'private' } } });
    expect(first.message.message_id).toEqual(expect.any(Number));
    expect(first.message.date).toBeGreaterThan(1_700_000_000);
    expect(first.message.from).toMatchObject({ is_bot: false });
    expect(second.message).toMatchObject({ text: 'again', chat: { id: 42, type: 'private' }, from: { id: 42, is_bot: false, username: 'bob' } });
  });

  it('offset confirms everything below it; limit caps the answer', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'upd_offset');
    for (let i = 1; i <= 5; i++) await testUpdate(id, `m${i}`);
    const two = await poll(token, { limit: 2 });
    expect(two.body.result.map((u: { update_seq: number }) => u.update_seq)).toEqual([1, 2]);
    const rest = await poll(token, { offset: 3 });
    expect(rest.body.result.map((u: { update_seq: number }) => u.update_seq)).toEqual([3, 4, 5]);
    // 1 and 2 are forgotten: even offset 0 no longer returns them.
    expect((await poll(token, { offset: 0 })).body.result.map((u: { update_seq: number }) => u.update_seq)).toEqual([3, 4, 5]);
    expect((await poll(token, { offset: 6 })).body.result).toEqual([]);
    expect((await poll(token)).body.result).toEqual([]);
    // A far-past offset is harmless.
    expect((await poll(token, { offset: 1 })).body.result).toEqual([]);
  });

  it.each([
    [{ offset: -1 }, 'offset'],
    [{ offset: 1.5 }, 'offset'],
    [{ offset: '12abc' }, 'offset'],
    [{ limit: 0 }, 'limit'],
    [{ limit: 101 }, 'limit'],
    [{ timeout: -1 }, 'timeout'],
    [{ timeout: 51 }, 'timeout'],
    [{ timeout: 'soon' }, 'timeout'],
    [{ allowed_updates: ['poll_answer'] }, 'allowed_updates[0]'],
  ])('getUpdates %j is a 400 in the runtime envelope', async (body, field) => {
    const { token } = await approvedBot(h, ownerJwt, `upd_bad_${Math.random().toString(36).slice(2, 9)}`);
    const res = await poll(token, body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ ok: false, error_code: 400 });
    expect(res.body.description).toContain(field);
  });

  it('an offset past the newest update is refused, not silently accepted', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'upd_future');
    await testUpdate(id, 'one');
    expect((await poll(token, { offset: 2 })).status).toBe(200);
    const res = await poll(token, { offset: 50 });
    expect(res.status).toBe(400);
    expect(res.body.description).toMatch(/offset/);
  });

  it('a long poll answers as soon as an update arrives', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'upd_longpoll');
    const started = Date.now();
    const waiting = poll(token, { timeout: 10 });
    await new Promise((r) => setTimeout(r, 300));
    await testUpdate(id, 'wake up');
    const res = await waiting;
    const took = Date.now() - started;
    expect(res.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['wake up']);
    expect(took).toBeLessThan(3000);
  });

  it('a long poll woken by an ingest answers what a read of the same offset answers, up to its limit, and the rest follows', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'upd_woken_same');
    await ingest([{ botId: id, message: message('first') }]);
    const offset = (await poll(token)).body.result[0].update_seq + 1;
    const rich = (text: string) => ({
      ...message(text, 777), entities: [{ type: 'bold', offset: 0, length: 4 }],
      from: { id: 777, isBot: false, username: 'carol', firstName: 'Carol' },
    });
    const waiting = poll(token, { offset, timeout: 10, limit: 2 });
    await new Promise((r) => setTimeout(r, 300));
    await ingest([{ botId: id, message: rich('bold one /start') }, { botId: id, message: rich('bold two #tag') }, { botId: id, message: rich('bold three') }]);
    const woken = await waiting;
    expect(woken.status).toBe(200);
    expect(woken.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['bold one /start', 'bold two #tag']);
    // The same offset read again (nothing confirmed yet): the same two, byte for byte.
    const read = await poll(token, { offset, limit: 2 });
    expect(read.body).toEqual(woken.body);
    const rest = await poll(token, { offset: woken.body.result[1].update_seq + 1 });
    expect(rest.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['bold three']);
  });

  it('a long poll with nothing to return answers [] after its timeout', async () => {
    const { token } = await approvedBot(h, ownerJwt, 'upd_timeout');
    const started = Date.now();
    const res = await poll(token, { timeout: 1 });
    expect(res.body).toEqual({ ok: true, result: [] });
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  });

  it('the newest getUpdates wins: the older waiting one gets 409', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'upd_newest');
    const older = poll(token, { timeout: 20 });
    await new Promise((r) => setTimeout(r, 200));
    const newer = poll(token, { timeout: 20 });
    const olderRes = await older;
    expect(olderRes.status).toBe(409);
    expect(olderRes.body).toMatchObject({ ok: false, error_code: 409 });
    expect(olderRes.body.description).toMatch(/terminated by other getUpdates/);
    await testUpdate(id, 'for the newer one');
    expect((await newer).body.result).toHaveLength(1);
  });

  describe('delivery modes', () => {
    it('setWebhook ends a waiting getUpdates with 409; getUpdates answers 409 until deleteWebhook', async () => {
      const { id, token } = await approvedBot(h, ownerJwt, 'upd_modes');
      const waiting = poll(token, { timeout: 20 });
      await new Promise((r) => setTimeout(r, 200));
      const set = await call(h.url, 'POST', '/api/v1/bots/setWebhook', { token, body: { url: 'https://127.0.0.1:9/hook', secret_token: 'sec_ret-1' } });
      expect(set.body).toEqual({ ok: true, result: true });
      const cut = await waiting;
      expect(cut.status).toBe(409);
      const blocked = await poll(token);
      expect(blocked.status).toBe(409);
      expect(blocked.body.description).toMatch(/webhook is active/);

      const detail = await owner.get(`/api/v1/bots/my/${id}`);
      expect(detail.body.delivery_mode).toBe('webhook');
      expect(detail.body.webhook).toEqual({
        url: 'https://127.0.0.1:9/hook', has_secret_token: true, allowed_updates: [], allowed_ips: [], max_connections: 40,
        disabled: false, disabled_at: null, previous_secret_expires_at: null,
      });
      expect(JSON.stringify(detail.body)).not.toContain('sec_ret-1');

      const info = await call(h.url, 'POST', '/api/v1/bots/getWebhookInfo', { token });
      expect(info.body.result).toMatchObject({
        url: 'https://127.0.0.1:9/hook', delivery_mode: 'webhook', pending_update_count: 0, max_connections: 40,
        allowed_updates: [], platform_egress_ips: ['203.0.113.7'],
      });
      expect(JSON.stringify(info.body)).not.toContain('sec_ret-1');

      expect((await call(h.url, 'POST', '/api/v1/bots/deleteWebhook', { token })).body).toEqual({ ok: true, result: true });
      expect((await poll(token)).status).toBe(200);
      expect((await owner.get(`/api/v1/bots/my/${id}`)).body).toMatchObject({ delivery_mode: 'polling', webhook: null });
    });

    it('the console sets and deletes the webhook too, with drop_pending_updates', async () => {
      const { id, token } = await approvedBot(h, ownerJwt, 'upd_console_hook');
      await testUpdate(id, 'kept');
      const set = await owner.post(`/api/v1/bots/my/${id}/webhook`, {
        url: 'https://127.0.0.1:8443/bot', secret_token: 'abc', allowed_updates: ['message'], allowed_ips: ['127.0.0.1', '10.0.0.0/8'], max_connections: 5,
      });
      expect(set.status).toBe(200);
      expect(set.body).toMatchObject({
        delivery_mode: 'webhook',
        webhook: { url: 'https://127.0.0.1:8443/bot', has_secret_token: true, allowed_updates: ['message'], allowed_ips: ['127.0.0.1', '10.0.0.0/8'], max_connections: 5 },
      });
      const info = await call(h.url, 'POST', '/api/v1/bots/getWebhookInfo', { token });
      expect(info.body.result.pending_update_count).toBe(1);
      const del = await call(h.url, 'DELETE', `/api/v1/bots/my/${id}/webhook?drop_pending_updates=true`, { token: ownerJwt });
      expect(del.status).toBe(200);
      expect(del.body.delivery_mode).toBe('polling');
      expect((await poll(token)).body.result).toEqual([]);

      await testUpdate(id, 'dropped by set');
      await owner.post(`/api/v1/bots/my/${id}/webhook`, { url: 'https://127.0.0.1:8443/bot', secret_token: 'abc', drop_pending_updates: true });
      await call(h.url, 'DELETE', `/api/v1/bots/my/${id}/webhook`, { token: ownerJwt, body: {} });
      expect((await poll(token)).body.result).toEqual([]);
    });

    it.each([
      [{ url: 'http://127.0.0.1/hook', secret_token: 's' }, 'url'],
      [{ url: 'not a url', secret_token: 's' }, 'url'],
      [{ secret_token: 's' }, 'url'],
      [{ url: 'https://127.0.0.1/hook' }, 'secret_token'],
      [{ url: 'https://127.0.0.1/hook', secret_token: 'has space' }, 'secret_token'],
      [{ url: 'https://127.0.0.1/hook', secret_token: 'x'.repeat(257) }, 'secret_token'],
      [{ url: 'https://127.0.0.1/hook', secret_token: 's', max_connections: 0 }, 'max_connections'],
      [{ url: 'https://127.0.0.1/hook', secret_token: 's', max_connections: 101 }, 'max_connections'],
      [{ url: 'https://127.0.0.1/hook', secret_token: 's', allowed_updates: ['everything'] }, 'allowed_updates[0]'],
      [{ url: 'https://127.0.0.1/hook', secret_token: 's', allowed_ips: ['999.1.1.1'] }, 'allowed_ips[0]'],
      [{ url: 'https://192.168.1.10/hook', secret_token: 's' }, 'url'],
      [{ url: 'https://[fd00::1]/hook', secret_token: 's' }, 'url'],
      [{ url: 'https://no-such-host.invalid/hook', secret_token: 's' }, 'url'],
    ])('a webhook %j is refused with 400 on %s and the mode stays polling', async (body, field) => {
      const { id } = await approvedBot(h, ownerJwt, `upd_hook_${Math.random().toString(36).slice(2, 9)}`);
      const res = await owner.post(`/api/v1/bots/my/${id}/webhook`, body);
      expect(res.status).toBe(400);
      expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
      expect((await owner.get(`/api/v1/bots/my/${id}`)).body.delivery_mode).toBe('polling');
    });

    it('without an allow-list a loopback webhook is refused, in every spelling', async () => {
      const strict = await startHarness('in-process');
      try {
        const jwt = await strict.jwt('strict-owner');
        const { id } = await approvedBot(strict, jwt, 'strict_bot');
        for (const url of ['https://127.0.0.1/h', 'https://2130706433/h', 'https://0x7f.1/h', 'https://[::ffff:127.0.0.1]/h', 'https://[::1]/h', 'https://localhost/h']) {
          const res = await client(strict.url, jwt).post(`/api/v1/bots/my/${id}/webhook`, { url, secret_token: 's' });
          expect(res.status, url).toBe(400);
          expect(res.body.error.details[0]).toEqual({ field: 'url', reason: 'FORBIDDEN_TARGET' });
        }
      } finally {
        await strict.close();
      }
    });

    it('PATCH-free modes: a pending bot cannot get a webhook (409), another account\'s bot is 404', async () => {
      const created = await owner.post('/api/v1/bots/applications', { name: 'P', username: 'upd_pending_hook' });
      const res = await owner.post(`/api/v1/bots/my/${created.body.id}/webhook`, { url: 'https://127.0.0.1/h', secret_token: 's' });
      expect(res.status).toBe(409);
      const { id } = await approvedBot(h, ownerJwt, 'upd_foreign_hook');
      const stranger = client(h.url, await h.jwt('stranger'));
      expect((await stranger.post(`/api/v1/bots/my/${id}/webhook`, { url: 'https://127.0.0.1/h', secret_token: 's' })).status).toBe(404);
      expect((await stranger.post(`/api/v1/bots/my/${id}/test-updates`, { text: 'x' })).status).toBe(404);
      expect((await owner.post(`/api/v1/bots/my/${created.body.id}/test-updates`, { text: 'x' })).status).toBe(409);
    });
  });

  describe('internal ingest', () => {
    it("announces a batch on the updates topic by one message per bot, keyed by it: a polling bot's updates themselves, or (from the outbox relay) that no delivery was written", async () => {
      const seen: BusMessage[] = [];
      await h.apps[0]!.bus!.subscribeAll([UPDATES_TOPIC], (m) => seen.push(m));
      const a = await approvedBot(h, ownerJwt, 'ingest_topic_a');
      const b = await approvedBot(h, ownerJwt, 'ingest_topic_b');
      // The subscription is live once an update of a third bot comes through.
      const probe = await approvedBot(h, ownerJwt, 'ingest_topic_probe');
      await expect.poll(async () => {
        await ingest([{ botId: probe.id, message: message('probe') }]);
        return seen.some((m) => m.key === probe.id);
      }, { timeout: 10_000, interval: 500 }).toBe(true);
      await ingest([a, b, a, a, b].map((bot, i) => ({ botId: bot.id, message: message(`t${i}`) })));
      await expect.poll(() => seen.filter((m) => m.key === a.id || m.key === b.id).length, { timeout: 5000 }).toBe(2);
      await new Promise((r) => setTimeout(r, 300));
      const ours = seen.filter((m) => m.key === a.id || m.key === b.id);
      expect(ours.map((m) => m.topic)).toEqual([UPDATES_TOPIC, UPDATES_TOPIC]);
      expect(new Set(ours.map((m) => m.key))).toEqual(new Set([a.id, b.id]));
      // Published by the commit itself (the embedded default, or MariaDB after a quiet spell):
      // each bot's updates as stored, [update_id, update_seq, kind, created_at, message];
      // by the relay: NO_DELIVERY.
      const texts = (m: BusMessage) => (m.value === NO_DELIVERY ? null
        : (JSON.parse(m.value) as [number, number, string, number, { text: string }][]).map(([, seq, kind, , msg]) => `${seq} ${kind} ${msg.text}`));
      const carried = ours.map((m) => [m.key === a.id ? 'a' : 'b', texts(m)]).sort();
      expect([[['a', ['1 message t0', '2 message t2', '3 message t3']], ['b', ['1 message t1', '2 message t4']]], [['a', null], ['b', null]]])
        .toContainEqual(carried);
      // The updates themselves are in the database.
      expect((await poll(a.token)).body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['t0', 't2', 't3']);
    });

    it('entities: computed as Telegram does when the messaging service sent none (commands, mentions, hashtags, URLs, in UTF-16 units); given ones checked and kept', async () => {
      const bot = await approvedBot(h, ownerJwt, 'ingest_entities');
      await ingest([
        { botId: bot.id, message: message('/start@ingest_entities 😀 @alice_bob #news https://example.com/x') },
        { botId: bot.id, message: { ...message('bold words'), entities: [{ type: 'bold', offset: 0, length: 4 }] } },
        { botId: bot.id, message: message('no entities here') },
      ]);
      const [first, second, third] = (await poll(bot.token)).body.result;
      expect(first.message.entities).toEqual([
        { type: 'bot_command', offset: 0, length: 22 },
        // 😀 is two UTF-16 code units: the mention starts at 26, not 25.
        { type: 'mention', offset: 26, length: 10 },
        { type: 'hashtag', offset: 37, length: 5 },
        { type: 'url', offset: 43, length: 21 },
      ]);
      expect(second.message.entities).toEqual([{ type: 'bold', offset: 0, length: 4 }]);
      expect(third.message.entities).toBeUndefined();
      // An entity past the end of the text is refused, naming it, with tdlib's words.
      const bad = await ingest([{ botId: bot.id, message: { ...message('short'), entities: [{ type: 'bold', offset: 3, length: 10 }] } }]).catch((err) => err);
      expect(bad.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(bad.details).toMatch(/^updates\[0\]\.message\.entities: entity beginning at UTF-16 offset 3 ends after the end of the text/);
    });

    it('commits updates for several bots in one call, in order, and refuses outsiders', async () => {
      const a = await approvedBot(h, ownerJwt, 'ingest_a');
      const b = await approvedBot(h, ownerJwt, 'ingest_b');
      const res = await ingest([
        { botId: a.id, message: message('a1') },
        { botId: b.id, message: message('b1') },
        { botId: a.id, message: message('a2') },
      ]);
      expect(res.results.map((r) => r.updateSeq)).toEqual([1, 1, 2]);
      expect(new Set(res.results.map((r) => r.updateId)).size).toBe(3);
      const got = (await poll(a.token)).body.result;
      expect(got.map((u: { update_seq: number }) => u.update_seq)).toEqual([1, 2]);
      expect(got[0].message.text).toBe('a1');
      expect(got[1].message.text).toBe('a2');

      for (const credential of [a.token, ownerJwt, 'wrong-internal-token-wrong-internal-token']) {
        await expect(ingest([{ botId: a.id, message: message('x') }], credential)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
      }
    });

    it('refuses the whole request when one bot is unknown, writing nothing', async () => {
      const a = await approvedBot(h, ownerJwt, 'ingest_whole');
      await expect(ingest([{ botId: a.id, message: message('x') }, { botId: 'bot_nope', message: message('y') }]))
        .rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
      await expect(ingest([{ botId: a.id }])).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
      await expect(ingest([])).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
      expect((await poll(a.token)).body.result).toEqual([]);
    });

    it('a refused request stores nothing while the requests arriving with it are stored', async () => {
      const a = await approvedBot(h, ownerJwt, 'ingest_whole_c');
      const b = await approvedBot(h, ownerJwt, 'ingest_whole_d');
      // Sent together, so that the writer can take them into one transaction.
      const calls = await Promise.allSettled([
        ingest([{ botId: b.id, message: message('b1') }]),
        ingest([{ botId: a.id, message: message('lost') }, { botId: 'bot_nope', message: message('y') }]),
        ingest([{ botId: a.id, message: message('a1') }, { botId: b.id, message: message('b2') }]),
      ]);
      expect(calls.map((c) => c.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect((calls[1] as PromiseRejectedResult).reason).toMatchObject({ code: grpc.status.NOT_FOUND, details: expect.stringContaining('updates[1].bot_id') });
      expect((await poll(a.token)).body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['a1']);
      expect((await poll(b.token)).body.result.map((u: { message: { text: string } }) => u.message.text).sort()).toEqual(['b1', 'b2']);
    });

    it('refuses a NUL in a text, caption or sender name, naming the update and field, writing nothing', async () => {
      const a = await approvedBot(h, ownerJwt, 'ingest_nul');
      const bad = [
        { ...message('a\u0000b') },
        { ...message('ok'), caption: 'c\u0000' },
        { ...message('ok'), from: { ...message('ok').from, firstName: 'N\u0000' } },
      ];
      for (const [field, m] of [['text', bad[0]], ['caption', bad[1]], ['from.first_name', bad[2]]] as const) {
        await expect(ingest([{ botId: a.id, message: message('fine') }, { botId: a.id, message: m }]))
          .rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringContaining(`updates[1].message.${field}`) });
      }
      expect((await poll(a.token)).body.result).toEqual([]);
    });

    it('refuses the whole request when one bot is not approved yet, writing nothing', async () => {
      const a = await approvedBot(h, ownerJwt, 'ingest_whole_p');
      const pending = await client(h.url, ownerJwt).post('/api/v1/bots/applications', { name: 'P', username: 'ingest_pending' });
      await expect(ingest([{ botId: a.id, message: message('x') }, { botId: pending.body.id, message: message('y') }]))
        .rejects.toMatchObject({ code: grpc.status.FAILED_PRECONDITION, details: expect.stringContaining('updates[1].bot_id') });
      expect((await poll(a.token)).body.result).toEqual([]);
    });

    it('allowed_updates filters which kinds are queued from the moment it is set', async () => {
      const a = await approvedBot(h, ownerJwt, 'ingest_filter');
      await ingest([{ botId: a.id, message: { ...message('before'), messageId: 7 } }]);
      await poll(a.token, { allowed_updates: ['message'] });
      const res = await ingest([{ botId: a.id, editedMessage: { ...message('filtered'), messageId: 7 } }, { botId: a.id, message: message('kept') }]);
      expect(res.results[0]).toMatchObject({ filtered: true, updateId: 0 });
      expect(res.results[1]).toMatchObject({ filtered: false, updateSeq: 2 });
      const got = (await poll(a.token)).body.result;
      expect(got.map((u: { update_seq: number }) => u.update_seq)).toEqual([1, 2]);
      const info = await call(h.url, 'POST', '/api/v1/bots/getWebhookInfo', { token: a.token });
      expect(info.body.result).toMatchObject({ allowed_updates: ['message'], delivery_mode: 'polling', url: '', pending_update_count: 2 });
    });

    const pendingOf = async (token: string) =>
      (await call(h.url, 'POST', '/api/v1/bots/getWebhookInfo', { token })).body.result.pending_update_count as number;

    it('a batch retried after its call timed out answers the same ids and creates nothing new', async () => {
      const a = await approvedBot(h, ownerJwt, 'ingest_retry_a');
      const b = await approvedBot(h, ownerJwt, 'ingest_retry_b');
      const batch = Array.from({ length: 400 }, (_, i) => ({
        botId: i % 2 ? b.id : a.id, message: message(`m${i}`), idempotencyKey: `source-msg-${i}`,
      }));
      // The producer gives up first (a deadline far shorter than the commit takes)...
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
      const timedOut = await new Promise<grpc.ServiceError | null>((resolve) =>
        internal.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates: batch }), md, { deadline: Date.now() + 2 }, (err) => resolve(err)));
      expect(timedOut?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
      // ...the batch may be committed all the same (as it was here, once the core got it)...
      await until(() => pendingOf(a.token), (n) => n === 200, 5000);
      // ...and the producer retries it, as gRPC clients should.
      const retried = await ingest(batch);
      expect(retried.results.map((r) => r.updateSeq)).toEqual(batch.map((_, i) => Math.floor(i / 2) + 1));
      expect(await pendingOf(a.token)).toBe(200);
      expect(await pendingOf(b.token)).toBe(200);
      // Once more: the very same ids, each flagged a duplicate.
      const again = await ingest(batch);
      expect(again.results).toEqual(retried.results.map((r) => ({ ...r, duplicate: true })));
      expect(await pendingOf(a.token)).toBe(200);
    });

    it('a key repeated within one batch gets one update; other bots and unkeyed updates are unaffected', async () => {
      const a = await approvedBot(h, ownerJwt, 'ingest_key_a');
      const b = await approvedBot(h, ownerJwt, 'ingest_key_b');
      const res = await ingest([
        { botId: a.id, message: message('one'), idempotencyKey: 'k1' },
        { botId: a.id, message: message('one again'), idempotencyKey: 'k1' },
        { botId: b.id, message: message('same key, other bot'), idempotencyKey: 'k1' },
        { botId: a.id, message: message('no key') },
        { botId: a.id, message: message('no key') },
      ]);
      expect(res.results.map((r) => [r.updateSeq, r.duplicate])).toEqual([[1, false], [1, true], [1, false], [2, false], [3, false]]);
      expect(res.results[1]!.updateId).toBe(res.results[0]!.updateId);
      const got = (await poll(a.token)).body.result;
      expect(got.map((u: { message: { text: string } }) => u.message.text)).toEqual(['one', 'no key', 'no key']);
      // Confirmed updates keep their key: a late retry still creates nothing.
      await poll(a.token, { offset: 4 });
      const late = await ingest([{ botId: a.id, message: message('one'), idempotencyKey: 'k1' }]);
      expect(late.results[0]).toMatchObject({ updateId: res.results[0]!.updateId, updateSeq: 1, duplicate: true });
      expect((await poll(a.token, { offset: 4 })).body.result).toEqual([]);
      await expect(ingest([{ botId: a.id, message: message('x'), idempotencyKey: 'k'.repeat(129) }]))
        .rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringContaining('idempotency_key') });
    });
  });

  it('unconfirmed updates are cleaned up after their retention', async () => {
    const short = await startHarness('in-process', { UPDATE_RETENTION: '2s' });
    try {
      const jwt = await short.jwt('retention-owner');
      const { id, token } = await approvedBot(short, jwt, 'retention_bot');
      await client(short.url, jwt).post(`/api/v1/bots/my/${id}/test-updates`, { text: 'soon gone' });
      expect((await call(short.url, 'POST', '/api/v1/bots/getUpdates', { token })).body.result).toHaveLength(1);
      await new Promise((r) => setTimeout(r, 3500));
      expect((await call(short.url, 'POST', '/api/v1/bots/getUpdates', { token })).body.result).toEqual([]);
    } finally {
      await short.close();
    }
  });
});
