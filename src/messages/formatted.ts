/**
 * The entity rules (entities.ts, tdlib's) on the generated types: what the domain calls to
 * give a text its entities, as Telegram would. Entity errors become the platform's
 * INVALID_ARGUMENT naming the field, with tdlib's text as the description.
 */
import { ApiError } from '../errors.js';
import type { MessageEntity } from '../gen/botplatform/v1/update.js';
import { botApiErrorText, detectEntities, EntityParseError, normalizeEntities, prepareMessageText, utf16Length, type EntityType, type MessageEntity as PlainEntity } from './entities.js';

const toProto = (e: PlainEntity): MessageEntity => ({
  type: e.type,
  offset: e.offset,
  length: e.length,
  url: e.url,
  user: e.userId !== undefined ? { id: e.userId, isBot: false, username: undefined, firstName: undefined } : undefined,
  language: e.language,
  customEmojiId: e.customEmojiId,
});

const fromProto = (e: MessageEntity): PlainEntity => ({
  type: e.type as EntityType,
  offset: e.offset,
  length: e.length,
  ...(e.url !== undefined ? { url: e.url } : {}),
  ...(e.user ? { userId: e.user.id } : {}),
  ...(e.language !== undefined ? { language: e.language } : {}),
  ...(e.customEmojiId !== undefined ? { customEmojiId: e.customEmojiId } : {}),
});

const refused = (field: string, err: unknown): never => {
  if (err instanceof EntityParseError) {
    const reason = /^Can't parse entities/.test(err.message) ? 'CANT_PARSE_ENTITIES' : 'INVALID_ENTITIES';
    throw ApiError.invalid(field, reason, botApiErrorText(err.message));
  }
  throw err;
};

/** What tdlib says of the text itself, not of its markup or entities (the text's field is at fault). */
const TEXT_ERRORS: Record<string, string> = { 'Text is too long': 'TEXT_TOO_LONG', 'Text must be non-empty': 'TEXT_EMPTY' };

/**
 * An incoming text's entities (a message users wrote, from the messaging services): the ones
 * given, checked and put in Telegram's order; or, when none are given, the ones Telegram
 * computes (bot_command, mention, hashtag, cashtag, url, email), so that a bot's command
 * handlers fire.
 */
export function incomingEntities(text: string | undefined, given: MessageEntity[], field: string): MessageEntity[] {
  if (text === undefined || text === '') return [];
  try {
    return (given.length > 0 ? normalizeEntities(text, given.map(fromProto)) : detectEntities(text)).map(toProto);
  } catch (err) {
    return refused(field, err);
  }
}

/**
 * A text a bot sends, as Telegram stores it: parsed by parse_mode (HTML, MarkdownV2,
 * Markdown) or with its given entities, cleaned and trimmed, with the entities Telegram
 * detects added; at most `parsedMaxLength` UTF-16 code units after that (markup does not
 * count), as tdlib checks a bot's text ("Message is too long") and caption ("Message caption
 * is too long"). The raw text is bounded before (its field's max_length; and tdlib's 32768
 * bytes of UTF-8, "Text is too long"). Refusals name the text's field, or the entities' when
 * the given entities are at fault.
 */
export function outgoingText(
  text: string,
  opts: { parseMode?: string; entities: MessageEntity[]; parsedMaxLength: number; field: string; entitiesField: string; caption?: boolean },
): { text: string; entities: MessageEntity[] } {
  let out: { text: string; entities: PlainEntity[] };
  try {
    // A caption may be empty once parsed (it is then none: tdlib's get_formatted_text for a caption allows it).
    out = prepareMessageText(text, { parseMode: opts.parseMode, entities: opts.entities.map(fromProto), allowEmpty: opts.caption });
  } catch (err) {
    const textError = err instanceof EntityParseError ? TEXT_ERRORS[err.message] : undefined;
    if (textError) throw ApiError.invalid(opts.field, textError, botApiErrorText((err as Error).message));
    return refused(opts.parseMode ? opts.field : opts.entitiesField, err);
  }
  if (utf16Length(out.text) > opts.parsedMaxLength) {
    throw ApiError.invalid(opts.field, 'MESSAGE_TOO_LONG', opts.caption ? 'message caption is too long' : 'message is too long');
  }
  return { text: out.text, entities: out.entities.map(toProto) };
}

/**
 * A caption a bot sends, as Telegram keeps it (outgoingText's rules for a caption): one
 * that is unset, empty or empty once parsed is none.
 */
export function outgoingCaption(
  text: string | undefined, opts: { parseMode?: string; entities: MessageEntity[]; parsedMaxLength: number; field: string; entitiesField: string },
): { caption: string | undefined; captionEntities: MessageEntity[] } {
  if (!text) return { caption: undefined, captionEntities: [] };
  const parsed = outgoingText(text, { ...opts, caption: true });
  return { caption: parsed.text || undefined, captionEntities: parsed.text ? parsed.entities : [] };
}
