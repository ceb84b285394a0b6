/**
 * The example bots as a user runs them (the command of `npm run example:...`)
 * against a freshly started service: each one answers an injected test update,
 * and the reply leaves the platform on the outbound messages topic.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusMessage } from '../../src/bus/bus.js';
import { MESSAGES_TOPIC } from '../../src/bus/topics.js';
import { startHarness, type Harness } from '../../test/helpers/harness.js';
import { freePort } from '../../test/helpers/ports.js';
import { createTestPki, type TestPki } from '../../test/helpers/tls.js';
import { sdkAccount, until, type SdkAccount } from './helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface Running {
  child: ChildProcess;
  output(): string;
  stop(): Promise<number | null>;
}

/**
 * Runs the command of the package.json script `npm run <script>` runs (without npm
 * in between, so that SIGTERM reaches the example itself).
 */
function runExample(script: string, env: Record<string, string>): Running {
  const command: string = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts[script];
  const [bin, ...args] = command.split(' ');
  expect(bin).toBe('node');
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  return {
    child,
    output: () => out,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode);
        child.once('exit', (code) => resolve(code));
        child.kill('SIGTERM');
      }),
  };
}

describe('example bots', () => {
  let h: Harness;
  let pki: TestPki;
  let account: SdkAccount;
  const running: Running[] = [];
  const published: BusMessage[] = [];

  /** The bot's messages as the platform sends them out: {bot_id, message}. */
  async function sentBy(botId: string, n: number) {
    const mine = () => published.filter((p) => p.key === botId).map((p) => JSON.parse(p.value).message);
    return until(async () => mine(), (m) => m.length >= n);
  }

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile });
    account = await sdkAccount(h, 'sdk-examples');
    await h.apps[0]!.bus!.subscribeAll([MESSAGES_TOPIC], (m) => published.push(m));
  });
  afterAll(async () => {
    for (const r of running) await r.stop();
    await h?.close();
  });

  const waitForOutput = async (r: Running, pattern: RegExp, ms = 20_000) => {
    const out = await until(async () => r.output(), (o) => pattern.test(o) || r.child.exitCode !== null, ms);
    expect(out).toMatch(pattern);
  };

  it('echo-polling answers an injected test update and stops cleanly', async () => {
    const bot = await account.approvedBot('example_polling');
    const r = runExample('example:echo-polling', { BOT_TOKEN: bot.token, BASE_URL: h.url });
    running.push(r);
    await waitForOutput(r, /@example_polling is polling/);
    const sent = await account.console.createTestUpdate({ id: bot.id, text: 'hello polling', chat_id: 777 });
    await waitForOutput(r, new RegExp(`update ${sent.update_id} \\(seq 1\\) from chat 777: hello polling`));
    await waitForOutput(r, /replied with message \d+ in chat 777/);
    const [reply] = await sentBy(bot.id, 1);
    expect(reply).toMatchObject({ chat: { id: 777 }, text: 'hello polling', from: { is_bot: true, username: 'example_polling' } });
    expect(reply.reply_to_message_id).toBeGreaterThan(0);
    expect(await r.stop()).toBe(0);
    expect(r.output()).toMatch(/echo-polling: stopped/);
    // The runner confirmed what it handled before it stopped.
    expect(await bot.bot.getUpdates({ timeout: 0 })).toEqual([]);
  });

  it('echo-webhook registers its HTTPS endpoint and answers an injected test update', async () => {
    const bot = await account.approvedBot('example_webhook');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-example-'));
    fs.writeFileSync(path.join(dir, 'cert.pem'), pki.cert);
    fs.writeFileSync(path.join(dir, 'key.pem'), pki.key);
    const port = await freePort();
    const r = runExample('example:echo-webhook', {
      BOT_TOKEN: bot.token,
      BASE_URL: h.url,
      PORT: String(port),
      TLS_CERT: path.join(dir, 'cert.pem'),
      TLS_KEY: path.join(dir, 'key.pem'),
    });
    running.push(r);
    await waitForOutput(r, /@example_webhook receives by webhook at https:\/\/127\.0\.0\.1:\d+\/webhook/);
    const info = await bot.bot.getWebhookInfo();
    expect(info).toMatchObject({ url: `https://127.0.0.1:${port}/webhook`, delivery_mode: 'webhook' });
    const sent = await account.console.createTestUpdate({ id: bot.id, text: 'hello webhook', chat_id: 778 });
    await waitForOutput(r, new RegExp(`update ${sent.update_id} \\(seq 1\\) from chat 778: hello webhook`));
    await waitForOutput(r, /replied with message \d+ in chat 778/);
    const [reply] = await sentBy(bot.id, 1);
    expect(reply).toMatchObject({ chat: { id: 778 }, text: 'hello webhook', from: { is_bot: true, username: 'example_webhook' } });
    const log = await until(() => account.console.listDeliveries({ id: bot.id }), (d) => d.items[0]?.status === 'succeeded');
    expect(log.items[0]).toMatchObject({ update_id: sent.update_id, status: 'succeeded', attempts: 1 });
    expect(await r.stop()).toBe(0);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('keyboard answers /start with a formatted counter and its inline keyboard, and each press by editing it; it sets its command menu', async () => {
    const bot = await account.approvedBot('example_keyboard');
    const r = runExample('example:keyboard', { BOT_TOKEN: bot.token, BASE_URL: h.url });
    running.push(r);
    await waitForOutput(r, /@example_keyboard is polling/);
    expect((await bot.bot.getMyCommands()).map((c) => c.command)).toEqual(['start', 'help']);
    await account.console.createTestUpdate({ id: bot.id, text: '/start', chat_id: 779 });
    await waitForOutput(r, /\/start in chat 779: sent message \d+ with a keyboard/);
    const [counter] = await sentBy(bot.id, 1);
    expect(counter).toMatchObject({
      chat: { id: 779 }, text: 'Counter: 0', entities: [{ type: 'bold', offset: 0, length: 7 }],
      reply_markup: { inline_keyboard: [{ buttons: [{ text: '−', callback_data: 'count:-1' }, { text: '+', callback_data: 'count:1' }] }, { buttons: [{ text: 'What is this?' }] }] },
    });
    await account.console.createTestUpdate({ id: bot.id, text: 'hello?', chat_id: 779 });
    const [, nudge] = await sentBy(bot.id, 2);
    expect(nudge).toMatchObject({ chat: { id: 779 }, text: 'Send /start for a counter.' });

    // Two presses of +, one of −: each answered, the message edited to the count, its keyboard kept.
    const presses = [['count:1', 1], ['count:2', 2], ['count:1', 1]] as const;
    for (const [i, [data, count]] of presses.entries()) {
      await account.console.createTestCallbackQuery({ id: bot.id, chat_id: 779, message_id: counter.message_id, callback_data: data });
      const lines = await until(async () => r.output().match(/pressed .*/g) ?? [], (l) => l.length > i);
      expect(lines[i]).toBe(`pressed ${data} on message ${counter.message_id}: count ${count}`);
      const edited = await until(
        async () => (await account.console.listChatMessages({ id: bot.id, chat_id: 779 })).items.find((m) => m.message_id === counter.message_id)!,
        (m) => m.text === `Counter: ${count}`,
      );
      expect(edited.edit_date).toBeGreaterThan(0);
      expect(edited.reply_markup!.inline_keyboard[0]!.buttons.map((b) => b.callback_data)).toEqual([`count:${count - 1}`, `count:${count + 1}`]);
    }
    expect(await r.stop()).toBe(0);
  });

  it('an example without BOT_TOKEN says what to set', async () => {
    const r = runExample('example:echo-polling', { BOT_TOKEN: '' });
    running.push(r);
    const code = await new Promise<number | null>((resolve) => r.child.once('exit', resolve));
    expect(code).not.toBe(0);
    expect(r.output()).toMatch(/set BOT_TOKEN/);
  });
});
