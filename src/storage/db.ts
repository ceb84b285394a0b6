/**
 * The database handle: the storage port (port.ts) on the driver of the configured
 * engine, chosen here once — SQLite (better-sqlite3, the embedded default) or
 * MySQL/MariaDB (mysql2) — and knex, through its public API only, for the migrations
 * and as the query builder of the cold statements (`exec`: knex writes their dialect's
 * text, the driver runs it). Only storage modules import knex or a driver.
 */
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { migrationSource } from '../../migrations/index.js';
import type { Config } from '../config.js';
import { createMysqlDriver } from './mysql/driver.js';
import type { Dialect, Reads, Sql, Writer } from './port.js';
import { createSqliteDriver, type Checkpoints } from './sqlite/driver.js';

export { isDeadlock, isDeadlockOrLockWait, isUniqueViolation, retryingDeadlocks } from './errors.js';
export type { Dialect, Reads, Sql, Writer } from './port.js';

/** A row as read by name (a test's or a cold read's). */
type Row = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A unit of work's statements, as a repository method's optional last argument. */
export type Tx = Writer;

/** Where knex's own warnings go: by default it prints plain, multi-line text to the console. */
export interface DbLogger {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

/**
 * The database: the port (`sql`) every repository runs its statements through, and knex
 * (`knex`), never connected, to build cold statements with. Emits 'query' for each
 * statement sent (the botplatform_db_statements gauge) and 'trip' for each round trip
 * to a MySQL server.
 */
export interface Db extends EventEmitter {
  readonly dialect: Dialect;
  readonly sql: Sql;
  readonly knex: Knex;
  /** Runs a statement knex built on the port (see `exec`): its rows, its row (`first()`), or the rows it matched. */
  query<R = Row[] & Row>(built: Knex.QueryBuilder | Knex.Raw, on?: Reads & Partial<Pick<Writer, 'run'>>): Promise<R>;
  /** Closes the driver's connections. */
  destroy(): Promise<void>;
}

/** knex's logger hooks, writing one structured line each (never a bare stack trace). */
function knexLog(logger: DbLogger | undefined): Knex.Config['log'] | undefined {
  if (!logger) return undefined;
  const text = (m: unknown) => (m instanceof Error ? m.message : typeof m === 'string' ? m : JSON.stringify(m)).slice(0, 2000);
  return {
    warn: (m: unknown) => logger.warn({ component: 'database', detail: text(m) }, 'database warning'),
    error: (m: unknown) => logger.error({ component: 'database', detail: text(m) }, 'database error'),
    deprecate: (m: unknown) => logger.debug({ component: 'database', detail: text(m) }, 'database deprecation'),
    debug: (m: unknown) => logger.debug({ component: 'database', detail: text(m) }, 'database debug'),
  };
}

/**
 * knex's option for a literal LIMIT or OFFSET: it binds `LIMIT ?` otherwise (`.first()`
 * too), which costs SQLite (STAT4) about twice the lookup.
 */
export const LITERAL = { skipBinding: true } as const;

/** A page limit or offset written into SQL as a literal: refused unless a non-negative safe integer. */
export function literalInt(n: number): number {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`not a row count: ${n}`);
  return n;
}

/** A bound value as both drivers take it: booleans as 1 or 0, dates as epoch ms (as knex's own runners did). */
const bindable = (v: unknown) => (typeof v === 'boolean' ? Number(v) : v instanceof Date ? v.valueOf() : v);

/**
 * Runs a statement knex built (its public `toSQL`) on the port — `on`, a unit's writer
 * or the database outside any unit — answering as knex would have: a select's rows,
 * `first()`'s row, `pluck()`'s values, and for anything else the rows it matched.
 */
export async function exec(on: Reads & Partial<Pick<Writer, 'run'>>, built: Knex.QueryBuilder | Knex.Raw): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const compiled = built.toSQL() as Knex.Sql & { pluck?: string };
  if (Array.isArray(compiled)) throw new Error('one statement at a time');
  const { sql, bindings } = compiled.toNative();
  const params = (bindings as unknown[]).map(bindable);
  switch (compiled.method) {
    case 'select': return on.all(sql, params);
    case 'first': return on.one(sql, params);
    case 'pluck': return (await on.all<Record<string, unknown>>(sql, params)).map((r) => r[compiled.pluck!]);
    case 'raw': if (/^\s*(select|with)\b/i.test(sql)) return on.all(sql, params);
    // falls through: a raw statement that answers no rows
    default:
      if (!on.run) throw new Error('a write needs a writer');
      return on.run(sql, params);
  }
}

/**
 * One page of a knex-built list and how many rows the whole list has, read by one
 * statement (`COUNT(*) OVER ()`, SQLite 3.25, MariaDB 10.2, MySQL 8): one snapshot, so the
 * total never disagrees with the page, as a count run beside it could when a commit came
 * between the two. `list` selects the columns (its rows come with `page_total` too) and
 * orders them; `base` is the list's filter alone. A page past the end has no row to carry
 * the total, so it is counted apart; should the count find rows for the page after all
 * (they came meanwhile), the page is read again.
 */
export async function pageOf<R>(
  on: Reads, knex: Knex, base: () => Knex.QueryBuilder, list: (b: Knex.QueryBuilder) => Knex.QueryBuilder, page: number, limit: number,
): Promise<{ rows: R[]; total: number }> {
  const offset = (page - 1) * limit;
  for (let reads = 1; ; reads++) {
    const rows = (await exec(on, list(base()).select(knex.raw('COUNT(*) OVER () AS page_total'))
      .limit(limit, LITERAL).offset(offset, LITERAL))) as (R & { page_total: number | string })[];
    if (rows.length > 0) return { rows, total: Number(rows[0]!.page_total) };
    if (page === 1) return { rows, total: 0 };
    const [{ n }] = (await exec(on, base().count({ n: '*' }))) as [{ n: number | string }];
    // After three reads of a list growing that fast, the total is the page's (none come before it).
    if (Number(n) <= offset || reads === 3) return { rows, total: Math.min(Number(n), offset) };
  }
}

/** The knex client of each engine: a builder here, connected only to migrate. */
const builders: Record<Dialect, Knex.Config> = {
  sqlite: { client: 'better-sqlite3', useNullAsDefault: true },
  mysql: { client: 'mysql2' },
};

/** What migrateLatest needs to connect. */
const connections = new WeakMap<Db, { config: Knex.Config; log: Knex.Config['log'] }>();

/**
 * Opens the database. `DATABASE_URL=sqlite::memory:` is not supported: the SQLite driver
 * keeps a writer and a reader connection of its own, and each `:memory:` connection
 * would be a database of its own.
 */
export function createDb(database: Config['database'], logger?: DbLogger, opts: { checkpoints?: Checkpoints } = {}): Db {
  const emitter = new EventEmitter();
  const events = {
    statement: (sql: string, bindings: readonly unknown[]) => emitter.emit('query', { sql, bindings }),
    trip: () => emitter.emit('trip'),
    lockWait: (ms: number) => emitter.emit('lock-wait', ms),
  };
  let sql: Sql;
  let connection: Knex.Config;
  if (database.kind === 'sqlite') {
    if (database.filename === ':memory:') {
      throw new Error('DATABASE_URL=sqlite::memory: is not supported: give SQLite a file (sqlite:/path/to/file.sqlite)');
    }
    // For this service's user alone: the folder created 0700, the database file created
    // 0600 before SQLite opens it (SQLite gives its -wal and -shm files the database
    // file's mode). Existing ones keep theirs.
    fs.mkdirSync(path.dirname(database.filename), { recursive: true, mode: 0o700 });
    fs.closeSync(fs.openSync(database.filename, 'a', 0o600));
    sql = createSqliteDriver(database.filename, events, opts);
    connection = {
      ...builders.sqlite,
      connection: { filename: database.filename },
      pool: {
        min: 1,
        max: 1,
        afterCreate: (conn: { pragma(s: string): unknown }, done: (err: Error | null, conn: unknown) => void) => {
          conn.pragma('journal_mode = WAL');
          conn.pragma('busy_timeout = 5000');
          conn.pragma('foreign_keys = ON');
          done(null, conn);
        },
      },
    };
  } else {
    sql = createMysqlDriver({ url: database.url, poolMax: database.poolMax, acquireTimeoutMs: database.acquireTimeoutMs ?? 5000 }, events);
    connection = {
      ...builders.mysql,
      connection: { uri: database.url, charset: 'utf8mb4', supportBigNumbers: true, bigNumberStrings: false, dateStrings: true } as Knex.MySql2ConnectionConfig,
      pool: { min: 0, max: 1 },
      acquireConnectionTimeout: database.acquireTimeoutMs ?? 5000,
    };
  }
  const knex = knexFactory(builders[sql.dialect]);
  const db = Object.assign(emitter, {
    dialect: sql.dialect,
    sql,
    knex,
    query: (built: Knex.QueryBuilder | Knex.Raw, on: Reads & Partial<Pick<Writer, 'run'>> = sql) => exec(on, built),
    destroy: () => sql.close(),
  }) as Db;
  connections.set(db, { config: connection, log: knexLog(logger) });
  return db;
}

/** Brings the schema up to date, on a knex connection of its own, closed after. */
export async function migrateLatest(db: Db): Promise<string[]> {
  return withMigrationConnection(db, async (knex) => {
    const [, applied] = (await knex.migrate.latest({ migrationSource })) as [number, string[]];
    return applied;
  });
}

/**
 * The list padded to the next power of two by repeating its last item, for `IN (...)`
 * lists and VALUES lists of statements run with lists of any length: on SQLite each
 * distinct text is prepared anew (~0.1 ms for a long one), and padded lists keep the
 * texts few, so they stay prepared. A repeated id in an IN list changes nothing; where
 * a repeat would, `filler` pads instead. MySQL statements are not prepared: the list is
 * left as it is.
 */
export function padded<T>(on: { dialect: Dialect }, list: readonly T[], filler?: T): T[] {
  if (on.dialect === 'mysql' || list.length < 2) return [...list];
  let size = 1;
  while (size < list.length) size *= 2;
  const fill = filler === undefined ? list[list.length - 1]! : filler;
  return [...list, ...Array.from({ length: size - list.length }, () => fill)];
}

/**
 * Runs `body` in the caller's unit when one is given (the caller's unit is retried
 * whole), else in a unit of its own, run again as `Sql.unit` does.
 */
export async function inTransaction<T>(
  db: Db, tx: Tx | undefined, body: (tx: Tx) => Promise<T>, attempts = 4, retryable?: (err: unknown) => boolean,
): Promise<T> {
  return tx ? body(tx) : db.sql.unit(body, { attempts, retryable });
}

/** Cheap readiness probe. */
export async function pingDb(db: Db, timeoutMs = 1500): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      db.sql.one('SELECT 1 AS ok'),
      new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('database ping timed out')), timeoutMs); }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `fn` with a knex connected as the migrations are (a connection of its own, closed after): for a migration's own functions. */
export async function withMigrationConnection<T>(db: Db, fn: (knex: Knex) => Promise<T>): Promise<T> {
  const { config, log } = connections.get(db)!;
  const knex = knexFactory({ ...config, log });
  try {
    return await fn(knex);
  } finally {
    await knex.destroy();
  }
}
