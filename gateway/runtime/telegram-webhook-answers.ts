/**
 * Methods returned in a webhook's answer, run as Telegram runs them (Bot API, "Making
 * requests when getting updates"): a bot may answer a delivery of its Telegram-surface
 * webhook with a method and its parameters — application/json, x-www-form-urlencoded or
 * multipart/form-data, `method` naming it — and the platform calls it as the bot, as if
 * the bot had called /bot<token>/<method>; whether it worked is reported to nobody.
 * telegraf does this by default (webhookReply), aiogram when a handler returns a method,
 * grammY with canUseWebhookReply.
 *
 * The dispatcher holds no bot token (only their hashes are stored), so the calls carry a
 * bot grant (src/auth/bot-grants.ts): minted here for this one answer, under the key every
 * process shares, and checked by the core's auth step like a token; they go through the
 * same chain as any call of the bot (limits, quotas, logs, metrics), in this process or
 * over gRPC to a core (ROLE=dispatcher). The grant is never logged.
 *
 * What is run: the same typed method table as the Telegram routes (telegram.ts). What is
 * not: a file part (an answer's files are not read: a file parameter must be a file_id),
 * an unknown method, bad parameters, a call the core refuses. Each answer with a `method`
 * is counted (botplatform_webhook_answers_total, by outcome: executed, invalid, failed) and
 * each one not executed is logged with Telegram's description of why; none is retried, and
 * the delivery stays succeeded. An answer without `method` (an empty body, "OK", {}) asks
 * for nothing.
 */
import type { Logger } from 'pino';
import type { BotGrants } from '../../src/auth/bot-grants.js';
import { CallAbort, SURFACE_METADATA } from '../../src/core/context.js';
import { ApiError, Code } from '../../src/errors.js';
import { renderError } from './envelopes.js';
import type { Invoker } from './invoker.js';
import { parseMultipartStream } from './telegram-multipart.js';
import type { TelegramMethods } from './telegram.js';

export type AnswerOutcome = 'executed' | 'invalid' | 'failed';

export interface WebhookAnswersOptions {
  methods: TelegramMethods;
  invoker: Invoker;
  grants: BotGrants;
  logger: Logger;
  /** Text of an answer, at most (MAX_BODY_BYTES, as a request to the surface). */
  maxBodyBytes: number;
  /** How long the answer's calls may take together (REQUEST_TIMEOUT). */
  timeoutMs: number;
  /** Told of each answer that named a method. */
  onOutcome?: (outcome: AnswerOutcome) => void;
}

/** Why an answer's method is not run (logged; the bot is told nothing, as on Telegram). */
class NotRun extends Error {}

/** An answer's parameters by name, or undefined when it is no request (no `method`). */
async function paramsOf(answer: { contentType: string; body: Buffer }, maxBodyBytes: number): Promise<Map<string, unknown> | undefined> {
  const type = answer.contentType.split(';')[0]!.trim().toLowerCase();
  let params: Map<string, unknown>;
  if (type === 'application/json') {
    let json: unknown;
    try {
      json = JSON.parse(answer.body.toString('utf8'));
    } catch {
      return undefined; // not a request: nothing asked for
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
    params = new Map(Object.entries(json));
  } else if (type === 'application/x-www-form-urlencoded') {
    params = new Map(new URLSearchParams(answer.body.toString('utf8')));
  } else if (type === 'multipart/form-data') {
    // Text fields only: a file part is refused (no blob store is given), nothing is staged.
    const body = await parseMultipartStream((async function* () { yield answer.body; })(), answer.contentType, undefined, { maxTextBytes: maxBodyBytes, maxFileBytes: 0, files: false }, []);
    params = new Map(body.fields);
  } else {
    return undefined;
  }
  return params.has('method') ? params : undefined;
}

/** The runner the dispatcher hands each Telegram-surface webhook's 2xx answer to. */
export function createWebhookAnswers(opts: WebhookAnswersOptions) {
  const { methods, invoker, logger } = opts;

  return async function runAnswer(botId: string, answer: { contentType: string; body: Buffer; tooLarge: boolean }): Promise<void> {
    let name: string | undefined;
    let outcome: AnswerOutcome = 'executed';
    try {
      if (answer.tooLarge) throw new NotRun('the answer is too large to read');
      const params = await paramsOf(answer, opts.maxBodyBytes);
      if (!params) return;
      name = String(params.get('method'));
      params.delete('method');
      const method = methods.method(name);
      if (!method) throw new NotRun('Not Found: method not found');
      const metadata = { authorization: `Bearer ${opts.grants.mint(botId)}`, [SURFACE_METADATA]: 'telegram' };
      const signal = new CallAbort();
      const timer = setTimeout(() => signal.abort(new ApiError(Code.DEADLINE_EXCEEDED, 'the answer\'s method did not finish in time')), opts.timeoutMs);
      try {
        const ctx = methods.context(params, (rpc, request) => invoker.invoke(methods.specOf(rpc), request, metadata, signal) as never, async (c, param) => {
          const v = c.param(param);
          if (typeof v === 'string' && v !== '') return v;
          throw ApiError.invalid(param, 'INVALID_TYPE', 'must be a file_id in a webhook answer (its file parts are not read)');
        });
        await method.run(ctx);
      } finally {
        clearTimeout(timer);
      }
    } catch (err) {
      let description: string;
      if (err instanceof NotRun) {
        outcome = 'invalid';
        description = err.message;
      } else {
        const e = ApiError.from(err);
        const rendered = renderError(e, 'runtime');
        outcome = rendered.status < 500 && e.code !== Code.UNAUTHENTICATED ? 'invalid' : 'failed';
        description = String((rendered.body as { description?: unknown }).description ?? e.message);
      }
      logger.warn({ bot: botId, method: name, outcome, description }, 'webhook answer not executed');
    }
    if (name !== undefined || outcome !== 'executed') opts.onOutcome?.(outcome);
  };
}
