/**
 * Unmodified Python echo bots — python-telegram-bot and aiogram, from PyPI at the versions
 * pinned in test/telegram-py/requirements.txt — configured only with this service's API
 * root and a token: setMyCommands at start, long polling across several batches with
 * offsets confirmed, nothing received twice (also across a restart), replies with
 * sendMessage, a photo sent as multipart, fetched back with getFile and downloaded.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';
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

function startBot(python: string, script: string, apiRoot: string, token: string): RunningBot {
  const child: ChildProcess = spawn(python, [path.join(DIR, script)], {
    env: { ...process.env, API_ROOT: apiRoot, BOT_TOKEN: token, PYTHONUNBUFFERED: '1' },
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

describe('Python frameworks on the Telegram surface', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  let python: string;
  const running: RunningBot[] = [];

  beforeAll(async () => {
    python = execFileSync('bash', [path.join(ROOT, 'scripts/ensure-pyenv.sh'), path.join(DIR, 'requirements.txt')], { encoding: 'utf8', timeout: 480_000 }).trim();
    // A test bot does in a second or two what a real one spreads out: its calls stay
    // clear of the per-bot rate limit (python-telegram-bot does not retry a 429 unasked).
    h = await startHarness('in-process', { RATE_LIMIT_BOT: '1000/1s' });
    ownerJwt = await h.jwt('tgpy-owner');
    owner = client(h.url, ownerJwt);
  }, 600_000);
  afterAll(async () => {
    for (const b of running) await b.stop().catch(() => {});
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
      await first.waitFor(() => first.of('started').length === 1);
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
      await second.waitFor(() => second.of('reply').length === 1);
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
});
