/**
 * Inline mode (issue 33): inline_query updates for bots with supports_inline_queries, and
 * answerInlineQuery, over real gRPC (ingest, the outbound feed) and HTTP (the native API
 * and the Telegram surface, whose InlineQueryResultArticle, CachedPhoto and
 * CachedDocument map to the platform's results). An answer reaches the messaging
 * services on the feed, in the asking user's partition, with its texts parsed; its
 * results are checked as Telegram checks them; it is given once, in time, by the bot
 * asked. Runs on SQLite, and on MariaDB + Kafka when the integration pass sets them.
 */
import crypto from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { Bot } from 'grammy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InternalServiceClient, IngestUpdatesRequest, type IngestUpdatesResponse } from '../src/gen/botplatform/v1/internal_service.js';
import { fromServiceError } from '../src/grpc/status-details.js';
import { openFeed, type FeedConsumer } from './helpers/feed-consumer.js';
import { approvedBot, call, client, startHarness, TEST_INTERNAL_TOKEN, type Harness } from './helpers/harness.js';
import { until } from './helpers/until.js';

const TOO_OLD = 'query is too old and response timeout expired or query ID is invalid';

describe('inline queries', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  let internal: InternalServiceClient;
  let feed: FeedConsumer;

  beforeAll(async () => {
    h = await startHarness('in-process', { LIMITS_ENABLED: 'false' });
    ownerJwt = await h.jwt('inline-owner');
    owner = client(h.url, ownerJwt);
    internal = new InternalServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    feed = openFeed(h.grpcAddress, 'inline-tests');
    await feed.waitFor(() => feed.partitions().length === 16);
  });
  afterAll(async () => {
    feed?.kill();
    internal?.close();
    await h?.close();
  });

  const ingest = (updates: object[]) => new Promise<IngestUpdatesResponse>((resolve, reject) => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
    internal.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates }), md, (err, res) => (err ? reject(err) : resolve(res!)));
  });
  const rt = (token: string, method: string, body: object = {}) => call(h.url, 'POST', `/api/v1/bots/${method}`, { token, body });
  const tg = (token: string, method: string, body: object = {}) => call(h.url, 'POST', `/bot${token}/${method}`, { body });
  const asked = (botId: string, query: string, extra: object = {}) =>
    ({ botId, inlineQuery: { from: { id: 7001, isBot: false, username: 'asker', firstName: 'Ask' }, query, offset: '', chatType: 'private', ...extra } });

  /** An approved bot in inline mode, with an image and a document of its own. */
  async function inlineBot(username: string) {
    const bot = await approvedBot(h, ownerJwt, username);
    expect((await owner.patch(`/api/v1/bots/my/${bot.id}`, { supports_inline_queries: true })).status).toBe(200);
    const upload = async (bytes: Buffer, fileType: string, fileName: string) => {
      const checksum = crypto.createHash('sha256').update(bytes).digest('hex');
      const cred = (await rt(bot.token, 'files/upload-credentials', { fileName, fileSize: bytes.length, checksum, fileType })).body.result;
      expect((await fetch(cred.uploadUrl, { method: 'PUT', headers: cred.headers, body: new Uint8Array(bytes) })).status).toBe(200);
      return (await rt(bot.token, 'files/complete', { checksum })).body.result.file_id as string;
    };
    const photo = await upload(crypto.randomBytes(100), 'image/png', 'cat.png');
    const document = await upload(crypto.randomBytes(100), 'application/pdf', 'cat.pdf');
    return { ...bot, photo, document };
  }
  /** The bot's next update: an inline query it is asked. */
  async function nextQuery(token: string) {
    const res = await rt(token, 'getUpdates', { timeout: 5 });
    const [u] = res.body.result;
    await rt(token, 'getUpdates', { offset: u.update_seq + 1 });
    return u;
  }
  const answerOf = (id: string) => feed.messages.find((m) => m.inlineQueryAnswer?.inlineQueryId === id);

  it('a bot without inline mode is not asked: FAILED_PRECONDITION, nothing stored', async () => {
    const bot = await approvedBot(h, ownerJwt, 'inline_off');
    const err = await ingest([asked(bot.id, 'cats')]).then(() => undefined, (e: grpc.ServiceError) => e);
    expect(err?.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(err?.details).toBe('updates[0].inline_query: the bot does not take inline queries (its supports_inline_queries is off)');
    expect((await rt(bot.token, 'getUpdates')).body.result).toEqual([]);
  });

  it('an inline query arrives with an id; its answer reaches the feed in the user\'s partition, texts parsed', async () => {
    const bot = await inlineBot('inline_first');
    await ingest([asked(bot.id, 'cats', { offset: 'p2' })]);
    const u = await nextQuery(bot.token);
    expect(u.inline_query).toEqual({
      id: expect.stringMatching(/^\d+$/), from: { id: 7001, is_bot: false, username: 'asker', first_name: 'Ask' }, query: 'cats', offset: 'p2', chat_type: 'private',
    });
    expect(u.message).toBeUndefined();
    const results = [
      { type: 'article', id: 'a1', title: 'Cats', description: 'All about cats', input_message_content: { message_text: '<b>Cats</b> rule', parse_mode: 'HTML' }, url: 'https://example.com/cats' },
      { type: 'photo', id: 'p1', photo_file_id: bot.photo, caption: '*cute*', parse_mode: 'MarkdownV2', reply_markup: { inline_keyboard: [{ buttons: [{ text: 'More', callback_data: 'more' }] }] } },
      { type: 'document', id: 'd1', title: 'Cat facts', document_file_id: bot.document },
    ];
    const res = await rt(bot.token, 'answerInlineQuery', { inline_query_id: u.inline_query.id, results, is_personal: true, next_offset: 'p3', button: { text: 'Open', start_parameter: 'cats' } });
    expect(res.body).toEqual({ ok: true, result: true });
    await feed.waitFor(() => answerOf(u.inline_query.id) !== undefined);
    const event = answerOf(u.inline_query.id)!;
    expect(event.botId).toBe(bot.id);
    const a = event.inlineQueryAnswer!;
    expect(a).toMatchObject({ inlineQueryId: u.inline_query.id, userId: 7001, cacheTime: 300, isPersonal: true, nextOffset: 'p3', button: { text: 'Open', startParameter: 'cats' } });
    expect(a.results.map((r) => r.id)).toEqual(['a1', 'p1', 'd1']);
    expect(a.results[0]!.inputMessageContent).toEqual({ messageText: 'Cats rule', parseMode: undefined, entities: [expect.objectContaining({ type: 'bold', offset: 0, length: 4 })] });
    expect(a.results[1]).toMatchObject({ photoFileId: bot.photo, caption: 'cute', parseMode: undefined, captionEntities: [expect.objectContaining({ type: 'bold', offset: 0, length: 4 })] });
    expect(a.results[1]!.replyMarkup!.inlineKeyboard[0]!.buttons[0]).toMatchObject({ text: 'More', callbackData: 'more' });
    // The user's partition: the one a chat with the user's id has.
    const again = await rt(bot.token, 'answerInlineQuery', { inline_query_id: u.inline_query.id, results: [] });
    expect(again.body).toEqual({ ok: false, error_code: 400, description: `Bad Request: ${TOO_OLD}` });
  });

  it('an inline answer goes to the same partition as the bot\'s messages to that user', async () => {
    const bot = await inlineBot('inline_partition');
    await ingest([{ botId: bot.id, message: { chat: { id: 7001, type: 'private' }, from: { id: 7001, isBot: false }, text: 'hi' } }, asked(bot.id, 'x')]);
    const updates = (await rt(bot.token, 'getUpdates', { timeout: 0 })).body.result;
    const q = updates.find((x: { inline_query?: unknown }) => x.inline_query).inline_query;
    const sent = (await rt(bot.token, 'sendMessage', { chat_id: 7001, text: 'hello' })).body.result;
    expect((await rt(bot.token, 'answerInlineQuery', { inline_query_id: q.id, results: [] })).body.result).toBe(true);
    await feed.waitFor(() => answerOf(q.id) !== undefined);
    const message = feed.messages.find((m) => m.botId === bot.id && m.message?.messageId === sent.message_id)!;
    expect(answerOf(q.id)!.partition).toBe(message.partition);
    expect(answerOf(q.id)!.seq).toBeGreaterThan(message.seq);
  });

  it('refuses results Telegram refuses, naming the result, and the refusal does not use the query up', async () => {
    const bot = await inlineBot('inline_refuse');
    const other = await inlineBot('inline_refuse_b');
    await ingest([asked(bot.id, 'q')]);
    const { inline_query: q } = await nextQuery(bot.token);
    const article = (id: string, extra: object = {}) => ({ type: 'article', id, title: 'T', input_message_content: { message_text: 'x' }, ...extra });
    const cases: [object, string][] = [
      [{ results: [article('same'), article('same')] }, 'results[1].id'],
      [{ results: [article('x'.repeat(65))] }, 'results[0].id'],
      [{ results: [article('')] }, 'results[0].id'],
      [{ results: Array.from({ length: 51 }, (_, i) => article(`r${i}`)) }, 'results'],
      [{ results: [{ type: 'article', id: 'a', title: 'T' }] }, 'results[0].input_message_content'],
      [{ results: [article('a', { title: undefined })] }, 'results[0].title'],
      [{ results: [article('a', { input_message_content: { message_text: '<b>open', parse_mode: 'HTML' } })] }, 'results[0].input_message_content.message_text'],
      [{ results: [{ type: 'photo', id: 'p', photo_file_id: bot.document }] }, 'results[0].photo_file_id'],
      [{ results: [{ type: 'photo', id: 'p', photo_file_id: other.photo }] }, 'results[0].photo_file_id'],
      [{ results: [{ type: 'document', id: 'd', title: 'D', document_file_id: 'nope' }] }, 'results[0].document_file_id'],
      [{ results: [{ type: 'video', id: 'v' }] }, 'results[0].type'],
      [{ results: [article('a', { reply_markup: { keyboard: [{ buttons: [{ text: 'k' }] }] } })] }, 'results[0].reply_markup'],
      [{ results: [], next_offset: 'o'.repeat(65) }, 'next_offset'],
      [{ results: [], button: { text: 'Go', start_parameter: 'bad param' } }, 'button.start_parameter'],
      [{ results: [], cache_time: -1 }, 'cache_time'],
    ];
    for (const [body, field] of cases) {
      const res = await rt(bot.token, 'answerInlineQuery', { inline_query_id: q.id, ...body });
      expect(res.status, field).toBe(400);
      expect(res.body.description, field).toMatch(new RegExp(`^Bad Request: ${field.replace(/[[\].]/g, '\\$&')}: `));
    }
    // Another bot cannot answer it; its own bot still can.
    expect((await rt(other.token, 'answerInlineQuery', { inline_query_id: q.id, results: [] })).body.description).toBe(`Bad Request: ${TOO_OLD}`);
    expect((await rt(bot.token, 'answerInlineQuery', { inline_query_id: q.id, results: [article('ok')], cache_time: 999999 })).body.result).toBe(true);
    await feed.waitFor(() => answerOf(q.id) !== undefined);
    expect(answerOf(q.id)!.inlineQueryAnswer!.cacheTime).toBe(86400);
    // A callback query's answer is not an inline query's.
    expect((await rt(bot.token, 'answerCallbackQuery', { callback_query_id: q.id })).body.description).toBe(`Bad Request: ${TOO_OLD}`);
  });

  it('ingest checks an inline query: a sender, at most 256 characters, a known chat_type', async () => {
    const bot = await inlineBot('inline_checks');
    const refusal = async (update: object) => {
      const err = await ingest([update]).then(() => undefined, (e: grpc.ServiceError) => e);
      expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
      return fromServiceError(err!).details.map((d) => d.field);
    };
    expect(await refusal(asked(bot.id, 'q'.repeat(257)))).toEqual(['updates[0].inline_query.query']);
    expect(await refusal(asked(bot.id, 'q', { from: undefined }))).toContain('updates[0].inline_query.from.id');
    expect(await refusal(asked(bot.id, 'q', { chatType: 'galaxy' }))).toEqual(['updates[0].inline_query.chat_type']);
    expect(await refusal(asked(bot.id, 'q', { offset: 'o'.repeat(65) }))).toEqual(['updates[0].inline_query.offset']);
    const ok = await ingest([asked(bot.id, 'q'.repeat(256), { id: 'svc-inline-1' })]);
    expect(ok.results[0]!.filtered).toBe(false);
    expect((await nextQuery(bot.token)).inline_query.id).toBe('svc-inline-1');
    // allowed_updates filters the kind.
    await rt(bot.token, 'getUpdates', { allowed_updates: ['message'], timeout: 0 });
    expect((await ingest([asked(bot.id, 'filtered')])).results[0]!.filtered).toBe(true);
  });

  it('a grammY bot, unmodified, answers an inline query with bot.inlineQuery and ctx.answerInlineQuery', async () => {
    const b = await inlineBot('inline_grammy');
    const bot = new Bot(b.token, { client: { apiRoot: h.url } });
    bot.inlineQuery(/^cat/, (ctx) => ctx.answerInlineQuery([
      { type: 'article', id: 'fact', title: 'A cat fact', input_message_content: { message_text: `<i>${ctx.inlineQuery.query}</i> purr`, parse_mode: 'HTML' } },
      { type: 'photo', id: 'pic', photo_file_id: b.photo, caption: 'A cat' },
    ], { cache_time: 30, next_offset: '2' }));
    bot.catch((err) => {
      throw err.error;
    });
    const started = bot.start({ timeout: 1 });
    try {
      await ingest([asked(b.id, 'cats please', { id: 'grammy-iq-1' })]);
      const answer = await until(async () => answerOf('grammy-iq-1'), Boolean, 15_000);
      expect(answer!.inlineQueryAnswer).toMatchObject({ userId: 7001, cacheTime: 30, nextOffset: '2' });
      expect(answer!.inlineQueryAnswer!.results[0]!.inputMessageContent).toMatchObject({ messageText: 'cats please purr', entities: [expect.objectContaining({ type: 'italic', offset: 0, length: 11 })] });
      expect(answer!.inlineQueryAnswer!.results[1]).toMatchObject({ type: 'photo', photoFileId: b.photo, caption: 'A cat' });
    } finally {
      await bot.stop();
      await started;
    }
  });

  it('the Telegram surface: inline_query in Telegram\'s shape; answerInlineQuery with Telegram\'s result types, as JSON text too', async () => {
    const bot = await inlineBot('inline_telegram');
    await ingest([asked(bot.id, 'dogs')]);
    const got = (await tg(bot.token, 'getUpdates', { timeout: 5 })).body.result;
    expect(got).toEqual([{ update_id: 1, inline_query: { id: expect.any(String), from: { id: 7001, is_bot: false, first_name: 'Ask', username: 'asker' }, query: 'dogs', offset: '', chat_type: 'private' } }]);
    const id = got[0].inline_query.id;
    const results = [
      { type: 'article', id: '1', title: 'Dogs', input_message_content: { message_text: '*Dogs*', parse_mode: 'MarkdownV2' }, thumb_url: 'https://example.com/t.png' },
      { type: 'photo', id: '2', photo_file_id: bot.photo, caption: '<i>dog</i>', parse_mode: 'HTML', reply_markup: { inline_keyboard: [[{ text: 'Like', callback_data: 'like' }]] } },
      { type: 'document', id: '3', title: 'Dog facts', document_file_id: bot.document, caption_entities: [{ type: 'bold', offset: 0, length: 3 }], caption: 'Dog facts' },
    ];
    // Form-encoded with results as JSON text, as python-telegram-bot and node-telegram-bot-api send it.
    const form = await call(h.url, 'POST', `/bot${bot.token}/answerInlineQuery`, {
      rawBody: new URLSearchParams({ inline_query_id: id, results: JSON.stringify(results), cache_time: '10', switch_pm_text: 'Start', switch_pm_parameter: 'go' }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.body).toEqual({ ok: true, result: true });
    await feed.waitFor(() => answerOf(id) !== undefined);
    const a = answerOf(id)!.inlineQueryAnswer!;
    expect(a).toMatchObject({ cacheTime: 10, button: { text: 'Start', startParameter: 'go' } });
    expect(a.results[0]).toMatchObject({ type: 'article', title: 'Dogs', thumbnailUrl: 'https://example.com/t.png', inputMessageContent: { messageText: 'Dogs', entities: [expect.objectContaining({ type: 'bold' })] } });
    expect(a.results[1]).toMatchObject({ type: 'photo', photoFileId: bot.photo, caption: 'dog', captionEntities: [expect.objectContaining({ type: 'italic' })] });
    expect(a.results[1]!.replyMarkup!.inlineKeyboard[0]!.buttons[0]).toMatchObject({ text: 'Like', callbackData: 'like' });
    expect(a.results[2]).toMatchObject({ type: 'document', documentFileId: bot.document, caption: 'Dog facts', captionEntities: [expect.objectContaining({ type: 'bold', length: 3 })] });

    await ingest([asked(bot.id, 'more')]);
    const second = (await tg(bot.token, 'getUpdates', { offset: 2, timeout: 5 })).body.result[0].inline_query.id;
    const byUrl = await tg(bot.token, 'answerInlineQuery', { inline_query_id: second, results: [{ type: 'photo', id: 'u', photo_url: 'https://example.com/x.jpg', thumbnail_url: 'https://example.com/x.jpg' }] });
    expect(byUrl.status).toBe(400);
    expect(byUrl.body.description).toMatch(/^Bad Request: results\[0\]\.photo_url: /);
    const notJson = await tg(bot.token, 'answerInlineQuery', { inline_query_id: second, results: '[{' });
    expect(notJson.body.description).toMatch(/^Bad Request: results: Can't parse JSON encoded inline query results/);
    expect((await tg(bot.token, 'answerInlineQuery', { inline_query_id: second, results: [] })).body).toEqual({ ok: true, result: true });
  });
});
