/**
 * Updates, their per-bot sequence, and the outbox, written together: an update
 * and the bus message announcing it commit in one transaction, so nothing is
 * published that was not committed and nothing committed goes unannounced.
 */
import { isDeadlockOrLockWait, isMysql, retryingDeadlocks, transaction, type Db, type Tx } from './db.js';
import { UPDATES_TOPIC } from '../bus/topics.js';
import { deliveryRow } from './delivery-rows.js';

export interface NewUpdate {
  botId: string;
  kind: string;
  /** The message as it is on the JSON wire, without update ids; message_id 0 means "assign the bot's next". */
  message: Record<string, unknown>;
  /**
   * The producer's identity of the update (e.g. the source's message id), unique per
   * bot: an update whose key was ingested within the window is not stored again, it
   * answers the ids it got then.
   */
  idempotencyKey?: string;
}

export interface StoredUpdate {
  updateId: number;
  botId: string;
  updateSeq: number;
  kind: string;
  message: Record<string, unknown>;
  createdAt: number;
}

export interface OutboxMessage {
  id: number;
  topic: string;
  key: string;
  payload: string;
}

/** Per item: its stored update, the ids it already had (a known idempotency key), or why it was not stored. */
export type IngestOutcome =
  | { ok: StoredUpdate }
  | { duplicate: { updateId: number; updateSeq: number } }
  | { filtered: true }
  | { error: 'NO_BOT' | 'NOT_APPROVED' };

interface BotSeqRow {
  id: string;
  last_update_seq: number | string;
  last_message_id: number | string;
  allowed_updates: string | null;
  review_status: string;
  delivery_mode: string;
}

export interface UpdatesRepoOptions {
  /** How long an ingest idempotency key is remembered (ms). */
  idempotencyWindowMs?: number;
}

export function createUpdatesRepo(db: Db, opts: UpdatesRepoOptions = {}) {
  const mysql = isMysql(db);
  const idempotencyWindowMs = opts.idempotencyWindowMs ?? 86_400_000;

  /** Takes n ids from the platform-wide counter. */
  async function takeIds(tx: Tx, n: number): Promise<number> {
    await tx('id_counters').where({ name: 'update_id' }).increment('value', n);
    const row = await tx('id_counters').where({ name: 'update_id' }).first('value');
    return Number(row.value) - n + 1;
  }

  return {
    /**
     * Stores a batch of updates (any bots) in one transaction, with their outbox
     * messages. Each bot's row is locked while its sequence advances.
     */
    async ingest(items: NewUpdate[], now: number): Promise<IngestOutcome[]> {
      return transaction(db, async (tx) => {
        const botIds = [...new Set(items.map((i) => i.botId))].sort();
        let q = tx<BotSeqRow>('bots').whereIn('id', botIds).select('id', 'last_update_seq', 'last_message_id', 'allowed_updates', 'review_status', 'delivery_mode');
        if (mysql) q = q.forUpdate();
        const bots = new Map((await q).map((b) => [b.id, b]));

        const outcomes: IngestOutcome[] = new Array(items.length);
        const accepted: number[] = [];
        items.forEach((item, i) => {
          const bot = bots.get(item.botId);
          if (!bot) outcomes[i] = { error: 'NO_BOT' };
          else if (bot.review_status !== 'approved') outcomes[i] = { error: 'NOT_APPROVED' };
          else if (bot.allowed_updates && !(JSON.parse(bot.allowed_updates) as string[]).includes(item.kind)) {
            outcomes[i] = { filtered: true };
          } else accepted.push(i);
        });
        // Updates whose idempotency key is known (within the window) answer the ids they got
        // then; a key repeated in this batch answers the ids of its first update. The bots'
        // rows are locked: no concurrent ingest of theirs can add the same key meanwhile.
        const keyed = accepted.filter((i) => items[i]!.idempotencyKey);
        const repeats: [number, number][] = []; // [item, the item it repeats]
        const staleKeys: { botId: string; key: string }[] = [];
        if (keyed.length > 0) {
          const known = new Map<string, { updateId: number; updateSeq: number; fresh: boolean }>();
          const byBot = new Map<string, string[]>();
          for (const i of keyed) byBot.set(items[i]!.botId, [...(byBot.get(items[i]!.botId) ?? []), items[i]!.idempotencyKey!]);
          for (const [botId, keys] of byBot) {
            for (let k = 0; k < keys.length; k += 200) {
              const found = await tx('ingest_keys').where({ bot_id: botId }).whereIn('idempotency_key', keys.slice(k, k + 200))
                .select('idempotency_key', 'update_id', 'update_seq', 'created_at');
              for (const r of found) {
                known.set(`${botId}\n${r.idempotency_key}`, {
                  updateId: Number(r.update_id), updateSeq: Number(r.update_seq), fresh: Number(r.created_at) >= now - idempotencyWindowMs,
                });
              }
            }
          }
          const first = new Map<string, number>();
          const fresh: number[] = [];
          for (const i of accepted) {
            const item = items[i]!;
            if (!item.idempotencyKey) {
              fresh.push(i);
              continue;
            }
            const id = `${item.botId}\n${item.idempotencyKey}`;
            const hit = known.get(id);
            if (hit?.fresh) outcomes[i] = { duplicate: { updateId: hit.updateId, updateSeq: hit.updateSeq } };
            else if (first.has(id)) repeats.push([i, first.get(id)!]);
            else {
              first.set(id, i);
              fresh.push(i);
              if (hit) staleKeys.push({ botId: item.botId, key: item.idempotencyKey });
            }
          }
          accepted.splice(0, accepted.length, ...fresh);
        }
        if (accepted.length === 0) return outcomes;

        let nextId = await takeIds(tx, accepted.length);
        // Each bot's row is locked: its update_seq and message id counters advance here.
        // A message without an id gets the bot's next one, past every id given so far.
        const perBot = new Map<string, { count: number; maxGiven: number; auto: number }>();
        for (const i of accepted) {
          const item = items[i]!;
          const p = perBot.get(item.botId) ?? { count: 0, maxGiven: 0, auto: 0 };
          const given = Number(item.message.message_id) || 0;
          p.count += 1;
          if (given > 0) p.maxGiven = Math.max(p.maxGiven, given);
          else p.auto += 1;
          perBot.set(item.botId, p);
        }
        const nextSeq = new Map<string, number>();
        const nextMessageId = new Map<string, number>();
        for (const [botId, p] of perBot) {
          const bot = bots.get(botId)!;
          const base = Math.max(Number(bot.last_message_id), p.maxGiven);
          await tx('bots').where({ id: botId }).update({
            last_update_seq: Number(bot.last_update_seq) + p.count,
            last_message_id: base + p.auto,
          });
          nextSeq.set(botId, Number(bot.last_update_seq) + 1);
          nextMessageId.set(botId, base + 1);
        }

        const rows = [];
        const outbox = [];
        const deliveries = [];
        const chats = new Map<string, { bot_id: string; chat_id: number; type: string; created_at: number; updated_at: number }>();
        const inbound = new Map<string, { bot_id: string; chat_id: number; message_id: number; outbound: boolean; created_at: number }>();
        for (const i of accepted) {
          const item = items[i]!;
          const seq = nextSeq.get(item.botId)!;
          nextSeq.set(item.botId, seq + 1);
          let message = item.message;
          if (!message.message_id) {
            const id = nextMessageId.get(item.botId)!;
            nextMessageId.set(item.botId, id + 1);
            message = { ...message, message_id: id };
          }
          const stored: StoredUpdate = { updateId: nextId++, botId: item.botId, updateSeq: seq, kind: item.kind, message, createdAt: now };
          outcomes[i] = { ok: stored };
          rows.push({
            update_id: stored.updateId, bot_id: stored.botId, update_seq: seq, kind: stored.kind,
            payload: JSON.stringify(message), created_at: now,
          });
          outbox.push({ topic: UPDATES_TOPIC, msg_key: stored.botId, payload: JSON.stringify(stored), created_at: now });
          // A bot in webhook mode gets a delivery, due now, in the same transaction.
          if (bots.get(item.botId)!.delivery_mode === 'webhook') deliveries.push(deliveryRow(stored, now));
          // The chat becomes one the bot may write to; the message one it may reply to.
          const chat = message.chat as { id: number; type: string };
          chats.set(`${item.botId}/${chat.id}`, { bot_id: item.botId, chat_id: chat.id, type: chat.type, created_at: now, updated_at: now });
          const messageId = Number(message.message_id);
          inbound.set(`${item.botId}/${chat.id}/${messageId}`, { bot_id: item.botId, chat_id: chat.id, message_id: messageId, outbound: false, created_at: now });
        }
        for (let k = 0; k < rows.length; k += 200) {
          await tx('updates').insert(rows.slice(k, k + 200));
          await tx('outbox').insert(outbox.slice(k, k + 200));
        }
        for (let k = 0; k < deliveries.length; k += 200) await tx('deliveries').insert(deliveries.slice(k, k + 200));
        for (const [i, of] of repeats) {
          const { updateId, updateSeq } = (outcomes[of] as { ok: StoredUpdate }).ok;
          outcomes[i] = { duplicate: { updateId, updateSeq } };
        }
        // Keys past the window are forgotten (the retention sweep may not have run yet).
        for (const { botId, key } of staleKeys) await tx('ingest_keys').where({ bot_id: botId, idempotency_key: key }).delete();
        const keyRows = accepted.filter((i) => items[i]!.idempotencyKey).map((i) => {
          const { ok } = outcomes[i] as { ok: StoredUpdate };
          return { bot_id: ok.botId, idempotency_key: items[i]!.idempotencyKey!, update_id: ok.updateId, update_seq: ok.updateSeq, created_at: now };
        });
        for (let k = 0; k < keyRows.length; k += 200) await tx('ingest_keys').insert(keyRows.slice(k, k + 200));
        // In key order, so concurrent ingests lock chat rows in the same order.
        const chatRows = [...chats.values()].sort((a, b) => a.bot_id.localeCompare(b.bot_id) || a.chat_id - b.chat_id);
        for (let k = 0; k < chatRows.length; k += 200) {
          await tx('chats').insert(chatRows.slice(k, k + 200)).onConflict(['bot_id', 'chat_id']).merge(['type', 'updated_at']);
        }
        const messageRows = [...inbound.values()];
        for (let k = 0; k < messageRows.length; k += 200) {
          await tx('messages').insert(messageRows.slice(k, k + 200)).onConflict(['bot_id', 'chat_id', 'message_id']).ignore();
        }
        return outcomes;
      });
    },

    /** Updates of a bot from update_seq `from` on, in order. */
    async read(botId: string, from: number, limit: number): Promise<StoredUpdate[]> {
      const rows = await db('updates')
        .where({ bot_id: botId })
        .andWhere('update_seq', '>=', from)
        .orderBy('update_seq', 'asc')
        .limit(limit);
      return rows.map((r) => ({
        updateId: Number(r.update_id),
        botId: r.bot_id,
        updateSeq: Number(r.update_seq),
        kind: r.kind,
        message: JSON.parse(r.payload),
        createdAt: Number(r.created_at),
      }));
    },

    /**
     * Confirms (forgets) every update of the bot below update_seq `below`. Deleted by
     * primary key (found by a plain read), so the delete takes no gap locks on the
     * bot's sequence that a concurrent ingest would wait on; a deadlock victim is
     * run again.
     */
    async confirmBelow(botId: string, below: number): Promise<number> {
      let total = 0;
      for (;;) {
        const ids = (await db('updates').where({ bot_id: botId }).andWhere('update_seq', '<', below)
          .orderBy('update_seq', 'asc').limit(1000).pluck('update_id')) as number[];
        if (ids.length === 0) return total;
        total += await retryingDeadlocks(() => db('updates').whereIn('update_id', ids).delete(), 5, isDeadlockOrLockWait);
        if (ids.length < 1000) return total;
      }
    },

    async pendingCount(botId: string): Promise<number> {
      const [{ n }] = (await db('updates').where({ bot_id: botId }).count({ n: '*' })) as [{ n: number | string }];
      return Number(n);
    },

    /** The newest update_seq the bot has had (0 before its first update). */
    async lastSeq(botId: string): Promise<number> {
      const row = await db('bots').where({ id: botId }).first('last_update_seq');
      return row ? Number(row.last_update_seq) : 0;
    },

    /** Deletes updates stored before `before` (epoch ms), in bounded chunks. */
    async purgeOlderThan(before: number): Promise<number> {
      let total = 0;
      for (;;) {
        const ids = (await db('updates').where('created_at', '<', before).limit(1000).pluck('update_id')) as number[];
        if (ids.length === 0) return total;
        total += await retryingDeadlocks(() => db('updates').whereIn('update_id', ids).delete(), 5, isDeadlockOrLockWait);
      }
    },

    /** Forgets ingest idempotency keys past their window (swept often: each run has a few minutes' worth). */
    async purgeIngestKeys(now: number): Promise<number> {
      return retryingDeadlocks(() => db('ingest_keys').where('created_at', '<', now - idempotencyWindowMs).delete(), 5, isDeadlockOrLockWait);
    },

    /**
     * Claims the oldest unclaimed outbox messages until `now + leaseMs`, in a short
     * transaction of its own: publishing happens outside any transaction, and no
     * ingest waits on it. Several relays (one per core) claim disjoint batches; a claim
     * whose relay died lapses, and the batch goes out again (at least once).
     */
    async claimOutbox(limit: number, now: number, leaseMs: number): Promise<OutboxMessage[]> {
      return retryingDeadlocks(() => db.transaction(async (tx) => {
        let q = tx('outbox').where('claimed_until', '<', now).orderBy('id', 'asc').limit(limit).select('id', 'topic', 'msg_key', 'payload');
        if (mysql) q = q.forUpdate().skipLocked();
        const rows = await q;
        if (rows.length > 0) await tx('outbox').whereIn('id', rows.map((r) => r.id)).update({ claimed_until: now + leaseMs });
        return rows.map((r) => ({ id: Number(r.id), topic: r.topic, key: r.msg_key, payload: r.payload }));
        // Read committed: the claim locks the rows it takes, not the gap new outbox rows go into.
      }, mysql ? { isolationLevel: 'read committed' } : undefined), 5, isDeadlockOrLockWait);
    },

    /** Deletes published outbox messages. */
    async deleteOutbox(ids: number[]): Promise<void> {
      await retryingDeadlocks(() => db('outbox').whereIn('id', ids).delete(), 5, isDeadlockOrLockWait);
    },

    /** Gives claimed messages back (their publish failed), for the next attempt by any relay. */
    async releaseOutbox(ids: number[]): Promise<void> {
      await retryingDeadlocks(() => db('outbox').whereIn('id', ids).update({ claimed_until: 0 }), 5, isDeadlockOrLockWait);
    },

    /** Outbox messages not yet published (claimed or not). */
    async outboxBacklog(): Promise<number> {
      const [{ n }] = (await db('outbox').count({ n: '*' })) as [{ n: number | string }];
      return Number(n);
    },
  };
}

export type UpdatesRepo = ReturnType<typeof createUpdatesRepo>;
