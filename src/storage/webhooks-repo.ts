/**
 * Webhook configuration and the delivery mode it implies. Setting or removing a
 * webhook changes bots.delivery_mode in the same transaction.
 */
import { transaction, type Db } from './db.js';
import { deliveryRow } from './delivery-rows.js';

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
    async get(botId: string): Promise<WebhookRecord | undefined> {
      const r = await db('webhooks').where({ bot_id: botId }).first();
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
    async maxConnectionsOf(botIds: string[]): Promise<Map<string, number>> {
      const rows = await db('webhooks').whereIn('bot_id', botIds).select('bot_id', 'max_connections');
      return new Map(rows.map((r) => [r.bot_id as string, Number(r.max_connections)]));
    },

    /** Stores the webhook and switches the bot to webhook mode; optionally forgets pending updates. */
    async set(botId: string, config: WebhookConfig, dropPending: boolean, now: number): Promise<void> {
      await transaction(db, async (tx) => {
        const values = {
          url: config.url,
          secret_sealed: config.secretSealed,
          allowed_ips: JSON.stringify(config.allowedIps),
          max_connections: config.maxConnections,
          updated_at: now,
        };
        // One statement (INSERT … ON DUPLICATE KEY UPDATE): an UPDATE-then-INSERT takes gap
        // locks that deadlock concurrent first webhooks of neighbouring bots on MySQL.
        await tx('webhooks').insert({ bot_id: botId, created_at: now, ...values }).onConflict('bot_id').merge(Object.keys(values));
        await tx('bots').where({ id: botId }).update({
          delivery_mode: 'webhook',
          allowed_updates: config.allowedUpdates ? JSON.stringify(config.allowedUpdates) : null,
          updated_at: now,
        });
        if (dropPending) {
          await tx('updates').where({ bot_id: botId }).delete();
          await tx('deliveries').where({ bot_id: botId }).whereIn('status', ['pending', 'retrying']).delete();
        } else {
          // Updates not yet received by polling are delivered by webhook.
          const queued = await tx('updates').where({ bot_id: botId })
            .whereNotExists(tx('deliveries').whereRaw('deliveries.bot_id = updates.bot_id and deliveries.update_id = updates.update_id'))
            .orderBy('update_seq', 'asc');
          const rows = queued.map((u) => deliveryRow({
            updateId: Number(u.update_id), updateSeq: Number(u.update_seq), kind: u.kind, message: JSON.parse(u.payload), botId,
          }, now));
          for (let k = 0; k < rows.length; k += 200) await tx('deliveries').insert(rows.slice(k, k + 200));
        }
      });
    },

    /** Removes the webhook and switches the bot to polling; optionally forgets pending updates. */
    async remove(botId: string, dropPending: boolean, now: number): Promise<void> {
      await transaction(db, async (tx) => {
        await tx('webhooks').where({ bot_id: botId }).delete();
        await tx('bots').where({ id: botId }).update({ delivery_mode: 'polling', updated_at: now });
        // Undelivered updates go back to polling (their queue rows are still there).
        await tx('deliveries').where({ bot_id: botId }).whereIn('status', ['pending', 'retrying']).delete();
        if (dropPending) await tx('updates').where({ bot_id: botId }).delete();
      });
    },

    /** Sets which update kinds are queued for the bot (null: all). */
    async setAllowedUpdates(botId: string, kinds: string[] | null): Promise<void> {
      await db('bots').where({ id: botId }).update({ allowed_updates: kinds ? JSON.stringify(kinds) : null });
    },

    async allowedUpdates(botId: string): Promise<string[] | null> {
      const row = await db('bots').where({ id: botId }).first('allowed_updates');
      return row?.allowed_updates ? JSON.parse(row.allowed_updates) : null;
    },
  };
}

export type WebhooksRepo = ReturnType<typeof createWebhooksRepo>;
