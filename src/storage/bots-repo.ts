/**
 * Bots table, and the only module that writes it: the application, review and
 * token columns, the delivery mode and update filter, and the per-bot counters
 * (update sequence, message ids) that ingest and sending advance under a row lock.
 * Console reads and writes are scoped by owner id first; admin and runtime lookups
 * are explicit about being unscoped (review desk) or by token. Every method takes
 * the caller's transaction, when it has one, as its last argument.
 */
import type { Knex } from 'knex';
import { isMysql, LITERAL, literalInt, mysqlReaderOf, padded, readerOf, statement, valuePerRow, type Db, type MysqlWriter, type SqliteWriter, type Tx } from './db.js';

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
const RECORD = RECORD_COLUMNS.join(', ');
const AUTH_COLUMNS = ['id', 'owner_id', 'status', 'token_hash', 'name', 'username', 'supports_inline_queries', 'can_join_groups'] as const;

/**
 * The record reads (one bot for its owner, one bot by id, an owner's page newest first on
 * the index bots_owner_created), selecting `select`: on SQLite one JSON array of the
 * record's columns (reader.allOf; for 27 columns, cheaper than the driver converting each),
 * on MySQL the columns as they are (MysqlReader).
 */
const recordReads = (select: string) => ({
  forOwner: `SELECT ${select} FROM bots WHERE owner_id = ? AND id = ? LIMIT 1`,
  byId: `SELECT ${select} FROM bots WHERE id = ? LIMIT 1`,
  listForOwner: (limit: number, offset: number) =>
    `SELECT ${select} FROM bots WHERE owner_id = ? ORDER BY created_at DESC, id DESC LIMIT ${literalInt(limit)}${offset > 0 ? ` OFFSET ${literalInt(offset)}` : ''}`,
});
const MYSQL_RECORD = recordReads(RECORD);

/**
 * The hot reads outside a transaction, past knex: the embedded default's (db.ts's
 * SqliteReader) and, where the dialects agree, MySQL's (MysqlReader). Hand-written,
 * literal limits.
 */
const SQL = {
  ...recordReads(`json_array(${RECORD})`),
  countForOwner: 'SELECT COUNT(*) AS n FROM bots WHERE owner_id = ?',
  byTokenHash: `SELECT ${AUTH_COLUMNS.join(', ')} FROM bots WHERE token_hash = ? LIMIT 1`,
  pollingState: 'SELECT delivery_mode, last_update_seq FROM bots WHERE id = ? LIMIT 1',
  webhookInfoState: 'SELECT delivery_mode, allowed_updates FROM bots WHERE id = ? LIMIT 1',
  allowedUpdates: 'SELECT allowed_updates FROM bots WHERE id = ? LIMIT 1',
  lastUpdateSeq: 'SELECT last_update_seq FROM bots WHERE id = ? LIMIT 1',
  /** Review status of `n` ids (lists padded to a power of two, so the texts stay few). */
  reviewStatusOf: (n: number) => `SELECT id, review_status FROM bots WHERE id IN (${Array(n).fill('?').join(', ')})`,
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

/** Ingest's and sends' SQLite reads of the counters (run by units.ts on knex's connection, synchronously). */
const COUNTER_COLUMNS = 'id, last_update_seq, last_message_id, allowed_updates, review_status, delivery_mode';
const WRITER_SQL = {
  counters: (n: number) => `SELECT ${COUNTER_COLUMNS} FROM bots WHERE id IN (${Array(n).fill('?').join(', ')})`,
  messageCounters: (n: number) => `SELECT id, last_message_id, username, name FROM bots WHERE id IN (${Array(n).fill('?').join(', ')})`,
  /** lockMessageCounters on MySQL's writer (units.ts): the rows locked in id order. */
  lockMessageCounters: (n: number) => `SELECT id, last_message_id, username, name FROM bots WHERE id IN (${Array(n).fill('?').join(', ')}) ORDER BY id FOR UPDATE`,
};

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
  const mysql = isMysql(db);
  const q = (tx?: Tx) => (tx ?? db)<BotRow>('bots');
  const reader = readerOf(db);
  const mysqlReader = mysqlReaderOf(db);
  /** The record's columns of the bots the query matches. */
  const records = (tx?: Tx) => q(tx).select(RECORD_COLUMNS);
  /** The first row of a query, fetched with a literal `LIMIT 1`. */
  const one = async <R>(query: Knex.QueryBuilder): Promise<R | undefined> => ((await query.limit(1, LITERAL)) as R[])[0];

  /** Gives each bot its own values of these columns: one UPDATE per 500 bots, rows in id order. */
  async function setPerBot<R extends { id: string }>(rows: R[], columns: Record<string, (r: R) => number>, tx?: Tx) {
    const sorted = byId(rows);
    const b = tx ?? db;
    for (let k = 0; k < sorted.length; k += 500) {
      const chunk = sorted.slice(k, k + 500);
      const ids = chunk.map((r) => r.id);
      const values = Object.fromEntries(Object.entries(columns).map(([column, of]) => [column, valuePerRow(b, 'id', ids, chunk.map(of))]));
      await q(tx).whereIn('id', padded(b, ids)).update(values);
    }
  }

  /**
   * One page and the total. A first page that is not full is the whole list, so its
   * length is the total: the common case (an owner's few bots) costs one plain query.
   * A full page, or a later one, also counts (a window count costs more than a
   * separate count on SQLite, which sorts the whole match into a temporary tree).
   */
  async function paged(base: () => Knex.QueryBuilder<BotRow>, order: 'asc' | 'desc', page: number, limit: number) {
    const rows = (await base().select(RECORD_COLUMNS)
      .orderBy([{ column: 'created_at', order }, { column: 'id', order }])
      .limit(limit, LITERAL)
      .offset((page - 1) * limit, LITERAL)) as BotRow[];
    if (page === 1 && rows.length < limit) return { items: rows.map(fromRow), total: rows.length };
    const [{ n }] = (await base().count({ n: '*' })) as unknown as [{ n: number | string }];
    return { items: rows.map(fromRow), total: Number(n) };
  }

  return {
    /**
     * Inserts a pending application and reads it back, in one transaction: the
     * bot exists as returned, or not at all. A taken username surfaces as a
     * unique violation.
     */
    async insert(bot: NewBot, outer?: Tx): Promise<BotRecord> {
      const within = <T>(body: (tx: Tx) => Promise<T>) => (outer ? body(outer) : db.transaction(body));
      return within(async (tx) => {
        await q(tx).insert({
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
        });
        return fromRow((await one<BotRow>(q(tx).where({ id: bot.id })))!);
      });
    },

    async findForOwner(ownerId: string, id: string, tx?: Tx): Promise<BotRecord | undefined> {
      const row = !tx && reader ? reader.allOf<BotRow>(RECORD_COLUMNS, SQL.forOwner, ownerId, id)[0]
        : !tx && mysqlReader ? await mysqlReader.one<BotRow>(MYSQL_RECORD.forOwner, ownerId, id)
        : await one<BotRow>(records(tx).where({ owner_id: ownerId, id }));
      return row && fromRow(row);
    },

    async listForOwner(ownerId: string, page: number, limit: number, tx?: Tx): Promise<Page<BotRecord>> {
      if (!tx && reader) {
        // As `paged`: a first page that is not full is the whole list.
        const rows = reader.allOf<BotRow>(RECORD_COLUMNS, SQL.listForOwner(limit, (page - 1) * limit), ownerId);
        const total = page === 1 && rows.length < limit ? rows.length : reader.one<{ n: number }>(SQL.countForOwner, ownerId)!.n;
        return { items: rows.map(fromRow), total };
      }
      if (!tx && mysqlReader) {
        const rows = await mysqlReader.all<BotRow>(MYSQL_RECORD.listForOwner(limit, (page - 1) * limit), ownerId);
        const total = page === 1 && rows.length < limit ? rows.length : Number((await mysqlReader.one<{ n: number | string }>(SQL.countForOwner, ownerId))!.n);
        return { items: rows.map(fromRow), total };
      }
      return paged(() => q(tx).where({ owner_id: ownerId }), 'desc', page, limit);
    },

    /** Review desk: every account's bots, oldest first. */
    async listAll(reviewStatus: ReviewStatusValue | undefined, page: number, limit: number, tx?: Tx): Promise<Page<BotRecord>> {
      return paged(() => (reviewStatus ? q(tx).where({ review_status: reviewStatus }) : q(tx)), 'asc', page, limit);
    },

    /** Review desk lookup, not scoped to an owner. */
    async findById(id: string, tx?: Tx): Promise<BotRecord | undefined> {
      const row = !tx && reader ? reader.allOf<BotRow>(RECORD_COLUMNS, SQL.byId, id)[0]
        : !tx && mysqlReader ? await mysqlReader.one<BotRow>(MYSQL_RECORD.byId, id)
        : await one<BotRow>(records(tx).where({ id }));
      return row && fromRow(row);
    },

    /** Review status of each of these bots that exists, in one query. */
    async reviewStatusOf(ids: string[], tx?: Tx): Promise<Map<string, ReviewStatusValue>> {
      const unique = padded(db, [...new Set(ids)]);
      if (unique.length === 0) return new Map();
      const rows: Pick<BotRow, 'id' | 'review_status'>[] = !tx && reader
        ? reader.all(SQL.reviewStatusOf(unique.length), ...unique)
        : await q(tx).whereIn('id', unique).select('id', 'review_status');
      return new Map(rows.map((r) => [r.id as string, r.review_status as ReviewStatusValue]));
    },

    /** The bot whose current token has this hash. */
    async findByTokenHash(hash: string, tx?: Tx): Promise<BotAuthRecord | undefined> {
      const row = !tx && reader
        ? reader.one<BotRow>(SQL.byTokenHash, hash)
        : !tx && mysqlReader ? await mysqlReader.one<BotRow>(SQL.byTokenHash, hash)
        : await one<BotRow>(q(tx).where({ token_hash: hash }).select(AUTH_COLUMNS));
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
      const row = !tx && reader ? reader.one<BotRow>(SQL.pollingState, id)
        : !tx && mysqlReader ? await mysqlReader.one<BotRow>(SQL.pollingState, id)
        : await one<BotRow>(q(tx).where({ id }).select('delivery_mode', 'last_update_seq'));
      return row && { deliveryMode: row.delivery_mode as DeliveryModeValue, lastUpdateSeq: Number(row.last_update_seq) };
    },

    /** Owner's profile change, only while approved. Returns false when no approved bot matched. */
    async updateProfile(ownerId: string, id: string, patch: BotProfilePatch, now: number, tx?: Tx): Promise<boolean> {
      const values: Record<string, unknown> = { updated_at: now };
      for (const [key, value] of Object.entries(patch)) {
        const [column, encode] = PATCH_COLUMNS[key as keyof BotProfilePatch];
        values[column] = encode(value as never);
      }
      const n = await q(tx).where({ owner_id: ownerId, id, review_status: 'approved' }).update(values);
      return n === 1;
    },

    /** pending → approved with a first token. False when the bot was not pending. */
    async approve(id: string, token: IssuedToken, now: number, tx?: Tx): Promise<boolean> {
      // Concurrent reviews of one application can deadlock on MySQL (the row and its unique
      // token index): the victim runs again, finds it no longer pending, and answers false.
      const n = await statement(db, tx, (t) => t('bots').where({ id, review_status: 'pending' })
        .update({ review_status: 'approved', review_reason: null, status: 'active', ...tokenColumns(token, now) }));
      return n === 1;
    },

    /** pending → rejected. False when the bot was not pending. */
    async reject(id: string, reason: string, now: number, tx?: Tx): Promise<boolean> {
      const n = await statement(db, tx, (t) => t('bots').where({ id, review_status: 'pending' })
        .update({ review_status: 'rejected', review_reason: reason, updated_at: now }));
      return n === 1;
    },

    /** Replaces the token of an approved bot; the old hash stops matching at once. */
    async replaceToken(ownerId: string, id: string, token: IssuedToken, now: number, tx?: Tx): Promise<boolean> {
      const n = await q(tx).where({ owner_id: ownerId, id, review_status: 'approved' }).update(tokenColumns(token, now));
      return n === 1;
    },

    /**
     * Clears the unread one-time token if it is still the given one; true for the
     * single caller that cleared it, so two concurrent reads cannot both show it.
     */
    async claimOneTimeToken(ownerId: string, id: string, sealed: string, tx?: Tx): Promise<boolean> {
      const n = await q(tx).where({ owner_id: ownerId, id, one_time_token_enc: sealed })
        .update({ one_time_token_enc: null, one_time_token_expires_at: null });
      return n === 1;
    },

    /** Discards one-time tokens left unread past their retention. */
    async purgeExpiredOneTimeTokens(now: number, tx?: Tx): Promise<number> {
      return q(tx).whereNotNull('one_time_token_enc').where('one_time_token_expires_at', '<=', now)
        .update({ one_time_token_enc: null, one_time_token_expires_at: null });
    },

    /**
     * The counters and ingest settings of these bots, their rows locked (on MySQL)
     * in id order until the transaction ends: the caller advances the counters.
     */
    async lockCounters(ids: string[], tx?: Tx): Promise<Map<string, BotCounters>> {
      let sel = q(tx).whereIn('id', ids).select('id', 'last_update_seq', 'last_message_id', 'allowed_updates', 'review_status', 'delivery_mode');
      if (mysql) sel = sel.forUpdate();
      return countersOf(await sel);
    },

    /** lockCounters and advanceCountersOf as statements of a synchronous SQLite unit of work (one writer: nothing to lock). */
    sqlite: {
      counters(w: SqliteWriter, ids: string[]): Map<string, BotCounters> {
        const list = padded(db, ids);
        return countersOf(list.length === 0 ? [] : w.all(WRITER_SQL.counters(list.length), list));
      },
      advanceCounters(w: SqliteWriter, rows: { id: string; lastUpdateSeq: number; lastMessageId: number }[]): void {
        w.update('bots', 'id', ['last_update_seq', 'last_message_id'], byId(rows).map((r) => [r.id, r.lastUpdateSeq, r.lastMessageId]));
      },
      /** lockMessageCounters' read (the write transaction holds the database). */
      messageCounters(w: SqliteWriter, ids: string[]): Map<string, MessageCounter> {
        const list = padded(db, [...new Set(ids)].sort());
        return messageCountersOf(list.length === 0 ? [] : w.all(WRITER_SQL.messageCounters(list.length), list));
      },
      setLastMessageIds(w: SqliteWriter, rows: { id: string; lastMessageId: number }[]): void {
        w.update('bots', 'id', ['last_message_id'], byId(rows).map((r) => [r.id, r.lastMessageId]));
      },
    },

    /** lockMessageCounters and setLastMessageIds as statements of a MySQL unit of work (db.ts's mysqlUnitRunner). */
    mysql: {
      async lockMessageCounters(w: MysqlWriter, ids: string[]): Promise<Map<string, MessageCounter>> {
        const list = [...new Set(ids)].sort();
        return messageCountersOf(list.length === 0 ? [] : await w.all(WRITER_SQL.lockMessageCounters(list.length), list));
      },
      setLastMessageIds(w: MysqlWriter, rows: { id: string; lastMessageId: number }[]): void {
        w.update('bots', 'id', ['last_message_id'], byId(rows).map((r) => [r.id, r.lastMessageId]));
      },
    },

    /** Sets several bots' counters (their rows locked by `lockCounters`), in one statement per 500 bots. */
    async advanceCountersOf(rows: { id: string; lastUpdateSeq: number; lastMessageId: number }[], tx?: Tx): Promise<void> {
      await setPerBot(rows, { last_update_seq: (r) => r.lastUpdateSeq, last_message_id: (r) => r.lastMessageId }, tx);
    },

    /** The last message id, username and name of these bots, their rows locked (on MySQL) in id order. */
    async lockMessageCounters(ids: string[], tx?: Tx): Promise<Map<string, MessageCounter>> {
      let sel = q(tx).whereIn('id', [...new Set(ids)].sort()).orderBy('id').select('id', 'last_message_id', 'username', 'name');
      if (mysql) sel = sel.forUpdate();
      return messageCountersOf((await sel) as BotRow[]);
    },

    /** Sets several bots' last message ids (their rows locked by `lockMessageCounters`), in one statement per 500 bots. */
    async setLastMessageIds(rows: { id: string; lastMessageId: number }[], tx?: Tx): Promise<void> {
      await setPerBot(rows, { last_message_id: (r) => r.lastMessageId }, tx);
    },

    /** Switches how the bot's updates are delivered (a webhook also sets the kinds it takes). */
    async setDeliveryMode(id: string, change: DeliveryModeChange, now: number, tx?: Tx): Promise<void> {
      await q(tx).where({ id }).update(change.mode === 'webhook'
        ? { delivery_mode: 'webhook', allowed_updates: change.allowedUpdates ? JSON.stringify(change.allowedUpdates) : null, updated_at: now }
        : { delivery_mode: 'polling', updated_at: now });
    },

    /** Sets which update kinds are queued for the bot (null: all). */
    async setAllowedUpdates(id: string, kinds: string[] | null, tx?: Tx): Promise<void> {
      await q(tx).where({ id }).update({ allowed_updates: kinds ? JSON.stringify(kinds) : null });
    },

    /** What getWebhookInfo reads of the bot: its delivery mode and update filter, in one read. */
    async webhookInfoState(id: string, tx?: Tx): Promise<{ deliveryMode: DeliveryModeValue; allowedUpdates: string[] | null } | undefined> {
      const row = !tx && reader ? reader.one<BotRow>(SQL.webhookInfoState, id)
        : !tx && mysqlReader ? await mysqlReader.one<BotRow>(SQL.webhookInfoState, id)
        : await one<BotRow>(q(tx).where({ id }).select('delivery_mode', 'allowed_updates'));
      return row && { deliveryMode: row.delivery_mode as DeliveryModeValue, allowedUpdates: row.allowed_updates ? JSON.parse(row.allowed_updates) : null };
    },

    async allowedUpdates(id: string, tx?: Tx): Promise<string[] | null> {
      const row = !tx && reader ? reader.one<BotRow>(SQL.allowedUpdates, id)
        : !tx && mysqlReader ? await mysqlReader.one<BotRow>(SQL.allowedUpdates, id)
        : await one<BotRow>(q(tx).where({ id }).select('allowed_updates'));
      return row?.allowed_updates ? JSON.parse(row.allowed_updates) : null;
    },

    /** The newest update_seq the bot has had (0 before its first update). */
    async lastUpdateSeq(id: string, tx?: Tx): Promise<number> {
      const row = !tx && reader ? reader.one<BotRow>(SQL.lastUpdateSeq, id)
        : !tx && mysqlReader ? await mysqlReader.one<BotRow>(SQL.lastUpdateSeq, id)
        : await one<BotRow>(q(tx).where({ id }).select('last_update_seq'));
      return row ? Number(row.last_update_seq) : 0;
    },
  };
}

export type BotsRepo = ReturnType<typeof createBotsRepo>;
