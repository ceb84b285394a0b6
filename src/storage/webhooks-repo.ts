/**
 * Webhook configuration, and the only module that writes the webhooks table.
 * Setting or removing a webhook also switches the bot's delivery mode and moves its
 * queued updates: that is a unit of work (units.ts). Every method takes the
 * caller's transaction, when it has one, as its last argument.
 */
import { exec, padded, type Db, type Tx, type Writer } from './db.js';
import { marks } from './statement-texts.js';

/** What a delivery attempt needs of a bot's webhook. */
export interface WebhookTarget {
  url: string;
  secretSealed: string;
  allowedIps: string[];
  /** Set through the Telegram-compatible surface: deliveries also carry X-Telegram-Bot-Api-Secret-Token. */
  secretHeader: boolean;
  /** The secret before the last rotation, valid until previousSecretUntil (ms); null when there is none. */
  previousSecretSealed: string | null;
  previousSecretUntil: number | null;
}

export interface WebhookRecord extends WebhookTarget {
  botId: string;
  maxConnections: number;
  /** Most attempts per second; null: no limit. */
  maxDeliveriesPerSecond: number | null;
  lastErrorDate: number | null;
  lastErrorMessage: string | null;
  /** When deliveries were stopped for failing too long (ms); null while enabled. */
  disabledAt: number | null;
  disabledReason: string | null;
}

/** What the dispatcher needs of a bot's webhook: its limits (max 0: nothing may be attempted). */
export interface DeliveryLimits {
  max: number;
  /** Attempts per second; null: no limit. */
  perSecond: number | null;
  /** Where its requests go: the webhook's URL and allowed_ips (the origin whose turns they take). */
  url?: string;
  allowedIps?: string[];
}

/** One bot's failed attempts in one batch of outcomes (see recordFailures). */
export interface FailureRun {
  /** The latest failed attempt (ms) and its error. */
  at: number;
  error: string;
  /** The first failure after the batch's last success (ms); null when a success came last. */
  runStart: number | null;
}

export interface WebhookConfig {
  url: string;
  secretSealed: string;
  /**
   * The secret was not given (an edit of the settings): an existing row keeps its secret
   * and any rotation's overlap; secretSealed is used only if the row is gone meanwhile.
   */
  keepSecret?: boolean;
  allowedIps: string[];
  secretHeader: boolean;
  maxConnections: number;
  maxDeliveriesPerSecond: number | null;
  /** Kinds to queue; null for all. */
  allowedUpdates: string[] | null;
}

/** A WebhookRecord's columns. */
const RECORD_COLUMNS = [
  'bot_id', 'url', 'secret_sealed', 'allowed_ips', 'secret_header', 'max_connections', 'max_deliveries_per_second',
  'last_error_date', 'last_error_message', 'disabled_at', 'disabled_reason', 'previous_secret_sealed', 'previous_secret_until',
] as const;
/** The table's statements (the same on both engines). */
const SQL = {
  get: `SELECT ${RECORD_COLUMNS.join(', ')} FROM webhooks WHERE bot_id = ? LIMIT 1`,
  limitsOf: (n: number) => `SELECT bot_id, max_connections, max_deliveries_per_second, disabled_at, url, allowed_ips FROM webhooks WHERE bot_id IN (${marks(n)})`,
  delete: 'DELETE FROM webhooks WHERE bot_id = ?',
  /** A rotation: the current secret becomes the previous one, valid until the given time (or dropped, with null). */
  rotate: `UPDATE webhooks SET previous_secret_sealed = CASE WHEN ? IS NULL THEN NULL ELSE secret_sealed END,
    previous_secret_until = ?, secret_sealed = ?, updated_at = ? WHERE bot_id = ?`,
  /** A success ends the run of failures of these bots' webhooks. */
  recordSuccesses: (n: number) => `UPDATE webhooks SET failing_since = NULL WHERE bot_id IN (${marks(n)}) AND failing_since IS NOT NULL`,
  lastError: 'UPDATE webhooks SET last_error_date = ?, last_error_message = ? WHERE bot_id = ?',
  /**
   * A failure: the last error, and the run of failures started (or kept) and, once it has
   * lasted long enough, the webhook disabled. MySQL assigns left to right, each seeing
   * the ones before: the columns the conditions read (disabled_at, failing_since) are
   * assigned after them.
   */
  recordFailure: `UPDATE webhooks SET
    disabled_reason = CASE WHEN disabled_at IS NULL AND COALESCE(failing_since, ?) <= ? THEN ? ELSE disabled_reason END,
    disabled_at = CASE WHEN disabled_at IS NULL AND COALESCE(failing_since, ?) <= ? THEN ? ELSE disabled_at END,
    last_error_date = ?, last_error_message = ?,
    failing_since = COALESCE(failing_since, ?)
    WHERE bot_id = ?`,
};

export function createWebhooksRepo(db: Db) {
  const { sql, knex } = db;
  return {
    async get(botId: string, tx?: Tx): Promise<WebhookRecord | undefined> {
      /* eslint-disable-next-line @typescript-eslint/no-explicit-any */
      const r: any = await (tx ?? sql).one(SQL.get, [botId]);
      return r && {
        botId: r.bot_id,
        url: r.url,
        secretSealed: r.secret_sealed,
        allowedIps: JSON.parse(r.allowed_ips),
        secretHeader: Boolean(Number(r.secret_header)),
        maxConnections: Number(r.max_connections),
        maxDeliveriesPerSecond: r.max_deliveries_per_second === null ? null : Number(r.max_deliveries_per_second),
        lastErrorDate: r.last_error_date === null ? null : Number(r.last_error_date),
        lastErrorMessage: r.last_error_message,
        disabledAt: r.disabled_at === null ? null : Number(r.disabled_at),
        disabledReason: r.disabled_reason,
        previousSecretSealed: r.previous_secret_sealed ?? null,
        previousSecretUntil: r.previous_secret_until === null || r.previous_secret_until === undefined ? null : Number(r.previous_secret_until),
      };
    },

    /**
     * The delivery limits of the bots that have a webhook: max_connections (0 while the
     * webhook is disabled) and max_deliveries_per_second, and where its requests go.
     */
    async limitsOf(botIds: string[], tx?: Tx): Promise<Map<string, DeliveryLimits>> {
      const ids = padded(sql, botIds);
      if (ids.length === 0) return new Map();
      /* eslint-disable-next-line @typescript-eslint/no-explicit-any */
      const rows = await (tx ?? sql).all<any>(SQL.limitsOf(ids.length), ids);
      return new Map(rows.map((r) => [r.bot_id as string, {
        max: r.disabled_at === null ? Number(r.max_connections) : 0,
        perSecond: r.max_deliveries_per_second === null ? null : Number(r.max_deliveries_per_second),
        url: r.url as string,
        allowedIps: JSON.parse(r.allowed_ips) as string[],
      }]));
    },

    /** Stores the bot's webhook (a new one, or replacing its settings), in the caller's unit. */
    async upsert(botId: string, config: Omit<WebhookConfig, 'allowedUpdates'>, now: number, w: Writer): Promise<void> {
      const secret = { secret_sealed: config.secretSealed, previous_secret_sealed: null, previous_secret_until: null };
      const values = {
        url: config.url,
        allowed_ips: JSON.stringify(config.allowedIps),
        secret_header: config.secretHeader,
        max_connections: config.maxConnections,
        max_deliveries_per_second: config.maxDeliveriesPerSecond,
        // Setting the webhook (again) enables it, with a fresh start for its health.
        failing_since: null,
        disabled_at: null,
        disabled_reason: null,
        updated_at: now,
      };
      // One statement (INSERT … ON DUPLICATE KEY UPDATE): an UPDATE-then-INSERT takes gap
      // locks that deadlock concurrent first webhooks of neighbouring bots on MySQL.
      // A new secret replaces the old one (and ends an overlap); an edit without one keeps them.
      const merged = config.keepSecret ? Object.keys(values) : [...Object.keys(values), ...Object.keys(secret)];
      await exec(w, knex('webhooks').insert({ bot_id: botId, created_at: now, ...values, ...secret }).onConflict('bot_id').merge(merged));
    },

    /**
     * Rotates the bot's secret: the current one stays valid until `previousUntil` (ms;
     * null: it is dropped at once). Answers whether the bot has a webhook.
     */
    async rotateSecret(botId: string, secretSealed: string, previousUntil: number | null, now: number, tx?: Tx): Promise<boolean> {
      return (await (tx ?? sql).run(SQL.rotate, [previousUntil, previousUntil, secretSealed, now, botId])) > 0;
    },

    /** Removes the bot's webhook, in the caller's unit. */
    delete(botId: string, w: Writer): void {
      w.queue(SQL.delete, [botId]);
    },

    /** Resumes deliveries to a disabled webhook (its health starts afresh). Answers whether the bot has a webhook. */
    async enable(botId: string, tx?: Tx): Promise<boolean> {
      const n = await exec(tx ?? sql, knex('webhooks').where({ bot_id: botId }).update({ failing_since: null, disabled_at: null, disabled_reason: null }));
      return n > 0;
    },

    /** These bots' webhooks answered: their run of failures, if any, is over (one statement, in the caller's unit). */
    recordSuccesses(botIds: string[], w: Writer): void {
      if (botIds.length === 0) return;
      const ids = padded(sql, botIds);
      w.queue(SQL.recordSuccesses(ids.length), ids);
    },

    /**
     * Records failed attempts of the bot's webhook: the latest becomes its last error, and
     * a run of failures (no success between) that has lasted `disableAfterMs` disables it
     * (deliveries stop until it is set again or enabled), with `reason`. One statement, in the caller's unit.
     */
    recordFailures(botId: string, f: FailureRun, disableAfterMs: number, reason: string, w: Writer): void {
      const lastError = [Math.floor(f.at / 1000), f.error];
      if (f.runStart === null) {
        w.queue(SQL.lastError, [...lastError, botId]);
        return;
      }
      const before = f.at - disableAfterMs;
      w.queue(SQL.recordFailure, [f.runStart, before, reason, f.runStart, before, f.at, ...lastError, f.runStart, botId]);
    },
  };
}

export type WebhooksRepo = ReturnType<typeof createWebhooksRepo>;
