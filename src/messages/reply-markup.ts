/**
 * Reply markup (inline keyboards, custom keyboards, their removal, force reply): read
 * from Telegram's JSON as telegram-bot-api reads it (Client.cpp `get_reply_markup`,
 * `get_inline_keyboard_button`, `get_keyboard_button`: the same precedence, the same
 * error texts), checked with Telegram's limits, and written back in Telegram's shape
 * (rows as arrays of arrays). One model, the generated ReplyMarkup, for every surface:
 * the native API decodes it by the descriptors and calls `checkReplyMarkup`; the
 * Telegram surface reads Telegram's JSON with `replyMarkupFromTelegram` (which checks too).
 */
import { ApiError } from '../errors.js';
import type { InlineKeyboardButton, KeyboardButton, ReplyMarkup } from '../gen/botplatform/v1/update.js';

/** Telegram's limits (Bot API: callback_data 1-64 bytes; placeholder 1-64 characters; copy_text 1-256). */
export const MARKUP_LIMITS = {
  callbackDataBytes: 64,
  placeholderChars: 64,
  copyTextChars: 256,
  /** Buttons in one markup, all rows together (past it Telegram answers REPLY_MARKUP_TOO_LONG). */
  buttons: 100,
  buttonTextChars: 64,
} as const;

const invalid = (field: string, reason: string, description: string) => ApiError.invalid(field, reason, description);

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A required string field of a Telegram JSON object (td::JsonObject::get_required_string_field). */
function requiredString(o: Json, name: string, field: string): string {
  const v = o[name];
  if (v === undefined || v === null) throw invalid(field, 'REQUIRED', `Field "${name}" must be of type String`);
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw invalid(field, 'INVALID_TYPE', `Field "${name}" must be of type String`);
}

/** An optional string field ("" when absent), as td's get_optional_string_field reads it. */
function optionalString(o: Json, name: string, field: string): string {
  const v = o[name];
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  throw invalid(field, 'INVALID_TYPE', `Field "${name}" must be of type String`);
}

/** An optional boolean field: true, false, or td's lenient spellings ("true", 1). */
function optionalBool(o: Json, name: string, field: string): boolean {
  const v = o[name];
  if (v === undefined || v === null) return false;
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === 1 || v === '1') return true;
  if (v === 'false' || v === 0 || v === '0') return false;
  throw invalid(field, 'INVALID_TYPE', `Field "${name}" must be of type Boolean`);
}

function inlineButtonFromTelegram(v: unknown, field: string): InlineKeyboardButton {
  if (!isObject(v)) throw invalid(field, 'INVALID_TYPE', "Can't parse inline keyboard button: InlineKeyboardButton must be an Object");
  const text = requiredString(v, 'text', field);
  const button: InlineKeyboardButton = {
    text, url: undefined, callbackData: undefined, switchInlineQuery: undefined, switchInlineQueryCurrentChat: undefined, webApp: undefined, copyText: undefined,
  };
  // The first kind present wins, in Client.cpp's order.
  const url = optionalString(v, 'url', field);
  if (url) return { ...button, url };
  const data = optionalString(v, 'callback_data', field);
  if (data) return { ...button, callbackData: data };
  if ('switch_inline_query' in v) return { ...button, switchInlineQuery: requiredString(v, 'switch_inline_query', field) };
  if ('switch_inline_query_current_chat' in v) {
    return { ...button, switchInlineQueryCurrentChat: requiredString(v, 'switch_inline_query_current_chat', field) };
  }
  if ('web_app' in v) {
    if (!isObject(v.web_app)) throw invalid(`${field}.web_app`, 'INVALID_TYPE', 'Field "web_app" must be of type Object');
    return { ...button, webApp: { url: requiredString(v.web_app, 'url', `${field}.web_app`) } };
  }
  if ('copy_text' in v) {
    if (!isObject(v.copy_text)) throw invalid(`${field}.copy_text`, 'INVALID_TYPE', 'Field "copy_text" must be of type Object');
    return { ...button, copyText: { text: requiredString(v.copy_text, 'text', `${field}.copy_text`) } };
  }
  throw invalid(field, 'INVALID_VALUE', "Can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard");
}

function keyboardButtonFromTelegram(v: unknown, field: string): KeyboardButton {
  if (typeof v === 'string') return { text: v, requestContact: false, requestLocation: false, webApp: undefined };
  if (!isObject(v)) throw invalid(field, 'INVALID_TYPE', "Can't parse keyboard button: KeyboardButton must be a String or an Object");
  const webApp = isObject(v.web_app) ? { url: requiredString(v.web_app, 'url', `${field}.web_app`) } : undefined;
  return {
    text: requiredString(v, 'text', field),
    requestContact: optionalBool(v, 'request_contact', field),
    requestLocation: optionalBool(v, 'request_location', field),
    webApp,
  };
}

/**
 * Telegram's reply_markup parameter (a JSON object, or its JSON text as forms and query
 * strings carry it) as the platform's ReplyMarkup, checked; undefined when absent, or when
 * it asks for nothing (as Telegram ignores an empty markup). Unknown fields are ignored,
 * as Telegram does (a newer client's button style, say).
 */
export function replyMarkupFromTelegram(value: unknown, field = 'reply_markup'): ReplyMarkup | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  let v = value;
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      throw invalid(field, 'MALFORMED_JSON', "Can't parse reply keyboard markup JSON object");
    }
  }
  if (!isObject(v)) throw invalid(field, 'INVALID_TYPE', 'Object expected as reply markup');
  const rows = (name: 'keyboard' | 'inline_keyboard', message: string) => {
    const list = v[name];
    if (list === undefined || list === null) return [];
    if (!Array.isArray(list)) throw invalid(`${field}.${name}`, 'INVALID_TYPE', message);
    return list.map((row, i) => {
      if (!Array.isArray(row)) throw invalid(`${field}.${name}[${i}]`, 'INVALID_TYPE', message);
      return row;
    });
  };
  const keyboard = rows('keyboard', 'Field "keyboard" must be an Array of Arrays')
    .map((row, i) => ({ buttons: row.map((b, j) => keyboardButtonFromTelegram(b, `${field}.keyboard[${i}][${j}]`)) }));
  const inline = rows('inline_keyboard', 'Field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays')
    .map((row, i) => ({ buttons: row.map((b, j) => inlineButtonFromTelegram(b, `${field}.inline_keyboard[${i}][${j}]`)) }));
  const selective = optionalBool(v, 'selective', field) || optionalBool(v, 'personal_keyboard', field);
  const placeholder = optionalString(v, 'input_field_placeholder', field) || undefined;
  const none: ReplyMarkup = {
    inlineKeyboard: [], keyboard: [], removeKeyboard: false, forceReply: false, isPersistent: false, resizeKeyboard: false,
    oneTimeKeyboard: false, inputFieldPlaceholder: undefined, selective: false,
  };
  // Client.cpp's precedence: a keyboard, else an inline keyboard, else remove, else force reply.
  let markup: ReplyMarkup | undefined;
  if (keyboard.some((r) => r.buttons.length > 0)) {
    markup = {
      ...none, keyboard, selective, inputFieldPlaceholder: placeholder,
      isPersistent: optionalBool(v, 'is_persistent', field),
      resizeKeyboard: optionalBool(v, 'resize_keyboard', field),
      oneTimeKeyboard: optionalBool(v, 'one_time_keyboard', field),
    };
  } else if (inline.some((r) => r.buttons.length > 0)) {
    markup = { ...none, inlineKeyboard: inline };
  } else if (optionalBool(v, 'remove_keyboard', field) || optionalBool(v, 'hide_keyboard', field)) {
    markup = { ...none, removeKeyboard: true, selective };
  } else if (optionalBool(v, 'force_reply', field) || optionalBool(v, 'force_reply_keyboard', field)) {
    markup = { ...none, forceReply: true, selective, inputFieldPlaceholder: placeholder };
  }
  if (markup) checkReplyMarkup(markup, field);
  return markup;
}

const utf8Bytes = (s: string) => Buffer.byteLength(s, 'utf8');
const chars = (s: string) => [...s].length;

/**
 * Telegram's rules for a markup, whichever surface it came from: one kind; rows of
 * buttons with text; an inline button with exactly one action; callback_data of 1 to 64
 * bytes (BUTTON_DATA_INVALID); URLs of http(s) or tg; at most 100 buttons (reply markup
 * is too long). Field paths are the native API's (rows' `buttons`).
 */
export function checkReplyMarkup(m: ReplyMarkup, field = 'reply_markup'): void {
  const kinds = [m.inlineKeyboard.length > 0, m.keyboard.length > 0, m.removeKeyboard, m.forceReply].filter(Boolean).length;
  if (kinds !== 1) {
    throw invalid(field, 'INVALID_VALUE', 'must set exactly one of inline_keyboard, keyboard, remove_keyboard and force_reply');
  }
  let buttons = 0;
  const text = (t: string, at: string) => {
    if (t.trim() === '') throw invalid(`${at}.text`, 'BUTTON_TEXT_EMPTY', 'button text must be non-empty');
    if (chars(t) > MARKUP_LIMITS.buttonTextChars) throw invalid(`${at}.text`, 'BUTTON_TEXT_INVALID', `must be at most ${MARKUP_LIMITS.buttonTextChars} characters`);
  };
  m.inlineKeyboard.forEach((row, i) => row.buttons.forEach((b, j) => {
    const at = `${field}.inline_keyboard[${i}].buttons[${j}]`;
    buttons++;
    text(b.text, at);
    const actions = [b.url, b.callbackData, b.switchInlineQuery, b.switchInlineQueryCurrentChat, b.webApp, b.copyText].filter((a) => a !== undefined).length;
    if (actions !== 1) {
      throw invalid(at, 'INVALID_VALUE', 'must set exactly one of url, callback_data, switch_inline_query, switch_inline_query_current_chat, web_app and copy_text');
    }
    if (b.callbackData !== undefined && (b.callbackData === '' || utf8Bytes(b.callbackData) > MARKUP_LIMITS.callbackDataBytes)) {
      throw invalid(`${at}.callback_data`, 'BUTTON_DATA_INVALID', `BUTTON_DATA_INVALID: callback_data must be 1 to ${MARKUP_LIMITS.callbackDataBytes} bytes`);
    }
    if (b.url !== undefined && !/^(https?|tg):\/\/\S+$/i.test(b.url)) {
      throw invalid(`${at}.url`, 'BUTTON_URL_INVALID', 'BUTTON_URL_INVALID: must be an http, https or tg URL');
    }
    if (b.webApp !== undefined && !/^https:\/\/\S+$/i.test(b.webApp.url)) {
      throw invalid(`${at}.web_app.url`, 'BUTTON_URL_INVALID', 'BUTTON_URL_INVALID: a web app must have an https URL');
    }
    if (b.copyText !== undefined && (b.copyText.text === '' || chars(b.copyText.text) > MARKUP_LIMITS.copyTextChars)) {
      throw invalid(`${at}.copy_text.text`, 'INVALID_VALUE', `must be 1 to ${MARKUP_LIMITS.copyTextChars} characters`);
    }
  }));
  m.keyboard.forEach((row, i) => row.buttons.forEach((b, j) => {
    const at = `${field}.keyboard[${i}].buttons[${j}]`;
    buttons++;
    text(b.text, at);
    if ([b.requestContact, b.requestLocation, b.webApp !== undefined].filter(Boolean).length > 1) {
      throw invalid(at, 'INVALID_VALUE', 'must set at most one of request_contact, request_location and web_app');
    }
  }));
  if (buttons > MARKUP_LIMITS.buttons) throw invalid(field, 'REPLY_MARKUP_TOO_LONG', 'reply markup is too long');
  const placeholder = m.inputFieldPlaceholder;
  if (placeholder !== undefined && (placeholder === '' || chars(placeholder) > MARKUP_LIMITS.placeholderChars)) {
    throw invalid(`${field}.input_field_placeholder`, 'INVALID_VALUE', `must be 1 to ${MARKUP_LIMITS.placeholderChars} characters`);
  }
}

/** A markup in Telegram's JSON shape (rows as arrays of arrays; what is unset left out). */
export function telegramReplyMarkup(m: ReplyMarkup): Json {
  const compact = (o: Json): Json => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== false));
  if (m.inlineKeyboard.length > 0) {
    return {
      inline_keyboard: m.inlineKeyboard.map((row) => row.buttons.map((b) => compact({
        text: b.text, url: b.url, callback_data: b.callbackData, switch_inline_query: b.switchInlineQuery,
        switch_inline_query_current_chat: b.switchInlineQueryCurrentChat, web_app: b.webApp, copy_text: b.copyText,
      }))),
    };
  }
  if (m.keyboard.length > 0) {
    return compact({
      keyboard: m.keyboard.map((row) => row.buttons.map((b) => compact({
        text: b.text, request_contact: b.requestContact, request_location: b.requestLocation, web_app: b.webApp,
      }))),
      is_persistent: m.isPersistent, resize_keyboard: m.resizeKeyboard, one_time_keyboard: m.oneTimeKeyboard,
      input_field_placeholder: m.inputFieldPlaceholder, selective: m.selective,
    });
  }
  if (m.removeKeyboard) return compact({ remove_keyboard: true, selective: m.selective });
  return compact({ force_reply: true, input_field_placeholder: m.inputFieldPlaceholder, selective: m.selective });
}
