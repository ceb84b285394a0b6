/**
 * The frameworks' own example bots (issue 33), written as telegraf's, grammY's and
 * node-telegram-bot-api's documentation writes them, with only the API root and the token
 * changed: a /start and /help command bot; an inline-keyboard bot (a button press, made by
 * the console's test tool, arrives as a callback_query, is answered, and edits the message;
 * one button deletes it); HTML and MarkdownV2 replies with the entities Telegram returns; a
 * "typing…, then answer" handler; a document keeping its name; telegraf in webhook mode,
 * where its first reply travels in the webhook's answer (webhookReply). What the messaging
 * services see on the outbound feed is asserted for each: the keyboard, the callback
 * answer, the edit, the delete, the chat action. SQLite, and MariaDB + Kafka when the
 * integration pass sets them.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Bot as GrammyBot, InlineKeyboard, InputFile, webhookCallback } from 'grammy';
import { Bot as NtbaBot, InlineKeyboardBuilder } from 'node-telegram-bot-api';
import { Markup, Telegraf } from 'telegraf';
import { message } from 'telegraf/filters';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SentMessage } from '../src/gen/botplatform/v1/internal_service.js';
import { openFeed, type FeedConsumer } from './helpers/feed-consumer.js';
import { approvedBot, client, startHarness, type Harness } from './helpers/harness.js';
import { createTestPki, type TestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

/** The console's test chat, where test updates and button presses come from. */
const TEST_CHAT = 100000001;

describe('the frameworks\' example bots on the Telegram surface', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  let feed: FeedConsumer;
  let pki: TestPki;

  beforeAll(async () => {
    pki = createTestPki();
    // Bots in a test do in a second what real ones spread out: clear of the per-bot rate limit.
    h = await startHarness('in-process', { RATE_LIMIT_BOT: '1000/1s', WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile });
    ownerJwt = await h.jwt('examples-owner');
    owner = client(h.url, ownerJwt);
    feed = openFeed(h.grpcAddress, 'examples');
    await feed.waitFor(() => feed.assigned());
  });
  afterAll(async () => {
    feed?.kill();
    await h?.close();
  });

  /** A bot, and what the messaging services see of it on the feed. */
  async function example(username: string) {
    const bot = await approvedBot(h, ownerJwt, username);
    const events = () => feed.messages.filter((m) => m.botId === bot.id);
    return {
      ...bot,
      say: async (text: string) => expect((await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text })).status).toBe(201),
      press: async (messageId: number, data: string) => {
        const res = await owner.post(`/api/v1/bots/my/${bot.id}/test-callback-queries`, { message_id: messageId, callback_data: data });
        expect(res.status).toBe(201);
        return res.body.callback_query_id as string;
      },
      events,
      /** Waits for the first feed event of this bot that `pick` finds. */
      seen: <T>(pick: (m: SentMessage) => T | undefined, ms = 15_000) =>
        until(async () => events().map(pick).find((x) => x !== undefined), Boolean, ms) as Promise<T>,
    };
  }

  it('telegraf: bot.start and bot.help (its README\'s bot), HTML and MarkdownV2 replies with their entities', async () => {
    const b = await example('tf_commands');
    const bot = new Telegraf(b.token, { telegram: { apiRoot: h.url } });
    const formatted: unknown[] = [];
    bot.start((ctx) => ctx.reply('Welcome'));
    bot.help((ctx) => ctx.reply('Send me a sticker'));
    bot.command('html', async (ctx) => formatted.push(await ctx.replyWithHTML('<b>Bold</b> and <a href="https://example.com/">a link</a>')));
    bot.command('md', async (ctx) => formatted.push(await ctx.replyWithMarkdownV2('*bold* _italic_ `code` \\(escaped\\)')));
    bot.on(message('text'), (ctx) => ctx.reply(`You said: ${ctx.message.text}`));
    const launched = bot.launch({ dropPendingUpdates: false });
    try {
      for (const t of ['/start', '/help', 'hello', '/html', '/md']) await b.say(t);
      await until(async () => formatted.length, (n) => n === 2, 15_000);
      const texts = await until(async () => b.events().filter((m) => m.message).map((m) => m.message!.text), (t) => t.length === 5, 15_000);
      // telegraf handles a polled batch's updates side by side: the replies come in any order.
      expect(texts).toEqual(expect.arrayContaining(['Welcome', 'Send me a sticker', 'You said: hello']));
    } finally {
      bot.stop();
      await launched.catch(() => {});
    }
    expect(formatted).toEqual([
      expect.objectContaining({
        text: 'Bold and a link',
        entities: [{ type: 'bold', offset: 0, length: 4 }, { type: 'text_link', offset: 9, length: 6, url: 'https://example.com/' }],
      }),
      expect.objectContaining({
        text: 'bold italic code (escaped)',
        entities: [{ type: 'bold', offset: 0, length: 4 }, { type: 'italic', offset: 5, length: 6 }, { type: 'code', offset: 12, length: 4 }],
      }),
    ]);
  }, 40_000);

  it('telegraf: an inline keyboard (Markup.inlineKeyboard), bot.action answers the press and edits the message; the feed carries each', async () => {
    const b = await example('tf_keyboard');
    const bot = new Telegraf(b.token, { telegram: { apiRoot: h.url } });
    bot.command('drink', (ctx) => ctx.reply('What would you like?', Markup.inlineKeyboard([
      Markup.button.callback('Coke', 'Coke'), Markup.button.callback('Pepsi', 'Pepsi'),
    ])));
    bot.action(/.+/, async (ctx) => {
      await ctx.answerCbQuery(`Oh, ${ctx.match[0]}! Great choice`);
      await ctx.editMessageText(`You chose ${ctx.match[0]}`);
    });
    const launched = bot.launch();
    try {
      await b.say('/drink');
      const menu = await b.seen((m) => m.message);
      expect(menu.text).toBe('What would you like?');
      expect(menu.replyMarkup?.inlineKeyboard[0]!.buttons.map((x) => [x.text, x.callbackData])).toEqual([['Coke', 'Coke'], ['Pepsi', 'Pepsi']]);
      const id = await b.press(menu.messageId, 'Pepsi');
      const answer = await b.seen((m) => m.callbackQueryAnswer);
      expect(answer).toMatchObject({ callbackQueryId: id, chatId: TEST_CHAT, messageId: menu.messageId, text: 'Oh, Pepsi! Great choice' });
      const edited = await b.seen((m) => m.editedMessage);
      expect(edited).toMatchObject({ messageId: menu.messageId, text: 'You chose Pepsi' });
      expect(edited.editDate).toBeGreaterThan(0);
    } finally {
      bot.stop();
      await launched.catch(() => {});
    }
  }, 40_000);

  it('telegraf in webhook mode: its first reply travels in the webhook\'s answer (webhookReply, on by default) and is sent as the bot', async () => {
    const b = await example('tf_hook');
    const bot = new Telegraf(b.token, { telegram: { apiRoot: h.url } });
    let answered = 0;
    bot.on(message('text'), async (ctx) => {
      // With webhookReply, this call is written into the HTTP answer, not made: it returns at once.
      await ctx.reply(`echo: ${ctx.message.text}`);
      answered++;
    });
    const handle = bot.webhookCallback('/telegraf', { secretToken: 'tf_hook_secret' });
    const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => void handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/telegraf`;
      expect(await bot.telegram.setWebhook(url, { secret_token: 'tf_hook_secret' })).toBe(true);
      await b.say('over the webhook');
      const sent = await b.seen((m) => m.message);
      expect(answered).toBe(1);
      expect(sent).toMatchObject({ text: 'echo: over the webhook', chat: { id: TEST_CHAT } });
      const deliveries = await until(() => owner.get(`/api/v1/bots/my/${b.id}/deliveries`), (r) => r.body.items?.[0]?.status === 'succeeded');
      expect(deliveries.body.items).toHaveLength(1);
    } finally {
      await new Promise((r) => server.close(r));
    }
  }, 40_000);

  it('grammY in webhook mode with canUseWebhookReply: its reply travels in the webhook\'s answer and is sent as the bot', async () => {
    const b = await example('grammy_hook_reply');
    const bot = new GrammyBot(b.token, { client: { apiRoot: h.url, canUseWebhookReply: (method) => method === 'sendMessage' } });
    bot.on('message:text', (ctx) => ctx.reply(`echo: ${ctx.message.text}`, { parse_mode: 'HTML' }));
    const handle = webhookCallback(bot, 'https', { secretToken: 'grammy_reply_secret' });
    const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => void handle(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/grammy`;
      expect(await bot.api.setWebhook(url, { secret_token: 'grammy_reply_secret' })).toBe(true);
      await b.say('<b>over</b> the webhook');
      const sent = await b.seen((m) => m.message);
      expect(sent).toMatchObject({ text: 'echo: over the webhook', chat: { id: TEST_CHAT } });
      expect(sent.entities).toEqual([expect.objectContaining({ type: 'bold', offset: 6, length: 4 })]);
    } finally {
      await new Promise((r) => server.close(r));
    }
  }, 40_000);

  it('grammY: a menu whose buttons edit the message or delete it, a "typing…, then answer" handler, a document keeping its name', async () => {
    const b = await example('grammy_menu');
    const bot = new GrammyBot(b.token, { client: { apiRoot: h.url } });
    const menu = new InlineKeyboard().text('Next', 'next').text('Delete', 'delete');
    let page = 1;
    bot.command('menu', (ctx) => ctx.reply(`Page ${page}`, { reply_markup: menu }));
    bot.callbackQuery('next', async (ctx) => {
      page++;
      await ctx.editMessageText(`Page ${page}`, { reply_markup: menu });
      await ctx.answerCallbackQuery();
    });
    bot.callbackQuery('delete', async (ctx) => {
      await ctx.deleteMessage();
      await ctx.answerCallbackQuery({ text: 'Deleted' });
    });
    bot.command('slow', async (ctx) => {
      await ctx.replyWithChatAction('typing');
      await new Promise((r) => setTimeout(r, 100));
      await ctx.reply('Done thinking');
    });
    bot.command('doc', (ctx) => ctx.replyWithDocument(new InputFile(Buffer.from('%PDF-1.4 report'), 'report Q3.pdf'), { caption: 'The report' }));
    bot.catch((err) => {
      throw err.error;
    });
    const started = bot.start({ timeout: 1 });
    try {
      await b.say('/menu');
      const shown = await b.seen((m) => m.message);
      expect(shown.replyMarkup?.inlineKeyboard[0]!.buttons.map((x) => x.callbackData)).toEqual(['next', 'delete']);
      await b.press(shown.messageId, 'next');
      const edited = await b.seen((m) => m.editedMessage);
      expect(edited).toMatchObject({ messageId: shown.messageId, text: 'Page 2' });
      expect(edited.replyMarkup?.inlineKeyboard[0]!.buttons.map((x) => x.callbackData)).toEqual(['next', 'delete']);
      await b.press(shown.messageId, 'delete');
      const deleted = await b.seen((m) => m.deletedMessages);
      expect(deleted).toEqual({ chatId: TEST_CHAT, messageIds: [shown.messageId] });
      await until(async () => b.events().filter((m) => m.callbackQueryAnswer).length, (n) => n === 2, 15_000);
      expect(b.events().filter((m) => m.callbackQueryAnswer).map((m) => m.callbackQueryAnswer!.text)).toEqual([undefined, 'Deleted']);

      // Typing, then the answer: the action comes first on the feed.
      await b.say('/slow');
      await until(async () => b.events().some((m) => m.message?.text === 'Done thinking'), Boolean, 15_000);
      const after = b.events().slice(b.events().findIndex((m) => m.chatAction));
      expect(after[0]!.chatAction).toEqual({ chatId: TEST_CHAT, action: 'typing' });
      expect(after.findIndex((m) => m.message?.text === 'Done thinking')).toBeGreaterThan(0);

      // A document uploaded by grammY keeps its name (multipart filename), also in the feed.
      await b.say('/doc');
      const doc = await until(async () => b.events().find((m) => m.message?.document), Boolean, 15_000);
      expect(doc!.message!.document).toMatchObject({ fileName: 'report Q3.pdf', fileSize: 15 });
      expect(doc!.message!.caption).toBe('The report');
    } finally {
      await bot.stop();
      await started;
    }
  }, 60_000);

  it('node-telegram-bot-api: its README\'s keyboard bot, a tapped button answered and the message edited', async () => {
    const b = await example('ntba_keyboard');
    const bot = new NtbaBot(b.token, { apiRoot: h.url });
    bot.command('start', (ctx) => ctx.reply('Hi! Send me anything.'));
    bot.on('message', (ctx) => ctx.reply('Pick one:', { reply_markup: new InlineKeyboardBuilder().text('👍', 'up').text('👎', 'down').build() }));
    bot.on('callback_query', async (ctx) => {
      await ctx.answerCallbackQuery({ text: `You tapped ${ctx.callbackQuery!.data}` });
      const m = ctx.callbackQuery!.message!;
      await ctx.api.editMessageText({ chat_id: m.chat.id, message_id: m.message_id, text: `Picked ${ctx.callbackQuery!.data}` });
    });
    const errors: unknown[] = [];
    bot.catch((err) => errors.push(err));
    const polling = bot.startPolling(undefined, { timeout: 1 });
    try {
      await b.say('/start');
      await b.say('anything');
      const texts = await until(async () => b.events().filter((m) => m.message).map((m) => m.message!), (t) => t.length === 2, 15_000);
      expect(texts.map((m) => m.text)).toEqual(['Hi! Send me anything.', 'Pick one:']);
      const pick = texts[1]!;
      expect(pick.replyMarkup?.inlineKeyboard[0]!.buttons.map((x) => [x.text, x.callbackData])).toEqual([['👍', 'up'], ['👎', 'down']]);
      const id = await b.press(pick.messageId, 'down');
      expect(await b.seen((m) => m.callbackQueryAnswer)).toMatchObject({ callbackQueryId: id, text: 'You tapped down' });
      expect(await b.seen((m) => m.editedMessage)).toMatchObject({ messageId: pick.messageId, text: 'Picked down' });
      expect(errors).toEqual([]);
    } finally {
      bot.stop();
      await polling.catch(() => {});
    }
  }, 40_000);
});
