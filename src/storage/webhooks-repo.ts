/**
 * Webhook configuration, and the only module that writes the webhooks table.
 * Setting or removing a webhook also switches the bot's delivery mode and moves its
 * queued updates: that is a unit of work (units.ts). Every method takes the
 * caller's transaction, when it has one, as its last argument.
 */
import type { Db, Tx } from './db.js';

/** What a delivery attempt needs of a bot's webhook. */
export interface WebhookTarget {
  url: string;
  secretSealed: string;
  allowedIps: string[];
}

export interface WebhookRecord extends WebhookTarget {
  botId: string;
  maxConnections: number;
  lastErrorDate: number | null;
  lastErrorMessage: string | null;
}

export interface WebhookConfig {
  url: string;
  secretSealed: string;
  allowedIps: string[];
  maxConnections: number;
  /** Kinds to queue; null for all. */
  allowedUpdates: string[] | null;
}

export function createWebhooksRepo(db: Db) {
  return {
    async get(botId: string, tx?: Tx): Promise<WebhookRecord | undefined> {
      const r = await (tx ?? db)('webhooks').where({ bot_id: botId }).first();
      return r && {
        botId: r.bot_id,
        url: r.url,
        secretSealed: r.secret_sealed,
        allowedIps: JSON.parse(r.allowed_ips),
        maxConnections: Number(r.max_connections),
        lastErrorDate: r.last_error_date === null ? null : Number(r.last_error_date),
        lastErrorMessage: r.last_error_message,
      };
    },

    /** max_connections of the bots that have a webhook. */
    async maxConnectionsOf(botIds: string[], tx?: Tx): Promise<Map<string, number>> {
      const rows = await (tx ?? db)('webhooks').whereIn('bot_id', botIds).select('bot_id', 'max_connections');
      return new Map(rows.map((r) => [r.bot_id as string, Number(r.max_connections)]));
    },

    /** Stores the bot's webhook (a new one, or replacing its settings). */
    async upsert(botId: string, config: Omit<WebhookConfig, 'allowedUpdates'>, now: number, tx?: Tx): Promise<void> {
      const values = {
        url: config.url,
        secret_sealed: config.secretSealed,
        allowed_ips: JSON.stringify(config.allowedIps),
        max_connections: config.maxConnections,
        updated_at: now,
      };
      // One statement (INSERT … ON DUPLICATE KEY UPDATE): an UPDATE-then-INSERT takes gap
      // locks that deadlock concurrent first webhooks of neighbouring bots on MySQL.
      await (tx ?? db)('webhooks').insert({ bot_id: botId, created_at: now, ...values }).onConflict('bot_id').merge(Object.keys(values));
    },

    async delete(botId: string, tx?: Tx): Promise<void> {
      await (tx ?? db)('webhooks').where({ bot_id: botId }).delete();
    },

    /** Records the latest failed attempt (ms) of the bot's webhook, shown as its last error. */
    async setLastError(botId: string, at: number, error: string, tx?: Tx): Promise<void> {
      await (tx ?? db)('webhooks').where({ bot_id: botId }).update({ last_error_date: Math.floor(at / 1000), last_error_message: error });
    },
  };
}

export type WebhooksRepo = ReturnType<typeof createWebhooksRepo>;
