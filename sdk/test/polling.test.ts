/**
 * The polling runner against the real service. A small forwarding proxy on loopback
 * sits in front of it to record what the runner sends and, where the service has
 * no way to produce it on demand (a 429 with retry_after, a 503, a dropped
 * connection), to answer one call with exactly that before forwarding again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from '../../test/helpers/harness.js';
import { startReceiver } from '../../test/helpers/receiver.js';
import { createTestPki, type TestPki } from '../../test/helpers/tls.js';
import {
  BotPlatformError,
  createBotClient,
  PollingConflictError,
  runPolling,
  WebhookActiveError,
  type Update,
} from '../src/index.js';
import { sdkAccount, until, type SdkAccount, type TestBot } from './helpers.js';
import { startProxy, type Proxy } from './proxy.js';

describe('polling runner', () => {
  let h: Harness;
  let pki: TestPki;
  let account: SdkAccount;
  const closers: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile });
    account = await sdkAccount(h, 'sdk-polling');
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
    await h?.close();
  });

  async function botBehindProxy(username: string): Promise<TestBot & { proxy: Proxy; viaProxy: ReturnType<typeof createBotClient> }> {
    const bot = await account.approvedBot(username);
    const proxy = await startProxy(h.url);
    closers.push(proxy.close);
    return { ...bot, proxy, viaProxy: createBotClient(bot.token, { baseUrl: proxy.url }) };
  }
  const inject = (id: string, text: string) => account.console.createTestUpdate({ id, text });
  const quietErrors: { error: unknown; retryInMs?: number; update?: Update }[] = [];
  const onError = (error: unknown, info: { retryInMs?: number; update?: Update }) => quietErrors.push({ error, ...info });

  it('handles updates in update_seq order, long-polls with offset = max update_seq + 1, and confirms on stop', async () => {
    const b = await botBehindProxy('sdk_poll_order');
    await inject(b.id, 'one');
    await inject(b.id, 'two');
    const seen: Update[] = [];
    const ac = new AbortController();
    const run = runPolling(b.viaProxy, { signal: ac.signal, timeoutSeconds: 20, onUpdate: (u) => void seen.push(u), onError });
    await until(async () => seen.length, (n) => n >= 2);
    const t0 = Date.now();
    await inject(b.id, 'three');
    await until(async () => seen.length, (n) => n >= 3);
    const latency = Date.now() - t0;
    ac.abort();
    await run;

    expect(seen.map((u) => [u.update_seq, u.message?.text])).toEqual([[1, 'one'], [2, 'two'], [3, 'three']]);
    expect(latency).toBeLessThan(2000); // answered by the waiting poll, not a later one
    expect(b.proxy.calls[0]!.body).toMatchObject({ timeout: 20 });
    expect(b.proxy.calls[0]!.body.offset).toBeUndefined();
    expect(b.proxy.calls[1]!.body).toMatchObject({ offset: 3, timeout: 20 });
    expect(b.proxy.calls.at(-1)!.body).toMatchObject({ offset: 4, timeout: 0 });
    // Confirmed: nothing is handed out again.
    expect(await b.bot.getUpdates({ timeout: 0 })).toEqual([]);
  });

  it('stops promptly on abort while a long poll is waiting', async () => {
    const b = await botBehindProxy('sdk_poll_abort');
    const ac = new AbortController();
    const run = runPolling(b.viaProxy, { signal: ac.signal, timeoutSeconds: 30, onUpdate: () => {}, onError });
    await until(async () => b.proxy.calls.length, (n) => n >= 1);
    const t0 = Date.now();
    ac.abort();
    await expect(run).resolves.toBeUndefined();
    expect(Date.now() - t0).toBeLessThan(1000);
    // An update that arrives after the stop waits for the next run.
    await inject(b.id, 'later');
    expect((await b.bot.getUpdates({ timeout: 0 })).map((u) => u.message?.text)).toEqual(['later']);
  });

  it('refuses to start while a webhook is set, explaining the 409', async () => {
    const b = await botBehindProxy('sdk_poll_webhook');
    const receiver = await startReceiver(pki);
    closers.push(receiver.close);
    await b.bot.setWebhook({ url: receiver.url, secret_token: 'poll_secret' });
    const err = await runPolling(b.viaProxy, { onUpdate: () => {}, onError }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WebhookActiveError);
    expect((err as Error).message).toMatch(/409 Conflict/);
    expect((err as Error).message).toMatch(/deleteWebhook/);
    expect((err as WebhookActiveError).webhookUrl).toBe(receiver.url);
    expect(b.proxy.calls).toHaveLength(0);

    await b.bot.deleteWebhook();
    const ac = new AbortController();
    const run = runPolling(b.viaProxy, { signal: ac.signal, timeoutSeconds: 5, onUpdate: () => {}, onError });
    await until(async () => b.proxy.calls.length, (n) => n >= 1);
    ac.abort();
    await run;
  });

  it('stops with WebhookActiveError when a webhook is set while it polls, and PollingConflictError when another poller takes over', async () => {
    const b = await botBehindProxy('sdk_poll_cut');
    const receiver = await startReceiver(pki);
    closers.push(receiver.close);
    // Each run's end is awaited from the start: it can end before the call that ends it has its own answer.
    const run = runPolling(b.viaProxy, { timeoutSeconds: 20, onUpdate: () => {}, onError }).catch((e: unknown) => e);
    await until(async () => b.proxy.calls.length, (n) => n >= 1);
    await new Promise((r) => setTimeout(r, 100));
    await account.console.setBotWebhook({ id: b.id, url: receiver.url, secret_token: 'poll_secret' });
    expect(await run).toBeInstanceOf(WebhookActiveError);

    await b.bot.deleteWebhook();
    const second = runPolling(b.viaProxy, { timeoutSeconds: 20, onUpdate: () => {}, onError }).catch((e: unknown) => e);
    await until(async () => b.proxy.calls.length, (n) => n >= 2);
    await new Promise((r) => setTimeout(r, 100));
    const other = b.bot.getUpdates({ timeout: 1 });
    const err = await second;
    expect(err).toBeInstanceOf(PollingConflictError);
    expect((err as Error).message).toMatch(/only one instance/);
    await other;
  });

  it('waits exactly retry_after on a 429, then goes on', async () => {
    const b = await botBehindProxy('sdk_poll_429');
    b.proxy.script.push({
      status: 429,
      body: { ok: false, error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } },
      headers: { 'retry-after': '1' },
    });
    await inject(b.id, 'after the wait');
    const errors: { error: unknown; retryInMs?: number }[] = [];
    const seen: Update[] = [];
    const ac = new AbortController();
    const run = runPolling(b.viaProxy, { signal: ac.signal, timeoutSeconds: 5, onUpdate: (u) => void seen.push(u), onError: (error, info) => errors.push({ error, ...info }) });
    await until(async () => seen.length, (n) => n >= 1, 5000);
    ac.abort();
    await run;
    expect(seen.map((u) => u.message?.text)).toEqual(['after the wait']);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.error).toMatchObject({ httpStatus: 429, retryAfter: 1 });
    expect(errors[0]!.retryInMs).toBe(1000);
    const gap = b.proxy.calls[1]!.at - b.proxy.calls[0]!.at;
    expect(gap).toBeGreaterThanOrEqual(1000);
    expect(gap).toBeLessThan(1500);
  });

  it('backs off exponentially on 5xx and dropped connections, and recovers', async () => {
    const b = await botBehindProxy('sdk_poll_backoff');
    b.proxy.script.push(
      { status: 503, body: { ok: false, error_code: 503, description: 'Service Unavailable: try later' } },
      'drop',
      { status: 502, body: '<html>bad gateway</html>' },
    );
    await inject(b.id, 'recovered');
    const errors: { error: unknown; retryInMs?: number }[] = [];
    const seen: Update[] = [];
    const ac = new AbortController();
    const run = runPolling(b.viaProxy, {
      signal: ac.signal,
      timeoutSeconds: 5,
      backoff: { initialMs: 100, maxMs: 1000 },
      onUpdate: (u) => void seen.push(u),
      onError: (error, info) => errors.push({ error, ...info }),
    });
    await until(async () => seen.length, (n) => n >= 1, 5000);
    ac.abort();
    await run;
    expect(seen.map((u) => u.message?.text)).toEqual(['recovered']);
    expect(errors.map((e) => (e.error as BotPlatformError).httpStatus)).toEqual([503, 0, 502]);
    // Jittered exponential: 100·2^n scaled by [0.5, 1).
    errors.forEach((e, n) => {
      expect(e.retryInMs!).toBeGreaterThanOrEqual(50 * 2 ** n);
      expect(e.retryInMs!).toBeLessThanOrEqual(100 * 2 ** n);
    });
    for (let i = 1; i < 4; i++) expect(b.proxy.calls[i]!.at - b.proxy.calls[i - 1]!.at).toBeGreaterThanOrEqual(errors[i - 1]!.retryInMs! - 5);
  });

  it('gives up at once on a refused token', async () => {
    const revoked = await account.approvedBot('sdk_poll_revoked');
    await account.console.regenerateToken({ id: revoked.id });
    const err = await runPolling(revoked.bot, { onUpdate: () => {}, onError }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BotPlatformError);
    expect(err).toMatchObject({ httpStatus: 401, code: 'UNAUTHENTICATED' });
  });

  it('a handler that throws is reported and passed over; the next update is handled', async () => {
    const b = await botBehindProxy('sdk_poll_handler');
    await inject(b.id, 'bad');
    await inject(b.id, 'good');
    const errors: { error: unknown; update?: Update }[] = [];
    const seen: string[] = [];
    const ac = new AbortController();
    const run = runPolling(b.viaProxy, {
      signal: ac.signal,
      timeoutSeconds: 5,
      onUpdate: (u) => {
        if (u.message?.text === 'bad') throw new Error('cannot handle');
        seen.push(u.message!.text!);
      },
      onError: (error, info) => errors.push({ error, ...info }),
    });
    await until(async () => seen.length, (n) => n >= 1);
    ac.abort();
    await run;
    expect(seen).toEqual(['good']);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.update?.message?.text).toBe('bad');
    expect(await b.bot.getUpdates({ timeout: 0 })).toEqual([]);
  });
});
