/**
 * Methods returned in a webhook's answer (Bot API, "Making requests when getting
 * updates"): a Telegram-surface webhook answering a delivery with {"method": ..., params}
 * — as JSON, a form or multipart, the three bodies Telegram takes — has it run as the
 * bot, its result reported nowhere; what the messaging services see on the outbound feed
 * is the message sent. An invalid one (unknown method, bad parameters, a file part) is
 * logged with Telegram's words and counted, never retried, and the delivery stays
 * succeeded; a native webhook's answer is never run; no credential reaches the logs.
 * On a dispatcher of its own (ROLE=dispatcher), the answer reaches a core over gRPC.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBotGrants, GRANT_TTL_MS } from '../src/auth/bot-grants.js';
import { approvedBot, call, client, startHarness, TEST_SECRET_KEY, usingMysql, type Harness } from './helpers/harness.js';
import { openFeed, type FeedConsumer } from './helpers/feed-consumer.js';
import { createTestPki, type TestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

/** An HTTPS webhook that answers each delivery with the next scripted answer (then 200 "ok"). */
async function answeringHook(pki: TestPki) {
  const answers: { type: string; body: string; status?: number }[] = [];
  const received: unknown[] = [];
  const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      const a = answers.shift() ?? { type: 'text/plain', body: 'ok' };
      res.writeHead(a.status ?? 200, { 'content-type': a.type });
      res.end(a.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    answers,
    received,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

const multipart = (fields: Record<string, string>, file?: { name: string; bytes: string }) => {
  const boundary = 'webhookBoundaryx1';
  const parts = Object.entries(fields).map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`);
  if (file) parts.push(`--${boundary}\r\nContent-Disposition: form-data; name="${file.name}"; filename="${file.name}.bin"\r\n\r\n${file.bytes}\r\n`);
  return { type: `multipart/form-data; boundary=${boundary}`, body: `${parts.join('')}--${boundary}--\r\n` };
};

// A dispatcher of its own shares the database with the core: MySQL only (the MariaDB + Kafka pass).
for (const mode of ['in-process', ...(usingMysql() ? ['separate-dispatcher' as const] : [])] as const) {
  describe(`methods in webhook answers (${mode})`, () => {
    let h: Harness;
    let pki: TestPki;
    let ownerJwt: string;
    let feed: FeedConsumer;
    const logLines: string[] = [];
    const hooks: Awaited<ReturnType<typeof answeringHook>>[] = [];

    beforeAll(async () => {
      pki = createTestPki();
      const sink = new Writable({
        write(chunk, _enc, cb) {
          logLines.push(String(chunk));
          cb();
        },
      });
      const env = { LOG_LEVEL: 'info', WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_RETRY_SCHEDULE: '200ms' };
      h = await startHarness(mode, env, sink);
      ownerJwt = await h.jwt('answers-owner');
      feed = openFeed(h.grpcAddress, `answers-${mode}`);
    });
    afterAll(async () => {
      feed?.kill();
      for (const k of hooks) await k.close();
      await h?.close();
    });

    async function hookedBot(username: string, chat: number, native = false) {
      const bot = await approvedBot(h, ownerJwt, username);
      const hook = await answeringHook(pki);
      hooks.push(hook);
      const owner = client(h.url, ownerJwt);
      if (native) {
        expect((await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: hook.url, secret_token: 'native_secret_123' })).status).toBe(200);
      } else {
        expect((await call(h.url, 'POST', `/bot${bot.token}/setWebhook`, { body: { url: hook.url, secret_token: 'tg_secret' } })).body).toEqual({ ok: true, result: true });
      }
      const say = async (text: string) => expect((await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text, chat_id: chat })).status).toBe(201);
      const sent = () => feed.messages.filter((m) => m.botId === bot.id && m.message).map((m) => m.message!);
      const deliveries = async () => (await owner.get(`/api/v1/bots/my/${bot.id}/deliveries`)).body.items as { id: string; update_seq: number; status: string; attempts: number }[];
      return { ...bot, hook, say, sent, deliveries, owner };
    }

    it('JSON, form and multipart answers are run as the bot (telegraf, grammY and aiogram answer so); the feed carries what they sent', async () => {
      const bot = await hookedBot(`answers_ok_${mode === 'in-process' ? 'a' : 'b'}`, 6100);
      bot.hook.answers.push(
        { type: 'application/json', body: JSON.stringify({ method: 'sendMessage', chat_id: 6100, text: '<b>via JSON</b>', parse_mode: 'HTML', disable_notification: true }) },
        { type: 'application/x-www-form-urlencoded', body: new URLSearchParams({ method: 'sendMessage', chat_id: '6100', text: 'via form', reply_markup: JSON.stringify({ inline_keyboard: [[{ text: 'Go', callback_data: 'go' }]] }) }).toString() },
        multipart({ method: 'sendMessage', chat_id: '6100', text: 'via multipart' }),
      );
      for (const t of ['one', 'two', 'three']) await bot.say(t);
      await feed.waitFor(() => bot.sent().length === 3, 15_000);
      // Deliveries may run side by side: their answers' messages come in any order.
      const sent = bot.sent().sort((x, y) => ['via JSON', 'via form', 'via multipart'].indexOf(x.text!) - ['via JSON', 'via form', 'via multipart'].indexOf(y.text!));
      expect(sent.map((m) => m.text)).toEqual(['via JSON', 'via form', 'via multipart']);
      expect(sent[0]!.entities).toEqual([expect.objectContaining({ type: 'bold', offset: 0, length: 8 })]);
      expect(sent[1]!.replyMarkup?.inlineKeyboard[0]?.buttons[0]).toMatchObject({ text: 'Go', callbackData: 'go' });
      expect(sent.every((m) => m.chat?.id === 6100 && m.from?.isBot)).toBe(true);
      // Each delivery succeeded once; nothing is retried.
      const ds = await until(bot.deliveries, (d) => d.length === 3 && d.every((x) => x.status === 'succeeded'));
      expect(ds.map((d) => d.attempts)).toEqual([1, 1, 1]);
    }, 30_000);

    it('the answer to the console\'s manual retry is run too (by the core that retries)', async () => {
      const bot = await hookedBot(`answers_retry_${mode === 'in-process' ? 'a' : 'b'}`, 6400);
      // Two failures walk the 200ms schedule to dead_letter; the manual retry's answer has the method.
      bot.hook.answers.push({ type: 'text/plain', body: 'down', status: 500 }, { type: 'text/plain', body: 'down', status: 500 });
      await bot.say('retry me');
      const [dead] = await until(bot.deliveries, (d) => d[0]?.status === 'dead_letter', 15_000);
      bot.hook.answers.push({ type: 'application/json', body: JSON.stringify({ method: 'sendMessage', chat_id: 6400, text: 'after the retry' }) });
      expect((await bot.owner.post(`/api/v1/bots/my/${bot.id}/deliveries/${dead!.id}/retry`)).status).toBe(200);
      const sent = await until(async () => bot.sent(), (m) => m.length === 1, 15_000);
      expect(sent[0]!.text).toBe('after the retry');
    });

    it('a bot grant is taken only as minted: with the service\'s key, unaltered, unexpired, for a bot that exists', async () => {
      const bot = await approvedBot(h, ownerJwt, `answers_grant_${mode === 'in-process' ? 'a' : 'b'}`);
      const getMe = (credential: string) => call(h.url, 'POST', '/api/v1/bots/getMe', { token: credential });
      const grants = createBotGrants(TEST_SECRET_KEY);
      const ok = await getMe(grants.mint(bot.id));
      expect(ok.status).toBe(200);
      expect(ok.body.result.id).toBe(bot.id);
      const other = createBotGrants(Buffer.alloc(32, 7).toString('base64'));
      const expired = createBotGrants(TEST_SECRET_KEY, () => Date.now() - GRANT_TTL_MS - 1000);
      const [body, sig] = grants.mint(bot.id).slice('bgr1_'.length).split('.');
      const tampered = `bgr1_${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body!, 'base64url').toString()), bot: 'bot_other' })).toString('base64url')}.${sig}`;
      for (const credential of [other.mint(bot.id), expired.mint(bot.id), tampered, grants.mint('bot_nobody'), 'bgr1_garbage']) {
        const res = await getMe(credential);
        expect(res.status).toBe(401);
        expect(res.body).toEqual({ ok: false, error_code: 401, description: 'Unauthorized: invalid bot grant' });
      }
    });

    it('an invalid answer is logged with Telegram\'s words and counted, never retried; the delivery stays succeeded; a native webhook\'s answer is not run', async () => {
      const bot = await hookedBot(`answers_bad_${mode === 'in-process' ? 'a' : 'b'}`, 6200);
      bot.hook.answers.push(
        { type: 'application/json', body: JSON.stringify({ method: 'sendSmokeSignal', chat_id: 6200 }) },
        { type: 'application/json', body: JSON.stringify({ method: 'sendMessage', chat_id: 999999, text: 'to a chat that never wrote' }) },
        multipart({ method: 'sendDocument', chat_id: '6200' }, { name: 'document', bytes: 'file bytes' }),
        // Not requests: nothing is run, nothing is counted.
        { type: 'application/json', body: '{"ok":true}' },
        { type: 'text/plain', body: 'OK' },
      );
      for (const t of ['a', 'b', 'c', 'd', 'e']) await bot.say(t);
      await until(async () => bot.hook.received.length, (n) => n === 5, 15_000);
      const ds = await until(bot.deliveries, (d) => d.length === 5 && d.every((x) => x.status === 'succeeded'));
      expect(ds.every((d) => d.attempts === 1)).toBe(true);
      const notRun = await until(
        async () => logLines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'webhook answer not executed' && l.bot === bot.id),
        (l) => l.length === 3,
      );
      // Deliveries run side by side, so the lines come in any order. (A multipart answer with a
      // file part is refused as it is read, before its method is.)
      const byMethod = Object.fromEntries(notRun.map((l) => [String(l.method), l]));
      expect(Object.keys(byMethod).sort()).toEqual(['sendMessage', 'sendSmokeSignal', 'undefined']);
      expect(notRun.every((l) => l.outcome === 'invalid')).toBe(true);
      expect(byMethod.sendSmokeSignal.description).toBe('Not Found: method not found');
      expect(byMethod.sendMessage.description).toMatch(/^Bad Request: .*chat not found/);
      expect(byMethod.undefined.description).toMatch(/^Bad Request: document: this method takes no file/);
      expect(bot.sent()).toEqual([]);

      // A webhook set through the native API: its answer is the receiver's business only.
      const native = await hookedBot(`answers_native_${mode === 'in-process' ? 'a' : 'b'}`, 6300, true);
      native.hook.answers.push({ type: 'application/json', body: JSON.stringify({ method: 'sendMessage', chat_id: 6300, text: 'never sent' }) });
      await native.say('x');
      await until(native.deliveries, (d) => d.length === 1 && d[0]!.status === 'succeeded');
      await new Promise((r) => setTimeout(r, 300));
      expect(native.sent()).toEqual([]);

      // Counted by outcome where the answers run (the in-process role serves /metrics here).
      if (mode === 'in-process') {
        const metrics = await (await fetch(`${h.url}/metrics`)).text();
        expect(metrics).toMatch(/botplatform_webhook_answers_total\{outcome="invalid"\} [3-9]/);
        expect(metrics).toMatch(/botplatform_webhook_answers_total\{outcome="executed"\} [3-9]/);
      }
      // No credential in any log line: neither the bot's token nor the grant the answer ran with.
      const all = logLines.join('\n');
      expect(all).not.toContain(bot.token);
      expect(all).not.toMatch(/bgr1_[A-Za-z0-9_-]{8}/);
    }, 30_000);
  });
}
