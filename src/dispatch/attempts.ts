/**
 * One attempt at a leased delivery: read the bot's webhook, send, record the
 * outcome with the next due time from the retry schedule. Shared by the
 * dispatcher and the console's manual retry.
 */
import type { Logger } from 'pino';
import { createGroupCommit } from '../group-commit.js';
import type { SecretBox } from '../auth/secret-box.js';
import type { AttemptOutcome, DeliveriesRepo, DeliveryRecord } from '../storage/deliveries-repo.js';
import type { WebhookTarget, WebhooksRepo } from '../storage/webhooks-repo.js';
import type { WebhookClient } from './webhook-client.js';

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

export function createAttempts(deps: AttemptDeps) {
  const now = deps.now ?? Date.now;
  const maxAttempts = deps.scheduleMs.length + 1;

  // Outcomes are written in group commits: attempts that finish while one
  // transaction is being written share the next.
  const outcomes = createGroupCommit<{ id: string; leaseToken: string; outcome: AttemptOutcome }, boolean>(
    (items) => deps.deliveries.recordMany(items, maxAttempts),
  );
  const record = async (id: string, leaseToken: string, outcome: AttemptOutcome) =>
    (await outcomes.write([{ id, leaseToken, outcome }]))[0]!;

  return {
    maxAttempts,
    /**
     * Attempts `delivery` under `leaseToken`. `keepSchedule`: a manual retry that
     * fails leaves the delivery's own schedule as it was. `webhook`: the bot's, as read
     * with the lease (null: none); read now when not given.
     */
    async attempt(
      delivery: DeliveryRecord, leaseToken: string, opts: { keepSchedule?: boolean; webhook?: WebhookTarget | null } = {},
    ): Promise<'succeeded' | 'failed' | 'no-webhook'> {
      const keepSchedule = opts.keepSchedule ?? false;
      const webhook = opts.webhook !== undefined ? opts.webhook : (await deps.webhooks.get(delivery.botId)) ?? null;
      if (!webhook) {
        await deps.deliveries.release(delivery.id, leaseToken);
        return 'no-webhook';
      }
      const result = await deps.client.send({
        url: webhook.url,
        body: delivery.payload,
        secret: deps.secretBox.open(webhook.secretSealed),
        updateId: delivery.updateId,
        allowedIps: webhook.allowedIps,
      });
      const at = now();
      const retryIndex = delivery.attempts; // delay before attempt number attempts + 2
      const nextAttemptAt = result.ok
        ? null
        : keepSchedule && delivery.status === 'retrying'
          ? delivery.nextAttemptAt
          : retryIndex < deps.scheduleMs.length ? at + deps.scheduleMs[retryIndex]! : null;
      const recorded = await record(delivery.id, leaseToken, {
        ok: result.ok, statusCode: result.statusCode, error: result.error, durationMs: result.durationMs, at, nextAttemptAt,
      });
      if (!recorded) deps.logger.warn({ delivery: delivery.id }, 'delivery lease lost before its outcome was recorded');
      else deps.onOutcome?.(delivery.botId, result.ok, result.durationMs, !result.ok && nextAttemptAt === null && delivery.status !== 'dead_letter');
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
