/**
 * One attempt at a leased delivery: read the bot's webhook, send, and record the
 * state the delivery state machine (delivery-state.ts) decides. Shared by the
 * dispatcher (automatic attempts) and the console's manual retry.
 */
import type { Logger } from 'pino';
import { createGroupCommit } from '../group-commit.js';
import type { SecretBox } from '../auth/secret-box.js';
import type { DeliveriesRepo, DeliveryRecord, DeliveryWrite } from '../storage/deliveries-repo.js';
import type { WebhookTarget, WebhooksRepo } from '../storage/webhooks-repo.js';
import { nextDeliveryState, type AttemptFailure, type AttemptResult, type AttemptTrigger } from './delivery-state.js';
import type { WebhookClient, WebhookResult } from './webhook-client.js';

export interface AttemptDeps {
  deliveries: DeliveriesRepo;
  webhooks: WebhooksRepo;
  client: WebhookClient;
  secretBox: SecretBox;
  /** Delays before each retry, e.g. [1m, 5m, 15m, 1h]; attempts in all = length + 1. */
  scheduleMs: number[];
  logger: Logger;
  now?: () => number;
  /** Told of each recorded attempt: `dead` when it made the delivery dead_letter. */
  onOutcome?: (botId: string, ok: boolean, durationMs: number, dead: boolean) => void;
}

/** The client's answer as a typed result: an HTTP status, or why no answer came. */
export function attemptResultOf(r: WebhookResult, at: number): AttemptResult {
  if (r.ok) return { ok: true, statusCode: r.statusCode ?? 200, durationMs: r.durationMs, at };
  const message = r.error ?? 'failed';
  const failure: AttemptFailure = r.statusCode !== null
    ? { kind: 'http', statusCode: r.statusCode, message }
    : /^refused target|^invalid webhook url/.test(message)
      ? { kind: 'refused', message }
      : /^timed out/.test(message) ? { kind: 'timeout', message } : { kind: 'network', message };
  return { ok: false, failure, durationMs: r.durationMs, at };
}

export function createAttempts(deps: AttemptDeps) {
  const now = deps.now ?? Date.now;

  // Outcomes are written in group commits: attempts that finish while one
  // transaction is being written share the next.
  const outcomes = createGroupCommit<{ id: string; leaseToken: string; next: DeliveryWrite }, boolean>(
    (items) => deps.deliveries.recordMany(items),
  );
  const record = async (id: string, leaseToken: string, next: DeliveryWrite) =>
    (await outcomes.write([{ id, leaseToken, next }]))[0]!;

  return {
    /**
     * Attempts `delivery` (as read under `leaseToken`). `trigger`: auto walks the
     * retry schedule, manual (the console's retry) leaves it as it is. `webhook`: the
     * bot's, as read with the lease (null: none); read now when not given.
     */
    async attempt(
      delivery: DeliveryRecord, leaseToken: string, opts: { trigger?: AttemptTrigger; webhook?: WebhookTarget | null } = {},
    ): Promise<'succeeded' | 'failed' | 'no-webhook'> {
      const webhook = opts.webhook !== undefined ? opts.webhook : (await deps.webhooks.get(delivery.botId)) ?? null;
      if (!webhook) {
        await deps.deliveries.release(delivery.id, leaseToken);
        return 'no-webhook';
      }
      const sent = await deps.client.send({
        url: webhook.url,
        body: delivery.payload,
        secret: deps.secretBox.open(webhook.secretSealed),
        updateId: delivery.updateId,
        allowedIps: webhook.allowedIps,
      });
      const result = attemptResultOf(sent, now());
      const next = nextDeliveryState(delivery, result, opts.trigger ?? 'auto', deps.scheduleMs);
      const recorded = await record(delivery.id, leaseToken, next);
      if (!recorded) deps.logger.warn({ delivery: delivery.id }, 'delivery lease lost before its outcome was recorded');
      else deps.onOutcome?.(delivery.botId, result.ok, result.durationMs, next.deadLettered);
      return result.ok ? 'succeeded' : 'failed';
    },
  };
}

export type Attempts = ReturnType<typeof createAttempts>;

/**
 * How long an attempt's lease lasts: past the request timeout with room to record
 * the outcome. A holder that dies leaves its deliveries due again after this.
 */
export const leaseFor = (timeoutMs: number) => 2 * timeoutMs + 5000;
