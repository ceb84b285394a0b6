/**
 * An unmodified grammY echo bot, configured only with this service's API root and a
 * token: getMe at start, long polling across several batches with offsets confirmed,
 * nothing received twice (also across a restart), and replies with sendMessage; and the
 * same bot in webhook mode, grammY's webhookCallback behind a real HTTPS server.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Bot, GrammyError, InlineKeyboard, InputFile, webhookCallback } from 'grammy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, client, startHarness, type Harness } from './helpers/harness.js';
import { createTestPki, type TestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

/** Waits for cond, failing the test when it does not hold within ms. */
async function waitFor(cond: () => boolean, ms = 10_000) {
  expect(await until(async () => cond(), Boolean, ms)).toBe(true);
}

describe('grammY on the Telegram surface', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  let pki: TestPki;

  beforeAll(async () => {
    pki = createTestPki();
    // Webhooks to this machine's loopback, over TLS the test CA signs.
    // The first test makes about 30 calls of one bot in a few hundred milliseconds (how many
    // depends on how grammY's polls meet the updates): the default 30/1s would refuse the
    // last ones now and then. Rate limits are tested elsewhere (limits, telegram).
    h = await startHarness('in-process', { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_RETRY_SCHEDULE: '200ms', RATE_LIMIT_BOT: '300/1s' });
    ownerJwt = await h.jwt('grammy-owner');
    owner = client(h.url, ownerJwt);
  });
  afterAll(async () => {
    await h?.close();
  });

  function echoBot(token: string) {
    const bot = new Bot(token, { client: { apiRoot: h.url } });
    const received: { updateId: number; text: string }[] = [];
    const replies: { chat: number; text: string; from: number }[] = [];
    bot.on('message:text', async (ctx) => {
      received.push({ updateId: ctx.update.update_id, text: ctx.message.text });
      const sent = await ctx.reply(ctx.message.text);
      replies.push({ chat: sent.chat.id, text: sent.text!, from: sent.from!.id });
    });
    bot.catch((err) => {
      throw err.error;
    });
    return { bot, received, replies };
  }

  it('long-polls several batches, confirms offsets, never sees an update twice, and replies', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'grammy_echo');
    const say = (text: string) => owner.post(`/api/v1/bots/my/${id}/test-updates`, { text, chat_id: 9001 });
    const first = echoBot(token);
    let onStart!: (me: { username: string; id: number }) => void;
    const me = new Promise<{ username: string; id: number }>((r) => (onStart = r));
    const started = first.bot.start({ limit: 2, timeout: 2, onStart });
    expect((await me).username).toBe('grammy_echo');

    for (const t of ['a1', 'a2', 'a3']) expect((await say(t)).status).toBe(201);
    await waitFor(() => first.received.length === 3, 15_000);
    for (const t of ['b1', 'b2', 'b3', 'b4']) await say(t);
    await waitFor(() => first.received.length === 7, 15_000);
    await waitFor(() => first.replies.length === 7, 15_000);
    await first.bot.stop();
    await started;

    expect(first.received.map((r) => r.text)).toEqual(['a1', 'a2', 'a3', 'b1', 'b2', 'b3', 'b4']);
    expect(first.received.map((r) => r.updateId)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(first.replies.map((r) => r.text)).toEqual(['a1', 'a2', 'a3', 'b1', 'b2', 'b3', 'b4']);
    expect(first.replies.every((r) => r.chat === 9001 && r.from === first.bot.botInfo.id)).toBe(true);

    // A restarted bot gets only what is new: the offsets it confirmed hold.
    await say('c1');
    const second = echoBot(token);
    const again = second.bot.start({ timeout: 2, drop_pending_updates: false });
    await waitFor(() => second.received.length >= 1, 15_000);
    await waitFor(() => second.replies.length >= 1, 15_000);
    await second.bot.stop();
    await again;
    expect(second.received).toEqual([{ updateId: 8, text: 'c1' }]);

    // A photo sent as multipart, fetched back with getFile and the file URL; the command menu.
    const bytes = crypto.randomBytes(2048);
    const photo = await second.bot.api.sendPhoto(9001, new InputFile(bytes, 'pic.png'), { caption: 'pic' });
    expect(photo.caption).toBe('pic');
    const file = await second.bot.api.getFile(photo.photo!.at(-1)!.file_id);
    const dl = await fetch(`${h.url}/file/bot${token}/${file.file_path}`);
    expect(Buffer.from(await dl.arrayBuffer()).equals(bytes)).toBe(true);
    await second.bot.api.setMyCommands([{ command: 'start', description: 'Start the bot' }]);
    expect(await second.bot.api.getMyCommands()).toEqual([{ command: 'start', description: 'Start the bot' }]);
  }, 60_000);

  it('commands fire: bot.command("start") and bot.command("help"), as grammY\'s docs write a bot, with the text handler for the rest; replies with HTML, MarkdownV2 and an inline keyboard', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'grammy_commands');
    const say = (text: string) => owner.post(`/api/v1/bots/my/${id}/test-updates`, { text, chat_id: 9002 });
    const bot = new Bot(token, { client: { apiRoot: h.url } });
    const handled: string[] = [];
    bot.command('start', async (ctx) => {
      handled.push(`start:${ctx.match}`);
      await ctx.reply('Welcome!');
    });
    bot.command('help', async (ctx) => {
      handled.push('help');
      await ctx.reply('Send me anything.');
    });
    bot.on('message:text', (ctx) => {
      handled.push(`text:${ctx.message.text}`);
    });
    bot.catch((err) => {
      throw err.error;
    });
    const started = bot.start({ timeout: 1 });
    for (const t of ['/start', '/help@grammy_commands', 'hello /start', '/start deep-link']) expect((await say(t)).status).toBe(201);
    await waitFor(() => handled.length === 4, 15_000);
    await bot.stop();
    await started;
    // A command is one only at the start of the text, as Telegram marks it (bot_command at offset 0).
    expect(handled).toEqual(['start:', 'help', 'text:hello /start', 'start:deep-link']);

    // Formatting and an inline keyboard, as grammY sends them (reply_markup as JSON in the body).
    const sent = await bot.api.sendMessage(9002, '<b>Hi</b> <i>there</i>', {
      parse_mode: 'HTML', reply_markup: new InlineKeyboard().text('Yes', 'answer:yes').url('Docs', 'https://example.com/docs'),
    });
    expect(sent.text).toBe('Hi there');
    expect(sent.entities).toEqual([{ type: 'bold', offset: 0, length: 2 }, { type: 'italic', offset: 3, length: 5 }]);
    expect(sent.reply_markup).toEqual({ inline_keyboard: [[{ text: 'Yes', callback_data: 'answer:yes' }, { text: 'Docs', url: 'https://example.com/docs' }]] });
    const md = await bot.api.sendMessage(9002, '*bold* and `code`', { parse_mode: 'MarkdownV2' });
    expect(md.entities).toEqual([{ type: 'bold', offset: 0, length: 4 }, { type: 'code', offset: 9, length: 4 }]);
    // Malformed markup is grammY's own error type, with Telegram's code and words.
    const err = await bot.api.sendMessage(9002, 'unclosed <b>tag', { parse_mode: 'HTML' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GrammyError);
    expect((err as GrammyError).error_code).toBe(400);
    expect((err as GrammyError).description).toMatch(/can't parse entities/);
  }, 30_000);

  it('webhook mode: webhookCallback behind HTTPS checks the secret token, handles the Telegram Update and replies', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'grammy_hook');
    const { bot, received, replies } = echoBot(token);
    const secret = 'grammy_hook_secret';
    const handle = webhookCallback(bot, 'https', { secretToken: secret });
    const answered: number[] = [];
    const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
      res.once('finish', () => answered.push(res.statusCode));
      void handle(req, res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/grammy`;
    try {
      // The webhook is set by grammY itself, through the Telegram surface.
      expect(await bot.api.setWebhook(url, { secret_token: secret })).toBe(true);
      expect(await bot.api.getWebhookInfo()).toMatchObject({ url, pending_update_count: 0 });
      for (const t of ['w1', 'w2']) expect((await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text: t, chat_id: 9002 })).status).toBe(201);
      await waitFor(() => replies.length === 2, 15_000);
      // update_id is the bot's update_seq, as getUpdates on this surface would have it.
      expect(received).toEqual([{ updateId: 1, text: 'w1' }, { updateId: 2, text: 'w2' }]);
      expect(replies).toEqual([{ chat: 9002, text: 'w1', from: bot.botInfo.id }, { chat: 9002, text: 'w2', from: bot.botInfo.id }]);
      await waitFor(() => answered.length === 2);
      expect(answered).toEqual([200, 200]);
      const deliveries = await until(() => owner.get(`/api/v1/bots/my/${id}/deliveries`), (r) => r.body.items?.every((d: { status: string }) => d.status === 'succeeded'));
      expect(deliveries.body.items.map((d: { update_seq: number; status: string }) => [d.update_seq, d.status])).toEqual([[2, 'succeeded'], [1, 'succeeded']]);

      // The handler verifies: an update without the right secret token is refused, unhandled.
      const forged = await new Promise<number>((resolve, reject) => {
        const req = https.request(url, { method: 'POST', ca: fs.readFileSync(pki.caFile), headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': 'wrong' } }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.end(JSON.stringify({ update_id: 3, message: { message_id: 1, date: 1, chat: { id: 9002, type: 'private' }, text: 'forged' } }));
      });
      expect(forged).toBe(401);
      expect(received).toHaveLength(2);
      expect(await bot.api.deleteWebhook()).toBe(true);
    } finally {
      await new Promise((r) => server.close(r));
    }
  }, 60_000);
});
