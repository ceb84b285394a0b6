/**
 * The storage port on SQLite (better-sqlite3), the embedded default: two connections of
 * its own to the database file, opened at their first use (after the migrations have
 * created the file and set WAL mode).
 *
 * - The writer: every unit of work and every write, one at a time (SQLite has one writer
 *   anyway, so none ever waits on a lock). A unit runs BEGIN IMMEDIATE … COMMIT on it;
 *   while its body awaits the writer's answers (settled at once: the driver is
 *   synchronous), the next unit waits its turn.
 * - The reader: read-only, for reads outside a unit. In WAL mode it sees the last commit
 *   and never waits for (nor blocks) the writer.
 *
 * Both keep their statements prepared by text (preparing costs about what running does);
 * the repositories' texts are constants, the multi-row ones in power-of-two sizes, and
 * lists padded (db.ts's `padded`), so few texts serve every batch.
 */
import Database from 'better-sqlite3';
import { isDeadlock, retryingDeadlocks } from '../errors.js';
import type { DriverEvents, OnConflict, Sql, UnitOptions, Writer } from '../port.js';
import { boundedCache, inChunks, rowMaker, selectTexts, valuesList } from '../statement-texts.js';

/** A BEGIN IMMEDIATE taking longer than this (ms) waited for the write lock (it takes microseconds otherwise). */
const LOCK_WAIT_MS = 0.5;

/**
 * Insert and update texts of a table and columns list, by the rest of what makes them.
 * Found by the list itself (a caller's constant: no key joined on every run), else by its
 * names joined (a list made for the call).
 */
const byList = new WeakMap<readonly string[], Map<string, Map<number | string, string>>>();
const byNames = boundedCache<Map<number | string, string>>(1024);
function textsOf(columns: readonly string[], table: string): Map<number | string, string> {
  let byTable = byList.get(columns);
  if (!byTable) byList.set(columns, (byTable = new Map()));
  let texts = byTable.get(table);
  if (!texts) {
    const names = `${table}\n${columns.join(',')}`;
    texts = byNames.get(names) ?? byNames.set(names, new Map());
    byTable.set(table, texts);
  }
  return texts;
}

function conflictText(c: OnConflict | undefined): string {
  if (!c) return '';
  const set = c.set ?? [];
  return ` ON CONFLICT (${c.keys.join(', ')}) ${set.length === 0 ? 'DO NOTHING' : `DO UPDATE SET ${set.map((s) => `${s} = excluded.${s}`).join(', ')}`}`;
}

function insertText(table: string, columns: readonly string[], rows: number, onConflict: OnConflict | undefined, returningId = false): string {
  const texts = textsOf(columns, table);
  // Rows (negative: returning ids), or with a conflict clause a key spelling it out.
  const key = onConflict ? `${rows}\n${onConflict.keys.join(',')}\n${onConflict.set?.join(',')}\n${returningId}` : returningId ? -rows : rows;
  let text = texts.get(key);
  if (text === undefined) {
    text = `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${valuesList(columns.length, rows)}${conflictText(onConflict)}${returningId ? ' RETURNING id' : ''}`;
    texts.set(key, text);
  }
  return text;
}

/**
 * One row's columns set by its key. Several rows are set by running it once per row: with
 * no round trips to save, that is the cheapest (an UPDATE … FROM (VALUES …) join costs
 * about 15 µs more per statement, a CASE per column scans its branches per row).
 */
function updateText(table: string, keyColumn: string, columns: readonly string[]): string {
  const texts = textsOf(columns, table);
  let text = texts.get(keyColumn);
  if (text === undefined) {
    text = `UPDATE ${table} SET ${columns.map((c) => `${c} = ?`).join(', ')} WHERE ${keyColumn} = ?`;
    texts.set(keyColumn, text);
  }
  return text;
}

/**
 * Who copies the WAL back into the database file (a checkpoint: a copy of the pages
 * written since the last one and two fsyncs). SQLite's default: the writer whose commit
 * takes the WAL past 1,000 pages, on whichever thread committed. A process's dispatcher
 * threads write most of the pages during a webhook burst, and their event loop is what
 * the burst waits for; so they leave checkpoints to the main thread (`backstop`: theirs
 * only past BACKSTOP_PAGES, should the main thread stall), whose writer keeps SQLite's
 * default and also runs a passive checkpoint every CHECKPOINT_MS (`timer`: the WAL
 * stays short when only the threads write) when the WAL has grown since its last one:
 * another connection (a thread) committed, or this writer ran CHECKPOINT_UNITS units.
 *
 * Not on every tick: a checkpoint that copies the whole WAL makes the next commit start
 * it over, and that commit syncs the WAL's new header (an fsync, 0.2-0.5 ms here, on a
 * call's path). Checkpointing a few units' pages every 250 ms put that fsync into nearly
 * every commit of a process writing now and then (an ingest woken a long poll, a send).
 */
export type Checkpoints = 'default' | 'timer' | 'backstop';

/** A dispatcher thread's writer checkpoints only past this many WAL pages (4 KiB each). */
export const BACKSTOP_PAGES = 16_384;
/** How often the main thread's writer may run a passive checkpoint (`timer`). */
export const CHECKPOINT_MS = 250;
/** Units (and single writes) of the main thread's writer after which its timer checkpoints though no other connection wrote. */
export const CHECKPOINT_UNITS = 64;

export function createSqliteDriver(filename: string, events: DriverEvents, opts: { checkpoints?: Checkpoints } = {}): Sql {
  let closed = false;
  const checkpoints = opts.checkpoints ?? 'default';
  const open = (readonly: boolean) => {
    if (closed) throw new Error('the database is closed');
    const conn = new Database(filename, readonly ? { readonly: true, fileMustExist: true } : { fileMustExist: true });
    if (!readonly) {
      conn.pragma('journal_mode = WAL');
      conn.pragma('synchronous = NORMAL');
      conn.pragma('foreign_keys = ON');
      if (checkpoints === 'backstop') conn.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
    }
    conn.pragma('busy_timeout = 5000');
    return conn;
  };

  // --- The reader: statements in raw mode (rows as arrays), each with the maker of its row objects.
  let reader: Database.Database | undefined;
  const reads = boundedCache<{ stmt: Database.Statement; row: (values: unknown[]) => unknown }>(256);
  /** allOf's row makers, by its callers' (constant) column lists. */
  const makers = new WeakMap<readonly string[], (values: unknown[]) => unknown>();
  const jsonText = selectTexts((columns) => `json_array(${columns})`);
  const plainText = selectTexts();
  function readStatement(sql: string, params: readonly unknown[]) {
    events.statement(sql, params);
    const entry = reads.get(sql);
    if (entry) return entry;
    reader ??= open(true);
    const stmt = reader.prepare(sql).raw(true);
    return reads.set(sql, { stmt, row: rowMaker(stmt.columns().map((c) => c.name)) });
  }
  const readAll = <R>(sql: string, params: readonly unknown[] = []) => {
    const { stmt, row } = readStatement(sql, params);
    return (stmt.all(...params) as unknown[][]).map(row) as R[];
  };
  const readAllOf = <R>(columns: readonly string[], tail: string, params: readonly unknown[] = []) => {
    const sql = jsonText(columns, tail);
    const { stmt } = readStatement(sql, params);
    let row = makers.get(columns);
    if (!row) makers.set(columns, (row = rowMaker([...columns])));
    return (stmt.all(...params) as [string][]).map((values) => row(JSON.parse(values[0]))) as R[];
  };

  // --- The writer: one unit at a time.
  let writer: Database.Database | undefined;
  /** The writer's data_version as its checkpoint timer last saw it (it moves when another connection commits). */
  let seenVersion: unknown;
  const writes = boundedCache<Database.Statement>(512);
  function writeStatement(sql: string, params: readonly unknown[]) {
    events.statement(sql, params);
    const stmt = writes.get(sql);
    if (stmt) return stmt;
    if (!writer) {
      writer = open(false);
      seenVersion = writer.pragma('data_version', { simple: true });
    }
    return writes.set(sql, writer.prepare(sql));
  }
  const w: Writer = {
    dialect: 'sqlite',
    one: async <R>(sql: string, params: readonly unknown[] = []) => writeStatement(sql, params).get(...params) as R | undefined,
    all: async <R>(sql: string, params: readonly unknown[] = []) => writeStatement(sql, params).all(...params) as R[],
    allOf: async <R>(columns: readonly string[], tail: string, params: readonly unknown[] = []) => w.all<R>(plainText(columns, tail), params),
    oneOf: async <R>(columns: readonly string[], tail: string, params: readonly unknown[] = []) => w.one<R>(plainText(columns, tail), params),
    run: async (sql, params = []) => writeStatement(sql, params).run(...params).changes,
    allLater: async <R>(sql: string, params: readonly unknown[] = []) => writeStatement(sql, params).all(...params) as R[],
    queue(sql, params = []) {
      writeStatement(sql, params).run(...params);
    },
    insert(table, columns, rows, onConflict) {
      inChunks(rows, (size, params) => writeStatement(insertText(table, columns, size, onConflict), params).run(...params));
    },
    update(table, key, columns, rows) {
      const text = updateText(table, key, columns);
      for (const [keyValue, ...values] of rows) {
        values.push(keyValue);
        writeStatement(text, values).run(...values);
      }
    },
    // INSERT … RETURNING (SQLite 3.35+): the new rows' ids at once. SQLite does not promise
    // RETURNING's order, but one statement's new keys ascend in its rows' order.
    insertIds(table, columns, rows) {
      const ids: number[] = [];
      inChunks(rows, (size, params) => {
        const chunk = (writeStatement(insertText(table, columns, size, undefined, true), params).raw(true).all(...params) as [number | bigint][]).map((r) => Number(r[0]));
        ids.push(...chunk.sort((a, b) => a - b));
      });
      return Promise.resolve(ids);
    },
  };

  /** Units and single writes run by the writer since its timer's last checkpoint. */
  let unitsSinceCheckpoint = 0;
  /** The writer's turn: units (and single writes) one after another. */
  let busy = false;
  const waiting: (() => void)[] = [];
  async function exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (busy) await new Promise<void>((resolve) => waiting.push(resolve));
    else busy = true;
    try {
      return await fn();
    } finally {
      unitsSinceCheckpoint++;
      const next = waiting.shift();
      if (next) next();
      else busy = false;
    }
  }
  const once = <T>(body: (w: Writer) => Promise<T>, opts: UnitOptions) => exclusive(async () => {
    if (opts.transaction === false) return body(w);
    // BEGIN IMMEDIATE takes the write lock, waiting (busy_timeout) while another thread or
    // process holds it: the wait is reported when it is long enough to be one.
    const asked = performance.now();
    w.queue('BEGIN IMMEDIATE');
    const waited = performance.now() - asked;
    if (waited > LOCK_WAIT_MS) events.lockWait?.(waited);
    try {
      const result = await body(w);
      w.queue('COMMIT');
      return result;
    } catch (err) {
      // SQLite may have ended the transaction itself (e.g. SQLITE_FULL): then nothing to undo.
      if (writer?.inTransaction) w.queue('ROLLBACK');
      throw err;
    }
  });
  const unit = <T>(body: (w: Writer) => Promise<T>, opts: UnitOptions = {}) =>
    retryingDeadlocks(() => once(body, opts), opts.attempts ?? 4, opts.retryable ?? isDeadlock);

  // `timer`: a passive checkpoint (it never waits for, nor blocks, other connections) on
  // this writer between units, once it is open, when the WAL grew enough since the last:
  // data_version changes when another connection commits (a read of shared memory).
  const checkpointTimer = checkpoints === 'timer'
    ? setInterval(() => {
      if (!writer || busy || closed) return;
      try {
        const version = writer.pragma('data_version', { simple: true });
        if (version === seenVersion && unitsSinceCheckpoint < CHECKPOINT_UNITS) return;
        seenVersion = version;
        unitsSinceCheckpoint = 0;
        writer.pragma('wal_checkpoint(PASSIVE)');
      } catch {
        // Busy or failed: the writers' own autocheckpoint and the next tick stand in.
      }
    }, CHECKPOINT_MS)
    : undefined;
  checkpointTimer?.unref();

  return {
    dialect: 'sqlite',
    async one<R>(sql: string, params: readonly unknown[] = []) {
      const { stmt, row } = readStatement(sql, params);
      const values = stmt.get(...params) as unknown[] | undefined;
      return (values && row(values)) as R | undefined;
    },
    all: async <R>(sql: string, params?: readonly unknown[]) => readAll<R>(sql, params),
    allOf: async <R>(columns: readonly string[], tail: string, params?: readonly unknown[]) => readAllOf<R>(columns, tail, params),
    oneOf: async <R>(columns: readonly string[], tail: string, params?: readonly unknown[]) => readAllOf<R>(columns, tail, params)[0],
    run: (sql, params = [], opts = {}) => unit((u) => u.run(sql, params), { ...opts, transaction: false }),
    unit,
    async close() {
      closed = true;
      clearInterval(checkpointTimer);
      // A unit under way finishes first (its body awaits only the writer's answers).
      await exclusive(async () => {
        reads.clear();
        writes.clear();
        reader?.close();
        writer?.close();
        reader = writer = undefined;
      });
    },
  };
}
