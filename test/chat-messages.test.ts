/**
 * ListChatMessages (the console's view of a bot's chat) over HTTP and gRPC: the bot's
 * own messages in one chat, newest first, paged like the other listings, with their
 * formatting and keyboards as stored; received messages, other chats and other
 * accounts' bots stay out. Runs on MariaDB when TEST_DATABASE_URL is set.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleServiceClient, type ListChatMessagesResponse } from '../src/gen/botplatform/v1/console_service.js';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';

type Callback = (err: grpc.ServiceError | null, res: unknown) => void;
function rpc<Res>(c: grpc.Client, method: unknown, req: unknown, credential: string): Promise<Res> {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${credential}`);
  const fn = method as (req: unknown, md: grpc.Metadata, cb: Callback) => unknown;
  return new Promise((resolve, reject) => fn.call(c, req, md, (err, res) => (err ? reject(err) : resolve(res as Res))));
}

describe('ListChatMessages', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  let bot: { id: string; token: string };
  let grpcConsole: ConsoleServiceClient;
  const sent: { message_id: number; text: string }[] = [];

  const rt = (method: string, body: object) => call(h.url, 'POST', `/api/v1/bots/${method}`, { token: bot.token, body });
  const list = (chatId: number, query = '', id = bot.id, as = owner) => as.get(`/api/v1/bots/my/${id}/chats/${chatId}/messages${query}`);

  beforeAll(async () => {
    h = await startHarness('in-process');
    ownerJwt = await h.jwt('chat-messages-owner');
    owner = client(h.url, ownerJwt);
    bot = await approvedBot(h, ownerJwt, 'chat_list_bot');
    grpcConsole = new ConsoleServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    for (const chat of [7001, 7002]) {
      const r = await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: `hello from ${chat}`, chat_id: chat });
      expect(r.status).toBe(201);
    }
    // Three replies in 7001: plain, HTML with an inline keyboard, plain; one in 7002.
    for (const body of [
      { chat_id: 7001, text: 'first' },
      {
        chat_id: 7001, text: '<b>Pick</b> one', parse_mode: 'HTML',
        reply_markup: { inline_keyboard: [{ buttons: [{ text: 'Yes', callback_data: 'yes' }, { text: 'Docs', url: 'https://example.com/docs' }] }] },
      },
      { chat_id: 7001, text: 'third' },
      { chat_id: 7002, text: 'elsewhere' },
    ]) {
      const r = await rt('sendMessage', body);
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      sent.push(r.body.result);
    }
  });
  afterAll(async () => {
    grpcConsole?.close();
    await h?.close();
  });

  it('answers the bot\'s messages in the chat, newest first, as sendMessage returned them (formatting and keyboard included)', async () => {
    const r = await list(7001);
    expect(r.status).toBe(200);
    expect(r.body.pagination).toEqual({ page: 1, limit: 20, total: 3, has_more: false });
    expect(r.body.items.map((m: { text: string }) => m.text)).toEqual(['third', 'Pick one', 'first']);
    // Each one exactly as the send answered it.
    expect(r.body.items[1]).toMatchObject(sent[1]!);
    expect(r.body.items[1]).toMatchObject({
      entities: [{ type: 'bold', offset: 0, length: 4 }],
      reply_markup: { inline_keyboard: [{ buttons: [{ text: 'Yes', callback_data: 'yes' }, { text: 'Docs', url: 'https://example.com/docs' }] }] },
    });
    // The test user's message the bot received is not the bot's.
    expect(r.body.items.every((m: { from: { is_bot: boolean } }) => m.from.is_bot)).toBe(true);
    // Another chat has its own.
    expect((await list(7002)).body.items.map((m: { text: string }) => m.text)).toEqual(['elsewhere']);
    // A chat the bot never wrote to has none.
    expect((await list(7999)).body).toEqual({ items: [], pagination: { page: 1, limit: 20, total: 0, has_more: false } });
  });

  it('pages with page and limit like the other listings', async () => {
    const first = await list(7001, '?limit=2');
    expect(first.body.items.map((m: { text: string }) => m.text)).toEqual(['third', 'Pick one']);
    expect(first.body.pagination).toEqual({ page: 1, limit: 2, total: 3, has_more: true });
    const second = await list(7001, '?limit=2&page=2');
    expect(second.body.items.map((m: { text: string }) => m.text)).toEqual(['first']);
    expect(second.body.pagination).toEqual({ page: 2, limit: 2, total: 3, has_more: false });
  });

  it('refuses bad paging and chat 0 naming the field, and another account\'s bot is not found', async () => {
    for (const [path, field] of [['/chats/7001/messages?limit=0', 'limit'], ['/chats/7001/messages?limit=101', 'limit'], ['/chats/7001/messages?page=0', 'page'], ['/chats/0/messages', 'chat_id']] as const) {
      const r = await owner.get(`/api/v1/bots/my/${bot.id}${path}`);
      expect(r.status, path).toBe(400);
      expect(r.body.error).toMatchObject({ status: 'INVALID_ARGUMENT' });
      expect(r.body.error.details.map((d: { field: string }) => d.field), path).toContain(field);
    }
    const stranger = client(h.url, await h.jwt('chat-messages-stranger'));
    const r = await list(7001, '', bot.id, stranger);
    expect(r.status).toBe(404);
    expect(r.body.error).toMatchObject({ status: 'NOT_FOUND' });
    expect((await list(7001, '', 'nope')).status).toBe(404);
    expect((await call(h.url, 'GET', `/api/v1/bots/my/${bot.id}/chats/7001/messages`)).status).toBe(401);
  });

  it('shows the messages as they are now: an edit in place, a deleted message gone', async () => {
    const extra = (await rt('sendMessage', { chat_id: 7002, text: 'to be edited', reply_markup: { inline_keyboard: [{ buttons: [{ text: 'Go', callback_data: 'go' }] }] } })).body.result;
    const doomed = (await rt('sendMessage', { chat_id: 7002, text: 'to be deleted' })).body.result;
    const edited = await rt('editMessageText', { chat_id: 7002, message_id: extra.message_id, text: '<i>edited</i>', parse_mode: 'HTML' });
    expect(edited.status, JSON.stringify(edited.body)).toBe(200);
    expect((await rt('deleteMessage', { chat_id: 7002, message_id: doomed.message_id })).status).toBe(200);
    const r = await list(7002);
    expect(r.body.pagination.total).toBe(2);
    expect(r.body.items.map((m: { text: string }) => m.text)).toEqual(['edited', 'elsewhere']);
    expect(r.body.items[0]).toMatchObject({ message_id: extra.message_id, entities: [{ type: 'italic', offset: 0, length: 6 }] });
    expect(r.body.items[0].edit_date).toBeGreaterThan(0);
    expect(r.body.items[0].reply_markup ?? null).toBeNull(); // an edit without reply_markup removes the keyboard
  });

  it('answers the same over gRPC', async () => {
    const r = await rpc<ListChatMessagesResponse>(grpcConsole, grpcConsole.listChatMessages, { id: bot.id, chatId: 7001, limit: 2 }, ownerJwt);
    expect(r.items.map((m) => m.text)).toEqual(['third', 'Pick one']);
    expect(r.items[1]!.replyMarkup!.inlineKeyboard[0]!.buttons.map((b) => b.callbackData ?? b.url)).toEqual(['yes', 'https://example.com/docs']);
    expect(r.pagination).toEqual({ page: 1, limit: 2, total: 3, hasMore: true });
    const err = await rpc(grpcConsole, grpcConsole.listChatMessages, { id: bot.id, chatId: 7001, limit: 500 }, ownerJwt).catch((e: grpc.ServiceError) => e);
    expect((err as grpc.ServiceError).code).toBe(grpc.status.INVALID_ARGUMENT);
    const missing = await rpc(grpcConsole, grpcConsole.listChatMessages, { id: bot.id, chatId: 7001 }, await h.jwt('chat-messages-stranger')).catch((e: grpc.ServiceError) => e);
    expect((missing as grpc.ServiceError).code).toBe(grpc.status.NOT_FOUND);
  });
});
