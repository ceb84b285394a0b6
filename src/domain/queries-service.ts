/**
 * Answers to queries: answerCallbackQuery and answerInlineQuery. A bot answers only its
 * own queries (ingested for it: incoming.ts), each once, within QUERY_ANSWER_TIMEOUT of
 * its ingest; otherwise Telegram's refusal, word for word ("query is too old and response
 * timeout expired or query ID is invalid", telegram-bot-api's text for QUERY_ID_INVALID),
 * the same whether the id is unknown, another bot's, answered or too old, so a bot learns
 * nothing of other bots' queries. Each answer is an event of the outbound feed and of the
 * bus topic botplatform.messages, written with the query's answer mark in one unit: a
 * callback answer in the chat of the message whose button was pressed, an inline answer
 * in the asking user's partition (the user's id as the chat).
 */
import { ApiError, Code } from '../errors.js';
import type { AnswerInlineQueryRequest, InlineQueryResult, InlineQueryResultsButton } from '../gen/botplatform/v1/runtime_service.js';
import type { CallbackQueryAnswer, InlineQueryAnswer } from '../gen/botplatform/v1/internal_service.js';
import { constraintsOf } from '../gen/constraints.js';
import { outgoingCaption, outgoingText } from '../messages/formatted.js';
import { checkReplyMarkup } from '../messages/reply-markup.js';
import type { QueriesRepo, QueryKind, StoredQuery } from '../storage/queries-repo.js';
import type { UnitsOfWork } from '../storage/units.js';
import { toWireFeedEvent } from '../wire.js';
import type { FilesService } from './files-service.js';
import type { BotPrincipal, RuntimeRpc } from './rpc.js';
import * as check from './validation.js';

/** telegram-bot-api's text for QUERY_ID_INVALID (Client.cpp), the answer to every query a bot cannot answer. */
export const QUERY_TOO_OLD = 'query is too old and response timeout expired or query ID is invalid';

const LIMITS = {
  callback: {
    text: constraintsOf('botplatform.v1.AnswerCallbackQueryRequest', 'text'),
    cacheTime: constraintsOf('botplatform.v1.AnswerCallbackQueryRequest', 'cache_time'),
  },
  inline: {
    results: constraintsOf('botplatform.v1.AnswerInlineQueryRequest', 'results'),
    cacheTime: constraintsOf('botplatform.v1.AnswerInlineQueryRequest', 'cache_time'),
  },
  messageText: constraintsOf('botplatform.v1.InputMessageContent', 'message_text'),
  caption: constraintsOf('botplatform.v1.InlineQueryResult', 'caption'),
};

/** Telegram's bounds (Client.cpp): cache_time is clamped to them, as telegram-bot-api does. */
const MAX_CALLBACK_CACHE_TIME = 30 * 86_400;
const MAX_INLINE_CACHE_TIME = 86_400;
const DEFAULT_INLINE_CACHE_TIME = 300;
/** Telegram's limits of a result id and of next_offset, in bytes. */
const RESULT_ID_BYTES = 64;
const NEXT_OFFSET_BYTES = 64;
const START_PARAMETER = /^[A-Za-z0-9_-]{1,64}$/;
const URL = /^(https?|tg):\/\/\S+$/i;
const RESULT_TYPES = ['article', 'photo', 'document'];

export interface QueriesDeps {
  queries: Pick<QueriesRepo, 'find' | 'answer'>;
  units: Pick<UnitsOfWork, 'feedEvents'>;
  files: Pick<FilesService, 'fileForSend'>;
  /** QUERY_ANSWER_TIMEOUT: how long after its ingest a query may be answered (ms). */
  answerTimeoutMs: number;
  /** Called after each answer committed (wakes this instance's feed streams and its outbox relay). */
  onCommitted?: () => void;
  now?: () => number;
}

const refused = (field: string, reason: string) =>
  new ApiError(Code.INVALID_ARGUMENT, QUERY_TOO_OLD, { details: [{ field, reason, description: QUERY_TOO_OLD }] });

export type QueriesService = Pick<RuntimeRpc, 'answerCallbackQuery' | 'answerInlineQuery'>;

export function createQueriesService(deps: QueriesDeps): QueriesService {
  const now = deps.now ?? Date.now;

  /** The bot's own query of this kind, not answered yet, still in time; else Telegram's refusal. */
  async function answerable(principal: BotPrincipal, id: string, kind: QueryKind, field: string): Promise<StoredQuery> {
    const q = await deps.queries.find(principal.botId, id);
    if (!q || q.kind !== kind) throw refused(field, 'QUERY_ID_INVALID');
    if (q.answeredAt !== null) throw refused(field, 'QUERY_ALREADY_ANSWERED');
    if (now() - q.createdAt > deps.answerTimeoutMs) throw refused(field, 'QUERY_TOO_OLD');
    return q;
  }

  /** The answer on the feed, with the query marked answered in the same unit (a concurrent answer, or one past the time, writes nothing). */
  async function publish(q: StoredQuery, field: string, chatId: number, event: Record<string, unknown>): Promise<void> {
    const at = now();
    await deps.units.feedEvents([{ botId: q.botId, chatId, event }], at, async (w) => {
      if (!(await deps.queries.answer(q.botId, q.id, q.kind, at - deps.answerTimeoutMs, at, w))) throw refused(field, 'QUERY_ALREADY_ANSWERED');
    });
    deps.onCommitted?.();
  }


  /** One result checked, its texts parsed into entities (as the feed carries it); `ids`: the ids of the results before it. */
  async function checkResult(botId: string, r: InlineQueryResult, at: string, ids: ReadonlySet<string>): Promise<InlineQueryResult> {
    const v = new check.Violations();
    if (!RESULT_TYPES.includes(r.type)) v.add(`${at}.type`, 'INVALID_VALUE', `must be one of ${RESULT_TYPES.join(', ')}`);
    const idBytes = Buffer.byteLength(r.id);
    if (idBytes < 1 || idBytes > RESULT_ID_BYTES) v.add(`${at}.id`, 'RESULT_ID_INVALID', `RESULT_ID_INVALID: must be 1 to ${RESULT_ID_BYTES} bytes`);
    else if (ids.has(r.id)) v.add(`${at}.id`, 'RESULT_ID_DUPLICATE', 'RESULT_ID_DUPLICATE: every result needs an id of its own');
    check.safeText(v, `${at}.id`, r.id);
    if ((r.type === 'article' || r.type === 'document') && !r.title?.trim()) v.add(`${at}.title`, 'REQUIRED', `is required for ${r.type} results`);
    check.safeText(v, `${at}.title`, r.title);
    check.safeText(v, `${at}.description`, r.description);
    if (r.type === 'article' && !r.inputMessageContent) v.add(`${at}.input_message_content`, 'REQUIRED', 'is required for article results: the message sent when the result is chosen');
    if (r.type === 'photo' && !r.photoFileId) v.add(`${at}.photo_file_id`, 'REQUIRED', 'is required for photo results');
    if (r.type === 'document' && !r.documentFileId) v.add(`${at}.document_file_id`, 'REQUIRED', 'is required for document results');
    if (r.type === 'article' && (r.photoFileId || r.documentFileId || r.caption !== undefined)) {
      v.add(at, 'INVALID_VALUE', 'an article result takes no photo_file_id, document_file_id or caption');
    }
    if (r.url !== undefined && !URL.test(r.url)) v.add(`${at}.url`, 'URL_INVALID', 'must be an http, https or tg URL');
    if (r.thumbnailUrl !== undefined && !URL.test(r.thumbnailUrl)) v.add(`${at}.thumbnail_url`, 'URL_INVALID', 'must be an http or https URL');
    if (r.replyMarkup && r.replyMarkup.inlineKeyboard.length === 0) v.add(`${at}.reply_markup`, 'INVALID_VALUE', 'must be an inline keyboard');
    // The raw texts within the send methods' bounds (their markup included), before they are parsed.
    if (r.inputMessageContent) check.messageText(v, `${at}.input_message_content.message_text`, r.inputMessageContent.messageText, LIMITS.messageText);
    check.optionalText(v, `${at}.caption`, r.caption, LIMITS.caption);
    v.throwIfAny();
    if (r.replyMarkup) checkReplyMarkup(r.replyMarkup, `${at}.reply_markup`);
    const out: InlineQueryResult = { ...r, parseMode: undefined };
    if (r.inputMessageContent) {
      const c = r.inputMessageContent;
      const text = outgoingText(c.messageText, {
        parseMode: c.parseMode, entities: c.entities, parsedMaxLength: LIMITS.messageText.parsedMaxLength, field: `${at}.input_message_content.message_text`, entitiesField: `${at}.input_message_content.entities`,
      });
      out.inputMessageContent = { messageText: text.text, parseMode: undefined, entities: text.entities };
    }
    if (r.caption) {
      const { caption, captionEntities } = outgoingCaption(r.caption, {
        parseMode: r.parseMode, entities: r.captionEntities, parsedMaxLength: LIMITS.caption.parsedMaxLength, field: `${at}.caption`, entitiesField: `${at}.caption_entities`,
      });
      Object.assign(out, { caption, captionEntities });
    }
    const fileId = r.type === 'photo' ? r.photoFileId : r.type === 'document' ? r.documentFileId : undefined;
    if (fileId) {
      const field = `${at}.${r.type}_file_id`;
      const file = await deps.files.fileForSend(botId, fileId, field);
      if (r.type === 'photo' && !file.mimeType.startsWith('image/')) {
        throw ApiError.invalid(field, 'NOT_AN_IMAGE', `is not an image (mime_type ${file.mimeType}); answer it as a document result`);
      }
    }
    return out;
  }

  function checkButton(b: InlineQueryResultsButton | undefined): void {
    if (!b) return;
    const v = new check.Violations();
    if (!b.text.trim()) v.add('button.text', 'REQUIRED', 'is required');
    check.safeText(v, 'button.text', b.text);
    if ((b.webApp !== undefined) === (b.startParameter !== undefined)) v.add('button', 'INVALID_VALUE', 'needs exactly one of web_app and start_parameter');
    if (b.startParameter !== undefined && !START_PARAMETER.test(b.startParameter)) v.add('button.start_parameter', 'INVALID_FORMAT', 'must be 1 to 64 of A-Z a-z 0-9 _ -');
    if (b.webApp !== undefined && !/^https:\/\/\S+$/i.test(b.webApp.url)) v.add('button.web_app.url', 'URL_INVALID', 'must be an https URL');
    v.throwIfAny();
  }

  return {
    async answerCallbackQuery(req, { principal }) {
      const v = new check.Violations();
      if (!req.callbackQueryId) v.add('callback_query_id', 'REQUIRED', 'is required');
      check.optionalText(v, 'text', req.text, LIMITS.callback.text);
      check.inRange(v, 'cache_time', req.cacheTime, LIMITS.callback.cacheTime);
      if (req.url !== undefined && req.url !== '' && !URL.test(req.url)) v.add('url', 'URL_INVALID', 'must be an http, https or tg URL');
      v.throwIfAny();
      const q = await answerable(principal, req.callbackQueryId, 'callback_query', 'callback_query_id');
      const answer: CallbackQueryAnswer = {
        callbackQueryId: q.id, chatId: q.chatId!, messageId: q.messageId!, userId: q.userId,
        text: req.text || undefined, showAlert: req.showAlert, url: req.url || undefined,
        cacheTime: Math.min(req.cacheTime ?? 0, MAX_CALLBACK_CACHE_TIME),
      };
      await publish(q, 'callback_query_id', q.chatId!, toWireFeedEvent({ callbackQueryAnswer: answer }));
      return { result: true };
    },

    async answerInlineQuery(req: AnswerInlineQueryRequest, { principal }) {
      const v = new check.Violations();
      if (!req.inlineQueryId) v.add('inline_query_id', 'REQUIRED', 'is required');
      check.maxItems(v, 'results', req.results, LIMITS.inline.results, 'results');
      check.inRange(v, 'cache_time', req.cacheTime, LIMITS.inline.cacheTime);
      if (req.nextOffset !== undefined && Buffer.byteLength(req.nextOffset) > NEXT_OFFSET_BYTES) {
        v.add('next_offset', 'NEXT_OFFSET_INVALID', `NEXT_OFFSET_INVALID: must be at most ${NEXT_OFFSET_BYTES} bytes`);
      }
      check.safeText(v, 'next_offset', req.nextOffset);
      v.throwIfAny();
      checkButton(req.button);
      // Checked together (their files read at once); the first refusal in result order is the answer.
      const checked = await Promise.allSettled(req.results.map((r, i) =>
        checkResult(principal.botId, r, `results[${i}]`, new Set(req.results.slice(0, i).map((x) => x.id)))));
      const failed = checked.find((c): c is PromiseRejectedResult => c.status === 'rejected');
      if (failed) throw failed.reason;
      const results = checked.map((c) => (c as PromiseFulfilledResult<InlineQueryResult>).value);
      const q = await answerable(principal, req.inlineQueryId, 'inline_query', 'inline_query_id');
      const answer: InlineQueryAnswer = {
        inlineQueryId: q.id, userId: q.userId, results,
        cacheTime: Math.min(req.cacheTime ?? DEFAULT_INLINE_CACHE_TIME, MAX_INLINE_CACHE_TIME),
        isPersonal: req.isPersonal, nextOffset: req.nextOffset ?? '', button: req.button,
      };
      await publish(q, 'inline_query_id', q.userId, toWireFeedEvent({ inlineQueryAnswer: answer }));
      return { result: true };
    },
  };
}
