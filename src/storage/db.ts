/**
 * The database handle: knex on MySQL/MariaDB (mysql2) or on SQLite (better-sqlite3)
 * for the embedded default. Only storage modules import knex.
 */
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import knexFactory, { type Knex } from 'knex';
import { migrationSource } from '../../migrations/index.js';
import type { Config } from '../config.js';

export type Db = Knex;
export type Tx = Knex.Transaction;

/** Whether the handle is MySQL/MariaDB (row locks, SKIP LOCKED) rather than SQLite (one writer). */
export const isMysql = (db: Db) => db.client.config.client === 'mysql2';

interface SqliteConnection {
  pragma(s: string): unknown;
  prepare(sql: string): unknown;
}

/**
 * Knex prepares every SQLite statement anew (~0.2 ms); better-sqlite3 statements
 * are reusable, so the connection keeps the most recent ones by SQL text.
 */
function cachePreparedStatements(conn: SqliteConnection, max = 256): void {
  const prepare = conn.prepare.bind(conn);
  const cache = new Map<string, unknown>();
  conn.prepare = (sql: string) => {
    let stmt = cache.get(sql);
    if (stmt) {
      cache.delete(sql); // re-insert: most recently used last
    } else {
      stmt = prepare(sql);
      if (cache.size >= max) cache.delete(cache.keys().next().value!);
    }
    cache.set(sql, stmt);
    return stmt;
  };
}

/** Where knex's own warnings go: by default it prints plain, multi-line text to the console. */
export interface DbLogger {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
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
 * Synchronous reads of the last committed state, outside any transaction, on a second
 * connection to the embedded SQLite file: read-only, in WAL mode, so it never waits for
 * (nor blocks) the writer, and no read queues behind a write transaction on knex's one
 * connection. Its statements (hand-written SQL, literal limits) are prepared once and
 * kept. Only the repository that owns a table reads it here, and only for reads outside
 * a caller's transaction (those keep using the transaction).
 */
export interface SqliteReader {
  /** The first row the statement returns, or undefined. */
  one<R>(sql: string, ...params: unknown[]): R | undefined;
  /** Every row the statement returns. */
  all<R>(sql: string, ...params: unknown[]): R[];
  /**
   * Every row of a statement that selects one value per row, `json_array(<columns>)`, as
   * an object of those columns: for rows of many columns, SQLite writing each row as one
   * JSON text costs less than the driver converting every value (5 bot records: 25 µs,
   * not 40). TEXT stays a string; numbers stay numbers (BLOBs cannot be read so).
   */
  allOf<R>(columns: readonly string[], sql: string, ...params: unknown[]): R[];
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

/** The reader of each knex handle on a SQLite file (none for `:memory:` or MySQL). */
const readers = new WeakMap<object, SqliteReader>();

/** The database's reader, when it is a SQLite file; else undefined (read through knex). */
export function readerOf(db: Db): SqliteReader | undefined {
  return readers.get(db);
}

/**
 * A reader of this SQLite file: opened at its first read (after migrations have created
 * the file and set WAL mode), closed with the knex handle. Every statement it runs counts
 * as one sent to the database (`onStatement`), as knex's do.
 */
function createSqliteReader(filename: string, onStatement: (sql: string, params: unknown[]) => void, maxStatements = 256): SqliteReader & { close(): void } {
  let conn: Database.Database | undefined;
  let closed = false;
  /** Each statement, run in raw mode (rows as arrays), with the maker of its row objects. */
  const statements = new Map<string, { stmt: Database.Statement; row: (values: unknown[]) => unknown }>();
  /** allOf's row makers, by its callers' (constant) column lists. */
  const makers = new WeakMap<readonly string[], (values: unknown[]) => unknown>();
  function prepared(sql: string) {
    if (closed) throw new Error('the database is closed');
    let entry = statements.get(sql);
    if (entry) return entry;
    if (!conn) {
      conn = new Database(filename, { readonly: true, fileMustExist: true });
      conn.pragma('busy_timeout = 5000');
    }
    const stmt = conn.prepare(sql).raw(true);
    entry = { stmt, row: rowMaker(stmt.columns().map((c) => c.name)) };
    // Statements are the repositories' own constants, a few of them with literal limits:
    // the oldest goes when an unusual limit or offset has filled the cache.
    if (statements.size >= maxStatements) statements.delete(statements.keys().next().value!);
    statements.set(sql, entry);
    return entry;
  }
  return {
    one<R>(sql: string, ...params: unknown[]) {
      const { stmt, row } = prepared(sql);
      onStatement(sql, params);
      const values = stmt.get(...params) as unknown[] | undefined;
      return (values && row(values)) as R | undefined;
    },
    all<R>(sql: string, ...params: unknown[]) {
      const { stmt, row } = prepared(sql);
      onStatement(sql, params);
      return (stmt.all(...params) as unknown[][]).map(row) as R[];
    },
    allOf<R>(columns: readonly string[], sql: string, ...params: unknown[]) {
      const { stmt } = prepared(sql);
      onStatement(sql, params);
      let row = makers.get(columns);
      if (!row) makers.set(columns, (row = rowMaker([...columns])));
      return (stmt.all(...params) as [string][]).map((values) => row(JSON.parse(values[0]))) as R[];
    },
    close() {
      closed = true;
      statements.clear();
      conn?.close();
      conn = undefined;
    },
  };
}

/**
 * MySQL's hot reads outside a transaction, past knex: the repositories' own hand-written
 * SQL (the same texts as SqliteReader's where the dialects agree; literal limits, only the
 * needed columns) run by mysql2 on a connection taken from knex's pool for the one
 * statement. Rows come as arrays (`rowsAsArray`) and become objects through a row maker
 * compiled once per statement text, as SqliteReader's; the values are what knex's path
 * gives (the same connection and settings: BIGINT as a number while safe, dates as
 * strings). A pool timeout (KnexTimeoutError) and mysql2's errors reach the caller as
 * through knex.
 *
 * Reads asked for in one event-loop turn are sent together after it (setImmediate), so
 * that a busy service pays one round trip for many: most of a read's CPU here is the
 * socket write and the wake-up for its answer, not the statement. Reads of one text with
 * the same values share one statement; `one`'s reads of one text with different values
 * go as one `(SELECT …) UNION ALL (SELECT …)` statement, each part tagged with its place.
 * A read is sent after it is asked for, so it sees every commit its caller saw.
 * Callers that shared a statement share its row objects: they read them, never change them.
 */
export interface MysqlReader {
  /**
   * The row a statement of at most one row returns (`LIMIT 1`, or an aggregate), or
   * undefined. Its text starts with `SELECT `.
   */
  one<R>(sql: string, ...params: unknown[]): Promise<Readonly<R> | undefined>;
  /** Every row the statement returns. */
  all<R>(sql: string, ...params: unknown[]): Promise<readonly Readonly<R>[]>;
}

/** A mysql2 connection as the reader uses it (callback API). */
interface MysqlConnection {
  query(
    options: { sql: string; rowsAsArray: boolean },
    values: unknown[],
    callback: (err: Error | null, rows: unknown, fields: { name: string }[] | undefined) => void,
  ): unknown;
}

/** The MySQL reader of each knex handle on MySQL/MariaDB. */
const mysqlReaders = new WeakMap<object, MysqlReader>();

/** The database's MySQL reader, when it is MySQL/MariaDB; else undefined. */
export function mysqlReaderOf(db: Db): MysqlReader | undefined {
  return mysqlReaders.get(db);
}

/** One read asked for: its values, and the callers waiting for its rows. */
interface AskedRead {
  params: unknown[];
  waiting: { resolve: (rows: unknown[]) => void; reject: (err: unknown) => void }[];
}

const sameValues = (a: unknown[], b: unknown[]) => a.length === b.length && a.every((v, i) => v === b[i]);

/** Most `one` reads of one text in one statement. */
const MAX_PARTS = 64;

function createMysqlReader(db: Db, maxStatements = 256): MysqlReader {
  const client = db.client as {
    acquireConnection(): Promise<MysqlConnection>;
    releaseConnection(conn: unknown): Promise<unknown>;
  };
  /** Row makers by statement text and by how many leading values to skip (a part's tag). */
  const makers = new Map<string, (values: unknown[]) => unknown>();
  const makerOf = (sql: string, fields: { name: string }[], skip: number) => {
    const key = skip ? `${skip}\n${sql}` : sql;
    let row = makers.get(key);
    if (!row) {
      if (makers.size >= maxStatements) makers.delete(makers.keys().next().value!);
      makers.set(key, (row = rowMaker(fields.slice(skip).map((f) => f.name), skip)));
    }
    return row;
  };
  /** Texts of `n` parts of a `one` statement. */
  const unions = new Map<string, string>();
  const unionOf = (sql: string, n: number) => {
    const key = `${n}\n${sql}`;
    let text = unions.get(key);
    if (text === undefined) {
      if (!sql.startsWith('SELECT ')) throw new Error('a grouped read must start with SELECT');
      text = Array.from({ length: n }, (_, i) => `(SELECT ${i} AS read_no, ${sql.slice(7)})`).join(' UNION ALL ');
      if (unions.size >= maxStatements) unions.delete(unions.keys().next().value!);
      unions.set(key, text);
    }
    return text;
  };
  /** Sends one statement; its rows as arrays and its columns. */
  const send = async (sql: string, params: unknown[]): Promise<{ rows: unknown[][]; fields: { name: string }[] }> => {
    const conn = await client.acquireConnection();
    // Counted as one statement sent, as knex's are (a 'query' event of the same shape).
    db.emit('query', { method: 'select', sql, bindings: params, reader: true });
    return new Promise((resolve, reject) => {
      conn.query({ sql, rowsAsArray: true }, params, (err, rows, fields) => {
        // Back to the pool at once; one whose connection broke is dropped at its next
        // acquisition (knex's validation), as after a failed knex query.
        void client.releaseConnection(conn);
        if (err) reject(err);
        else resolve({ rows: rows as unknown[][], fields: fields ?? [] });
      });
    });
  };
  const settle = (read: AskedRead, rows: unknown[]) => { for (const w of read.waiting) w.resolve(rows); };
  const fail = (reads: AskedRead[], err: unknown) => { for (const r of reads) for (const w of r.waiting) w.reject(err); };

  /** Asked reads by kind ('one' or 'all') and text, sent after this turn. */
  let asked = new Map<string, AskedRead[]>();
  let scheduled = false;
  function flush() {
    scheduled = false;
    const now = asked;
    asked = new Map();
    for (const [key, reads] of now) {
      const one = key.startsWith('1');
      const sql = key.slice(1);
      if (!one || reads.length === 1) {
        for (const read of reads) {
          send(sql, read.params).then(({ rows, fields }) => settle(read, rows.map(makerOf(sql, fields, 0))), (err) => fail([read], err));
        }
        continue;
      }
      for (let at = 0; at < reads.length; at += MAX_PARTS) {
        const part = reads.slice(at, at + MAX_PARTS);
        send(unionOf(sql, part.length), part.flatMap((r) => r.params)).then(({ rows, fields }) => {
          const row = makerOf(sql, fields, 1);
          const found: unknown[][] = part.map(() => []);
          for (const values of rows) found[Number(values[0])]?.push(row(values));
          part.forEach((read, i) => settle(read, found[i]!));
        }, (err) => fail(part, err));
      }
    }
  }
  function ask(kind: '1' | '*', sql: string, params: unknown[]): Promise<unknown[]> {
    return new Promise((resolve, reject) => {
      const key = kind + sql;
      let reads = asked.get(key);
      if (!reads) asked.set(key, (reads = []));
      const same = reads.find((r) => sameValues(r.params, params));
      if (same) same.waiting.push({ resolve, reject });
      else reads.push({ params, waiting: [{ resolve, reject }] });
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
  }
  return {
    one: async <R>(sql: string, ...params: unknown[]) => (await ask('1', sql, params))[0] as R | undefined,
    all: <R>(sql: string, ...params: unknown[]) => ask('*', sql, params) as Promise<R[]>,
  };
}

/**
 * A function making a row object of a statement's values, as better-sqlite3 would (a key
 * per column, in order; a repeated name keeps the last value), but as one object literal
 * of a fixed shape: about half the cost of the driver building each row key by key.
 * The names are the statement's own columns, each written as a quoted JSON string.
 */
function rowMaker(names: string[], skip = 0): (values: unknown[]) => unknown {
  if (names.includes('__proto__')) throw new Error('a column named __proto__ cannot be read by name');
  const keys = names.map((n, i) => `${JSON.stringify(n)}: v[${i + skip}]`).join(', ');
  return new Function('v', `return { ${keys} };`) as (values: unknown[]) => unknown;
}

/**
 * A unit of work run synchronously on knex's own SQLite connection (`sqliteUnit`): its
 * statements are hand-written and prepared once (the connection keeps them), so a small
 * write transaction costs tens of microseconds rather than knex's building, binding and
 * promise hops per statement. Only the repository that owns a table writes it here.
 */
export interface SqliteWriter {
  /** Runs a statement that answers no rows: how many rows it changed. */
  run(sql: string, params: unknown[]): number;
  /** Every row the statement returns (better-sqlite3's row objects). */
  all<R>(sql: string, params: unknown[]): R[];
  /**
   * Inserts rows (each the columns' values in order) with multi-row statements of
   * power-of-two sizes up to 256 rows (so a few texts serve every batch), `suffix`
   * after the VALUES list (`ON CONFLICT ...`).
   */
  insert(table: string, columns: readonly string[], rows: unknown[][], suffix?: string): void;
  /**
   * Sets `columns` of several rows, each row its key's value then the columns' values, by
   * `UPDATE … FROM (VALUES …)` in statements of power-of-two sizes as `insert`'s.
   */
  update(table: string, key: string, columns: readonly string[], rows: unknown[][]): void;
}

interface SqliteStatement {
  run(...params: unknown[]): { changes: number };
  all(...params: unknown[]): unknown[];
}

/** Sizes of the multi-row statements `SqliteWriter.insert` splits `n` rows into: powers of two, largest first, at most `max`. */
export function powerOfTwoChunks(n: number, max = 256): number[] {
  const sizes: number[] = [];
  while (n > 0) {
    let size = 1;
    while (size * 2 <= Math.min(n, max)) size *= 2;
    sizes.push(size);
    n -= size;
  }
  return sizes;
}

/** Multi-row statement texts, by what makes them. */
const multiRowTexts = new Map<string, string>();
/** `(?, ?, …)` repeated `rows` times, for `width` values a row. */
const valuesList = (width: number, rows: number) => Array(rows).fill(`(${Array(width).fill('?').join(', ')})`).join(', ');
function insertText(table: string, columns: readonly string[], rows: number, suffix: string): string {
  const key = `insert\n${table}\n${columns.join(',')}\n${rows}\n${suffix}`;
  let text = multiRowTexts.get(key);
  if (text === undefined) {
    text = `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${valuesList(columns.length, rows)}${suffix ? ` ${suffix}` : ''}`;
    multiRowTexts.set(key, text);
  }
  return text;
}
function updateText(table: string, keyColumn: string, columns: readonly string[], rows: number): string {
  const key = `update\n${table}\n${keyColumn}\n${columns.join(',')}\n${rows}`;
  let text = multiRowTexts.get(key);
  if (text === undefined) {
    const set = columns.map((c, i) => `${c} = v.column${i + 2}`).join(', ');
    text = `UPDATE ${table} SET ${set} FROM (VALUES ${valuesList(columns.length + 1, rows)}) AS v WHERE ${table}.${keyColumn} = v.column1`;
    multiRowTexts.set(key, text);
  }
  return text;
}

/**
 * Runs `body` synchronously in one transaction (BEGIN IMMEDIATE ... COMMIT; ROLLBACK when
 * it throws; `{ transaction: false }` for a body of one statement, atomic by itself) on
 * knex's own SQLite connection, acquired from knex's pool (of one): no knex
 * statement or transaction runs on it meanwhile, and no second writer ever contends.
 * Every statement counts as one sent to the database (a 'query' event, as knex's).
 * Undefined when the handle is not SQLite (MySQL's units: `mysqlUnitRunner`).
 */
export type SqliteUnitRunner = <T>(body: (w: SqliteWriter) => T, opts?: { transaction?: boolean }) => Promise<T>;

/** `rows` in power-of-two chunks: each chunk's size and its rows' values in one list. */
function inChunks(rows: unknown[][], each: (size: number, params: unknown[]) => void): void {
  let at = 0;
  for (const size of powerOfTwoChunks(rows.length)) {
    each(size, rows.slice(at, at + size).flat());
    at += size;
  }
}

/** The writer's statements, prepared once per connection (preparing costs about what running does). */
const preparedOn = new WeakMap<object, Map<string, SqliteStatement>>();

export function sqliteUnitRunner(db: Db): SqliteUnitRunner | undefined {
  if (isMysql(db)) return undefined;
  const client = db.client as {
    acquireConnection(): Promise<{ prepare(sql: string): SqliteStatement; inTransaction: boolean }>;
    releaseConnection(conn: unknown): Promise<unknown>;
  };
  const emit = (method: string, sql: string, bindings: unknown[]) => db.emit('query', { method, sql, bindings, writer: true });
  return async <T>(body: (w: SqliteWriter) => T, opts: { transaction?: boolean } = {}): Promise<T> => {
    const conn = await client.acquireConnection();
    try {
      let kept = preparedOn.get(conn);
      if (!kept) preparedOn.set(conn, (kept = new Map()));
      const statement = (sql: string, params: unknown[], method: string) => {
        emit(method, sql, params);
        let stmt = kept.get(sql);
        if (!stmt) {
          // The texts are the repositories' constants (multi-row ones in power-of-two sizes):
          // the oldest goes only if an unusual mix has filled the cache.
          if (kept.size >= 512) kept.delete(kept.keys().next().value!);
          kept.set(sql, (stmt = conn.prepare(sql)));
        }
        return stmt;
      };
      const w: SqliteWriter = {
        run: (sql, params) => statement(sql, params, 'raw').run(...params).changes,
        all: <R>(sql: string, params: unknown[]) => statement(sql, params, 'raw').all(...params) as R[],
        insert(table, columns, rows, suffix = '') {
          inChunks(rows, (size, params) => statement(insertText(table, columns, size, suffix), params, 'insert').run(...params));
        },
        update(table, key, columns, rows) {
          inChunks(rows, (size, params) => statement(updateText(table, key, columns, size), params, 'update').run(...params));
        },
      };
      if (opts.transaction === false) return body(w);
      w.run('BEGIN IMMEDIATE', []);
      try {
        const result = body(w);
        w.run('COMMIT', []);
        return result;
      } catch (err) {
        // SQLite may have ended the transaction itself (e.g. SQLITE_FULL): then nothing to undo.
        if (conn.inTransaction) w.run('ROLLBACK', []);
        throw err;
      }
    } finally {
      await client.releaseConnection(conn);
    }
  };
}

/**
 * A statement sink of a MySQL unit of work (`mysqlUnitRunner`): hand-written SQL run by
 * mysql2 on the unit's one connection, no knex query building, binding or runner per
 * statement. Only the repository that owns a table writes it here.
 *
 * Statements whose answer the unit does not read (`queue`, `insert`, `update`, and the
 * unit's START TRANSACTION) are not sent on their own: they go with the unit's next
 * statement that answers (`all`, `run`) or with its COMMIT, in one round trip (one
 * multi-statement query, run by the server in order, stopping at the first failure,
 * which then rejects that call and the unit). A batch of sends, nine statements with
 * its START TRANSACTION and COMMIT, takes three round trips.
 */
export interface MysqlWriter {
  /** The rows a SELECT returns (mysql2's row objects, values as knex's path gives them). */
  all<R>(sql: string, params: unknown[]): Promise<R[]>;
  /** Runs a statement that answers no rows: how many rows it changed. */
  run(sql: string, params: unknown[]): Promise<number>;
  /** A statement whose answer the unit does not need: sent with the unit's next one. */
  queue(sql: string, params: unknown[]): void;
  /** Inserts rows (each the columns' values in order), one multi-row statement per 200; `suffix` after the VALUES list. Queued. */
  insert(table: string, columns: readonly string[], rows: unknown[][], suffix?: string): void;
  /**
   * Sets `columns` of several rows, each row its key's value then the columns' values:
   * one `UPDATE … SET c = CASE key WHEN … END WHERE key IN (…)` per 500 rows, in the
   * order given (lock order: the caller's). Queued.
   */
  update(table: string, key: string, columns: readonly string[], rows: unknown[][]): void;
}

/**
 * Runs `body` in one transaction (START TRANSACTION … COMMIT, ROLLBACK when it throws) on
 * one connection from knex's pool, written directly: a unit of several statements costs
 * no knex transaction, builder or runner each. Run again whole (a new transaction) when
 * `retryable` says so of what it threw (by default a deadlock victim, as `transaction`),
 * up to `attempts` times. Every statement counts as one sent ('query' event, as knex's).
 * Undefined when the handle is not MySQL.
 */
export type MysqlUnitRunner = <T>(
  body: (w: MysqlWriter) => Promise<T>,
  opts?: MysqlUnitOptions,
) => Promise<T>;

export interface MysqlUnitOptions {
  /** READ COMMITTED for this transaction (the session's default otherwise). */
  isolation?: 'read committed';
  /** false: a body of one statement, atomic by itself, run without START TRANSACTION … COMMIT. */
  transaction?: boolean;
  attempts?: number;
  retryable?: (err: unknown) => boolean;
}

interface MysqlWriteConnection {
  query(options: { sql: string }, values: unknown[], callback: (err: Error | null, result: unknown) => void): unknown;
}

const mysqlRunners = new WeakMap<object, MysqlUnitRunner>();

export function mysqlUnitRunner(db: Db): MysqlUnitRunner | undefined {
  if (!isMysql(db)) return undefined;
  let runner = mysqlRunners.get(db);
  if (runner) return runner;
  const client = db.client as {
    acquireConnection(): Promise<MysqlWriteConnection>;
    releaseConnection(conn: unknown): Promise<unknown>;
  };
  const send = (conn: MysqlWriteConnection, sql: string, params: unknown[]) => new Promise<unknown>((resolve, reject) => {
    conn.query({ sql }, params, (err, result) => (err ? reject(err) : resolve(result)));
  });
  const once = async <T>(body: (w: MysqlWriter) => Promise<T>, opts: MysqlUnitOptions): Promise<T> => {
    const conn = await client.acquireConnection();
    /** Queued statements (each counted when queued), sent with the next one. */
    let queued: { sql: string; params: unknown[] }[] = [];
    /** Whether anything has gone to the server (its transaction begun there). */
    let sent = false;
    const queue = (sql: string, params: unknown[], method: string) => {
      db.emit('query', { method, sql, bindings: params, writer: true });
      queued.push({ sql, params });
    };
    /** Sends the queued statements in one round trip: the last one's answer. */
    const flush = async () => {
      const batch = queued;
      queued = [];
      if (batch.length === 0) return undefined;
      sent = true;
      if (batch.length === 1) return send(conn, batch[0]!.sql, batch[0]!.params);
      const results = (await send(conn, batch.map((b) => b.sql).join(';\n'), batch.flatMap((b) => b.params))) as unknown[];
      return results[results.length - 1];
    };
    /** Sends the queued statements and then this one, in one round trip: this one's answer. */
    const exec = (sql: string, params: unknown[], method: string) => {
      queue(sql, params, method);
      return flush();
    };
    try {
      const w: MysqlWriter = {
        all: async <R>(sql: string, params: unknown[]) => (await exec(sql, params, 'select')) as R[],
        run: async (sql, params) => ((await exec(sql, params, 'raw')) as { affectedRows: number }).affectedRows,
        queue: (sql, params) => queue(sql, params, 'raw'),
        insert(table, columns, rows, suffix = '') {
          for (let k = 0; k < rows.length; k += 200) {
            const chunk = rows.slice(k, k + 200);
            const sql = `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${valuesList(columns.length, chunk.length)}${suffix ? ` ${suffix}` : ''}`;
            queue(sql, chunk.flat(), 'insert');
          }
        },
        update(table, key, columns, rows) {
          for (let k = 0; k < rows.length; k += 500) {
            const chunk = rows.slice(k, k + 500);
            const keys = chunk.map((r) => r[0]);
            const params: unknown[] = [];
            const set = columns.map((c, i) => {
              if (chunk.length === 1) {
                params.push(chunk[0]![i + 1]);
                return `${c} = ?`;
              }
              for (const r of chunk) params.push(r[0], r[i + 1]);
              return `${c} = CASE ${key} ${chunk.map(() => 'WHEN ? THEN ?').join(' ')} END`;
            });
            params.push(...keys);
            queue(`UPDATE ${table} SET ${set.join(', ')} WHERE ${key} IN (${keys.map(() => '?').join(', ')})`, params, 'update');
          }
        },
      };
      if (opts.transaction === false) {
        const result = await body(w);
        await flush();
        return result;
      }
      if (opts.isolation) queue('SET TRANSACTION ISOLATION LEVEL READ COMMITTED', [], 'raw');
      queue('START TRANSACTION', [], 'raw');
      try {
        const result = await body(w);
        await exec('COMMIT', [], 'raw');
        return result;
      } catch (err) {
        // A deadlock victim is rolled back already; a broken connection cannot: its pool drops it.
        // What was queued is not sent: its transaction is the one rolled back. Nothing
        // sent yet (the body failed before its first statement that answers): no
        // transaction was begun on the server, and there is nothing to roll back.
        queued = [];
        if (sent) await exec('ROLLBACK', [], 'raw').catch(() => {});
        throw err;
      }
    } finally {
      await client.releaseConnection(conn);
    }
  };
  runner = <T>(body: (w: MysqlWriter) => Promise<T>, opts: MysqlUnitOptions = {}) =>
    retryingDeadlocks(() => once(body, opts), opts.attempts ?? 4, opts.retryable ?? isDeadlock);
  mysqlRunners.set(db, runner);
  return runner;
}

export function createDb(database: Config['database'], logger?: DbLogger): Db {
  const log = knexLog(logger);
  if (database.kind === 'sqlite') {
    if (database.filename === ':memory:') return sqliteKnex(database.filename, log);
    // For this service's user alone: the folder created 0700, the database file created
    // 0600 before SQLite opens it (SQLite gives its -wal and -shm files the database
    // file's mode). Existing ones keep theirs.
    fs.mkdirSync(path.dirname(database.filename), { recursive: true, mode: 0o700 });
    fs.closeSync(fs.openSync(database.filename, 'a', 0o600));
    const db = sqliteKnex(database.filename, log);
    // The reader's statements are reported as knex's are: a 'query' event each, of the same shape.
    const reader = createSqliteReader(database.filename, (sql, bindings) => db.emit('query', { method: 'select', sql, bindings, reader: true }));
    readers.set(db, reader);
    // Closed with the handle (knex's destroy() ends in its client's).
    const client = db.client as { destroy: (callback?: unknown) => Promise<void> };
    const destroy = client.destroy.bind(client);
    client.destroy = (callback?: unknown) => {
      reader.close();
      return destroy(callback);
    };
    return db;
  }
  const db = knexFactory({
    client: 'mysql2',
    connection: {
      uri: database.url,
      charset: 'utf8mb4',
      supportBigNumbers: true,
      bigNumberStrings: false,
      dateStrings: true,
      // For the units of work's queued statements (mysqlUnitRunner): several in one round
      // trip. No statement anywhere is built from input: values are bound (`?`, escaped by
      // mysql2) and the few literals written into SQL are checked integers (literalInt).
      multipleStatements: true,
    } as Knex.MySql2ConnectionConfig,
    pool: { min: 0, max: database.poolMax },
    // With the database down, a call waits this long for a connection and then answers
    // UNAVAILABLE (knex's default is a minute, which freezes callers instead).
    acquireConnectionTimeout: database.acquireTimeoutMs ?? 5000,
    log,
  });
  mysqlReaders.set(db, createMysqlReader(db));
  return db;
}

function sqliteKnex(filename: string, log: Knex.Config['log']): Db {
  return knexFactory({
    client: 'better-sqlite3',
    connection: { filename },
    useNullAsDefault: true,
    log,
    // better-sqlite3 is synchronous: one connection serialises writers, as SQLite does anyway.
    pool: {
      min: 1,
      max: 1,
      afterCreate: (conn: SqliteConnection, done: (err: Error | null, conn: unknown) => void) => {
        conn.pragma('journal_mode = WAL');
        conn.pragma('synchronous = NORMAL');
        conn.pragma('busy_timeout = 5000');
        conn.pragma('foreign_keys = ON');
        cachePreparedStatements(conn);
        done(null, conn);
      },
    },
  });
}

/**
 * The list padded to the next power of two by repeating its last item, for `IN (...)`
 * lists and CASE branches of statements run with lists of any length: on SQLite each
 * distinct text is prepared anew (~0.1 ms for a long one), and padded lists keep the
 * texts few, so they stay in the connection's prepared-statement cache. A repeated id in
 * an IN list, or a repeated CASE branch, changes nothing; where a repeat would, `filler`
 * pads instead. MySQL statements are not prepared here: the list is left as it is.
 */
export function padded<T>(db: Db | Tx, list: readonly T[], filler?: T): T[] {
  if (isMysql(db as Db) || list.length < 2) return [...list];
  let size = 1;
  while (size < list.length) size *= 2;
  const fill = filler === undefined ? list[list.length - 1]! : filler;
  return [...list, ...Array.from({ length: size - list.length }, () => fill)];
}

/**
 * One column's new values for several rows of a multi-row UPDATE (`WHERE key IN keys`):
 * the value itself when every row gets the same, else a CASE on `key` (a column name
 * of the code's own, never input). `values[i]` is the value of the row `keys[i]`.
 */
export function valuePerRow(q: Db | Tx, key: string, keys: readonly (string | number)[], values: readonly (string | number | null)[]) {
  if (values.every((v) => v === values[0])) return values[0] ?? null;
  const pairs = padded(q, keys.map((k, i) => [k, values[i] ?? null] as const));
  return q.raw(`CASE ?? ${pairs.map(() => 'WHEN ? THEN ?').join(' ')} END`, [key, ...pairs.flat()]);
}

/** Brings the schema up to date. */
export async function migrateLatest(db: Db): Promise<string[]> {
  const [, applied] = (await db.migrate.latest({ migrationSource })) as [number, string[]];
  return applied;
}

/** True when the error is a unique-key violation, on either engine. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errno?: number };
  return e?.code === 'ER_DUP_ENTRY' || e?.errno === 1062 || e?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}

/** True when MySQL chose this transaction as a deadlock victim (it was rolled back whole). */
export function isDeadlock(err: unknown): boolean {
  const e = err as { code?: string; errno?: number };
  return e?.code === 'ER_LOCK_DEADLOCK' || e?.errno === 1213;
}

/**
 * Runs a transaction, again (up to `attempts` times) when MySQL rolls it back as a
 * deadlock victim: InnoDB's gap locks make that possible for concurrent inserts into
 * neighbouring keys, and a victim is rolled back whole, so running it again is safe.
 * Only for bodies whose effects are all inside the transaction.
 */
export async function transaction<T>(db: Db, body: (tx: Tx) => Promise<T>, attempts = 4, retryable = isDeadlock): Promise<T> {
  return retryingDeadlocks(() => db.transaction(body), attempts, retryable);
}

/**
 * Runs `body` in the caller's transaction when one is given (the caller's unit of
 * work retries it whole), else in a transaction of its own, run again as
 * `transaction` does.
 */
export async function inTransaction<T>(
  db: Db, tx: Tx | undefined, body: (tx: Tx) => Promise<T>, attempts = 4, retryable = isDeadlock,
): Promise<T> {
  return tx ? body(tx) : transaction(db, body, attempts, retryable);
}

/**
 * Runs one statement on the caller's transaction when given (as it is: a deadlock
 * rolls the whole transaction back, for its owner to retry), else on the pool, run
 * again when MySQL picks it as a deadlock victim (`retryingDeadlocks`).
 */
export async function statement<T>(
  db: Db, tx: Tx | undefined, run: (q: Db | Tx) => Promise<T>, attempts = 4, retryable = isDeadlock,
): Promise<T> {
  return tx ? run(tx) : retryingDeadlocks(() => run(db), attempts, retryable);
}

/** A deadlock, or an InnoDB lock wait timeout (a transaction that threw is rolled back whole). */
export function isDeadlockOrLockWait(err: unknown): boolean {
  return isDeadlock(err) || (err as { errno?: number })?.errno === 1205;
}

/**
 * Runs `fn` again (up to `attempts` times in all) when MySQL picked it as a deadlock
 * victim (or `retryable` says so otherwise): for a single statement, or a transaction,
 * whose effects are all rolled back.
 */
export async function retryingDeadlocks<T>(fn: () => Promise<T>, attempts = 4, retryable = isDeadlock): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (!retryable(err) || i >= attempts) throw err;
      await new Promise((r) => setTimeout(r, Math.random() * 10 * i));
    }
  }
}

/** Cheap readiness probe. */
export async function pingDb(db: Db, timeoutMs = 1500): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      db.raw('select 1'),
      new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('database ping timed out')), timeoutMs); }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
