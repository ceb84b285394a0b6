/**
 * A bot's life in the console (issue 35), in Chromium against the real service: the token
 * revealed in view and focused on a 390×844 phone (first read, on a click, and regeneration),
 * the first token not lost silently when one leaves before revealing it, a
 * quickstart after approval, a rejected application changed and resubmitted, a pending one
 * withdrawn, an approved one deleted (its token refused, the date its data goes said from
 * the API's answer), a webhook the platform disabled
 * shown in the header once a tab is opened (and no longer once enabled, by the page's own
 * read every 10 s), the metrics charts' first paint on a phone drawing the window's history,
 * scope boxes a finger can hit, no scope refused beside the boxes, a deep link kept through
 * sign-in, titles that say where one is, no 403 on a developer's pages, and axe-core with
 * no critical, serious or moderate finding.
 */
import type { Browser, BrowserContext, Dialog, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { axeFindings, buildConsole, launchChromium } from '../helpers/browser.js';
import { approvedBot, call, client, startHarness, type Harness } from '../helpers/harness.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { createTestPki, type TestPki } from '../helpers/tls.js';


let browser: Browser | undefined;
let launchError: unknown;
beforeAll(async () => {
  await buildConsole();
  try {
    browser = await launchChromium();
  } catch (err) {
    launchError = err;
  }
}, 600_000);
afterAll(async () => {
  await browser?.close();
});

describe('console: a bot\'s whole life, on a phone and a desktop', () => {
  let h: Harness;
  let pki: TestPki;
  let receiver: Receiver;
  let devJwt: string;
  let adminJwt: string;
  const contexts: BrowserContext[] = [];
  const forbidden: string[] = [];
  const pageErrors: string[] = [];
  const findings: Record<string, string[]> = {};

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_RETRY_SCHEDULE: '200ms,200ms,200ms,200ms,200ms',
      WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_DISABLE_AFTER: '1s', DELETED_BOT_RETENTION: '7d',
    });
    receiver = await startReceiver(pki);
    devJwt = await h.jwt('console-life-dev');
    adminJwt = await h.jwt('console-life-reviewer', { admin: true });
  });
  afterAll(async () => {
    for (const c of contexts) await c.close();
    await receiver?.close();
    await h?.close();
  });

  async function open(viewport = { width: 1200, height: 900 }) {
    if (!browser) throw launchError;
    const context = await browser.newContext({ baseURL: h.url, viewport });
    contexts.push(context);
    const page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('response', (r) => { if (r.status() === 403) forbidden.push(r.url()); });
    return page;
  }
  async function signIn(page: Page, jwt = devJwt) {
    await page.getByLabel('Account JWT').fill(jwt);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }
  /** Whether the element is wholly inside the viewport. */
  const inView = (page: Page, selector: string) => page.evaluate((sel) => {
    const r = document.querySelector(sel)!.getBoundingClientRect();
    return r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth;
  }, selector);

  it('keeps a deep link through sign-in; titles say where one is; no scope is refused beside the boxes', async () => {
    const bot = await approvedBot(h, devJwt, 'life_console_deep');
    const page = await open();
    await page.goto(`/#/bots/${bot.id}/deliveries`);
    expect(await page.title()).toBe('Sign in · Bot platform');
    await signIn(page);
    await page.getByRole('heading', { name: 'Deliveries' }).waitFor();
    expect(page.url()).toContain(`#/bots/${bot.id}/deliveries`);
    await expect.poll(() => page.title()).toBe('Bot life_console_deep (@life_console_deep) · Deliveries · Bot platform');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'My bots' }).click();
    await expect.poll(() => page.title()).toBe('My bots · Bot platform');

    await page.getByRole('link', { name: 'New bot' }).click();
    await expect.poll(() => page.title()).toBe('New bot · Bot platform');
    await page.getByLabel('Name', { exact: true }).fill('No scope');
    await page.getByLabel('Username').fill('life_no_scope_bot');
    await page.getByLabel('send').uncheck();
    await page.getByLabel('receive').uncheck();
    await page.getByRole('button', { name: 'Submit for review' }).click();
    await expect.poll(() => page.locator('fieldset .field-error').textContent()).toBe('choose at least one (send, receive)');
    expect((await client(h.url, devJwt).get('/api/v1/bots/my?limit=100')).body.items.map((b: { username: string }) => b.username)).not.toContain('life_no_scope_bot');
    findings.create = await axeFindings(page);
  });

  it('on a 390×844 phone the token is revealed in view and focused, first read and regeneration alike; a quickstart follows approval', async () => {
    const created = await client(h.url, devJwt).post('/api/v1/bots/applications', { name: 'Phone', username: 'life_phone_bot', description: 'x'.repeat(2000) });
    expect((await client(h.url, adminJwt).post(`/api/v1/admin/bots/${created.body.id}/approve`, {})).status).toBe(200);
    const page = await open({ width: 390, height: 844 });
    await page.goto('/');
    await signIn(page);
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
    await page.goto(`/#/bots/${created.body.id}`);
    // The token the API handed over on this first read waits for a click: not on the screen until then.
    await page.getByRole('button', { name: 'Reveal token' }).waitFor();
    expect(await inView(page, '#token-waiting')).toBe(true);
    expect(await page.locator('#one-time-token').count()).toBe(0);
    const beforeClick = (await page.locator('body').textContent())!;
    expect(await page.locator('#token-waiting').textContent()).toContain('It is shown only once.');
    findings.phoneTokenWaiting = await axeFindings(page);
    await page.getByRole('button', { name: 'Reveal token' }).click();
    await page.locator('#one-time-token').waitFor();
    await expect.poll(() => inView(page, '#reveal-title')).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('token-reveal');
    expect(await page.getByRole('status').filter({ hasText: 'Your bot token is shown below' }).count()).toBe(1);
    const first = (await page.locator('#one-time-token').textContent())!;
    expect(beforeClick).not.toContain(first);
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token: first })).status).toBe(200);
    await page.getByRole('button', { name: 'I have saved it' }).click();
    // The quickstart: the API base and a first call.
    expect(await page.locator('#qs-curl').textContent()).toBe(`curl -s -X POST ${h.url}/api/v1/bots/getMe -H "Authorization: Bearer $BOT_TOKEN"`);
    // The SDK and a Telegram framework, pointed at this platform.
    const quickstart = (await page.locator('section[aria-labelledby="qs-title"]').textContent())!;
    expect(quickstart).toContain(`createBotClient(process.env.BOT_TOKEN!, { baseUrl: '${h.url}' })`);
    expect(quickstart).toContain(`.base_url('${h.url}/bot')`);
    findings.phoneOverview = await axeFindings(page);

    // Regenerated from the bottom of a long page: the new token is drawn in view, not above it.
    await page.getByRole('button', { name: 'Regenerate token…' }).scrollIntoViewIfNeeded();
    await page.getByRole('button', { name: 'Regenerate token…' }).click();
    await page.getByRole('button', { name: 'Yes, regenerate' }).click();
    await page.locator('#one-time-token').waitFor();
    await expect.poll(() => inView(page, '#reveal-title')).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('token-reveal');
    expect(await page.locator('#one-time-token').textContent()).not.toBe(first);
  });

  it('the first token, not yet revealed, is not lost silently: kept while moving around the console; a reload and signing out ask first', async () => {
    const created = await client(h.url, devJwt).post('/api/v1/bots/applications', { name: 'Waiting', username: 'life_waiting_bot' });
    expect((await client(h.url, adminJwt).post(`/api/v1/admin/bots/${created.body.id}/approve`, {})).status).toBe(200);
    const page = await open();
    await page.goto('/');
    await signIn(page);
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
    await page.goto(`/#/bots/${created.body.id}`);
    const revealButton = page.getByRole('button', { name: 'Reveal token' });
    await revealButton.waitFor();
    expect(await page.locator('#token-waiting').textContent()).toMatch(/reloading or closing\s+the tab, or signing out, loses it \(you are asked first\)/);
    findings.tokenWaiting = await axeFindings(page);
    // The API handed it over once: another read has none. The page keeps it while one moves around the console.
    expect((await client(h.url, devJwt).get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token).toBeUndefined();
    await page.getByRole('link', { name: '← My bots' }).click();
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
    await page.getByRole('link', { name: 'Waiting' }).click();
    await revealButton.waitFor();
    // A reload would lose it: the browser asks first (beforeunload); staying keeps it.
    const reloadAsked = new Promise<Dialog>((resolve) => page.once('dialog', resolve));
    void page.evaluate(() => location.reload()).catch(() => undefined);
    const asked = await reloadAsked;
    expect(asked.type()).toBe('beforeunload');
    await asked.dismiss();
    await revealButton.waitFor();
    // Signing out would lose it: asked first; cancelled, still signed in.
    const signOutAsked = new Promise<Dialog>((resolve) => page.once('dialog', resolve));
    const clicked = page.getByRole('button', { name: 'Sign out' }).click();
    const confirmation = await signOutAsked;
    expect([confirmation.type(), confirmation.message()]).toEqual(['confirm', 'A bot token waits to be revealed and is shown only once: signing out loses it. Sign out anyway?']);
    await confirmation.dismiss();
    await clicked;
    await revealButton.click();
    await page.locator('#one-time-token').waitFor();
    await expect.poll(() => inView(page, '#reveal-title')).toBe(true);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('token-reveal');
    expect(await page.getByRole('status').filter({ hasText: 'Your bot token is shown below' }).count()).toBe(1);
    const token = (await page.locator('#one-time-token').textContent())!;
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token })).status).toBe(200);
    // Revealed: leaving no longer asks, and nothing of it is kept (a reload shows none).
    const dialogs: string[] = [];
    page.on('dialog', (d) => { dialogs.push(d.type()); void d.accept(); });
    await page.reload();
    await page.getByRole('heading', { name: 'Token' }).waitFor();
    expect(dialogs).toEqual([]);
    expect(await page.locator('#one-time-token').count()).toBe(0);
    expect(await revealButton.count()).toBe(0);
  });

  it('a rejected application is changed and resubmitted; a pending one withdrawn', async () => {
    const rejected = (await client(h.url, devJwt).post('/api/v1/bots/applications', { name: 'Spammy', username: 'life_rejected_ui' })).body;
    await client(h.url, adminJwt).post(`/api/v1/admin/bots/${rejected.id}/reject`, { reason: 'Say what it does' });
    const page = await open();
    await page.goto('/');
    await signIn(page);
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
    await page.goto(`/#/bots/${rejected.id}`);
    await expect.poll(() => page.getByText('Rejected: Say what it does').count()).toBe(1);
    await page.getByLabel('Description (optional)').fill('It echoes what you say.');
    await page.getByRole('button', { name: 'Save application' }).click();
    await expect.poll(() => page.getByText('Application saved.').count()).toBe(1);
    await page.getByRole('button', { name: 'Resubmit for review' }).click();
    await expect.poll(() => page.getByText('Resubmitted: the application is back in the review queue.').count()).toBe(1);
    const now = (await client(h.url, devJwt).get(`/api/v1/bots/my/${rejected.id}`)).body;
    expect(now).toMatchObject({ review_status: 'pending', description: 'It echoes what you say.' });
    findings.application = await axeFindings(page);

    await page.getByRole('button', { name: 'Withdraw application…' }).click();
    const confirm = page.getByRole('button', { name: 'Withdraw it' });
    expect(await confirm.isDisabled()).toBe(true);
    await page.getByLabel('Type the username to confirm').fill('life_rejected_ui');
    await confirm.click();
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
    expect(await page.getByRole('status').filter({ hasText: 'Application @life_rejected_ui withdrawn; the username is free again.' }).count()).toBe(1);
    expect((await client(h.url, devJwt).get(`/api/v1/bots/my/${rejected.id}`)).status).toBe(404);
  });

  it('a webhook the platform disabled shows in the header once a tab opens, and leaves it when enabled while the page stays open; an approved bot deleted after a confirmation, its token refused', async () => {
    const bot = await approvedBot(h, devJwt, 'life_disabled_ui');
    receiver.always({ status: 500 });
    expect((await client(h.url, devJwt).post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: 'life_secret' })).status).toBe(200);
    const page = await open();
    await page.goto('/');
    await signIn(page);
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
    await page.goto(`/#/bots/${bot.id}`);
    await page.getByRole('heading', { name: 'Token' }).waitFor();
    expect(await page.locator('#header-webhook-disabled').count()).toBe(0);
    for (let i = 0; i < 3; i++) await client(h.url, devJwt).post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: `fail ${i}` });
    await expect.poll(async () => (await client(h.url, devJwt).get(`/api/v1/bots/my/${bot.id}`)).body.webhook.disabled, { timeout: 15_000 }).toBe(true);
    await page.getByRole('navigation', { name: 'Bot sections' }).getByRole('link', { name: 'Webhook', exact: true }).click();
    await expect.poll(() => page.locator('#header-webhook-disabled').count()).toBe(1);
    await expect.poll(() => page.locator('#webhook-disabled').textContent()).toMatch(/^disabled/);
    // And in the list (the API's webhook_disabled).
    const listed = (await client(h.url, devJwt).get('/api/v1/bots/my?limit=100')).body.items;
    expect(listed.find((b: { id: string }) => b.id === bot.id).webhook_disabled).toBe(true);
    expect(listed.filter((b: { webhook_disabled: boolean }) => b.webhook_disabled)).toHaveLength(1);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'My bots' }).click();
    await expect.poll(() => page.getByRole('row', { name: /life_disabled_ui/ }).textContent()).toMatch(/webhook webhook disabled/);
    await page.goto(`/#/bots/${bot.id}`);
    await page.getByRole('heading', { name: 'Token' }).waitFor();
    expect(await page.locator('#header-webhook-disabled').count()).toBe(1);
    // Enabled again elsewhere (the API, another tab) while this page stays open and
    // untouched: its read every 10 s takes the badge away, no click, no reload.
    receiver.always({ status: 200 });
    expect((await client(h.url, devJwt).post(`/api/v1/bots/my/${bot.id}/webhook/enable`, {})).status).toBe(200);
    await expect.poll(() => page.locator('#header-webhook-disabled').count(), { timeout: 15_000 }).toBe(0);

    await page.getByRole('navigation', { name: 'Bot sections' }).getByRole('link', { name: 'Overview', exact: true }).click();
    await page.getByRole('button', { name: 'Delete bot…' }).click();
    await expect.poll(() => page.getByText(/stays reserved for you/).count()).toBe(1);
    await page.getByLabel('Type the username to confirm').fill('life_disabled_ui');
    const deletedAt = Date.now();
    await page.getByRole('button', { name: 'Delete it' }).click();
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token: bot.token })).status).toBe(401);
    // The list says when its data goes, from the API's answer (this platform keeps it 7 days, not the default 30).
    expect(await page.getByRole('status').filter({ hasText: 'Bot @life_disabled_ui deleted' }).count()).toBe(1);
    const removedAt = Date.parse((await page.locator('#deleted-note time').getAttribute('datetime'))!);
    expect(removedAt - deletedAt).toBeGreaterThanOrEqual(7 * 86_400_000 - 1000);
    expect(removedAt - deletedAt).toBeLessThan(7 * 86_400_000 + 60_000);
  });

  it('on a phone, the metrics charts draw the window\'s history from their first paint; the scope boxes are big enough for a finger', async () => {
    const bot = await approvedBot(h, devJwt, 'life_metrics_phone');
    for (let i = 0; i < 3; i++) await call(h.url, 'POST', '/api/v1/bots/getMe', { token: bot.token });
    const page = await open({ width: 390, height: 844 });
    await page.goto(`/#/bots/${bot.id}/metrics`);
    await signIn(page);
    const charts = page.locator('.chart');
    await charts.first().waitFor();
    // The first chart drawn is the server's per-minute history of the hour (not one point
    // sampled by the page, which uPlot draws on an axis of years).
    const drawn = await charts.evaluateAll((els) => els.map((e) => [Number(e.getAttribute('data-points')), Number(e.getAttribute('data-span'))]));
    expect(drawn).toHaveLength(2);
    for (const [points, span] of drawn) {
      expect(points).toBeGreaterThanOrEqual(60);
      expect(span).toBeGreaterThanOrEqual(59 * 60);
      expect(span).toBeLessThanOrEqual(3600);
    }

    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'My bots' }).click();
    await page.getByRole('link', { name: 'New bot' }).click();
    for (const scope of ['send', 'receive']) {
      const box = (await page.getByLabel(scope).boundingBox())!;
      expect(Math.min(box.width, box.height)).toBeGreaterThanOrEqual(20); // the browser's default is 13 px
      // Its label, which toggles it too, is a 44 px target (WCAG 2.5.5).
      const target = (await page.locator('label.check', { hasText: scope }).boundingBox())!;
      expect(target.height).toBeGreaterThanOrEqual(44);
    }
    await page.locator('label.check', { hasText: 'receive' }).click({ position: { x: 200, y: 5 } });
    expect(await page.getByLabel('receive').isChecked()).toBe(false);
  });

  it('axe-core on every screen, desktop and phone: no critical, serious or moderate finding', async () => {
    // The reviewer's own bot: one session sees every screen, the review queue included.
    const bot = await approvedBot(h, adminJwt, 'life_axe_bot');
    await client(h.url, adminJwt).post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'hello' });
    for (const viewport of [{ width: 1200, height: 900 }, { width: 390, height: 844 }]) {
      const page = await open(viewport);
      await page.goto('/');
      findings[`sign-in ${viewport.width}`] = await axeFindings(page);
      await signIn(page, adminJwt);
      await page.getByRole('heading', { name: 'My bots' }).waitFor();
      findings[`bots ${viewport.width}`] = await axeFindings(page);
      for (const tab of ['', '/webhook', '/deliveries', '/metrics', '/test']) {
        await page.goto(`/#/bots/${bot.id}${tab}`);
        await page.getByRole('navigation', { name: 'Bot sections' }).waitFor();
        await page.waitForTimeout(400);
        findings[`bot${tab || '/overview'} ${viewport.width}`] = await axeFindings(page);
      }
      await page.goto('/#/review');
      await page.getByRole('heading', { name: /Review/ }).first().waitFor();
      findings[`review ${viewport.width}`] = await axeFindings(page);
    }
  }, 120_000);

  it('serves its assets compressed: brotli or gzip as the browser accepts, with Vary', async () => {
    const html = await (await fetch(`${h.url}/`)).text();
    const asset = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const raw = await fetch(h.url + asset, { headers: { 'accept-encoding': 'identity' } });
    const size = Number(raw.headers.get('content-length'));
    expect(raw.headers.get('content-encoding')).toBeNull();
    expect(raw.headers.get('vary')).toBe('accept-encoding');
    const text = await raw.text();
    for (const [accept, encoding] of [['gzip, deflate, br', 'br'], ['gzip', 'gzip']] as const) {
      const res = await fetch(h.url + asset, { headers: { 'accept-encoding': accept } });
      expect(res.headers.get('content-encoding')).toBe(encoding);
      expect(Number(res.headers.get('content-length'))).toBeLessThan(size / 2);
      expect(await res.text()).toBe(text); // fetch decodes it
    }
  });

  it('no 403 on a developer\'s pages, no page error; axe-core: no critical, serious or moderate finding', () => {
    expect(forbidden).toEqual([]);
    expect(pageErrors).toEqual([]);
    expect(Object.entries(findings).filter(([, f]) => f.length > 0)).toEqual([]);
    expect(Object.keys(findings)).toHaveLength(5 + 2 * 8);
  });
});
