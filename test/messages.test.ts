/**
 * The send methods over real HTTP (and gRPC for the status): chats known from
 * updates, replies checked, captions, files only of the sending bot, the Message
 * returned, and each sent message published on the outbound messages topic.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import type { BusMessage } from '../src/bus/bus.js';
import { MESSAGES_TOPIC } from '../src/bus/topics.js';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';

describe('messages', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  const published: BusMessage[] = [];

  beforeAll(async () => {
    h = await startHarness('in-process');
    ownerJwt = await h.jwt('messages-owner');
    owner = client(h.url, ownerJwt);
    await h.apps[0]!.bus!.subscribeAll([MESSAGES_TOPIC], (m) => published.push(m));
  });
  afterAll(async () => {
    await h?.close();
  });

  const rt = (token: string, method: string, body: object) => call(h.url, 'POST', `/api/v1/bots/${method}`, { token, body });
  const testUpdate = (id: string, text: string, chatId: number) =>
    owner.post(`/api/v1/bots/my/${id}/test-updates`, { text, chat_id: chatId, from: { id: chatId, is_bot: false, username: 'carol' } });

  /** Registers a small file for the bot through the whole upload flow; returns its file_id. */
  async function registerFile(token: string, bytes: Buffer, fileName: string, fileType: string): Promise<string> {
    const checksum = crypto.createHash('sha256').update(bytes).digest('hex');
    const cred = await rt(token, 'files/upload-credentials', { fileName, fileSize: bytes.length, fileType, checksum });
    expect(cred.body.result.uploadRequired).toBe(true);
    const put = await fetch(cred.body.result.uploadUrl, { method: 'PUT', headers: cred.body.result.headers, body: new Uint8Array(bytes) });
    expect(put.status).toBe(200);
    const done = await rt(token, 'files/complete', { checksum });
    expect(done.status).toBe(200);
    return done.body.result.file_id;
  }

  it('sendMessage needs a chat that wrote to the bot, then returns the stored Message and publishes it', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'msg_send');
    const unknown = await rt(token, 'sendMessage', { chat_id: 7001, text: 'hi' });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ ok: false, error_code: 400 });
    expect(unknown.body.description).toMatch(/chat not found/);

    await testUpdate(id, 'hello bot', 7001);
    const incoming = (await rt(token, 'getUpdates', {})).body.result[0].message;
    const sent = await rt(token, 'sendMessage', { chat_id: 7001, text: 'hello human', reply_to_message_id: incoming.message_id });
    expect(sent.status).toBe(200);
    expect(sent.body.ok).toBe(true);
    const m = sent.body.result;
    expect(m).toMatchObject({
      chat: { id: 7001, type: 'private' },
      from: { is_bot: true, username: 'msg_send' },
      text: 'hello human',
      reply_to_message_id: incoming.message_id,
    });
    expect(m.message_id).toBeGreaterThan(incoming.message_id);
    expect(Math.abs(m.date - Date.now() / 1000)).toBeLessThan(60);
    // Message ids never repeat within the bot, across directions.
    const second = (await rt(token, 'sendMessage', { chat_id: 7001, text: 'again' })).body.result;
    expect(second.message_id).toBe(m.message_id + 1);
    await testUpdate(id, 'and you', 7001);
    const next = (await rt(token, 'getUpdates', { offset: 2 })).body.result[0].message;
    expect(next.message_id).toBe(second.message_id + 1);

    await expect.poll(() => published.filter((p) => p.key === id).length).toBe(2);
    const bodies = published.filter((p) => p.key === id).map((p) => JSON.parse(p.value));
    expect(bodies[0]).toEqual({ bot_id: id, message: m });
  });

  it('concurrent sends of two bots share transactions, each bot\'s messages numbered without gaps and published in that order', async () => {
    const a = await approvedBot(h, ownerJwt, 'msg_burst_a');
    const b = await approvedBot(h, ownerJwt, 'msg_burst_b');
    await testUpdate(a.id, 'hi a', 7301);
    await testUpdate(b.id, 'hi b', 7302);
    const db = h.apps[0]!.db!;
    const N = 40;
    // As the bots' own clients would be: connections open and kept alive.
    await Promise.all(Array.from({ length: N }, () => owner.get('/api/v1/bots/my')));
    let inserts = 0;
    const count = (q: { sql: string }) => {
      if (/^insert into [`"]?messages[`"]? /i.test(q.sql.trim())) inserts++;
    };
    db.on('query', count);
    const sends = await Promise.all(Array.from({ length: N }, (_, i) => {
      const bot = i % 2 === 0 ? a : b;
      return rt(bot.token, 'sendMessage', { chat_id: bot === a ? 7301 : 7302, text: `burst ${i}` });
    }));
    db.removeListener('query', count);
    expect(sends.map((r) => r.status)).toEqual(Array(N).fill(200));
    // Each bot's ids: after the test update's id 1, consecutive, each once.
    for (const [bot, parity] of [[a, 0], [b, 1]] as const) {
      const ids = sends.filter((_, i) => i % 2 === parity).map((r) => r.body.result.message_id as number).sort((x, y) => x - y);
      expect(ids).toEqual(Array.from({ length: N / 2 }, (_, k) => k + 2));
      // Published (outbox → bus) in id order.
      await expect.poll(() => published.filter((m) => m.key === bot.id).length, { timeout: 5000 }).toBe(N / 2);
      const seen = published.filter((m) => m.key === bot.id).map((m) => JSON.parse(m.value).message.message_id as number);
      expect(seen).toEqual(ids);
    }
    // Group commit: sends that arrive together are stored by one statement (each call
    // used to run its own transaction: lock, counter, insert, outbox, feed).
    expect(inserts).toBeGreaterThan(0);
    expect(inserts).toBeLessThan(N / 2);
  });

  it('refuses a chat that has not written to the bot in a batch of sends, storing the others with consecutive ids', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'msg_unknown');
    await testUpdate(id, 'hi', 7151);
    const [u] = (await rt(token, 'getUpdates', {})).body.result;
    // Sent together (one group commit): the unknown chat stores nothing and takes no id.
    const answers = await Promise.all([7151, 7159, 7151, 7159].map((chatId, k) => rt(token, 'sendMessage', { chat_id: chatId, text: `m${k}` })));
    expect(answers.map((a) => a.status)).toEqual([200, 400, 200, 400]);
    for (const a of [answers[1]!, answers[3]!]) expect(a.body).toEqual({ ok: false, error_code: 400, description: 'Bad Request: chat not found' });
    expect([answers[0]!.body.result.message_id, answers[2]!.body.result.message_id]).toEqual([u.message.message_id + 1, u.message.message_id + 2]);
    expect(answers[0]!.body.result.chat).toEqual(u.message.chat);
    // An unknown chat is the refusal before a reply to nothing, with or without allow_sending_without_reply.
    for (const allow of [false, true]) {
      const reply = await rt(token, 'sendMessage', { chat_id: 7159, text: 'x', reply_to_message_id: 5, allow_sending_without_reply: allow });
      expect(reply.body.description).toBe('Bad Request: chat not found');
    }
    const next = (await rt(token, 'sendMessage', { chat_id: 7151, text: 'last' })).body.result;
    expect(next.message_id).toBe(u.message.message_id + 3);
  });

  it('replies only to a message of the same chat', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'msg_reply');
    await testUpdate(id, 'one', 7101);
    await testUpdate(id, 'two', 7102);
    const [a] = (await rt(token, 'getUpdates', {})).body.result;
    const wrongChat = await rt(token, 'sendMessage', { chat_id: 7102, text: 'x', reply_to_message_id: a.message.message_id });
    expect(wrongChat.status).toBe(400);
    // Telegram's words (Client.cpp's check_reply_parameters).
    expect(wrongChat.body.description).toBe('Bad Request: message to be replied not found');
    const missing = await rt(token, 'sendMessage', { chat_id: 7101, text: 'x', reply_to_message_id: 999_999 });
    expect(missing.status).toBe(400);
    // A reply to the bot's own earlier message works, and carries that message (one level).
    const own = (await rt(token, 'sendMessage', { chat_id: 7101, text: 'mine' })).body.result;
    const re = await rt(token, 'sendMessage', { chat_id: 7101, text: 're', reply_to_message_id: own.message_id });
    expect(re.status).toBe(200);
    expect(re.body.result.reply_to_message).toEqual(own);
    // So does a reply to a message the bot received.
    const toUser = (await rt(token, 'sendMessage', { chat_id: 7101, text: 'to you', reply_to_message_id: a.message.message_id })).body.result;
    expect(toUser.reply_to_message).toMatchObject({ message_id: a.message.message_id, text: 'one' });
    expect(toUser.reply_to_message.reply_to_message).toBeUndefined();
  });

  it.each([
    [{ text: 'no chat' }, 'chat_id'],
    [{ chat_id: 7201 }, 'text'],
    [{ chat_id: 7201, text: '' }, 'text'],
    [{ chat_id: 7201, text: 'x'.repeat(4097) }, 'text'], // 4097 characters
    [{ chat_id: 'abc', text: 'x' }, 'chat_id'],
    [{ chat_id: 7201, text: 'x', reply_to_message_id: -1 }, 'reply_to_message_id'],
    [{ chat_id: 7201, text: 'x', parse_mode: 'HTML', disable_web_page_preview: true }, 'disable_web_page_preview'],
  ])('a sendMessage missing or breaking %1$s is a 400 (case %#)', async (body, field) => {
    const { token } = await approvedBot(h, ownerJwt, `msg_bad_${crypto.randomBytes(3).toString('hex')}`);
    const res = await rt(token, 'sendMessage', body);
    expect(res.status).toBe(400);
    expect(res.body.description).toContain(field);
  });

  it.each([['a NUL', 'a\\u0000b'], ['a lone high surrogate', 'a\\ud83db'], ['a lone low surrogate', '\\ude42']])(
    'a text or caption with %s is a 400 naming the field, and nothing is sent',
    async (_what, bad) => {
      const { id, token } = await approvedBot(h, ownerJwt, `msg_chars_${crypto.randomBytes(3).toString('hex')}`);
      await testUpdate(id, 'hi', 7251);
      const png = await registerFile(token, crypto.randomBytes(512), 'pic.png', 'image/png');
      const ofBot = () => published.filter((m) => m.key === id).length; // on Kafka the topic is shared with other tests
      const sent = ofBot();
      const raw = (method: string, json: string) => call(h.url, 'POST', `/api/v1/bots/${method}`, { token, rawBody: json });
      const text = await raw('sendMessage', `{"chat_id":7251,"text":"${bad}"}`);
      expect(text.status).toBe(400);
      expect(text.body).toMatchObject({ ok: false, error_code: 400 });
      expect(text.body.description).toContain('text');
      for (const method of ['sendPhoto', 'sendDocument']) {
        const caption = await raw(method, `{"chat_id":7251,"file_id":"${png}","caption":"${bad}"}`);
        expect(caption.status).toBe(400);
        expect(caption.body.description).toContain('caption');
      }
      expect(ofBot()).toBe(sent);
      // The next message gets the next id: nothing was stored for the refused ones.
      expect((await rt(token, 'sendMessage', { chat_id: 7251, text: 'ok 🙂' })).body.result.text).toBe('ok 🙂');
    },
  );

  it('a text of 4096 UTF-16 code units is accepted, one more is too long (Telegram\'s count: 🙂 is two)', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'msg_long');
    await testUpdate(id, 'hi', 7301);
    expect((await rt(token, 'sendMessage', { chat_id: 7301, text: '🙂'.repeat(2048) })).status).toBe(200);
    expect((await rt(token, 'sendMessage', { chat_id: 7301, text: 'x'.repeat(4096) })).status).toBe(200);
    const long = await rt(token, 'sendMessage', { chat_id: 7301, text: `${'🙂'.repeat(2048)}!` });
    expect(long.status).toBe(400);
    expect(long.body.description).toMatch(/^Bad Request: text: message is too long/);
    // Counted after parsing: markup does not count, what it leaves does.
    const html = await rt(token, 'sendMessage', { chat_id: 7301, text: `<b>${'🙂'.repeat(2044)}</b>`, parse_mode: 'HTML' });
    expect(html.status).toBe(200);
    expect(html.body.result.entities).toEqual([{ type: 'bold', offset: 0, length: 4088 }]);
    expect((await rt(token, 'sendMessage', { chat_id: 7301, text: `<b>${'🙂'.repeat(2049)}</b>`, parse_mode: 'HTML' })).status).toBe(400);
  });

  it('formatting: parse_mode HTML and MarkdownV2 become entities as Telegram parses them; malformed markup is Telegram\'s 400; given entities are kept', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'msg_format');
    await testUpdate(id, 'hi', 7401);
    const html = await rt(token, 'sendMessage', { chat_id: 7401, text: '<b>bold</b> and <a href="https://example.com/">a link</a> &amp; <code>x</code>', parse_mode: 'HTML' });
    expect(html.status).toBe(200);
    expect(html.body.result.text).toBe('bold and a link & x');
    expect(html.body.result.entities).toEqual([
      { type: 'bold', offset: 0, length: 4 },
      { type: 'text_link', offset: 9, length: 6, url: 'https://example.com/' },
      { type: 'code', offset: 18, length: 1 },
    ]);
    const md = await rt(token, 'sendMessage', { chat_id: 7401, text: '*bold* _it_ ||spoiler||', parse_mode: 'markdownv2' });
    expect(md.body.result.entities.map((e: { type: string }) => e.type)).toEqual(['bold', 'italic', 'spoiler']);
    const unclosed = await rt(token, 'sendMessage', { chat_id: 7401, text: '<b>never closed', parse_mode: 'HTML' });
    expect(unclosed.status).toBe(400);
    expect(unclosed.body.description).toBe("Bad Request: text: can't parse entities: Can't find end tag corresponding to start tag \"b\"");
    const reserved = await rt(token, 'sendMessage', { chat_id: 7401, text: 'end.', parse_mode: 'MarkdownV2' });
    expect(reserved.body.description).toMatch(/^Bad Request: text: can't parse entities: Character '\.' is reserved and must be escaped with the preceding '\\'/);
    const unsupported = await rt(token, 'sendMessage', { chat_id: 7401, text: 'x', parse_mode: 'BBCode' });
    expect(unsupported.body.description).toBe('Bad Request: text: unsupported parse_mode');
    const given = await rt(token, 'sendMessage', { chat_id: 7401, text: 'plain words', entities: [{ type: 'underline', offset: 6, length: 5 }] });
    expect(given.body.result.entities).toEqual([{ type: 'underline', offset: 6, length: 5 }]);
  });

  it('reply_markup: an inline keyboard is stored with the message, returned and published; Telegram\'s limits refuse the rest', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'msg_markup');
    await testUpdate(id, 'hi', 7501);
    const markup = { inline_keyboard: [{ buttons: [{ text: 'Yes', callback_data: 'answer:yes' }, { text: 'Docs', url: 'https://example.com/docs' }] }] };
    const sent = await rt(token, 'sendMessage', { chat_id: 7501, text: 'Continue?', reply_markup: markup });
    expect(sent.status).toBe(200);
    // The native API writes every flag (false ones too); the published message, as webhooks, leaves them out.
    expect(sent.body.result.reply_markup).toEqual({ ...markup, remove_keyboard: false, force_reply: false, is_persistent: false, resize_keyboard: false, one_time_keyboard: false, selective: false });
    await expect.poll(() => published.filter((p) => p.key === id).length).toBe(1);
    expect(JSON.parse(published.find((p) => p.key === id)!.value).message.reply_markup).toEqual(markup);
    // A custom keyboard, its removal and a forced reply: each returned, kept with the message and published for the messaging services to render.
    const kinds = [
      { keyboard: [{ buttons: [{ text: 'A' }, { text: 'B', request_contact: true }] }], one_time_keyboard: true, resize_keyboard: true, input_field_placeholder: 'Choose' },
      { remove_keyboard: true, selective: true },
      { force_reply: true, input_field_placeholder: 'Your name' },
    ];
    const sentKinds = [];
    for (const [i, reply_markup] of kinds.entries()) {
      const res = await rt(token, 'sendMessage', { chat_id: 7501, text: `kind ${i}`, reply_markup });
      expect(res.status).toBe(200);
      expect(res.body.result.reply_markup).toMatchObject(reply_markup);
      sentKinds.push(res.body.result);
    }
    await expect.poll(() => published.filter((p) => p.key === id).length).toBe(4);
    expect(published.filter((p) => p.key === id).slice(1).map((p) => JSON.parse(p.value).message.reply_markup)).toEqual(kinds);
    const stored = await owner.get(`/api/v1/bots/my/${id}/chats/7501/messages`);
    expect(stored.body.items.slice(0, 3).reverse()).toMatchObject(sentKinds);
    const long = await rt(token, 'sendMessage', { chat_id: 7501, text: 'x', reply_markup: { inline_keyboard: [{ buttons: [{ text: 'Big', callback_data: 'd'.repeat(65) }] }] } });
    expect(long.status).toBe(400);
    expect(long.body.description).toMatch(/^Bad Request: reply_markup\.inline_keyboard\[0\]\.buttons\[0\]\.callback_data: BUTTON_DATA_INVALID/);
    const two = await rt(token, 'sendMessage', { chat_id: 7501, text: 'x', reply_markup: { remove_keyboard: true, force_reply: true } });
    expect(two.status).toBe(400);
  });

  it('sendPhoto and sendDocument send the bot\'s own files with captions; others\' files and non-images are refused', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'msg_files');
    const other = await approvedBot(h, await h.jwt('someone-else'), 'msg_files_other');
    await testUpdate(id, 'send me things', 7401);
    const png = await registerFile(token, crypto.randomBytes(2048), 'cat.png', 'image/png');
    const pdf = await registerFile(token, crypto.randomBytes(3000), 'report.pdf', 'application/pdf');
    const foreign = await registerFile(other.token, crypto.randomBytes(100), 'theirs.png', 'image/png');

    const photo = await rt(token, 'sendPhoto', { chat_id: 7401, file_id: png, caption: 'a cat' });
    expect(photo.status).toBe(200);
    expect(photo.body.result).toMatchObject({
      chat: { id: 7401 }, caption: 'a cat',
      photo: { file_id: png, file_name: 'cat.png', file_size: 2048, mime_type: 'image/png', file_unique_id: expect.any(String) },
    });
    expect(photo.body.result.text).toBeUndefined();
    const doc = await rt(token, 'sendDocument', { chat_id: 7401, file_id: pdf });
    expect(doc.status).toBe(200);
    expect(doc.body.result.document).toMatchObject({ file_id: pdf, mime_type: 'application/pdf' });
    // A document may be any file, a photo must be an image.
    expect((await rt(token, 'sendDocument', { chat_id: 7401, file_id: png })).status).toBe(200);
    const notImage = await rt(token, 'sendPhoto', { chat_id: 7401, file_id: pdf });
    expect(notImage.status).toBe(400);
    expect(notImage.body.description).toMatch(/not an image/);

    for (const method of ['sendPhoto', 'sendDocument']) {
      const theirs = await rt(token, method, { chat_id: 7401, file_id: foreign });
      expect(theirs.status).toBe(400);
      expect(theirs.body.description).toMatch(/file_id/);
      expect((await rt(token, method, { chat_id: 7401, file_id: 'file_doesnotexist' })).status).toBe(400);
      expect((await rt(token, method, { chat_id: 7401 })).status).toBe(400);
    }
    const longCaption = await rt(token, 'sendPhoto', { chat_id: 7401, file_id: png, caption: 'c'.repeat(1025) });
    expect(longCaption.status).toBe(400);
    expect(longCaption.body.description).toContain('caption');
    // Another bot's file is refused even in a chat the other bot knows.
    expect((await rt(other.token, 'sendPhoto', { chat_id: 7401, file_id: png })).status).toBe(400);
  });

  it('needs the bot token', async () => {
    const res = await call(h.url, 'POST', '/api/v1/bots/sendMessage', { token: ownerJwt, body: { chat_id: 1, text: 'x' } });
    expect(res.status).toBe(401);
  });
});
