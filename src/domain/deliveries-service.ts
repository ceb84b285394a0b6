/** The console's view of webhook deliveries: the log, and the manual retry. */
import crypto from 'node:crypto';
import { leaseFor, type Attempts } from '../dispatch/attempts.js';
import { recoveredState } from '../dispatch/delivery-state.js';
import { ApiError, Code } from '../errors.js';
import { DeliveryStatus, type Delivery } from '../gen/botplatform/v1/bot.js';
import type { DeliveryAttempt } from '../gen/botplatform/v1/console_service.js';
import type { AttemptLog, AttemptsRepo } from '../storage/attempts-repo.js';
import { constraintsOf } from '../gen/constraints.js';
import type { BotsRepo } from '../storage/bots-repo.js';
import type { DeliveriesRepo, DeliveryRecord, DeliveryStatusValue } from '../storage/deliveries-repo.js';
import { createOwnBots } from './own-bot.js';
import { paged } from './pagination.js';
import type { ConsoleRpc } from './rpc.js';
import * as check from './validation.js';

const LIMITS = {
  page: constraintsOf('botplatform.v1.ListDeliveriesRequest', 'page'),
  limit: constraintsOf('botplatform.v1.ListDeliveriesRequest', 'limit'),
  updateId: constraintsOf('botplatform.v1.ListDeliveriesRequest', 'update_id'),
};
const ATTEMPT_LIMITS = {
  page: constraintsOf('botplatform.v1.ListDeliveryAttemptsRequest', 'page'),
  limit: constraintsOf('botplatform.v1.ListDeliveryAttemptsRequest', 'limit'),
};

/** An attempt as the console shows it; `payload`: its delivery's body (sent as is unless the log kept another). */
function toAttemptMessage(a: AttemptLog, payload: string): DeliveryAttempt {
  return {
    id: a.id,
    deliveryId: a.deliveryId,
    updateId: a.updateId,
    attemptedAt: new Date(a.attemptedAt),
    trigger: a.trigger,
    ok: a.ok,
    durationMs: a.durationMs,
    error: a.error ?? undefined,
    request: { url: a.url, headers: a.requestHeaders, body: a.requestBody ?? payload },
    response: a.statusCode === null ? undefined : {
      statusCode: a.statusCode, headers: a.responseHeaders ?? {}, body: a.responseBody ?? '', bodyTruncated: a.responseTruncated,
    },
  };
}

const STATUS = {
  pending: DeliveryStatus.DELIVERY_STATUS_PENDING,
  succeeded: DeliveryStatus.DELIVERY_STATUS_SUCCEEDED,
  retrying: DeliveryStatus.DELIVERY_STATUS_RETRYING,
  dead_letter: DeliveryStatus.DELIVERY_STATUS_DEAD_LETTER,
};

const STATUS_VALUE = new Map<DeliveryStatus, DeliveryStatusValue>(
  Object.entries(STATUS).map(([k, v]) => [v, k as DeliveryStatusValue]),
);

export function toDeliveryMessage(d: DeliveryRecord): Delivery {
  const open = d.status === 'pending' || d.status === 'retrying';
  return {
    id: d.id,
    updateId: d.updateId,
    updateSeq: d.updateSeq,
    status: STATUS[d.status],
    attempts: d.attempts,
    lastStatusCode: d.lastStatusCode ?? undefined,
    lastError: d.lastError ?? undefined,
    lastAttemptAt: d.lastAttemptAt ? new Date(d.lastAttemptAt) : undefined,
    nextAttemptAt: open ? new Date(d.nextAttemptAt) : undefined,
    createdAt: new Date(d.createdAt),
    lastDurationMs: d.lastDurationMs ?? undefined,
  };
}

export interface DeliveriesDeps {
  bots: BotsRepo;
  deliveries: DeliveriesRepo;
  /** The delivery log. */
  attemptsLog: AttemptsRepo;
  /** DELIVERY_LOG_RETENTION: how long closed deliveries and attempts are kept. */
  retentionMs: number;
  attempts: Attempts;
  timeoutMs: number;
  now?: () => number;
}

export function createDeliveriesService(deps: DeliveriesDeps): Pick<ConsoleRpc, 'listDeliveries' | 'listDeliveryAttempts' | 'retryDelivery' | 'recoverDeliveries'> {
  const now = deps.now ?? Date.now;
  const holder = `console-${crypto.randomUUID()}`;
  const own = createOwnBots(deps.bots);

  return {
    async listDeliveries(req, { principal }) {
      const { page, limit } = check.pageAndLimit(req.page, req.limit, LIMITS);
      const v = new check.Violations();
      const status = req.status === undefined ? undefined : STATUS_VALUE.get(req.status);
      if (req.status !== undefined && !status) v.add('status', 'INVALID_VALUE', 'must be one of pending, succeeded, retrying, dead_letter');
      check.inRange(v, 'update_id', req.updateId ?? null, LIMITS.updateId);
      v.throwIfAny();
      const { id: botId } = await own.find(principal.accountId, req.id);
      const found = await deps.deliveries.listForBot(botId, page, limit, {
        status, since: req.since?.getTime(), until: req.until?.getTime(), updateId: req.updateId,
      });
      return { ...paged({ page, limit }, found, toDeliveryMessage), retentionSeconds: Math.floor(deps.retentionMs / 1000) };
    },

    /** A delivery's attempts, newest first: what was sent and what came back. */
    async listDeliveryAttempts(req, { principal }) {
      const { page, limit } = check.pageAndLimit(req.page, req.limit, ATTEMPT_LIMITS);
      const { id: botId } = await own.find(principal.accountId, req.id);
      const delivery = req.deliveryId ? await deps.deliveries.findForBot(botId, req.deliveryId) : undefined;
      if (!delivery) throw ApiError.notFound('delivery');
      const found = await deps.attemptsLog.listForDelivery(botId, delivery.id, page, limit);
      return {
        ...paged({ page, limit }, found, (a) => toAttemptMessage(a, delivery.payload)),
        retentionSeconds: Math.floor(deps.retentionMs / 1000),
      };
    },

    /**
     * Queues again every dead_letter (or, asked, retrying) delivery created in
     * [since, until): each is due now, and the dispatcher takes them in update_seq
     * order. Deliveries already queued are not touched: a second run answers 0.
     */
    async recoverDeliveries(req, { principal }) {
      const v = new check.Violations();
      const at = now();
      if (!req.since) v.add('since', 'REQUIRED', 'is required');
      const from = req.status === undefined ? 'dead_letter' : STATUS_VALUE.get(req.status);
      const to = from ? recoveredState(from, at) : null;
      if (!from || !to) v.add('status', 'INVALID_VALUE', 'must be dead_letter or retrying');
      const until = req.until?.getTime() ?? at + 1;
      v.throwIfAny();
      const bot = await own.find(principal.accountId, req.id);
      // Without a webhook nothing would send them (and removing one drops what is queued).
      if (bot.deliveryMode !== 'webhook') throw ApiError.failedPrecondition('the bot has no webhook set');
      const botId = bot.id;
      const recovered = await deps.deliveries.recover(botId, { from: from!, to: to!.status, since: req.since!.getTime(), until, now: to!.nextAttemptAt });
      return { recovered };
    },

    /** One attempt now; answers with the delivery as it stands after it. */
    async retryDelivery(req, { principal }) {
      const { id: botId } = await own.find(principal.accountId, req.id);
      const delivery = req.deliveryId ? await deps.deliveries.findForBot(botId, req.deliveryId) : undefined;
      if (!delivery) throw ApiError.notFound('delivery');
      if (delivery.status === 'succeeded') throw ApiError.failedPrecondition('delivery already succeeded');
      const leased = await deps.deliveries.claimOne(botId, delivery.id, now(), leaseFor(deps.timeoutMs), holder);
      if (!leased) throw new ApiError(Code.ABORTED, 'delivery is being attempted right now; try again shortly');
      // Decided on the delivery as read under the lease: an automatic attempt may have ended just before.
      if (leased.status === 'succeeded') {
        await deps.deliveries.release(leased.id, leased.leaseToken);
        throw ApiError.failedPrecondition('delivery already succeeded');
      }
      const result = await deps.attempts.attempt(leased, leased.leaseToken, { trigger: 'manual' });
      if (result === 'no-webhook') throw ApiError.failedPrecondition('the bot has no webhook set');
      return { delivery: toDeliveryMessage((await deps.deliveries.findForBot(botId, delivery.id))!) };
    },
  };
}

export type DeliveriesService = ReturnType<typeof createDeliveriesService>;
