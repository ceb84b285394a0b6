/**
 * The console's test chat in Chromium against the real service and a real bot (the
 * SDK's createBot, long polling): the owner sends /start, the bot's formatted reply
 * shows with its inline keyboard (rendered from entities, its text never read as
 * HTML), a link button opens with rel=noopener, and pressing a callback button reaches
 * the bot as a callback_query whose edit shows in the chat; at phone width too.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBot, inlineKeyboard, type Bot } from '../../sdk/src/index.js';
import { buildConsole, launchChromium, screenshotPath } from '../helpers/browser.js';
import { approvedBot, startHarness, type Harness } from '../helpers/harness.js';

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

describe('console: the test chat', () => {
  let h: Harness;
  let jwt: string;
  let botId: string;
  let bot: Bot;
  const stop = new AbortController();
  let polling: Promise<void> | undefined;
  const pressed: string[] = [];

  beforeAll(async () => {
    h = await startHarness('in-process');
    jwt = await h.jwt('console-chat-dev');
    const b = await approvedBot(h, jwt, 'console_chat_bot');
    botId = b.id;
    bot = createBot(b.token, { baseUrl: h.url });
    bot.command('start', (ctx) => ctx.reply(
      '<b>Pick <i>one</i></b> &lt;img src=x onerror="window.injected=1"&gt; <a href="https://example.com/guide">guide</a> <a href="javascript:alert(1)">bad</a>',
      {
        parse_mode: 'HTML',
        reply_markup: inlineKeyboard([
          [{ text: 'Yes', callback_data: 'choice:yes' }, { text: 'No', callback_data: 'choice:no' }],
          [{ text: 'Docs', url: 'https://example.com/docs' }],
        ]),
      },
    ));
    bot.callbackQuery(/^choice:(\w+)$/, async (ctx) => {
      pressed.push(ctx.data);
      await ctx.answer({ text: 'Noted' });
      await ctx.editMessageText(`You chose <i>${ctx.match[1]}</i>`, { parse_mode: 'HTML', reply_markup: inlineKeyboard([[{ text: 'Again', callback_data: 'choice:again' }]]) });
    });
    polling = bot.start({ signal: stop.signal, timeoutSeconds: 5, onError: () => {} });
  });
  afterAll(async () => {
    stop.abort();
    await polling;
    await h?.close();
  });

  async function open(viewport: { width: number; height: number }): Promise<Page> {
    if (!browser) throw launchError;
    const context = await browser.newContext({ baseURL: h.url, viewport });
    const page = await context.newPage();
    await page.goto('/');
    await page.getByLabel('Account JWT').fill(jwt);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'My bots' }).waitFor();
    await page.goto(`/#/bots/${botId}/test`);
    await page.getByRole('heading', { name: 'The bot’s replies' }).waitFor();
    return page;
  }

  it('shows the bot\'s formatted reply and its keyboard, its text never read as HTML', async () => {
    const page = await open({ width: 1200, height: 900 });
    try {
      await page.getByLabel('Text').fill('/start');
      await page.getByRole('button', { name: 'Send test message' }).click();
      const chat = page.getByRole('list', { name: 'Messages from the bot, oldest first' });
      const bubble = chat.getByRole('listitem').filter({ hasText: 'Pick one' });
      await bubble.waitFor({ timeout: 15_000 });

      // Formatting from entities; the text's markup-looking part stays text.
      // (tdlib splits the bold at the italic's start: bold "Pick ", bold and italic "one".)
      expect((await bubble.locator('strong').allTextContents()).join('')).toBe('Pick one');
      expect(await bubble.locator('strong > em').textContent()).toBe('one'); // entities over the same text nest
      expect(await bubble.locator('.body').textContent()).toContain('<img src=x onerror="window.injected=1">');
      expect(await page.locator('.chat img').count()).toBe(0);
      expect(await page.evaluate(() => (window as { injected?: number }).injected)).toBeUndefined();
      const guide = bubble.getByRole('link', { name: 'guide' });
      expect(await guide.getAttribute('href')).toBe('https://example.com/guide');
      expect(await guide.getAttribute('rel')).toBe('noopener noreferrer');
      // A javascript: address is never a link.
      expect(await bubble.getByRole('link', { name: 'bad' }).count()).toBe(0);

      // The keyboard: buttons are buttons, the url button a link that opens apart.
      const keyboard = bubble.getByRole('group', { name: /^Buttons of message \d+$/ });
      expect(await keyboard.getByRole('button').allTextContents()).toEqual(['Yes', 'No']);
      const docs = keyboard.getByRole('link', { name: /Docs/ });
      expect(await docs.getAttribute('href')).toBe('https://example.com/docs');
      expect(await docs.getAttribute('rel')).toBe('noopener noreferrer');
      expect(await docs.getAttribute('target')).toBe('_blank');
      const shot = screenshotPath('test-chat');
      if (shot) await page.screenshot({ path: shot, fullPage: true });
    } finally {
      await page.context().close();
    }
  });

  it('fits a phone (390×844): no sideways scrolling, the buttons within the screen and focusable', async () => {
    const page = await open({ width: 390, height: 844 });
    try {
      await page.locator('.chat .bubble').first().waitFor({ timeout: 10_000 });
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      const yes = page.getByRole('button', { name: 'Yes' });
      await yes.focus();
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Yes');
      for (const name of ['Yes', 'No']) {
        const box = (await page.getByRole('button', { name }).boundingBox())!;
        expect(box.x + box.width).toBeLessThanOrEqual(390);
        expect(box.height).toBeGreaterThanOrEqual(40); // a finger's target
      }
      const shot = screenshotPath('test-chat-phone');
      if (shot) await page.screenshot({ path: shot, fullPage: true });
    } finally {
      await page.context().close();
    }
  });

  it('a press of a callback button reaches the bot as a callback_query; its edit shows in place, and the new keyboard presses from the keyboard', async () => {
    const page = await open({ width: 1200, height: 900 });
    try {
      const chat = page.getByRole('list', { name: 'Messages from the bot, oldest first' });
      const keyboard = chat.getByRole('listitem').filter({ hasText: 'Pick one' }).getByRole('group', { name: /^Buttons of message \d+$/ });
      await keyboard.getByRole('button', { name: 'Yes' }).click();
      await expect.poll(() => pressed).toEqual(['choice:yes']);
      await expect.poll(() => page.getByRole('status').filter({ hasText: /Pressed “Yes” on message \d+/ }).count()).toBe(1);
      const edited = chat.getByRole('listitem').filter({ hasText: 'You chose yes' });
      await edited.waitFor({ timeout: 10_000 });
      expect(await edited.locator('em').textContent()).toBe('yes');
      expect(await edited.locator('.edited').count()).toBe(1);
      expect(await edited.getByRole('button').allTextContents()).toEqual(['Again']);
      expect(await chat.getByRole('listitem').count()).toBe(1); // the same message, edited
      await edited.getByRole('button', { name: 'Again' }).focus();
      await page.keyboard.press('Enter');
      await expect.poll(() => pressed).toEqual(['choice:yes', 'choice:again']);
      await chat.getByRole('listitem').filter({ hasText: 'You chose again' }).waitFor({ timeout: 10_000 });
    } finally {
      await page.context().close();
    }
  });
});
