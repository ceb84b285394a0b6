/**
 * Webhook deliveries. A delivery is attempted only under a lease (lease_until,
 * leased_by) taken with a conditional update, so two dispatchers never attempt
 * it at once, and a dispatcher that dies mid-attempt loses nothing: the lease
 * runs out and the delivery is due again. Queries are scoped by bot id.
 */
import crypto from 'node:crypto';
import type { Db } from './db.js';

export type DeliveryStatusValue = 'pending' | 'succeeded' | 'retrying' | 'dead_letter';

export interface DeliveryRecord {
  id: string;
  botId: string;
  updateId: number;
  updateSeq: number;
  status: DeliveryStatusValue;
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  lastAttemptAt: number | null;
  lastDurationMs: number | null;
  nextAttemptAt: number;
  payload: string;
  createdAt: number;
}

/** A delivery this holder may attempt, until its lease runs out. */
export type LeasedDelivery = DeliveryRecord & { leaseToken: string };

export interface AttemptOutcome {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  at: number;
  /** When the next attempt is due, or null when none follows (succeeded, or dead_letter). */
  nextAttemptAt: number | null;
}

/** "dlv_" + 20 random base64url-safe letters and digits: never all digits. */
export function newDeliveryId(): string {
  return `dlv_${crypto.randomBytes(15).toString('base64url').replace(/[-_]/g, 'x')}`;
}

/* eslint-disable @typescript-eslint/no-explicit-any */
function fromRow(r: any): DeliveryRecord {
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    id: r.id,
    botId: r.bot_id,
    updateId: Number(r.update_id),
    updateSeq: Number(r.update_seq),
    status: r.status,
    attempts: Number(r.attempts),
    lastStatusCode: n(r.last_status_code),
    lastError: r.last_error,
    lastAttemptAt: n(r.last_attempt_at),
    lastDurationMs: n(r.last_duration_ms),
    nextAttemptAt: Number(r.next_attempt_at),
    payload: r.payload,
    createdAt: Number(r.created_at),
  };
}
/* eslint-enable @typescript-eslint/no-explicit-any */

const OPEN = ['pending', 'retrying'];

export function createDeliveriesRepo(db: Db) {
  return {
    /**
     * Leases due deliveries (open, due, not leased), oldest update first per bot:
     * of `botId` only, or of any bot. `perBot` caps how many each bot gets.
     */
    /** Leases up to `limit` due deliveries of one bot, oldest update first (index deliveries_bot_open). */
    async claimDue(opts: { now: number; leaseMs: number; holder: string; limit: number; botId: string }): Promise<LeasedDelivery[]> {
      const ids = (await db('deliveries')
        .where('bot_id', opts.botId)
        .whereIn('status', OPEN)
        .andWhere('next_attempt_at', '<=', opts.now)
        .andWhere('lease_until', '<', opts.now)
        .orderBy('update_seq')
        .limit(opts.limit)
        .pluck('id')) as string[];
      if (ids.length === 0) return [];
      const token = `${opts.holder}:${crypto.randomBytes(6).toString('hex')}`;
      await db('deliveries').whereIn('id', ids).andWhere('lease_until', '<', opts.now).whereIn('status', OPEN)
        .update({ lease_until: opts.now + opts.leaseMs, leased_by: token });
      const rows = await db('deliveries').where({ leased_by: token }).orderBy('update_seq', 'asc');
      return rows.map((r) => ({ ...fromRow(r), leaseToken: token }));
    },

    /** Bots that have deliveries due and not leased (a bounded scan of the due index). */
    async botsWithDue(now: number, limit: number): Promise<string[]> {
      const ids = (await db('deliveries').whereIn('status', OPEN).andWhere('next_attempt_at', '<=', now)
        .andWhere('lease_until', '<', now).limit(limit).pluck('bot_id')) as string[];
      return [...new Set(ids)];
    },

    /** Leases one delivery of the bot for a manual retry; false when another holds it. */
    async claimOne(botId: string, id: string, now: number, leaseMs: number, holder: string): Promise<string | null> {
      const token = `${holder}:${crypto.randomBytes(6).toString('hex')}`;
      const n = await db('deliveries').where({ bot_id: botId, id }).andWhere('lease_until', '<', now)
        .update({ lease_until: now + leaseMs, leased_by: token });
      return n === 1 ? token : null;
    },

    /**
     * Records an attempt made under `leaseToken`: the new state, and on success or
     * dead letter the update leaves the bot's queue. False when the lease was lost.
     */
    async record(id: string, leaseToken: string, outcome: AttemptOutcome, maxAttempts: number): Promise<boolean> {
      return db.transaction(async (tx) => {
        const row = await tx('deliveries').where({ id, leased_by: leaseToken }).first('bot_id', 'update_id', 'attempts');
        if (!row) return false;
        const attempts = Number(row.attempts) + 1;
        const status: DeliveryStatusValue = outcome.ok
          ? 'succeeded'
          : outcome.nextAttemptAt !== null && attempts < maxAttempts ? 'retrying' : 'dead_letter';
        await tx('deliveries').where({ id }).update({
          status,
          attempts,
          last_status_code: outcome.statusCode,
          last_error: outcome.error,
          last_attempt_at: outcome.at,
          last_duration_ms: outcome.durationMs,
          next_attempt_at: status === 'retrying' ? outcome.nextAttemptAt! : outcome.at,
          lease_until: 0,
          leased_by: null,
        });
        if (status !== 'retrying') await tx('updates').where({ bot_id: row.bot_id, update_id: row.update_id }).delete();
        if (!outcome.ok) {
          await tx('webhooks').where({ bot_id: row.bot_id })
            .update({ last_error_date: Math.floor(outcome.at / 1000), last_error_message: outcome.error });
        }
        return true;
      });
    },

    /** Gives a lease back without an attempt (e.g. the webhook went away meanwhile). */
    async release(id: string, leaseToken: string): Promise<void> {
      await db('deliveries').where({ id, leased_by: leaseToken }).update({ lease_until: 0, leased_by: null });
    },

    async findForBot(botId: string, idOrUpdateId: string): Promise<DeliveryRecord | undefined> {
      const q = db('deliveries').where({ bot_id: botId });
      const row = /^\d{1,15}$/.test(idOrUpdateId) ? await q.andWhere({ update_id: Number(idOrUpdateId) }).first() : await q.andWhere({ id: idOrUpdateId }).first();
      return row && fromRow(row);
    },

    async listForBot(botId: string, page: number, limit: number): Promise<{ items: DeliveryRecord[]; total: number }> {
      const [rows, [{ n }]] = await Promise.all([
        db('deliveries').where({ bot_id: botId }).orderBy([{ column: 'created_at', order: 'desc' }, { column: 'update_seq', order: 'desc' }])
          .limit(limit).offset((page - 1) * limit),
        db('deliveries').where({ bot_id: botId }).count({ n: '*' }) as unknown as Promise<[{ n: number | string }]>,
      ]);
      return { items: rows.map(fromRow), total: Number(n) };
    },

    async openCount(botId: string): Promise<number> {
      const [{ n }] = (await db('deliveries').where({ bot_id: botId }).whereIn('status', OPEN).count({ n: '*' })) as [{ n: number | string }];
      return Number(n);
    },
  };
}

export type DeliveriesRepo = ReturnType<typeof createDeliveriesRepo>;
