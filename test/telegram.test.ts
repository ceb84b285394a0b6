/**
 * The Telegram-shaped surface over real HTTP: /bot<token>/<method> with JSON, form,
 * query-string and multipart bodies, Telegram's types (User, Update with update_id =
 * update_seq, Message, File), its offsets (negative included), the command menu,
 * file download at /file/bot<token>/<path>, and the token kept out of bodies and logs.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';
import { startReceiver, type Receiver } from './helpers/receiver.js';
import { createTestPki, type TestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

describe('Telegram surface', () => {
  let h: Harness;
  let ownerJwt: string;
  let owner: ReturnType<typeof client>;
  let pki: TestPki;
  let receiver: Receiver | undefined;
  const logLines: string[] = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _enc, cb) {
        logLines.push(String(chunk));
        cb();
      },
    });
    pki = createTestPki();
    h = await startHarness('in-process', { LOG_LEVEL: 'info', WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile }, sink);
    ownerJwt = await h.jwt('tg-owner');
    owner = client(h.url, ownerJwt);
  });
  afterAll(async () => {
    await receiver?.close();
    await h?.close();
  });

  const tg = (token: string, method: string, body?: object) => call(h.url, 'POST', `/bot${token}/${method}`, body === undefined ? {} : { body });
  const testUpdate = (id: string, text: string, chatId = 777) =>
    owner.post(`/api/v1/bots/my/${id}/test-updates`, { text, chat_id: chatId, from: { id: chatId, is_bot: false, username: 'carol', first_name: 'Carol' } });

  it('getMe answers a Telegram User whose numeric id is the bot\'s from.id', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_me');
    const me = await tg(token, 'getMe');
    expect(me.status).toBe(200);
    expect(me.body).toEqual({
      ok: true,
      result: {
        id: expect.any(Number), is_bot: true, first_name: 'Bot tg_me', username: 'tg_me',
        can_join_groups: expect.any(Boolean), can_read_all_group_messages: false, supports_inline_queries: expect.any(Boolean),
      },
    });
    await testUpdate(id, 'hi');
    const sent = await tg(token, 'sendMessage', { chat_id: 777, text: 'hello' });
    expect(sent.body.result.from.id).toBe(me.body.result.id);
    // GET, and case-insensitive method names.
    const viaGet = await call(h.url, 'GET', `/bot${token}/GETME`);
    expect(viaGet.body.result.id).toBe(me.body.result.id);
  });

  it('unknown methods, bad tokens and non-JSON bodies answer Telegram\'s error shape without echoing the token', async () => {
    const { token } = await approvedBot(h, ownerJwt, 'tg_errors');
    const unknown = await tg(token, 'sendSticker', {});
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ ok: false, error_code: 404, description: 'Not Found: method not found' });
    const bad = await call(h.url, 'POST', '/botsbot_notarealtoken000000000000000000000000000/getMe');
    expect(bad.status).toBe(401);
    expect(bad.body).toMatchObject({ ok: false, error_code: 401 });
    expect(JSON.stringify(bad.body)).not.toContain('notarealtoken');
    const text = await call(h.url, 'POST', `/bot${token}/getMe`, { rawBody: 'x', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(415);
    expect(text.body.ok).toBe(false);
    for (const r of [unknown, bad, text]) expect(JSON.stringify(r.body)).not.toContain(token);
    // The access log names the route template, never the token.
    await new Promise((r) => setTimeout(r, 50));
    const http = logLines.filter((l) => l.includes('"msg":"http"'));
    expect(http.some((l) => l.includes('/bot*'))).toBe(true);
    expect(logLines.join('\n')).not.toContain(token);
    expect(logLines.join('\n')).not.toContain('notarealtoken');
  });

  it('getUpdates: update_id is update_seq, offset = last + 1 confirms, negative offsets answer the newest', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_poll');
    for (let i = 1; i <= 5; i++) expect((await testUpdate(id, `m${i}`)).status).toBe(201);
    const first = await tg(token, 'getUpdates', { limit: 2 });
    expect(first.body.result.map((u: { update_id: number }) => u.update_id)).toEqual([1, 2]);
    const u = first.body.result[0];
    expect(u.message).toEqual({
      message_id: expect.any(Number), date: expect.any(Number), text: 'm1',
      chat: { id: 777, type: 'private' }, from: { id: 777, is_bot: false, first_name: 'Carol', username: 'carol' },
    });
    // Form-encoded, as python-telegram-bot sends it.
    const form = await call(h.url, 'POST', `/bot${token}/getUpdates`, { rawBody: 'offset=3&limit=2', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(form.status).toBe(200);
    expect(form.body.result.map((x: { update_id: number }) => x.update_id)).toEqual([3, 4]);
    // The query string, with GET, as pyTelegramBotAPI sends it.
    const q = await call(h.url, 'GET', `/bot${token}/getUpdates?offset=5`);
    expect(q.body.result.map((x: { update_id: number }) => x.update_id)).toEqual([5]);
    // Confirmed: offset 5 forgot 1..4.
    const again = await tg(token, 'getUpdates', {});
    expect(again.body.result.map((x: { update_id: number }) => x.update_id)).toEqual([5]);

    for (let i = 6; i <= 8; i++) await testUpdate(id, `m${i}`);
    const tail = await tg(token, 'getUpdates', { offset: -2 });
    expect(tail.body.result.map((x: { update_id: number }) => x.update_id)).toEqual([7, 8]);
    // Everything before the newest two is forgotten.
    const after = await tg(token, 'getUpdates', {});
    expect(after.body.result.map((x: { update_id: number }) => x.update_id)).toEqual([7, 8]);
  });

  it('webhooks: setWebhook, a delivery carrying X-Telegram-Bot-Api-Secret-Token, getWebhookInfo, deleteWebhook', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_hook');
    receiver = await startReceiver(pki);
    const info0 = await tg(token, 'getWebhookInfo');
    expect(info0.body).toEqual({ ok: true, result: { url: '', has_custom_certificate: false, pending_update_count: 0 } });
    const set = await call(h.url, 'POST', `/bot${token}/setWebhook`, {
      rawBody: `url=${encodeURIComponent(receiver.url)}&secret_token=s3cret_tok&max_connections=5`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(set.body).toEqual({ ok: true, result: true });
    const info = await tg(token, 'getWebhookInfo');
    expect(info.body.result).toMatchObject({ url: receiver.url, has_custom_certificate: false, max_connections: 5 });
    expect(JSON.stringify(info.body)).not.toContain('s3cret_tok');
    await testUpdate(id, 'to the hook');
    await receiver.waitFor(1);
    expect(receiver.received[0]!.headers['x-telegram-bot-api-secret-token']).toBe('s3cret_tok');
    expect(receiver.received[0]!.headers['x-service-signature-v2']).toEqual(expect.any(String));
    // The body is a Telegram Update, as getUpdates on this surface answers it (update_id is
    // the bot's update_seq), signed as sent.
    const raw = receiver.received[0]!.raw.toString('utf8');
    expect(JSON.parse(raw)).toEqual({
      update_id: 1,
      message: { message_id: expect.any(Number), date: expect.any(Number), text: 'to the hook', chat: { id: 777, type: 'private' }, from: { id: 777, is_bot: false, first_name: 'Carol', username: 'carol' } },
    });
    const ts = String(receiver.received[0]!.headers['x-service-timestamp']);
    expect(receiver.received[0]!.headers['x-service-signature-v2']).toBe(crypto.createHmac('sha256', 's3cret_tok').update(`${ts}.${raw}`).digest('hex'));
    const polled = await tg(token, 'getUpdates');
    expect(polled.status).toBe(409);
    expect(polled.body.ok).toBe(false);
    expect((await tg(token, 'deleteWebhook', { drop_pending_updates: true })).body).toEqual({ ok: true, result: true });
    expect((await tg(token, 'getWebhookInfo')).body.result.url).toBe('');
  });

  it('a token in Telegram\'s "<bot id>:<token>" form works when the id is the bot\'s, and is refused otherwise', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_idtoken');
    const me = (await tg(token, 'getMe')).body.result;
    const withId = await tg(`${me.id}:${token}`, 'getMe');
    expect(withId.status).toBe(200);
    expect(withId.body.result).toEqual(me);
    await testUpdate(id, 'hi', 66);
    const sent = await tg(`${me.id}:${token}`, 'sendMessage', { chat_id: 66, text: 'hello' });
    expect(sent.body.result.from.id).toBe(me.id);
    // The file URL takes the same form.
    const doc = new FormData();
    doc.set('chat_id', '66');
    doc.set('document', new Blob([new Uint8Array(Buffer.from('id form'))], { type: 'text/plain' }), 'a.txt');
    const d = await (await fetch(`${h.url}/bot${me.id}:${token}/sendDocument`, { method: 'POST', body: doc })).json();
    const path = (await tg(`${me.id}:${token}`, 'getFile', { file_id: d.result.document.file_id })).body.result.file_path;
    const dl = await fetch(`${h.url}/file/bot${me.id}:${token}/${path}`);
    expect(dl.status).toBe(200);
    expect(await dl.text()).toBe('id form');
    // Another bot's id, or any other number, is a bad token: 401, on every route, and nothing done.
    const other = (await tg((await approvedBot(h, ownerJwt, 'tg_idtoken_other')).token, 'getMe')).body.result;
    for (const wrong of [`${other.id}:${token}`, `${me.id + 1}:${token}`, `0:${token}`]) {
      const r = await tg(wrong, 'sendMessage', { chat_id: 66, text: 'must not be sent' });
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ ok: false, error_code: 401, description: expect.stringMatching(/^Unauthorized/) });
      expect(JSON.stringify(r.body)).not.toContain(token);
      expect((await fetch(`${h.url}/file/bot${wrong}/${path}`)).status).toBe(401);
    }
    const history = await tg(token, 'getUpdates');
    expect(history.status).toBe(200);
    // A bad secret behind a right id is refused too.
    expect((await tg(`${me.id}:sbot_notarealtoken000000000000000000000000000`, 'getMe')).status).toBe(401);
  });

  it('allowed_updates: kinds this platform never produces are accepted and ignored, as Telegram does', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_kinds');
    // python-telegram-bot's Update.ALL_TYPES, as its echo bot sends it (form-encoded JSON text).
    const all = ['message', 'edited_message', 'channel_post', 'callback_query', 'chat_member', 'message_reaction', 'business_message', 'some_future_kind'];
    await testUpdate(id, 'm1');
    const form = await call(h.url, 'POST', `/bot${token}/getUpdates`, {
      rawBody: `allowed_updates=${encodeURIComponent(JSON.stringify(all))}&timeout=0`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(200);
    expect(form.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['m1']);
    const json = await tg(token, 'getUpdates', { allowed_updates: ['message', 'callback_query', 'chat_member'] });
    expect(json.status).toBe(200);
    // The kinds delivered here are what the bot now gets (the native read shows the filter).
    expect((await call(h.url, 'POST', '/api/v1/bots/getWebhookInfo', { token })).body.result.allowed_updates).toEqual(['message', 'callback_query']);
    // Nothing but kinds never produced here: the bot would wait forever, so it is told.
    const none = await tg(token, 'getUpdates', { allowed_updates: ['chat_member', 'message_reaction'] });
    expect(none.status).toBe(400);
    expect(none.body).toEqual({ ok: false, error_code: 400, description: expect.stringContaining('allowed_updates') });
    const notList = await tg(token, 'getUpdates', { allowed_updates: 'message' });
    expect(notList.status).toBe(400);
    expect(notList.body.ok).toBe(false);
    // setWebhook takes the same list.
    receiver ??= await startReceiver(pki);
    const set = await tg(token, 'setWebhook', { url: receiver.url, secret_token: 'kinds_secret', allowed_updates: all });
    expect(set.body).toEqual({ ok: true, result: true });
    expect((await tg(token, 'getWebhookInfo')).body.result.allowed_updates).toEqual(['message', 'edited_message', 'callback_query']);
    expect((await tg(token, 'deleteWebhook')).body.result).toBe(true);
  });

  it('setMyCommands / getMyCommands / deleteMyCommands use the bot\'s command menu, seen by the console', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_cmds');
    const commands = [{ command: 'start', description: 'Start' }, { command: 'help', description: 'Help' }];
    expect((await tg(token, 'setMyCommands', { commands })).body).toEqual({ ok: true, result: true });
    expect((await tg(token, 'getMyCommands')).body).toEqual({ ok: true, result: commands });
    expect((await owner.get(`/api/v1/bots/my/${id}`)).body.command_menu).toEqual(commands);
    const bad = await tg(token, 'setMyCommands', { commands: [{ command: 'Bad Command', description: 'x' }] });
    expect(bad.status).toBe(400);
    expect(bad.body.description).toContain('commands[0].command');
    // Form-encoded: the array as JSON text, as Telegram takes it.
    const form = await call(h.url, 'POST', `/bot${token}/setMyCommands`, {
      rawBody: `commands=${encodeURIComponent(JSON.stringify([{ command: 'go', description: 'Go' }]))}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.body.result).toBe(true);
    expect((await tg(token, 'getMyCommands')).body.result).toEqual([{ command: 'go', description: 'Go' }]);
    expect((await tg(token, 'deleteMyCommands')).body.result).toBe(true);
    expect((await tg(token, 'getMyCommands')).body.result).toEqual([]);
    expect((await owner.get(`/api/v1/bots/my/${id}`)).body.command_menu).toEqual([]);
  });

  it('sendPhoto / sendDocument as multipart uploads, getFile, and the download at /file/bot<token>/<file_path>', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_files');
    await testUpdate(id, 'send me files', 4242);
    const bytes = crypto.randomBytes(5000);
    const form = new FormData();
    form.set('chat_id', '4242');
    form.set('caption', 'a photo');
    form.set('photo', new Blob([new Uint8Array(bytes)], { type: 'image/png' }), 'pic.png');
    const res = await fetch(`${h.url}/bot${token}/sendPhoto`, { method: 'POST', body: form });
    const body = await res.json();
    expect(res.status).toBe(200);
    expect(body.result).toMatchObject({ chat: { id: 4242, type: 'private' }, caption: 'a photo', from: { is_bot: true } });
    expect(body.result.photo).toEqual([{ file_id: expect.any(String), file_unique_id: expect.any(String), width: 0, height: 0, file_size: 5000 }]);
    const photoId = body.result.photo[0].file_id;

    const file = await tg(token, 'getFile', { file_id: photoId });
    expect(file.body.result).toEqual({ file_id: photoId, file_unique_id: expect.any(String), file_size: 5000, file_path: expect.any(String) });
    const dl = await fetch(`${h.url}/file/bot${token}/${file.body.result.file_path}`);
    expect(dl.status).toBe(200);
    expect(Buffer.from(await dl.arrayBuffer()).equals(bytes)).toBe(true);
    const otherBot = await approvedBot(h, ownerJwt, 'tg_files_other');
    const denied = await fetch(`${h.url}/file/bot${otherBot.token}/${file.body.result.file_path}`);
    expect(denied.status).toBe(404);

    // Resending by file_id, and a document upload of the same bytes (content reuse).
    const again = await tg(token, 'sendPhoto', { chat_id: 4242, photo: photoId });
    expect(again.body.result.photo[0].file_id).toBe(photoId);
    const doc = new FormData();
    doc.set('chat_id', '4242');
    doc.set('document', new Blob([new Uint8Array(bytes)], { type: 'application/octet-stream' }), 'data.bin');
    const d = await (await fetch(`${h.url}/bot${token}/sendDocument`, { method: 'POST', body: doc })).json();
    expect(d.result.document).toMatchObject({ file_name: 'data.bin', file_size: 5000 });
    const missing = await tg(token, 'sendDocument', { chat_id: 4242 });
    expect(missing.status).toBe(400);
  });

  it('multipart parameters quoted or not, as Telegram takes them: filename=photo.png (pyTelegramBotAPI), filename*=UTF-8\'\'…', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_unquoted');
    await testUpdate(id, 'files please', 4343);
    const send = (disposition: string, bytes: string) => call(h.url, 'POST', `/bot${token}/sendDocument`, {
      rawBody: `--b\r\ncontent-disposition: form-data; name=chat_id\r\n\r\n4343\r\n--b\r\ncontent-disposition: ${disposition}\r\ncontent-type: text/plain\r\n\r\n${bytes}\r\n--b--\r\n`,
      headers: { 'content-type': 'multipart/form-data; boundary=b' },
    });
    const unquoted = await send('form-data; name=document; filename=notes.txt', 'plain notes');
    expect(unquoted.status).toBe(200);
    expect(unquoted.body.result.document).toMatchObject({ file_name: 'notes.txt', file_size: 11 });
    const extended = await send("form-data; name=\"document\"; filename*=UTF-8''%E2%82%AC%20rates.txt", 'euro rates');
    expect(extended.body.result.document).toMatchObject({ file_name: '€ rates.txt', file_size: 10 });
    // Not valid by RFC 6266 (an unquoted value with a space), still read as clients mean it.
    const loose = await send('form-data; name=document; filename=my notes.txt', 'loose');
    expect(loose.body.result.document).toMatchObject({ file_name: 'my notes.txt' });
  });

  it('reply_parameters as newer clients send it (object or JSON text), allow_sending_without_reply, and the parameters Telegram takes that are ignored here', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_replies');
    await testUpdate(id, 'first', 4545);
    const first = await tg(token, 'sendMessage', { chat_id: 4545, text: 'one' });
    const mid = first.body.result.message_id;
    // As an object (JSON body), and as its JSON text (a form), with chat_id naming this chat.
    const asObject = await tg(token, 'sendMessage', { chat_id: 4545, text: 'two', reply_parameters: { message_id: mid, chat_id: 4545, quote: 'on' } });
    expect(asObject.status).toBe(200);
    expect(asObject.body.result.reply_to_message).toMatchObject({ message_id: mid });
    const asText = await call(h.url, 'POST', `/bot${token}/sendMessage`, {
      rawBody: new URLSearchParams({ chat_id: '4545', text: 'three', reply_parameters: JSON.stringify({ message_id: mid }) }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(asText.body.result.reply_to_message).toMatchObject({ message_id: mid });
    // A missing message: refused, unless allow_sending_without_reply (either spelling) says to send it anyway.
    const missing = await tg(token, 'sendMessage', { chat_id: 4545, text: 'four', reply_parameters: { message_id: 999 } });
    expect(missing.status).toBe(400);
    expect(missing.body.description).toMatch(/^Bad Request: .*not found/);
    const anyway = await tg(token, 'sendMessage', { chat_id: 4545, text: 'five', reply_parameters: { message_id: 999, allow_sending_without_reply: true } });
    expect(anyway.status).toBe(200);
    expect(anyway.body.result.reply_to_message).toBeUndefined();
    const older = await tg(token, 'sendMessage', { chat_id: 4545, text: 'six', reply_to_message_id: 999, allow_sending_without_reply: true });
    expect(older.status).toBe(200);
    expect(older.body.result.text).toBe('six');
    // Another chat's message is not served: a 400, or without the reply when allowed.
    const elsewhere = await tg(token, 'sendMessage', { chat_id: 4545, text: 'seven', reply_parameters: { message_id: mid, chat_id: 1234 } });
    expect(elsewhere.status).toBe(400);
    expect(elsewhere.body.description).toMatch(/^Bad Request: reply_parameters.chat_id/);
    const elsewhereAnyway = await tg(token, 'sendMessage', { chat_id: 4545, text: 'eight', reply_parameters: { message_id: mid, chat_id: 1234, allow_sending_without_reply: true } });
    expect(elsewhereAnyway.status).toBe(200);
    expect(elsewhereAnyway.body.result.reply_to_message).toBeUndefined();
    // Malformed reply_parameters are 400s naming them.
    for (const rp of ['{', '[1]', '{"chat_id":4545}', '{"message_id":"x"}', '{"message_id":1,"allow_sending_without_reply":"yes"}']) {
      const bad = await tg(token, 'sendMessage', { chat_id: 4545, text: 'bad', reply_parameters: rp });
      expect(bad.status).toBe(400);
      expect(bad.body.description).toMatch(/^Bad Request: reply_parameters/);
    }
    // Parameters Telegram takes that mean nothing here are accepted silently: JSON, form and multipart.
    const ignored: Record<string, unknown> = {
      disable_notification: true, protect_content: true, message_thread_id: 7, link_preview_options: { is_disabled: true },
      disable_web_page_preview: true, message_effect_id: '5104841245755180586', business_connection_id: 'bc1', allow_paid_broadcast: false,
    };
    const asText2 = (v: unknown) => (typeof v === 'object' ? JSON.stringify(v) : String(v));
    const plain = await tg(token, 'sendMessage', { chat_id: 4545, text: 'quiet', ...ignored });
    expect(plain.status).toBe(200);
    expect(plain.body.result.text).toBe('quiet');
    const asForm = await call(h.url, 'POST', `/bot${token}/sendMessage`, {
      rawBody: new URLSearchParams({ chat_id: '4545', text: 'quiet form', ...Object.fromEntries(Object.entries(ignored).map(([k, v]) => [k, asText2(v)])) }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(asForm.status).toBe(200);
    const fields = { chat_id: '4545', caption: 'quiet file', reply_parameters: JSON.stringify({ message_id: mid }), ...Object.fromEntries(Object.entries(ignored).map(([k, v]) => [k, asText2(v)])) };
    const multipart = await call(h.url, 'POST', `/bot${token}/sendDocument`, {
      rawBody: Object.entries(fields).map(([k, v]) => `--b\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`).join('')
        + '--b\r\ncontent-disposition: form-data; name="document"; filename="quiet.txt"\r\ncontent-type: text/plain\r\n\r\nshh\r\n--b--\r\n',
      headers: { 'content-type': 'multipart/form-data; boundary=b' },
    });
    expect(multipart.status).toBe(200);
    expect(multipart.body.result).toMatchObject({ caption: 'quiet file', document: { file_name: 'quiet.txt' }, reply_to_message: { message_id: mid } });
  });

  it('bad input is a 400 (413 for an oversize body) in Telegram\'s shape, never a 500', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'tg_bad');
    await testUpdate(id, 'hi', 55);
    const form = (body: string) => call(h.url, 'POST', `/bot${token}/sendMessage`, { rawBody: body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    const cases = [
      await call(h.url, 'POST', `/bot${token}/sendMessage`, { rawBody: '[1,2]', headers: { 'content-type': 'application/json' } }),
      await call(h.url, 'POST', `/bot${token}/sendMessage`, { rawBody: '{"chat_id":', headers: { 'content-type': 'application/json' } }),
      await form('chat_id=%40someone&text=hi'),
      await form('chat_id=55'),
      await call(h.url, 'POST', `/bot${token}/getUpdates`, { body: { offset: 'abc' } }),
      await call(h.url, 'POST', `/bot${token}/getUpdates`, { body: { offset: -1e12 } }),
      await call(h.url, 'POST', `/bot${token}/sendPhoto`, { rawBody: '--x\r\nbroken', headers: { 'content-type': 'multipart/form-data; boundary=x' } }),
      await call(h.url, 'POST', `/bot${token}/sendPhoto`, { body: { chat_id: 55, photo: { nested: true } } }),
      await call(h.url, 'POST', `/bot${token}/setMyCommands`, { rawBody: 'commands=not-json', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
    ];
    for (const r of cases) {
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ ok: false, error_code: 400, description: expect.stringMatching(/^Bad Request: /) });
    }
    const big = await call(h.url, 'POST', `/bot${token}/sendMessage`, { body: { chat_id: 55, text: 'x'.repeat(2 * 1024 * 1024) } });
    expect(big.status).toBe(413);
    expect(big.body.ok).toBe(false);
  });

  it('logOut and close answer true for a valid token', async () => {
    const { token } = await approvedBot(h, ownerJwt, 'tg_logout');
    expect((await tg(token, 'logOut')).body).toEqual({ ok: true, result: true });
    expect((await tg(token, 'close')).body).toEqual({ ok: true, result: true });
  });
});

describe('Telegram surface on a gateway of its own (over gRPC)', () => {
  it('getMe, getUpdates and a multipart sendDocument go through the gRPC invoker', async () => {
    const h = await startHarness('separate-gateway');
    try {
      const ownerJwt = await h.jwt('tg-sep-owner');
      const { id, token } = await approvedBot(h, ownerJwt, 'tg_sep');
      const me = await call(h.url, 'GET', `/bot${token}/getMe`);
      expect(me.body.result).toMatchObject({ id: expect.any(Number), is_bot: true, username: 'tg_sep' });
      await client(h.url, ownerJwt).post(`/api/v1/bots/my/${id}/test-updates`, { text: 'hi', chat_id: 31 });
      const updates = await call(h.url, 'POST', `/bot${token}/getUpdates`, { body: { offset: -1 } });
      expect(updates.body.result).toMatchObject([{ update_id: 1, message: { text: 'hi', chat: { id: 31 } } }]);
      const form = new FormData();
      form.set('chat_id', '31');
      form.set('document', new Blob([new Uint8Array(Buffer.from('hello file'))], { type: 'text/plain' }), 'hello.txt');
      const sent = await (await fetch(`${h.url}/bot${token}/sendDocument`, { method: 'POST', body: form })).json();
      expect(sent.result.document).toMatchObject({ file_name: 'hello.txt', mime_type: 'text/plain', file_size: 10 });
    } finally {
      await h.close();
    }
  });
});

describe('Telegram surface: multipart bodies past MAX_BODY_BYTES', () => {
  const MIB = 1024 * 1024;
  let h: Harness;
  let token: string;
  let staging: string;

  beforeAll(async () => {
    h = await startHarness('in-process', { MAX_BODY_BYTES: String(MIB), MAX_FILE_BYTES: String(100 * MIB) });
    const ownerJwt = await h.jwt('tg-big-owner');
    const bot = await approvedBot(h, ownerJwt, 'tg_big');
    token = bot.token;
    staging = path.join(h.env.DATA_DIR!, 'files', 'staging');
    await client(h.url, ownerJwt).post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'hi', chat_id: 88 });
  });
  afterAll(async () => {
    await h?.close();
  });

  /**
   * POSTs a multipart body: text fields, then one file part of `fileBytes` (sent in 1 MiB
   * blocks, honouring backpressure), with or without Content-Length. The answer may come
   * before the body is all sent (a refusal): writing then stops.
   */
  function postMultipart(method: string, fields: Record<string, string>, file: { field: string; name: string; bytes: number; data?: Buffer }, chunked = false, botToken = token) {
    const boundary = `----tgtest${crypto.randomBytes(8).toString('hex')}`;
    let head = '';
    for (const [k, v] of Object.entries(fields)) head += `--${boundary}\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
    head += `--${boundary}\r\ncontent-disposition: form-data; name="${file.field}"; filename="${file.name}"\r\ncontent-type: application/octet-stream\r\n\r\n`;
    const tail = `\r\n--${boundary}--\r\n`;
    const data = file.data ?? Buffer.alloc(0);
    const block = crypto.randomBytes(MIB);
    const hash = crypto.createHash('sha256');
    const headers: Record<string, string> = { 'content-type': `multipart/form-data; boundary=${boundary}` };
    if (!chunked) headers['content-length'] = String(Buffer.byteLength(head) + file.bytes + Buffer.byteLength(tail));
    return new Promise<{ status: number; body: any; sha256: string }>((resolve, reject) => { // eslint-disable-line @typescript-eslint/no-explicit-any
      const req = http.request(`${h.url}/bot${botToken}/${method}`, { method: 'POST', headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text), sha256: hash.digest('hex') }));
        res.on('error', reject);
      });
      let answered = false;
      req.on('response', () => (answered = true));
      req.on('error', (err) => {
        if (!answered) reject(err);
      });
      (async () => {
        const write = async (b: Buffer | string) => {
          if (answered || req.destroyed) return;
          if (req.write(b)) return;
          // Until it drains or closes; either way both listeners go (one pair per wait, not one more each).
          await new Promise<void>((resolve) => {
            const done = () => {
              req.off('drain', done).off('close', done);
              resolve();
            };
            req.once('drain', done).once('close', done);
          });
        };
        await write(head);
        if (file.data) {
          hash.update(data);
          await write(data);
        } else {
          for (let sent = 0; sent < file.bytes; sent += MIB) {
            const b = block.subarray(0, Math.min(MIB, file.bytes - sent));
            hash.update(b);
            await write(b);
          }
        }
        await write(tail);
        if (!answered && !req.destroyed) req.end();
      })().catch(reject);
    });
  }

  const stagedNow = () => fs.readdirSync(staging);

  it('a file part larger than MAX_BODY_BYTES (within MAX_FILE_BYTES) is streamed into the blob store and sent', async () => {
    for (const chunked of [false, true]) {
      const r = await postMultipart('sendDocument', { chat_id: '88', caption: 'big' }, { field: 'document', name: 'big.bin', bytes: 20 * MIB }, chunked);
      expect(r.status).toBe(200);
      expect(r.body.result).toMatchObject({ caption: 'big', document: { file_name: 'big.bin', file_size: 20 * MIB } });
      const file = await call(h.url, 'POST', `/bot${token}/getFile`, { body: { file_id: r.body.result.document.file_id } });
      const dl = await fetch(`${h.url}/file/bot${token}/${file.body.result.file_path}`);
      expect(crypto.createHash('sha256').update(Buffer.from(await dl.arrayBuffer())).digest('hex')).toBe(r.sha256);
    }
    // attach://, as aiogram sends a photo: the file part named by another field.
    const r = await postMultipart('sendPhoto', { chat_id: '88', photo: 'attach://f1' }, { field: 'f1', name: 'p.png', bytes: 2 * MIB });
    expect(r.body.result.photo[0]).toMatchObject({ file_size: 2 * MIB });
    await until(async () => stagedNow().length, (n) => n === 0, 2000);
    expect(stagedNow()).toEqual([]);
  }, 60_000);

  it('content another account already stored: the possession proof is answered from the staged part', async () => {
    const data = crypto.randomBytes(3 * MIB);
    const first = await postMultipart('sendDocument', { chat_id: '88' }, { field: 'document', name: 'same.bin', bytes: data.length, data });
    expect(first.status).toBe(200);
    const otherJwt = await h.jwt('tg-big-other-owner');
    const other = await approvedBot(h, otherJwt, 'tg_big_other');
    await client(h.url, otherJwt).post(`/api/v1/bots/my/${other.id}/test-updates`, { text: 'hi', chat_id: 89 });
    const second = await postMultipart('sendDocument', { chat_id: '89' }, { field: 'document', name: 'same.bin', bytes: data.length, data }, false, other.token);
    expect(second.status).toBe(200);
    expect(second.body.result.document).toMatchObject({ file_size: 3 * MIB });
    expect(second.body.result.document.file_id).not.toBe(first.body.result.document.file_id);
    const file = await call(h.url, 'POST', `/bot${other.token}/getFile`, { body: { file_id: second.body.result.document.file_id } });
    const dl = await fetch(`${h.url}/file/bot${other.token}/${file.body.result.file_path}`);
    expect(Buffer.from(await dl.arrayBuffer()).equals(data)).toBe(true);
  });

  it('memory stays flat while a large file part streams through', async () => {
    const before = process.memoryUsage();
    let peak = 0;
    const sample = setInterval(() => {
      const m = process.memoryUsage();
      peak = Math.max(peak, m.arrayBuffers - before.arrayBuffers);
    }, 5);
    try {
      const r = await postMultipart('sendDocument', { chat_id: '88' }, { field: 'document', name: 'huge.bin', bytes: 96 * MIB });
      expect(r.status).toBe(200);
    } finally {
      clearInterval(sample);
    }
    // The client here sends 1 MiB blocks; the service holds a few chunks at a time (and
    // what the collector has not yet freed), never the whole 96 MiB.
    expect(peak).toBeLessThan(48 * MIB);
  }, 60_000);

  it('past MAX_FILE_BYTES, or text past MAX_BODY_BYTES, is Telegram\'s 413 (declared or found while streaming), and nothing is kept', async () => {
    const declared = await postMultipart('sendDocument', { chat_id: '88' }, { field: 'document', name: 'x.bin', bytes: 101 * MIB });
    const streamed = await postMultipart('sendDocument', { chat_id: '88' }, { field: 'document', name: 'x.bin', bytes: 101 * MIB }, true);
    const text = await postMultipart('sendDocument', { chat_id: '88', caption: 'x'.repeat(MIB + 10) }, { field: 'document', name: 'x.bin', bytes: 10 });
    for (const r of [declared, streamed, text]) {
      expect(r.status).toBe(413);
      expect(r.body).toEqual({ ok: false, error_code: 413, description: expect.stringMatching(/^Request Entity Too Large: /) });
    }
    // Malformed multipart after a large file part: 400, nothing kept either.
    const broken = await call(h.url, 'POST', `/bot${token}/sendDocument`, {
      rawBody: `--b\r\ncontent-disposition: form-data; name="document"; filename="a"\r\n\r\n${'y'.repeat(3 * MIB)}`,
      headers: { 'content-type': 'multipart/form-data; boundary=b' },
    });
    expect(broken.status).toBe(400);
    expect(broken.body).toEqual({ ok: false, error_code: 400, description: expect.stringMatching(/^Bad Request: /) });
    await until(async () => stagedNow().length, (n) => n === 0, 2000);
    expect(stagedNow()).toEqual([]);
    // The service is fine afterwards.
    expect((await call(h.url, 'GET', `/bot${token}/getMe`)).status).toBe(200);
  }, 60_000);
});
