/**
 * The other message methods of issue 33, natively over HTTP, over gRPC and on the
 * Telegram surface: copyMessage and forwardMessage (from any chat of the bot, sent or
 * received), sendMediaGroup (one media_group_id, consecutive ids), sendChatAction
 * (Telegram's actions, not stored), getChat (the names ingest kept), photos' width and
 * height read from the image, and reply_to_message in returned messages; each with
 * Telegram's refusals, and what the messaging services see on the outbound feed.
 */
import * as grpc from '@grpc/grpc-js';
import type { BusMessage } from '../src/bus/bus.js';
import { MESSAGES_TOPIC } from '../src/bus/topics.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { botChats, png } from './helpers/bot-chats.js';
import { openFeed, type FeedConsumer } from './helpers/feed-consumer.js';
import { approvedBot, startHarness, type Harness } from './helpers/harness.js';

describe('copies, forwards, albums, chat actions and chats', () => {
  let h: Harness;
  let ownerJwt: string;
  let b: ReturnType<typeof botChats>;
  let feed: FeedConsumer;
  const published: BusMessage[] = [];

  beforeAll(async () => {
    h = await startHarness('in-process', { LIMITS_ENABLED: 'false' });
    await h.apps[0]!.bus!.subscribeAll([MESSAGES_TOPIC], (m) => published.push(m));
    ownerJwt = await h.jwt('sends-owner');
    b = botChats(h, ownerJwt);
    feed = openFeed(h.grpcAddress, 'sends-test');
    await feed.waitFor(() => feed.assigned());
  });
  afterAll(async () => {
    feed?.kill();
    b?.close();
    await h?.close();
  });

  const eventsOf = (botId: string) => feed.messages.filter((m) => m.botId === botId);
  const inlineKeyboard = { inline_keyboard: [{ buttons: [{ text: 'Go', callback_data: 'go' }] }] };

  it('copyMessage copies a received or sent message (text with its entities, a photo with a new caption) into another chat, answering its id', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'copy_msgs');
    const incoming = await b.say(id, 6001, 100, { text: '/start now #tag' });
    await b.say(id, 6002, 101);
    const copy = await b.rt(token, 'copyMessage', { chat_id: 6002, from_chat_id: 6001, message_id: incoming });
    expect(copy.status).toBe(200);
    expect(copy.body.result).toEqual({ message_id: expect.any(Number) });

    const photoId = await b.registerFile(token, png(5, 7), 'p.png', 'image/png');
    const photo = (await b.rt(token, 'sendPhoto', { chat_id: 6001, file_id: photoId, caption: 'old', reply_markup: inlineKeyboard })).body.result;
    const recaptioned = await b.rt(token, 'copyMessage', {
      chat_id: 6002, from_chat_id: 6001, message_id: photo.message_id, caption: '<b>new</b>', parse_mode: 'HTML', reply_to_message_id: 101,
    });
    expect(recaptioned.status).toBe(200);

    await feed.waitFor(() => eventsOf(id).length === 3);
    const [textCopy, , photoCopy] = eventsOf(id).map((e) => e.message!);
    expect(textCopy).toMatchObject({ messageId: copy.body.result.message_id, chat: { id: 6002 }, text: '/start now #tag', from: { isBot: true } });
    expect(textCopy!.entities.map((e) => e.type)).toEqual(['bot_command', 'hashtag']);
    expect(textCopy!.forwardOrigin).toBeUndefined();
    expect(photoCopy).toMatchObject({
      messageId: recaptioned.body.result.message_id, chat: { id: 6002 }, caption: 'new', photo: { fileId: photoId, width: 5, height: 7 },
      replyToMessageId: 101, replyToMessage: { messageId: 101, text: 'hi' },
    });
    expect(photoCopy!.captionEntities).toMatchObject([{ type: 'bold', offset: 0, length: 3 }]);
    // Unset reply_markup: the original's inline keyboard comes along.
    expect(photoCopy!.replyMarkup!.inlineKeyboard[0]!.buttons[0]!.callbackData).toBe('go');

    expect((await b.rt(token, 'copyMessage', { chat_id: 6002, from_chat_id: 6001, message_id: 99_999 })).body.description).toBe('Bad Request: message to copy not found');
    expect((await b.rt(token, 'copyMessage', { chat_id: 6002, from_chat_id: 6099, message_id: incoming })).body.description).toBe('Bad Request: chat not found');
    expect((await b.rt(token, 'copyMessage', { chat_id: 6099, from_chat_id: 6001, message_id: incoming })).body.description).toBe('Bad Request: chat not found');
  });

  it('a received message recorded before messages were kept whole is not found for a copy or a forward', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'copy_old');
    await b.say(id, 6101, 110);
    // As rows written before d9fcf50: an inbound message's id, without its payload.
    await h.apps[0]!.db!.sql.run('INSERT INTO messages (bot_id, chat_id, message_id, outbound, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)', [id, 6101, 109, 0, null, Date.now()]);
    expect((await b.rt(token, 'copyMessage', { chat_id: 6101, from_chat_id: 6101, message_id: 109 })).body.description).toBe('Bad Request: message to copy not found');
    expect((await b.rt(token, 'forwardMessage', { chat_id: 6101, from_chat_id: 6101, message_id: 109 })).body.description).toBe('Bad Request: message to forward not found');
  });

  it('forwardMessage sends the message with where it came from; a forward is not the bot\'s to edit; on the Telegram surface forward_origin is Telegram\'s', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'fwd_msgs');
    const date = Math.floor(Date.now() / 1000) - 60;
    const incoming = await b.say(id, 6201, 120, { text: 'pass it on', date });
    await b.say(id, { id: -6202, type: 'group', title: 'Friends' }, 121);
    const fwd = await b.rt(token, 'forwardMessage', { chat_id: -6202, from_chat_id: 6201, message_id: incoming });
    expect(fwd.status).toBe(200);
    expect(fwd.body.result).toMatchObject({
      chat: { id: -6202, type: 'group' }, text: 'pass it on', from: { is_bot: true },
      forward_origin: { type: 'user', date, sender_user: { id: 6201, username: 'carol' } },
    });
    expect((await b.rt(token, 'editMessageText', { chat_id: -6202, message_id: fwd.body.result.message_id, text: 'mine now' })).body.description)
      .toBe("Bad Request: message can't be edited");
    // A forward of the forward names the first sender.
    const again = await b.tg(token, 'forwardMessage', { chat_id: 6201, from_chat_id: -6202, message_id: fwd.body.result.message_id });
    expect(again.body.result).toMatchObject({
      chat: { id: 6201, type: 'private', first_name: 'Carol', username: 'carol' }, text: 'pass it on',
      forward_origin: { type: 'user', date, sender_user: { id: 6201, is_bot: false, first_name: 'Carol', username: 'carol' } },
    });
    await feed.waitFor(() => eventsOf(id).length === 2);
    expect(eventsOf(id)[0]!.message!.forwardOrigin).toMatchObject({ type: 'user', date, senderUser: { id: 6201 } });
    expect((await b.rt(token, 'forwardMessage', { chat_id: 6201, from_chat_id: 6201, message_id: 99_999 })).body.description).toBe('Bad Request: message to forward not found');
  });

  it('sendMediaGroup sends 2 to 10 photos (or documents) as one album: consecutive ids, one media_group_id, each a message on the feed', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'album_msgs');
    await b.say(id, 6301, 130);
    const a = await b.registerFile(token, png(10, 20), 'a.png', 'image/png');
    const c = await b.registerFile(token, png(30, 40), 'c.png', 'image/png');
    const doc = await b.registerFile(token, Buffer.from('plain text'), 'd.txt', 'text/plain');
    const album = await b.rt(token, 'sendMediaGroup', {
      chat_id: 6301, reply_to_message_id: 130,
      media: [{ type: 'photo', media: a, caption: '*one*', parse_mode: 'MarkdownV2' }, { type: 'photo', media: c }],
    });
    expect(album.status).toBe(200);
    const [first, second] = album.body.result;
    expect(second.message_id).toBe(first.message_id + 1);
    expect(first.media_group_id).toMatch(/^\d+$/);
    expect(second.media_group_id).toBe(first.media_group_id);
    expect(first).toMatchObject({ caption: 'one', caption_entities: [{ type: 'bold' }], photo: { file_id: a, width: 10, height: 20 }, reply_to_message: { message_id: 130 } });
    expect(second).toMatchObject({ photo: { file_id: c, width: 30, height: 40 } });
    expect(second.caption).toBeUndefined();
    await feed.waitFor(() => eventsOf(id).length === 2);
    expect(eventsOf(id).map((e) => [e.message!.messageId, e.message!.mediaGroupId])).toEqual([[first.message_id, first.media_group_id], [second.message_id, first.media_group_id]]);

    const refusal = async (media: object[]) => (await b.rt(token, 'sendMediaGroup', { chat_id: 6301, media })).body.description;
    expect(await refusal([{ type: 'photo', media: a }, { type: 'document', media: doc }])).toBe("Bad Request: document can't be mixed with other media types");
    expect(await refusal([{ type: 'photo', media: a }])).toMatch(/^Bad Request: an album must have 2 to 10 media/);
    expect(await refusal([{ type: 'photo', media: doc }, { type: 'photo', media: a }])).toMatch(/^Bad Request: media\[0\]\.media: is not an image/);
    expect(await refusal([{ type: 'photo', media: a }, { type: 'photo', media: 'file_nope' }])).toMatch(/^Bad Request: media\[1\]\.media: is not a file of this bot/);
    expect(await refusal(Array.from({ length: 11 }, () => ({ type: 'photo', media: a })))).toMatch(/^Bad Request: media: too many messages to send as an album/);
    const docs = await b.rt(token, 'sendMediaGroup', { chat_id: 6301, media: [{ type: 'document', media: doc }, { type: 'document', media: doc, caption: 'two' }] });
    expect(docs.body.result.map((m: { document: { file_name: string } }) => m.document.file_name)).toEqual(['d.txt', 'd.txt']);
    // An album to a chat that has not written to the bot stores none of its messages.
    const nowhere = await b.rt(token, 'sendMediaGroup', { chat_id: 6399, media: [{ type: 'photo', media: a }, { type: 'photo', media: c }] });
    expect(nowhere.body).toEqual({ ok: false, error_code: 400, description: 'Bad Request: chat not found' });
    const after = (await b.rt(token, 'sendMessage', { chat_id: 6301, text: 'after' })).body.result;
    expect(after.message_id).toBe(docs.body.result[1].message_id + 1);
  });

  it('sendMediaGroup on the Telegram surface: attach://<name> parts of a multipart body beside file_ids, PhotoSize with the image\'s width and height', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'album_tg');
    await b.say(id, 6401, 140);
    const known = await b.registerFile(token, png(8, 6), 'k.png', 'image/png');
    const form = new FormData();
    form.set('chat_id', '6401');
    form.set('media', JSON.stringify([
      { type: 'photo', media: 'attach://first', caption: 'uploaded', has_spoiler: false },
      { type: 'photo', media: known },
    ]));
    form.set('first', new Blob([new Uint8Array(png(64, 48))], { type: 'image/png' }), 'first.png');
    const res = await fetch(`${h.url}/bot${token}/sendMediaGroup`, { method: 'POST', body: form });
    const body = await res.json();
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.result).toHaveLength(2);
    expect(body.result[0]).toMatchObject({ caption: 'uploaded', photo: [{ width: 64, height: 48 }], media_group_id: expect.any(String) });
    expect(body.result[1]).toMatchObject({ photo: [{ file_id: known, width: 8, height: 6 }], media_group_id: body.result[0].media_group_id });
    const bad = await b.tg(token, 'sendMediaGroup', { chat_id: 6401, media: 'not json' });
    expect(bad.body.description).toMatch(/^Bad Request: media: Can't parse media JSON object/);
  });

  it('sendChatAction: Telegram\'s actions (any case, the older names too) reach the feed, not the chat\'s messages; anything else is refused in Telegram\'s words', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'chat_action');
    await b.say(id, 6501, 150);
    expect((await b.rt(token, 'sendChatAction', { chat_id: 6501, action: 'typing' })).body).toEqual({ ok: true, result: true });
    expect((await b.tg(token, 'sendChatAction', { chat_id: 6501, action: 'UPLOAD_PHOTO' })).body).toEqual({ ok: true, result: true });
    expect(await b.grpc(token, 'sendChatAction', { chatId: 6501, action: 'record_audio' })).toEqual({ result: true });
    const wrong = await b.tg(token, 'sendChatAction', { chat_id: 6501, action: 'dancing' });
    expect(wrong.body).toEqual({ ok: false, error_code: 400, description: 'Bad Request: wrong parameter action in request' });
    expect((await b.rt(token, 'sendChatAction', { chat_id: 6599, action: 'typing' })).body.description).toBe('Bad Request: chat not found');
    await feed.waitFor(() => eventsOf(id).length === 3);
    expect(eventsOf(id).map((e) => e.chatAction)).toEqual([
      { chatId: 6501, action: 'typing' }, { chatId: 6501, action: 'upload_photo' }, { chatId: 6501, action: 'record_voice' },
    ]);
    await expect.poll(() => published.filter((p) => p.key === id).length, { timeout: 10_000 }).toBe(3);
    expect(JSON.parse(published.filter((p) => p.key === id)[0]!.value)).toEqual({ bot_id: id, chat_action: { chat_id: 6501, action: 'typing' } });
    // Not a message: the next message id is the next after the chat's last.
    const sent = (await b.rt(token, 'sendMessage', { chat_id: 6501, text: 'done' })).body.result;
    expect(sent.message_id).toBe(151);
  });

  it('getChat tells the chat\'s type and the names its latest message came with; a chat that never wrote is not found', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'get_chat');
    await b.say(id, { id: 6601, type: 'private', username: 'dora', firstName: 'Dora', lastName: 'Explorer' }, 160);
    await b.say(id, { id: -1006602, type: 'supergroup', title: 'Explorers', username: 'explorers' }, 161);
    expect((await b.rt(token, 'getChat', { chat_id: 6601 })).body.result).toEqual({
      id: 6601, type: 'private', username: 'dora', first_name: 'Dora', last_name: 'Explorer', accent_color_id: 0, max_reaction_count: 11,
    });
    expect((await b.tg(token, 'getChat', { chat_id: '-1006602' })).body.result).toEqual({
      id: -1006602, type: 'supergroup', title: 'Explorers', username: 'explorers', accent_color_id: 0, max_reaction_count: 11,
    });
    // A later message with new names: they are the chat's now.
    await b.say(id, { id: -1006602, type: 'supergroup', title: 'Explorers Club' }, 162);
    const renamed = await b.grpc<{ result: { title?: string; username?: string } }>(token, 'getChat', { chatId: -1006602 });
    expect(renamed.result).toMatchObject({ title: 'Explorers Club' });
    expect(renamed.result.username).toBeUndefined();
    expect((await b.tg(token, 'getChat', { chat_id: 6699 })).body).toEqual({ ok: false, error_code: 400, description: 'Bad Request: chat not found' });
    const err = await b.grpc(token, 'getChat', { chatId: 6699 }).catch((e: grpc.ServiceError) => e);
    expect((err as grpc.ServiceError).code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('a photo\'s width and height come from its header: in File, on the feed and in Telegram\'s PhotoSize; a file that is no readable image has none', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'photo_size');
    await b.say(id, 6701, 170);
    const photoId = await b.registerFile(token, png(123, 45), 'wide.png', 'image/png');
    const file = (await b.rt(token, 'getFile', { file_id: photoId })).body.result;
    expect(file).toMatchObject({ file_id: photoId, width: 123, height: 45 });
    const tg = await b.tg(token, 'sendPhoto', { chat_id: 6701, photo: photoId });
    expect(tg.body.result.photo).toEqual([{ file_id: photoId, file_unique_id: expect.any(String), file_size: expect.any(Number), width: 123, height: 45 }]);
    const notImage = await b.registerFile(token, Buffer.from('not really a png'), 'fake.png', 'image/png');
    const sent = (await b.rt(token, 'sendPhoto', { chat_id: 6701, file_id: notImage })).body.result;
    expect(sent.photo.width).toBeUndefined();
    expect((await b.tg(token, 'sendPhoto', { chat_id: 6701, photo: notImage })).body.result.photo[0]).toMatchObject({ width: 0, height: 0 });
    await feed.waitFor(() => eventsOf(id).length === 3);
    expect(eventsOf(id)[0]!.message!.photo).toMatchObject({ width: 123, height: 45 });
  });

  it('reply_to_message: a reply carries the message it answers as it is now, one level deep, and none once that message is deleted', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'reply_to');
    const question = await b.say(id, 6801, 180, { text: 'question?' });
    const answer = (await b.rt(token, 'sendMessage', { chat_id: 6801, text: 'answer', reply_to_message_id: question })).body.result;
    expect(answer.reply_to_message).toMatchObject({ message_id: question, text: 'question?', from: { id: 6801 } });
    const followUp = (await b.tg(token, 'sendMessage', { chat_id: 6801, text: 'more', reply_to_message_id: answer.message_id })).body.result;
    expect(followUp.reply_to_message).toMatchObject({ message_id: answer.message_id, text: 'answer' });
    expect(followUp.reply_to_message.reply_to_message).toBeUndefined();
    const edited = (await b.rt(token, 'editMessageText', { chat_id: 6801, message_id: answer.message_id, text: 'better answer' })).body.result;
    expect(edited.reply_to_message).toMatchObject({ message_id: question });
    await b.rt(token, 'deleteMessage', { chat_id: 6801, message_id: question });
    const afterDelete = (await b.rt(token, 'editMessageText', { chat_id: 6801, message_id: answer.message_id, text: 'best answer' })).body.result;
    expect(afterDelete.reply_to_message_id).toBe(question);
    expect(afterDelete.reply_to_message).toBeUndefined();

    // A user's reply to the bot's message (a force_reply prompt, say) arrives carrying it.
    const prompt = (await b.rt(token, 'sendMessage', { chat_id: 6801, text: 'Your name?', reply_markup: { force_reply: true } })).body.result;
    await b.say(id, 6801, prompt.message_id + 1, { text: 'Carol', replyToMessageId: prompt.message_id });
    const updates = (await b.rt(token, 'getUpdates', { offset: 2 })).body.result;
    const reply = updates.find((u: { message?: { text: string } }) => u.message?.text === 'Carol').message;
    expect(reply).toMatchObject({ reply_to_message_id: prompt.message_id, reply_to_message: { message_id: prompt.message_id, text: 'Your name?', from: { is_bot: true } } });
    const onTelegram = (await b.tg(token, 'getUpdates', { offset: 2 })).body.result.find((u: { message?: { text: string } }) => u.message?.text === 'Carol').message;
    expect(onTelegram.reply_to_message).toMatchObject({ message_id: prompt.message_id, text: 'Your name?' });
  });

  it('over gRPC and on the Telegram surface: copyMessage, forwardMessage and sendMediaGroup with their generated types and Telegram\'s shapes', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'sends_grpc');
    await b.say(id, 6901, 190, { text: 'copy me' });
    const photoId = await b.registerFile(token, png(2, 3), 'g.png', 'image/png');
    const copied = await b.grpc<{ result: { messageId: number } }>(token, 'copyMessage', { chatId: 6901, fromChatId: 6901, messageId: 190, captionEntities: [] });
    expect(copied.result.messageId).toBeGreaterThan(190);
    const forwarded = await b.grpc<{ result: { forwardOrigin: { type: string; senderUser: { id: number } } } }>(token, 'forwardMessage', { chatId: 6901, fromChatId: 6901, messageId: 190 });
    expect(forwarded.result.forwardOrigin).toMatchObject({ type: 'user', senderUser: { id: 6901 } });
    const album = await b.grpc<{ result: { messageId: number; mediaGroupId: string; photo: { width: number } }[] }>(token, 'sendMediaGroup', {
      chatId: 6901, media: [{ type: 'photo', media: photoId, captionEntities: [] }, { type: 'photo', media: photoId, captionEntities: [] }],
    });
    expect(album.result.map((m) => m.photo.width)).toEqual([2, 2]);
    expect(album.result[1]!.mediaGroupId).toBe(album.result[0]!.mediaGroupId);
    const missing = await b.grpc(token, 'forwardMessage', { chatId: 6901, fromChatId: 6901, messageId: 99_999 }).catch((e: grpc.ServiceError) => e);
    expect((missing as grpc.ServiceError).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((missing as grpc.ServiceError).details).toBe('message to forward not found');

    const tgCopy = await b.tg(token, 'copyMessage', {
      chat_id: 6901, from_chat_id: 6901, message_id: 190, reply_parameters: { message_id: 190 }, reply_markup: { inline_keyboard: [[{ text: 'A', url: 'https://example.com' }]] },
    });
    expect(tgCopy.body).toEqual({ ok: true, result: { message_id: expect.any(Number) } });
    await feed.waitFor(() => eventsOf(id).length === 5);
    expect(eventsOf(id)[4]!.message).toMatchObject({ messageId: tgCopy.body.result.message_id, text: 'copy me', replyToMessageId: 190 });
    expect(eventsOf(id)[4]!.message!.replyMarkup!.inlineKeyboard[0]!.buttons[0]!.url).toBe('https://example.com');
  });
});
