/**
 * Unmodified Python echo bots — python-telegram-bot and aiogram, from PyPI at the versions
 * pinned in test/telegram-py/requirements.txt — configured only with this service's API
 * root and a token: setMyCommands at start, long polling across several batches with
 * offsets confirmed, nothing received twice (also across a restart), replies with
 * sendMessage, a photo sent as multipart, fetched back with getFile and downloaded. Then the
 * frameworks' own example bots (issue 33): python-telegram-bot's command bot and
 * inlinekeyboard.py with formatting and a chat action, aiogram's keyboard bot by polling and
 * its webhook server answering with a method, and pyTelegramBotAPI sending files; what the
 * messaging services see on the outbound feed is checked for each.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SentMessage } from '../src/gen/botplatform/v1/internal_service.js';
import { openFeed, type FeedConsumer } from './helpers/feed-consumer.js';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';
import { createTestPki, type TestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const DIR = path.join(ROOT, 'test/telegram-py');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Event = Record<string, any> & { event: string };

/** A running bot: the JSON lines it printed, and a graceful stop (SIGTERM, as a deploy would). */
interface RunningBot {
  events: Event[];
  stderr: string[];
  of(kind: string): Event[];
  waitFor(cond: () => boolean, ms?: number): Promise<void>;
  stop(): Promise<void>;
}

function startBot(python: string, script: string, apiRoot: string, token: string, env: Record<string, string> = {}): RunningBot {
  const child: ChildProcess = spawn(python, [path.join(DIR, script)], {
    env: { ...process.env, API_ROOT: apiRoot, BOT_TOKEN: token, PYTHONUNBUFFERED: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: Event[] = [];
  const stderr: string[] = [];
  let exited = false;
  const exit = new Promise<void>((r) => child.once('exit', () => {
    exited = true;
    r();
  }));
  let buffered = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const l of lines) if (l.trim()) events.push(JSON.parse(l));
  });
  child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
  const bot: RunningBot = {
    events,
    stderr,
    of: (kind) => events.filter((e) => e.event === kind),
    async waitFor(cond, ms = 20_000) {
      await until(async () => cond() || exited, Boolean, ms);
      if (!cond()) throw new Error(`${script}: condition not met${exited ? ' (the bot exited)' : ''}; events ${JSON.stringify(events)}; stderr:\n${stderr.join('')}`);
    },
    async stop() {
      if (!exited) child.kill('SIGTERM');
      await Promise.race([exit, new Promise((r) => setTimeout(r, 15_000))]);
      if (!exited) {
        child.kill('SIGKILL');
        throw new Error(`${script} did not stop on SIGTERM; stderr:\n${stderr.join('')}`);
      }
    },
  };
  return bot;
}

/**
 * How long a waited-for event may take when it includes the bot's start: aiogram's import
 * alone takes about 3 s of CPU (6 s at a load of 10 on two cores), and on a loaded CI machine
 * a start beside another test file took over 20 s (a timeout, not a speed check).
 */
const STARTUP_MS = 60_000;

describe('Python frameworks on the Telegram surface', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  let python: string;
  let pki: TestPki;
  let feed: FeedConsumer;
  const running: RunningBot[] = [];

  beforeAll(async () => {
    python = execFileSync('bash', [path.join(ROOT, 'scripts/ensure-pyenv.sh'), path.join(DIR, 'requirements.txt')], { encoding: 'utf8', timeout: 480_000 }).trim();
    // A test bot does in a second or two what a real one spreads out: its calls stay
    // clear of the per-bot rate limit (python-telegram-bot does not retry a 429 unasked).
    pki = createTestPki();
    h = await startHarness('in-process', { RATE_LIMIT_BOT: '1000/1s', WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile });
    ownerJwt = await h.jwt('tgpy-owner');
    owner = client(h.url, ownerJwt);
    feed = openFeed(h.grpcAddress, 'tgpy');
    await feed.waitFor(() => feed.assigned());
  }, 600_000);
  afterAll(async () => {
    for (const b of running) await b.stop().catch(() => {});
    feed?.kill();
    await h?.close();
  });

  const cases = [
    // python-telegram-bot takes the token as issued.
    { framework: 'python-telegram-bot', script: 'ptb_echo.py', username: 'ptb_echo', telegramForm: false },
    // aiogram insists on Telegram's "<bot id>:<secret>" form (and reads bot.id from it).
    { framework: 'aiogram', script: 'aiogram_echo.py', username: 'aiogram_echo', telegramForm: true },
  ];

  for (const c of cases) {
    it(`${c.framework}: commands, several polled batches with offsets confirmed, replies, a restart, a photo round trip`, async () => {
      const { id, token } = await approvedBot(h, ownerJwt, c.username);
      const me = await call(h.url, 'GET', `/bot${token}/getMe`);
      const botToken = c.telegramForm ? `${me.body.result.id}:${token}` : token;
      const chat = 9100;
      const say = async (text: string) => expect((await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text, chat_id: chat })).status).toBe(201);
      const updateIds = (b: RunningBot) => b.of(c.telegramForm ? 'update_id' : 'update').map((e) => e.update_id);

      const first = startBot(python, c.script, h.url, botToken);
      running.push(first);
      await first.waitFor(() => first.of('started').length === 1, STARTUP_MS);
      const started = first.of('started')[0]!;
      expect(started).toMatchObject({ id: me.body.result.id, username: c.username });
      if (c.telegramForm) expect(started.token_id).toBe(me.body.result.id);
      const commands = [{ command: 'start', description: 'Start the bot' }, { command: 'help', description: 'Show help' }];
      expect(started.commands).toEqual(commands);
      expect((await owner.get(`/api/v1/bots/my/${id}`)).body.command_menu).toEqual(commands);

      // Two batches, each answered before the next is sent.
      for (const t of ['a1', 'a2', 'a3']) await say(t);
      await first.waitFor(() => first.of('reply').length === 3);
      for (const t of ['b1', 'b2', 'b3', 'b4']) await say(t);
      await first.waitFor(() => first.of('reply').length === 7);
      const texts = ['a1', 'a2', 'a3', 'b1', 'b2', 'b3', 'b4'];
      expect(first.of('update').map((e) => e.text)).toEqual(texts);
      expect(updateIds(first)).toEqual([1, 2, 3, 4, 5, 6, 7]);
      expect(first.of('update').every((e) => e.chat === chat && e.from_id === chat)).toBe(true);
      expect(first.of('reply').map((e) => e.text).sort()).toEqual([...texts].sort());
      expect(first.of('reply').every((e) => e.chat === chat && e.from_id === me.body.result.id)).toBe(true);
      await first.stop();

      // A restarted bot gets only what is new: the offsets it confirmed hold.
      await say('c1');
      const second = startBot(python, c.script, h.url, botToken);
      running.push(second);
      await second.waitFor(() => second.of('reply').length === 1, STARTUP_MS);
      // A photo: a multipart upload, then getFile and the download through the file URL.
      await say('photo 3000');
      await second.waitFor(() => second.of('photo').length === 1);
      await second.stop();
      expect(second.of('update').map((e) => e.text)).toEqual(['c1', 'photo 3000']);
      expect(updateIds(second)).toEqual([8, 9]);
      const photo = second.of('photo')[0]!;
      expect(photo).toMatchObject({ caption: 'pic', size: 3000 });
      expect(photo.downloaded).toBe(photo.sent);
      // Nothing polled is left over: everything was confirmed.
      const rest = await call(h.url, 'POST', `/bot${token}/getUpdates`, { body: {} });
      expect(rest.body).toEqual({ ok: true, result: [] });
    }, 120_000);
  }

  // The frameworks' own example bots (issue 33), as their documentation writes them.
  /** The console's test chat, where test updates and button presses come from. */
  const TEST_CHAT = 100000001;
  async function example(username: string) {
    const bot = await approvedBot(h, ownerJwt, username);
    const me = await call(h.url, 'GET', `/bot${bot.token}/getMe`);
    const events = () => feed.messages.filter((m) => m.botId === bot.id);
    return {
      ...bot,
      telegramToken: `${me.body.result.id}:${bot.token}`,
      say: async (text: string) => expect((await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text })).status).toBe(201),
      press: async (messageId: number, data: string) => {
        const res = await owner.post(`/api/v1/bots/my/${bot.id}/test-callback-queries`, { message_id: messageId, callback_data: data });
        expect(res.status).toBe(201);
        return res.body.callback_query_id as string;
      },
      events,
      seen: <T>(pick: (m: SentMessage) => T | undefined, ms = 20_000) =>
        until(async () => events().map(pick).find((x) => x !== undefined), Boolean, ms) as Promise<T>,
    };
  }
  const run = (script: string, token: string, env: Record<string, string> = {}) => {
    const b = startBot(python, script, h.url, token, env);
    running.push(b);
    return b;
  };

  it('python-telegram-bot: CommandHandler /start and /help, its inlinekeyboard.py (answered, the message edited), HTML and MarkdownV2, typing then the answer', async () => {
    const b = await example('ptb_examples');
    const bot = run('ptb_examples.py', b.token);
    await bot.waitFor(() => bot.of('started').length === 1, STARTUP_MS);
    for (const t of ['/start', '/help']) await b.say(t);
    await bot.waitFor(() => bot.of('command').length === 2);
    expect(bot.of('command').map((e) => e.command)).toEqual(['start', 'help']);
    await b.say('/menu');
    await bot.waitFor(() => bot.of('menu').length === 1);
    const menu = await b.seen((m) => m.message?.text === 'Please choose:' ? m.message : undefined);
    expect(menu.replyMarkup?.inlineKeyboard.map((row) => row.buttons.map((x) => x.callbackData))).toEqual([['1', '2'], ['3']]);
    const id = await b.press(menu.messageId, '2');
    await bot.waitFor(() => bot.of('pressed').length === 1);
    expect(bot.of('pressed')[0]).toMatchObject({ data: '2', edited: 'Selected option: 2', message_id: menu.messageId });
    expect(await b.seen((m) => m.callbackQueryAnswer)).toMatchObject({ callbackQueryId: id, chatId: TEST_CHAT, messageId: menu.messageId });
    expect(await b.seen((m) => m.editedMessage)).toMatchObject({ messageId: menu.messageId, text: 'Selected option: 2' });

    for (const t of ['/html', '/md']) await b.say(t);
    await bot.waitFor(() => bot.of('formatted').length === 2);
    const byMode = Object.fromEntries(bot.of('formatted').map((e) => [e.mode, e]));
    expect(byMode.HTML).toMatchObject({
      text: 'Bold, italic and code',
      entities: [{ type: 'bold', offset: 0, length: 4 }, { type: 'italic', offset: 6, length: 6 }, { type: 'code', offset: 17, length: 4 }],
    });
    expect(byMode.MarkdownV2).toMatchObject({
      text: 'bold italic link',
      entities: [{ type: 'bold', offset: 0, length: 4 }, { type: 'italic', offset: 5, length: 6 }, { type: 'text_link', offset: 12, length: 4, url: 'https://example.com/' }],
    });

    await b.say('/slow');
    await bot.waitFor(() => bot.of('slow').length === 1);
    // The bot has its answer back; the feed (Kafka on the integration pass) may bring it a moment later.
    await b.seen((m) => m.message?.text === 'Done thinking' || undefined);
    const all = b.events();
    const action = all.findIndex((m) => m.chatAction);
    expect(all[action]!.chatAction).toEqual({ chatId: TEST_CHAT, action: 'typing' });
    expect(all.findIndex((m) => m.message?.text === 'Done thinking')).toBeGreaterThan(action);
    await bot.stop();
  }, 120_000);

  it('aiogram: an InlineKeyboardBuilder keyboard, answered and edited; in webhook mode the reply a handler returns is sent from the webhook\'s answer', async () => {
    const b = await example('aiogram_examples');
    const polling = run('aiogram_examples.py', b.telegramToken, { MODE: 'polling' });
    await polling.waitFor(() => polling.of('started').length === 1, STARTUP_MS);
    await b.say('/start');
    await polling.waitFor(() => polling.of('menu').length === 1);
    const menu = await b.seen((m) => m.message);
    expect(menu.replyMarkup?.inlineKeyboard.flatMap((row) => row.buttons.map((x) => x.callbackData))).toEqual(['color:red', 'color:green']);
    const id = await b.press(menu.messageId, 'color:green');
    await polling.waitFor(() => polling.of('pressed').length === 1);
    expect(polling.of('pressed')[0]).toMatchObject({ data: 'color:green', edited: 'You picked green' });
    expect(await b.seen((m) => m.callbackQueryAnswer)).toMatchObject({ callbackQueryId: id, text: 'Green it is' });
    expect(await b.seen((m) => m.editedMessage)).toMatchObject({ messageId: menu.messageId, text: 'You picked green' });
    await polling.stop();

    // Webhook mode: aiogram's own aiohttp server behind HTTPS; the reply is the webhook's answer (multipart).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aiogram-tls-'));
    fs.writeFileSync(path.join(dir, 'cert.pem'), pki.cert);
    fs.writeFileSync(path.join(dir, 'key.pem'), pki.key);
    const hook = run('aiogram_examples.py', b.telegramToken, { MODE: 'webhook', CERT_FILE: path.join(dir, 'cert.pem'), KEY_FILE: path.join(dir, 'key.pem'), SECRET: 'aiogram_secret' });
    await hook.waitFor(() => hook.of('started').length === 1, STARTUP_MS);
    const before = b.events().filter((m) => m.message).length;
    await b.say('/start');
    await hook.waitFor(() => hook.of('answered_in_webhook').length === 1);
    await until(async () => b.events().filter((m) => m.message).length, (n) => n === before + 1, 20_000);
    const answered = b.events().filter((m) => m.message).at(-1)!.message!;
    expect(answered).toMatchObject({ text: 'Pick a color', chat: { id: TEST_CHAT } });
    expect(answered.replyMarkup?.inlineKeyboard.flatMap((row) => row.buttons.map((x) => x.callbackData))).toEqual(['color:red', 'color:green']);
    await hook.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it('pyTelegramBotAPI: a document and a photo sent from bytes (multipart, the file name unquoted) keep their names, and the document downloads back', async () => {
    const b = await example('telebot_files');
    const bot = run('telebot_files.py', b.telegramToken);
    await bot.waitFor(() => bot.of('started').length === 1, STARTUP_MS);
    await b.say('/file');
    await bot.waitFor(() => bot.of('file').length === 1);
    const f = bot.of('file')[0]!;
    expect(f).toMatchObject({ file_name: 'report 2026.txt', size: 1800, caption: 'the report', photo_caption: 'a photo', photo_size: 1500 });
    expect(f.downloaded).toBe(f.sent);
    const doc = await b.seen((m) => m.message?.document ? m.message : undefined);
    expect(doc.document).toMatchObject({ fileName: 'report 2026.txt', fileSize: 1800 });
    await bot.stop();
  }, 120_000);
});
