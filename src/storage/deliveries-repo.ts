/**
 * Webhook deliveries. A delivery is attempted only under a lease (lease_until,
 * leased_by) taken with a conditional update, so two dispatchers never attempt
 * it at once, and a dispatcher that dies mid-attempt loses nothing: the lease
 * runs out and the delivery is due again. Queries are scoped by bot id. The only
 * writer of deliveries; every method takes the caller's transaction, when it has
 * one, as its last argument.
 */
import crypto from 'node:crypto';
import { exec, literalInt, padded, pageOf, type Db, type Tx, type Writer } from './db.js';
import { marks } from './statement-texts.js';
import { deliveryRow, type DeliverableUpdate } from './delivery-rows.js';
import type { AttemptLog } from './attempts-repo.js';
import type { FailureRun, WebhookTarget } from './webhooks-repo.js';

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

/**
 * A delivery this holder may attempt, until its lease runs out, with its bot's
 * webhook as it was when the lease was taken (null: the bot has none any more).
 */
export type LeasedDelivery = DeliveryRecord & { leaseToken: string; webhook: WebhookTarget | null };

/**
 * A delivery's values after an attempt, as decided by the delivery state machine
 * (dispatch/delivery-state.ts): this repository writes them, it decides nothing.
 */
export interface DeliveryWrite {
  status: DeliveryStatusValue;
  attempts: number;
  nextAttemptAt: number;
  lastStatusCode: number | null;
  /** Set when the attempt failed; it also becomes the webhook's last error. */
  lastError: string | null;
  lastAttemptAt: number;
  lastDurationMs: number;
  /** The attempt closed the delivery: its update leaves the bot's queue. */
  closed: boolean;
}

/** An attempt's outcome to write: the delivery, the lease it was made under, its new state. */
export interface OutcomeWrite {
  id: string;
  leaseToken: string;
  next: DeliveryWrite;
  /** The attempt for the delivery log (written whether or not the lease was still held: the request was made). */
  log?: AttemptLog;
}

/** What `writeOutcomes` did, and what it leaves to the other tables' owners. */
export interface WrittenOutcomes {
  /** Per item: false when its lease was lost. */
  results: boolean[];
  /** Per bot (in id order): the updates whose deliveries closed. */
  closed: [string, number[]][];
  /** Per bot (in id order): its latest failed attempt (ms) and error, and where its run of failures starts. */
  failures: [string, FailureRun][];
  /** Bots (in id order) with an attempt that succeeded, whose webhook was in a run of failures. */
  succeeded: string[];
}

/** Which deliveries a bulk recovery takes (from), what they become (to), in which window of created_at. */
export interface RecoverWrite {
  from: DeliveryStatusValue;
  to: DeliveryStatusValue;
  since: number;
  until: number;
  now: number;
}

/** Filters of the console's delivery log. */
export interface DeliveryFilter {
  status?: DeliveryStatusValue;
  /** Only the delivery of this update. */
  updateId?: number;
  /** created_at at or after (ms). */
  since?: number;
  /** created_at before (ms). */
  until?: number;
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
/** The open statuses, written into statements. */
const OPEN_LIST = OPEN.map((s) => `'${s}'`).join(', ');

/**
 * The webhook of a row read with its bot's webhook (webhook_* columns). A webhook
 * disabled meanwhile is as good as none: the lease is given back unattempted.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
function webhookOf(r: any): WebhookTarget | null {
  return r.webhook_url === null || r.webhook_url === undefined || r.webhook_disabled_at !== null
    ? null
    : {
      url: r.webhook_url, secretSealed: r.webhook_secret, allowedIps: JSON.parse(r.webhook_allowed_ips),
      secretHeader: Boolean(Number(r.webhook_secret_header)),
      previousSecretSealed: r.webhook_previous_secret ?? null,
      previousSecretUntil: r.webhook_previous_until === null || r.webhook_previous_until === undefined ? null : Number(r.webhook_previous_until),
    };
}

/** A bot without a webhook row, as webhookOf reads it. */
const NO_WEBHOOK = { webhook_url: null };

function leasedOf(r: any, leaseToken: string, webhook: WebhookTarget | null): LeasedDelivery {
  const d = fromRow(r) as LeasedDelivery;
  d.leaseToken = leaseToken;
  d.webhook = webhook;
  return d;
}

/** The columns fromRow reads. */
const RECORD_COLUMNS = 'id, bot_id, update_id, update_seq, status, attempts, last_status_code, last_error, last_attempt_at, last_duration_ms, next_attempt_at, payload, created_at';
/** A bot's webhook as read beside its deliveries (webhookOf). */
const WEBHOOK_COLUMNS = `webhooks.url AS webhook_url, webhooks.secret_sealed AS webhook_secret, webhooks.allowed_ips AS webhook_allowed_ips,
  webhooks.secret_header AS webhook_secret_header, webhooks.disabled_at AS webhook_disabled_at,
  webhooks.previous_secret_sealed AS webhook_previous_secret, webhooks.previous_secret_until AS webhook_previous_until`;

/** The table's statements; a claim differs by engine (see claimForBots). */
const SQL = {
  /**
   * SQLite's claim (one writer: the statement is the whole claim): the due rows of each
   * bot up to its free slots, leased by one UPDATE that answers them. Each bot's rows are
   * found through its own index range (deliveries_bot_open, named: with every row of a
   * burst due, the planner would otherwise walk the due index, all of it, per claim).
   */
  sqliteClaim: (rows: number) => `WITH f(bot_id, n) AS (VALUES ${Array(rows).fill('(?, ?)').join(', ')})
  UPDATE deliveries SET lease_until = ?, leased_by = ?
  WHERE id IN (
    SELECT id FROM (
      SELECT d.id, f.n, row_number() OVER (PARTITION BY d.bot_id ORDER BY d.update_seq) AS rn
      FROM f CROSS JOIN deliveries AS d INDEXED BY deliveries_bot_open
      WHERE d.bot_id = f.bot_id AND d.status IN (${OPEN_LIST}) AND d.next_attempt_at <= ? AND d.lease_until < ?
    ) WHERE rn <= n
  )
  RETURNING ${RECORD_COLUMNS}`,
  webhooksOf: (n: number) => `SELECT webhooks.bot_id, ${WEBHOOK_COLUMNS} FROM webhooks WHERE bot_id IN (${marks(n)})`,
  /** MySQL's claim: the due rows ranked per bot (a plain read), then leased where still due, then read back with their webhooks. */
  mysqlRanked: (n: number) => `SELECT id, bot_id, rn FROM (
      SELECT id, bot_id, row_number() OVER (PARTITION BY bot_id ORDER BY update_seq) AS rn FROM deliveries
      WHERE bot_id IN (${marks(n)}) AND status IN (${OPEN_LIST}) AND next_attempt_at <= ? AND lease_until < ?
    ) AS ranked WHERE rn <= ?`,
  lease: (n: number) => `UPDATE deliveries SET lease_until = ?, leased_by = ? WHERE id IN (${marks(n)}) AND lease_until < ? AND status IN (${OPEN_LIST})`,
  /** Read back by primary key (leased_by has no index: a scan of it grows with the table). */
  leased: (n: number) => `SELECT deliveries.*, ${WEBHOOK_COLUMNS} FROM deliveries LEFT JOIN webhooks ON webhooks.bot_id = deliveries.bot_id
    WHERE deliveries.id IN (${marks(n)}) AND deliveries.leased_by = ? ORDER BY deliveries.bot_id, deliveries.update_seq`,
  renew: (ids: number, tokens: number) => `UPDATE deliveries SET lease_until = ? WHERE id IN (${marks(ids)}) AND leased_by IN (${marks(tokens)})`,
  botsWithDue: (limit: number) => `SELECT bot_id FROM deliveries WHERE status IN (${OPEN_LIST}) AND next_attempt_at <= ? AND lease_until < ?
    AND bot_id NOT IN (SELECT bot_id FROM webhooks WHERE disabled_at IS NOT NULL) LIMIT ${literalInt(limit)}`,
  claimOne: 'UPDATE deliveries SET lease_until = ?, leased_by = ? WHERE bot_id = ? AND id = ? AND lease_until < ?',
  leasedOne: `SELECT ${RECORD_COLUMNS} FROM deliveries WHERE bot_id = ? AND id = ? AND leased_by = ? LIMIT 1`,
  release: 'UPDATE deliveries SET lease_until = 0, leased_by = NULL WHERE id = ? AND leased_by = ?',
  deleteOpenOfBot: `DELETE FROM deliveries WHERE bot_id = ? AND status IN (${OPEN_LIST})`,
  /** What writeOutcomes needs of the rows: their holders, and their webhooks' failing_since. */
  held: (n: number) => `SELECT deliveries.id, deliveries.leased_by, deliveries.bot_id, deliveries.update_id, webhooks.failing_since
    FROM deliveries LEFT JOIN webhooks ON webhooks.bot_id = deliveries.bot_id WHERE deliveries.id IN (${marks(n)})`,
  openCount: `SELECT COUNT(*) AS n FROM deliveries WHERE bot_id = ? AND status IN (${OPEN_LIST})`,
};
/** An outcome's columns, as writeOutcomes sets them (the lease given back). */
const OUTCOME_COLUMNS = ['status', 'attempts', 'next_attempt_at', 'last_status_code', 'last_error', 'last_attempt_at', 'last_duration_ms', 'lease_until', 'leased_by'] as const;
/* eslint-enable @typescript-eslint/no-explicit-any */

/** Most leases one renewal statement names. */
const RENEW_CHUNK = 1000;

/** Update ids per bot, bots in id order (the order their rows are locked in). */
function groupBy(rows: { bot_id: string; update_id: number }[]): [string, number[]][] {
  const m = new Map<string, number[]>();
  for (const r of rows) {
    const ids = m.get(r.bot_id);
    if (ids) ids.push(r.update_id);
    else m.set(r.bot_id, [r.update_id]);
  }
  return [...m].sort(([a], [b]) => compareIds(a, b));
}

const compareIds = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function createDeliveriesRepo(db: Db) {
  const { sql, knex } = db;
  /* eslint-disable @typescript-eslint/no-explicit-any */
  /**
   * claimForBots' statements on each engine (see SQL): the leased rows, and where each
   * bot's webhook is read (webhook_* columns): its own row in `hooks` (SQLite: one per
   * bot, not merged into each delivery's row, a copy of every column per delivery), or
   * the delivery's row itself (MySQL: read with a join).
   */
  const claim = sql.dialect === 'sqlite'
    ? (free: Map<string, number>, now: number, leaseMs: number, token: string) => sql.unit(async (w) => {
      // Padded with a bot id no bot has (a repeated bot would be joined twice).
      const list = padded<[string, number]>(sql, [...free], ['', 0]);
      const rows = await w.all<any>(SQL.sqliteClaim(list.length), [...list.flat(), now + leaseMs, token, now, now]);
      if (rows.length === 0) return { rows, hooks: null };
      rows.sort((a, b) => compareIds(a.bot_id, b.bot_id) || Number(a.update_seq) - Number(b.update_seq));
      const bots = padded(sql, [...new Set(rows.map((r) => r.bot_id as string))]);
      const hooks = new Map((await w.all<any>(SQL.webhooksOf(bots.length), bots)).map((h) => [h.bot_id as string, h]));
      return { rows, hooks };
    }, { transaction: false })
    : async (free: Map<string, number>, now: number, leaseMs: number, token: string) => {
      const bots = [...free.keys()];
      const ranked = await sql.all<{ id: string; bot_id: string; rn: number | string }>(SQL.mysqlRanked(bots.length), [...bots, now, now, Math.max(...free.values())]);
      const ids = ranked.filter((r) => Number(r.rn) <= (free.get(r.bot_id) ?? 0)).map((r) => r.id);
      if (ids.length === 0) return { rows: [], hooks: null };
      // The lease and the read back in one round trip. This can meet an outcome write of
      // another dispatcher: a deadlock victim is rolled back whole, and run again.
      const rows = await sql.unit(async (w) => {
        w.queue(SQL.lease(ids.length), [now + leaseMs, token, ...ids, now]);
        return w.all<any>(SQL.leased(ids.length), [...ids, token]);
      }, { transaction: false });
      return { rows, hooks: null };
    };
  /* eslint-enable @typescript-eslint/no-explicit-any */

  return {
    /**
     * Leases due deliveries of several bots in one round: for each bot, up to its
     * free slots, oldest update first (a row_number window per bot). Answers them in
     * bot id, then update_seq order.
     */
    async claimForBots(opts: { now: number; leaseMs: number; holder: string; free: Map<string, number> }): Promise<LeasedDelivery[]> {
      if (opts.free.size === 0) return [];
      const token = `${opts.holder}:${crypto.randomBytes(6).toString('hex')}`;
      const { rows, hooks } = await claim(opts.free, opts.now, opts.leaseMs, token);
      const webhooks = new Map<string, WebhookTarget | null>();
      return rows.map((r) => {
        let webhook = webhooks.get(r.bot_id);
        if (webhook === undefined) webhooks.set(r.bot_id, (webhook = webhookOf(hooks ? hooks.get(r.bot_id) ?? NO_WEBHOOK : r)));
        return leasedOf(r, token, webhook);
      });
    },

    /**
     * Extends to `until` the leases still held under these tokens (the holder's
     * heartbeat): one statement per RENEW_CHUNK deliveries, by primary key; a lease
     * another holder took meanwhile is left alone. Answers how many rows matched.
     */
    async renewLeases(leases: { id: string; leaseToken: string }[], until: number, tx?: Tx): Promise<number> {
      let n = 0;
      for (let i = 0; i < leases.length; i += RENEW_CHUNK) {
        const chunk = leases.slice(i, i + RENEW_CHUNK);
        const ids = padded(sql, chunk.map((l) => l.id));
        const tokens = padded(sql, [...new Set(chunk.map((l) => l.leaseToken))]);
        // Rows are locked in primary-key order, as claims and outcome writes lock them; a deadlock victim is rolled back whole.
        n += await (tx ?? sql).run(SQL.renew(ids.length, tokens.length), [until, ...ids, ...tokens]);
      }
      return n;
    },

    /**
     * Bots that have deliveries due and not leased (a bounded scan of the due index),
     * bots whose webhook is disabled left out (their deliveries wait, and must not
     * crowd out the others).
     */
    async botsWithDue(now: number, limit: number, tx?: Tx): Promise<string[]> {
      const rows = await (tx ?? sql).all<{ bot_id: string }>(SQL.botsWithDue(limit), [now, now]);
      return [...new Set(rows.map((r) => r.bot_id))];
    },

    /**
     * Leases one delivery of the bot for a manual retry: the delivery as it stands
     * under the lease, or null when another holds it.
     */
    async claimOne(
      botId: string, id: string, now: number, leaseMs: number, holder: string, tx?: Tx,
    ): Promise<(DeliveryRecord & { leaseToken: string }) | null> {
      const token = `${holder}:${crypto.randomBytes(6).toString('hex')}`;
      const n = await (tx ?? sql).run(SQL.claimOne, [now + leaseMs, token, botId, id, now]);
      if (n !== 1) return null;
      const row = await (tx ?? sql).one(SQL.leasedOne, [botId, id, token]);
      return row ? { ...fromRow(row), leaseToken: token } : null;
    },

    /** A new delivery, due at `now`, for each of these updates, in the caller's unit. */
    insertFor(updates: DeliverableUpdate[], now: number, w: Writer): void {
      if (updates.length === 0) return;
      const rows = updates.map((u) => deliveryRow(u, now));
      w.insert('deliveries', Object.keys(rows[0]!), rows.map((r) => Object.values(r)));
    },

    /** Drops the bot's open (pending, retrying) deliveries, in the caller's unit; their updates stay queued. */
    deleteOpenOfBot(botId: string, w: Writer): void {
      w.queue(SQL.deleteOpenOfBot, [botId]);
    },

    /**
     * Writes attempts made under their leases (each new state as given), in the caller's
     * unit, rows in primary-key order, the order a claim's UPDATE locks them in. Per item:
     * false when its lease was lost. Also answers, bots in id order, the updates of the
     * deliveries the attempts closed and each bot's latest attempt error, for the caller
     * to apply in the same unit (units.ts).
     */
    async writeOutcomes(items: OutcomeWrite[], w: Writer): Promise<WrittenOutcomes> {
      const order = items.map((item, i) => ({ item, i })).sort((a, b) => compareIds(a.item.id, b.item.id));
      // Which rows are still held, and by which token; with each bot's failing_since: only
      // a webhook in a run of failures needs a success recorded.
      const ids = padded(sql, [...new Set(order.map((o) => o.item.id))]);
      const rows = ids.length === 0 ? [] : await w.all<{ id: string; leased_by: string | null; bot_id: string; update_id: number | string; failing_since: number | string | null }>(SQL.held(ids.length), ids);
      const byId = new Map(rows.map((r) => [r.id, r]));
      const done: { bot_id: string; update_id: number }[] = [];
      const errors = new Map<string, { at: number; error: string }>();
      // Per bot: its latest success, and its failures (time order is settled after the loop).
      const lastOk = new Map<string, number>();
      const failedAt = new Map<string, number[]>();
      const failing = new Set<string>();
      const results: boolean[] = new Array(items.length);
      const held: OutcomeWrite[] = [];
      for (const { item, i } of order) {
        const { id, leaseToken, next } = item;
        const row = byId.get(id);
        if (!row || row.leased_by !== leaseToken) {
          results[i] = false;
          continue;
        }
        held.push(item);
        if (next.closed) done.push({ bot_id: row.bot_id, update_id: Number(row.update_id) });
        if (next.lastError !== null && !((errors.get(row.bot_id)?.at ?? -1) > next.lastAttemptAt)) {
          errors.set(row.bot_id, { at: next.lastAttemptAt, error: next.lastError });
        }
        if (next.lastError === null) lastOk.set(row.bot_id, Math.max(lastOk.get(row.bot_id) ?? -1, next.lastAttemptAt));
        else failedAt.set(row.bot_id, [...(failedAt.get(row.bot_id) ?? []), next.lastAttemptAt]);
        if (row.failing_since !== null && row.failing_since !== undefined) failing.add(row.bot_id);
        results[i] = true;
      }
      // Every held delivery's new state (rows in primary-key order), its lease given back.
      w.update('deliveries', 'id', OUTCOME_COLUMNS, held.map(({ id, next: n }) =>
        [id, n.status, n.attempts, n.nextAttemptAt, n.lastStatusCode, n.lastError, n.lastAttemptAt, n.lastDurationMs, 0, null]));
      const failures: [string, FailureRun][] = [...errors].map(([botId, e]) => {
        const ok = lastOk.get(botId) ?? -1;
        const after = failedAt.get(botId)!.filter((at) => at > ok);
        return [botId, { ...e, runStart: after.length > 0 ? Math.min(...after) : null }];
      });
      return {
        results,
        closed: groupBy(done),
        failures: failures.sort(([a], [b]) => compareIds(a, b)),
        // A run of failures that began after this read is not ended by these successes; the next success ends it.
        succeeded: [...lastOk.keys()].filter((b) => failing.has(b)).sort(compareIds),
      };
    },

    /**
     * Queues again the bot's deliveries in status `from` created in [since, until) and
     * not leased: each becomes `to`, due `now` (attempts unchanged). Answers how many.
     * The dispatcher takes them in update_seq order.
     */
    async recover(botId: string, w: RecoverWrite, tx?: Tx): Promise<number> {
      return exec(tx ?? sql, knex('deliveries').where({ bot_id: botId, status: w.from })
        .andWhere('created_at', '>=', w.since).andWhere('created_at', '<', w.until)
        .andWhere('lease_until', '<', w.now)
        .update({ status: w.to, next_attempt_at: w.now }));
    },

    /** Gives a lease back without an attempt (e.g. the webhook went away meanwhile). */
    async release(id: string, leaseToken: string, tx?: Tx): Promise<void> {
      await (tx ?? sql).run(SQL.release, [id, leaseToken]);
    },

    async findForBot(botId: string, idOrUpdateId: string, tx?: Tx): Promise<DeliveryRecord | undefined> {
      const q = knex('deliveries').where({ bot_id: botId });
      const row = await exec(tx ?? sql, /^\d{1,15}$/.test(idOrUpdateId) ? q.andWhere({ update_id: Number(idOrUpdateId) }).first() : q.andWhere({ id: idOrUpdateId }).first());
      return row && fromRow(row);
    },

    async listForBot(botId: string, page: number, limit: number, filter: DeliveryFilter = {}, tx?: Tx): Promise<{ items: DeliveryRecord[]; total: number }> {
      const where = () => {
        const b = knex('deliveries').where({ bot_id: botId });
        if (filter.updateId !== undefined) b.andWhere('update_id', filter.updateId);
        if (filter.status) b.andWhere('status', filter.status);
        if (filter.since !== undefined) b.andWhere('created_at', '>=', filter.since);
        if (filter.until !== undefined) b.andWhere('created_at', '<', filter.until);
        return b;
      };
      const { rows, total } = await pageOf<Record<string, unknown>>(tx ?? sql, knex, where, (b) => b.select('*')
        .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'update_seq', order: 'desc' }]), page, limit);
      return { items: rows.map(fromRow), total };
    },

    /**
     * Deletes closed (succeeded, dead_letter) deliveries whose last attempt was before
     * `before` (ms) and that no one is retrying now, a chunk per statement (found
     * through deliveries_due: a closed delivery's next_attempt_at is its last attempt).
     * Open ones are kept however old. Answers how many.
     */
    async purgeClosedBefore(before: number, now: number, tx?: Tx): Promise<number> {
      let total = 0;
      for (;;) {
        const ids = (await exec(tx ?? sql, knex('deliveries').whereIn('status', ['succeeded', 'dead_letter'])
          .andWhere('next_attempt_at', '<', before).andWhere('lease_until', '<', now).limit(1000).pluck('id'))) as string[];
        if (ids.length === 0) return total;
        total += await exec(tx ?? sql, knex('deliveries').whereIn('id', ids).whereIn('status', ['succeeded', 'dead_letter']).andWhere('lease_until', '<', now).delete());
        if (ids.length < 1000) return total;
      }
    },

    async openCount(botId: string, tx?: Tx): Promise<number> {
      return Number((await (tx ?? sql).one<{ n: number | string }>(SQL.openCount, [botId]))!.n);
    },
  };
}

export type DeliveriesRepo = ReturnType<typeof createDeliveriesRepo>;
