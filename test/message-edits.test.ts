/**
 * Edits and deletes of a bot's messages (issue 33), natively over HTTP, over gRPC and on
 * the Telegram surface: Telegram's rules (only the bot's own messages, of the right kind;
 * in a private chat also the ones it received; 48 hours) and its exact refusals; the
 * stored message updated (later replies, copies and edits see it, or see it gone); and
 * what the messaging services get on the outbound feed (InternalService.StreamSentMessages):
 * edited_message and deleted_messages, after the message event of the send.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BusMessage } from '../src/bus/bus.js';
import { MESSAGES_TOPIC } from '../src/bus/topics.js';
import { fromServiceError } from '../src/grpc/status-details.js';
import { botChats, png } from './helpers/bot-chats.js';
import { openFeed, type FeedConsumer } from './helpers/feed-consumer.js';
import { approvedBot, startHarness, type Harness } from './helpers/harness.js';

const NOT_MODIFIED = 'Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message';
const keyboard = (data: string) => ({ inline_keyboard: [{ buttons: [{ text: 'Tap', callback_data: data }] }] });

describe('message edits and deletes', () => {
  let h: Harness;
  let ownerJwt: string;
  let b: ReturnType<typeof botChats>;
  let feed: FeedConsumer;
  const published: BusMessage[] = [];

  beforeAll(async () => {
    h = await startHarness('in-process', { LIMITS_ENABLED: 'false' });
    await h.apps[0]!.bus!.subscribeAll([MESSAGES_TOPIC], (m) => published.push(m));
    ownerJwt = await h.jwt('edits-owner');
    b = botChats(h, ownerJwt);
    feed = openFeed(h.grpcAddress, 'edits-test');
    await feed.waitFor(() => feed.assigned());
  });
  afterAll(async () => {
    feed?.kill();
    b?.close();
    await h?.close();
  });

  /** The feed's events of one bot, in order. */
  const eventsOf = (botId: string) => feed.messages.filter((m) => m.botId === botId);

  it('editMessageText replaces the text (parsed), its entities and keyboard, stamps edit_date, and the feed gets edited_message', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'edit_text');
    await b.say(id, 5001, 10);
    const sent = (await b.rt(token, 'sendMessage', { chat_id: 5001, text: 'first', reply_markup: keyboard('a') })).body.result;
    expect(sent.reply_markup).toMatchObject(keyboard('a'));

    const edited = await b.rt(token, 'editMessageText', {
      chat_id: 5001, message_id: sent.message_id, text: '<b>bold</b> move', parse_mode: 'HTML', reply_markup: keyboard('b'),
    });
    expect(edited.status).toBe(200);
    expect(edited.body.result).toMatchObject({
      message_id: sent.message_id, text: 'bold move', entities: [{ type: 'bold', offset: 0, length: 4 }], reply_markup: keyboard('b'),
    });
    expect(Math.abs(edited.body.result.edit_date - Date.now() / 1000)).toBeLessThan(60);

    // Unset reply_markup removes the keyboard, as Telegram does.
    const plain = (await b.rt(token, 'editMessageText', { chat_id: 5001, message_id: sent.message_id, text: 'bold move' })).body.result;
    expect(plain.reply_markup).toBeUndefined();
    expect(plain.entities).toBeUndefined();

    // The same content and keyboard again: Telegram's words.
    const same = await b.rt(token, 'editMessageText', { chat_id: 5001, message_id: sent.message_id, text: 'bold move' });
    expect(same.status).toBe(400);
    expect(same.body).toEqual({ ok: false, error_code: 400, description: NOT_MODIFIED });

    await feed.waitFor(() => eventsOf(id).length === 3);
    const [first, second, third] = eventsOf(id);
    expect(first!.message).toMatchObject({ messageId: sent.message_id, text: 'first' });
    expect(second!.editedMessage).toMatchObject({ messageId: sent.message_id, text: 'bold move', editDate: edited.body.result.edit_date });
    expect(second!.editedMessage!.replyMarkup!.inlineKeyboard[0]!.buttons[0]!.callbackData).toBe('b');
    expect(third!.editedMessage!.replyMarkup).toBeUndefined();
    expect(second!.partition).toBe(first!.partition);
    expect(second!.seq).toBeGreaterThan(first!.seq);
    // The bus (botplatform.messages) carries the same events, keyed by the bot.
    await expect.poll(() => published.filter((p) => p.key === id).length, { timeout: 10_000 }).toBe(3);
    const onBus = published.filter((p) => p.key === id).map((p) => JSON.parse(p.value));
    expect(onBus[1]).toMatchObject({
      bot_id: id, edited_message: { message_id: sent.message_id, text: 'bold move', edit_date: edited.body.result.edit_date, reply_markup: keyboard('b') },
    });
    expect(onBus[2].edited_message.reply_markup).toBeUndefined();
  });

  it('only the bot\'s own messages, of the right kind, that exist: each refusal in Telegram\'s words', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'edit_rules');
    const received = await b.say(id, 5101, 20);
    const photoId = await b.registerFile(token, png(3, 2), 'p.png', 'image/png');
    const photo = (await b.rt(token, 'sendPhoto', { chat_id: 5101, file_id: photoId, caption: 'pic' })).body.result;
    const text = (await b.rt(token, 'sendMessage', { chat_id: 5101, text: 'words' })).body.result;
    const custom = (await b.rt(token, 'sendMessage', { chat_id: 5101, text: 'pick', reply_markup: { keyboard: [{ buttons: [{ text: 'A' }] }] } })).body.result;
    const refusal = async (method: string, body: object) => {
      const r = await b.rt(token, method, { chat_id: 5101, ...body });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      return r.body.description;
    };
    expect(await refusal('editMessageText', { message_id: received, text: 'x' })).toBe("Bad Request: message can't be edited");
    expect(await refusal('editMessageText', { message_id: custom.message_id, text: 'x' })).toBe("Bad Request: message can't be edited");
    expect(await refusal('editMessageText', { message_id: 99_999, text: 'x' })).toBe('Bad Request: message to edit not found');
    expect(await refusal('editMessageText', { message_id: photo.message_id, text: 'x' })).toBe('Bad Request: there is no text in the message to edit');
    expect(await refusal('editMessageCaption', { message_id: text.message_id, caption: 'x' })).toBe('Bad Request: there is no caption in the message to edit');
    expect(await refusal('editMessageReplyMarkup', { message_id: text.message_id, reply_markup: { remove_keyboard: true } })).toBe('Bad Request: inline keyboard expected');
    expect(await refusal('editMessageText', { message_id: text.message_id, text: '<b>x', parse_mode: 'HTML' }))
      .toBe('Bad Request: text: can\'t parse entities: Can\'t find end tag corresponding to start tag "b"');
    const unknownChat = await b.rt(token, 'editMessageText', { chat_id: 5199, message_id: text.message_id, text: 'x' });
    expect(unknownChat.body.description).toBe('Bad Request: chat not found');
    // Another bot's chat and message: not found for this one.
    const other = await approvedBot(h, ownerJwt, 'edit_rules_other');
    expect((await b.rt(other.token, 'editMessageText', { chat_id: 5101, message_id: text.message_id, text: 'x' })).body.description).toBe('Bad Request: chat not found');
  });

  it('editMessageCaption replaces or removes a photo\'s caption; editMessageReplyMarkup sets and removes the keyboard', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'edit_caption');
    await b.say(id, 5201, 30);
    const photoId = await b.registerFile(token, png(4, 4), 'p.png', 'image/png');
    const photo = (await b.rt(token, 'sendPhoto', { chat_id: 5201, file_id: photoId, caption: 'old' })).body.result;
    const captioned = await b.rt(token, 'editMessageCaption', { chat_id: 5201, message_id: photo.message_id, caption: '*new*', parse_mode: 'MarkdownV2' });
    expect(captioned.status).toBe(200);
    expect(captioned.body.result).toMatchObject({ caption: 'new', caption_entities: [{ type: 'bold', offset: 0, length: 3 }], photo: { file_id: photoId } });
    const removed = (await b.rt(token, 'editMessageCaption', { chat_id: 5201, message_id: photo.message_id })).body.result;
    expect(removed.caption).toBeUndefined();

    const text = (await b.rt(token, 'sendMessage', { chat_id: 5201, text: 'menu' })).body.result;
    const withKeyboard = await b.rt(token, 'editMessageReplyMarkup', { chat_id: 5201, message_id: text.message_id, reply_markup: keyboard('go') });
    expect(withKeyboard.body.result).toMatchObject({ text: 'menu', reply_markup: keyboard('go') });
    const without = await b.rt(token, 'editMessageReplyMarkup', { chat_id: 5201, message_id: text.message_id });
    expect(without.status).toBe(200);
    expect(without.body.result.reply_markup).toBeUndefined();
    expect((await b.rt(token, 'editMessageReplyMarkup', { chat_id: 5201, message_id: text.message_id })).body.description).toBe(NOT_MODIFIED);
  });

  it('deleteMessage: the bot\'s own messages and, in a private chat, ones it received; gone for later edits, replies and copies; deleted_messages on the feed', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'delete_msgs');
    const received = await b.say(id, 5301, 40);
    const mine = (await b.rt(token, 'sendMessage', { chat_id: 5301, text: 'bye' })).body.result;
    expect((await b.rt(token, 'deleteMessage', { chat_id: 5301, message_id: mine.message_id })).body).toEqual({ ok: true, result: true });
    expect((await b.rt(token, 'deleteMessage', { chat_id: 5301, message_id: received })).body).toEqual({ ok: true, result: true });

    const again = await b.rt(token, 'deleteMessage', { chat_id: 5301, message_id: mine.message_id });
    expect(again.body).toEqual({ ok: false, error_code: 400, description: 'Bad Request: message to delete not found' });
    expect((await b.rt(token, 'editMessageText', { chat_id: 5301, message_id: mine.message_id, text: 'x' })).body.description).toBe('Bad Request: message to edit not found');
    expect((await b.rt(token, 'sendMessage', { chat_id: 5301, text: 'x', reply_to_message_id: received })).body.description).toBe('Bad Request: message to be replied not found');
    expect((await b.rt(token, 'copyMessage', { chat_id: 5301, from_chat_id: 5301, message_id: received })).body.description).toBe('Bad Request: message to copy not found');
    expect((await b.rt(token, 'deleteMessage', { chat_id: 5399, message_id: 1 })).body.description).toBe('Bad Request: chat not found');

    await expect.poll(() => published.filter((p) => p.key === id).length, { timeout: 10_000 }).toBe(3);
    expect(JSON.parse(published.filter((p) => p.key === id)[1]!.value)).toEqual({ bot_id: id, deleted_messages: { chat_id: 5301, message_ids: [mine.message_id] } });
    await feed.waitFor(() => eventsOf(id).length === 3);
    expect(eventsOf(id).slice(1).map((e) => e.deletedMessages)).toEqual([
      { chatId: 5301, messageIds: [mine.message_id] },
      { chatId: 5301, messageIds: [received] },
    ]);
  });

  it('deleteMessage within Telegram\'s limits: 48 hours, and in groups only the bot\'s own', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'delete_rules');
    const threeDaysAgo = Math.floor(Date.now() / 1000) - 3 * 86_400;
    const old = await b.say(id, 5401, 50, { date: threeDaysAgo });
    expect((await b.rt(token, 'deleteMessage', { chat_id: 5401, message_id: old })).body.description).toBe("Bad Request: message can't be deleted for everyone");
    const group = { id: -5402, type: 'group', title: 'Team' };
    const inGroup = await b.say(id, group, 51);
    expect((await b.rt(token, 'deleteMessage', { chat_id: -5402, message_id: inGroup })).body.description).toBe("Bad Request: message can't be deleted for everyone");
    const supergroup = { id: -1005403, type: 'supergroup', title: 'Many' };
    const inSuper = await b.say(id, supergroup, 52);
    expect((await b.rt(token, 'deleteMessage', { chat_id: -1005403, message_id: inSuper })).body.description).toBe("Bad Request: message can't be deleted");
    const own = (await b.rt(token, 'sendMessage', { chat_id: -1005403, text: 'mine' })).body.result;
    expect((await b.rt(token, 'deleteMessage', { chat_id: -1005403, message_id: own.message_id })).body.result).toBe(true);
  });

  it('deleteMessages deletes those found (skipping the rest) in one event; one that may not be deleted refuses them all', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'delete_many');
    await b.say(id, { id: -5501, type: 'group', title: 'G' }, 60);
    const sent = [];
    for (const text of ['a', 'b', 'c']) sent.push((await b.rt(token, 'sendMessage', { chat_id: -5501, text })).body.result.message_id as number);
    const refusedAll = await b.rt(token, 'deleteMessages', { chat_id: -5501, message_ids: [sent[0], 60] });
    expect(refusedAll.body.description).toBe("Bad Request: message can't be deleted for everyone");
    const ok = await b.rt(token, 'deleteMessages', { chat_id: -5501, message_ids: [sent[2], 123_456, sent[0]] });
    expect(ok.body).toEqual({ ok: true, result: true });
    expect((await b.rt(token, 'deleteMessages', { chat_id: -5501, message_ids: [] })).body.description).toBe('Bad Request: message identifiers are not specified');
    const tooMany = await b.rt(token, 'deleteMessages', { chat_id: -5501, message_ids: Array.from({ length: 101 }, (_, i) => i + 1) });
    expect(tooMany.status).toBe(400);
    await feed.waitFor(() => eventsOf(id).some((e) => e.deletedMessages));
    expect(eventsOf(id).filter((e) => e.deletedMessages).map((e) => e.deletedMessages)).toEqual([{ chatId: -5501, messageIds: [sent[0], sent[2]] }]);
    // The one left can still be edited.
    expect((await b.rt(token, 'editMessageText', { chat_id: -5501, message_id: sent[1], text: 'still here' })).status).toBe(200);
  });

  it('over gRPC: the same methods (and a caption edited on the Telegram surface), refusals as INVALID_ARGUMENT naming the field', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'edit_grpc');
    await b.say(id, 5601, 70);
    const sent = (await b.rt(token, 'sendMessage', { chat_id: 5601, text: 'one' })).body.result;
    const edited = await b.grpc<{ result: { text: string; editDate: number } }>(token, 'editMessageText', { chatId: 5601, messageId: sent.message_id, text: 'two', entities: [] });
    expect(edited.result.text).toBe('two');
    expect(edited.result.editDate).toBeGreaterThan(0);
    const err = await b.grpc(token, 'editMessageText', { chatId: 5601, messageId: sent.message_id, text: 'two', entities: [] }).catch((e: grpc.ServiceError) => e);
    expect((err as grpc.ServiceError).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((err as grpc.ServiceError).details).toMatch(/^message is not modified/);
    expect(fromServiceError(err as grpc.ServiceError).details.map((d) => d.field)).toEqual(['message_id']);
    const markup = await b.grpc<{ result: { replyMarkup?: unknown } }>(token, 'editMessageReplyMarkup', {
      chatId: 5601, messageId: sent.message_id, replyMarkup: { inlineKeyboard: [{ buttons: [{ text: 'x', callbackData: 'y' }] }], keyboard: [] },
    });
    expect(markup.result.replyMarkup).toBeDefined();
    const photoId = await b.registerFile(token, png(6, 6), 'g.png', 'image/png');
    const photo = (await b.rt(token, 'sendPhoto', { chat_id: 5601, file_id: photoId, caption: 'before' })).body.result;
    const captioned = await b.grpc<{ result: { caption: string; captionEntities: { type: string }[] } }>(token, 'editMessageCaption', {
      chatId: 5601, messageId: photo.message_id, caption: '<u>after</u>', parseMode: 'HTML', captionEntities: [],
    });
    expect(captioned.result.caption).toBe('after');
    expect(captioned.result.captionEntities.map((e) => e.type)).toEqual(['underline']);
    const onTelegram = await b.tg(token, 'editMessageCaption', { chat_id: 5601, message_id: photo.message_id, caption: 'again' });
    expect(onTelegram.body.result).toMatchObject({ caption: 'again', photo: [{ file_id: photoId, width: 6, height: 6 }], edit_date: expect.any(Number) });
    expect(await b.grpc(token, 'deleteMessages', { chatId: 5601, messageIds: [sent.message_id] })).toEqual({ result: true });
    const gone = await b.grpc(token, 'deleteMessage', { chatId: 5601, messageId: sent.message_id }).catch((e: grpc.ServiceError) => e);
    expect((gone as grpc.ServiceError).details).toBe('message to delete not found');
  });

  it('on the Telegram surface: form and JSON parameters, a JSON-text keyboard, Telegram\'s Message and errors', async () => {
    const { id, token } = await approvedBot(h, ownerJwt, 'edit_tg');
    await b.say(id, 5701, 80);
    const sent = (await b.tg(token, 'sendMessage', { chat_id: 5701, text: 'tap', reply_markup: { inline_keyboard: [[{ text: 'A', callback_data: 'a' }]] } })).body.result;
    const edited = await b.tg(token, 'editMessageText', {
      chat_id: '5701', message_id: String(sent.message_id), text: '<i>tapped</i>', parse_mode: 'HTML',
      reply_markup: JSON.stringify({ inline_keyboard: [[{ text: 'B', callback_data: 'b' }]] }),
    });
    expect(edited.body).toMatchObject({
      ok: true,
      result: {
        message_id: sent.message_id, chat: { id: 5701, type: 'private' }, text: 'tapped', entities: [{ type: 'italic', offset: 0, length: 6 }],
        reply_markup: { inline_keyboard: [[{ text: 'B', callback_data: 'b' }]] }, edit_date: expect.any(Number),
      },
    });
    expect((await b.tg(token, 'editMessageReplyMarkup', { chat_id: 5701, message_id: sent.message_id })).body.result.reply_markup).toBeUndefined();
    const same = await b.tg(token, 'editMessageReplyMarkup', { chat_id: 5701, message_id: sent.message_id });
    expect(same.body).toEqual({ ok: false, error_code: 400, description: NOT_MODIFIED });
    const caption = await b.tg(token, 'editMessageCaption', { chat_id: 5701, message_id: sent.message_id, caption: 'x' });
    expect(caption.body.description).toBe('Bad Request: there is no caption in the message to edit');
    expect((await b.tg(token, 'deleteMessages', { chat_id: 5701, message_ids: JSON.stringify([sent.message_id]) })).body).toEqual({ ok: true, result: true });
    expect((await b.tg(token, 'deleteMessage', { chat_id: 5701, message_id: sent.message_id })).body.description).toBe('Bad Request: message to delete not found');
    // No inline messages here: an edit by inline_message_id is refused by that name, not as a missing chat_id.
    for (const method of ['editMessageText', 'editMessageCaption', 'editMessageReplyMarkup']) {
      const inline = await b.tg(token, method, { inline_message_id: 'AAEAAAE', text: 'x', caption: 'x' });
      expect(inline.body).toEqual({ ok: false, error_code: 400, description: 'Bad Request: inline_message_id: there are no inline messages here: edit a message by chat_id and message_id' });
    }
  });
});
