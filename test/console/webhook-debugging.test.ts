/**
 * The console a bot developer keeps open (issue 35), in Chromium against the real service
 * and a real HTTPS receiver: the webhook edited without a new secret, the secret rotated
 * (the new one shown once, in view and focused; the receiver accepting both signatures
 * during the overlap), the webhook deleted only after a confirmation, and the delivery log:
 * a delivery failing and then succeeding shows, without a reload, every attempt with what
 * was sent and what came back (within the screen on a phone), filtered by update id and
 * by time. axe-core finds nothing critical, serious or moderate on these screens.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../sdk/src/webhook.js';
import { axeFindings, buildConsole, launchChromium, screenshotPath } from '../helpers/browser.js';
import { approvedBot, client, startHarness, type Harness } from '../helpers/harness.js';
import { startReceiver, type Received, type Receiver } from '../helpers/receiver.js';
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

/** A screenshot for docs/console.md, when SCREENSHOTS=1. */
async function shot(page: Page, name: string) {
  const file = screenshotPath(name);
  if (file) await page.screenshot({ path: file, fullPage: true });
}

describe('console: webhook secrets and the delivery log', () => {
  let h: Harness;
  let pki: TestPki;
  let receiver: Receiver;
  let devJwt: string;
  let context: BrowserContext;
  let page: Page;
  const pageErrors: string[] = [];
  let bot: { id: string; token: string };
  let secret: string;
  const findings: Record<string, string[]> = {};

  beforeAll(async () => {
    pki = createTestPki();
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
      WEBHOOK_CA_FILE: pki.caFile,
      WEBHOOK_RETRY_SCHEDULE: '500ms',
      WEBHOOK_TIMEOUT_MS: '2000',
    });
    receiver = await startReceiver(pki);
    devJwt = await h.jwt('console-hooks-dev');
    bot = await approvedBot(h, devJwt, 'console_hooks_bot');
    if (!browser) throw launchError;
    context = await browser.newContext({ baseURL: h.url, viewport: { width: 1200, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: h.url });
    page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto('/');
    await page.getByLabel('Account JWT').fill(devJwt);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
  });
  afterAll(async () => {
    await context?.close();
    await receiver?.close();
    await h?.close();
  });

  const inject = async (text: string) => {
    const r = await client(h.url, devJwt).post(`/api/v1/bots/my/${bot.id}/test-updates`, { text });
    expect(r.status).toBe(201);
    return r.body.update_id as number;
  };
  const verifies = (r: Received, s: string) => {
    try {
      verifyWebhook(r.raw, r.headers, { secret: s });
      return true;
    } catch {
      return false;
    }
  };

  it('sets a webhook, then edits its settings without a secret: deliveries keep the old signature', async () => {
    await page.goto(`/#/bots/${bot.id}/webhook`);
    await page.getByLabel('URL', { exact: true }).fill(receiver.url);
    await page.getByRole('button', { name: 'Generate' }).click();
    secret = await page.getByLabel('Secret token').inputValue();
    await page.getByRole('button', { name: 'Save webhook' }).click();
    await expect.poll(() => page.getByText('Webhook set').count()).toBe(1);
    // The secret field is empty again; its hint says an edit may leave it so.
    expect(await page.getByLabel('Secret token').inputValue()).toBe('');
    expect(await page.locator('#wh-secret-hint').textContent()).toMatch(/Leave it empty to keep the current secret/);
    await page.getByLabel('Max connections').fill('5');
    await page.getByRole('button', { name: 'Save webhook' }).click();
    await expect.poll(() => page.getByText('Webhook saved; its secret is unchanged.').count()).toBe(1);
    expect((await client(h.url, devJwt).get(`/api/v1/bots/my/${bot.id}`)).body.webhook.max_connections).toBe(5);
    await inject('after the edit');
    await receiver.waitFor(1);
    expect(verifies(receiver.received[0]!, secret)).toBe(true);
  });

  it('rotates the secret: shown once, in view and focused; the receiver accepts either secret during the overlap', async () => {
    await page.getByLabel('Old secret stays valid for').selectOption('86400');
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const shown = page.locator('#rotated-secret');
    await shown.waitFor();
    const next = (await shown.textContent())!;
    expect(next).toMatch(/^[A-Za-z0-9]{43}$/);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('rotated-secret');
    expect(await shown.isVisible()).toBe(true);
    const box = (await shown.boundingBox())!;
    expect(box.y).toBeGreaterThanOrEqual(0);
    expect(box.y + box.height).toBeLessThanOrEqual(900);
    expect(await page.getByText(/The previous secret also signs until/).count()).toBe(1);
    await expect.poll(() => page.locator('#webhook-secret-state').textContent()).toMatch(/rotated: the previous secret also signs until/);
    findings.webhook = await axeFindings(page);
    await shot(page, 'webhook-rotate');

    await inject('during the overlap');
    await receiver.waitFor(2);
    const during = receiver.received[1]!;
    expect(String(during.headers['x-service-signature-v2']).split(' ')).toHaveLength(2);
    expect(verifies(during, secret)).toBe(true);
    expect(verifies(during, next)).toBe(true);
    // Reloaded, the page never shows the secret again.
    await page.reload();
    await page.getByRole('heading', { name: 'Rotate the secret' }).waitFor();
    expect(await page.locator('#rotated-secret').count()).toBe(0);
    expect(await page.content()).not.toContain(next);
  });

  it('the delivery log: a delivery failing then succeeding shows every attempt, with what was sent and what came back, without a reload', async () => {
    receiver.script({ status: 500, body: 'boom: the receiver is down', headers: { 'x-receiver': 'first' } }, { status: 200, body: 'thanks' });
    await page.getByRole('navigation', { name: 'Bot sections' }).getByRole('link', { name: 'Deliveries', exact: true }).click();
    await page.getByRole('heading', { name: 'Deliveries' }).waitFor();
    await expect.poll(() => page.locator('#dl-retention').textContent()).toMatch(/kept\s+for 3 days/);
    const updateId = await inject('fails, then succeeds');
    // The log refreshes itself: the row appears, fails and then succeeds with no click.
    const row = page.locator(`tr[data-update="${updateId}"]`);
    await expect.poll(() => row.textContent(), { timeout: 15_000 }).toMatch(/succeeded/);
    await row.getByRole('button', { name: `attempts of update ${updateId}` }).click();
    const list = page.getByRole('list', { name: `Attempts of update ${updateId}, newest first` });
    await expect.poll(() => list.locator('li.attempt').count()).toBe(2);
    const [newest, oldest] = [list.locator('li.attempt').nth(0), list.locator('li.attempt').nth(1)];
    expect(await newest.getAttribute('data-ok')).toBe('true');
    expect([await newest.evaluate((li) => (li as HTMLLIElement).value), await oldest.evaluate((li) => (li as HTMLLIElement).value)]).toEqual([2, 1]);
    expect(await oldest.getAttribute('data-ok')).toBe('false');
    expect(await oldest.locator('.attempt-head').textContent()).toMatch(/automatic · \d+ ms · HTTP 500$/);
    await oldest.getByText('Request sent').click();
    await oldest.getByText('Answer: HTTP 500').click();
    const sent = receiver.received.find((r) => JSON.parse(r.raw.toString()).update_id === updateId)!;
    const oldestText = (await oldest.textContent())!;
    expect(oldestText).toContain(String(sent.headers['x-service-signature-v2']));
    expect(oldestText).toContain('fails, then succeeds');
    expect(oldestText).toContain('boom: the receiver is down');
    expect(oldestText).toContain('x-receiver');
    expect(oldestText).not.toContain(secret);
    findings.deliveries = await axeFindings(page);
    await shot(page, 'delivery-attempts');

    // On a 390×844 phone the table scrolls in its box, but the attempts under its row stay
    // within the screen: what was sent and what came back read without scrolling sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    await expect.poll(async () => {
      const b = (await oldest.boundingBox())!;
      return b.x >= 0 && b.x + b.width <= 390;
    }).toBe(true);
    await page.setViewportSize({ width: 1200, height: 900 });

    // Filtered by update id: only that delivery.
    await page.getByLabel('Update id').fill(String(updateId));
    await expect.poll(() => page.locator('tbody tr[data-update]').count()).toBe(1);
    await page.getByLabel('Update id').fill('');
    await expect.poll(() => page.locator('tbody tr[data-update]').count()).toBe(3);
    // And by time: none since tomorrow, all three since an hour ago.
    const local = (t: number) => new Date(t - new Date(t).getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
    await page.getByLabel('Since').fill(local(Date.now() + 86_400_000));
    await expect.poll(() => page.locator('tbody tr[data-update]').count()).toBe(0);
    await page.getByLabel('Since').fill(local(Date.now() - 3_600_000));
    await expect.poll(() => page.locator('tbody tr[data-update]').count()).toBe(3);
  });

  it('every attempt of a delivery tried more than a page\'s worth of times, a page at a time, numbered from the first', async () => {
    receiver.always({ status: 500 });
    const updateId = await inject('fails again and again');
    const dev = client(h.url, devJwt);
    await expect.poll(async () => (await dev.get(`/api/v1/bots/my/${bot.id}/deliveries?update_id=${updateId}`)).body.items[0]?.status,
      { timeout: 15_000 }).toBe('dead_letter');
    for (let i = 0; i < 19; i++) expect((await dev.post(`/api/v1/bots/my/${bot.id}/deliveries/${updateId}/retry`, {})).status).toBe(200);
    expect((await dev.get(`/api/v1/bots/my/${bot.id}/deliveries/${updateId}/attempts`)).body.pagination.total).toBe(21);

    await page.getByLabel('Update id').fill(String(updateId));
    const row = page.locator(`tr[data-update="${updateId}"]`);
    await expect.poll(() => row.textContent()).toMatch(/dead letter/);
    await row.getByRole('button', { name: `attempts of update ${updateId}` }).click();
    const items = page.getByRole('list', { name: `Attempts of update ${updateId}, newest first` }).locator('li.attempt');
    await expect.poll(() => items.count()).toBe(20);
    expect(await items.first().evaluate((li) => (li as HTMLLIElement).value)).toBe(21);
    expect(await items.first().locator('.attempt-head').textContent()).toMatch(/manual/);
    const pager = page.getByRole('navigation', { name: `Pages of the attempts of update ${updateId}` });
    expect(await pager.textContent()).toContain('Page 1 of 2 · 21 in all');
    findings.attemptsPaged = await axeFindings(page);
    await pager.getByRole('button', { name: 'Next' }).click();
    await expect.poll(() => items.count()).toBe(1);
    expect(await items.first().evaluate((li) => (li as HTMLLIElement).value)).toBe(1);
    expect(await items.first().locator('.attempt-head').textContent()).toMatch(/automatic/);
    await page.getByLabel('Update id').fill('');
    receiver.always({ status: 200 });
  });

  it('deletes the webhook only after a confirmation', async () => {
    await page.getByRole('navigation', { name: 'Bot sections' }).getByRole('link', { name: 'Webhook', exact: true }).click();
    await page.getByRole('button', { name: 'Delete webhook…' }).click();
    await expect.poll(() => page.getByText('Delete the webhook?').count()).toBe(1);
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Delete the webhook');
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect((await client(h.url, devJwt).get(`/api/v1/bots/my/${bot.id}`)).body.delivery_mode).toBe('webhook');
    await page.getByRole('button', { name: 'Delete webhook…' }).click();
    await page.getByRole('button', { name: 'Delete the webhook' }).click();
    await expect.poll(() => page.getByText('Webhook deleted').count()).toBe(1);
    expect((await client(h.url, devJwt).get(`/api/v1/bots/my/${bot.id}`)).body.delivery_mode).toBe('polling');
  });

  it('axe-core: no critical, serious or moderate finding on these screens; no page error', () => {
    expect(findings).toEqual({ webhook: [], deliveries: [], attemptsPaged: [] });
    expect(pageErrors).toEqual([]);
  });
});
