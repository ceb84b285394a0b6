/**
 * Reply markup read from Telegram's JSON as telegram-bot-api reads it (Client.cpp
 * get_reply_markup and its button readers: precedence, lenient scalars, error texts),
 * Telegram's limits, and the shape written back.
 */
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/errors.js';
import { checkReplyMarkup, replyMarkupFromTelegram, telegramReplyMarkup } from '../../src/messages/reply-markup.js';

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    if (err instanceof ApiError) return { field: err.details[0]?.field, reason: err.reason === 'INVALID_ARGUMENT' ? err.details[0]?.reason : err.reason, description: err.details[0]?.description };
    throw err;
  }
  throw new Error('not refused');
};

describe('reply markup from Telegram JSON', () => {
  it('an inline keyboard, as an object or as JSON text (forms and query strings), round-trips to Telegram\'s shape', () => {
    const tg = { inline_keyboard: [[{ text: 'Yes', callback_data: 'y' }, { text: 'Docs', url: 'https://example.com/docs' }], [{ text: 'Share', switch_inline_query: '' }]] };
    for (const input of [tg, JSON.stringify(tg)]) {
      const m = replyMarkupFromTelegram(input)!;
      expect(m.inlineKeyboard).toHaveLength(2);
      expect(m.inlineKeyboard[0]!.buttons[0]).toMatchObject({ text: 'Yes', callbackData: 'y', url: undefined });
      expect(telegramReplyMarkup(m)).toEqual(tg);
    }
  });

  it('a custom keyboard (strings or objects), with its flags; remove; force reply', () => {
    const kb = replyMarkupFromTelegram({ keyboard: [['A', { text: 'B', request_contact: true }]], resize_keyboard: true, one_time_keyboard: 'true', input_field_placeholder: 'pick' })!;
    expect(telegramReplyMarkup(kb)).toEqual({
      keyboard: [[{ text: 'A' }, { text: 'B', request_contact: true }]], resize_keyboard: true, one_time_keyboard: true, input_field_placeholder: 'pick',
    });
    expect(telegramReplyMarkup(replyMarkupFromTelegram({ remove_keyboard: true, selective: true })!)).toEqual({ remove_keyboard: true, selective: true });
    expect(telegramReplyMarkup(replyMarkupFromTelegram('{"force_reply":true,"input_field_placeholder":"Your name"}')!)).toEqual({ force_reply: true, input_field_placeholder: 'Your name' });
  });

  it('Client.cpp\'s precedence: a keyboard wins over an inline keyboard, which wins over remove and force reply; a button\'s url over its callback_data', () => {
    const m = replyMarkupFromTelegram({ keyboard: [['k']], inline_keyboard: [[{ text: 'i', callback_data: 'x' }]], remove_keyboard: true })!;
    expect(m.keyboard).toHaveLength(1);
    expect(m.inlineKeyboard).toEqual([]);
    expect(m.removeKeyboard).toBe(false);
    const b = replyMarkupFromTelegram({ inline_keyboard: [[{ text: 'both', url: 'https://a.example', callback_data: 'x' }]] })!;
    expect(b.inlineKeyboard[0]!.buttons[0]).toMatchObject({ url: 'https://a.example', callbackData: undefined });
  });

  it('absent, empty, or asking for nothing: no markup (Telegram ignores it); unknown fields ignored', () => {
    for (const v of [undefined, null, '', '{}', { inline_keyboard: [] }, { inline_keyboard: [[]] }, { remove_keyboard: false }]) expect(replyMarkupFromTelegram(v)).toBeUndefined();
    const m = replyMarkupFromTelegram({ inline_keyboard: [[{ text: 'x', callback_data: 'd', style: 'primary', icon_custom_emoji_id: '1' }]], future_field: 1 })!;
    expect(telegramReplyMarkup(m)).toEqual({ inline_keyboard: [[{ text: 'x', callback_data: 'd' }]] });
  });

  it.each([
    ['not JSON', '{"inline_keyboard":', 'reply_markup', "Can't parse reply keyboard markup JSON object"],
    ['not an object', '[1]', 'reply_markup', 'Object expected as reply markup'],
    ['rows not arrays', { inline_keyboard: [{ text: 'x' }] }, 'reply_markup.inline_keyboard[0]', 'Field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays'],
    ['keyboard not an array of arrays', { keyboard: 'x' }, 'reply_markup.keyboard', 'Field "keyboard" must be an Array of Arrays'],
    ['an inline button that is a string', { inline_keyboard: [['x']] }, 'reply_markup.inline_keyboard[0][0]', "Can't parse inline keyboard button: InlineKeyboardButton must be an Object"],
    ['an inline button without an action', { inline_keyboard: [[{ text: 'x' }]] }, 'reply_markup.inline_keyboard[0][0]', "Can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"],
    ['a button without text', { inline_keyboard: [[{ callback_data: 'x' }]] }, 'reply_markup.inline_keyboard[0][0]', 'Field "text" must be of type String'],
    ['a keyboard button that is a number', { keyboard: [[5]] }, 'reply_markup.keyboard[0][0]', "Can't parse keyboard button: KeyboardButton must be a String or an Object"],
  ])('refuses %s with telegram-bot-api\'s text', (_name, value, field, description) => {
    expect(refusal(() => replyMarkupFromTelegram(value))).toMatchObject({ field, description });
  });
});

describe('Telegram\'s limits on a markup, whichever surface it came from', () => {
  const inline = (button: object) => ({ inline_keyboard: [[{ text: 'b', ...button }]] });

  it('callback_data is 1 to 64 bytes (counted in UTF-8: 16 four-byte emoji fit, 17 do not)', () => {
    expect(replyMarkupFromTelegram(inline({ callback_data: 'x'.repeat(64) }))).toBeDefined();
    expect(replyMarkupFromTelegram(inline({ callback_data: '😀'.repeat(16) }))).toBeDefined();
    for (const data of ['x'.repeat(65), '😀'.repeat(17)]) {
      expect(refusal(() => replyMarkupFromTelegram(inline({ callback_data: data })))).toMatchObject({
        field: 'reply_markup.inline_keyboard[0].buttons[0].callback_data', reason: 'BUTTON_DATA_INVALID',
      });
    }
  });

  it('button URLs are http, https or tg; a web app\'s is https', () => {
    expect(replyMarkupFromTelegram(inline({ url: 'tg://user?id=1' }))).toBeDefined();
    expect(refusal(() => replyMarkupFromTelegram(inline({ url: 'javascript:alert(1)' })))).toMatchObject({ reason: 'BUTTON_URL_INVALID' });
    expect(refusal(() => replyMarkupFromTelegram(inline({ web_app: { url: 'http://plain.example' } })))).toMatchObject({ reason: 'BUTTON_URL_INVALID' });
  });

  it('at most 100 buttons; text non-empty; placeholder 1 to 64 characters', () => {
    const row = Array.from({ length: 10 }, (_, i) => ({ text: `b${i}`, callback_data: `${i}` }));
    expect(replyMarkupFromTelegram({ inline_keyboard: Array.from({ length: 10 }, () => row) })).toBeDefined();
    expect(refusal(() => replyMarkupFromTelegram({ inline_keyboard: Array.from({ length: 11 }, () => row) }))).toMatchObject({ reason: 'REPLY_MARKUP_TOO_LONG', description: 'reply markup is too long' });
    expect(refusal(() => replyMarkupFromTelegram(inline({ text: ' ', callback_data: 'x' })))).toMatchObject({ reason: 'BUTTON_TEXT_EMPTY' });
    expect(refusal(() => replyMarkupFromTelegram({ force_reply: true, input_field_placeholder: 'p'.repeat(65) }))).toMatchObject({ field: 'reply_markup.input_field_placeholder' });
  });

  it('a native markup must set exactly one kind, and an inline button exactly one action', () => {
    const base = { inlineKeyboard: [], keyboard: [], removeKeyboard: false, forceReply: false, isPersistent: false, resizeKeyboard: false, oneTimeKeyboard: false, inputFieldPlaceholder: undefined, selective: false };
    expect(refusal(() => checkReplyMarkup(base))).toMatchObject({ field: 'reply_markup', reason: 'INVALID_VALUE' });
    expect(refusal(() => checkReplyMarkup({ ...base, removeKeyboard: true, forceReply: true }))).toMatchObject({ reason: 'INVALID_VALUE' });
    const two = { text: 'x', url: 'https://a.example', callbackData: 'd', switchInlineQuery: undefined, switchInlineQueryCurrentChat: undefined, webApp: undefined, copyText: undefined };
    expect(refusal(() => checkReplyMarkup({ ...base, inlineKeyboard: [{ buttons: [two] }] }))).toMatchObject({ field: 'reply_markup.inline_keyboard[0].buttons[0]' });
  });
});
