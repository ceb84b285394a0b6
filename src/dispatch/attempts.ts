/**
 * One attempt at a leased delivery: read the bot's webhook, send, and record the
 * state the delivery state machine (delivery-state.ts) decides. Shared by the
 * dispatcher (automatic attempts) and the console's manual retry.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { AttemptLog } from '../storage/attempts-repo.js';
import { createGroupCommit } from '../group-commit.js';
import type { SecretBox } from '../auth/secret-box.js';
import { telegramWebhookBody } from '../telegram/bot-api.js';
import type { DeliveriesRepo, DeliveryRecord, DeliveryWrite, OutcomeWrite } from '../storage/deliveries-repo.js';
import type { UnitsOfWork } from '../storage/units.js';
import type { WebhookTarget, WebhooksRepo } from '../storage/webhooks-repo.js';
import { nextDeliveryState, type AttemptFailure, type AttemptResult, type AttemptTrigger } from './delivery-state.js';
import type { WebhookClient, WebhookResult } from './webhook-client.js';

export interface AttemptDeps {
  deliveries: DeliveriesRepo;
  webhooks: WebhooksRepo;
  /** Recording outcomes: deliveries, the updates they close and the webhooks' last errors, together. */
  units: Pick<UnitsOfWork, 'recordAttempts'>;
  client: WebhookClient;
  secretBox: SecretBox;
  /** Delays before each retry, e.g. [1m, 5m, 15m, 1h]; attempts in all = length + 1. */
  scheduleMs: number[];
  logger: Logger;
  now?: () => number;
  /** Told of each recorded attempt: `dead` when it made the delivery dead_letter. */
  onOutcome?: (botId: string, ok: boolean, durationMs: number, dead: boolean) => void;
}

/**
 * Whether a failed attempt says the receiver is overloaded or unreachable (no answer in
 * time, a connection-level failure, or 429/502/503/504): the dispatcher narrows the bot's
 * concurrency window on these.
 */
export function isCongestion(r: AttemptResult): boolean {
  if (r.ok) return false;
  const f = r.failure;
  return f.kind === 'timeout' || f.kind === 'network' || (f.kind === 'http' && [429, 502, 503, 504].includes(f.statusCode));
}

/** The client's answer as a typed result: an HTTP status, or why no answer came. */
export function attemptResultOf(r: WebhookResult, at: number): AttemptResult {
  if (r.ok) return { ok: true, statusCode: r.statusCode ?? 200, durationMs: r.durationMs, at };
  const message = r.error ?? 'failed';
  const failure: AttemptFailure = r.statusCode !== null
    ? { kind: 'http', statusCode: r.statusCode, message }
    : { kind: r.noAnswer ?? 'network', message };
  return { ok: false, failure, durationMs: r.durationMs, at };
}

/**
 * Runs what a bot's 2xx answer to a delivery asks for (a Telegram-surface webhook's
 * answer may carry a method: gateway/runtime/telegram-webhook-answers.ts). Never throws.
 */
export type AnswerHandler = (botId: string, answer: { contentType: string; body: Buffer; tooLarge: boolean }) => Promise<void>;

/** A webhook URL as the delivery log shows it: without the user name and password it may carry. */
export function loggedUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return '(not a URL)';
  }
}

/** Most webhook URLs whose logged form is kept (see loggedUrlOf). */
const URLS_KEPT = 10_000;
const loggedUrls = new Map<string, string>();
/**
 * loggedUrl, kept per URL: a bot's attempts all go to the same few, and parsing one per
 * attempt cost about a third of what the delivery log adds per delivery (profiled,
 * bench:webhooks). Dropped whole past URLS_KEPT.
 */
function loggedUrlOf(url: string): string {
  let logged = loggedUrls.get(url);
  if (logged === undefined) {
    if (loggedUrls.size >= URLS_KEPT) loggedUrls.clear();
    loggedUrls.set(url, (logged = loggedUrl(url)));
  }
  return logged;
}

/** Headers that carry the secret itself, never logged (the signatures are kept: they do not reveal it). */
const SECRET_HEADERS = new Set(['x-telegram-bot-api-secret-token', 'authorization']);

function loggedHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k in headers) out[k] = SECRET_HEADERS.has(k) ? '[redacted]' : headers[k]!;
  return out;
}

/**
 * Ids of the delivery log's rows, in the order this process makes them: the attempt's
 * time (base 36), a counter, and a tag random per process (several dispatchers write the
 * log). Ordered ids append to the table's primary key instead of landing anywhere in it,
 * and cost no read of the system's random source per attempt.
 */
function createAttemptIds(): (at: number) => string {
  const tag = crypto.randomBytes(6).toString('base64url');
  let seq = 0;
  return (at) => `att_${at.toString(36).padStart(9, '0')}${(seq++ % 36 ** 6).toString(36).padStart(6, '0')}${tag}`;
}

/** Most opened webhook secrets kept (see secretOf). */
const SECRETS_KEPT = 10_000;

export function createAttempts(deps: AttemptDeps) {
  const now = deps.now ?? Date.now;
  const attemptId = createAttemptIds();

  // Outcomes are written in group commits: attempts that finish within OUTCOME_LINGER_MS
  // of each other, or while one transaction is being written, share the next (one
  // statement per table for all of them).
  const outcomes = createGroupCommit<OutcomeWrite, boolean>(
    (items) => deps.units.recordAttempts(items), { gather: OUTCOME_LINGER_MS },
  );
  const record = async (id: string, leaseToken: string, next: DeliveryWrite, log: AttemptLog) =>
    (await outcomes.write([{ id, leaseToken, next, log }]))[0]!;

  // Opened webhook secrets by sealed value (an AES-GCM open per attempt costs more than the
  // HMAC it keys): in this process's memory only, never logged; dropped whole past SECRETS_KEPT.
  const secrets = new Map<string, string>();
  const secretOf = (sealed: string) => {
    let secret = secrets.get(sealed);
    if (secret === undefined) {
      if (secrets.size >= SECRETS_KEPT) secrets.clear();
      secrets.set(sealed, (secret = deps.secretBox.open(sealed)));
    }
    return secret;
  };

  let answers: AnswerHandler | undefined;

  return {
    /**
     * Who runs the methods in webhook answers (set once the runtime API is reachable: the
     * core in this process, or over gRPC). Until then an answer's method is not run, and
     * says so in the log.
     */
    handleAnswers(handler: AnswerHandler) {
      answers = handler;
    },

    /**
     * Attempts `delivery` (as read under `leaseToken`). `trigger`: auto walks the
     * retry schedule, manual (the console's retry) leaves it as it is. `webhook`: the
     * bot's, as read with the lease (null: none); read now when not given.
     * `leaseHeld`: asked just before the request leaves; false (the lease may have run
     * out, e.g. after a stall) skips the request and leaves the delivery to whoever
     * holds it next. `onResult`: told what the request came to.
     */
    async attempt(
      delivery: DeliveryRecord, leaseToken: string,
      opts: { trigger?: AttemptTrigger; webhook?: WebhookTarget | null; leaseHeld?: () => boolean; onResult?: (r: AttemptResult) => void } = {},
    ): Promise<'succeeded' | 'failed' | 'no-webhook' | 'lease-lost'> {
      const webhook = opts.webhook !== undefined ? opts.webhook : (await deps.webhooks.get(delivery.botId)) ?? null;
      if (!webhook) {
        await deps.deliveries.release(delivery.id, leaseToken);
        return 'no-webhook';
      }
      if (opts.leaseHeld && !opts.leaseHeld()) {
        deps.logger.warn({ delivery: delivery.id }, 'delivery lease ran out before its attempt; left to the next holder');
        return 'lease-lost';
      }
      // A webhook set through the Telegram-compatible surface gets a Telegram Update.
      const body = webhook.secretHeader ? telegramWebhookBody(delivery.payload) : delivery.payload;
      const attemptedAt = now();
      const sent = await deps.client.send({
        url: webhook.url,
        body,
        secret: secretOf(webhook.secretSealed),
        // During a rotation's overlap the previous secret signs too.
        previousSecret: webhook.previousSecretSealed && (webhook.previousSecretUntil ?? 0) > now() ? secretOf(webhook.previousSecretSealed) : null,
        updateId: delivery.updateId,
        allowedIps: webhook.allowedIps,
        secretHeader: webhook.secretHeader,
        // Only a Telegram-surface webhook's answer may carry a method (Telegram's rule).
        keepAnswer: webhook.secretHeader,
      });
      const result = attemptResultOf(sent, now());
      opts.onResult?.(result);
      const next = nextDeliveryState(delivery, result, opts.trigger ?? 'auto', deps.scheduleMs);
      const recorded = await record(delivery.id, leaseToken, next, {
        id: attemptId(attemptedAt),
        botId: delivery.botId,
        deliveryId: delivery.id,
        updateId: delivery.updateId,
        attemptedAt,
        trigger: opts.trigger === 'manual' ? 'manual' : 'automatic',
        ok: result.ok,
        durationMs: result.durationMs,
        error: sent.ok ? null : sent.error,
        url: loggedUrlOf(webhook.url),
        requestHeaders: loggedHeaders(sent.sentHeaders),
        requestBody: body === delivery.payload ? null : body,
        statusCode: sent.logged ? sent.statusCode : null,
        responseHeaders: sent.logged?.headers ?? null,
        responseBody: sent.logged?.body ?? null,
        responseTruncated: sent.logged?.truncated ?? false,
      });
      if (!recorded) deps.logger.warn({ delivery: delivery.id }, 'delivery lease lost before its outcome was recorded');
      else deps.onOutcome?.(delivery.botId, result.ok, result.durationMs, next.deadLettered);
      // The delivery is done whatever its answer asks for: run after the outcome is
      // recorded, its result reported nowhere (as Telegram), never retried.
      if (sent.answer) {
        if (answers) await answers(delivery.botId, sent.answer);
        else deps.logger.warn({ bot: delivery.botId, delivery: delivery.id }, 'webhook answer not run: the runtime API is not reachable from here yet');
      }
      return result.ok ? 'succeeded' : 'failed';
    },
  };
}

export type Attempts = ReturnType<typeof createAttempts>;

/**
 * How long a manual retry's lease lasts (it is not renewed): past the request timeout
 * with room to record the outcome.
 */
export const leaseFor = (timeoutMs: number) => 2 * timeoutMs + 5000;

/**
 * The dispatcher's leases are short and renewed by a heartbeat (every HEARTBEAT_MS) while
 * their attempts run, outcome write included: a dispatcher that dies leaves its
 * deliveries due again within LEASE_MS, however long the request timeout.
 */
export const LEASE_MS = 3000;
/** How long an outcome waits for others to share its write (see createAttempts). */
export const OUTCOME_LINGER_MS = 5;
export const HEARTBEAT_MS = 1000;
