/**
 * A message's text (4096) and caption (1024) are limited once parsed, as Telegram limits
 * them: markup does not count, what it leaves does (UTF-16 code units). The raw input is
 * bounded on its own (32768 characters and Telegram's 32768 bytes of UTF-8). For every
 * method that takes a text or caption with parse_mode: the native API, the Telegram
 * surface and gRPC, with Telegram's words ("message is too long", "message caption is too
 * long", "text is too long", "text must be non-empty").
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EditMessageCaptionRequest, SendMediaGroupRequest, SendMessageRequest } from '../src/gen/botplatform/v1/runtime_service.js';
import { fromServiceError } from '../src/grpc/status-details.js';
import { botChats, png } from './helpers/bot-chats.js';
import { approvedBot, client, startHarness, type Harness, type HttpResult } from './helpers/harness.js';

const CHAT = 9101;
/** n characters of markup per character it leaves: 8 raw characters each. */
const boldEach = (n: number, ch: string) => `<b>${ch}</b>`.repeat(n);

describe('text and caption lengths are counted once parsed', () => {
  let h: Harness;
  let b: ReturnType<typeof botChats>;
  let bot: { id: string; token: string };
  let photo = '';
  let document = '';
  let textMessage = 0;
  let photoMessage = 0;

  beforeAll(async () => {
    h = await startHarness('in-process', { LIMITS_ENABLED: 'false' });
    const ownerJwt = await h.jwt('lengths-owner');
    b = botChats(h, ownerJwt);
    bot = await approvedBot(h, ownerJwt, 'len_bot');
    expect((await client(h.url, ownerJwt).patch(`/api/v1/bots/my/${bot.id}`, { supports_inline_queries: true })).status).toBe(200);
    await b.say(bot.id, CHAT, 1);
    photo = await b.registerFile(bot.token, png(4, 3), 'p.png', 'image/png');
    document = await b.registerFile(bot.token, Buffer.from('a document'), 'd.txt', 'text/plain');
    textMessage = (await b.rt(bot.token, 'sendMessage', { chat_id: CHAT, text: 'to edit' })).body.result.message_id;
    photoMessage = (await b.rt(bot.token, 'sendPhoto', { chat_id: CHAT, file_id: photo, caption: 'to edit' })).body.result.message_id;
  });
  afterAll(async () => {
    b?.close();
    await h?.close();
  });

  /** An inline query of the bot, asked now (each answer needs its own). */
  async function inlineQueryId(): Promise<string> {
    await b.ingest([{ botId: bot.id, inlineQuery: { from: { id: CHAT, isBot: false }, query: 'q', offset: '' } }]);
    const res = await b.rt(bot.token, 'getUpdates', { timeout: 5 });
    const u = res.body.result.at(-1);
    await b.rt(bot.token, 'getUpdates', { offset: u.update_seq + 1 });
    return u.inline_query.id;
  }

  interface Method {
    name: string;
    /** The request with the text (or caption) `v` in HTML; `field`: the path a refusal names. */
    body: (v: string) => Promise<object> | object;
    field: string;
    caption: boolean;
    /** The text as the answer returns it (where it returns the message). */
    returned?: (result: { text?: string; caption?: string }[] | { text?: string; caption?: string }) => string | undefined;
  }
  /**
   * An edit's text in a formatting of its own on each surface (its three calls: within the
   * limit, over it, empty): each surface's edit is new (one that changes nothing is refused).
   */
  const freshFor = () => {
    let calls = 0;
    return (v: string) => (Math.floor(calls++ / 3) % 2 ? `<i>${v}</i>` : `<u>${v}</u>`);
  };
  const [freshText, freshCaption] = [freshFor(), freshFor()];
  const METHODS: Method[] = [
    { name: 'sendMessage', field: 'text', caption: false, body: (v) => ({ chat_id: CHAT, text: v, parse_mode: 'HTML' }), returned: (r) => (r as { text: string }).text },
    { name: 'editMessageText', field: 'text', caption: false, body: (v) => ({ chat_id: CHAT, message_id: textMessage, text: freshText(v), parse_mode: 'HTML' }) },
    { name: 'sendPhoto', field: 'caption', caption: true, body: (v) => ({ chat_id: CHAT, file_id: photo, caption: v, parse_mode: 'HTML' }), returned: (r) => (r as { caption: string }).caption },
    { name: 'sendDocument', field: 'caption', caption: true, body: (v) => ({ chat_id: CHAT, file_id: document, caption: v, parse_mode: 'HTML' }) },
    { name: 'editMessageCaption', field: 'caption', caption: true, body: (v) => ({ chat_id: CHAT, message_id: photoMessage, caption: freshCaption(v), parse_mode: 'HTML' }) },
    { name: 'copyMessage', field: 'caption', caption: true, body: (v) => ({ chat_id: CHAT, from_chat_id: CHAT, message_id: photoMessage, caption: v, parse_mode: 'HTML' }) },
    {
      name: 'sendMediaGroup', field: 'media[0].caption', caption: true,
      body: (v) => ({ chat_id: CHAT, media: [{ type: 'photo', media: photo, caption: v, parse_mode: 'HTML' }, { type: 'photo', media: photo }] }),
      returned: (r) => (r as { caption: string }[])[0]!.caption,
    },
    {
      name: 'answerInlineQuery', field: 'results[0].input_message_content.message_text', caption: false,
      body: async (v) => ({ inline_query_id: await inlineQueryId(), results: [{ type: 'article', id: 'a', title: 't', input_message_content: { message_text: v, parse_mode: 'HTML' } }] }),
    },
    {
      name: 'answerInlineQuery', field: 'results[0].caption', caption: true,
      body: async (v) => ({ inline_query_id: await inlineQueryId(), results: [{ type: 'photo', id: 'p', photo_file_id: photo, caption: v, parse_mode: 'HTML' }] }),
    },
  ];
  type Surface = (token: string, method: string, body: object) => Promise<HttpResult>;
  /** Telegram's sendPhoto and sendDocument name the file by its kind. */
  const telegramBody = (method: string, { file_id: fileId, ...body }: { file_id?: string }) =>
    (fileId === undefined ? body : { ...body, [method === 'sendPhoto' ? 'photo' : 'document']: fileId });
  const SURFACES: [string, Surface][] = [
    ['native', (t, m, body) => b.rt(t, m, body)],
    ['Telegram', (t, m, body) => b.tg(t, m, telegramBody(m, body))],
  ];

  describe.each(SURFACES)('%s surface', (_name, call) => {
    it.each(METHODS.map((m) => [`${m.name} (${m.field})`, m] as const))('%s', async (_label, m) => {
      const max = m.caption ? 1024 : 4096;
      // Far more markup than the limit, leaving exactly the limit: accepted, and counted as Telegram counts it.
      // (The last character bare: an edit's own formatting of 7 characters more stays within the raw input's 32768.)
      const full = await call(bot.token, m.name, await m.body(`${boldEach(max - 1, 'x')}x`));
      expect(full.status, JSON.stringify(full.body)).toBe(200);
      if (m.returned) expect(m.returned(full.body.result)).toBe('x'.repeat(max));
      // One more character once parsed: Telegram's words, naming the field.
      const over = await call(bot.token, m.name, await m.body(`<b>${'x'.repeat(max + 1)}</b>`));
      expect(over.status).toBe(400);
      expect(over.body.description).toBe(`Bad Request: ${m.field}: ${m.caption ? 'message caption is too long' : 'message is too long'}`);
      // Markup that leaves nothing: a text must be non-empty; a caption may be (it is then none), as Telegram's.
      const empty = await call(bot.token, m.name, await m.body('<b> </b>'));
      if (m.caption) expect(empty.status, JSON.stringify(empty.body)).toBe(200);
      else expect(empty.body.description).toBe(`Bad Request: ${m.field}: text must be non-empty`);
    }, 60_000);
  });

  it('the raw input is bounded: 32768 characters, and Telegram\'s 32768 bytes of UTF-8 ("text is too long")', async () => {
    const at = await b.rt(bot.token, 'sendMessage', { chat_id: CHAT, text: boldEach(4096, 'y'), parse_mode: 'HTML' });
    expect(at.status).toBe(200);
    const chars = await b.rt(bot.token, 'sendMessage', { chat_id: CHAT, text: `${boldEach(4096, 'y')}!`, parse_mode: 'HTML' });
    expect(chars.status).toBe(400);
    expect(chars.body.description).toBe('Bad Request: text: must be 1 to 32768 characters');
    // 16385 two-byte characters: within 32768 characters, beyond 32768 bytes.
    const bytes = await b.tg(bot.token, 'sendMessage', { chat_id: CHAT, text: 'é'.repeat(16_385), parse_mode: 'HTML' });
    expect(bytes.status).toBe(400);
    expect(bytes.body.description).toBe('Bad Request: text: text is too long');
    const caption = await b.rt(bot.token, 'sendPhoto', { chat_id: CHAT, file_id: photo, caption: 'c'.repeat(32_769) });
    expect(caption.status).toBe(400);
    expect(caption.body.description).toBe('Bad Request: caption: must be at most 32768 characters');
    // Plain text is limited once parsed too: Telegram trims it first.
    const trimmed = await b.rt(bot.token, 'sendMessage', { chat_id: CHAT, text: `${'z'.repeat(4096)}${' '.repeat(5000)}` });
    expect(trimmed.status).toBe(200);
    expect(trimmed.body.result.text).toBe('z'.repeat(4096));
    const blank = await b.rt(bot.token, 'sendMessage', { chat_id: CHAT, text: '   ' });
    expect(blank.body.description).toBe('Bad Request: text: text must be non-empty');
  });

  it('over gRPC: the same limits, INVALID_ARGUMENT naming the field with Telegram\'s words', async () => {
    const sent = await b.grpc<{ result: { text: string } }>(bot.token, 'sendMessage', SendMessageRequest.fromPartial({ chatId: CHAT, text: boldEach(4096, 'g'), parseMode: 'HTML' }));
    expect(sent.result.text).toBe('g'.repeat(4096));
    const refusal = async (method: 'sendMessage' | 'sendMediaGroup' | 'editMessageCaption', req: object) => {
      const encode = { sendMessage: SendMessageRequest, sendMediaGroup: SendMediaGroupRequest, editMessageCaption: EditMessageCaptionRequest }[method];
      const err = await b.grpc(bot.token, method, (encode.fromPartial as (o: object) => unknown)(req)).then(() => undefined, (e: grpc.ServiceError) => e);
      expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
      return fromServiceError(err!).details;
    };
    expect(await refusal('sendMessage', { chatId: CHAT, text: `<i>${'g'.repeat(4097)}</i>`, parseMode: 'HTML' }))
      .toEqual([expect.objectContaining({ field: 'text', reason: 'MESSAGE_TOO_LONG', description: 'message is too long' })]);
    const album = await b.grpc<{ result: { caption: string }[] }>(bot.token, 'sendMediaGroup', SendMediaGroupRequest.fromPartial({
      chatId: CHAT, media: [{ type: 'photo', media: photo, caption: boldEach(1024, 'a'), parseMode: 'HTML' }, { type: 'photo', media: photo }],
    }));
    expect(album.result[0]!.caption).toBe('a'.repeat(1024));
    expect(await refusal('sendMediaGroup', {
      chatId: CHAT, media: [{ type: 'photo', media: photo, caption: `<b>${'a'.repeat(1025)}</b>`, parseMode: 'HTML' }, { type: 'photo', media: photo }],
    })).toEqual([expect.objectContaining({ field: 'media[0].caption', reason: 'MESSAGE_TOO_LONG', description: 'message caption is too long' })]);
    expect(await refusal('editMessageCaption', { chatId: CHAT, messageId: photoMessage, caption: `<b>${'e'.repeat(1025)}</b>`, parseMode: 'HTML' }))
      .toEqual([expect.objectContaining({ field: 'caption', reason: 'MESSAGE_TOO_LONG' })]);
  });
});
