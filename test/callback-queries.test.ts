/**
 * Callback queries and edited messages at ingest, and answerCallbackQuery (issue 33), over
 * real gRPC (IngestUpdates, StreamIngestUpdates, the outbound feed) and HTTP (the native
 * API, the console's button press, the Telegram surface): a press names a message the bot
 * sent and one of its buttons, and arrives with the message as it is; the bot answers it
 * once, in time, and the answer reaches the messaging services on the feed; an answer
 * twice, too late or to another bot's query gets Telegram's own refusal; allowed_updates
 * filters the kind; an edit names a message the bot received. Runs on SQLite, and on
 * MariaDB + Kafka when the integration pass sets them.
 */
import * as grpc from '@grpc/grpc-js';
import { Bot, InlineKeyboard } from 'grammy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  InternalServiceClient,
  IngestUpdatesRequest,
  type IngestUpdatesResponse,
  StreamIngestUpdatesRequest,
  type StreamIngestUpdatesResponse,
} from '../src/gen/botplatform/v1/internal_service.js';
import type { BusMessage } from '../src/bus/bus.js';
import { MESSAGES_TOPIC } from '../src/bus/topics.js';
import { fromServiceError } from '../src/grpc/status-details.js';
import { openFeed, type FeedConsumer } from './helpers/feed-consumer.js';
import { approvedBot, call, client, startHarness, TEST_INTERNAL_TOKEN, type Harness } from './helpers/harness.js';
import { startReceiver, type Receiver } from './helpers/receiver.js';
import { createTestPki, type TestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

const TOO_OLD = 'query is too old and response timeout expired or query ID is invalid';
/** QUERY_ANSWER_TIMEOUT here: short enough to wait out, long enough for a prompt answer on a busy machine. */
const ANSWER_TIMEOUT_MS = 2500;

describe('callback queries', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  let internal: InternalServiceClient;
  let feed: FeedConsumer;
  let pki: TestPki;
  let receiver: Receiver | undefined;
  const published: BusMessage[] = [];

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', {
      LIMITS_ENABLED: 'false', QUERY_ANSWER_TIMEOUT: `${ANSWER_TIMEOUT_MS}ms`, WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile,
    });
    ownerJwt = await h.jwt('cbq-owner');
    owner = client(h.url, ownerJwt);
    internal = new InternalServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    await h.apps[0]!.bus!.subscribeAll([MESSAGES_TOPIC], (m) => published.push(m));
    feed = openFeed(h.grpcAddress, 'cbq-tests');
    await feed.waitFor(() => feed.partitions().length === 16);
  });
  afterAll(async () => {
    await receiver?.close();
    feed?.kill();
    internal?.close();
    await h?.close();
  });

  const metadata = () => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
    return md;
  };
  const ingest = (updates: object[]) => new Promise<IngestUpdatesResponse>((resolve, reject) =>
    internal.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates }), metadata(), (err, res) => (err ? reject(err) : resolve(res!))));
  /** The refusal of an ingest: its status and the fields it names. */
  const refusal = async (updates: object[]) => {
    const err = await ingest(updates).then(() => undefined, (e: grpc.ServiceError) => e);
    expect(err, 'the ingest was refused').toBeDefined();
    return { code: grpc.status[err!.code], message: err!.details, fields: fromServiceError(err!).details.map((d) => d.field) };
  };
  const rt = (token: string, method: string, body: object = {}) => call(h.url, 'POST', `/api/v1/bots/${method}`, { token, body });
  const poll = async (token: string) => {
    const res = await rt(token, 'getUpdates', { timeout: 0 });
    expect(res.status).toBe(200);
    const updates = res.body.result as Record<string, any>[]; // eslint-disable-line @typescript-eslint/no-explicit-any
    if (updates.length > 0) await rt(token, 'getUpdates', { offset: updates[updates.length - 1]!.update_seq + 1 });
    return updates;
  };
  const user = (id: number) => ({ id, isBot: false, username: `user${id}`, firstName: 'Ann' });
  const keyboard = { inline_keyboard: [{ buttons: [{ text: 'Yes', callback_data: 'yes' }, { text: 'No', callback_data: 'no' }] }, { buttons: [{ text: 'Site', url: 'https://example.com' }] }] };

  /** A bot with a chat that wrote to it and a message it sent there with the keyboard above. */
  async function botWithKeyboard(username: string, chatId: number) {
    const bot = await approvedBot(h, ownerJwt, username);
    await ingest([{ botId: bot.id, message: { messageId: 0, chat: { id: chatId, type: 'private' }, from: user(chatId), text: 'menu' } }]);
    const sent = await rt(bot.token, 'sendMessage', { chat_id: chatId, text: 'Continue?', reply_markup: keyboard });
    expect(sent.status).toBe(200);
    await poll(bot.token);
    return { ...bot, chatId, messageId: sent.body.result.message_id as number, sent: sent.body.result };
  }
  const press = (bot: { id: string; chatId: number; messageId: number }, data: string, extra: object = {}) => ({
    botId: bot.id, callbackQuery: { from: user(bot.chatId), message: { messageId: bot.messageId, chat: { id: bot.chatId } }, data, ...extra },
  });

  it('a press arrives with the message as the bot sent it, a decimal id and a stable chat_instance; its answer reaches the feed', async () => {
    const bot = await botWithKeyboard('cbq_first', 6101);
    const res = await ingest([press(bot, 'yes'), press(bot, 'no')]);
    expect(res.results.map((r) => r.updateSeq)).toEqual([2, 3]);
    const [first, second] = await poll(bot.token);
    const q = first!.callback_query;
    expect(q).toEqual({
      id: expect.stringMatching(/^\d{1,19}$/),
      from: { id: 6101, is_bot: false, username: 'user6101', first_name: 'Ann' },
      message: bot.sent,
      chat_instance: expect.stringMatching(/^-?\d+$/),
      data: 'yes',
    });
    expect(first!.message).toBeUndefined();
    expect(second!.callback_query.data).toBe('no');
    expect(second!.callback_query.id).not.toBe(q.id);
    expect(second!.callback_query.chat_instance).toBe(q.chat_instance);

    const answered = await rt(bot.token, 'answerCallbackQuery', { callback_query_id: q.id, text: 'Done!', show_alert: true, cache_time: 5 });
    expect(answered.body).toEqual({ ok: true, result: true });
    await feed.waitFor(() => feed.messages.some((m) => m.callbackQueryAnswer?.callbackQueryId === q.id));
    const event = feed.messages.find((m) => m.callbackQueryAnswer?.callbackQueryId === q.id)!;
    expect(event.botId).toBe(bot.id);
    expect(event.message).toBeUndefined();
    expect(event.callbackQueryAnswer).toEqual({
      callbackQueryId: q.id, chatId: 6101, messageId: bot.messageId, userId: 6101, text: 'Done!', showAlert: true, url: undefined, cacheTime: 5,
    });
    // The bus topic of the messaging services carries the same value.
    await expect.poll(() => published.some((p) => p.key === bot.id && p.value.includes('callback_query_answer')), { timeout: 10_000 }).toBe(true);
    const onBus = JSON.parse(published.find((p) => p.key === bot.id && p.value.includes('callback_query_answer'))!.value);
    expect(onBus).toEqual({
      bot_id: bot.id,
      callback_query_answer: { callback_query_id: q.id, chat_id: 6101, message_id: bot.messageId, user_id: 6101, text: 'Done!', show_alert: true, cache_time: 5 },
    });
    // In the chat's partition, after the message it answers for.
    const sentEvent = feed.messages.find((m) => m.botId === bot.id && m.message?.messageId === bot.messageId)!;
    expect(event.partition).toBe(sentEvent.partition);
    expect(event.seq).toBeGreaterThan(sentEvent.seq);

    // Answered once: the second answer is refused in Telegram's words.
    const again = await rt(bot.token, 'answerCallbackQuery', { callback_query_id: q.id });
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ ok: false, error_code: 400, description: `Bad Request: ${TOO_OLD}` });
    // The other press, answered with nothing to show, is fine too.
    expect((await rt(bot.token, 'answerCallbackQuery', { callback_query_id: second!.callback_query.id })).body.result).toBe(true);
  });

  it('another bot\'s query, an unknown id and a late answer are refused with Telegram\'s text; a late answer writes nothing', async () => {
    const bot = await botWithKeyboard('cbq_owner_a', 6201);
    const other = await approvedBot(h, ownerJwt, 'cbq_owner_b');
    await ingest([press(bot, 'yes'), press(bot, 'no')]);
    const [a, b] = await poll(bot.token);
    for (const [token, id] of [[other.token, a!.callback_query.id], [bot.token, '12345'], [bot.token, 'not-a-query']] as const) {
      const res = await rt(token, 'answerCallbackQuery', { callback_query_id: id });
      expect(res.body).toEqual({ ok: false, error_code: 400, description: `Bad Request: ${TOO_OLD}` });
    }
    // Over gRPC, the same refusal, naming the field.
    const runtime = await import('../src/gen/botplatform/v1/runtime_service.js');
    const rpc = new runtime.RuntimeServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${other.token}`);
    const err = await new Promise<grpc.ServiceError>((resolve) => rpc.answerCallbackQuery({ callbackQueryId: a!.callback_query.id, showAlert: false }, md, (e) => resolve(e!)));
    rpc.close();
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err.details).toBe(TOO_OLD);
    expect(fromServiceError(err).details).toEqual([{ field: 'callback_query_id', reason: 'QUERY_ID_INVALID', description: TOO_OLD }]);

    const before = feed.messages.length;
    await new Promise((r) => setTimeout(r, ANSWER_TIMEOUT_MS + 200));
    const late = await rt(bot.token, 'answerCallbackQuery', { callback_query_id: b!.callback_query.id, text: 'late' });
    expect(late.body).toEqual({ ok: false, error_code: 400, description: `Bad Request: ${TOO_OLD}` });
    // The owner's own answer to the first still counts as never given: it was refused too.
    expect((await rt(bot.token, 'answerCallbackQuery', { callback_query_id: a!.callback_query.id })).status).toBe(400);
    await new Promise((r) => setTimeout(r, 300));
    expect(feed.messages.slice(before).filter((m) => m.botId === bot.id && m.callbackQueryAnswer)).toEqual([]);
  });

  it('answerCallbackQuery checks its parameters', async () => {
    const bot = await botWithKeyboard('cbq_params', 6301);
    await ingest([press(bot, 'yes')]);
    const [u] = await poll(bot.token);
    const id = u!.callback_query.id;
    const long = await rt(bot.token, 'answerCallbackQuery', { callback_query_id: id, text: 'x'.repeat(201) });
    expect(long.status).toBe(400);
    expect(long.body.description).toMatch(/^Bad Request: text: /);
    const url = await rt(bot.token, 'answerCallbackQuery', { callback_query_id: id, url: 'javascript:alert(1)' });
    expect(url.body.description).toMatch(/^Bad Request: url: /);
    const cache = await rt(bot.token, 'answerCallbackQuery', { callback_query_id: id, cache_time: -1 });
    expect(cache.body.description).toMatch(/^Bad Request: cache_time: /);
    // None of those used the query up.
    expect((await rt(bot.token, 'answerCallbackQuery', { callback_query_id: id, text: 'x'.repeat(200), url: 'https://t.me/cbq_params?start=x' })).body.result).toBe(true);
  });

  it('ingest refuses a press of a message the bot did not send, of a button it does not have, or without a sender, naming the field', async () => {
    const bot = await botWithKeyboard('cbq_refuse', 6401);
    const cases: [object, string][] = [
      [press({ ...bot, messageId: 9999 }, 'yes'), 'updates[0].callback_query.message.message_id'],
      // The message the user wrote (message 1 of the chat) is not one of the bot's.
      [press({ ...bot, messageId: 1 }, 'yes'), 'updates[0].callback_query.message.message_id'],
      [press({ ...bot, chatId: 6402 }, 'yes'), 'updates[0].callback_query.message.message_id'],
      [press(bot, 'maybe'), 'updates[0].callback_query.data'],
      [press(bot, ''), 'updates[0].callback_query.data'],
      [press(bot, 'yes', { from: undefined }), 'updates[0].callback_query.from.id'],
      [press(bot, 'yes', { message: undefined }), 'updates[0].callback_query.message.message_id'],
      [press(bot, 'yes', { id: 'has space' }), 'updates[0].callback_query.id'],
      [{ ...press(bot, 'yes'), message: { chat: { id: 6401 }, from: user(6401), text: 'two kinds' } }, 'updates[0]'],
    ];
    for (const [update, field] of cases) {
      const r = await refusal([update]);
      expect(r.code, field).toBe('INVALID_ARGUMENT');
      expect(r.fields).toContain(field);
    }
    expect(await poll(bot.token)).toEqual([]);
  });

  it('an id the messaging service gives is kept, and may not be given twice', async () => {
    const bot = await botWithKeyboard('cbq_given', 6501);
    await ingest([press(bot, 'yes', { id: 'svc-1', chatInstance: 'ci-1' })]);
    const [u] = await poll(bot.token);
    expect(u!.callback_query).toMatchObject({ id: 'svc-1', chat_instance: 'ci-1' });
    const r = await refusal([press(bot, 'no', { id: 'svc-1' })]);
    expect(r.fields).toEqual(['updates[0].callback_query.id']);
    const twice = await refusal([press(bot, 'no', { id: 'svc-2' }), press(bot, 'yes', { id: 'svc-2' })]);
    expect(twice.fields).toEqual(['updates[1].callback_query.id']);
    // Each bot's ids are its own, checked together: svc-1 is taken for this bot only.
    const other = await botWithKeyboard('cbq_given_other', 6502);
    const mixed = await refusal([press(other, 'yes', { id: 'svc-1' }), press(bot, 'no', { id: 'svc-5' }), press(bot, 'yes', { id: 'svc-1' })]);
    expect(mixed.fields).toEqual(['updates[2].callback_query.id']);
    await ingest([press(other, 'yes', { id: 'svc-1' }), press(bot, 'no', { id: 'svc-5' })]);
    expect((await poll(other.token)).map((x) => x.callback_query.id)).toEqual(['svc-1']);
    expect((await poll(bot.token)).map((x) => x.callback_query.id)).toEqual(['svc-5']);
    // A batch retried with its idempotency keys answers the ids it got, and stores nothing new.
    const keyed = [press(bot, 'no', { id: 'svc-3' }), press(bot, 'yes', { id: 'svc-4' })].map((p, i) => ({ ...p, idempotencyKey: `k${i}` }));
    const once = await ingest(keyed);
    const retried = await ingest(keyed);
    expect(retried.results.map((x) => [x.updateId, x.duplicate])).toEqual(once.results.map((x) => [x.updateId, true]));
    expect((await poll(bot.token)).map((x) => x.callback_query.id)).toEqual(['svc-3', 'svc-4']);
  });

  it('StreamIngestUpdates takes callback queries with the same checks', async () => {
    const bot = await botWithKeyboard('cbq_stream', 6601);
    const stream = internal.streamIngestUpdates(metadata());
    const acks: StreamIngestUpdatesResponse[] = [];
    stream.on('data', (a: StreamIngestUpdatesResponse) => acks.push(a));
    const ended = new Promise<void>((resolve) => stream.on('status', () => resolve()));
    stream.on('error', () => {});
    stream.write(StreamIngestUpdatesRequest.fromPartial({ sequence: 1, updates: [press(bot, 'yes')] }));
    stream.write(StreamIngestUpdatesRequest.fromPartial({ sequence: 2, updates: [press(bot, 'nope')] }));
    stream.end();
    await ended;
    expect(acks.map((a) => a.sequence)).toEqual([1, 2]);
    expect(acks[0]!.results).toHaveLength(1);
    expect(acks[1]!.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(acks[1]!.error?.message).toContain('updates[0].callback_query.data');
    const got = await poll(bot.token);
    expect(got.map((u) => u.callback_query.data)).toEqual(['yes']);
  });

  it('allowed_updates filters callback queries, whichever way it is set', async () => {
    const bot = await botWithKeyboard('cbq_filter', 6701);
    await rt(bot.token, 'getUpdates', { allowed_updates: ['message'], timeout: 0 });
    const filtered = await ingest([press(bot, 'yes')]);
    expect(filtered.results[0]).toMatchObject({ filtered: true, updateId: 0 });
    const pressOnConsole = await owner.post(`/api/v1/bots/my/${bot.id}/test-callback-queries`, { chat_id: 6701, message_id: bot.messageId, callback_data: 'yes' });
    expect(pressOnConsole.status).toBe(409);
    expect(pressOnConsole.body.error.message).toContain('callback_query');
    await rt(bot.token, 'getUpdates', { allowed_updates: ['callback_query'], timeout: 0 });
    expect((await ingest([press(bot, 'yes')])).results[0]!.filtered).toBe(false);
    expect((await ingest([{ botId: bot.id, message: { chat: { id: 6701 }, from: user(6701), text: 'ignored' } }])).results[0]!.filtered).toBe(true);
    expect((await poll(bot.token)).map((u) => Object.keys(u).filter((k) => !k.startsWith('update_')))).toEqual([['callback_query']]);
    // Set with a webhook on the Telegram surface (a JSON-text list, as form-posting clients send it): the same filter.
    receiver ??= await startReceiver(pki);
    const hook = await call(h.url, 'POST', `/bot${bot.token}/setWebhook`, { body: { url: `${receiver.url}/filtered`, secret_token: 'filter_secret', allowed_updates: '["message"]' } });
    expect(hook.body).toMatchObject({ ok: true, result: true });
    expect((await ingest([press(bot, 'yes')])).results[0]).toMatchObject({ filtered: true, updateId: 0 });
    expect((await ingest([{ botId: bot.id, message: { chat: { id: 6701 }, from: user(6701), text: 'kept' } }])).results[0]!.filtered).toBe(false);
    expect((await call(h.url, 'POST', `/bot${bot.token}/deleteWebhook`, { body: {} })).body.result).toBe(true);
    // A query filtered out was never given to the bot: there is nothing to answer.
  });

  it('the console presses a button of a message the bot sent to its test chat', async () => {
    const bot = await approvedBot(h, ownerJwt, 'cbq_console');
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'hi' })).status).toBe(201);
    const sent = await rt(bot.token, 'sendMessage', { chat_id: 100000001, text: 'Pick', reply_markup: keyboard });
    await poll(bot.token);
    const res = await owner.post(`/api/v1/bots/my/${bot.id}/test-callback-queries`, { message_id: sent.body.result.message_id, callback_data: 'no' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ update_id: expect.any(Number), update_seq: 2, callback_query_id: expect.stringMatching(/^\d+$/) });
    const [u] = await poll(bot.token);
    expect(u).toMatchObject({
      update_id: res.body.update_id,
      callback_query: { id: res.body.callback_query_id, data: 'no', from: { id: 100000001, is_bot: false, username: 'test_user' }, message: { message_id: sent.body.result.message_id, text: 'Pick' } },
    });
    expect((await rt(bot.token, 'answerCallbackQuery', { callback_query_id: res.body.callback_query_id })).body.result).toBe(true);

    const badData = await owner.post(`/api/v1/bots/my/${bot.id}/test-callback-queries`, { message_id: sent.body.result.message_id, callback_data: 'maybe' });
    expect(badData.status).toBe(400);
    expect(badData.body.error.details).toEqual([{ field: 'callback_data', reason: 'BUTTON_NOT_FOUND' }]);
    const badMessage = await owner.post(`/api/v1/bots/my/${bot.id}/test-callback-queries`, { message_id: 999, callback_data: 'no' });
    expect(badMessage.status).toBe(404);
    expect(badMessage.body.error.message).toContain('message not found');
    const stranger = client(h.url, await h.jwt('cbq-stranger'));
    expect((await stranger.post(`/api/v1/bots/my/${bot.id}/test-callback-queries`, { message_id: 1, callback_data: 'no' })).status).toBe(404);
  });

  it('the Telegram surface delivers callback_query in Telegram\'s shape and answers it', async () => {
    const bot = await botWithKeyboard('cbq_telegram', 6801);
    await ingest([press(bot, 'yes')]);
    const got = await call(h.url, 'POST', `/bot${bot.token}/getUpdates`, { body: { timeout: 0 } });
    const [u] = got.body.result;
    expect(u).toEqual({
      update_id: 2,
      callback_query: {
        id: expect.stringMatching(/^\d+$/),
        from: { id: 6801, is_bot: false, first_name: 'Ann', username: 'user6801' },
        message: expect.objectContaining({
          message_id: bot.messageId, chat: { id: 6801, type: 'private' }, text: 'Continue?',
          reply_markup: { inline_keyboard: [[{ text: 'Yes', callback_data: 'yes' }, { text: 'No', callback_data: 'no' }], [{ text: 'Site', url: 'https://example.com' }]] },
        }),
        chat_instance: expect.any(String),
        data: 'yes',
      },
    });
    // Form-encoded, as node-telegram-bot-api sends it.
    const form = await call(h.url, 'POST', `/bot${bot.token}/answerCallbackQuery`, {
      rawBody: `callback_query_id=${u.callback_query.id}&text=${encodeURIComponent('Saved ✓')}&show_alert=true`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.body).toEqual({ ok: true, result: true });
    await feed.waitFor(() => feed.messages.some((m) => m.callbackQueryAnswer?.callbackQueryId === u.callback_query.id));
    expect(feed.messages.find((m) => m.callbackQueryAnswer?.callbackQueryId === u.callback_query.id)!.callbackQueryAnswer).toMatchObject({ text: 'Saved ✓', showAlert: true });
    const again = await call(h.url, 'POST', `/bot${bot.token}/answerCallbackQuery`, { body: { callback_query_id: u.callback_query.id } });
    expect(again.body).toEqual({ ok: false, error_code: 400, description: `Bad Request: ${TOO_OLD}` });
  });

  it('a grammY bot, unmodified: /start answers with an inline keyboard, a press of it is answered through bot.callbackQuery', async () => {
    const b = await approvedBot(h, ownerJwt, 'cbq_grammy');
    const bot = new Bot(b.token, { client: { apiRoot: h.url } });
    const presses: string[] = [];
    bot.command('start', (ctx) => ctx.reply('Pick one', { reply_markup: new InlineKeyboard().text('Red', 'color:red').text('Blue', 'color:blue') }));
    bot.callbackQuery(/^color:(\w+)$/, async (ctx) => {
      presses.push(ctx.match[1]!);
      await ctx.answerCallbackQuery({ text: `You picked ${ctx.match[1]}` });
    });
    bot.catch((err) => {
      throw err.error;
    });
    const started = bot.start({ timeout: 1 });
    try {
      expect((await owner.post(`/api/v1/bots/my/${b.id}/test-updates`, { text: '/start' })).status).toBe(201);
      const menu = await until(async () => feed.messages.find((m) => m.botId === b.id && m.message?.text === 'Pick one'), Boolean, 15_000);
      expect(menu?.message?.replyMarkup?.inlineKeyboard[0]!.buttons.map((x) => x.callbackData)).toEqual(['color:red', 'color:blue']);
      const pressed = await owner.post(`/api/v1/bots/my/${b.id}/test-callback-queries`, { message_id: menu!.message!.messageId, callback_data: 'color:blue' });
      expect(pressed.status).toBe(201);
      const answer = await until(async () => feed.messages.find((m) => m.callbackQueryAnswer?.callbackQueryId === pressed.body.callback_query_id), Boolean, 15_000);
      expect(presses).toEqual(['blue']);
      expect(answer!.callbackQueryAnswer).toMatchObject({ chatId: 100000001, messageId: menu!.message!.messageId, userId: 100000001, text: 'You picked blue', showAlert: false });
    } finally {
      await bot.stop();
      await started;
    }
  });

  it('a webhook set on the Telegram surface gets callback_query in Telegram\'s shape, the native one in the native shape', async () => {
    receiver = await startReceiver(pki);
    const tgBot = await botWithKeyboard('cbq_hook_tg', 7101);
    const nativeBot = await botWithKeyboard('cbq_hook_native', 7102);
    expect((await call(h.url, 'POST', `/bot${tgBot.token}/setWebhook`, { body: { url: `${receiver.url}/tg`, secret_token: 'tg_secret' } })).body.result).toBe(true);
    expect((await rt(nativeBot.token, 'setWebhook', { url: `${receiver.url}/native`, secret_token: 'native_secret' })).body.result).toBe(true);
    await ingest([press(tgBot, 'yes'), press(nativeBot, 'no')]);
    await until(async () => receiver!.received.length, (n) => n >= 2, 15_000);
    const body = (path: string) => JSON.parse(receiver!.received.find((r) => (r.headers['x-telegram-bot-api-secret-token'] === 'tg_secret') === (path === '/tg'))!.raw.toString());
    expect(body('/tg')).toEqual({
      update_id: 2,
      callback_query: {
        id: expect.stringMatching(/^\d+$/), from: { id: 7101, is_bot: false, first_name: 'Ann', username: 'user7101' },
        message: expect.objectContaining({ message_id: tgBot.messageId, text: 'Continue?', reply_markup: expect.objectContaining({ inline_keyboard: expect.any(Array) }) }),
        chat_instance: expect.any(String), data: 'yes',
      },
    });
    expect(body('/native')).toMatchObject({ update_seq: 2, callback_query: { data: 'no', message: { message_id: nativeBot.messageId, reply_markup: { inline_keyboard: [{ buttons: expect.any(Array) }, expect.anything()] } } } });
  });

  it('a press carries the message as it is now: edited text and buttons; a removed button or a deleted message cannot be pressed', async () => {
    const bot = await botWithKeyboard('cbq_after_edit', 7201);
    const edited = await rt(bot.token, 'editMessageText', {
      chat_id: 7201, message_id: bot.messageId, text: '<b>Sure?</b>', parse_mode: 'HTML',
      reply_markup: { inline_keyboard: [{ buttons: [{ text: 'Really', callback_data: 'really' }] }] },
    });
    expect(edited.status).toBe(200);
    expect((await refusal([press(bot, 'yes')])).fields).toEqual(['updates[0].callback_query.data']);
    await ingest([press(bot, 'really')]);
    const [u] = await poll(bot.token);
    expect(u!.callback_query.message).toMatchObject({
      message_id: bot.messageId, text: 'Sure?', entities: [{ type: 'bold', offset: 0, length: 5 }], edit_date: edited.body.result.edit_date,
      reply_markup: { inline_keyboard: [{ buttons: [{ text: 'Really', callback_data: 'really' }] }] },
    });
    // The keyboard taken away: no button to press.
    expect((await rt(bot.token, 'editMessageReplyMarkup', { chat_id: 7201, message_id: bot.messageId })).status).toBe(200);
    expect((await refusal([press(bot, 'really')])).fields).toEqual(['updates[0].callback_query.data']);
    // Deleted: no message to press.
    expect((await rt(bot.token, 'deleteMessage', { chat_id: 7201, message_id: bot.messageId })).body.result).toBe(true);
    expect((await refusal([press(bot, 'really')])).fields).toEqual(['updates[0].callback_query.message.message_id']);
    const console = await owner.post(`/api/v1/bots/my/${bot.id}/test-callback-queries`, { chat_id: 7201, message_id: bot.messageId, callback_data: 'really' });
    expect(console.status).toBe(404);
  });

  it('an edit of a received message is what later replies and forwards carry; a deleted message cannot be edited', async () => {
    const bot = await botWithKeyboard('cbq_edit_reply', 7301);
    // Sent a minute ago (a bot deletes messages of a private chat within 48 hours).
    const date = Math.floor(Date.now() / 1000) - 60;
    const original = { messageId: 50, date, chat: { id: 7301, type: 'private' }, from: user(7301), text: 'helo' };
    await ingest([{ botId: bot.id, message: original }]);
    await ingest([{ botId: bot.id, editedMessage: { ...original, text: 'hello', editDate: date + 30 } }]);
    await poll(bot.token);
    const reply = await rt(bot.token, 'sendMessage', { chat_id: 7301, text: 'hi', reply_to_message_id: 50 });
    expect(reply.body.result.reply_to_message).toMatchObject({ message_id: 50, text: 'hello', edit_date: date + 30, date });
    const forwarded = await rt(bot.token, 'forwardMessage', { chat_id: 7301, from_chat_id: 7301, message_id: 50 });
    expect(forwarded.body.result).toMatchObject({ text: 'hello' });
    expect((await rt(bot.token, 'deleteMessage', { chat_id: 7301, message_id: 50 })).body.result).toBe(true);
    expect((await refusal([{ botId: bot.id, editedMessage: { ...original, text: 'again' } }])).fields).toEqual(['updates[0].edited_message.message_id']);
  });

  it('edited_message names a message the bot received: edit_date defaults to now, the original date is kept', async () => {
    const bot = await botWithKeyboard('cbq_edits', 6901);
    const original = { messageId: 40, date: 1_700_000_000, chat: { id: 6901, type: 'private' }, from: user(6901), text: 'helo' };
    await ingest([{ botId: bot.id, message: original }]);
    const [m] = await poll(bot.token);
    expect(m!.message).toMatchObject({ message_id: 40, text: 'helo' });
    await ingest([{ botId: bot.id, editedMessage: { ...original, date: 0, text: 'hello /start' } }]);
    const [e] = await poll(bot.token);
    expect(e!.edited_message).toMatchObject({ message_id: 40, date: 1_700_000_000, text: 'hello /start', entities: [{ type: 'bot_command', offset: 6, length: 6 }] });
    expect(Math.abs(e!.edited_message.edit_date - Date.now() / 1000)).toBeLessThan(10);

    for (const [messageId, chatId] of [[41, 6901], [40, 6902], [bot.messageId, 6901]]) {
      const r = await refusal([{ botId: bot.id, editedMessage: { ...original, messageId, chat: { id: chatId, type: 'private' } } }]);
      expect(r.fields).toEqual(['updates[0].edited_message.message_id']);
    }
    const noId = await refusal([{ botId: bot.id, editedMessage: { ...original, messageId: 0 } }]);
    expect(noId.fields).toContain('updates[0].edited_message.message_id');
  });

  it('an edit may follow its message in the same batch (and a reply may name it): each sees the batch\'s newest copy, the last edit is stored', async () => {
    const bot = await botWithKeyboard('cbq_batch_edit', 7401);
    const date = Math.floor(Date.now() / 1000) - 60;
    const original = { messageId: 70, date, chat: { id: 7401, type: 'private' }, from: user(7401), text: 'helo' };
    const res = await ingest([
      { botId: bot.id, message: original },
      { botId: bot.id, editedMessage: { ...original, date: 0, text: 'hello', editDate: date + 10 } },
      { botId: bot.id, message: { messageId: 71, date, chat: original.chat, from: original.from, text: 'see above', replyToMessageId: 70 } },
      { botId: bot.id, editedMessage: { ...original, date: 0, text: 'hello!', editDate: date + 20 } },
    ]);
    expect(res.results).toHaveLength(4);
    const updates = await poll(bot.token);
    expect(updates.map((u) => Object.keys(u).find((k) => k !== 'update_id' && k !== 'update_seq'))).toEqual(['message', 'edited_message', 'message', 'edited_message']);
    // The edit keeps the date of the message it edits, brought in by the same batch.
    expect(updates[1]!.edited_message).toMatchObject({ message_id: 70, date, text: 'hello', edit_date: date + 10 });
    expect(updates[2]!.message.reply_to_message).toMatchObject({ message_id: 70, text: 'hello', edit_date: date + 10 });
    expect(updates[3]!.edited_message).toMatchObject({ message_id: 70, date, text: 'hello!', edit_date: date + 20 });
    // Stored as the last edit left it.
    const reply = await rt(bot.token, 'sendMessage', { chat_id: 7401, text: 'hi', reply_to_message_id: 70 });
    expect(reply.body.result.reply_to_message).toMatchObject({ message_id: 70, text: 'hello!', edit_date: date + 20 });
    // An edit before its message, in the batch, names nothing yet: the whole batch is refused.
    const early = { messageId: 72, date, chat: original.chat, from: original.from, text: 'late' };
    const r = await refusal([{ botId: bot.id, editedMessage: { ...early, text: 'edited' } }, { botId: bot.id, message: early }]);
    expect(r.fields).toEqual(['updates[0].edited_message.message_id']);
    expect(await poll(bot.token)).toEqual([]);
  });
});
