/**
 * The typed clients against the real service over loopback: the console, admin and
 * runtime surfaces, both error bodies mapped to BotPlatformError, and the generated
 * bindings matching the gateway's route table.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routeTable } from '../../gateway/generated/routes.js';
import { startHarness, type Harness } from '../../test/helpers/harness.js';
import {
  adminMethods,
  BotPlatformError,
  consoleMethods,
  createBotClient,
  createConsoleClient,
  runtimeMethods,
  type MethodBinding,
} from '../src/index.js';
import { sdkAccount, type SdkAccount } from './helpers.js';

describe('SDK clients', () => {
  let h: Harness;
  let account: SdkAccount;

  beforeAll(async () => {
    h = await startHarness();
    account = await sdkAccount(h, 'sdk-clients');
  });
  afterAll(async () => {
    await h?.close();
  });

  it('walks an application through review to a working bot token', async () => {
    const created = await account.console.createApplication({ name: 'Echo', username: 'sdk_echo', description: 'says it back' });
    expect(created).toMatchObject({ name: 'Echo', username: 'sdk_echo', review_status: 'pending', has_token: false });
    const bot = await account.approvedBot('sdk_walk');
    const me = await bot.bot.getMe();
    expect(me).toMatchObject({ id: bot.id, username: 'sdk_walk', is_bot: true });
    const list = await account.console.listMyBots({ limit: 1 });
    expect(list.items).toHaveLength(1);
    expect(list.pagination).toMatchObject({ page: 1, limit: 1, has_more: true });
    expect((await account.console.getMyBot({ id: bot.id })).one_time_token).toBeUndefined();
  });

  it('sends path parameters, query strings and field-bound bodies as the bindings say', async () => {
    const bot = await account.approvedBot('sdk_bindings');
    const patched = await account.console.updateMyBot({ id: bot.id, bot: { short_description: 'short', links: [{ title: 'Home', url: 'https://example.com' }] } });
    expect(patched).toMatchObject({ id: bot.id, short_description: 'short', links: [{ title: 'Home', url: 'https://example.com' }] });
    const injected = await account.console.createTestUpdate({ id: bot.id, text: 'hello', chat_id: 4242 });
    expect(injected.update_seq).toBe(1);
    const updates = await bot.bot.getUpdates({ timeout: 0 });
    expect(updates).toHaveLength(1);
    expect(updates[0]).toMatchObject({ update_id: injected.update_id, update_seq: 1, message: { text: 'hello', chat: { id: 4242 } } });
    const regenerated = await account.console.regenerateToken({ id: bot.id });
    expect(regenerated.one_time_token).toMatch(/^sbot_/);
    const fresh = createBotClient(regenerated.one_time_token, { baseUrl: h.url });
    expect((await fresh.getMe()).id).toBe(bot.id);
  });

  it('calls the rich-message methods typed from the generation, Telegram\'s refusals as BotPlatformError', async () => {
    const b = await account.approvedBot('sdk_rich');
    await account.console.createTestUpdate({ id: b.id, text: 'hi there', chat_id: 5151, from: { id: 5151, is_bot: false, username: 'ann', first_name: 'Ann' } });
    const [incoming] = await b.bot.getUpdates({ timeout: 0 });
    expect(await b.bot.sendChatAction({ chat_id: 5151, action: 'typing' })).toBe(true);
    expect(await b.bot.getChat({ chat_id: 5151 })).toMatchObject({ id: 5151, type: 'private' });
    const sent = await b.bot.sendMessage({ chat_id: 5151, text: 'menu', reply_markup: { inline_keyboard: [{ buttons: [{ text: 'A', callback_data: 'a' }] }] } });
    const unkeyed = await b.bot.editMessageReplyMarkup({ chat_id: 5151, message_id: sent.message_id });
    expect(unkeyed.reply_markup ?? undefined).toBeUndefined();
    expect(unkeyed.edit_date).toBeGreaterThan(0);
    const again = await b.bot.editMessageReplyMarkup({ chat_id: 5151, message_id: sent.message_id }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(BotPlatformError);
    expect(again).toMatchObject({ httpStatus: 400, code: 'INVALID_ARGUMENT', method: 'editMessageReplyMarkup' });
    expect((again as Error).message).toMatch(/message is not modified/);
    const copy = await b.bot.copyMessage({ chat_id: 5151, from_chat_id: 5151, message_id: incoming!.message!.message_id });
    const forwarded = await b.bot.forwardMessage({ chat_id: 5151, from_chat_id: 5151, message_id: incoming!.message!.message_id });
    expect(forwarded).toMatchObject({ text: 'hi there', forward_origin: { type: 'user', sender_user: { id: 5151 } } });
    expect(await b.bot.deleteMessages({ chat_id: 5151, message_ids: [copy.message_id, forwarded.message_id] })).toBe(true);
    const gone = await b.bot.deleteMessage({ chat_id: 5151, message_id: copy.message_id }).catch((e: unknown) => e);
    expect(gone).toMatchObject({ httpStatus: 400 });
    expect((gone as Error).message).toMatch(/message to delete not found/);
  });

  it('maps the runtime envelope error to BotPlatformError', async () => {
    const stranger = createBotClient('sbot_' + 'x'.repeat(40), { baseUrl: h.url });
    const err = await stranger.getMe().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BotPlatformError);
    expect(err).toMatchObject({ httpStatus: 401, code: 'UNAUTHENTICATED', method: 'getMe' });

    const bot = await account.approvedBot('sdk_rt_errors');
    const bad = await bot.bot.getUpdates({ limit: 101 }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ httpStatus: 400, code: 'INVALID_ARGUMENT' });
    expect((bad as Error).message).toMatch(/limit/);
  });

  it('maps the console Google-style error body to BotPlatformError, details included', async () => {
    const bad = await account.console.createApplication({ name: 'X', username: '9bad' }).catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(BotPlatformError);
    expect(bad).toMatchObject({ httpStatus: 400, code: 'INVALID_ARGUMENT', details: [expect.objectContaining({ field: 'username' })] });
    await account.console.createApplication({ name: 'Taken', username: 'sdk_taken' });
    const taken = await account.console.createApplication({ name: 'Taken', username: 'sdk_taken' }).catch((e: unknown) => e);
    expect(taken).toMatchObject({ httpStatus: 409, code: 'ALREADY_EXISTS' });
    const missing = await account.console.getMyBot({ id: 'bot_does_not_exist' }).catch((e: unknown) => e);
    expect(missing).toMatchObject({ httpStatus: 404, code: 'NOT_FOUND' });
    const wrongCredential = createConsoleClient('sbot_' + 'y'.repeat(40), { baseUrl: h.url });
    expect(await wrongCredential.listMyBots().catch((e: unknown) => e)).toMatchObject({ httpStatus: 401, code: 'UNAUTHENTICATED' });
  });

  it('reports a refused connection as a retryable BotPlatformError with no HTTP status', async () => {
    const nowhere = createBotClient('sbot_' + 'z'.repeat(40), { baseUrl: 'http://127.0.0.1:9' });
    const err = await nowhere.getMe().catch((e: unknown) => e);
    expect(err).toMatchObject({ httpStatus: 0, code: 'UNAVAILABLE', retryable: true });
  });

  it('an aborted call rejects with the abort reason, not a BotPlatformError', async () => {
    const bot = await account.approvedBot('sdk_abort');
    const ac = new AbortController();
    const pending = bot.bot.getUpdates({ timeout: 20 }, { signal: ac.signal });
    setTimeout(() => ac.abort(), 100);
    const err = await pending.catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(BotPlatformError);
    expect((err as Error).name).toBe('AbortError');
  });

  it('has a binding for every routed method, with the gateway\'s verb and path', () => {
    const sdk = { ...adminMethods, ...consoleMethods, ...runtimeMethods };
    const byRpc = new Map<string, MethodBinding>(Object.values(sdk).map((b) => [b.rpc, b]));
    const rpcs = new Set(routeTable.routes.map((r) => r.rpc));
    expect(byRpc.size).toBe(rpcs.size);
    for (const rpc of rpcs) {
      const primary = routeTable.routes.find((r) => r.rpc === rpc)!;
      const b = byRpc.get(rpc);
      expect(b, rpc).toBeDefined();
      expect(b!.httpMethod).toBe(primary.method);
      expect(b!.path.replace(/\{[a-z_]+\}/g, '{}')).toBe(primary.template.replace(/\{[a-z_.]+\}/g, '{}'));
    }
  });
});
