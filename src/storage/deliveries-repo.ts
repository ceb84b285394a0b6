/**
 * Webhook deliveries. A delivery is attempted only under a lease (lease_until,
 * leased_by) taken with a conditional update, so two dispatchers never attempt
 * it at once, and a dispatcher that dies mid-attempt loses nothing: the lease
 * runs out and the delivery is due again. Queries are scoped by bot id. The only
 * writer of deliveries; every method takes the caller's transaction, when it has
 * one, as its last argument.
 */
import crypto from 'node:crypto';
import { isMysql, mysqlReaderOf, padded, statement, valuePerRow, type Db, type SqliteWriter, type Tx } from './db.js';
import { deliveryRow, type DeliverableUpdate } from './delivery-rows.js';
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
/** openCount on MySQL outside a transaction, past knex (db.ts's MysqlReader). */
const OPEN_COUNT_SQL = `SELECT COUNT(*) AS n FROM deliveries WHERE bot_id = ? AND status IN (${OPEN.map((s) => `'${s}'`).join(', ')})`;

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
    };
}

function leasedOf(r: any, leaseToken: string, webhook: WebhookTarget | null): LeasedDelivery {
  const d = fromRow(r) as LeasedDelivery;
  d.leaseToken = leaseToken;
  d.webhook = webhook;
  return d;
}

/** The columns fromRow reads. */
const RECORD_COLUMNS = 'id, bot_id, update_id, update_seq, status, attempts, last_status_code, last_error, last_attempt_at, last_duration_ms, next_attempt_at, payload, created_at';

/** Statement texts by the number of rows of their VALUES list (padded to powers of two: few of them). */
const texts = new Map<string, string>();
function sqlOf(name: 'claim' | 'outcome', rows: number): string {
  const key = `${name}:${rows}`;
  const make = name === 'claim' ? CLAIM_SQL : OUTCOME_SQL;
  let text = texts.get(key);
  if (text === undefined) texts.set(key, (text = make(rows)));
  return text;
}

const CLAIM_SQL = (rows: number) => `WITH f(bot_id, n) AS (VALUES ${Array(rows).fill('(?, ?)').join(', ')})
  UPDATE deliveries SET lease_until = ?, leased_by = ?
  WHERE id IN (
    SELECT id FROM (
      SELECT d.id, f.n, row_number() OVER (PARTITION BY d.bot_id ORDER BY d.update_seq) AS rn
      FROM f CROSS JOIN deliveries AS d INDEXED BY deliveries_bot_open
      WHERE d.bot_id = f.bot_id AND d.status IN (?, ?) AND d.next_attempt_at <= ? AND d.lease_until < ?
    ) WHERE rn <= n
  )
  RETURNING ${RECORD_COLUMNS}`;

const OUTCOME_SQL = (rows: number) => `UPDATE deliveries SET status = v.column3, attempts = v.column4, next_attempt_at = v.column5,
    last_status_code = v.column6, last_error = v.column7, last_attempt_at = v.column8, last_duration_ms = v.column9, lease_until = 0, leased_by = NULL
  FROM (VALUES ${Array(rows).fill('(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}) AS v
  WHERE deliveries.id = v.column1 AND deliveries.leased_by = v.column2
  RETURNING deliveries.id, deliveries.bot_id, deliveries.update_id`;

/**
 * claimForBots on SQLite (one writer: the statement is the whole claim): the due rows
 * of each bot up to its free slots are leased by one UPDATE that answers them
 * (RETURNING), and their bots' webhooks are read by a second statement. Each bot's rows
 * are found through its own index range (deliveries_bot_open, named: with every row of a
 * burst due, the planner would otherwise walk the due index, all of it, per claim).
 */
async function claimSqlite(q: Db | Tx, opts: { now: number; leaseMs: number; free: Map<string, number> }, token: string): Promise<LeasedDelivery[]> {
  // Padded with a bot id no bot has (a repeated bot would be joined twice).
  const free = padded<[string, number]>(q, [...opts.free], ['', 0]);
  const values: (string | number | null)[] = [];
  for (const [botId, n] of free) values.push(botId, n);
  values.push(opts.now + opts.leaseMs, token, ...OPEN, opts.now, opts.now);
  const rows = (await q.raw(sqlOf('claim', free.length), values)) as any[];
  if (rows.length === 0) return [];
  rows.sort((a, b) => compareIds(a.bot_id, b.bot_id) || Number(a.update_seq) - Number(b.update_seq));
  const bots = [...new Set(rows.map((r) => r.bot_id as string))];
  const hooks = await q('webhooks').whereIn('bot_id', padded(q, bots))
    .select('bot_id', 'url as webhook_url', 'secret_sealed as webhook_secret', 'allowed_ips as webhook_allowed_ips',
      'secret_header as webhook_secret_header', 'disabled_at as webhook_disabled_at');
  const webhooks = new Map<string, WebhookTarget | null>(hooks.map((h: any) => [h.bot_id, webhookOf(h)]));
  return rows.map((r) => leasedOf(r, token, webhooks.get(r.bot_id) ?? null));
}
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

/** Most outcomes one UPDATE writes (each takes up to 15 bound values). */
const OUTCOME_CHUNK = 500;

/**
 * writeOutcomes' writes on SQLite: each item's new state, where the row is still leased
 * under the item's token, one UPDATE per OUTCOME_CHUNK (items in primary-key order). SQLite
 * joins a VALUES list by primary key (a CASE per column is a scan of its branches per row:
 * milliseconds for a few hundred rows). Answers the rows written (leased_by: the token
 * they were held under), with their webhooks' failing_since when they succeeded.
 */
async function writeOutcomesSqlite(q: Db | Tx, items: OutcomeWrite[]) {
  const written: { id: string; leased_by: string; bot_id: string; update_id: number; failing_since: number | null }[] = [];
  // The token each written row was held under. A delivery twice in one batch (an attempt under a
  // lease that ran out, and one under the next) was written under the one it is leased by now.
  const tokens = new Map(items.map((i) => [i.id, i.leaseToken]));
  if (tokens.size < items.length) {
    const seen = new Set<string>();
    const twice = [...new Set(items.filter((i) => seen.size === seen.add(i.id).size).map((i) => i.id))];
    const now = (await q('deliveries').whereIn('id', twice).select('id', 'leased_by')) as { id: string; leased_by: string | null }[];
    for (const r of now) tokens.set(r.id, r.leased_by ?? '');
  }
  for (let k = 0; k < items.length; k += OUTCOME_CHUNK) {
    const chunk = padded(q, items.slice(k, k + OUTCOME_CHUNK));
    const values: (string | number | null)[] = [];
    for (const { id, leaseToken, next: n } of chunk) {
      values.push(id, leaseToken, n.status, n.attempts, n.nextAttemptAt, n.lastStatusCode, n.lastError, n.lastAttemptAt, n.lastDurationMs);
    }
    const updated = (await q.raw(sqlOf('outcome', chunk.length), values)) as { id: string; bot_id: string; update_id: number }[];
    for (const r of updated) written.push({ ...r, leased_by: tokens.get(r.id)!, failing_since: null });
  }
  const succeeded = new Set(items.filter((i) => i.next.lastError === null).map((i) => i.id));
  const bots = [...new Set(written.filter((r) => succeeded.has(r.id)).map((r) => r.bot_id))];
  if (bots.length > 0) {
    const failing = new Map((await q('webhooks').whereIn('bot_id', padded(q, bots)).whereNotNull('failing_since').select('bot_id', 'failing_since'))
      .map((w: { bot_id: string; failing_since: number }) => [w.bot_id, w.failing_since]));
    for (const r of written) r.failing_since = failing.get(r.bot_id) ?? null;
  }
  return written;
}

export function createDeliveriesRepo(db: Db) {
  return {
    /**
     * Leases due deliveries of several bots in one round: for each bot, up to its
     * free slots, oldest update first (a row_number window per bot). Answers them in
     * bot id, then update_seq order.
     */
    async claimForBots(opts: { now: number; leaseMs: number; holder: string; free: Map<string, number> }, tx?: Tx): Promise<LeasedDelivery[]> {
      if (opts.free.size === 0) return [];
      const q = tx ?? db;
      const token = `${opts.holder}:${crypto.randomBytes(6).toString('hex')}`;
      if (!isMysql(db)) return claimSqlite(q, opts, token);
      const most = Math.max(...opts.free.values());
      const ranked = q('deliveries')
        .whereIn('bot_id', padded(q, [...opts.free.keys()]))
        .whereIn('status', OPEN)
        .andWhere('next_attempt_at', '<=', opts.now)
        .andWhere('lease_until', '<', opts.now)
        .select('id', 'bot_id', db.raw('row_number() over (partition by bot_id order by update_seq) as rn'));
      const rows = (await q.from(ranked.as('ranked')).where('rn', '<=', most).select('id', 'bot_id', 'rn')) as { id: string; bot_id: string; rn: number | string }[];
      const ids = rows.filter((r) => Number(r.rn) <= (opts.free.get(r.bot_id) ?? 0)).map((r) => r.id);
      if (ids.length === 0) return [];
      // On MySQL this can meet an outcome write of another dispatcher: a deadlock victim is rolled back whole.
      await statement(db, tx, (s) => s('deliveries').whereIn('id', padded(s, ids)).andWhere('lease_until', '<', opts.now).whereIn('status', OPEN)
        .update({ lease_until: opts.now + opts.leaseMs, leased_by: token }));
      // Read back by primary key (leased_by has no index: a scan of it grows with the table),
      // with each bot's webhook in the same query.
      const leased = await q('deliveries').leftJoin('webhooks', 'webhooks.bot_id', 'deliveries.bot_id')
        .whereIn('deliveries.id', padded(q, ids)).andWhere('deliveries.leased_by', token)
        .orderBy([{ column: 'deliveries.bot_id' }, { column: 'deliveries.update_seq' }])
        .select('deliveries.*', 'webhooks.url as webhook_url', 'webhooks.secret_sealed as webhook_secret', 'webhooks.allowed_ips as webhook_allowed_ips',
          'webhooks.secret_header as webhook_secret_header', 'webhooks.disabled_at as webhook_disabled_at');
      const webhooks = new Map<string, WebhookTarget | null>();
      return leased.map((r) => {
        if (!webhooks.has(r.bot_id)) webhooks.set(r.bot_id, webhookOf(r));
        return leasedOf(r, token, webhooks.get(r.bot_id)!);
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
        const ids = chunk.map((l) => l.id);
        const tokens = [...new Set(chunk.map((l) => l.leaseToken))];
        // Rows are locked in primary-key order, as claims and outcome writes lock them; a deadlock victim is rolled back whole.
        n += await statement(db, tx, (q) => q('deliveries').whereIn('id', padded(q, ids)).whereIn('leased_by', padded(q, tokens)).update({ lease_until: until }));
      }
      return n;
    },

    /**
     * Bots that have deliveries due and not leased (a bounded scan of the due index),
     * bots whose webhook is disabled left out (their deliveries wait, and must not
     * crowd out the others).
     */
    async botsWithDue(now: number, limit: number, tx?: Tx): Promise<string[]> {
      const q = tx ?? db;
      const ids = (await q('deliveries').whereIn('status', OPEN).andWhere('next_attempt_at', '<=', now)
        .andWhere('lease_until', '<', now)
        .whereNotIn('bot_id', q('webhooks').whereNotNull('disabled_at').select('bot_id'))
        .limit(limit).pluck('bot_id')) as string[];
      return [...new Set(ids)];
    },

    /**
     * Leases one delivery of the bot for a manual retry: the delivery as it stands
     * under the lease, or null when another holds it.
     */
    async claimOne(
      botId: string, id: string, now: number, leaseMs: number, holder: string, tx?: Tx,
    ): Promise<(DeliveryRecord & { leaseToken: string }) | null> {
      const token = `${holder}:${crypto.randomBytes(6).toString('hex')}`;
      const n = await (tx ?? db)('deliveries').where({ bot_id: botId, id }).andWhere('lease_until', '<', now)
        .update({ lease_until: now + leaseMs, leased_by: token });
      if (n !== 1) return null;
      const row = await (tx ?? db)('deliveries').where({ bot_id: botId, id, leased_by: token }).first();
      return row ? { ...fromRow(row), leaseToken: token } : null;
    },

    /** A new delivery, due at `now`, for each of these updates (one statement per 200). */
    async insertFor(updates: DeliverableUpdate[], now: number, tx?: Tx): Promise<void> {
      const rows = updates.map((u) => deliveryRow(u, now));
      for (let k = 0; k < rows.length; k += 200) await (tx ?? db)('deliveries').insert(rows.slice(k, k + 200));
    },

    /** `insertFor` as a statement of a synchronous SQLite unit of work (units.ts). */
    sqlite: {
      insertFor(w: SqliteWriter, updates: DeliverableUpdate[], now: number): void {
        if (updates.length === 0) return;
        const rows = updates.map((u) => deliveryRow(u, now));
        const columns = Object.keys(rows[0]!);
        w.insert('deliveries', columns, rows.map((r) => Object.values(r)));
      },
    },

    /** Drops the bot's open (pending, retrying) deliveries; their updates stay queued. */
    async deleteOpenOfBot(botId: string, tx?: Tx): Promise<void> {
      await (tx ?? db)('deliveries').where({ bot_id: botId }).whereIn('status', OPEN).delete();
    },

    /**
     * Writes attempts made under their leases (each new state as given), in primary-key
     * order, the order a claim's UPDATE locks them in. Per item: false when its lease
     * was lost. Also answers, bots in id order, the updates of the deliveries the
     * attempts closed and each bot's latest attempt error, for the caller to apply
     * in the same transaction (units.ts).
     */
    async writeOutcomes(items: OutcomeWrite[], tx?: Tx): Promise<WrittenOutcomes> {
      const q = tx ?? db;
      const order = items.map((item, i) => ({ item, i })).sort((a, b) => compareIds(a.item.id, b.item.id));
      // With each bot's failing_since: only a webhook in a run of failures needs a success recorded.
      // SQLite (one writer) writes first, only the rows still leased under their tokens, and learns which from RETURNING.
      const rows = isMysql(db)
        ? await q('deliveries').leftJoin('webhooks', 'webhooks.bot_id', 'deliveries.bot_id')
          .whereIn('deliveries.id', padded(q, items.map((i) => i.id)))
          .select('deliveries.id', 'deliveries.leased_by', 'deliveries.bot_id', 'deliveries.update_id', 'webhooks.failing_since')
        : await writeOutcomesSqlite(q, order.map((o) => o.item));
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
      // Every held delivery's new state in one statement per OUTCOME_CHUNK (rows in primary-key order).
      for (let k = 0; isMysql(db) && k < held.length; k += OUTCOME_CHUNK) {
        const chunk = held.slice(k, k + OUTCOME_CHUNK);
        const ids = chunk.map((c) => c.id);
        const column = (value: (n: DeliveryWrite) => string | number | null) => valuePerRow(q, 'id', ids, chunk.map((c) => value(c.next)));
        await q('deliveries').whereIn('id', padded(q, ids)).update({
          status: column((n) => n.status),
          attempts: column((n) => n.attempts),
          next_attempt_at: column((n) => n.nextAttemptAt),
          last_status_code: column((n) => n.lastStatusCode),
          last_error: column((n) => n.lastError),
          last_attempt_at: column((n) => n.lastAttemptAt),
          last_duration_ms: column((n) => n.lastDurationMs),
          lease_until: 0,
          leased_by: null,
        });
      }
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
      return statement(db, tx, (q) => q('deliveries').where({ bot_id: botId, status: w.from })
        .andWhere('created_at', '>=', w.since).andWhere('created_at', '<', w.until)
        .andWhere('lease_until', '<', w.now)
        .update({ status: w.to, next_attempt_at: w.now }));
    },

    /** Gives a lease back without an attempt (e.g. the webhook went away meanwhile). */
    async release(id: string, leaseToken: string, tx?: Tx): Promise<void> {
      await (tx ?? db)('deliveries').where({ id, leased_by: leaseToken }).update({ lease_until: 0, leased_by: null });
    },

    async findForBot(botId: string, idOrUpdateId: string, tx?: Tx): Promise<DeliveryRecord | undefined> {
      const q = (tx ?? db)('deliveries').where({ bot_id: botId });
      const row = /^\d{1,15}$/.test(idOrUpdateId) ? await q.andWhere({ update_id: Number(idOrUpdateId) }).first() : await q.andWhere({ id: idOrUpdateId }).first();
      return row && fromRow(row);
    },

    async listForBot(botId: string, page: number, limit: number, filter: DeliveryFilter = {}, tx?: Tx): Promise<{ items: DeliveryRecord[]; total: number }> {
      const q = tx ?? db;
      const where = () => {
        const b = q('deliveries').where({ bot_id: botId });
        if (filter.status) b.andWhere('status', filter.status);
        if (filter.since !== undefined) b.andWhere('created_at', '>=', filter.since);
        if (filter.until !== undefined) b.andWhere('created_at', '<', filter.until);
        return b;
      };
      const [rows, [{ n }]] = await Promise.all([
        where().orderBy([{ column: 'created_at', order: 'desc' }, { column: 'update_seq', order: 'desc' }])
          .limit(limit).offset((page - 1) * limit),
        where().count({ n: '*' }) as unknown as Promise<[{ n: number | string }]>,
      ]);
      return { items: rows.map(fromRow), total: Number(n) };
    },

    async openCount(botId: string, tx?: Tx): Promise<number> {
      const mysqlReader = mysqlReaderOf(db);
      if (!tx && mysqlReader) return Number((await mysqlReader.one<{ n: number | string }>(OPEN_COUNT_SQL, botId))!.n);
      const [{ n }] = (await (tx ?? db)('deliveries').where({ bot_id: botId }).whereIn('status', OPEN).count({ n: '*' })) as [{ n: number | string }];
      return Number(n);
    },
  };
}

export type DeliveriesRepo = ReturnType<typeof createDeliveriesRepo>;
