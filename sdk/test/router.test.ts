/**
 * createBot's router against the real service: commands the service marks with
 * bot_command entities (a test user's /start, /help@bot args, a command for another
 * bot), the fallback handler, polling and an HTTPS webhook receiver feeding the same
 * router; the replies read back through the console's ListChatMessages.
 */
import https from 'node:https';
import * as grpc from '@grpc/grpc-js';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InternalServiceClient, IngestUpdatesRequest } from '../../src/gen/botplatform/v1/internal_service.js';
import { openFeed } from '../../test/helpers/feed-consumer.js';
import { startHarness, TEST_INTERNAL_TOKEN, type Harness } from '../../test/helpers/harness.js';
import { createTestPki, type TestPki } from '../../test/helpers/tls.js';
import { createBot, inlineKeyboard, parseCommand, type Bot, type Message } from '../src/index.js';
import { sdkAccount, until, type SdkAccount, type TestBot } from './helpers.js';

describe('router', () => {
  let h: Harness;
  let pki: TestPki;
  let account: SdkAccount;
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_TIMEOUT_MS: '2000' });
    account = await sdkAccount(h, 'sdk-router');
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
    await h?.close();
  });

  const CHAT = 100_000_001; // the console's default test chat
  const say = (b: TestBot, text: string) => account.console.createTestUpdate({ id: b.id, text });
  /** The bot's messages in the test chat, oldest first. */
  const replies = async (b: TestBot): Promise<Message[]> =>
    (await account.console.listChatMessages({ id: b.id, chat_id: CHAT, limit: 100 })).items.reverse();

  /** A bot answering /start, /help and anything else, the way the docs show it. */
  function commandBot(b: TestBot): { bot: Bot; seen: string[] } {
    const seen: string[] = [];
    const bot = createBot(b.token, { baseUrl: h.url });
    bot.command('start', async (ctx) => {
      seen.push(`start:${ctx.args}`);
      await ctx.reply('<b>Welcome</b>, pick one', {
        parse_mode: 'HTML',
        reply_markup: inlineKeyboard([[{ text: 'Yes', callback_data: 'vote:yes' }, { text: 'No', callback_data: 'vote:no' }]]),
      });
    });
    bot.command(['help', 'h'], async (ctx) => {
      seen.push(`${ctx.command}:${ctx.args}`);
      await ctx.reply(`help on ${ctx.args || 'everything'}`);
    });
    bot.on('message', async (ctx) => {
      seen.push(`text:${ctx.message?.text}`);
      await ctx.reply(`you said ${ctx.message?.text}`);
    });
    return { bot, seen };
  }

  it('routes commands by their bot_command entity, with arguments and /cmd@username, over polling', async () => {
    const b = await account.approvedBot('sdk_router_poll');
    const { bot, seen } = commandBot(b);
    const stop = new AbortController();
    const run = bot.start({ signal: stop.signal, timeoutSeconds: 5 });
    try {
      for (const text of ['/start', '/help@sdk_router_poll payments and refunds', '/h', '/help@someone_else_bot x', 'plain words', '/unknown']) await say(b, text);
      await until(async () => seen.length, (n) => n >= 6);
      expect(seen).toEqual([
        'start:', 'help:payments and refunds', 'h:', 'text:/help@someone_else_bot x', 'text:plain words', 'text:/unknown',
      ]);
      const sent = await until(() => replies(b), (m) => m.length >= 6);
      expect(sent.map((m) => m.text)).toEqual([
        'Welcome, pick one', 'help on payments and refunds', 'help on everything', 'you said /help@someone_else_bot x', 'you said plain words', 'you said /unknown',
      ]);
      expect(sent[0]).toMatchObject({
        entities: [{ type: 'bold', offset: 0, length: 7 }],
        reply_markup: { inline_keyboard: [{ buttons: [{ text: 'Yes', callback_data: 'vote:yes' }, { text: 'No', callback_data: 'vote:no' }] }] },
      });
    } finally {
      stop.abort();
      await run;
    }
  });

  it('feeds the same router from an HTTPS webhook receiver (bot.webhookHandler)', async () => {
    const b = await account.approvedBot('sdk_router_hook');
    const { bot, seen } = commandBot(b);
    const server = https.createServer({ key: pki.key, cert: pki.cert }, bot.webhookHandler({ secret: 'router_hook_secret' }));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }));
    await b.bot.setWebhook({ url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, secret_token: 'router_hook_secret' });
    await say(b, '/help webhooks');
    await until(async () => seen.length, (n) => n >= 1);
    expect(seen).toEqual(['help:webhooks']);
    expect((await until(() => replies(b), (m) => m.length >= 1)).map((m) => m.text)).toEqual(['help on webhooks']);
  });

  it('routes button presses by callback_data (string or RegExp): answered, the message edited; an unanswered query is answered after its handler', async () => {
    const b = await account.approvedBot('sdk_router_buttons');
    // The bot's own calls, each recorded once the service has answered it (so that a wait on the
    // record does not race the call still on its way).
    const answers: { callback_query_id: string; text?: string }[] = [];
    const recording: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (String(input).endsWith('/answerCallbackQuery')) answers.push(JSON.parse(String(init?.body)));
      return response;
    };
    const bot = createBot(b.token, { baseUrl: h.url, fetch: recording });
    const seen: string[] = [];
    bot.command('start', (ctx) => ctx.reply('Vote', { reply_markup: inlineKeyboard([[{ text: 'Yes', callback_data: 'vote:yes' }, { text: 'Later', callback_data: 'later' }]]) }));
    bot.callbackQuery('later', (ctx) => void seen.push(`later:${ctx.data}`)); // leaves the query unanswered
    bot.callbackQuery(/^vote:(\w+)$/, async (ctx) => {
      seen.push(`vote:${ctx.match[1]}:${ctx.from?.id}`);
      expect(await ctx.answer({ text: 'Thanks' })).toBe(true);
      await ctx.editMessageText(`Voted <b>${ctx.match[1]}</b>`, { parse_mode: 'HTML' });
    });
    const stop = new AbortController();
    const run = bot.start({ signal: stop.signal, timeoutSeconds: 5 });
    try {
      await say(b, '/start');
      const [menu] = await until(() => replies(b), (m) => m.length >= 1);
      const yes = await account.console.createTestCallbackQuery({ id: b.id, message_id: menu!.message_id, callback_data: 'vote:yes' });
      expect(yes.callback_query_id).not.toBe('');
      const edited = await until(() => replies(b), (m) => m[0]?.text === 'Voted yes');
      expect(edited[0]).toMatchObject({ message_id: menu!.message_id, entities: [{ type: 'bold', offset: 6, length: 3 }] });
      expect(edited[0]!.edit_date).toBeGreaterThan(0);
      expect(edited[0]!.reply_markup?.inline_keyboard ?? []).toEqual([]); // an edit without reply_markup removes the keyboard, as Telegram does
      expect(seen).toEqual([`vote:yes:${CHAT}`]);
      // An answered query cannot be answered again.
      await expect(b.bot.answerCallbackQuery({ callback_query_id: yes.callback_query_id })).rejects.toMatchObject({ httpStatus: 400 });

      await account.console.createTestUpdate({ id: b.id, text: '/start' });
      const menus = await until(() => replies(b), (m) => m.length >= 2);
      const later = await account.console.createTestCallbackQuery({ id: b.id, message_id: menus[1]!.message_id, callback_data: 'later' });
      await until(async () => seen.length, (n) => n >= 2);
      expect(seen[1]).toBe('later:later');
      // The router answered it, empty, once the handler returned.
      await until(async () => answers.length, (n) => n >= 2);
      expect(answers).toEqual([{ callback_query_id: yes.callback_query_id, text: 'Thanks' }, { callback_query_id: later.callback_query_id }]);
      await expect(b.bot.answerCallbackQuery({ callback_query_id: later.callback_query_id })).rejects.toMatchObject({ httpStatus: 400 });
    } finally {
      stop.abort();
      await run;
    }
  });

  it('routes inline queries by their text and answers them (a messaging service asks over InternalService; the answer reaches the feed)', async () => {
    const b = await account.approvedBot('sdk_router_inline');
    await account.console.updateMyBot({ id: b.id, bot: { supports_inline_queries: true } });
    const internal = new InternalServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    const feed = openFeed(h.grpcAddress, 'sdk-router-inline');
    closers.push(async () => { feed.kill(); internal.close(); });
    await feed.waitFor(() => feed.partitions().length === 16);
    const ask = (query: string) => new Promise<void>((resolve, reject) => {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
      internal.ingestUpdates(IngestUpdatesRequest.fromPartial({
        updates: [{ botId: b.id, inlineQuery: { from: { id: 7001, isBot: false, firstName: 'Ann' }, query, offset: '', chatType: 'private' } }],
      }), md, (err) => (err ? reject(err) : resolve()));
    });

    const bot = createBot(b.token, { baseUrl: h.url });
    const other: string[] = [];
    bot.inlineQuery(/^weather (\w+)$/, (ctx) => ctx.answer([
      { type: 'article', id: `w-${ctx.match[1]}`, title: `Weather in ${ctx.match[1]}`, input_message_content: { message_text: `<b>${ctx.match[1]}</b>: sunny`, parse_mode: 'HTML' } },
    ], { cache_time: 10, is_personal: true }));
    bot.on('inline_query', (ctx) => { other.push(ctx.inlineQuery.query); return ctx.answer([]); });
    const stop = new AbortController();
    const run = bot.start({ signal: stop.signal, timeoutSeconds: 5 });
    try {
      await ask('weather Oslo');
      await ask('something else');
      await feed.waitFor(() => feed.messages.filter((m) => m.inlineQueryAnswer).length >= 2);
      const answers = feed.messages.filter((m) => m.inlineQueryAnswer && m.botId === b.id).map((m) => m.inlineQueryAnswer!);
      expect(answers[0]).toMatchObject({ userId: 7001, cacheTime: 10, isPersonal: true, results: [{ type: 'article', id: 'w-Oslo', title: 'Weather in Oslo' }] });
      expect(answers[0]!.results[0]!.inputMessageContent).toMatchObject({ messageText: 'Oslo: sunny', entities: [{ type: 'bold', offset: 0, length: 4 }] });
      expect(answers[1]!.results).toEqual([]);
      expect(other).toEqual(['something else']);
    } finally {
      stop.abort();
      await run;
    }
  });

  it('parseCommand reads the entity at offset 0 in UTF-16 units, of a text or a caption, and nothing else', () => {
    const msg = (text: string, entities: Message['entities'], caption = false): Message => ({
      message_id: 1, date: 0, entities: caption ? [] : entities, caption_entities: caption ? entities : [], ...(caption ? { caption: text } : { text }),
    });
    expect(parseCommand(msg('/start@my_bot  deep-link', [{ type: 'bot_command', offset: 0, length: 13 }]))).toEqual({ command: 'start', username: 'my_bot', args: 'deep-link' });
    expect(parseCommand(msg('/say 😀 hi', [{ type: 'bot_command', offset: 0, length: 4 }]))).toEqual({ command: 'say', username: undefined, args: '😀 hi' });
    expect(parseCommand(msg('/photo nice', [{ type: 'bot_command', offset: 0, length: 6 }], true))).toEqual({ command: 'photo', username: undefined, args: 'nice' });
    // A command later in the text, or a slash without the entity, is not a command.
    expect(parseCommand(msg('see /start', [{ type: 'bot_command', offset: 4, length: 6 }]))).toBeUndefined();
    expect(parseCommand(msg('/start', []))).toBeUndefined();
  });
});
