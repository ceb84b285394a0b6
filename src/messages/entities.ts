/**
 * Telegram message entities: parse_mode parsing (HTML, MarkdownV2, legacy Markdown),
 * validation/normalisation of client-given entities, automatic entity detection
 * (mentions, bot commands, hashtags, cashtags, URLs, e-mail addresses) and rendering
 * back to HTML / MarkdownV2.
 *
 * Pure and dependency-free. It is a port of tdlib's `td/telegram/MessageEntity.cpp`
 * (github.com/tdlib/td, read at commit 022d602, July 2026), of the helpers it calls
 * (`LinkManager::check_link`/`get_link_user_id`/`get_link_custom_emoji_id`/
 * `get_link_formatted_date`, tdutils' `parse_url`, `clean_input_string`,
 * `strip_empty_characters`, `FormattedDate::get_date_flags`) and of the Bot API
 * server's glue (github.com/tdlib/telegram-bot-api `Client::get_formatted_text`,
 * `Client::get_text_entity_type`). The Bot API server runs exactly these tdlib
 * functions, so the rules and error texts below are the Bot API's.
 *
 * Like tdlib, the parsers work on the UTF-8 bytes of the text: error messages
 * quote UTF-8 *byte* offsets, while entity offsets and lengths are counted in
 * UTF-16 code units (an emoji outside the BMP counts 2).
 *
 * Error texts are tdlib's, e.g. `Can't parse entities: Unsupported start tag "foo" at
 * byte offset 0`. The Bot API sends them as `Bad Request: ` + the text with its first
 * letter lower-cased (Client::fail_query_with_error; see {@link botApiErrorDescription}).
 *
 * Known differences from tdlib / the Bot API (deliberate):
 * - `date_time` (HTML `<tg-time>`, MarkdownV2 `![..](tg://time?..)`), `bank_card_number`
 *   and `media_timestamp` entities have no {@link EntityType}: they are parsed, validated
 *   and take part in nesting fix-ups exactly like in tdlib, but are left out of the
 *   returned entity lists.
 * - Phone numbers are not detected: tdlib has no detector (`// TODO find_phone_numbers`);
 *   Telegram's server-side rules for them are not public.
 * - Unicode categories (letters/digits/separators used by mention, hashtag and URL
 *   rules) come from the JS engine's Unicode tables (`\p{L}`, `\p{Nd}`, `\p{N}`,
 *   `\p{Z}`) rather than tdlib's generated table; they agree except for characters
 *   added in Unicode 17.
 * - IPv6 hosts in links (`http://[::1]/`) are validated with a simplified check.
 * - Lone UTF-16 surrogates in the input are replaced by U+FFFD (JSON strings can carry
 *   them, UTF-8 cannot); the Bot API would refuse such text.
 * - `text_mention` user ids are not checked for accessibility (tdlib's
 *   `UserManager::get_input_user`), only for range (1..2^40-1).
 */

// ---------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------

export type EntityType =
  | 'mention'
  | 'hashtag'
  | 'cashtag'
  | 'bot_command'
  | 'url'
  | 'email'
  | 'phone_number'
  | 'bold'
  | 'italic'
  | 'underline'
  | 'strikethrough'
  | 'spoiler'
  | 'blockquote'
  | 'expandable_blockquote'
  | 'code'
  | 'pre'
  | 'text_link'
  | 'text_mention'
  | 'custom_emoji';

export interface MessageEntity {
  type: EntityType;
  /** Offset in UTF-16 code units. */
  offset: number;
  /** Length in UTF-16 code units. */
  length: number;
  /** text_link only. */
  url?: string;
  /** text_mention only. */
  userId?: number;
  /** pre only (absent for a pre without language). */
  language?: string;
  /** custom_emoji only: the decimal id, as the Bot API serialises it. */
  customEmojiId?: string;
}

/** Any entity-related refusal. `message` is tdlib's text (without the Bot API's "Bad Request: "). */
export class EntityParseError extends Error {
  /** Always 400 (tdlib's code for all of these). */
  readonly code = 400;
  constructor(message: string) {
    super(message);
    this.name = 'EntityParseError';
  }
}

export type ParseMode = 'HTML' | 'MarkdownV2' | 'Markdown';

/**
 * The Bot API's `description` for an error text: `Bad Request: ` + the text, with its first
 * letter lower-cased unless the text looks like an UPPER_CASE code (Client::fail_query_with_error).
 * E.g. "Can't parse entities: ..." becomes "Bad Request: can't parse entities: ...".
 */
export function botApiErrorDescription(message: string): string {
  if (message.startsWith('Bad Request')) return message;
  if (message === '') return 'Bad Request';
  return `Bad Request: ${botApiErrorText(message)}`;
}

/** An error text as the Bot API words it after its "Bad Request: " (see botApiErrorDescription). */
export function botApiErrorText(message: string): string {
  const c1 = message.charCodeAt(1);
  if (message.length >= 2 && (c1 === 0x5f || (c1 >= 0x41 && c1 <= 0x5a))) return message;
  const first = message.charAt(0);
  const lowered = first >= 'A' && first <= 'Z' ? first.toLowerCase() : first;
  return `${lowered}${message.slice(1)}`;
}

// ---------------------------------------------------------------------------------
// Internal entity model (tdlib's MessageEntity::Type, in tdlib's order)
// ---------------------------------------------------------------------------------

const T = {
  Mention: 0,
  Hashtag: 1,
  BotCommand: 2,
  Url: 3,
  EmailAddress: 4,
  Bold: 5,
  Italic: 6,
  Code: 7,
  Pre: 8,
  PreCode: 9,
  TextUrl: 10,
  MentionName: 11,
  Cashtag: 12,
  PhoneNumber: 13,
  Underline: 14,
  Strikethrough: 15,
  BlockQuote: 16,
  BankCardNumber: 17,
  MediaTimestamp: 18,
  Spoiler: 19,
  CustomEmoji: 20,
  ExpandableBlockQuote: 21,
  FormattedDate: 22,
} as const;
type TdType = (typeof T)[keyof typeof T];

/** operator<<(MessageEntity::Type): the names used in "Can't find end of X entity" errors. */
const TYPE_NAMES = [
  'Mention', 'Hashtag', 'BotCommand', 'Url', 'EmailAddress', 'Bold', 'Italic', 'Code', 'Pre', 'PreCode', 'TextUrl',
  'MentionName', 'Cashtag', 'PhoneNumber', 'Underline', 'Strikethrough', 'BlockQuote', 'BankCardNumber',
  'MediaTimestamp', 'Spoiler', 'CustomEmoji', 'ExpandableBlockQuote', 'Date',
];

/** MessageEntity::get_type_priority. */
const PRIORITY = [50, 50, 50, 50, 50, 90, 91, 20, 11, 10, 49, 49, 50, 50, 92, 93, 0, 50, 50, 94, 99, 0, 30];

interface Ent {
  type: TdType;
  offset: number;
  length: number;
  /** TextUrl: url; PreCode: language; HTML-parse-time Code: language. */
  argument: string;
  /** MentionName: user id (valid: 1..2^40-1). */
  userId: number;
  /** CustomEmoji: canonical decimal int64, '' if none. */
  customEmojiId: string;
  /** FormattedDate: unix time (valid: > 0) and flags. */
  date: number;
  dateFlags: number;
}

function ent(type: TdType, offset: number, length: number, argument = ''): Ent {
  return { type, offset, length, argument, userId: 0, customEmojiId: '', date: 0, dateFlags: 0 };
}

const mask = (type: TdType): number => 1 << type;
const SPLITTABLE_MASK = mask(T.Bold) | mask(T.Italic) | mask(T.Underline) | mask(T.Strikethrough) | mask(T.Spoiler);
const BLOCKQUOTE_MASK = mask(T.BlockQuote) | mask(T.ExpandableBlockQuote);
const CONTINUOUS_MASK =
  mask(T.Mention) | mask(T.Hashtag) | mask(T.BotCommand) | mask(T.Url) | mask(T.EmailAddress) | mask(T.TextUrl) |
  mask(T.MentionName) | mask(T.Cashtag) | mask(T.PhoneNumber) | mask(T.BankCardNumber) | mask(T.MediaTimestamp) |
  mask(T.CustomEmoji);
const PRE_MASK = mask(T.Pre) | mask(T.Code) | mask(T.PreCode) | mask(T.FormattedDate);
const USER_MASK = SPLITTABLE_MASK | BLOCKQUOTE_MASK | mask(T.TextUrl) | mask(T.MentionName) | mask(T.CustomEmoji) | PRE_MASK;

const isSplittable = (t: TdType): boolean => (mask(t) & SPLITTABLE_MASK) !== 0;
const isBlockquote = (t: TdType): boolean => (mask(t) & BLOCKQUOTE_MASK) !== 0;
const isContinuous = (t: TdType): boolean => (mask(t) & CONTINUOUS_MASK) !== 0;
const isPreEntity = (t: TdType): boolean => (mask(t) & PRE_MASK) !== 0;

/** get_splittable_entity_type_index */
function splittableIndex(t: TdType): number {
  switch (t) {
    case T.Bold:
      return 0;
    case T.Italic:
      return 1;
    case T.Underline:
      return 2;
    case T.Strikethrough:
      return 3;
    default:
      return 4; // Spoiler
  }
}

/** MessageEntity::operator< : offset asc, length desc, priority asc. */
function compareEnt(a: Ent, b: Ent): number {
  if (a.offset !== b.offset) return a.offset < b.offset ? -1 : 1;
  if (a.length !== b.length) return a.length > b.length ? -1 : 1;
  return PRIORITY[a.type]! - PRIORITY[b.type]!;
}

function sortEntities(entities: Ent[]): void {
  entities.sort(compareEnt);
}

const MAX_USER_ID = 2 ** 40 - 1;
const isValidUserId = (id: number): boolean => Number.isSafeInteger(id) && id > 0 && id <= MAX_USER_ID;

// ---------------------------------------------------------------------------------
// Bytes, UTF-8 and character classes
// ---------------------------------------------------------------------------------

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}
function fromUtf8(b: Uint8Array | readonly number[]): string {
  return decoder.decode(b instanceof Uint8Array ? b : Uint8Array.from(b));
}
/** Bytes as a "binary" string (one char per byte), for ASCII-only comparisons. */
function latin1(b: Uint8Array, from: number, to: number): string {
  let s = '';
  for (let i = from; i < to; i++) s += String.fromCharCode(b[i]!);
  return s;
}

/** `text[i]` of a NUL-terminated C++ string: 0 past the end. */
const at = (b: Uint8Array | readonly number[], i: number): number => b[i] ?? 0;

const C = {
  NUL: 0, TAB: 9, NL: 10, VT: 11, CR: 13, SP: 32, BANG: 33, DQ: 34, HASH: 35, DOLLAR: 36, AMP: 38, SQ: 39,
  LPAREN: 40, RPAREN: 41, STAR: 42, PLUS: 43, COMMA: 44, MINUS: 45, DOT: 46, SLASH: 47, ZERO: 48, NINE: 57,
  COLON: 58, SEMI: 59, LT: 60, EQ: 61, GT: 62, QUESTION: 63, AT: 64, LBRACKET: 91, BACKSLASH: 92, RBRACKET: 93,
  UNDERSCORE: 95, BACKTICK: 96, LBRACE: 123, PIPE: 124, RBRACE: 125, TILDE: 126,
} as const;

const isUtf8First = (c: number): boolean => (c & 0xc0) !== 0x80;
const isSpace = (c: number): boolean =>
  c === C.SP || c === C.TAB || c === C.CR || c === C.NL || c === C.NUL || c === C.VT;
const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
const isAlpha = (c: number): boolean => {
  const l = c | 0x20;
  return c < 0x80 && l >= 0x61 && l <= 0x7a;
};
const isAlnum = (c: number): boolean => isAlpha(c) || isDigit(c);
const isHexDigit = (c: number): boolean => isDigit(c) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66 && c < 0x80);
const hexValue = (c: number): number => (isDigit(c) ? c - 0x30 : (c | 0x20) - 0x61 + 10);
const asciiLowerByte = (c: number): number => (c >= 0x41 && c <= 0x5a ? c + 32 : c);
/** td::to_lower on a string: ASCII letters only. */
const asciiLower = (s: string): string => s.replace(/[A-Z]+/g, (m) => m.toLowerCase());

/** is_alpha_digit etc. of MessageEntity.cpp: ASCII only. */
const isAlphaDigit = (c: number): boolean =>
  (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a);
const isAlphaDigitUnderscore = (c: number): boolean => isAlphaDigit(c) || c === C.UNDERSCORE;
const isAlphaDigitUnderscoreMinus = (c: number): boolean => isAlphaDigitUnderscore(c) || c === C.MINUS;

/** Position after the code point decoded by the last {@link decodeAt} call. */
let decodedEnd = 0;
/** next_utf8_unsafe: the code point starting at byte p (input is valid UTF-8). */
function decodeAt(b: Uint8Array, p: number): number {
  const c = b[p] ?? 0;
  if (c < 0x80) {
    decodedEnd = p + 1;
    return c;
  }
  if (c < 0xe0) {
    decodedEnd = p + 2;
    return ((c & 0x1f) << 6) | (at(b, p + 1) & 0x3f);
  }
  if (c < 0xf0) {
    decodedEnd = p + 3;
    return ((c & 0x0f) << 12) | ((at(b, p + 1) & 0x3f) << 6) | (at(b, p + 2) & 0x3f);
  }
  decodedEnd = p + 4;
  return ((c & 0x07) << 18) | ((at(b, p + 1) & 0x3f) << 12) | ((at(b, p + 2) & 0x3f) << 6) | (at(b, p + 3) & 0x3f);
}
/** prev_utf8_unsafe: start of the character that ends at byte p. */
function prevStart(b: Uint8Array, p: number): number {
  p--;
  while (p > 0 && !isUtf8First(b[p]!)) p--;
  return p;
}
function appendUtf8(out: number[], code: number): void {
  if (code < 0x80) {
    out.push(code);
  } else if (code < 0x800) {
    out.push(0xc0 | (code >> 6), 0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    out.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f));
  } else {
    out.push(0xf0 | (code >> 18), 0x80 | ((code >> 12) & 0x3f), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f));
  }
}
/** utf8_utf16_length */
function utf16LengthOfBytes(b: Uint8Array | readonly number[], from = 0, to = b.length): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = b[i]!;
    if (isUtf8First(c)) n += c >= 0xf0 ? 2 : 1;
  }
  return n;
}
/** Code points in b[from, to). */
function utf8Length(b: Uint8Array, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) if (isUtf8First(b[i]!)) n++;
  return n;
}

// get_unicode_simple_category: Unknown, Letter, DecimalNumber, Number, Separator.
const CAT_UNKNOWN = 0;
const CAT_LETTER = 1;
const CAT_DECIMAL = 2;
const CAT_NUMBER = 3;
const CAT_SEPARATOR = 4;
const RE_LETTER = /\p{L}/u;
const RE_DECIMAL = /\p{Nd}/u;
const RE_NUMBER = /\p{N}/u;
const RE_SEPARATOR = /\p{Z}/u;
const categoryCache = new Map<number, number>();
function category(code: number): number {
  if (code < 0x80) {
    if (code === C.SP) return CAT_SEPARATOR;
    if (isDigit(code)) return CAT_DECIMAL;
    if (isAlpha(code)) return CAT_LETTER;
    return CAT_UNKNOWN;
  }
  const cached = categoryCache.get(code);
  if (cached !== undefined) return cached;
  const s = String.fromCodePoint(code);
  let cat = CAT_UNKNOWN;
  if (RE_LETTER.test(s)) cat = CAT_LETTER;
  else if (RE_DECIMAL.test(s)) cat = CAT_DECIMAL;
  else if (RE_NUMBER.test(s)) cat = CAT_NUMBER;
  else if (RE_SEPARATOR.test(s)) cat = CAT_SEPARATOR;
  if (categoryCache.size < 4096) categoryCache.set(code, cat);
  return cat;
}

/** is_word_character */
function isWordChar(code: number): boolean {
  const cat = category(code);
  return cat === CAT_LETTER || cat === CAT_DECIMAL || cat === CAT_NUMBER || code === C.UNDERSCORE;
}

/** to_integer_safe<int64>: canonical decimal (no '+', no leading zeros, no "-0") in range. */
function parseInt64Safe(s: string): bigint | null {
  if (!/^-?(0|[1-9][0-9]*)$/.test(s) || s === '-0') return null;
  const v = BigInt(s);
  if (v > 9223372036854775807n || v < -9223372036854775808n) return null;
  return v;
}
/** to_integer_safe<int32> */
function parseInt32Safe(s: string): number | null {
  const v = parseInt64Safe(s);
  if (v === null || v > 2147483647n || v < -2147483648n) return null;
  return Number(v);
}
/** to_integer<int32> (lenient: optional '-', then digits up to the first non-digit, wrapping like C++). */
function parseInt32Lenient(s: string): number {
  let i = 0;
  let negative = false;
  if (s.charCodeAt(0) === C.MINUS) {
    negative = true;
    i++;
  }
  let value = 0;
  for (; i < s.length && isDigit(s.charCodeAt(i)); i++) value = (value * 10 + s.charCodeAt(i) - 0x30) % 2 ** 32;
  if (value > 0x7fffffff) {
    value = (2 ** 32 - value) % 2 ** 32;
    negative = !negative;
    if (value > 0x7fffffff) return -0x80000000;
  }
  return negative ? -value : value;
}

// ---------------------------------------------------------------------------------
// Links: tdutils parse_url / HttpUrl::get_url, LinkManager::check_link_impl,
// get_link_user_id, check_tg_url_host, get_link_custom_emoji_id, get_link_formatted_date
// ---------------------------------------------------------------------------------

interface HttpUrl {
  https: boolean;
  userinfo: string;
  host: string;
  isIpv6: boolean;
  specifiedPort: number;
  query: string;
}

class LinkError extends Error {}

/** Simplified stand-in for IPAddress::init_ipv6_port (hex groups, one "::", optional dotted IPv4 tail). */
function isValidIpv6(s: string): boolean {
  if (s === '' || /[^0-9a-fA-F:.]/.test(s)) return false;
  const halves = s.split('::');
  if (halves.length > 2) return false;
  const parse = (part: string): string[] | null => (part === '' ? [] : part.split(':'));
  const head = parse(halves[0]!);
  const tail = halves.length === 2 ? parse(halves[1]!) : [];
  if (head === null || tail === null) return false;
  const groups = [...head, ...tail];
  let count = 0;
  for (let i = 0; i < groups.length; i++) {
    const g = groups[i]!;
    if (g.includes('.')) {
      if (i !== groups.length - 1 || !/^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/.test(g)) return false;
      count += 2;
    } else {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return false;
      count += 1;
    }
  }
  return halves.length === 2 ? count < 8 : count === 8;
}

/** tdutils parse_url(url, HttpUrl::Protocol::Http). Throws LinkError with tdutils' texts. */
function parseUrl(url: string): HttpUrl {
  let p = 0;
  while (p < url.length && !':/?#@[]'.includes(url[p]!)) p++;
  const protocolStr = asciiLower(url.slice(0, p));
  let https = false;
  let rest = 0;
  if (url.startsWith('://', p)) {
    if (protocolStr === 'http') https = false;
    else if (protocolStr === 'https') https = true;
    else throw new LinkError('Unsupported URL protocol');
    rest = p + 3;
  }
  let q = rest;
  while (q < url.length && !'/?#'.includes(url[q]!)) q++;
  const userinfoHostPort = url.slice(rest, q);

  let port = 0;
  let colon = userinfoHostPort.length - 1;
  while (colon > 0 && userinfoHostPort[colon] !== ':' && userinfoHostPort[colon] !== ']' && userinfoHostPort[colon] !== '@') {
    colon--;
  }
  let userinfoHost: string;
  if (colon > 0 && userinfoHostPort[colon] === ':') {
    let portSlice = userinfoHostPort.slice(colon + 1);
    while (portSlice.length > 1 && portSlice[0] === '0') portSlice = portSlice.slice(1);
    const r = parseInt32Safe(portSlice);
    port = r === null || r === 0 ? -1 : r;
    userinfoHost = userinfoHostPort.slice(0, colon);
  } else {
    userinfoHost = userinfoHostPort;
  }
  if (port < 0 || port > 65535) throw new LinkError('Wrong port number specified in the URL');

  const atPos = userinfoHost.lastIndexOf('@');
  const userinfo = atPos === -1 ? '' : userinfoHost.slice(0, atPos);
  const host = userinfoHost.slice(atPos + 1);

  let isIpv6 = false;
  if (host.length > 0 && host[0] === '[' && host[host.length - 1] === ']') {
    if (!isValidIpv6(host.slice(1, -1))) throw new LinkError('Wrong IPv6 address specified in the URL');
    isIpv6 = true;
  }
  if (host === '') throw new LinkError('URL host is empty');
  if (host === '.') throw new LinkError('Host is invalid');

  let query = url.slice(q);
  while (query.length > 0 && isSpace(query.charCodeAt(query.length - 1))) query = query.slice(0, -1);
  if (query === '') query = '/';
  let queryStr = query[0] !== '/' ? '/' : '';
  for (let i = 0; i < query.length; i++) {
    const c = query.charCodeAt(i);
    if (c <= 0x20) queryStr += '%' + '0123456789ABCDEF'[c >> 4]! + '0123456789ABCDEF'[c & 15]!;
    else queryStr += query[i]!;
  }

  const checkUrlPart = (part: string, name: string, allowColon: boolean): void => {
    for (let i = 0; i < part.length; i++) {
      let c = part.charCodeAt(i);
      if (isAlnum(c) || ".-_!$,~*'();&+=".includes(part[i]!) || (allowColon && c === C.COLON)) continue;
      if (c === 0x25 /* % */) {
        c = part.charCodeAt(++i);
        if (isHexDigit(c)) {
          c = part.charCodeAt(++i);
          if (isHexDigit(c)) continue;
        }
        throw new LinkError(`Wrong percent-encoded symbol in URL ${name}`);
      }
      if (c >= 128) continue; // plain UTF-8 symbols are allowed
      throw new LinkError(`Disallowed character in URL ${name}`);
    }
  };

  const hostStr = asciiLower(host);
  if (isIpv6) {
    for (let i = 1; i + 1 < hostStr.length; i++) {
      const c = hostStr[i]!;
      if (c === ':' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c === '.') continue;
      throw new LinkError('Wrong IPv6 URL host');
    }
  } else {
    checkUrlPart(hostStr, 'host', false);
    checkUrlPart(userinfo, 'userinfo', true);
  }
  return { https, userinfo, host: hostStr, isIpv6, specifiedPort: port, query: queryStr };
}

function getUrl(u: HttpUrl): string {
  let result = u.https ? 'https://' : 'http://';
  if (u.userinfo !== '') result += u.userinfo + '@';
  result += u.host;
  if (u.specifiedPort > 0) result += ':' + String(u.specifiedPort);
  return result + u.query;
}

function tolowerBeginsWith(s: string, prefix: string): boolean {
  return s.length >= prefix.length && asciiLower(s.slice(0, prefix.length)) === prefix;
}

/** LinkManager::check_link_impl(link, false, false): the normalised link or a LinkError. */
function checkLinkImpl(link: string): string {
  let isTg = false;
  let isTon = false;
  let isTonsite = false;
  if (tolowerBeginsWith(link, 'tg:')) {
    link = link.slice(3);
    isTg = true;
  } else if (tolowerBeginsWith(link, 'ton:')) {
    link = link.slice(4);
    isTon = true;
  } else if (tolowerBeginsWith(link, 'tonsite:')) {
    link = link.slice(8);
    isTonsite = true;
  }
  if ((isTg || isTon || isTonsite) && link.startsWith('//')) link = link.slice(2);
  const u = parseUrl(link);
  if (isTg || isTon || isTonsite) {
    if (tolowerBeginsWith(link, 'http://') || u.https || u.userinfo !== '' || u.specifiedPort !== 0 || u.isIpv6) {
      throw new LinkError(isTg ? 'Wrong tg URL' : 'Wrong ton URL');
    }
    let query = u.query;
    if (query.length > 1 && query[1] === '?') query = query.slice(1);
    for (let i = 0; i < u.host.length; i++) {
      const c = u.host.charCodeAt(i);
      if (!isAlnum(c) && c !== C.MINUS && c !== C.UNDERSCORE && !(isTonsite && c === C.DOT)) {
        throw new LinkError('Unallowed characters in URL host');
      }
    }
    return `${isTg ? 'tg' : isTonsite ? 'tonsite' : 'ton'}://${u.host}${query}`;
  }
  if (!u.host.includes('.') && !u.isIpv6) throw new LinkError('Wrong HTTP URL');
  return getUrl(u);
}

/** LinkManager::get_checked_link: '' when invalid. */
function getCheckedLink(link: string): string {
  try {
    return checkLinkImpl(link);
  } catch (e) {
    if (e instanceof LinkError) return '';
    throw e;
  }
}

/** LinkManager::check_link: the error text is "URL '<link>' is invalid: <reason>". */
function checkLink(link: string): string {
  try {
    return checkLinkImpl(link);
  } catch (e) {
    if (e instanceof LinkError) throw new EntityParseError(`URL '${link}' is invalid: ${e.message}`);
    throw e;
  }
}

/** split(s, '='): before/after the first '='. */
function splitOnce(s: string, sep: string): [string, string] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + 1)];
}

/** LinkManager::get_link_user_id: a valid user id or 0. */
function getLinkUserId(url: string): number {
  let s = asciiLower(url);
  if (!s.startsWith('tg:')) return 0;
  s = s.slice(3);
  if (s.startsWith('//')) s = s.slice(2);
  if (!s.startsWith('user') || (s.length > 4 && !'/?#'.includes(s[4]!))) return 0;
  s = s.slice(4);
  if (s.startsWith('/')) s = s.slice(1);
  if (!s.startsWith('?')) return 0;
  s = s.slice(1);
  const hash = s.indexOf('#');
  if (hash >= 0) s = s.slice(0, hash);
  for (const parameter of s.split('&')) {
    const [key, value] = splitOnce(parameter, '=');
    if (key === 'id') {
      const id = parseInt64Safe(value);
      if (id === null || id <= 0n || id > BigInt(MAX_USER_ID)) return 0;
      return Number(id);
    }
  }
  return 0;
}

/** LinkManager::check_tg_url_host: the query part (original case) after tg://<host>[/]? */
function checkTgUrlHost(url: string, host: string): string {
  const minSize = 3 + 2 + host.length + 1;
  let lower = asciiLower(url.length > minSize ? url.slice(0, minSize) : url);
  if (!lower.startsWith('tg:')) throw new LinkError('URL must have scheme tg');
  lower = lower.slice(3);
  url = url.slice(3);
  if (url.startsWith('//')) {
    lower = lower.slice(2);
    url = url.slice(2);
  }
  if (!lower.startsWith(host) || (url.length > host.length && !'/?#'.includes(url[host.length]!))) {
    throw new LinkError(`URL must have host "${host}"`);
  }
  url = url.slice(host.length);
  if (url.startsWith('/')) url = url.slice(1);
  if (!url.startsWith('?')) throw new LinkError('URL must have parameters');
  url = url.slice(1);
  const hash = url.indexOf('#');
  return hash >= 0 ? url.slice(0, hash) : url;
}

/** LinkManager::get_link_custom_emoji_id */
function getLinkCustomEmojiId(url: string): string {
  const query = checkTgUrlHost(url, 'emoji');
  for (const parameter of query.split('&')) {
    const [key, value] = splitOnce(parameter, '=');
    if (key === 'id') {
      const id = parseInt64Safe(value);
      if (id === null || id === 0n) throw new LinkError('Invalid custom emoji identifier specified');
      return id.toString();
    }
  }
  throw new LinkError('Custom emoji URL must have an emoji identifier');
}

/** FormattedDate::get_date_flags */
function getDateFlags(format: string): number {
  if (format === 'r' || format === 'R') return 1;
  let flags = 0;
  for (const c of format) {
    switch (c) {
      case 't':
        flags |= 2;
        break;
      case 'T':
        flags |= 4;
        break;
      case 'd':
        flags |= 8;
        break;
      case 'D':
        flags |= 16;
        break;
      case 'w':
      case 'W':
        flags |= 32;
        break;
      default:
        throw new LinkError('Invalid date format used');
    }
  }
  return flags;
}

/** LinkManager::get_link_formatted_date */
function getLinkFormattedDate(url: string): { date: number; flags: number } {
  const query = checkTgUrlHost(url, 'time');
  let date = 0;
  let format = '';
  for (const parameter of query.split('&')) {
    const [key, value] = splitOnce(parameter, '=');
    if (key === 'unix') {
      const d = parseInt32Safe(value);
      if (d === null || d <= 0) throw new LinkError('Invalid Unix time specified');
      date = d;
    }
    if (key === 'format') format = value;
  }
  if (date === 0) throw new LinkError('URL must have the corresponding Unix time');
  return { date, flags: getDateFlags(format) };
}

/** The entity for an inline link target: MentionName for tg://user?id=N, else TextUrl, else null (dropped). */
function linkEntity(url: string, offset: number, length: number): Ent | null {
  const userId = getLinkUserId(url);
  if (userId !== 0) {
    const e = ent(T.MentionName, offset, length);
    e.userId = userId;
    return e;
  }
  const checked = getCheckedLink(url);
  return checked === '' ? null : ent(T.TextUrl, offset, length, checked);
}

// ---------------------------------------------------------------------------------
// parse_html
// ---------------------------------------------------------------------------------

/** decode_html_entity: the decoded code point (0: not an entity) and the position after it. */
function decodeHtmlEntity(t: Uint8Array, pos: number): { code: number; end: number } {
  let end = pos + 1;
  let res = 0;
  if (at(t, pos + 1) === C.HASH) {
    // numeric character reference
    end++;
    if (at(t, pos + 2) === 0x78 /* x */) {
      end++;
      while (isHexDigit(at(t, end))) res = res * 16 + hexValue(at(t, end++));
    } else {
      while (isDigit(at(t, end))) res = res * 10 + at(t, end++) - 0x30;
    }
    if (res === 0 || res >= 0x10ffff || end - pos >= 10) return { code: 0, end: pos };
  } else {
    while (isAlpha(at(t, end))) end++;
    const name = latin1(t, pos + 1, end);
    if (name === 'lt') res = 0x3c;
    else if (name === 'gt') res = 0x3e;
    else if (name === 'amp') res = 0x26;
    else if (name === 'quot') res = 0x22;
    else return { code: 0, end: pos }; // unsupported literal entity
  }
  return { code: res, end: at(t, end) === C.SEMI ? end + 1 : end };
}

const HTML_TAGS = new Set([
  'a', 'b', 'strong', 'i', 'em', 's', 'strike', 'del', 'u', 'ins', 'tg-spoiler', 'tg-emoji', 'tg-time', 'span', 'pre',
  'code', 'blockquote',
]);

interface ParseResult {
  text: Uint8Array;
  entities: Ent[];
}

function parseHtml(str: Uint8Array): ParseResult {
  const n = str.length;
  const out: number[] = [];
  const entities: Ent[] = [];
  let utf16 = 0;
  let needRecheckUtf8 = false;
  interface Nested {
    tag: string;
    argument: string;
    date: number;
    offset: number;
    beginPos: number;
  }
  const nested: Nested[] = [];
  const fail = (message: string): never => {
    throw new EntityParseError(message);
  };

  for (let i = 0; i < n; i++) {
    const c = str[i]!;
    if (c === C.AMP) {
      const r = decodeHtmlEntity(str, i);
      if (r.code !== 0) {
        i = r.end - 1; // i will be incremented in for
        utf16 += r.code > 0xffff ? 2 : 1;
        if (r.code >= 0xd800 && r.code <= 0xdfff) needRecheckUtf8 = true; // half of a surrogate pair
        appendUtf8(out, r.code);
        continue;
      }
    }
    if (c !== C.LT) {
      if (isUtf8First(c)) utf16 += c >= 0xf0 ? 2 : 1;
      out.push(c);
      continue;
    }

    const beginPos = i++;
    if (at(str, i) !== C.SLASH) {
      // begin of an entity
      while (!isSpace(at(str, i)) && at(str, i) !== C.GT) i++;
      if (at(str, i) === 0) fail(`Unclosed start tag at byte offset ${beginPos}`);

      const tagName = asciiLower(fromUtf8(str.subarray(beginPos + 1, i)));
      if (!HTML_TAGS.has(tagName)) fail(`Unsupported start tag "${tagName}" at byte offset ${beginPos}`);

      let argument = '';
      let date = 0;
      while (at(str, i) !== C.GT) {
        while (at(str, i) !== 0 && isSpace(at(str, i))) i++;
        if (at(str, i) === C.GT) break;
        const attributeBegin = i;
        for (;;) {
          const a = at(str, i);
          if (isSpace(a) || a === C.EQ || a === C.GT || a === C.SLASH || a === C.DQ || a === C.SQ) break;
          i++;
        }
        const attributeName = fromUtf8(str.subarray(attributeBegin, i));
        if (attributeName === '') fail(`Empty attribute name in the tag "${tagName}" at byte offset ${beginPos}`);
        while (at(str, i) !== 0 && isSpace(at(str, i))) i++;
        if (at(str, i) !== C.EQ) {
          if (at(str, i) === 0) fail(`Unclosed start tag "${tagName}" at byte offset ${beginPos}`);
          if (tagName === 'blockquote' && attributeName === 'expandable') argument = '1';
          continue;
        }
        i++;
        while (at(str, i) !== 0 && isSpace(at(str, i))) i++;
        if (at(str, i) === 0) fail(`Unclosed start tag "${tagName}" at byte offset ${beginPos}`);

        let attributeValue: string;
        if (at(str, i) !== C.SQ && at(str, i) !== C.DQ) {
          // A name token (a sequence of letters, digits, periods, or hyphens). Name tokens are not case sensitive.
          const tokenBegin = i;
          while (isAlnum(at(str, i)) || at(str, i) === C.DOT || at(str, i) === C.MINUS) i++;
          attributeValue = asciiLower(latin1(str, tokenBegin, i));
          if (!isSpace(at(str, i)) && at(str, i) !== C.GT) fail(`Unexpected end of name token at byte offset ${tokenBegin}`);
        } else {
          // A string literal
          const endCharacter = str[i++]!;
          const value: number[] = [];
          while (at(str, i) !== endCharacter && at(str, i) !== 0) {
            if (str[i] === C.AMP) {
              const r = decodeHtmlEntity(str, i);
              if (r.code !== 0) {
                appendUtf8(value, r.code);
                i = r.end;
                continue;
              }
            }
            value.push(str[i++]!);
          }
          if (at(str, i) === endCharacter) i++;
          attributeValue = fromUtf8(value);
        }
        if (at(str, i) === 0) fail(`Unclosed start tag at byte offset ${beginPos}`);

        if (tagName === 'a' && attributeName === 'href') {
          argument = attributeValue;
        } else if (tagName === 'code' && attributeName === 'class' && attributeValue.startsWith('language-')) {
          argument = attributeValue.slice(9);
        } else if (tagName === 'span' && attributeName === 'class' && attributeValue.startsWith('tg-')) {
          argument = attributeValue.slice(3);
        } else if (tagName === 'tg-emoji' && attributeName === 'emoji-id') {
          argument = attributeValue;
        } else if (tagName === 'blockquote' && attributeName === 'expandable') {
          argument = '1';
        } else if (tagName === 'tg-time' && attributeName === 'unix') {
          date = parseInt32Lenient(attributeValue);
        } else if (tagName === 'tg-time' && attributeName === 'format') {
          argument = attributeValue;
        }
      }

      if (tagName === 'span' && argument !== 'spoiler') {
        fail(`Tag "span" must have class "tg-spoiler" at byte offset ${beginPos}`);
      }
      nested.push({ tag: tagName, argument, date, offset: utf16, beginPos: out.length });
    } else {
      // end of an entity
      if (nested.length === 0) fail(`Unexpected end tag at byte offset ${beginPos}`);
      while (!isSpace(at(str, i)) && at(str, i) !== C.GT) i++;
      const endTagName = asciiLower(fromUtf8(str.subarray(beginPos + 2, i)));
      while (isSpace(at(str, i)) && at(str, i) !== 0) i++;
      if (at(str, i) !== C.GT) fail(`Unclosed end tag at byte offset ${beginPos}`);

      const top = nested[nested.length - 1]!;
      const tagName = top.tag;
      if (endTagName !== '' && endTagName !== tagName) {
        fail(`Unmatched end tag at byte offset ${beginPos}, expected "</${tagName}>", found "</${endTagName}>"`);
      }

      if (utf16 > top.offset) {
        const offset = top.offset;
        const length = utf16 - offset;
        const last = entities[entities.length - 1];
        if (tagName === 'i' || tagName === 'em') {
          entities.push(ent(T.Italic, offset, length));
        } else if (tagName === 'b' || tagName === 'strong') {
          entities.push(ent(T.Bold, offset, length));
        } else if (tagName === 's' || tagName === 'strike' || tagName === 'del') {
          entities.push(ent(T.Strikethrough, offset, length));
        } else if (tagName === 'u' || tagName === 'ins') {
          entities.push(ent(T.Underline, offset, length));
        } else if (tagName === 'tg-spoiler' || (tagName === 'span' && top.argument === 'spoiler')) {
          entities.push(ent(T.Spoiler, offset, length));
        } else if (tagName === 'tg-emoji') {
          const id = parseInt64Safe(top.argument);
          if (id === null || id === 0n) fail('Invalid custom emoji identifier specified');
          const e = ent(T.CustomEmoji, offset, length);
          e.customEmojiId = String(id);
          entities.push(e);
        } else if (tagName === 'tg-time') {
          let flags = 0;
          try {
            flags = getDateFlags(top.argument);
          } catch (err) {
            if (err instanceof LinkError) fail(err.message);
            throw err;
          }
          if (top.date > 0) {
            const e = ent(T.FormattedDate, offset, length);
            e.date = top.date;
            e.dateFlags = flags;
            entities.push(e);
          }
        } else if (tagName === 'a') {
          let url = top.argument;
          if (url === '') url = fromUtf8(out.slice(top.beginPos));
          const e = linkEntity(url, offset, length);
          if (e !== null) entities.push(e);
        } else if (tagName === 'pre') {
          if (last !== undefined && last.type === T.Code && last.offset === offset && last.length === length && last.argument !== '') {
            last.type = T.PreCode;
          } else {
            entities.push(ent(T.Pre, offset, length));
          }
        } else if (tagName === 'code') {
          if (last !== undefined && last.type === T.Pre && last.offset === offset && last.length === length && top.argument !== '') {
            last.type = T.PreCode;
            last.argument = top.argument;
          } else {
            entities.push(ent(T.Code, offset, length, top.argument));
          }
        } else if (tagName === 'blockquote') {
          entities.push(ent(top.argument !== '' ? T.ExpandableBlockQuote : T.BlockQuote, offset, length));
        }
      }
      nested.pop();
    }
  }
  if (nested.length > 0) {
    fail(`Can't find end tag corresponding to start tag "${nested[nested.length - 1]!.tag}"`);
  }
  for (const e of entities) if (e.type === T.Code) e.argument = '';
  sortEntities(entities);
  if (needRecheckUtf8) {
    fail('Text contains invalid Unicode characters after decoding HTML entities, check for unmatched surrogate code units');
  }
  return { text: Uint8Array.from(out), entities };
}

// ---------------------------------------------------------------------------------
// parse_markdown_v2
// ---------------------------------------------------------------------------------

const MDV2_RESERVED = new Set(Array.from('_*[]()~`>#+-=|{}.!\n', (ch) => ch.charCodeAt(0)));

function parseMarkdownV2(text: Uint8Array): ParseResult {
  const n = text.length;
  const out: number[] = [];
  const entities: Ent[] = [];
  let utf16 = 0;
  interface Nested {
    type: TdType;
    argument: string;
    offset: number;
    byteOffset: number;
    beginPos: number;
  }
  const nested: Nested[] = [];
  const fail = (message: string): never => {
    throw new EntityParseError(message);
  };
  const reserved = (c: number): never =>
    fail(`Character '${String.fromCharCode(c)}' is reserved and must be escaped with the preceding '\\'`);
  const cantFindEnd = (e: Nested): never => fail(`Can't find end of ${TYPE_NAMES[e.type]!} entity at byte offset ${e.byteOffset}`);
  const escapable = (c: number): boolean => c > 0 && c <= 126;
  /** The URL of "(...)" starting at i (just after '('), unescaping '\x'; returns [url, index of ')']. */
  const readUrl = (i: number): [string, number] => {
    const urlBegin = i;
    const bytes: number[] = [];
    while (i < n && text[i] !== C.RPAREN) {
      if (text[i] === C.BACKSLASH && escapable(at(text, i + 1))) {
        bytes.push(text[i + 1]!);
        i += 2;
        continue;
      }
      bytes.push(text[i++]!);
    }
    if (at(text, i) !== C.RPAREN) fail(`Can't find end of a URL at byte offset ${urlBegin}`);
    return [fromUtf8(bytes), i];
  };

  let haveBlockquote = false;
  let canStartBlockquote = true;
  for (let i = 0; i < n; i++) {
    const c = text[i]!;
    if (c === C.BACKSLASH && escapable(at(text, i + 1))) {
      i++;
      utf16 += 1;
      out.push(text[i]!);
      if (text[i] !== C.CR) canStartBlockquote = text[i] === C.NL;
      continue;
    }

    const topType = nested.length > 0 ? nested[nested.length - 1]!.type : undefined;
    const inCode = topType === T.Code || topType === T.Pre || topType === T.PreCode;
    const isReserved = inCode ? c === C.BACKTICK : MDV2_RESERVED.has(c);
    if (!isReserved) {
      if (isUtf8First(c)) {
        utf16 += c >= 0xf0 ? 2 : 1;
        if (c !== C.CR) canStartBlockquote = false;
      }
      out.push(c);
      continue;
    }

    let isEndOfAnEntity = false;
    if (topType !== undefined) {
      if (haveBlockquote && c === C.NL && (i + 1 === n || text[i + 1] !== C.GT)) {
        isEndOfAnEntity = true;
      } else {
        const next = at(text, i + 1);
        switch (topType) {
          case T.Bold:
            isEndOfAnEntity = c === C.STAR;
            break;
          case T.Italic:
            isEndOfAnEntity = c === C.UNDERSCORE && next !== C.UNDERSCORE;
            break;
          case T.Code:
            isEndOfAnEntity = c === C.BACKTICK;
            break;
          case T.Pre:
          case T.PreCode:
            isEndOfAnEntity = c === C.BACKTICK && next === C.BACKTICK && at(text, i + 2) === C.BACKTICK;
            break;
          case T.TextUrl:
          case T.CustomEmoji:
            isEndOfAnEntity = c === C.RBRACKET;
            break;
          case T.Underline:
            isEndOfAnEntity = c === C.UNDERSCORE && next === C.UNDERSCORE;
            break;
          case T.Strikethrough:
            isEndOfAnEntity = c === C.TILDE;
            break;
          case T.Spoiler:
            isEndOfAnEntity = c === C.PIPE && next === C.PIPE;
            break;
          default: // BlockQuote
            isEndOfAnEntity = false;
        }
      }
    }

    if (!isEndOfAnEntity) {
      // begin of an entity
      let type: TdType | null;
      let argument = '';
      const byteOffset = i;
      switch (c) {
        case C.UNDERSCORE:
          if (at(text, i + 1) === C.UNDERSCORE) {
            type = T.Underline;
            i++;
          } else {
            type = T.Italic;
          }
          break;
        case C.STAR:
          type = T.Bold;
          break;
        case C.TILDE:
          type = T.Strikethrough;
          break;
        case C.PIPE:
          if (at(text, i + 1) !== C.PIPE) reserved(c);
          i++;
          type = T.Spoiler;
          break;
        case C.LBRACKET:
          type = T.TextUrl;
          break;
        case C.BACKTICK:
          if (at(text, i + 1) === C.BACKTICK && at(text, i + 2) === C.BACKTICK) {
            i += 3;
            type = T.Pre;
            let languageEnd = i;
            while (!isSpace(at(text, languageEnd)) && at(text, languageEnd) !== C.BACKTICK) languageEnd++;
            if (i !== languageEnd && languageEnd < n && at(text, languageEnd) !== C.BACKTICK) {
              type = T.PreCode;
              argument = fromUtf8(text.subarray(i, languageEnd));
              i = languageEnd;
            }
            // skip one new line in the beginning of the text
            if (at(text, i) === C.NL || at(text, i) === C.CR) {
              if ((at(text, i + 1) === C.NL || at(text, i + 1) === C.CR) && at(text, i) !== at(text, i + 1)) i += 2;
              else i++;
            }
            i--;
          } else {
            type = T.Code;
          }
          break;
        case C.BANG:
          if (at(text, i + 1) !== C.LBRACKET) reserved(c);
          i++;
          type = T.CustomEmoji;
          break;
        case C.NL:
          utf16 += 1;
          out.push(C.NL);
          canStartBlockquote = true;
          type = null;
          break;
        case C.GT:
          if (!canStartBlockquote) reserved(c);
          if (haveBlockquote) {
            type = null;
          } else {
            type = T.BlockQuote;
            haveBlockquote = true;
          }
          break;
        default:
          return reserved(c);
      }
      if (type === null) continue;
      nested.push({ type, argument, offset: utf16, byteOffset, beginPos: out.length });
    } else {
      // end of an entity
      let top = nested[nested.length - 1]!;
      let type = top.type;
      if (c === C.NL && type !== T.BlockQuote) {
        if (
          type !== T.Spoiler ||
          !(top.byteOffset === i - 2 || (top.byteOffset === i - 3 && out.length !== 0 && out[out.length - 1] === C.CR))
        ) {
          cantFindEnd(top);
        }
        nested.pop();
        top = nested[nested.length - 1]!;
        type = top.type;
        if (type !== T.BlockQuote) cantFindEnd(top);
        type = T.ExpandableBlockQuote;
      }
      let argument = top.argument;
      let userId = 0;
      let customEmojiId = '';
      let date: { date: number; flags: number } | null = null;
      let skipEntity = utf16 === top.offset;
      switch (type) {
        case T.Bold:
        case T.Italic:
        case T.Code:
        case T.Strikethrough:
          break;
        case T.Underline:
        case T.Spoiler:
          i++;
          break;
        case T.Pre:
        case T.PreCode:
          i += 2;
          break;
        case T.TextUrl: {
          let url: string;
          if (at(text, i + 1) !== C.LPAREN) {
            // use text as a URL
            url = fromUtf8(out.slice(top.beginPos));
          } else {
            [url, i] = readUrl(i + 2);
          }
          userId = getLinkUserId(url);
          if (userId === 0) {
            url = getCheckedLink(url);
            if (url === '') skipEntity = true;
            else argument = url;
          }
          break;
        }
        case T.CustomEmoji: {
          if (at(text, i + 1) !== C.LPAREN) fail('The entity must contain a tg://emoji or tg://time URL');
          let url: string;
          [url, i] = readUrl(i + 2);
          try {
            customEmojiId = getLinkCustomEmojiId(url);
          } catch (e) {
            if (!(e instanceof LinkError)) throw e;
            try {
              date = getLinkFormattedDate(url);
              type = T.FormattedDate;
            } catch (e2) {
              if (!(e2 instanceof LinkError)) throw e2;
              fail('Invalid tg://emoji or tg://time URL specified');
            }
          }
          break;
        }
        default: // BlockQuote, ExpandableBlockQuote
          haveBlockquote = false;
          out.push(text[i]!);
          canStartBlockquote = true;
          utf16 += 1;
          skipEntity = false;
          break;
      }

      if (!skipEntity) {
        const offset = top.offset;
        const length = utf16 - offset;
        if (userId !== 0) {
          const e = ent(T.MentionName, offset, length);
          e.userId = userId;
          entities.push(e);
        } else if (customEmojiId !== '') {
          const e = ent(type, offset, length);
          e.customEmojiId = customEmojiId;
          entities.push(e);
        } else if (date !== null) {
          const e = ent(type, offset, length);
          e.date = date.date;
          e.dateFlags = date.flags;
          entities.push(e);
        } else {
          entities.push(ent(type, offset, length, argument));
        }
      }
      nested.pop();
    }
  }
  if (haveBlockquote) {
    let type: TdType = T.BlockQuote;
    let top = nested[nested.length - 1]!;
    if (top.type === T.Spoiler && top.byteOffset === n - 2) {
      nested.pop();
      top = nested[nested.length - 1]!;
      type = T.ExpandableBlockQuote;
    }
    if (top.type === T.BlockQuote) {
      const length = utf16 - top.offset;
      if (length !== 0) entities.push(ent(type, top.offset, length));
      nested.pop();
    }
  }
  if (nested.length > 0) cantFindEnd(nested[nested.length - 1]!);
  sortEntities(entities);
  return { text: Uint8Array.from(out), entities };
}

// ---------------------------------------------------------------------------------
// parse_markdown (legacy "Markdown")
// ---------------------------------------------------------------------------------

function parseMarkdownV1(input: Uint8Array): ParseResult {
  // tdlib rewrites the text in place (text[result_size++] = text[i]) and, for "[text]" links
  // without "(url)", reads the URL back from that partly rewritten buffer: reproduce it.
  const text = Uint8Array.from(input);
  const size = text.length;
  let resultSize = 0;
  const entities: Ent[] = [];
  let utf16 = 0;
  for (let i = 0; i < size; i++) {
    const c = text[i]!;
    const next = at(text, i + 1);
    if (c === C.BACKSLASH && (next === C.UNDERSCORE || next === C.STAR || next === C.BACKTICK || next === C.LBRACKET)) {
      i++;
      text[resultSize++] = text[i]!;
      utf16++;
      continue;
    }
    if (c !== C.UNDERSCORE && c !== C.STAR && c !== C.BACKTICK && c !== C.LBRACKET) {
      if (isUtf8First(c)) utf16 += c >= 0xf0 ? 2 : 1;
      text[resultSize++] = text[i]!;
      continue;
    }

    // we are at begin of the entity
    const beginPos = i;
    const endCharacter = c === C.LBRACKET ? C.RBRACKET : c;
    let isPre = false;
    i++;

    let language = '';
    if (c === C.BACKTICK && at(text, i) === C.BACKTICK && at(text, i + 1) === C.BACKTICK) {
      i += 2;
      isPre = true;
      let languageEnd = i;
      while (!isSpace(at(text, languageEnd)) && at(text, languageEnd) !== C.BACKTICK) languageEnd++;
      if (i !== languageEnd && languageEnd < size && at(text, languageEnd) !== C.BACKTICK) {
        language = fromUtf8(text.subarray(i, languageEnd));
        i = languageEnd;
      }
      // skip one new line in the beginning of the text
      if (at(text, i) === C.NL || at(text, i) === C.CR) {
        if ((at(text, i + 1) === C.NL || at(text, i + 1) === C.CR) && at(text, i) !== at(text, i + 1)) i += 2;
        else i++;
      }
    }

    const entityOffset = utf16;
    while (
      i < size &&
      (text[i] !== endCharacter || (isPre && !(at(text, i + 1) === C.BACKTICK && at(text, i + 2) === C.BACKTICK)))
    ) {
      const cur = text[i]!;
      if (isUtf8First(cur)) utf16 += cur >= 0xf0 ? 2 : 1;
      text[resultSize++] = text[i++]!;
    }
    if (i === size) {
      throw new EntityParseError(`Can't find end of the entity starting at byte offset ${beginPos}`);
    }

    if (entityOffset !== utf16) {
      const length = utf16 - entityOffset;
      switch (c) {
        case C.UNDERSCORE:
          entities.push(ent(T.Italic, entityOffset, length));
          break;
        case C.STAR:
          entities.push(ent(T.Bold, entityOffset, length));
          break;
        case C.LBRACKET: {
          let url: string;
          if (at(text, i + 1) !== C.LPAREN) {
            // use text as a URL
            url = fromUtf8(text.subarray(beginPos + 1, i));
          } else {
            i += 2;
            const bytes: number[] = [];
            while (i < size && text[i] !== C.RPAREN) bytes.push(text[i++]!);
            url = fromUtf8(bytes);
          }
          const e = linkEntity(url, entityOffset, length);
          if (e !== null) entities.push(e);
          break;
        }
        default: // '`'
          if (isPre) entities.push(language === '' ? ent(T.Pre, entityOffset, length) : ent(T.PreCode, entityOffset, length, language));
          else entities.push(ent(T.Code, entityOffset, length));
      }
    }
    if (isPre) i += 2;
  }
  return { text: text.slice(0, resultSize), entities };
}

// ---------------------------------------------------------------------------------
// Entity detection: match_mentions, match_bot_commands, match_hashtags, match_cashtags,
// match_bank_card_numbers, match_tg_urls, match_urls, is_email_address, fix_url
// (all on UTF-8 bytes; results are [begin, end) byte ranges)
// ---------------------------------------------------------------------------------

type Range = [number, number];

/** '/(?<=\B)@([a-zA-Z0-9_]{2,32})(?=\b)/u' */
function matchMentions(s: Uint8Array): Range[] {
  const result: Range[] = [];
  const end = s.length;
  let p = 0;
  for (;;) {
    p = s.indexOf(C.AT, p);
    if (p < 0) break;
    if (p !== 0 && isWordChar(decodeAt(s, prevStart(s, p)))) {
      p++;
      continue;
    }
    const begin = ++p;
    while (p !== end && isAlphaDigitUnderscore(s[p]!)) p++;
    const size = p - begin;
    if (size < 2 || size > 32) continue;
    const next = p !== end ? decodeAt(s, p) : 0;
    if (isWordChar(next)) continue;
    result.push([begin - 1, p]);
  }
  return result;
}

const VALID_SHORT_USERNAMES = new Set(['gif', 'nft', 'pic', 'ufc', 'vid']);

/** find_mentions: usernames of 4+ characters, or one of get_valid_short_usernames(). */
function findMentions(s: Uint8Array): Range[] {
  return matchMentions(s).filter(([b, e]) => {
    if (e - b - 1 >= 4) return true;
    return VALID_SHORT_USERNAMES.has(asciiLower(latin1(s, b + 1, e)));
  });
}

/** '/(?<!\b|[\/<>])\/([a-zA-Z0-9_]{1,64})(?:@([a-zA-Z0-9_]{3,32}))?(?!\B|[\/<>])/u' */
function findBotCommands(s: Uint8Array): Range[] {
  const result: Range[] = [];
  const end = s.length;
  let p = 0;
  for (;;) {
    p = s.indexOf(C.SLASH, p);
    if (p < 0) break;
    if (p !== 0) {
      const prev = decodeAt(s, prevStart(s, p));
      if (isWordChar(prev) || prev === C.SLASH || prev === C.LT || prev === C.GT) {
        p++;
        continue;
      }
    }
    const begin = ++p;
    while (p !== end && isAlphaDigitUnderscore(s[p]!)) p++;
    let commandEnd = p;
    const size = commandEnd - begin;
    if (size < 1 || size > 64) continue;
    if (p !== end && s[p] === C.AT) {
      const mentionBegin = ++p;
      while (p !== end && isAlphaDigitUnderscore(s[p]!)) p++;
      const mentionSize = p - mentionBegin;
      if (mentionSize < 3 || mentionSize > 32) continue;
      commandEnd = p;
    }
    const next = p !== end ? decodeAt(s, p) : 0;
    if (isWordChar(next) || next === C.SLASH || next === C.LT || next === C.GT) continue;
    result.push([begin - 1, commandEnd]);
  }
  return result;
}

/** is_hashtag_letter (the category is needed by the caller too). */
function isHashtagLetter(code: number, cat: number): boolean {
  if (code === C.UNDERSCORE || code === 0x200c || code === 0xb7 || (code >= 0xd80 && code <= 0xdff)) return true;
  return cat === CAT_DECIMAL || cat === CAT_LETTER;
}

/** '/(?<=^|[^is_hashtag_letter])#([is_hashtag_letter]{1,256})(?:@([a-zA-Z0-9_]{3,32}))?(?![is_hashtag_letter]*#)/u', with a letter */
function findHashtags(s: Uint8Array): Range[] {
  const result: Range[] = [];
  const end = s.length;
  let p = 0;
  for (;;) {
    p = s.indexOf(C.HASH, p);
    if (p < 0) break;
    if (p !== 0) {
      const prev = decodeAt(s, prevStart(s, p));
      if (isHashtagLetter(prev, category(prev))) {
        p++;
        continue;
      }
    }
    const begin = ++p;
    let size = 0;
    let hashtagEnd = -1;
    let wasLetter = false;
    while (p !== end) {
      const code = decodeAt(s, p);
      const cat = category(code);
      if (!isHashtagLetter(code, cat)) break;
      p = decodedEnd;
      if (size === 255) hashtagEnd = p;
      if (size !== 256) {
        wasLetter ||= cat === CAT_LETTER;
        size++;
      }
    }
    if (hashtagEnd < 0) hashtagEnd = p;
    if (size < 1) continue;
    if (hashtagEnd === p && p !== end && s[p] === C.AT) {
      let usernameEnd = p + 1;
      while (usernameEnd !== end && usernameEnd - p < 33 && isAlphaDigitUnderscore(s[usernameEnd]!)) usernameEnd++;
      if (usernameEnd - p - 1 >= 3) {
        p = usernameEnd;
        hashtagEnd = usernameEnd;
      }
    }
    if (p !== end && s[p] === C.HASH) continue;
    if (!wasLetter) continue;
    result.push([begin - 1, hashtagEnd]);
  }
  return result;
}

/** '/(?<=^|[^$is_hashtag_letter])\$(1INCH|[A-Z]{1,8})(?:@([a-zA-Z0-9_]{3,32}))?(?![$is_hashtag_letter])/u' */
function findCashtags(s: Uint8Array): Range[] {
  const result: Range[] = [];
  const end = s.length;
  let p = 0;
  for (;;) {
    p = s.indexOf(C.DOLLAR, p);
    if (p < 0) break;
    if (p !== 0) {
      const prev = decodeAt(s, prevStart(s, p));
      if (isHashtagLetter(prev, category(prev)) || prev === C.DOLLAR) {
        p++;
        continue;
      }
    }
    const begin = ++p;
    if (end - p >= 5 && latin1(s, p, p + 5) === '1INCH') {
      p += 5;
    } else {
      while (p !== end && s[p]! >= 0x41 && s[p]! <= 0x5a) p++;
    }
    let cashtagEnd = p;
    const size = cashtagEnd - begin;
    if (size < 1 || size > 8) continue;
    if (p !== end && s[p] === C.AT) {
      let usernameEnd = p + 1;
      while (usernameEnd !== end && isAlphaDigitUnderscore(s[usernameEnd]!)) usernameEnd++;
      const length = usernameEnd - p - 1;
      if (length >= 3 && length <= 32) {
        cashtagEnd = usernameEnd;
        p = usernameEnd;
      }
    }
    if (cashtagEnd !== end) {
      const code = decodeAt(s, p);
      if (isHashtagLetter(code, category(code)) || code === C.DOLLAR) continue;
    }
    result.push([begin - 1, cashtagEnd]);
  }
  return result;
}

/** '/(?<=^|[^+_\pL\d-.,])[\d -]{13,}([^_\pL\d-]|$)/' */
function matchBankCardNumbers(s: Uint8Array): Range[] {
  const result: Range[] = [];
  const end = s.length;
  const isCardChar = (c: number): boolean => isDigit(c) || c === C.SP || c === C.MINUS;
  let p = 0;
  for (;;) {
    while (p !== end && !isDigit(s[p]!)) p++;
    if (p === end) break;
    if (p !== 0) {
      const prev = decodeAt(s, prevStart(s, p));
      if (
        prev === C.DOT || prev === C.COMMA || prev === C.PLUS || prev === C.MINUS || prev === C.UNDERSCORE ||
        category(prev) === CAT_LETTER
      ) {
        while (p !== end && isCardChar(s[p]!)) p++;
        continue;
      }
    }
    const begin = p;
    let digitCount = 0;
    while (p !== end && isCardChar(s[p]!)) {
      if (s[p] === C.SP && digitCount >= 16 && digitCount <= 19 && digitCount === p - begin) break; // continuous card number
      if (isDigit(s[p]!)) digitCount++;
      p++;
    }
    if (digitCount < 13 || digitCount > 19) continue;
    let cardEnd = p;
    while (!isDigit(s[cardEnd - 1]!)) cardEnd--;
    if (cardEnd - begin > 2 * digitCount - 1) continue;
    if (cardEnd !== end) {
      const next = decodeAt(s, cardEnd);
      if (next === C.MINUS || next === C.UNDERSCORE || category(next) === CAT_LETTER) continue;
    }
    result.push([begin, cardEnd]);
  }
  return result;
}

/** is_valid_bank_card: Luhn + issuer length rules. */
function isValidBankCard(s: Uint8Array, b: number, e: number): boolean {
  const digits: number[] = [];
  for (let i = b; i < e; i++) if (isDigit(s[i]!)) digits.push(s[i]! - 0x30);
  const count = digits.length;
  let sum = 0;
  for (let i = count; i > 0; i--) {
    const digit = digits[i - 1]!;
    sum += (count - i) % 2 === 0 ? digit : digit < 5 ? 2 * digit : 2 * digit - 9;
  }
  if (sum % 10 !== 0) return false;
  const prefix1 = digits[0]!;
  const prefix2 = prefix1 * 10 + digits[1]!;
  const prefix4 = (prefix2 * 10 + digits[2]!) * 10 + digits[3]!;
  if (prefix1 === 4) return count === 13 || count === 16 || count === 18 || count === 19; // Visa
  if ((51 <= prefix2 && prefix2 <= 55) || (2221 <= prefix4 && prefix4 <= 2720)) return count === 16; // Mastercard
  if (prefix2 === 34 || prefix2 === 37) return count === 15; // American Express
  if (prefix2 === 62 || prefix2 === 81) return count >= 16; // UnionPay
  if (2200 <= prefix4 && prefix4 <= 2204) return count === 16; // MIR
  return true;
}

/** is_url_unicode_symbol */
function isUrlUnicodeSymbol(c: number): boolean {
  if (c >= 0x2000 && c <= 0x206f) return c === 0x200c || c === 0x200d || (c >= 0x2010 && c <= 0x2015);
  return category(c) !== CAT_SEPARATOR;
}
/** is_url_path_symbol */
function isUrlPathSymbol(c: number): boolean {
  if (c === C.NL || c === C.LT || c === C.GT || c === C.DQ || c === 0xab || c === 0xbb) return false;
  return isUrlUnicodeSymbol(c);
}
const BAD_PATH_END_CHARS = new Set(Array.from(".:;,('?!`", (ch) => ch.charCodeAt(0)));

/** '(tg|ton|tonsite)://[a-z0-9_-]{1,253}([/?#][^\s\x{2000}-\x{200b}\x{200e}-\x{200f}\x{2016}-\x{206f}<>«»"]*)?' */
function findTgUrls(s: Uint8Array): Range[] {
  const result: Range[] = [];
  const end = s.length;
  const lowerAt = (i: number): number => asciiLowerByte(s[i]!);
  let p = 0;
  while (end - p > 5) {
    p = s.indexOf(C.COLON, p);
    if (p < 0) break;
    let urlBegin = -1;
    if (end - p >= 3 && s[p + 1] === C.SLASH && s[p + 2] === C.SLASH) {
      if (p >= 2 && lowerAt(p - 2) === 0x74 && lowerAt(p - 1) === 0x67) {
        urlBegin = p - 2; // tg
      } else if (p >= 3 && lowerAt(p - 3) === 0x74 && lowerAt(p - 2) === 0x6f && lowerAt(p - 1) === 0x6e) {
        urlBegin = p - 3; // ton
      } else if (p >= 7 && asciiLower(latin1(s, p - 7, p)) === 'tonsite') {
        urlBegin = p - 3; // sic: tdlib uses `ptr - 3` for "tonsite" too
      }
    }
    if (urlBegin < 0) {
      p++;
      continue;
    }
    p += 3;
    const domainBegin = p;
    while (p !== end && p - domainBegin !== 253 && isAlphaDigitUnderscoreMinus(s[p]!)) p++;
    if (p === domainBegin) continue;
    if (p !== end && (s[p] === C.SLASH || s[p] === C.QUESTION || s[p] === C.HASH)) {
      let pathEnd = p + 1;
      while (pathEnd !== end) {
        const code = decodeAt(s, pathEnd);
        if (!isUrlPathSymbol(code)) break;
        pathEnd = decodedEnd;
      }
      while (pathEnd > p + 1 && BAD_PATH_END_CHARS.has(s[pathEnd - 1]!)) pathEnd--;
      if (s[p] === C.SLASH || pathEnd > p + 1) p = pathEnd;
    }
    result.push([urlBegin, p]);
  }
  return result;
}

function isProtocolSymbol(c: number): boolean {
  // do not allow dots in the protocol; add unicode letters and digits to later discard protocol as invalid
  if (c < 0x80) return isAlphaDigit(c) || c === C.PLUS || c === C.MINUS;
  return category(c) !== CAT_SEPARATOR;
}
function isUserDataSymbol(c: number): boolean {
  switch (c) {
    case C.NL: case C.SLASH: case C.LBRACKET: case C.RBRACKET: case C.LBRACE: case C.RBRACE: case C.LPAREN:
    case C.RPAREN: case C.SQ: case C.BACKTICK: case C.LT: case C.GT: case C.DQ: case C.AT: case 0xab: case 0xbb:
      return false;
    default:
      return isUrlUnicodeSymbol(c);
  }
}
function isDomainSymbol(c: number): boolean {
  if (c < 0xc0) return c === C.DOT || isAlphaDigitUnderscoreMinus(c) || c === C.TILDE;
  return isUrlUnicodeSymbol(c);
}

/** match_urls: candidate URLs and e-mail addresses (filtered by find_urls). */
function matchUrls(s: Uint8Array): Range[] {
  const result: Range[] = [];
  const end = s.length;
  let begin = 0;
  for (;;) {
    const dot = s.indexOf(C.DOT, begin);
    if (dot < 0 || dot + 1 === end) break;
    if (s[dot + 1] === C.SP) {
      begin = dot + 2; // fast path
      continue;
    }

    let domainBegin = dot;
    while (domainBegin !== begin) {
      domainBegin = prevStart(s, domainBegin);
      if (!isDomainSymbol(decodeAt(s, domainBegin))) {
        domainBegin = decodedEnd;
        break;
      }
    }

    let lastAt = -1;
    let domainEnd = dot;
    while (domainEnd !== end) {
      const code = decodeAt(s, domainEnd);
      const next = decodedEnd;
      if (code === C.AT) lastAt = domainEnd;
      else if (!isDomainSymbol(code)) break;
      domainEnd = next;
    }

    if (lastAt >= 0) {
      while (domainBegin !== begin) {
        domainBegin = prevStart(s, domainBegin);
        if (!isUserDataSymbol(decodeAt(s, domainBegin))) {
          domainBegin = decodedEnd;
          break;
        }
      }
    }

    let urlEnd = domainEnd;
    if (urlEnd !== end && s[urlEnd] === C.COLON) {
      let portEnd = urlEnd + 1;
      while (portEnd !== end && isDigit(s[portEnd]!)) portEnd++;
      let portBegin = urlEnd + 1;
      while (portBegin !== portEnd && s[portBegin] === C.ZERO) portBegin++;
      if (portBegin !== portEnd && portEnd - portBegin <= 5 && Number(latin1(s, portBegin, portEnd)) <= 65535) {
        urlEnd = portEnd;
      }
    }

    if (urlEnd !== end && (s[urlEnd] === C.SLASH || s[urlEnd] === C.QUESTION || s[urlEnd] === C.HASH)) {
      let pathEnd = urlEnd + 1;
      while (pathEnd !== end) {
        const code = decodeAt(s, pathEnd);
        if (!isUrlPathSymbol(code)) break;
        pathEnd = decodedEnd;
      }
      while (pathEnd > urlEnd + 1 && BAD_PATH_END_CHARS.has(s[pathEnd - 1]!)) pathEnd--;
      if (s[urlEnd] === C.SLASH || pathEnd > urlEnd + 1) urlEnd = pathEnd;
    }
    while (urlEnd > dot + 1 && s[urlEnd - 1] === C.DOT) urlEnd--;

    let isBad = false;
    let urlBegin = domainBegin;
    if (urlBegin !== begin && s[urlBegin - 1] === C.AT) {
      if (lastAt >= 0) isBad = true;
      let userDataBegin = urlBegin - 1;
      while (userDataBegin !== begin) {
        userDataBegin = prevStart(s, userDataBegin);
        if (!isUserDataSymbol(decodeAt(s, userDataBegin))) {
          userDataBegin = decodedEnd;
          break;
        }
      }
      if (userDataBegin === urlBegin - 1) isBad = true;
      urlBegin = userDataBegin;
    }

    if (urlBegin !== begin) {
      if (urlBegin - begin >= 6 && s[urlBegin - 3] === C.COLON && s[urlBegin - 2] === C.SLASH && s[urlBegin - 1] === C.SLASH) {
        let protocolBegin = urlBegin - 3;
        while (protocolBegin !== begin) {
          protocolBegin = prevStart(s, protocolBegin);
          if (!isProtocolSymbol(decodeAt(s, protocolBegin))) {
            protocolBegin = decodedEnd;
            break;
          }
        }
        const protocol = asciiLower(latin1(s, protocolBegin, urlBegin - 3));
        if (protocol.endsWith('http') && protocol !== 'shttp') urlBegin -= 7;
        else if (protocol.endsWith('https')) urlBegin -= 8;
        else if (protocol.endsWith('ftp') && protocol !== 'tftp' && protocol !== 'sftp') urlBegin -= 6;
        else if (protocol.endsWith('tonsite')) urlBegin -= 10;
        else isBad = true;
      } else {
        const code = decodeAt(s, prevStart(s, urlBegin));
        if (isWordChar(code) || code === C.SLASH || code === C.HASH || code === C.AT) isBad = true;
      }
    }

    if (!isBad) {
      if (urlEnd > dot + 1) result.push([urlBegin, urlEnd]);
      while (urlEnd !== end && s[urlEnd] === C.DOT) urlEnd++;
    } else {
      while (s[urlEnd - 1] !== C.DOT) urlEnd--;
    }
    if (urlEnd <= dot) urlEnd = dot + 1;
    begin = urlEnd;
  }
  return result;
}

/** is_email_address: /^([a-z0-9_-]{0,26}[.+]){0,10}[a-z0-9_-]{1,35}@(([a-z0-9][a-z0-9_-]{0,28})?[a-z0-9][.]){1,6}[a-z]{2,8}$/i */
function isEmailAddress(s: Uint8Array, b: number, e: number): boolean {
  let atPos = -1;
  for (let i = b; i < e; i++) {
    if (s[i] === C.AT) {
      atPos = i;
      break;
    }
  }
  if (atPos < 0 || atPos + 1 === e) return false;

  let prev = b;
  let userdataPartCount = 0;
  for (let i = b; i < atPos; i++) {
    const c = s[i]!;
    if (c === C.DOT || c === C.PLUS) {
      if (i - prev >= 27) return false;
      userdataPartCount++;
      prev = i + 1;
    } else if (!isAlphaDigitUnderscoreMinus(c)) {
      return false;
    }
  }
  userdataPartCount++;
  if (userdataPartCount >= 12) return false;
  const lastPartLength = atPos - prev;
  if (lastPartLength === 0 || lastPartLength >= 36) return false;

  const parts: Range[] = [];
  let partBegin = atPos + 1;
  for (let i = atPos + 1; i <= e; i++) {
    if (i === e || s[i] === C.DOT) {
      parts.push([partBegin, i]);
      partBegin = i + 1;
    }
  }
  if (parts.length <= 1 || parts.length > 7) return false;
  const [tb, te] = parts.pop()!;
  if (te - tb <= 1 || te - tb >= 9) return false;
  for (let i = tb; i < te; i++) if (!isAlpha(s[i]!)) return false;
  for (const [pb, pe] of parts) {
    if (pe === pb || pe - pb >= 31) return false;
    for (let i = pb; i < pe; i++) if (!isAlphaDigitUnderscoreMinus(s[i]!)) return false;
    if (!isAlphaDigit(s[pb]!) || !isAlphaDigit(s[pe - 1]!)) return false;
  }
  return true;
}

// is_common_tld: tdlib's list of top-level domains accepted without a protocol
const COMMON_TLDS = new Set(
  `
  aaa aarp abb abbott abbvie abc able abogado abudhabi ac academy accenture accountant accountants aco
  actor ad ads adult ae aeg aero aetna af afl africa ag agakhan agency ai aig airbus airforce airtel
  akdn al alibaba alipay allfinanz allstate ally alsace alstom am amazon americanexpress
  americanfamily amex amfam amica amsterdam analytics android anquan anz ao aol apartments app apple
  aq aquarelle ar arab aramco archi army arpa art arte as asda asia associates at athleta attorney au
  auction audi audible audio auspost author auto autos aw aws ax axa az azure ba baby baidu banamex
  band bank bar barcelona barclaycard barclays barefoot bargains baseball basketball bauhaus bayern bb
  bbc bbt bbva bcg bcn bd be beats beauty beer bentley berlin best bestbuy bet bf bg bh bharti bi
  bible bid bike bing bingo bio biz bj black blackfriday blockbuster blog bloomberg blue bm bms bmw bn
  bnpparibas bo boats boehringer bofa bom bond boo book booking bosch bostik boston bot boutique box
  br bradesco bridgestone broadway broker brother brussels bs bt build builders business buy buzz bv
  bw by bz bzh ca cab cafe cal call calvinklein cam camera camp canon capetown capital capitalone car
  caravan cards care career careers cars casa case cash casino cat catering catholic cba cbn cbre cc
  cd center ceo cern cf cfa cfd cg ch chanel channel charity chase chat cheap chintai christmas chrome
  church ci cipriani circle cisco citadel citi citic city ck cl claims cleaning click clinic clinique
  clothing cloud club clubmed cm cn co coach codes coffee college cologne com commbank community
  company compare computer comsec condos construction consulting contact contractors cooking cool coop
  corsica country coupon coupons courses cpa cr credit creditcard creditunion cricket crown crs cruise
  cruises cu cuisinella cv cw cx cy cymru cyou cz dabur dad dance data date dating datsun day dclk dds
  de deal dealer deals degree delivery dell deloitte delta democrat dental dentist desi design dev dhl
  diamonds diet digital direct directory discount discover dish diy dj dk dm dnp do docs doctor dog
  domains dot download drive dtv dubai dunlop dupont durban dvag dvr dz earth eat ec eco edeka edu
  education ee eg email emerck energy engineer engineering enterprises epson equipment er ericsson
  erni es esq estate et eu eurovision eus events exchange expert exposed express extraspace fage fail
  fairwinds faith family fan fans farm farmers fashion fast fedex feedback ferrari ferrero fi fidelity
  fido film final finance financial fire firestone firmdale fish fishing fit fitness fj fk flickr
  flights flir florist flowers fly fm fo foo food football ford forex forsale forum foundation fox fr
  free fresenius frl frogans frontier ftr fujitsu fun fund furniture futbol fyi ga gal gallery gallo
  gallup game games gap garden gay gb gbiz gd gdn ge gea gent genting george gf gg ggee gh gi gift
  gifts gives giving gl glass gle global globo gm gmail gmbh gmo gmx gn godaddy gold goldpoint golf
  goo goodyear goog google gop got gov gp gq gr grainger graphics gratis green gripe grocery group gs
  gt gu gucci guge guide guitars guru gw gy hair hamburg hangout haus hbo hdfc hdfcbank health
  healthcare help helsinki here hermes hiphop hisamitsu hitachi hiv hk hkt hm hn hockey holdings
  holiday homedepot homegoods homes homesense honda horse hospital host hosting hot hotels hotmail
  house how hr hsbc ht hu hughes hyatt hyundai ibm icbc ice icu id ie ieee ifm ikano il im imamat imdb
  immo immobilien in inc industries infiniti info ing ink institute insurance insure int international
  intuit investments io ipiranga iq ir irish is ismaili ist istanbul it itau itv jaguar java jcb je
  jeep jetzt jewelry jio jll jm jmp jnj jo jobs joburg jot joy jp jpmorgan jprs juegos juniper kaufen
  kddi ke kerryhotels kerrylogistics kerryproperties kfh kg kh ki kia kids kim kindle kitchen kiwi km
  kn koeln komatsu kosher kp kpmg kpn kr krd kred kuokgroup kw ky kyoto kz la lacaixa lamborghini
  lamer lancaster land landrover lanxess lasalle lat latino latrobe law lawyer lb lc lds lease leclerc
  lefrak legal lego lexus lgbt li lidl life lifeinsurance lifestyle lighting like lilly limited limo
  lincoln link lipsy live living lk llc llp loan loans locker locus lol london lotte lotto love lpl
  lplfinancial lr ls lt ltd ltda lu lundbeck luxe luxury lv ly ma madrid maif maison makeup man
  management mango map market marketing markets marriott marshalls mattel mba mc mckinsey md me med
  media meet melbourne meme memorial men menu merckmsd mg mh miami microsoft mil mini mint mit
  mitsubishi mk ml mlb mls mm mma mn mo mobi mobile moda moe moi mom monash money monster mormon
  mortgage moscow moto motorcycles mov movie mp mq mr ms msd mt mtn mtr mu museum music mv mw mx my mz
  na nab nagoya name navy nba nc ne nec net netbank netflix network neustar new news next nextdirect
  nexus nf nfl ng ngo nhk ni nico nike nikon ninja nissan nissay nl no nokia norton now nowruz nowtv
  np nr nra nrw ntt nu nyc nz obi observer office okinawa olayan olayangroup ollo om omega one ong
  onion onl online ooo open oracle orange org organic origins osaka otsuka ott ovh pa page panasonic
  paris pars partners parts party pay pccw pe pet pf pfizer pg ph pharmacy phd philips phone photo
  photography photos physio pics pictet pictures pid pin ping pink pioneer pizza pk pl place play
  playstation plumbing plus pm pn pnc pohl poker politie porn post pr pramerica praxi press prime pro
  prod productions prof progressive promo properties property protection pru prudential ps pt pub pw
  pwc py qa qpon quebec quest racing radio re read realestate realtor realty recipes red redstone
  redumbrella rehab reise reisen reit reliance ren rent rentals repair report republican rest
  restaurant review reviews rexroth rich richardli ricoh ril rio rip ro rocks rodeo rogers room rs
  rsvp ru rugby ruhr run rw rwe ryukyu sa saarland safe safety sakura sale salon samsclub samsung
  sandvik sandvikcoromant sanofi sap sarl sas save saxo sb sbi sbs sc scb schaeffler schmidt
  scholarships school schule schwarz science scot sd se search seat secure security seek select sener
  services seven sew sex sexy sfr sg sh shangrila sharp shell shia shiksha shoes shop shopping shouji
  show si silk sina singles site sj sk ski skin sky skype sl sling sm smart smile sn sncf so soccer
  social softbank software sohu solar solutions song sony soy spa space sport spot sr srl ss st stada
  staples star statebank statefarm stc stcgroup stockholm storage store stream studio study style su
  sucks supplies supply support surf surgery suzuki sv swatch swiss sx sy sydney systems sz tab taipei
  talk taobao target tatamotors tatar tattoo tax taxi tc tci td tdk team tech technology tel temasek
  tennis teva tf tg th thd theater theatre tiaa tickets tienda tips tires tirol tj tjmaxx tjx tk
  tkmaxx tl tm tmall tn to today tokyo ton tools top toray toshiba total tours town toyota toys tr
  trade trading training travel travelers travelersinsurance trust trv tt tube tui tunes tushu tv tvs
  tw tz ua ubank ubs ug uk unicom university uno uol ups us uy uz va vacations vana vanguard vc ve
  vegas ventures verisign vermögensberater vermögensberatung versicherung vet vg vi viajes video vig
  viking villas vin vip virgin visa vision viva vivo vlaanderen vn vodka volvo vote voting voto voyage
  vu wales walmart walter wang wanggou watch watches weather weatherchannel webcam weber website wed
  wedding weibo weir wf whoswho wien wiki williamhill win windows wine winners wme wolterskluwer
  woodside work works world wow ws wtc wtf xbox xerox xihuan xin ελ ευ бг бел дети ею католик ком мкд
  мон москва онлайн орг рус рф сайт срб укр қаз հայ ישראל קום ابوظبي ارامكو الاردن البحرين الجزائر
  السعودية العليان المغرب امارات ایران بارت بازار بيتك بھارت تونس سودان سورية شبكة عراق عرب عمان
  فلسطين قطر كاثوليك كوم مصر مليسيا موريتانيا موقع همراه پاکستان ڀارت कॉम नेट भारत भारतम् भारोत संगठन
  বাংলা ভারত ভাৰত ਭਾਰਤ ભારત ଭାରତ இந்தியா இலங்கை சிங்கப்பூர் భారత్ ಭಾರತ ഭാരതം ලංකා คอม ไทย ລາວ გე みんな
  アマゾン クラウド グーグル コム ストア セール ファッション ポイント 世界 中信 中国 中國 中文网 亚马逊 企业 佛山 信息 健康 八卦 公司 公益 台湾 台灣 商城 商店 商标 嘉里
  嘉里大酒店 在线 大拿 天主教 娱乐 家電 广东 微博 慈善 我爱你 手机 招聘 政务 政府 新加坡 新闻 时尚 書籍 机构 淡马锡 游戏 澳門 点看 移动 组织机构 网址 网店 网站 网络 联通
  谷歌 购物 通販 集团 電訊盈科 飞利浦 食品 餐厅 香格里拉 香港 닷넷 닷컴 삼성 한국 xxx xyz yachts yahoo yamaxun yandex ye yodobashi yoga
  yokohama you youtube yt yun za zappos zara zero zip zm zone zuerich zw
`.trim().split(/\s+/),
);

function isCommonTld(s: Uint8Array, b: number, e: number): boolean {
  let isLower = true;
  for (let i = b; i < e; i++) {
    if (s[i]! < 0x61 || s[i]! > 0x7a) {
      isLower = false;
      break;
    }
  }
  const str = fromUtf8(s.subarray(b, e));
  if (isLower) return COMMON_TLDS.has(str); // fast path
  const chars = Array.from(str);
  const lowerChars = chars.map((ch) => {
    const l = ch.toLowerCase();
    return Array.from(l).length === 1 ? l : ch; // utf8_to_lower maps code point to code point
  });
  const lower = lowerChars.join('');
  if (lower !== str && lowerChars.slice(1).join('') === chars.slice(1).join('')) return false;
  return COMMON_TLDS.has(lower);
}

/** fix_url: the accepted prefix of s[b, e) as [b, end], or null. */
function fixUrl(s: Uint8Array, b: number, e: number): Range | null {
  let hasProtocol = false;
  let strBegin = b;
  const start = asciiLower(latin1(s, b, Math.min(e, b + 10)));
  if (start.startsWith('http://') || start.startsWith('https://') || start.startsWith('ftp://') || start.startsWith('tonsite://')) {
    strBegin = s.indexOf(C.COLON, b) + 3;
    hasProtocol = true;
  }
  let domainEnd = e;
  for (let i = strBegin; i < e; i++) {
    if (s[i] === C.SLASH || s[i] === C.QUESTION || s[i] === C.HASH) {
      domainEnd = i;
      break;
    }
  }
  let domainBegin = strBegin;
  const pathBegin = domainEnd;
  for (let i = domainBegin; i < domainEnd; i++) {
    if (s[i] === C.AT) {
      domainBegin = i + 1;
      break;
    }
  }
  for (let i = domainEnd - 1; i >= domainBegin; i--) {
    if (s[i] === C.COLON) {
      domainEnd = i;
      break;
    }
  }

  if (domainEnd - domainBegin === 12 && asciiLower(latin1(s, domainBegin, domainEnd)) === 'teiegram.org') return null;

  const balance = [0, 0, 0];
  const pathLength = e - pathBegin;
  let pathPos = 0;
  for (; pathPos < pathLength; pathPos++) {
    switch (s[pathBegin + pathPos]) {
      case C.LPAREN:
        balance[0]!++;
        break;
      case C.LBRACKET:
        balance[1]!++;
        break;
      case C.LBRACE:
        balance[2]!++;
        break;
      case C.RPAREN:
        balance[0]!--;
        break;
      case C.RBRACKET:
        balance[1]!--;
        break;
      case C.RBRACE:
        balance[2]!--;
        break;
    }
    if (balance[0]! < 0 || balance[1]! < 0 || balance[2]! < 0) break;
  }
  while (pathPos > 0 && BAD_PATH_END_CHARS.has(s[pathBegin + pathPos - 1]!)) pathPos--;
  const fullEnd = e - (pathLength - pathPos);

  const d = (k: number): number => at(s, domainBegin + k);
  const domainLength = domainEnd - domainBegin;
  let prev = 0;
  let domainPartCount = 0;
  let hasNonDigit = false;
  let isIpv4 = true;
  for (let i = 0; i <= domainLength; i++) {
    if (i === domainLength || d(i) === C.DOT) {
      const partSize = i - prev;
      if (partSize === 0 || partSize >= 64 || d(i - 1) === C.MINUS) return null;
      if (isIpv4) {
        if (partSize > 3) isIpv4 = false;
        if (
          partSize === 3 &&
          (d(prev) >= 0x33 || (d(prev) === 0x32 && (d(prev + 1) >= 0x36 || (d(prev + 1) === 0x35 && d(prev + 2) >= 0x36))))
        ) {
          isIpv4 = false;
        }
        if (d(prev) === C.ZERO && partSize >= 2) isIpv4 = false;
      }
      domainPartCount++;
      if (i !== domainLength) prev = i + 1;
    } else if (!isDigit(d(i))) {
      isIpv4 = false;
      hasNonDigit = true;
    }
  }
  if (domainPartCount === 1) return null;
  if (isIpv4 && domainPartCount === 4) return [b, fullEnd];
  if (!hasNonDigit) return null;

  const tldBegin = domainBegin + prev;
  if (utf8Length(s, tldBegin, domainEnd) <= 1) return null;
  if (latin1(s, tldBegin, Math.min(domainEnd, tldBegin + 4)) === 'xn--') {
    if (domainEnd - tldBegin <= 5) return null;
    for (let i = tldBegin + 4; i < domainEnd; i++) if (!isAlphaDigit(s[i]!)) return null;
  } else {
    for (let i = tldBegin; i < domainEnd; i++) if (s[i] === C.UNDERSCORE || s[i] === C.MINUS) return null;
    if (!hasProtocol && !isCommonTld(s, tldBegin, domainEnd)) return null;
  }

  // no '_' in the second-level domain
  prev--;
  while (prev > 0) {
    prev--;
    if (d(prev) === C.UNDERSCORE) return null;
    if (d(prev) === C.DOT) break;
  }
  return [b, fullEnd];
}

/** find_urls: [range, isEmail]. */
function findUrls(s: Uint8Array): Array<[Range, boolean]> {
  const result: Array<[Range, boolean]> = [];
  for (const [b, e] of matchUrls(s)) {
    if (isEmailAddress(s, b, e)) {
      result.push([[b, e], true]);
    } else if (e - b >= 7 && latin1(s, b, b + 7) === 'mailto:' && isEmailAddress(s, b + 7, e)) {
      result.push([[b + 7, e], true]);
    } else {
      const fixed = fixUrl(s, b, e);
      if (fixed !== null && fixed[1] > fixed[0]) result.push([fixed, false]);
    }
  }
  return result;
}

/** UTF-16 offset of every byte position (valid at character starts and at the end). */
function utf16Offsets(s: Uint8Array): Int32Array {
  const map = new Int32Array(s.length + 1);
  let u = 0;
  for (let i = 0; i < s.length; i++) {
    map[i] = u;
    const c = s[i]!;
    if (isUtf8First(c)) u += c >= 0xf0 ? 2 : 1;
  }
  map[s.length] = u;
  return map;
}

/** remove_intersecting_entities: keeps, in sort order, only entities not overlapping a kept one. */
function removeIntersectingEntities(entities: Ent[]): Ent[] {
  let lastEnd = 0;
  const kept: Ent[] = [];
  for (const e of entities) {
    if (e.offset >= lastEnd) {
      lastEnd = e.offset + e.length;
      kept.push(e);
    }
  }
  return kept;
}

/**
 * find_entities(text, skip_bot_commands, skip_media_timestamps = true): Mention, BotCommand, Hashtag,
 * Cashtag, BankCardNumber, Url (tg:// and others), EmailAddress; sorted, non-intersecting, UTF-16 offsets.
 * (Media timestamps are never looked for: the Bot API server always skips them for bots.)
 */
function findEntities(text: Uint8Array, skipBotCommands: boolean): Ent[] {
  let entities: Ent[] = [];
  const add = (type: TdType, ranges: Range[]): void => {
    for (const [b, e] of ranges) entities.push(ent(type, b, e - b));
  };
  add(T.Mention, findMentions(text));
  if (!skipBotCommands) add(T.BotCommand, findBotCommands(text));
  add(T.Hashtag, findHashtags(text));
  add(T.Cashtag, findCashtags(text));
  add(T.BankCardNumber, matchBankCardNumbers(text).filter(([b, e]) => isValidBankCard(text, b, e)));
  add(T.Url, findTgUrls(text));
  for (const [[b, e], isEmail] of findUrls(text)) entities.push(ent(isEmail ? T.EmailAddress : T.Url, b, e - b));

  // fix_entity_offsets
  if (entities.length === 0) return entities;
  sortEntities(entities);
  entities = removeIntersectingEntities(entities);
  const map = utf16Offsets(text);
  for (const e of entities) {
    const end = e.offset + e.length;
    e.offset = map[e.offset]!;
    e.length = map[end]! - e.offset;
  }
  return entities;
}

// ---------------------------------------------------------------------------------
// fix_formatted_text and its helpers
// ---------------------------------------------------------------------------------

/** remove_empty_entities */
function removeEmptyEntities(entities: Ent[]): Ent[] {
  return entities.filter((e) => {
    if (e.length <= 0) return false;
    switch (e.type) {
      case T.TextUrl:
        return e.argument !== '';
      case T.MentionName:
        return isValidUserId(e.userId);
      case T.CustomEmoji:
        return e.customEmojiId !== '' && e.customEmojiId !== '0';
      case T.FormattedDate:
        return e.date > 0;
      default:
        return true;
    }
  });
}

/** are_entities_valid (entities sorted) */
function areEntitiesValid(entities: Ent[]): boolean {
  const endPos = [-1, -1, -1, -1, -1];
  const stack: Ent[] = [];
  let nestedMask = 0;
  for (const e of entities) {
    while (stack.length > 0 && e.offset >= stack[stack.length - 1]!.offset + stack[stack.length - 1]!.length) {
      nestedMask -= mask(stack.pop()!.type); // remove non-intersecting entities from the stack
    }
    if (stack.length > 0) {
      const parent = stack[stack.length - 1]!;
      if (e.offset + e.length > parent.offset + parent.length) return false; // intersects a previous entity
      if ((nestedMask & mask(e.type)) !== 0) return false; // same type as one of the previous nested
      if (isPreEntity(parent.type)) return false; // Pre and Code can't contain nested entities
      if (isPreEntity(e.type) && (nestedMask & ~BLOCKQUOTE_MASK) !== 0) return false; // only blockquote can contain pre
      if ((isContinuous(e.type) || isBlockquote(e.type)) && (nestedMask & CONTINUOUS_MASK) !== 0) return false;
      if (isBlockquote(e.type) && (nestedMask & BLOCKQUOTE_MASK) !== 0) return false; // blockquotes can't be nested
      if ((nestedMask & SPLITTABLE_MASK) !== 0) return false; // the previous nested entity may need to be split
    }
    if (isSplittable(e.type)) {
      const index = splittableIndex(e.type);
      if (endPos[index]! >= e.offset) return false; // the entities can be merged
      endPos[index] = e.offset + e.length;
    }
    stack.push(e);
    nestedMask += mask(e.type);
  }
  return true;
}

/** remove_entities_intersecting_blockquote (both sorted and non-overlapping) */
function removeEntitiesIntersectingBlockquote(entities: Ent[], blockquotes: Ent[]): Ent[] {
  if (blockquotes.length === 0) return entities;
  let q = 0;
  const kept: Ent[] = [];
  for (const e of entities) {
    while (q < blockquotes.length && (!isBlockquote(blockquotes[q]!.type) || blockquotes[q]!.offset + blockquotes[q]!.length <= e.offset)) {
      q++;
    }
    const bq = blockquotes[q];
    if (
      bq !== undefined &&
      (bq.offset + bq.length < e.offset + e.length || (e.offset < bq.offset && bq.offset < e.offset + e.length))
    ) {
      continue;
    }
    kept.push(e);
  }
  return kept;
}

const SPLITTABLE_TYPES: TdType[] = [T.Bold, T.Italic, T.Underline, T.Strikethrough, T.Spoiler];

/** split_entities: splits/merges the splittable entities so that they nest within the others. */
function splitEntities(entities: Ent[], otherEntities: Ent[]): Ent[] {
  const beginPos = [0, 0, 0, 0, 0];
  const endPos = [0, 0, 0, 0, 0];
  let it = 0;
  let result: Ent[] = [];
  const flush = (offset: number): void => {
    for (const type of SPLITTABLE_TYPES) {
      const index = splittableIndex(type);
      if (endPos[index] !== 0 && beginPos[index]! < offset) {
        if (endPos[index]! <= offset) {
          result.push(ent(type, beginPos[index]!, endPos[index]! - beginPos[index]!));
          beginPos[index] = 0;
          endPos[index] = 0;
        } else {
          result.push(ent(type, beginPos[index]!, offset - beginPos[index]!));
          beginPos[index] = offset;
        }
      }
    }
  };
  const addEntities = (endOffset: number): void => {
    while (it < entities.length) {
      const e = entities[it]!;
      if (e.offset >= endOffset) break;
      const index = splittableIndex(e.type);
      if (e.offset <= endPos[index]! && endPos[index] !== 0) {
        if (e.offset + e.length > endPos[index]!) endPos[index] = e.offset + e.length;
      } else {
        flush(e.offset);
        beginPos[index] = e.offset;
        endPos[index] = e.offset + e.length;
      }
      it++;
    }
    flush(endOffset);
  };
  const stack: Ent[] = [];
  const addOffset = (offset: number): void => {
    while (stack.length > 0 && offset >= stack[stack.length - 1]!.offset + stack[stack.length - 1]!.length) {
      const top = stack[stack.length - 1]!;
      const oldSize = result.length;
      addEntities(top.offset + top.length);
      if (isPreEntity(top.type)) result = result.slice(0, oldSize);
      stack.pop();
    }
    addEntities(offset);
  };
  for (const other of otherEntities) {
    addOffset(other.offset);
    stack.push(other);
  }
  addOffset(2147483647);
  sortEntities(result);
  return result;
}

/** resplit_entities */
function resplitEntities(splittable: Ent[], entities: Ent[]): Ent[] {
  if (splittable.length === 0) return entities;
  const split = splitEntities(splittable, entities);
  if (entities.length === 0) return split;
  const combined = entities.concat(split);
  sortEntities(combined);
  return combined;
}

function partitionEntities(entities: Ent[]): { continuous: Ent[]; blockquotes: Ent[]; splittable: Ent[] } {
  const continuous: Ent[] = [];
  const blockquotes: Ent[] = [];
  const splittable: Ent[] = [];
  for (const e of entities) {
    if (isSplittable(e.type)) splittable.push(e);
    else if (isBlockquote(e.type)) blockquotes.push(e);
    else continuous.push(e);
  }
  return { continuous, blockquotes, splittable };
}

/** fix_entities: sorted, properly nested entities (no empty ones in the input). */
function fixEntities(entities: Ent[]): Ent[] {
  sortEntities(entities);
  if (areEntitiesValid(entities)) return entities;
  const parts = partitionEntities(entities);
  let continuous = removeIntersectingEntities(parts.continuous);
  if (parts.blockquotes.length > 0) {
    const blockquotes = removeIntersectingEntities(parts.blockquotes);
    continuous = removeEntitiesIntersectingBlockquote(continuous, blockquotes).concat(blockquotes);
    sortEntities(continuous);
  }
  return resplitEntities(parts.splittable, continuous);
}

/** merge_entities: old entities win; new ones intersecting an old one are dropped. */
function mergeEntities(oldEntities: Ent[], newEntities: Ent[]): Ent[] {
  if (newEntities.length === 0) return oldEntities;
  if (oldEntities.length === 0) return newEntities;
  const result: Ent[] = [];
  let n = 0;
  for (const old of oldEntities) {
    while (n < newEntities.length && newEntities[n]!.offset + newEntities[n]!.length <= old.offset) result.push(newEntities[n++]!);
    const oldEnd = old.offset + old.length;
    result.push(old);
    while (n < newEntities.length && newEntities[n]!.offset < oldEnd) n++;
  }
  while (n < newEntities.length) result.push(newEntities[n++]!);
  return result;
}

/** merge_new_entities: adds found entities that don't conflict with the given ones. */
function mergeNewEntities(entities: Ent[], newEntities: Ent[]): Ent[] {
  if (newEntities.length === 0) return entities;
  const parts = partitionEntities(entities);
  const filtered = removeEntitiesIntersectingBlockquote(newEntities, parts.blockquotes);
  let continuous = mergeEntities(parts.continuous, filtered);
  if (parts.blockquotes.length > 0) {
    continuous = continuous.concat(parts.blockquotes);
    sortEntities(continuous);
  }
  return resplitEntities(parts.splittable, continuous);
}

/** Control characters become spaces, except '\n'; '\r' is removed (clean_input_string). */
function isControlToSpace(c: number): boolean {
  return c <= 32 && c !== C.NL && c !== C.CR;
}

/** replace_offending_characters: runs of LRM/RLM: all but the last become ZWNJ. */
function replaceOffendingCharacters(s: number[] | Uint8Array): void {
  for (let pos = 0; pos < s.length; pos++) {
    if (s[pos] === 0xe2 && at(s, pos + 1) === 0x80 && (at(s, pos + 2) === 0x8e || at(s, pos + 2) === 0x8f)) {
      while (at(s, pos + 3) === 0xe2 && at(s, pos + 4) === 0x80 && (at(s, pos + 5) === 0x8e || at(s, pos + 5) === 0x8f)) {
        s[pos + 2] = 0x8c;
        pos += 3;
      }
      pos += 2;
    }
  }
}

/** clean_input_string (UTF-8 input) */
function cleanInputString(text: Uint8Array): Uint8Array {
  const LENGTH_LIMIT = 35000; // server-side limit
  const size = text.length;
  const out: number[] = [];
  for (let pos = 0; pos < size; pos++) {
    const c = text[pos]!;
    if (isControlToSpace(c)) {
      out.push(C.SP);
    } else if (c === C.CR) {
      // skip
    } else if (c === 0xe2 && pos + 2 < size && text[pos + 1] === 0x80 && text[pos + 2]! >= 0xa8 && text[pos + 2]! <= 0xae) {
      pos += 2; // remove U+2028..U+202E
    } else if (c === 0xcc && pos + 1 < size && (text[pos + 1] === 0xb3 || text[pos + 1] === 0xbf || text[pos + 1] === 0x8a)) {
      pos++; // remove vertical lines U+0333, U+033F, U+030A
    } else {
      out.push(c);
    }
    if (out.length >= LENGTH_LIMIT - 3 && isUtf8First(out[out.length - 1]!)) {
      out.pop();
      break;
    }
  }
  replaceOffendingCharacters(out);
  return Uint8Array.from(out);
}

/** clean_input_string_with_entities: like clean_input_string, moving entity offsets (entities sorted). */
function cleanInputStringWithEntities(text: Uint8Array, entities: Ent[]): Uint8Array {
  const stack: Array<{ e: Ent; skippedBefore: number }> = [];
  let current = 0;
  let utf16 = 0;
  let skipped = 0;
  const size = text.length;
  const out: number[] = [];
  for (let pos = 0; pos <= size; pos++) {
    const c = at(text, pos);
    const isBegin = isUtf8First(c);
    if (isBegin) {
      while (stack.length > 0) {
        const top = stack[stack.length - 1]!;
        const entityEnd = top.e.offset + top.e.length;
        if (utf16 < entityEnd) break;
        if (utf16 !== entityEnd) {
          throw new EntityParseError(
            `Entity beginning at UTF-16 offset ${top.e.offset} ends in a middle of a UTF-16 symbol at byte offset ${pos}`,
          );
        }
        top.e.offset -= top.skippedBefore;
        top.e.length -= skipped - top.skippedBefore;
        stack.pop();
      }
      while (current < entities.length && utf16 >= entities[current]!.offset) {
        if (utf16 !== entities[current]!.offset) {
          throw new EntityParseError(`Entity begins in a middle of a UTF-16 symbol at byte offset ${pos}`);
        }
        stack.push({ e: entities[current++]!, skippedBefore: skipped });
      }
    }
    if (pos === size) break;

    if (isControlToSpace(c)) {
      out.push(C.SP);
      utf16++;
    } else if (c === C.CR) {
      utf16++;
      skipped++;
    } else {
      if (isBegin) utf16 += c >= 0xf0 ? 2 : 1;
      if (c === 0xe2 && pos + 2 < size && text[pos + 1] === 0x80 && text[pos + 2]! >= 0xa8 && text[pos + 2]! <= 0xae) {
        pos += 2;
        skipped++;
      } else if (c === 0xcc && pos + 1 < size && (text[pos + 1] === 0xb3 || text[pos + 1] === 0xbf || text[pos + 1] === 0x8a)) {
        pos++;
        skipped++;
      } else {
        out.push(c);
      }
    }
  }
  if (current !== entities.length) {
    throw new EntityParseError(`Entity begins after the end of the text at UTF-16 offset ${entities[current]!.offset}`);
  }
  if (stack.length > 0) {
    const e = stack[stack.length - 1]!.e;
    throw new EntityParseError(
      `Entity beginning at UTF-16 offset ${e.offset} ends after the end of the text at UTF-16 offset ${e.offset + e.length}`,
    );
  }
  replaceOffendingCharacters(out);
  return Uint8Array.from(out);
}

/** remove_invalid_entities: drops empty entities; returns the last non-whitespace byte and UTF-16 positions. */
function removeInvalidEntities(text: Uint8Array, entities: Ent[]): { entities: Ent[]; lastPos: number; lastUtf16: number } {
  if (entities.length === 0) {
    for (let back = text.length - 1; back >= 0; back--) {
      if (text[back] !== C.NL && text[back] !== C.SP) return { entities, lastPos: back, lastUtf16: 0 /* unused */ };
    }
    return { entities, lastPos: text.length, lastUtf16: -1 };
  }
  let lastPos = text.length;
  let utf16 = 0;
  let lastUtf16 = -1;
  const kept = removeEmptyEntities(entities);
  for (let pos = 0; pos < text.length; pos++) {
    const c = text[pos]!;
    if (c !== C.NL && c !== C.SP) {
      while (!isUtf8First(at(text, pos + 1))) pos++;
      if (c >= 0xf0) utf16++;
      lastPos = pos;
      lastUtf16 = utf16;
    }
    utf16++;
  }
  return { entities: kept, lastPos, lastUtf16 };
}

const EMPTY_SPACE_CHARACTERS = new Set([
  0x1680, 0x180e, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x202f,
  0x205f, 0x2800, 0x3000, 0xfffc,
]);

/** is_empty_string(str) == strip_empty_characters(str, size).empty() */
function isEmptyString(text: Uint8Array): boolean {
  // replace space characters (and U+E0000..U+E00FF tags) with ' ', trim, then look for a non-empty character
  const s = fromUtf8(text);
  const chars: number[] = [];
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    chars.push(EMPTY_SPACE_CHARACTERS.has(code) || (code >= 0xe0000 && code <= 0xe007f) ? C.SP : code);
  }
  let b = 0;
  let e = chars.length;
  while (b < e && isSpace(chars[b]!)) b++;
  while (e > b && isSpace(chars[e - 1]!)) e--;
  for (let i = b; i < e; i++) {
    const code = chars[i]!;
    if (code === C.SP || code === C.NL) continue;
    if ((code >= 0x200b && code <= 0x200f) || code === 0x202e || code === 0xfeff || code === 0xa0) continue;
    return false;
  }
  return true;
}

interface FixParams {
  allowEmpty: boolean;
  allowEmptyString: boolean;
  skipNewEntities: boolean;
  skipBotCommands: boolean;
  skipTrim: boolean;
}

/** fix_formatted_text(text, entities, ..., skip_media_timestamps = true). Entity offsets in UTF-16. */
function fixFormattedTextImpl(text: Uint8Array, entities: Ent[], p: FixParams): { text: Uint8Array; entities: Ent[] } {
  let result: Uint8Array;
  if (entities.length === 0) {
    result = cleanInputString(text);
  } else {
    for (const e of entities) {
      if (!(e.offset >= 0 && e.offset <= 1000000)) {
        throw new EntityParseError(`Receive an entity with incorrect offset ${e.offset}`);
      }
      if (!(e.length >= 0 && e.length <= 1000000)) {
        throw new EntityParseError(`Receive an entity with incorrect length ${e.length}`);
      }
    }
    entities = fixEntities(removeEmptyEntities(entities));
    result = cleanInputStringWithEntities(text, entities);
  }

  // entities are still sorted by offset and length, but not by type
  const r = removeInvalidEntities(result, entities);
  entities = r.entities;
  if (r.lastUtf16 === -1) {
    if (p.allowEmpty) return { text: new Uint8Array(0), entities: [] };
    throw new EntityParseError('Text must be non-empty');
  }

  // re-fix entities if needed after removal of some characters
  entities = fixEntities(entities);

  let out: Uint8Array;
  if (p.skipTrim) {
    out = result;
  } else {
    // rtrim
    result = result.slice(0, r.lastPos + 1);
    while (entities.length > 0 && entities[entities.length - 1]!.offset > r.lastUtf16) entities.pop();
    let needSort = false;
    for (const e of entities) {
      if (e.offset + e.length > r.lastUtf16 + 1) {
        e.length = r.lastUtf16 + 1 - e.offset;
        needSort = true;
      }
    }
    if (needSort) sortEntities(entities);

    // ltrim (only whitespace before the first entity)
    let firstNonWhitespace = 0;
    const firstEntityBegin = entities.length === 0 ? result.length : entities[0]!.offset;
    while (firstNonWhitespace < firstEntityBegin && (result[firstNonWhitespace] === C.SP || result[firstNonWhitespace] === C.NL)) {
      firstNonWhitespace++;
    }
    if (firstNonWhitespace > 0) {
      out = result.slice(firstNonWhitespace);
      for (const e of entities) e.offset -= firstNonWhitespace;
    } else {
      out = result;
    }
  }

  if (isEmptyString(out)) {
    if (!p.allowEmpty) throw new EntityParseError('Text must be non-empty');
    if (!p.allowEmptyString) {
      out = new Uint8Array(0);
      entities = [];
    }
  }

  const LENGTH_LIMIT = 35000; // server-side limit
  if (out.length > LENGTH_LIMIT) {
    let newSize = LENGTH_LIMIT;
    while (!isUtf8First(out[newSize]!)) newSize--;
    out = out.slice(0, newSize);
    const textLength = utf16LengthOfBytes(out);
    entities = entities.filter((e) => e.offset + e.length <= textLength);
  }

  if (!p.skipNewEntities) entities = mergeNewEntities(entities, findEntities(out, p.skipBotCommands));
  return { text: out, entities };
}

// ---------------------------------------------------------------------------------
// Conversions between the public MessageEntity and the internal model
// ---------------------------------------------------------------------------------

/** The public form; null for types the Bot API exposes but EntityType lacks (see the module comment). */
function toPublic(e: Ent): MessageEntity | null {
  const base = { offset: e.offset, length: e.length };
  switch (e.type) {
    case T.Mention:
      return { type: 'mention', ...base };
    case T.Hashtag:
      return { type: 'hashtag', ...base };
    case T.BotCommand:
      return { type: 'bot_command', ...base };
    case T.Url:
      return { type: 'url', ...base };
    case T.EmailAddress:
      return { type: 'email', ...base };
    case T.Cashtag:
      return { type: 'cashtag', ...base };
    case T.PhoneNumber:
      return { type: 'phone_number', ...base };
    case T.Bold:
      return { type: 'bold', ...base };
    case T.Italic:
      return { type: 'italic', ...base };
    case T.Underline:
      return { type: 'underline', ...base };
    case T.Strikethrough:
      return { type: 'strikethrough', ...base };
    case T.Spoiler:
      return { type: 'spoiler', ...base };
    case T.BlockQuote:
      return { type: 'blockquote', ...base };
    case T.ExpandableBlockQuote:
      return { type: 'expandable_blockquote', ...base };
    case T.Code:
      return { type: 'code', ...base };
    case T.Pre:
      return { type: 'pre', ...base };
    case T.PreCode:
      return { type: 'pre', ...base, language: e.argument };
    case T.TextUrl:
      return { type: 'text_link', ...base, url: e.argument };
    case T.MentionName:
      return { type: 'text_mention', ...base, userId: e.userId };
    case T.CustomEmoji:
      return { type: 'custom_emoji', ...base, customEmojiId: e.customEmojiId };
    default: // BankCardNumber, MediaTimestamp, FormattedDate
      return null;
  }
}

function toPublicList(entities: Ent[]): MessageEntity[] {
  const result: MessageEntity[] = [];
  for (const e of entities) {
    const p = toPublic(e);
    if (p !== null) result.push(p);
  }
  return result;
}

/** clean_input_string on a JS string (used for urls and languages of client entities). */
function cleanString(s: string): string {
  return fromUtf8(cleanInputString(utf8(s)));
}

/** JsonObject::get_required_int_field / get_required_long_field: the value as a canonical decimal. */
function requiredInteger(obj: Record<string, unknown>, name: string, bits: 32 | 64): bigint {
  const value = obj[name];
  if (value === undefined || value === null) throw new EntityParseError(`Can't parse MessageEntity: Can't find field "${name}"`);
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'bigint') {
    throw new EntityParseError(`Can't parse MessageEntity: Field "${name}" must be a Number`);
  }
  const parsed = parseInt64Safe(String(value));
  if (parsed === null || (bits === 32 && (parsed > 2147483647n || parsed < -2147483648n))) {
    throw new EntityParseError(`Can't parse MessageEntity: Field "${name}" must be a valid Number`);
  }
  return parsed;
}

function optionalString(obj: Record<string, unknown>, name: string, alias?: string): string | undefined {
  let value = obj[name];
  if ((value === undefined || value === null) && alias !== undefined) {
    value = obj[alias];
    name = alias;
  }
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return String(value);
  throw new EntityParseError(`Can't parse MessageEntity: Field "${name}" must be of type String`);
}

/**
 * Client-given entities, as the Bot API reads them (Client::get_text_entity: types it doesn't take from
 * clients — mention, hashtag, cashtag, bot_command, url, email, phone_number, bank_card_number — are
 * ignored) and as tdlib converts them (get_message_entities). Accepts the camelCase fields of
 * {@link MessageEntity} and the Bot API's snake_case JSON (`user.id`, `custom_emoji_id`).
 */
function fromClientEntities(list: readonly MessageEntity[]): Ent[] {
  const entities: Ent[] = [];
  for (const item of list) {
    if (item === null || typeof item !== 'object') throw new EntityParseError("Can't parse MessageEntity: expected an Object");
    const obj = item as unknown as Record<string, unknown>;
    const offset = Number(requiredInteger(obj, 'offset', 32));
    const length = Number(requiredInteger(obj, 'length', 32));
    if (obj.type === undefined || obj.type === null) throw new EntityParseError(`Can't parse MessageEntity: Can't find field "type"`);
    const type = optionalString(obj, 'type') ?? '';
    if (type === '') throw new EntityParseError("Can't parse MessageEntity: Type is not specified");
    switch (type) {
      case 'bold':
        entities.push(ent(T.Bold, offset, length));
        break;
      case 'italic':
        entities.push(ent(T.Italic, offset, length));
        break;
      case 'underline':
        entities.push(ent(T.Underline, offset, length));
        break;
      case 'strikethrough':
        entities.push(ent(T.Strikethrough, offset, length));
        break;
      case 'spoiler':
        entities.push(ent(T.Spoiler, offset, length));
        break;
      case 'code':
        entities.push(ent(T.Code, offset, length));
        break;
      case 'blockquote':
        entities.push(ent(T.BlockQuote, offset, length));
        break;
      case 'expandable_blockquote':
        entities.push(ent(T.ExpandableBlockQuote, offset, length));
        break;
      case 'pre': {
        const language = optionalString(obj, 'language') ?? '';
        entities.push(language === '' ? ent(T.Pre, offset, length) : ent(T.PreCode, offset, length, cleanString(language)));
        break;
      }
      case 'text_link': {
        const rawUrl = optionalString(obj, 'url');
        if (rawUrl === undefined) throw new EntityParseError(`Can't parse MessageEntity: Can't find field "url"`);
        const url = cleanString(rawUrl);
        const userId = getLinkUserId(url);
        if (userId !== 0) {
          const e = ent(T.MentionName, offset, length);
          e.userId = userId;
          entities.push(e);
          break;
        }
        try {
          entities.push(ent(T.TextUrl, offset, length, checkLink(url)));
        } catch (err) {
          if (err instanceof EntityParseError) throw new EntityParseError(`Entity ${err.message}`);
          throw err;
        }
        break;
      }
      case 'text_mention': {
        let id: bigint;
        if (obj.userId !== undefined && obj.userId !== null) {
          id = requiredInteger(obj, 'userId', 64);
        } else {
          const user = obj.user;
          if (user === undefined || user === null) throw new EntityParseError(`Can't parse MessageEntity: Can't find field "user"`);
          if (typeof user !== 'object') throw new EntityParseError(`Can't parse MessageEntity: Field "user" must be of type Object`);
          id = requiredInteger(user as Record<string, unknown>, 'id', 64);
        }
        const e = ent(T.MentionName, offset, length);
        e.userId = id > 0n && id <= BigInt(MAX_USER_ID) ? Number(id) : 0; // invalid ids are dropped later
        entities.push(e);
        break;
      }
      case 'custom_emoji': {
        const name = obj.customEmojiId !== undefined && obj.customEmojiId !== null ? 'customEmojiId' : 'custom_emoji_id';
        const id = requiredInteger(obj, name, 64);
        if (id === 0n) throw new EntityParseError('Invalid custom emoji identifier specified');
        const e = ent(T.CustomEmoji, offset, length);
        e.customEmojiId = id.toString();
        entities.push(e);
        break;
      }
      case 'date_time': {
        const unixTime = Number(requiredInteger(obj, 'unix_time', 32));
        const format = optionalString(obj, 'date_time_format') ?? '';
        if (format !== '' && format !== 'r' && format !== 'R' && /[^tTdDwW]/.test(format)) {
          throw new EntityParseError('Invalid date-time format specified');
        }
        if (unixTime <= 0) throw new EntityParseError('Invalid date specified');
        const e = ent(T.FormattedDate, offset, length);
        e.date = unixTime;
        e.dateFlags = format === '' ? 0 : getDateFlags(format);
        entities.push(e);
        break;
      }
      case 'mention':
      case 'hashtag':
      case 'cashtag':
      case 'bot_command':
      case 'url':
      case 'email':
      case 'phone_number':
      case 'bank_card_number':
        break; // the Bot API ignores these
      default:
        throw new EntityParseError("Can't parse MessageEntity: Unsupported type specified");
    }
  }
  return entities;
}

function parseInternal(text: string, parseMode: string): ParseResult | null {
  const mode = asciiLower(parseMode);
  // Client::get_formatted_text: no parsing for an empty text, an empty parse_mode or "none"
  if (text === '' || mode === '' || mode === 'none') return null;
  let parse: (t: Uint8Array) => ParseResult;
  if (mode === 'markdown') parse = parseMarkdownV1;
  else if (mode === 'markdownv2') parse = parseMarkdownV2;
  else if (mode === 'html') parse = parseHtml;
  else throw new EntityParseError('Unsupported parse_mode');
  try {
    return parse(utf8(text));
  } catch (e) {
    if (e instanceof EntityParseError) throw new EntityParseError(`Can't parse entities: ${e.message}`);
    throw e;
  }
}

// ---------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------

/** Length in UTF-16 code units (what Telegram's 4096 / 1024 limits count after parsing). */
export function utf16Length(text: string): number {
  return text.length;
}

/**
 * Parses text with parse_mode into plain text + entities (offsets/lengths in UTF-16 code units).
 * parse_mode is matched case-insensitively; "" and "none" mean no parsing (as in the Bot API),
 * and an empty text is never parsed. Errors: "Unsupported parse_mode", "Can't parse entities: ...".
 *
 * This is tdlib's parseTextEntities: the result is not yet cleaned/trimmed/fixed the way a sent
 * message is (e.g. `<pre><code>x</code></pre>` gives both pre and code; trailing spaces stay).
 * Use {@link prepareMessageText} for what Telegram stores for a sent message.
 */
export function parseFormatted(text: string, parseMode: string): { text: string; entities: MessageEntity[] } {
  const parsed = parseInternal(text, parseMode);
  if (parsed === null) return { text, entities: [] };
  return { text: fromUtf8(parsed.text), entities: toPublicList(parsed.entities) };
}

/**
 * Validates and normalises entities given explicitly by a client (the `entities` / `caption_entities`
 * parameters), with tdlib's fix_formatted_text semantics: sorted (offset asc, length desc, then
 * tdlib's type priority), empty ones dropped, overlapping ones fixed (bold/italic/underline/
 * strikethrough/spoiler are split or merged, other overlapping entities dropped, nothing inside
 * code/pre), types the Bot API ignores from clients (mention, url, ...) dropped, text_link urls
 * checked and normalised (`t.me` -> `http://t.me/`, `tg://user?id=N` -> text_mention).
 *
 * Refusals (EntityParseError): unknown type ("Can't parse MessageEntity: Unsupported type specified"),
 * missing fields, bad urls ("Entity URL '...' is invalid: ..."), offsets/lengths out of range or
 * splitting a surrogate pair ("Entity beginning at UTF-16 offset N ends after the end of the text
 * at UTF-16 offset M" — tdlib refuses rather than clips these).
 *
 * Offsets refer to the text as Telegram stores it, which is the input text unless it contains
 * '\r', U+2028..U+202E or combining vertical lines (removed by Telegram); the text is not trimmed
 * here — {@link prepareMessageText} does the whole sendMessage pipeline including trimming.
 */
export function normalizeEntities(text: string, entities: MessageEntity[]): MessageEntity[] {
  const internal = fromClientEntities(entities);
  const fixed = fixFormattedTextImpl(utf8(text), internal, {
    allowEmpty: true,
    allowEmptyString: false,
    skipNewEntities: true,
    skipBotCommands: true,
    skipTrim: true,
  });
  return toPublicList(fixed.entities);
}

/**
 * Entities Telegram computes on a text that came without any (tdlib's find_entities, as for a
 * bot's incoming message): bot_command, mention, hashtag, cashtag, url, email — UTF-16 offsets,
 * sorted, non-overlapping (on overlap the earlier-starting, then longer, one wins).
 * Bank card numbers are found (and win overlaps) but are not returned; phone numbers are not detected.
 */
export function detectEntities(text: string): MessageEntity[] {
  return toPublicList(findEntities(utf8(text), false));
}

export interface PrepareMessageTextOptions {
  /** The Bot API's parse_mode ("HTML", "MarkdownV2", "Markdown", "" or "none"); wins over `entities`. */
  parseMode?: string;
  /** Explicit entities (used when there is no parse_mode). */
  entities?: MessageEntity[];
  /** Accept a text that is empty after cleaning (then the result is empty). Default false. */
  allowEmpty?: boolean;
  /** Add detected entities (mentions, urls, bot commands, ...). Default true. */
  detectEntities?: boolean;
}

/**
 * The whole Bot API sendMessage text pipeline: Client::get_formatted_text (parse_mode or entities)
 * then tdlib's get_formatted_text/fix_formatted_text for a bot — control characters cleaned, '\r'
 * removed, whitespace trimmed (entities clipped accordingly), entities fixed, detected entities
 * merged in. The result is what Telegram stores; check the 4096/1024 limits on `utf16Length(text)`.
 * Errors: "Text is too long" (over 32768 UTF-8 bytes before parsing), parse errors, entity errors,
 * "Text must be non-empty".
 */
export function prepareMessageText(text: string, options: PrepareMessageTextOptions = {}): { text: string; entities: MessageEntity[] } {
  const bytes = utf8(text);
  if (bytes.length > 1 << 15) throw new EntityParseError('Text is too long');
  const parsed = parseInternal(text, options.parseMode ?? '');
  const source = parsed ?? { text: bytes, entities: fromClientEntities(options.entities ?? []) };
  const fixed = fixFormattedTextImpl(source.text, source.entities, {
    allowEmpty: options.allowEmpty ?? false,
    allowEmptyString: false,
    skipNewEntities: !(options.detectEntities ?? true),
    skipBotCommands: false,
    skipTrim: false,
  });
  return { text: fromUtf8(fixed.text), entities: toPublicList(fixed.entities) };
}

// ---------------------------------------------------------------------------------
// Rendering back to HTML / MarkdownV2 (text_html / text_markdown_v2 of some SDKs).
// Not a tdlib port: written so that parseFormatted(render(text, entities)) gives back the
// same text and entities for any entity list that normalizeEntities/parseFormatted produce.
// Entities that are detected automatically (mention, url, ...) are rendered as plain text.
// ---------------------------------------------------------------------------------

const RENDER_PRIORITY: Partial<Record<EntityType, number>> = {
  blockquote: 0,
  expandable_blockquote: 0,
  pre: 11,
  code: 20,
  text_link: 49,
  text_mention: 49,
  bold: 90,
  italic: 91,
  underline: 92,
  strikethrough: 93,
  spoiler: 94,
  custom_emoji: 99,
};

interface RenderHooks {
  open(e: MessageEntity, stack: readonly MessageEntity[]): string;
  close(e: MessageEntity, stack: readonly MessageEntity[]): string;
  /** Text between boundaries; `stack` is the open entities, innermost last. */
  text(chunk: string, stack: readonly MessageEntity[], chunkEnd: number): string;
}

function renderEntities(text: string, entities: readonly MessageEntity[], hooks: RenderHooks): string {
  const list = entities
    .filter((e) => RENDER_PRIORITY[e.type] !== undefined)
    .map((e) => {
      const offset = Math.max(0, Math.min(text.length, e.offset));
      const end = Math.max(offset, Math.min(text.length, e.offset + e.length));
      return { ...e, offset, length: end - offset };
    })
    .filter((e) => e.length > 0)
    .sort((a, b) => a.offset - b.offset || b.length - a.length || RENDER_PRIORITY[a.type]! - RENDER_PRIORITY[b.type]!);
  const boundaries = new Set<number>([0, text.length]);
  for (const e of list) {
    boundaries.add(e.offset);
    boundaries.add(e.offset + e.length);
  }
  const points = [...boundaries].sort((a, b) => a - b);
  const stack: MessageEntity[] = [];
  let out = '';
  let next = 0;
  for (let k = 0; k < points.length; k++) {
    const pos = points[k]!;
    // close what ends here; entities above one that ends are closed and reopened (partial overlap)
    let lowest = -1;
    for (let j = 0; j < stack.length; j++) {
      if (stack[j]!.offset + stack[j]!.length <= pos) {
        lowest = j;
        break;
      }
    }
    if (lowest >= 0) {
      const popped: MessageEntity[] = [];
      while (stack.length > lowest) {
        const e = stack.pop()!;
        out += hooks.close(e, stack);
        popped.push(e);
      }
      for (let j = popped.length - 1; j >= 0; j--) {
        const e = popped[j]!;
        if (e.offset + e.length > pos) {
          out += hooks.open(e, stack);
          stack.push(e);
        }
      }
    }
    while (next < list.length && list[next]!.offset === pos) {
      const e = list[next++]!;
      out += hooks.open(e, stack);
      stack.push(e);
    }
    const end = points[k + 1];
    if (end !== undefined && end > pos) out += hooks.text(text.slice(pos, end), stack, end);
  }
  return out;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>]/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : '&gt;'));
}
function escapeHtmlAttribute(s: string): string {
  return s.replace(/[&<>"]/g, (c) => (c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : '&quot;'));
}

/** Renders text + entities as Bot API HTML (`<b>`, `<i>`, `<u>`, `<s>`, `<tg-spoiler>`, `<code>`, `<pre>`, `<a href>`, `<tg-emoji>`, `<blockquote>`). */
export function toHtml(text: string, entities: MessageEntity[]): string {
  const tags: Record<string, string> = {
    bold: 'b',
    italic: 'i',
    underline: 'u',
    strikethrough: 's',
    spoiler: 'tg-spoiler',
    code: 'code',
    blockquote: 'blockquote',
    expandable_blockquote: 'blockquote',
    text_link: 'a',
    text_mention: 'a',
    custom_emoji: 'tg-emoji',
  };
  return renderEntities(text, entities, {
    open(e) {
      switch (e.type) {
        case 'pre':
          return e.language ? `<pre><code class="language-${escapeHtmlAttribute(e.language)}">` : '<pre>';
        case 'text_link':
          return `<a href="${escapeHtmlAttribute(e.url ?? '')}">`;
        case 'text_mention':
          return `<a href="tg://user?id=${String(e.userId ?? 0)}">`;
        case 'custom_emoji':
          return `<tg-emoji emoji-id="${escapeHtmlAttribute(e.customEmojiId ?? '')}">`;
        case 'expandable_blockquote':
          return '<blockquote expandable>';
        default:
          return `<${tags[e.type]!}>`;
      }
    },
    close(e) {
      if (e.type === 'pre') return e.language ? '</code></pre>' : '</pre>';
      return `</${tags[e.type]!}>`;
    },
    text: (chunk) => escapeHtml(chunk),
  });
}

const MDV2_ESCAPE = /[_*[\]()~`>#+\-=|{}.!\\]/g;

/**
 * Renders text + entities as MarkdownV2. Best effort where MarkdownV2 cannot express the entities:
 * a blockquote must start at a line start and end at a line end (or the text end).
 */
export function toMarkdownV2(text: string, entities: MessageEntity[]): string {
  let out = '';
  // tracks the last emitted thing: a '_' marker makes a following '_' marker ambiguous ("___")
  let lastUnderscoreMarker = false;
  // a blockquote ended by a newline just before: a new one right after needs a separator
  let blockquoteJustEnded = false;
  const inCode = (stack: readonly MessageEntity[]): boolean => stack.some((e) => e.type === 'code' || e.type === 'pre');
  const inBlockquote = (stack: readonly MessageEntity[]): MessageEntity | undefined =>
    stack.find((e) => e.type === 'blockquote' || e.type === 'expandable_blockquote');
  const marker = (s: string): string => {
    let prefix = '';
    if (lastUnderscoreMarker && s.startsWith('_')) prefix = '``'; // an empty code entity separates them
    lastUnderscoreMarker = s.endsWith('_');
    blockquoteJustEnded = false;
    return prefix + s;
  };
  const urlPart = (url: string): string => url.replace(/[\\)]/g, '\\$&');
  out = renderEntities(text, entities, {
    open(e) {
      switch (e.type) {
        case 'bold':
          return marker('*');
        case 'italic':
          return marker('_');
        case 'underline':
          return marker('__');
        case 'strikethrough':
          return marker('~');
        case 'spoiler':
          return marker('||');
        case 'code':
          return marker('`');
        case 'pre':
          return marker('```' + (e.language ?? '') + '\n');
        case 'text_link':
        case 'text_mention':
          return marker('[');
        case 'custom_emoji':
          return marker('![');
        default: {
          // blockquote / expandable_blockquote
          const separator = blockquoteJustEnded ? '``' : '';
          lastUnderscoreMarker = false;
          blockquoteJustEnded = false;
          return separator + '>';
        }
      }
    },
    close(e) {
      switch (e.type) {
        case 'bold':
          return marker('*');
        case 'italic':
          return marker('_');
        case 'underline':
          return marker('__');
        case 'strikethrough':
          return marker('~');
        case 'spoiler':
          return marker('||');
        case 'code':
          return marker('`');
        case 'pre':
          return marker('```');
        case 'text_link':
          return marker(`](${urlPart(e.url ?? '')})`);
        case 'text_mention':
          return marker(`](tg://user?id=${String(e.userId ?? 0)})`);
        case 'custom_emoji':
          return marker(`](tg://emoji?id=${urlPart(e.customEmojiId ?? '')})`);
        default: {
          // blockquote / expandable_blockquote: an expandable one not ending with a newline gets "||" here
          const endsWithNewline = text[e.offset + e.length - 1] === '\n';
          lastUnderscoreMarker = false;
          blockquoteJustEnded = endsWithNewline;
          return e.type === 'expandable_blockquote' && !endsWithNewline ? '||' : '';
        }
      }
    },
    text(chunk, stack, chunkEnd) {
      if (chunk === '') return '';
      lastUnderscoreMarker = false;
      blockquoteJustEnded = false;
      if (inCode(stack)) return chunk.replace(/[`\\]/g, '\\$&');
      const quote = inBlockquote(stack);
      let result = '';
      const chunkStart = chunkEnd - chunk.length;
      for (let i = 0; i < chunk.length; i++) {
        const ch = chunk[i]!;
        if (ch !== '\n' || quote === undefined) {
          result += ch.replace(MDV2_ESCAPE, '\\$&');
          continue;
        }
        const quoteEnd = quote.offset + quote.length;
        const pos = chunkStart + i;
        if (pos + 1 < quoteEnd) result += '\n>'; // the quote goes on: next line starts with '>'
        else result += quote.type === 'expandable_blockquote' ? '||\n' : '\n'; // the quote's last newline
      }
      return result;
    },
  });
  return out;
}
