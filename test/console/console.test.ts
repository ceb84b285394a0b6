/**
 * The web console in Chromium against the real service: a developer's day (sign in,
 * create, approval by a reviewer, the token revealed once, a webhook to a real HTTPS
 * receiver, a failed delivery retried, metrics moving), the reviewer's queue, an
 * expired JWT, phone width, the headers the console is served with, and the one-click
 * local sign-in link `npm start` prints.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildConsole, launchChromium, screenshotPath } from '../helpers/browser.js';
import { call, client, startHarness, type Harness } from '../helpers/harness.js';
import { freePort } from '../helpers/ports.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { createTestPki, type TestPki } from '../helpers/tls.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
let browser: Browser | undefined;
// Without Chromium every browser test fails (with why), rather than the suite being skipped.
let launchError: unknown;

beforeAll(async () => {
  await buildConsole();
  try {
    browser = await launchChromium();
  } catch (err) {
    launchError = err;
  }
  // A first run installs Chromium (scripts/ensure-chromium.sh): minutes.
}, 600_000);
afterAll(async () => {
  await browser?.close();
});

async function shot(page: Page, name: string) {
  const file = screenshotPath(name);
  if (file) await page.screenshot({ path: file, fullPage: true });
}

/**
 * Opens one of the bot page's tabs and waits until the page shows it. The hash change renders on a later
 * task, so a locator used right after the click could otherwise still see the previous tab (on a loaded
 * machine, `getByLabel('URL')` once found the profile's three URL fields).
 */
async function openTab(page: Page, name: string) {
  const link = page.getByRole('navigation', { name: 'Bot sections' }).getByRole('link', { name, exact: true });
  await link.click();
  await expect.poll(() => link.getAttribute('aria-current')).toBe('page');
}

/** A fresh browser profile (its own session storage), with CSP violations collected. */
async function newPage(base: string, viewport = { width: 1200, height: 900 }) {
  if (!browser) throw launchError;
  const context = await browser.newContext({ baseURL: base, viewport });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  const page = await context.newPage();
  const cspViolations: string[] = [];
  const pageErrors: string[] = [];
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
  });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  return { context, page, cspViolations, pageErrors };
}

async function signInByPasting(page: Page, jwt: string) {
  await page.goto('/');
  await page.getByLabel('Account JWT').fill(jwt);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'My bots' }).waitFor();
}

describe('console: a developer and a reviewer', () => {
  let h: Harness;
  let pki: TestPki;
  let receiver: Receiver;
  let devJwt: string;
  let adminJwt: string;
  let dev: { context: BrowserContext; page: Page; cspViolations: string[]; pageErrors: string[] };
  let reviewer: { context: BrowserContext; page: Page; cspViolations: string[]; pageErrors: string[] };
  let botId: string;
  let token: string;

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      WEBHOOK_CA_FILE: pki.caFile,
      WEBHOOK_RETRY_SCHEDULE: '60s',
      WEBHOOK_TIMEOUT_MS: '2000',
    });
    receiver = await startReceiver(pki);
    devJwt = await h.jwt('console-dev');
    adminJwt = await h.jwt('console-reviewer', { admin: true });
  });
  afterAll(async () => {
    await dev?.context.close();
    await reviewer?.context.close();
    await receiver?.close();
    await h?.close();
  });

  it('is served at / with a strict CSP, index not cached and hashed assets immutable', async () => {
    const index = await fetch(`${h.url}/`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const csp = index.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    const html = await index.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
    const asset = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const js = await fetch(h.url + asset);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/javascript/);
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect((await fetch(`${h.url}/console/assets/..%2Fpackage.json`)).status).toBe(404);
    expect((await fetch(`${h.url}/console/assets/nope.js`)).status).toBe(404);
  });

  it('signs in with a pasted JWT, from the keyboard, and refuses a bad one with the API\'s words', async () => {
    dev = await newPage(h.url);
    const { page } = dev;
    await page.goto('/');
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await shot(page, 'sign-in');
    await page.getByLabel('Account JWT').fill('not-a-jwt');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.locator('#jwt-error').textContent()).toMatch(/refused this JWT/);
    // Keyboard only: focus the field, type, Tab to the button, Enter.
    await page.getByLabel('Account JWT').fill('');
    await page.getByLabel('Account JWT').focus();
    await page.keyboard.type(devJwt);
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
    // Kept in session storage only: not in the URL, not in local storage or cookies.
    expect(page.url()).not.toContain(devJwt);
    expect(await page.evaluate(() => sessionStorage.length)).toBe(1);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(await dev.context.cookies()).toEqual([]);
    // Not an admin: no review queue.
    await expect.poll(() => page.getByRole('link', { name: 'My bots' }).count()).toBe(1);
    expect(await page.getByRole('link', { name: 'Review queue' }).count()).toBe(0);
  });

  it('creates a bot, showing the API\'s validation messages beside their fields', async () => {
    const { page } = dev;
    await page.getByRole('link', { name: 'New bot' }).click();
    await page.getByLabel('Name', { exact: true }).fill('Echo');
    await page.getByLabel('Username').fill('Bad Name!');
    await page.getByRole('button', { name: 'Submit for review' }).click();
    const apiSays = await client(h.url, devJwt).post('/api/v1/bots/applications', { name: 'Echo', username: 'Bad Name!', scopes: ['send', 'receive'] });
    expect(apiSays.status).toBe(400);
    const expected = String(apiSays.body.error.message).replace(/^username:\s*/, '');
    await expect.poll(() => page.locator('#username-error').textContent()).toBe(expected);
    expect(await page.getByLabel('Username').getAttribute('aria-invalid')).toBe('true');
    await shot(page, 'create-bot-errors');
    await page.getByLabel('Username').fill('console_echo_bot');
    await page.getByRole('button', { name: 'Submit for review' }).click();
    await page.getByRole('heading', { name: /Echo/ }).waitFor();
    botId = decodeURIComponent(/#\/bots\/([^/]+)$/.exec(page.url())![1]!);
    await expect.poll(() => page.getByText('Waiting for review').count()).toBe(1);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'My bots' }).click();
    const row = page.getByRole('row', { name: /console_echo_bot/ });
    await expect.poll(() => row.textContent()).toMatch(/pending.*inactive.*polling/);
  });

  it('the reviewer sees the queue (admin only), rejects one with a reason and approves the other', async () => {
    await client(h.url, devJwt).post('/api/v1/bots/applications', { name: 'Spam', username: 'console_spam_bot' });
    reviewer = await newPage(h.url);
    const { page } = reviewer;
    await signInByPasting(page, adminJwt);
    await page.getByRole('link', { name: 'Review queue' }).click();
    const echo = page.getByRole('listitem', { name: 'Application Echo' });
    const spam = page.getByRole('listitem', { name: 'Application Spam' });
    await echo.waitFor();
    await spam.waitFor();
    await shot(page, 'review-queue');
    await spam.getByRole('button', { name: 'Reject…' }).click();
    await spam.getByRole('button', { name: 'Reject', exact: true }).click();
    await expect.poll(() => spam.locator('.field-error').textContent()).toBe('is required'); // the API's "reason: is required"
    await spam.getByLabel(/Reason/).fill('Looks like spam');
    await spam.getByRole('button', { name: 'Reject', exact: true }).click();
    await expect.poll(() => page.getByText('Rejected @console_spam_bot.').count()).toBe(1);
    await echo.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.getByText('Approved @console_echo_bot.').count()).toBe(1);
    await expect.poll(() => page.getByRole('listitem').count()).toBe(0); // the pending queue is empty
    await page.getByLabel('Show').selectOption('rejected');
    await expect.poll(() => page.getByText('Reason: Looks like spam').count()).toBe(1);
    // The developer's JWT gets no queue, even by its address.
    await dev.page.goto('/#/review');
    await expect.poll(() => dev.page.getByText('The review queue is for reviewers').count()).toBe(1);
  });

  it('reveals the token once, with a copy button, and regenerates it after a confirmation', async () => {
    const { page } = dev;
    await page.goto(`/#/bots/${botId}`);
    const reveal = page.locator('#one-time-token');
    await page.getByRole('button', { name: 'Reveal token' }).click();
    await reveal.waitFor();
    await expect.poll(() => page.getByText('you will not see this again').count()).toBe(1);
    token = (await reveal.textContent())!;
    expect(token).toMatch(/^sbot_/);
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token })).status).toBe(200);
    await page.getByRole('button', { name: 'Copy token' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(token);
    // Beside it, its Telegram form ("<bot user id>:<token>"), which the Telegram surface takes.
    const tgMe = await call(h.url, 'GET', `/bot${token}/getMe`);
    expect(await page.locator('#telegram-token').textContent()).toBe(`${tgMe.body.result.id}:${token}`);
    await page.getByRole('button', { name: 'Copy Telegram-form token' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(`${tgMe.body.result.id}:${token}`);
    expect((await call(h.url, 'GET', `/bot${tgMe.body.result.id}:${token}/getMe`)).status).toBe(200);
    await shot(page, 'bot-token-reveal');
    // Not kept anywhere: a reload shows no token.
    expect(await page.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }))).not.toContain(token);
    await page.reload();
    await page.getByRole('heading', { name: 'Token' }).waitFor();
    expect(await page.locator('#one-time-token').count()).toBe(0);
    // Regenerate: nothing happens until confirmed.
    await page.getByRole('button', { name: 'Regenerate token…' }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token })).status).toBe(200);
    await page.getByRole('button', { name: 'Regenerate token…' }).click();
    await page.getByRole('button', { name: 'Yes, regenerate' }).click();
    await reveal.waitFor();
    const next = (await reveal.textContent())!;
    expect(next).not.toBe(token);
    expect(await page.locator('#telegram-token').textContent()).toBe(`${tgMe.body.result.id}:${next}`);
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token })).status).toBe(401);
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token: next })).status).toBe(200);
    token = next;
    await page.getByRole('button', { name: 'I have saved it' }).click();
    expect(await page.locator('#one-time-token').count()).toBe(0);
  });

  it('edits the profile (command menu included), with the API\'s errors per field', async () => {
    const { page } = dev;
    await page.getByLabel('Short description').fill('x'.repeat(121));
    await page.getByRole('button', { name: 'Add command' }).click();
    await page.getByLabel('Command menu 1 command').fill('Bad Command');
    await page.getByLabel('Command menu 1 description').fill('Starts');
    await page.getByRole('button', { name: 'Save profile' }).click();
    await expect.poll(() => page.locator('#p-short-error').textContent()).toMatch(/120/);
    // Beside the input, in words (not "command_menu[0].command: ..."); the rules were said before.
    await expect.poll(() => page.locator('#command-menu-0-command-error').textContent()).toBe('command 1, command: is not in the allowed format (see the rules above)');
    expect(await page.getByLabel('Command menu 1 command').getAttribute('aria-invalid')).toBe('true');
    expect(await page.locator('#command-menu-hint').textContent()).toMatch(/1 to 32 of a-z, 0-9 and _/);
    await page.getByLabel('Short description').fill('Echoes what you say');
    await page.getByLabel('Command menu 1 command').fill('start');
    await page.getByRole('button', { name: 'Save profile' }).click();
    await expect.poll(() => page.getByText('Profile saved.').count()).toBe(1);
    const bot = (await client(h.url, devJwt).get(`/api/v1/bots/my/${botId}`)).body;
    expect(bot.short_description).toBe('Echoes what you say');
    expect(bot.command_menu).toEqual([{ command: 'start', description: 'Starts' }]);
    await shot(page, 'bot-overview');
  });

  it('sets a webhook (refusing a private address as the API words it), sees a failed delivery and retries it', async () => {
    const { page } = dev;
    await openTab(page, 'Webhook');
    await page.getByLabel('URL', { exact: true }).fill('https://10.1.2.3/hook');
    await page.getByRole('button', { name: 'Generate' }).click();
    const secret = await page.getByLabel('Secret token').inputValue();
    expect(secret).toMatch(/^[A-Za-z0-9_-]{32}$/);
    await page.getByRole('button', { name: 'Save webhook' }).click();
    const refusal = await client(h.url, devJwt).post(`/api/v1/bots/my/${botId}/webhook`, { url: 'https://10.1.2.3/hook', secret_token: secret });
    expect(refusal.status).toBe(400);
    await expect.poll(() => page.locator('#wh-url-error').textContent()).toBe(String(refusal.body.error.message).replace(/^url:\s*/, ''));
    receiver.always({ status: 500 });
    await page.getByLabel('URL', { exact: true }).fill(receiver.url);
    await page.getByRole('button', { name: 'Save webhook' }).click();
    await expect.poll(() => page.getByText('Webhook set').count()).toBe(1);
    await shot(page, 'webhook');

    // A test message, watched from the page until its delivery fails.
    await openTab(page, 'Test updates');
    await page.getByLabel('Text').fill('hello from the browser');
    await page.getByRole('button', { name: 'Send test message' }).click();
    await receiver.waitFor(1);
    expect(JSON.parse(receiver.received[0]!.raw.toString()).message.text).toBe('hello from the browser');
    await expect.poll(() => page.locator('.sent .state').first().textContent(), { timeout: 10_000 }).toMatch(/^retrying \(HTTP 500, \d+ ms\)$/); // the status said once, not "HTTP 500, HTTP 500"
    await shot(page, 'test-updates');

    // The webhook state shows the pending update and the last error.
    await openTab(page, 'Webhook');
    await expect.poll(() => page.locator('#pending-count').textContent()).toBe('1');
    await expect.poll(() => page.locator('#last-error').textContent()).toMatch(/500/);
    expect(await page.locator('#webhook-disabled').textContent()).toBe('enabled');

    await openTab(page, 'Deliveries');
    const row = page.locator('tbody tr').first();
    await expect.poll(() => row.textContent()).toMatch(/retrying.*500/);
    await page.getByLabel(/^Status/).selectOption('succeeded');
    await expect.poll(() => page.locator('tbody tr').count()).toBe(0);
    await page.getByLabel(/^Status/).selectOption('retrying');
    await expect.poll(() => page.locator('tbody tr').count()).toBe(1);
    await shot(page, 'deliveries');
    receiver.always({ status: 200 });
    await page.getByRole('button', { name: /^Retry update/ }).click();
    await expect.poll(() => page.getByText(/Retried update \d+: succeeded, HTTP 200/).count()).toBe(1);
    await page.getByLabel(/^Status/).selectOption('');
    await expect.poll(() => page.locator('tbody tr').first().textContent()).toMatch(/succeeded.*200/);
    expect(receiver.received.length).toBe(2);
    // Bulk recovery: nothing is dead_letter, so nothing is queued again.
    await page.getByRole('button', { name: 'Queue dead letters again' }).click();
    await expect.poll(() => page.getByText('No dead-letter deliveries to queue again.').count()).toBe(1);
    expect(receiver.received.length).toBe(2);
  });

  it('shows metrics that move with the bot\'s calls', async () => {
    const { page } = dev;
    await openTab(page, 'Metrics');
    // Each process (and dispatcher thread) writes its statistics every second; the tab reads them every 2 s.
    await expect.poll(() => page.locator('#m-attempts').textContent(), { timeout: 10_000 }).toBe('2');
    const before = Number(await page.locator('#m-calls').textContent());
    for (let i = 0; i < 3; i++) await call(h.url, 'POST', '/api/v1/bots/getMe', { token });
    await call(h.url, 'POST', '/api/v1/bots/sendMessage', { token, body: { chat_id: 1, text: 'x' } }); // a chat it may not write to
    await expect.poll(() => page.locator('#m-calls').textContent(), { timeout: 15_000 }).toBe(String(before + 4));
    await expect.poll(() => page.locator('#m-errors').textContent()).not.toBe('0');
    await expect.poll(() => page.locator('.bars th', { hasText: 'getMe' }).count()).toBe(1);
    expect(await page.locator('.chart canvas').count()).toBeGreaterThanOrEqual(2);
    await shot(page, 'metrics');
  });

  it('reads on a phone width without sideways scrolling', async () => {
    const phone = await newPage(h.url, { width: 390, height: 844 });
    try {
      await signInByPasting(phone.page, devJwt);
      for (const hash of ['#/bots', `#/bots/${botId}`, `#/bots/${botId}/deliveries`, `#/bots/${botId}/metrics`]) {
        await phone.page.goto(`/${hash}`);
        await phone.page.waitForTimeout(300);
        const wide = await phone.page.evaluate(() => [...document.querySelectorAll('body *')]
          .filter((el) => el.getBoundingClientRect().right > 391 && !el.parentElement?.closest('.table-wrap')) // tables scroll in their box
          .map((el) => `${el.tagName.toLowerCase()}.${el.className}`));
        expect({ hash, wide }).toEqual({ hash, wide: [] });
        expect(await phone.page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      }
      await phone.page.goto(`/#/bots/${botId}`);
      await phone.page.getByRole('heading', { name: 'Profile' }).waitFor();
      await shot(phone.page, 'phone-bot');
    } finally {
      await phone.context.close();
    }
  });

  it('sends an expired JWT back to sign-in with a message', async () => {
    const short = await newPage(h.url);
    try {
      await signInByPasting(short.page, await h.jwt('console-dev', { expiresIn: '3s' }));
      await short.page.getByRole('heading', { name: 'Sign in' }).waitFor({ timeout: 10_000 });
      await expect.poll(() => short.page.getByText(/expired/i).count()).toBeGreaterThan(0);
      expect(await short.page.evaluate(() => sessionStorage.length)).toBe(0);
      // Signing out clears the session too.
      await signInByPasting(short.page, devJwt);
      await short.page.getByRole('button', { name: 'Sign out' }).click();
      await short.page.getByRole('heading', { name: 'Sign in' }).waitFor();
      expect(await short.page.evaluate(() => sessionStorage.length)).toBe(0);
    } finally {
      await short.context.close();
    }
  });

  it('ran without a Content-Security-Policy violation or a page error', () => {
    expect([...dev.cspViolations, ...reviewer.cspViolations]).toEqual([]);
    expect([...dev.pageErrors, ...reviewer.pageErrors]).toEqual([]);
  });
});

describe('console: the one-click local sign-in link of `npm start`', () => {
  let child: ChildProcess;
  let out = '';
  let base: string;
  let dir: string;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-console-'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const env: Record<string, string> = { ...process.env as Record<string, string>, DATA_DIR: dir, HOST: '127.0.0.1', PORT: String(port), GRPC_PORT: '0', LOG_LEVEL: 'warn' };
    for (const k of Object.keys(env)) if (k.startsWith('AUTH_') || k === 'DATABASE_URL' || k === 'KAFKA_BROKERS') delete env[k];
    child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout!.on('data', (c) => { out += String(c); });
    const end = Date.now() + 60_000;
    while (!/as reviewer:/.test(out)) {
      if (Date.now() > end || child.exitCode !== null) throw new Error(`the service did not print its sign-in links:\n${out}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 90_000);
  afterAll(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('signs the developer in with one click, once; the link carries a code, not a JWT', async () => {
    const link = /as developer: (\S+)/.exec(out)![1]!;
    const code = /#sign-in=([\w-]+)$/.exec(link)![1]!;
    expect(code.split('.').length).toBe(1); // not a JWT
    const { page, context } = await newPage(base);
    try {
      const requested: string[] = [];
      page.on('request', (r) => requested.push(r.url()));
      await page.goto(link);
      await page.getByRole('heading', { name: 'My bots' }).waitFor();
      expect(page.url()).not.toContain(code); // taken out of the address bar
      expect(requested.some((u) => u.includes(code))).toBe(false); // never sent in a URL
      expect(await page.getByRole('link', { name: 'Review queue' }).count()).toBe(0);
      // The JWT it got is the developer's.
      const jwt = await page.evaluate(() => sessionStorage.getItem('botplatform.console.jwt'));
      expect(JSON.parse(Buffer.from(jwt!.split('.')[1]!, 'base64url').toString()).sub).toBe('developer');
      // Single use: the same link again is refused, with a way forward.
      await page.evaluate(() => sessionStorage.clear());
      await page.goto('about:blank');
      await page.goto(link);
      await expect.poll(() => page.getByText(/expired or was already used/).count()).toBe(1);
      await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    } finally {
      await context.close();
    }
    // The reviewer's link signs in an admin.
    const admin = await newPage(base);
    try {
      await admin.page.goto(/as reviewer: {2}(\S+)/.exec(out)![1]!);
      await admin.page.getByRole('link', { name: 'Review queue' }).waitFor();
    } finally {
      await admin.context.close();
    }
  });

  it('refuses a made-up code in the console envelope', async () => {
    const r = await call(base, 'POST', '/console/local-sign-in', { body: { code: 'made-up' } });
    expect(r.status).toBe(401);
    expect(r.body.error.status).toBe('UNAUTHENTICATED');
    const empty = await call(base, 'POST', '/console/local-sign-in', { body: {} });
    expect(empty.status).toBe(400);
  });
});
