/**
 * An unmodified grammY echo bot, configured only with this service's API root and a
 * token: getMe at start, long polling across several batches with offsets confirmed,
 * nothing received twice (also across a restart), and replies with sendMessage.
 */
import crypto from 'node:crypto';
import { Bot, InputFile } from 'grammy';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, client, startHarness, type Harness } from './helpers/harness.js';
import { until } from './helpers/until.js';

/** Waits for cond, failing the test when it does not hold within ms. */
async function waitFor(cond: () => boolean, ms = 10_000) {
  expect(await until(async () => cond(), Boolean, ms)).toBe(true);
}

describe('grammY on the Telegram surface', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;

  beforeAll(async () => {
    h = await startHarness('in-process');
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
});
