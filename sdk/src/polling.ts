/**
 * Long polling: getUpdates in a loop with offset = the highest update_seq handled
 * plus one, waiting up to `timeoutSeconds` on the service for each call. Errors
 * that may pass (no answer, 5xx) back off exponentially; a 429 waits exactly its
 * retry_after. It will not start, and stops, while a webhook is set: the service
 * answers getUpdates with 409 then, and updates go to the webhook instead.
 */
import type { BotClient } from './clients.js';
import { BotPlatformError } from './errors.js';
import type { Update } from './generated/api.js';

export interface PollingOptions {
  /** Handles one update; updates are handled one at a time, in update_seq order. */
  onUpdate(update: Update): unknown;
  /**
   * Told of a failed call that will be retried (with the wait before the retry), and
   * of an onUpdate that threw (then `update` is set). The default writes to console.error.
   */
  onError?(error: unknown, info: { update?: Update; retryInMs?: number }): void;
  /** Stops the loop: runPolling then resolves. */
  signal?: AbortSignal;
  /** Long-poll wait per call, 0 to 50 seconds (default 30). */
  timeoutSeconds?: number;
  /** Most updates per call, 1 to 100 (default 100). */
  limit?: number;
  /** Update kinds to receive; unchanged when not given. */
  allowedUpdates?: string[];
  /** First update_seq wanted (default: whatever the service still holds). */
  offset?: number;
  /** Backoff after a failed call: first wait and cap, in ms (default 500 and 30,000). */
  backoff?: { initialMs?: number; maxMs?: number };
}

/** Polling was asked for while the bot has a webhook. */
export class WebhookActiveError extends Error {
  override readonly name = 'WebhookActiveError';
  constructor(
    readonly webhookUrl: string,
    options?: { cause?: unknown },
  ) {
    super(
      `this bot has a webhook (${webhookUrl || 'set'}), so getUpdates answers 409 Conflict: a bot receives updates by ` +
        'webhook or by polling, never both. Remove the webhook first (bot.deleteWebhook(), or DELETE ' +
        '/api/v1/bots/my/{id}/webhook in the console); updates not yet delivered then become readable by getUpdates.',
      options,
    );
  }
}

/** Another getUpdates for the same bot took over (two instances of the bot running). */
export class PollingConflictError extends Error {
  override readonly name = 'PollingConflictError';
  constructor(options?: { cause?: unknown }) {
    super('another getUpdates call for this bot ended ours (409): make sure only one instance of the bot is polling', options);
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * Runs until `signal` aborts (then resolves, after confirming the updates handled)
 * or a failure that retrying cannot cure (then rejects): a webhook is set
 * (WebhookActiveError), another poller took over (PollingConflictError), or the
 * token is refused (BotPlatformError 401).
 */
export async function runPolling(bot: BotClient, options: PollingOptions): Promise<void> {
  const { signal } = options;
  const timeout = options.timeoutSeconds ?? 30;
  const initialBackoff = options.backoff?.initialMs ?? 500;
  const maxBackoff = options.backoff?.maxMs ?? 30_000;
  const onError = options.onError ?? ((err: unknown) => console.error('polling:', err));

  const webhookCheck = async (cause?: unknown) => {
    const info = await bot.getWebhookInfo({}, { signal });
    if (info.url || info.delivery_mode === 'webhook') throw new WebhookActiveError(info.url, { cause });
  };
  if (signal?.aborted) return;
  try {
    await webhookCheck();
  } catch (err) {
    if (signal?.aborted) return;
    throw err;
  }

  let offset = options.offset;
  let confirmed = offset;
  let failures = 0;
  let allowed = options.allowedUpdates;
  while (!signal?.aborted) {
    let updates: Update[];
    try {
      updates = await bot.getUpdates({ offset, limit: options.limit, timeout, allowed_updates: allowed }, { signal });
      failures = 0;
      confirmed = offset;
      allowed = undefined;
    } catch (err) {
      if (signal?.aborted) break;
      const e = BotPlatformError.from(err, 'getUpdates');
      if (e.httpStatus === 409) {
        await webhookCheck(e);
        throw new PollingConflictError({ cause: e });
      }
      if (!e.retryable) throw e;
      failures++;
      const wait = e.retryAfter !== undefined
        ? e.retryAfter * 1000
        : Math.min(maxBackoff, initialBackoff * 2 ** (failures - 1)) * (0.5 + Math.random() / 2);
      onError(e, { retryInMs: Math.round(wait) });
      await sleep(wait, signal);
      continue;
    }
    for (const update of updates) {
      if (signal?.aborted) break;
      try {
        await options.onUpdate(update);
      } catch (err) {
        onError(err, { update });
      }
      // A failed handler does not hold the queue: the update is passed over, not retried forever.
      offset = Math.max(offset ?? 0, update.update_seq + 1);
    }
  }
  // Confirm what was handled, so a restart does not see it again.
  if (offset !== undefined && offset !== confirmed) {
    try {
      await bot.getUpdates({ offset, limit: 1, timeout: 0 });
    } catch {
      // Unconfirmed updates come again on the next start; nothing is lost.
    }
  }
}
