/**
 * Bots table, and the only module that writes it: the application, review and
 * token columns, the delivery mode and update filter, and the per-bot counters
 * (update sequence, message ids) that ingest and sending advance under a row lock.
 * Console reads and writes are scoped by owner id first; admin and runtime lookups
 * are explicit about being unscoped (review desk) or by token. Every method takes
 * the caller's transaction, when it has one, as its last argument.
 */
import type { Knex } from 'knex';
import { exec, isUniqueViolation, literalInt, padded, pageOf, type Db, type Tx, type Writer } from './db.js';
import { Conflict } from './errors.js';
import { marks } from './statement-texts.js';

export type ReviewStatusValue = 'pending' | 'approved' | 'rejected';
export type BotStatusValue = 'inactive' | 'active' | 'suspended';
export type DeliveryModeValue = 'polling' | 'webhook';

export interface BotLinkValue { title: string; url: string }
export interface BotContactValue { email?: string; url?: string; note?: string }
export interface BotCommandValue { command: string; description: string }

export interface BotRecord {
  id: string;
  ownerId: string;
  name: string;
  username: string;
  description: string | null;
  avatar: string | null;
  scopes: string[];
  reviewStatus: ReviewStatusValue;
  reviewReason: string | null;
  status: BotStatusValue;
  deliveryMode: DeliveryModeValue;
  shortDescription: string | null;
  about: string | null;
  coverUrl: string | null;
  links: BotLinkValue[];
  contact: BotContactValue | null;
  supportsInlineQueries: boolean;
  friendRequestMode: string | null;
  groupPrivacy: boolean;
  canJoinGroups: boolean;
  commandMenu: BotCommandValue[];
  tokenPrefix: string | null;
  tokenIssuedAt: number | null;
  oneTimeTokenSealed: string | null;
  oneTimeTokenExpiresAt: number | null;
  createdAt: number;
  updatedAt: number;
}

/** The profile fields an owner may change; each present key is written. */
export type BotProfilePatch = Partial<
  Pick<
    BotRecord,
    | 'name' | 'description' | 'avatar' | 'shortDescription' | 'about' | 'coverUrl' | 'links' | 'contact'
    | 'supportsInlineQueries' | 'friendRequestMode' | 'groupPrivacy' | 'canJoinGroups' | 'commandMenu'
  >
>;

export interface Page<T> { items: T[]; total: number }

/** The application fields an owner may change before approval; each present key is written. */
export interface ApplicationPatch {
  name?: string;
  username?: string;
  description?: string | null;
  avatar?: string | null;
  scopes?: string[];
}

interface BotRow {
  id: string; owner_id: string; name: string; username: string; description: string | null; avatar: string | null;
  scopes: string; review_status: string; review_reason: string | null; status: string; delivery_mode: string;
  short_description: string | null; about: string | null; cover_url: string | null; links: string; contact: string | null;
  supports_inline_queries: number | boolean; friend_request_mode: string | null; group_privacy: number | boolean;
  can_join_groups: number | boolean; command_menu: string; token_hash: string | null; token_prefix: string | null;
  token_issued_at: number | string | null; one_time_token_enc: string | null;
  one_time_token_expires_at: number | string | null; created_at: number | string; updated_at: number | string;
  last_update_seq: number | string; last_message_id: number | string; allowed_updates: string | null;
}

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

/** The columns a BotRecord is made of (not the token hash, the counters, the update filter). */
const RECORD_COLUMNS = [
  'id', 'owner_id', 'name', 'username', 'description', 'avatar', 'scopes', 'review_status', 'review_reason', 'status',
  'delivery_mode', 'short_description', 'about', 'cover_url', 'links', 'contact', 'supports_inline_queries',
  'friend_request_mode', 'group_privacy', 'can_join_groups', 'command_menu', 'token_prefix', 'token_issued_at',
  'one_time_token_enc', 'one_time_token_expires_at', 'created_at', 'updated_at',
] as const;
const AUTH_COLUMNS = ['id', 'owner_id', 'status', 'token_hash', 'name', 'username', 'supports_inline_queries', 'can_join_groups'] as const;

/** The hot reads' texts (the same on both engines; literal limits). */
const SQL = {
  /** The record's rows (Reads.allOf: `SELECT <record columns>` and this). */
  forOwner: 'FROM bots WHERE owner_id = ? AND id = ? LIMIT 1',
  byId: 'FROM bots WHERE id = ? LIMIT 1',
  /** An owner's first page newest first, on the index bots_owner_created. */
  listForOwner: (limit: number) => `FROM bots WHERE owner_id = ? ORDER BY created_at DESC, id DESC LIMIT ${literalInt(limit)}`,
  byTokenHash: `SELECT ${AUTH_COLUMNS.join(', ')} FROM bots WHERE token_hash = ? LIMIT 1`,
  pollingState: 'SELECT delivery_mode, last_update_seq FROM bots WHERE id = ? LIMIT 1',
  webhookInfoState: 'SELECT delivery_mode, allowed_updates FROM bots WHERE id = ? LIMIT 1',
  allowedUpdates: 'SELECT allowed_updates FROM bots WHERE id = ? LIMIT 1',
  lastUpdateSeq: 'SELECT last_update_seq FROM bots WHERE id = ? LIMIT 1',
  /** Review status of `n` ids (lists padded to a power of two, so the texts stay few). */
  ingestStateOf: (n: number) => `SELECT id, review_status, supports_inline_queries FROM bots WHERE id IN (${marks(n)})`,
};

function fromRow(r: BotRow): BotRecord {
  return {
    id: r.id,
    ownerId: r.owner_id,
    name: r.name,
    username: r.username,
    description: r.description,
    avatar: r.avatar,
    scopes: JSON.parse(r.scopes),
    reviewStatus: r.review_status as ReviewStatusValue,
    reviewReason: r.review_reason,
    status: r.status as BotStatusValue,
    deliveryMode: r.delivery_mode as DeliveryModeValue,
    shortDescription: r.short_description,
    about: r.about,
    coverUrl: r.cover_url,
    links: JSON.parse(r.links),
    contact: r.contact === null ? null : JSON.parse(r.contact),
    supportsInlineQueries: Boolean(r.supports_inline_queries),
    friendRequestMode: r.friend_request_mode,
    groupPrivacy: Boolean(r.group_privacy),
    canJoinGroups: Boolean(r.can_join_groups),
    commandMenu: JSON.parse(r.command_menu),
    tokenPrefix: r.token_prefix,
    tokenIssuedAt: num(r.token_issued_at),
    oneTimeTokenSealed: r.one_time_token_enc,
    oneTimeTokenExpiresAt: num(r.one_time_token_expires_at),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

const PATCH_COLUMNS: Record<keyof BotProfilePatch, [string, (v: never) => unknown]> = {
  name: ['name', (v) => v],
  description: ['description', (v) => v],
  avatar: ['avatar', (v) => v],
  shortDescription: ['short_description', (v) => v],
  about: ['about', (v) => v],
  coverUrl: ['cover_url', (v) => v],
  links: ['links', (v) => JSON.stringify(v)],
  contact: ['contact', (v) => (v === null ? null : JSON.stringify(v))],
  supportsInlineQueries: ['supports_inline_queries', (v) => v],
  friendRequestMode: ['friend_request_mode', (v) => v],
  groupPrivacy: ['group_privacy', (v) => v],
  canJoinGroups: ['can_join_groups', (v) => v],
  commandMenu: ['command_menu', (v) => JSON.stringify(v)],
};

export interface NewBot {
  id: string;
  ownerId: string;
  name: string;
  username: string;
  description: string | null;
  avatar: string | null;
  scopes: string[];
  now: number;
}

export interface IssuedToken {
  hash: string;
  prefix: string;
  /** Sealed plaintext kept for the owner's next detail read, or null when shown right away. */
  sealed: string | null;
  expiresAt: number | null;
}

/** The columns a newly issued token sets; the previous hash stops matching. */
const tokenColumns = (token: IssuedToken, now: number) => ({
  token_hash: token.hash,
  token_prefix: token.prefix,
  token_issued_at: now,
  one_time_token_enc: token.sealed,
  one_time_token_expires_at: token.expiresAt,
  updated_at: now,
});

/**
 * The units' reads of the counters (ingest's and sends'), the rows locked on MySQL until
 * the unit ends (`lock`: ` FOR UPDATE` there; SQLite's one writer holds the database).
 */
const COUNTER_COLUMNS = 'id, last_update_seq, last_message_id, allowed_updates, review_status, delivery_mode';
const UNIT_SQL = {
  lockCounters: (n: number, lock: string) => `SELECT ${COUNTER_COLUMNS} FROM bots WHERE id IN (${marks(n)})${lock}`,
  lockMessageCounters: (n: number, lock: string) => `SELECT id, last_message_id, username, name FROM bots WHERE id IN (${marks(n)}) ORDER BY id${lock}`,
};

/** The counters' columns a unit sets (constant lists: the SQLite driver finds its texts by them). */
const ADVANCED_COLUMNS = ['last_update_seq', 'last_message_id'] as const;
const LAST_MESSAGE_ID = ['last_message_id'] as const;

/* eslint-disable @typescript-eslint/no-explicit-any */
const countersOf = (rows: any[]): Map<string, BotCounters> => new Map(rows.map((r) => [r.id, {
  id: r.id,
  lastUpdateSeq: Number(r.last_update_seq),
  lastMessageId: Number(r.last_message_id),
  allowedUpdates: r.allowed_updates ? JSON.parse(r.allowed_updates) : null,
  reviewStatus: r.review_status as ReviewStatusValue,
  deliveryMode: r.delivery_mode as DeliveryModeValue,
}]));
/* eslint-enable @typescript-eslint/no-explicit-any */

/** A sending bot's message counter, and the names its sent messages carry. */
export interface MessageCounter {
  lastMessageId: number;
  username: string;
  name: string;
}

const messageCountersOf = (rows: { id: string; last_message_id: number | string; username: string; name: string }[]): Map<string, MessageCounter> =>
  new Map(rows.map((r) => [r.id, { lastMessageId: Number(r.last_message_id), username: r.username, name: r.name }]));

const byId = <R extends { id: string }>(rows: R[]) => [...rows].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

export interface BotCounters {
  id: string;
  lastUpdateSeq: number;
  lastMessageId: number;
  allowedUpdates: string[] | null;
  reviewStatus: ReviewStatusValue;
  deliveryMode: DeliveryModeValue;
}

/** How a bot's updates reach it: a webhook (with the kinds it takes; null for all), or polling. */
export type DeliveryModeChange = { mode: 'webhook'; allowedUpdates: string[] | null } | { mode: 'polling' };

/** What the auth step reads of a bot by its token hash: enough to decide, and to answer getMe. */
export interface BotAuthRecord {
  id: string;
  ownerId: string;
  status: BotStatusValue;
  tokenHash: string;
  name: string;
  username: string;
  supportsInlineQueries: boolean;
  canJoinGroups: boolean;
}

export function createBotsRepo(db: Db) {
  const { sql, knex } = db;
  const lock = sql.dialect === 'mysql' ? ' FOR UPDATE' : '';
  /** Reads outside a unit, or in the caller's. */
  const on = (tx?: Tx) => tx ?? sql;
  const q = () => knex<BotRow>('bots');

  /** One page and the total, from one statement (db.ts's `pageOf`; knex-built: the review desk's cold read). */
  async function paged(base: () => Knex.QueryBuilder<BotRow>, order: 'asc' | 'desc', page: number, limit: number, tx?: Tx) {
    const { rows, total } = await pageOf<BotRow>(on(tx), knex, base, (b) => b.select(RECORD_COLUMNS)
      .orderBy([{ column: 'created_at', order }, { column: 'id', order }]), page, limit);
    return { items: rows.map(fromRow), total };
  }

  /** Writes one knex-built statement, in the caller's unit or on its own: how many rows it matched. */
  const write = (built: Knex.QueryBuilder, tx?: Tx): Promise<number> => exec(on(tx), built);

  return {
    /**
     * Inserts a pending application and reads it back, in one transaction: the
     * bot exists as returned, or not at all. A taken username throws
     * Conflict('username').
     */
    async insert(bot: NewBot, outer?: Tx): Promise<BotRecord> {
      const body = async (w: Writer) => {
        await exec(w, q().insert({
          id: bot.id,
          owner_id: bot.ownerId,
          name: bot.name,
          username: bot.username,
          description: bot.description,
          avatar: bot.avatar,
          scopes: JSON.stringify(bot.scopes),
          review_status: 'pending',
          status: 'inactive',
          delivery_mode: 'polling',
          links: '[]',
          command_menu: '[]',
          created_at: bot.now,
          updated_at: bot.now,
        }));
        return fromRow((await w.oneOf<BotRow>(RECORD_COLUMNS, SQL.byId, [bot.id]))!);
      };
      return (outer ? body(outer) : sql.unit(body, { attempts: 1 })).catch((err: unknown) => {
        throw isUniqueViolation(err) ? new Conflict('username', { cause: err }) : err;
      });
    },

    async findForOwner(ownerId: string, id: string, tx?: Tx): Promise<BotRecord | undefined> {
      const row = await on(tx).oneOf<BotRow>(RECORD_COLUMNS, SQL.forOwner, [ownerId, id]);
      return row && fromRow(row);
    },

    async listForOwner(ownerId: string, page: number, limit: number, tx?: Tx): Promise<Page<BotRecord>> {
      // A first page that is not full is the whole list, so its length is the total: the
      // common case costs one plain query. A full first page is read again with its total,
      // and a later page read so at once, in one statement (a count beside it could see a
      // later commit).
      if (page === 1) {
        const rows = await on(tx).allOf<BotRow>(RECORD_COLUMNS, SQL.listForOwner(limit), [ownerId]);
        if (rows.length < limit) return { items: rows.map(fromRow), total: rows.length };
      }
      return paged(() => q().where({ owner_id: ownerId }), 'desc', page, limit, tx);
    },

    /** Review desk: every account's bots, oldest first. */
    async listAll(reviewStatus: ReviewStatusValue | undefined, page: number, limit: number, tx?: Tx): Promise<Page<BotRecord>> {
      return paged(() => (reviewStatus ? q().where({ review_status: reviewStatus }) : q()), 'asc', page, limit, tx);
    },

    /** Review desk lookup, not scoped to an owner. */
    async findById(id: string, tx?: Tx): Promise<BotRecord | undefined> {
      const row = await on(tx).oneOf<BotRow>(RECORD_COLUMNS, SQL.byId, [id]);
      return row && fromRow(row);
    },

    /** What ingest checks of each of these bots that exists (review status, inline mode), in one query. */
    async ingestStateOf(ids: string[], tx?: Tx): Promise<Map<string, { reviewStatus: ReviewStatusValue; supportsInlineQueries: boolean }>> {
      const unique = padded(sql, [...new Set(ids)]);
      if (unique.length === 0) return new Map();
      const rows = await on(tx).all<Pick<BotRow, 'id' | 'review_status' | 'supports_inline_queries'>>(SQL.ingestStateOf(unique.length), unique);
      return new Map(rows.map((r) => [r.id, { reviewStatus: r.review_status as ReviewStatusValue, supportsInlineQueries: Boolean(r.supports_inline_queries) }]));
    },

    /** The bot whose current token has this hash. */
    async findByTokenHash(hash: string, tx?: Tx): Promise<BotAuthRecord | undefined> {
      const row = await on(tx).one<BotRow>(SQL.byTokenHash, [hash]);
      return row && {
        id: row.id,
        ownerId: row.owner_id,
        status: row.status as BotStatusValue,
        tokenHash: row.token_hash!,
        name: row.name,
        username: row.username,
        supportsInlineQueries: Boolean(row.supports_inline_queries),
        canJoinGroups: Boolean(row.can_join_groups),
      };
    },

    /** What getUpdates decides by, in one cheap read: the delivery mode and the newest update_seq. */
    async pollingState(id: string, tx?: Tx): Promise<{ deliveryMode: DeliveryModeValue; lastUpdateSeq: number } | undefined> {
      const row = await on(tx).one<BotRow>(SQL.pollingState, [id]);
      return row && { deliveryMode: row.delivery_mode as DeliveryModeValue, lastUpdateSeq: Number(row.last_update_seq) };
    },

    /** Owner's profile change, only while approved. Returns false when no approved bot matched. */
    async updateProfile(ownerId: string, id: string, patch: BotProfilePatch, now: number, tx?: Tx): Promise<boolean> {
      const values: Record<string, unknown> = { updated_at: now };
      for (const [key, value] of Object.entries(patch)) {
        const [column, encode] = PATCH_COLUMNS[key as keyof BotProfilePatch];
        values[column] = encode(value as never);
      }
      return (await write(q().where({ owner_id: ownerId, id, review_status: 'approved' }).update(values), tx)) === 1;
    },

    /**
     * Changes an application under review or rejected (the fields given; username may
     * change too). False when no such application matched (approved, or not the owner's).
     * A username taken answers Conflict('username').
     */
    async editApplication(ownerId: string, id: string, patch: ApplicationPatch, now: number, tx?: Tx): Promise<boolean> {
      const values: Record<string, unknown> = { updated_at: now };
      if (patch.name !== undefined) values.name = patch.name;
      if (patch.username !== undefined) values.username = patch.username;
      if (patch.description !== undefined) values.description = patch.description;
      if (patch.avatar !== undefined) values.avatar = patch.avatar;
      if (patch.scopes !== undefined) values.scopes = JSON.stringify(patch.scopes);
      try {
        return (await write(q().where({ owner_id: ownerId, id }).whereIn('review_status', ['pending', 'rejected']).update(values), tx)) === 1;
      } catch (err) {
        throw isUniqueViolation(err) ? new Conflict('username', { cause: err }) : err;
      }
    },

    /** rejected → pending, the reason cleared. False when the owner's bot was not rejected. */
    async resubmit(ownerId: string, id: string, now: number, tx?: Tx): Promise<boolean> {
      return (await write(q().where({ owner_id: ownerId, id, review_status: 'rejected' })
        .update({ review_status: 'pending', review_reason: null, updated_at: now }), tx)) === 1;
    },

    /**
     * Deletes the owner's bot row, leaving its tombstone (purge_at; the username reserved
     * when it had been approved), in the caller's unit. False when no such bot.
     */
    async remove(ownerId: string, bot: { id: string; username: string; reserved: boolean }, now: number, purgeAt: number, w: Writer): Promise<boolean> {
      const n = await exec(w, q().where({ owner_id: ownerId, id: bot.id }).delete());
      if (n !== 1) return false;
      w.insert('deleted_bots', ['id', 'owner_id', 'username', 'reserved', 'deleted_at', 'purge_at'],
        [[bot.id, ownerId, bot.username, bot.reserved ? 1 : 0, now, purgeAt]]);
      return true;
    },

    /** Whether `username` is reserved for another owner (an approved bot of theirs deleted less than its retention ago). */
    async usernameReserved(username: string, ownerId: string, now: number, tx?: Tx): Promise<number | null> {
      const row = await exec(on(tx), knex('deleted_bots').where({ username }).andWhere('reserved', 1).andWhere('purge_at', '>', now)
        .andWhereNot({ owner_id: ownerId }).orderBy('purge_at', 'desc').first('purge_at'));
      return row ? Number(row.purge_at) : null;
    },

    /** Tombstones whose retention has ended (at most `limit`). */
    async purgeDue(now: number, limit: number, tx?: Tx): Promise<string[]> {
      return (await exec(on(tx), knex('deleted_bots').where('purge_at', '<=', now).orderBy('purge_at').limit(limit).pluck('id'))) as string[];
    },

    /** Drops a tombstone, in the caller's unit (its bot's rows are gone). */
    dropTombstone(id: string, w: Writer): void {
      w.queue('DELETE FROM deleted_bots WHERE id = ?', [id]);
    },

    /** pending → approved with a first token. False when the bot was not pending. */
    async approve(id: string, token: IssuedToken, now: number, tx?: Tx): Promise<boolean> {
      // Concurrent reviews of one application can deadlock on MySQL (the row and its unique
      // token index): the victim runs again, finds it no longer pending, and answers false.
      return (await write(q().where({ id, review_status: 'pending' })
        .update({ review_status: 'approved', review_reason: null, status: 'active', ...tokenColumns(token, now) }), tx)) === 1;
    },

    /** pending → rejected. False when the bot was not pending. */
    async reject(id: string, reason: string, now: number, tx?: Tx): Promise<boolean> {
      return (await write(q().where({ id, review_status: 'pending' })
        .update({ review_status: 'rejected', review_reason: reason, updated_at: now }), tx)) === 1;
    },

    /** Replaces the token of an approved bot; the old hash stops matching at once. */
    async replaceToken(ownerId: string, id: string, token: IssuedToken, now: number, tx?: Tx): Promise<boolean> {
      return (await write(q().where({ owner_id: ownerId, id, review_status: 'approved' }).update(tokenColumns(token, now)), tx)) === 1;
    },

    /**
     * Clears the unread one-time token if it is still the given one; true for the
     * single caller that cleared it, so two concurrent reads cannot both show it.
     */
    async claimOneTimeToken(ownerId: string, id: string, sealed: string, tx?: Tx): Promise<boolean> {
      return (await write(q().where({ owner_id: ownerId, id, one_time_token_enc: sealed })
        .update({ one_time_token_enc: null, one_time_token_expires_at: null }), tx)) === 1;
    },

    /** Discards one-time tokens left unread past their retention. */
    async purgeExpiredOneTimeTokens(now: number, tx?: Tx): Promise<number> {
      return write(q().whereNotNull('one_time_token_enc').where('one_time_token_expires_at', '<=', now)
        .update({ one_time_token_enc: null, one_time_token_expires_at: null }), tx);
    },

    /**
     * The counters and ingest settings of these bots, in the caller's unit, their rows
     * locked (on MySQL) in id order until it ends: the caller advances the counters.
     */
    async lockCounters(ids: string[], w: Writer): Promise<Map<string, BotCounters>> {
      const list = padded(sql, [...ids].sort());
      return countersOf(list.length === 0 ? [] : await w.all(UNIT_SQL.lockCounters(list.length, lock), list));
    },

    /** lockCounters, held back until the unit's next statement that answers (the same round trip on MySQL). */
    async lockCountersLater(ids: string[], w: Writer): Promise<Map<string, BotCounters>> {
      const list = padded(sql, [...ids].sort());
      return countersOf(list.length === 0 ? [] : await w.allLater(UNIT_SQL.lockCounters(list.length, lock), list));
    },

    /** Sets several bots' counters (their rows locked by `lockCounters`), rows in id order. */
    advanceCounters(rows: { id: string; lastUpdateSeq: number; lastMessageId: number }[], w: Writer): void {
      w.update('bots', 'id', ADVANCED_COLUMNS, byId(rows).map((r) => [r.id, r.lastUpdateSeq, r.lastMessageId]));
    },

    /** The last message id, username and name of these bots, in the caller's unit, their rows locked (on MySQL) in id order. */
    async lockMessageCounters(ids: string[], w: Writer): Promise<Map<string, MessageCounter>> {
      const list = padded(sql, [...new Set(ids)].sort());
      return messageCountersOf(list.length === 0 ? [] : await w.all(UNIT_SQL.lockMessageCounters(list.length, lock), list));
    },

    /** Sets several bots' last message ids (their rows locked by `lockMessageCounters`), rows in id order. */
    setLastMessageIds(rows: { id: string; lastMessageId: number }[], w: Writer): void {
      w.update('bots', 'id', LAST_MESSAGE_ID, byId(rows).map((r) => [r.id, r.lastMessageId]));
    },

    /** Switches how the bot's updates are delivered (a webhook also sets the kinds it takes). */
    async setDeliveryMode(id: string, change: DeliveryModeChange, now: number, tx?: Tx): Promise<void> {
      await write(q().where({ id }).update(change.mode === 'webhook'
        ? { delivery_mode: 'webhook', allowed_updates: change.allowedUpdates ? JSON.stringify(change.allowedUpdates) : null, updated_at: now }
        : { delivery_mode: 'polling', updated_at: now }), tx);
    },

    /** Sets which update kinds are queued for the bot (null: all). */
    async setAllowedUpdates(id: string, kinds: string[] | null, tx?: Tx): Promise<void> {
      await write(q().where({ id }).update({ allowed_updates: kinds ? JSON.stringify(kinds) : null }), tx);
    },

    /** What getWebhookInfo reads of the bot: its delivery mode and update filter, in one read. */
    async webhookInfoState(id: string, tx?: Tx): Promise<{ deliveryMode: DeliveryModeValue; allowedUpdates: string[] | null } | undefined> {
      const row = await on(tx).one<BotRow>(SQL.webhookInfoState, [id]);
      return row && { deliveryMode: row.delivery_mode as DeliveryModeValue, allowedUpdates: row.allowed_updates ? JSON.parse(row.allowed_updates) : null };
    },

    async allowedUpdates(id: string, tx?: Tx): Promise<string[] | null> {
      const row = await on(tx).one<BotRow>(SQL.allowedUpdates, [id]);
      return row?.allowed_updates ? JSON.parse(row.allowed_updates) : null;
    },

    /** The newest update_seq the bot has had (0 before its first update). */
    async lastUpdateSeq(id: string, tx?: Tx): Promise<number> {
      const row = await on(tx).one<BotRow>(SQL.lastUpdateSeq, [id]);
      return row ? Number(row.last_update_seq) : 0;
    },
  };
}

export type BotsRepo = ReturnType<typeof createBotsRepo>;
