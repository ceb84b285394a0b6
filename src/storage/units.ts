/**
 * The writes that span tables, each one unit of work (port.ts's `Sql.unit`: one
 * transaction, run again whole when MySQL picks it as a deadlock victim) that calls the
 * tables' owning repositories with its writer: ingest, setting and removing a webhook,
 * recording delivery attempts, sending a message. Everything else writes one table,
 * through its repository. Each is written once, for both engines: on SQLite its
 * statements are prepared once and run on the one writer; on MySQL the statements whose
 * answers it does not read go with its next one or its COMMIT (ingest, 2 round trips).
 *
 * Lock order (MySQL): ingest locks the bots' rows first (in id order), then inserts
 * into updates, outbox, deliveries, ingest_keys, chats (in key order), messages and queries;
 * recording attempts writes deliveries (in primary-key order, as a claim locks them),
 * then deletes updates, ends the runs of failures of the webhooks that answered (one
 * statement) and sets webhooks' last errors and health, bots in id order (a deadlock
 * between those is retried whole). Sending locks the bot's row, then its chat's feed
 * partition row.
 */
import { MESSAGES_TOPIC, NO_DELIVERY, UPDATES_TOPIC, WEBHOOK_UPDATES_TOPIC } from '../bus/topics.js';
import { createBotsRepo, type BotCounters, type MessageCounter } from './bots-repo.js';
import type { Db, Writer } from './db.js';
import { createAttemptsRepo } from './attempts-repo.js';
import { createDeliveriesRepo, type OutcomeWrite } from './deliveries-repo.js';
import { createFeedRepo } from './feed-repo.js';
import { createMessagesRepo, type ChatRecord, type ChatSeen, type InboundMessage, type SentMessage } from './messages-repo.js';
import { createOutboxRepo, type NewOutboxMessage } from './outbox-repo.js';
import { createQueriesRepo, type QueryKind, type StoredQuery } from './queries-repo.js';
import { createUpdatesRepo, type IngestKey, type StoredUpdate } from './updates-repo.js';
import { createWebhooksRepo, type WebhookConfig } from './webhooks-repo.js';

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
  /**
   * A callback_query or inline_query: the query recorded with the update, so that the bot
   * can answer it (queries-repo.ts). Its update has no chat of its own to record.
   */
  query?: { id: string; chatId: number | null; messageId: number | null; userId: number };
  /**
   * The ingest request it came in (any object, the same for each of its updates): a
   * request is stored all or none, so an update of it refused (no bot, not approved)
   * withdraws the others.
   */
  request?: object;
}

/** Per item: its stored update, the ids it already had (a known idempotency key), or why it was not stored. */
export type IngestOutcome =
  | { ok: StoredUpdate }
  | { duplicate: { updateId: number; updateSeq: number } }
  | { filtered: true }
  | { error: 'NO_BOT' | 'NOT_APPROVED' }
  /** Not stored: another update of its request was refused. */
  | { withdrawn: true };

export interface UnitsOptions {
  /** How long an ingest idempotency key is remembered (ms). */
  idempotencyWindowMs?: number;
  /** How long a webhook may fail without a success before it is disabled (ms; WEBHOOK_DISABLE_AFTER, default 5 days). */
  webhookDisableAfterMs?: number;
}

/** A duration as the disabled reason tells it: "5d", "2s", "1h30m". */
function spell(ms: number): string {
  const parts: string[] = [];
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (ms >= size) {
      parts.push(`${Math.floor(ms / size)}${unit}`);
      ms %= size;
    }
  }
  return parts.join('') || `${ms}ms`;
}

/** One message to send: its bot and chat, and how to build it once its id and its chat's names are known. */
export interface SendItem {
  botId: string;
  chatId: number;
  build: (messageId: number, bot: { username: string; name: string }, chat: ChatRecord) => Record<string, unknown>;
}

/** Ingest's first step: each item refused (no bot, not approved), withdrawn with its request, filtered out, or accepted; which accepted ones carry a key. */
interface Screened {
  outcomes: IngestOutcome[];
  /** Items to store, in order. */
  accepted: number[];
  /** Accepted items with an idempotency key. */
  keyed: number[];
  counters: Map<string, BotCounters>;
  /** [item, the earlier item of the batch with its key]. */
  repeats: [number, number][];
  /** Keys found past the window: forgotten before being stored again. */
  staleKeys: { botId: string; key: string }[];
}

function screen(items: NewUpdate[], counters: Map<string, BotCounters>): Screened {
  const outcomes: IngestOutcome[] = new Array(items.length);
  const accepted: number[] = [];
  items.forEach((item, i) => {
    const bot = counters.get(item.botId);
    if (!bot) outcomes[i] = { error: 'NO_BOT' };
    else if (bot.reviewStatus !== 'approved') outcomes[i] = { error: 'NOT_APPROVED' };
    else if (bot.allowedUpdates && !bot.allowedUpdates.includes(item.kind)) outcomes[i] = { filtered: true };
    else accepted.push(i);
  });
  // A request is stored all or none: an update refused withdraws the others of its request.
  const refused = new Set<object>();
  items.forEach((item, i) => {
    if (item.request && outcomes[i] && 'error' in outcomes[i]) refused.add(item.request);
  });
  const kept = refused.size === 0 ? accepted : accepted.filter((i) => {
    const request = items[i]!.request;
    if (!request || !refused.has(request)) return true;
    outcomes[i] = { withdrawn: true };
    return false;
  });
  return { outcomes, accepted: kept, keyed: kept.filter((i) => items[i]!.idempotencyKey), counters, repeats: [], staleKeys: [] };
}

/** The keyed items' keys, by bot. */
function keysByBot(items: NewUpdate[], keyed: number[]): Map<string, string[]> {
  const byBot = new Map<string, string[]>();
  for (const i of keyed) byBot.set(items[i]!.botId, [...(byBot.get(items[i]!.botId) ?? []), items[i]!.idempotencyKey!]);
  return byBot;
}

/**
 * Updates whose idempotency key is known (within the window) answer the ids they got
 * then; a key repeated in this batch answers the ids of its first update. The bots'
 * rows are locked: no concurrent ingest of theirs can add the same key meanwhile.
 */
function dedupeKeys(items: NewUpdate[], s: Screened, found: Map<string, IngestKey[]>, now: number, windowMs: number) {
  const known = new Map<string, { updateId: number; updateSeq: number; fresh: boolean }>();
  for (const [botId, rows] of found) {
    for (const r of rows) known.set(`${botId}\n${r.key}`, { updateId: r.updateId, updateSeq: r.updateSeq, fresh: r.createdAt >= now - windowMs });
  }
  const first = new Map<string, number>();
  const fresh: number[] = [];
  for (const i of s.accepted) {
    const item = items[i]!;
    if (!item.idempotencyKey) {
      fresh.push(i);
      continue;
    }
    const id = `${item.botId}\n${item.idempotencyKey}`;
    const hit = known.get(id);
    if (hit?.fresh) s.outcomes[i] = { duplicate: { updateId: hit.updateId, updateSeq: hit.updateSeq } };
    else if (first.has(id)) s.repeats.push([i, first.get(id)!]);
    else {
      first.set(id, i);
      fresh.push(i);
      if (hit) s.staleKeys.push({ botId: item.botId, key: item.idempotencyKey });
    }
  }
  s.accepted = fresh;
}

/**
 * The accepted items stored: ids from `firstId` on, each bot's update_seq and message id
 * counters advanced (its row is locked), the outcomes set (repeats answer their first's
 * ids), and the rows to write.
 */
function assign(items: NewUpdate[], s: Screened, firstId: number, now: number) {
  let nextId = firstId;
  // A message without an id gets the bot's next one, past every id given so far.
  const perBot = new Map<string, { count: number; maxGiven: number; auto: number }>();
  for (const i of s.accepted) {
    const item = items[i]!;
    const p = perBot.get(item.botId) ?? { count: 0, maxGiven: 0, auto: 0 };
    p.count += 1;
    perBot.set(item.botId, p);
    // Only a new message takes a message id (an edit names one the bot received; a query has none).
    if (item.kind !== 'message') continue;
    const given = Number(item.message.message_id) || 0;
    if (given > 0) p.maxGiven = Math.max(p.maxGiven, given);
    else p.auto += 1;
  }
  const nextSeq = new Map<string, number>();
  const nextMessageId = new Map<string, number>();
  const advanced: { id: string; lastUpdateSeq: number; lastMessageId: number }[] = [];
  for (const [botId, p] of perBot) {
    const bot = s.counters.get(botId)!;
    const base = Math.max(bot.lastMessageId, p.maxGiven);
    advanced.push({ id: botId, lastUpdateSeq: bot.lastUpdateSeq + p.count, lastMessageId: base + p.auto });
    nextSeq.set(botId, bot.lastUpdateSeq + 1);
    nextMessageId.set(botId, base + 1);
  }

  const stored: StoredUpdate[] = [];
  const toDeliver: StoredUpdate[] = [];
  const chats = new Map<string, ChatSeen>();
  const inbound = new Map<string, InboundMessage>();
  const edits = new Map<string, InboundMessage>();
  const queries: Omit<StoredQuery, 'answeredAt'>[] = [];
  for (const i of s.accepted) {
    const item = items[i]!;
    const seq = nextSeq.get(item.botId)!;
    nextSeq.set(item.botId, seq + 1);
    let message = item.message;
    if (item.kind === 'message' && !message.message_id) {
      const id = nextMessageId.get(item.botId)!;
      nextMessageId.set(item.botId, id + 1);
      message = { ...message, message_id: id };
    }
    const update: StoredUpdate = { updateId: nextId++, botId: item.botId, updateSeq: seq, kind: item.kind, message, createdAt: now };
    s.outcomes[i] = { ok: update };
    stored.push(update);
    // A bot in webhook mode gets a delivery, due now, in the same transaction.
    if (s.counters.get(item.botId)!.deliveryMode === 'webhook') toDeliver.push(update);
    if (item.query) {
      queries.push({ botId: item.botId, kind: item.kind as QueryKind, ...item.query, createdAt: now });
      continue;
    }
    const chat = message.chat as { id: number; type: string; title?: string; username?: string; first_name?: string; last_name?: string };
    const messageId = Number(message.message_id);
    const key = `${item.botId}/${chat.id}/${messageId}`;
    if (item.kind === 'edited_message') {
      // The stored copy becomes the edited message (the last edit of a batch wins).
      edits.set(key, { botId: item.botId, chatId: chat.id, messageId, at: now, message });
      continue;
    }
    // The chat becomes one the bot may write to; the message one it may reply to.
    chats.set(`${item.botId}/${chat.id}`, {
      botId: item.botId, chatId: chat.id, type: chat.type, title: chat.title, username: chat.username, firstName: chat.first_name, lastName: chat.last_name, at: now,
    });
    inbound.set(key, { botId: item.botId, chatId: chat.id, messageId, at: now, message });
  }
  for (const [i, of] of s.repeats) {
    const { updateId, updateSeq } = (s.outcomes[of] as { ok: StoredUpdate }).ok;
    s.outcomes[i] = { duplicate: { updateId, updateSeq } };
  }
  const keys = s.accepted.filter((i) => items[i]!.idempotencyKey).map((i) => {
    const { ok } = s.outcomes[i] as { ok: StoredUpdate };
    return { botId: ok.botId, key: items[i]!.idempotencyKey!, updateId: ok.updateId, updateSeq: ok.updateSeq, createdAt: now };
  });
  return { advanced, stored, toDeliver, chats: [...chats.values()], inbound: [...inbound.values()], edits: [...edits.values()], queries, keys };
}

/**
 * The messages to store: each item whose chat has written to its bot, with its bot's next
 * message id (its row locked), built; per item its message, or undefined (no such chat).
 */
function numberSends(items: SendItem[], counters: Map<string, MessageCounter>, chats: Map<string, Map<number, ChatRecord>>) {
  const next = new Map<string, number>();
  const sent: SentMessage[] = [];
  const answers = items.map((item) => {
    const chat = chats.get(item.botId)?.get(item.chatId);
    if (!chat) return undefined;
    const bot = counters.get(item.botId);
    if (!bot) throw new Error(`no bot ${item.botId} to send as`);
    const messageId = (next.get(item.botId) ?? bot.lastMessageId) + 1;
    next.set(item.botId, messageId);
    const message = item.build(messageId, { username: bot.username, name: bot.name }, chat);
    sent.push({ botId: item.botId, chatId: item.chatId, messageId, json: JSON.stringify(message) });
    return message;
  });
  return { sent, answers, last: [...next].map(([id, lastMessageId]) => ({ id, lastMessageId })) };
}

/** A sent message as the bus and the outbound feed carry it (wire.ts's WireFeedValue). */
const feedPayload = (m: SentMessage) => `{"bot_id":${JSON.stringify(m.botId)},"message":${m.json}}`;

/**
 * Something a bot did in a chat other than sending a message (an edit, a delete, a chat
 * action, an answer to a query), for the bus and the outbound feed: its chat (the
 * feed's partition key) and its event in the wire spelling (wire.ts's toWireFeedEvent).
 */
export interface FeedEventItem {
  botId: string;
  chatId: number;
  event: Record<string, unknown>;
}

/** Outbox messages a unit added claimed by its caller (to publish at once), with their ids. */
export interface ClaimedOutbox {
  ids: number[];
  messages: NewOutboxMessage[];
}

/** ClaimedOutbox while its unit runs: the ids are answered once the insert has run. */
type Claiming = { ids: Promise<number[]>; messages: NewOutboxMessage[] };

/**
 * Where a unit's outbox messages go: undefined, into the outbox for the relay; a time, into
 * it claimed by the caller until then, where the engine answers their ids with the insert
 * (OutboxRepo.insertClaimed; elsewhere, for the relay): `claimed` has them and their ids, for
 * the caller to publish at once and delete; 'announce', nowhere: `announce` has them, for the
 * caller to publish once committed (a bus no more durable than its process: the in-process one).
 */
export type OutboxWay = number | 'announce' | undefined;

/** A unit's outbox messages as `way` sends them, while the unit runs. */
interface Routed { claiming?: Claiming; announce?: NewOutboxMessage[] }

/** Sends a unit's outbox messages `way` (OutboxWay), in the unit `w`. */
function routeOutbox(outbox: ReturnType<typeof createOutboxRepo>, messages: NewOutboxMessage[], now: number, way: OutboxWay, w: Writer): Routed {
  if (way === 'announce') return { announce: messages };
  if (way === undefined) {
    outbox.insert(messages, now, w);
    return {};
  }
  const ids = outbox.insertClaimed(messages, now, way, w);
  return ids ? { claiming: { ids, messages } } : {};
}

/** What a unit's caller is handed of its outbox messages, once the unit has committed. */
const routedOf = async (r: Routed | undefined): Promise<{ claimed?: ClaimedOutbox; announce?: NewOutboxMessage[] }> =>
  ({ claimed: r?.claiming && { ids: await r.claiming.ids, messages: r.claiming.messages }, announce: r?.announce });

/**
 * The outbox messages announcing stored updates: one per bot, keyed by it (its consumers
 * read the key and then the database): for a bot whose updates got deliveries, an empty one
 * on the webhook updates topic (the dispatchers'), for one whose got none NO_DELIVERY on the
 * updates topic (the long polls').
 */
const outboxMessages = (stored: StoredUpdate[], delivered: StoredUpdate[]) => {
  const webhook = new Set(delivered.map((u) => u.botId));
  return [...new Set(stored.map((u) => u.botId))].map((botId) => (webhook.has(botId)
    ? { topic: WEBHOOK_UPDATES_TOPIC, key: botId, payload: '' }
    : { topic: UPDATES_TOPIC, key: botId, payload: NO_DELIVERY }));
};

/** The tables a deleted bot's rows are purged from (DELETED_BOT_RETENTION after its deletion). */
const PURGED_TABLES = [
  'updates', 'deliveries', 'delivery_attempts', 'webhooks', 'chats', 'messages', 'files', 'uploads', 'possession_challenges',
  'bot_stats', 'ingest_keys', 'queries',
] as const;

export function createUnitsOfWork(db: Db, opts: UnitsOptions = {}) {
  const idempotencyWindowMs = opts.idempotencyWindowMs ?? 86_400_000;
  const disableAfterMs = opts.webhookDisableAfterMs ?? 5 * 86_400_000;
  const bots = createBotsRepo(db);
  const updates = createUpdatesRepo(db, { idempotencyWindowMs });
  const outbox = createOutboxRepo(db);
  const deliveries = createDeliveriesRepo(db);
  const attemptsLog = createAttemptsRepo(db);
  const webhooks = createWebhooksRepo(db);
  const messages = createMessagesRepo(db);
  const feed = createFeedRepo(db);
  const queries = createQueriesRepo(db);
  const { sql } = db;
  const dedupe = (items: NewUpdate[], s: Screened, found: Map<string, IngestKey[]>, now: number) =>
    dedupeKeys(items, s, found, now, idempotencyWindowMs);

  /** ingest, its outbox messages sent `outboxWay` (OutboxWay: to the relay by default). */
  const ingestClaiming = async (
    items: NewUpdate[], now: number, outboxWay?: OutboxWay,
  ): Promise<{ outcomes: IngestOutcome[]; claimed?: ClaimedOutbox; announce?: NewOutboxMessage[] }> => {
    const botIds = [...new Set(items.map((i) => i.botId))];
    let routed: Routed | undefined;
    const outcomes = await sql.unit(async (w) => {
      routed = undefined;
      // The bots' rows locked and the update ids taken in one round trip (MySQL): ids for
      // every item, those of items not stored (refused, filtered, duplicates) left unused.
      const counters = bots.lockCountersLater(botIds, w);
      const firstId = await updates.takeIds(items.length, w);
      const screened = screen(items, await counters);
      if (screened.keyed.length > 0) {
        const found = new Map<string, IngestKey[]>();
        for (const [botId, keys] of keysByBot(items, screened.keyed)) found.set(botId, await updates.findIngestKeys(botId, keys, w));
        dedupe(items, screened, found, now);
      }
      if (screened.accepted.length === 0) return screened.outcomes;
      const plan = assign(items, screened, firstId, now);
      bots.advanceCounters(plan.advanced, w);
      updates.insert(plan.stored, w);
      routed = routeOutbox(outbox, outboxMessages(plan.stored, plan.toDeliver), now, outboxWay, w);
      deliveries.insertFor(plan.toDeliver, now, w);
      // Keys past the window are forgotten (the retention sweep may not have run yet).
      for (const { botId, key } of screened.staleKeys) updates.forgetIngestKey(botId, key, w);
      updates.insertIngestKeys(plan.keys, w);
      messages.upsertChats(plan.chats, w);
      messages.insertInbound(plan.inbound, w);
      messages.replaceInbound(plan.edits, w);
      queries.insert(plan.queries, w);
      return screened.outcomes;
    });
    return { outcomes, ...(await routedOf(routed)) };
  };

  return {
    /**
     * Stores a batch of updates (any bots) in one transaction, with their outbox
     * messages, their deliveries (bots in webhook mode), their idempotency keys, the
     * chats and messages they bring (an edit replaces the stored copy of the message it
     * names) and the queries they carry (callback and inline queries: no chat of their own). Each bot's row is locked while its sequence
     * advances.
     */
    async ingest(items: NewUpdate[], now: number): Promise<IngestOutcome[]> {
      return (await ingestClaiming(items, now)).outcomes;
    },

    ingestClaiming,

    /**
     * Stores the webhook and switches the bot to webhook mode, in one transaction:
     * its queued updates not yet handed to a webhook get deliveries, or (dropPending)
     * are forgotten with its open deliveries.
     */
    async setWebhook(botId: string, config: WebhookConfig, dropPending: boolean, now: number): Promise<void> {
      await sql.unit(async (w) => {
        await webhooks.upsert(botId, config, now, w);
        await bots.setDeliveryMode(botId, { mode: 'webhook', allowedUpdates: config.allowedUpdates }, now, w);
        if (dropPending) {
          updates.deleteAllOfBot(botId, w);
          deliveries.deleteOpenOfBot(botId, w);
        } else {
          // Updates not yet received by polling are delivered by webhook.
          deliveries.insertFor(await updates.withoutDelivery(botId, w), now, w);
        }
      });
    },

    /**
     * Deletes the owner's bot, in one transaction: its webhook, open deliveries and queued
     * updates go, its row leaves `bots` (its token matches nothing from the commit on) and
     * a tombstone keeps what the purge needs. False when the owner has no such bot.
     */
    async deleteBot(ownerId: string, bot: { id: string; username: string; reserved: boolean }, now: number, purgeAt: number): Promise<boolean> {
      return sql.unit(async (w) => {
        webhooks.delete(bot.id, w);
        deliveries.deleteOpenOfBot(bot.id, w);
        updates.deleteAllOfBot(bot.id, w);
        return bots.remove(ownerId, bot, now, purgeAt, w);
      });
    },

    /**
     * Removes what is left of a deleted bot (its rows in every table keyed by bot_id but
     * the outbound feed's, whose positions its consumers hold), then its tombstone; one
     * transaction.
     */
    async purgeDeletedBot(botId: string, now = Date.now()): Promise<void> {
      await sql.unit(async (w) => {
        // Content whose last file goes with the bot starts its UNREFERENCED_BLOB_RETENTION: the
        // blob sweep removes its bytes then, if still no file refers to it (checked again under
        // the row's lock; a reuse meanwhile clears the mark).
        w.queue(
          'UPDATE blobs SET unreferenced_since = ? WHERE unreferenced_since IS NULL'
          + ' AND checksum IN (SELECT checksum FROM files WHERE bot_id = ?)'
          + ' AND NOT EXISTS (SELECT 1 FROM files f WHERE f.checksum = blobs.checksum AND f.bot_id <> ?)',
          [now, botId, botId]);
        for (const table of PURGED_TABLES) w.queue(`DELETE FROM ${table} WHERE bot_id = ?`, [botId]);
        bots.dropTombstone(botId, w);
      });
    },

    /** Removes the webhook and switches the bot to polling, in one transaction; optionally forgets pending updates. */
    async removeWebhook(botId: string, dropPending: boolean, now: number): Promise<void> {
      await sql.unit(async (w) => {
        webhooks.delete(botId, w);
        await bots.setDeliveryMode(botId, { mode: 'polling' }, now, w);
        // Undelivered updates go back to polling (their queue rows are still there).
        deliveries.deleteOpenOfBot(botId, w);
        if (dropPending) updates.deleteAllOfBot(botId, w);
      });
    },

    /**
     * Records attempts made under their leases, all in one transaction: each new
     * state as given, the update of each closed delivery leaves the bot's queue, and
     * each bot's latest failure becomes its webhook's last error. A success ends the
     * webhook's run of failures; a run that has lasted webhookDisableAfterMs disables
     * it. Per item: false when its lease was lost.
     */
    async recordAttempts(items: OutcomeWrite[]): Promise<boolean[]> {
      // A deadlock (with ingest's inserts into updates, say) is retried whole, effects and all.
      return sql.unit(async (w) => {
        const written = await deliveries.writeOutcomes(items, w);
        attemptsLog.insert(items.flatMap((i) => (i.log ? [i.log] : [])), w);
        updates.deleteClosed(written.closed, w);
        // Successes first: a failure after a bot's success in this batch starts its next run.
        webhooks.recordSuccesses(written.succeeded, w);
        for (const [botId, f] of written.failures) {
          const reason = `every delivery attempt failed for ${spell(disableAfterMs)}; last error: ${f.error}`;
          webhooks.recordFailures(botId, f, disableAfterMs, reason, w);
        }
        return written.results;
      });
    },

    /**
     * Several sends (any bots) in one transaction: each send's chat is read (a chat that
     * has not written to its bot stores nothing: undefined is its answer), each bot's row
     * is locked (in id order) while its message counter advances, each message stored and
     * queued in the outbox (→ bus, for the messaging services), and the outbound feed gets
     * the same value at its chat's next place (the partitions' rows locked last, in order).
     * Messages of one bot get ids in the order given; `build` makes each wire message from
     * its id, the sending bot's username and name (read with the counter) and its chat's
     * names. The outbox messages are sent `outboxWay` (OutboxWay: to the relay by default).
     */
    async sendMessages(items: SendItem[], now: number, outboxWay?: OutboxWay): Promise<{
      answers: (Record<string, unknown> | undefined)[]; claimed?: ClaimedOutbox; announce?: NewOutboxMessage[];
    }> {
      let routed: Routed | undefined;
      const answers = await sql.unit(async (w) => {
        routed = undefined;
        // The chats read with the bots' lock (MySQL: in its round trip).
        const chatsRead = messages.chatsOf(items, w);
        const counters = await bots.lockMessageCounters(items.map((i) => i.botId), w);
        const { sent, answers, last } = numberSends(items, counters, await chatsRead);
        if (sent.length === 0) return answers;
        bots.setLastMessageIds(last, w);
        messages.insertSent(sent, now, w);
        const payloads = sent.map(feedPayload);
        routed = routeOutbox(outbox, sent.map((m, i) => ({ topic: MESSAGES_TOPIC, key: m.botId, payload: payloads[i]! })), now, outboxWay, w);
        await feed.appendMany(sent.map((m, i) => ({ botId: m.botId, chatId: m.chatId, payload: payloads[i]! })), now, w);
        return answers;
      });
      return { answers, ...(await routedOf(routed)) };
    },

    /**
     * Events for the bus and the outbound feed (outbox and feed, as sendMessages writes
     * them), with `also` (the writes the events announce: an edit's new message, a
     * delete's removal...) in the same transaction, after it; each event at its chat's
     * next place in the feed.
     */
    async feedEvents<T>(items: FeedEventItem[], now: number, also?: (w: Writer) => Promise<T> | T): Promise<T | undefined> {
      return sql.unit(async (w) => {
        const result = also ? await also(w) : undefined;
        const payloads = items.map((e) => JSON.stringify({ bot_id: e.botId, ...e.event }));
        outbox.insert(items.map((e, i) => ({ topic: MESSAGES_TOPIC, key: e.botId, payload: payloads[i]! })), now, w);
        await feed.appendMany(items.map((e, i) => ({ botId: e.botId, chatId: e.chatId, payload: payloads[i]! })), now, w);
        return result;
      });
    },
  };
}

export type UnitsOfWork = ReturnType<typeof createUnitsOfWork>;
