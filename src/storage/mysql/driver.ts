/**
 * The storage port on MySQL/MariaDB: mysql2's own pool (its public API), no query
 * builder on the way. Values come as they always have here: BIGINT as a number while
 * safe (supportBigNumbers, no bigNumberStrings), dates as strings, utf8mb4.
 *
 * Reads outside a unit asked for in one event-loop turn are sent together after it
 * (setImmediate), so that a busy service pays one round trip for many: most of a read's
 * CPU here is the socket write and the wake-up for its answer, not the statement. Reads
 * of one text with the same values share one statement; `one`'s reads of one text with
 * different values go as one `(SELECT …) UNION ALL (SELECT …)` statement, each part
 * tagged with its place. A read is sent after it is asked for, so it sees every commit
 * its caller saw. Callers that shared a statement share its row objects: they read
 * them, never change them. Rows come as arrays (`rowsAsArray`) and become objects
 * through a row maker compiled once per statement text.
 *
 * A unit of work runs on one pooled connection. Statements whose answer it does not read
 * (`queue`, `insert`, `update`, and its START TRANSACTION) are not sent on their own:
 * they go with its next statement that answers (`one`, `all`, `run`) or with its COMMIT,
 * in one multi-statement round trip, run by the server in order and stopping at the
 * first failure (which then fails that call and the unit). A batch of sends, nine
 * statements with START TRANSACTION and COMMIT, takes three round trips. A unit that
 * fails before anything went to the server sends nothing, not even a ROLLBACK.
 * On MariaDB 10.5 or later a unit's writer also has `insertIds` (INSERT … RETURNING,
 * held back like any insert): each new connection asks the server's version once.
 */
import { createRequire } from 'node:module';
import type mysql from 'mysql2';
import { isDeadlock, retryingDeadlocks } from '../errors.js';
import type { DriverEvents, OnConflict, Sql, UnitOptions, Writer } from '../port.js';
import { boundedCache, rowMaker, selectTexts, valuesList } from '../statement-texts.js';

export interface MysqlOptions {
  url: string;
  poolMax: number;
  /** How long a call waits for a pooled connection before failing as unavailable (ms). */
  acquireTimeoutMs: number;
}

type Connection = mysql.PoolConnection;
type Fields = { name: string }[];

/** Most `one` reads of one text in one statement. */
const MAX_PARTS = 64;

/** One read asked for: its values, and the callers waiting for its rows. */
interface AskedRead {
  params: readonly unknown[];
  waiting: { resolve: (rows: unknown[]) => void; reject: (err: unknown) => void }[];
}

const sameValues = (a: readonly unknown[], b: readonly unknown[]) => a.length === b.length && a.every((v, i) => v === b[i]);

function conflictText(c: OnConflict | undefined): string {
  if (!c) return '';
  const set = c.set ?? [];
  // No column to set: the old row stays (and, as any write, is locked).
  if (set.length === 0) return ` ON DUPLICATE KEY UPDATE ${c.keys[0]} = ${c.keys[0]}`;
  return ` ON DUPLICATE KEY UPDATE ${set.map((s) => `${s} = VALUES(${s})`).join(', ')}`;
}

export function createMysqlDriver(opts: MysqlOptions, events: DriverEvents): Sql {
  /** allOf/oneOf texts, made once per column list and rest. */
  const selectText = selectTexts();
  // mysql2 loaded here, not at import: the embedded default (SQLite) never pays for it
  // (about 4.5 MB of resident code and heap in each thread that opens a database).
  const { createPool } = createRequire(import.meta.url)('mysql2') as typeof mysql;
  const pool = createPool({
    uri: opts.url,
    charset: 'utf8mb4',
    supportBigNumbers: true,
    bigNumberStrings: false,
    dateStrings: true,
    // For the units' queued statements: several in one round trip. No statement anywhere
    // is built from input: values are bound (`?`, escaped by mysql2) and the few literals
    // written into SQL are checked integers (db.ts's literalInt).
    multipleStatements: true,
    connectionLimit: opts.poolMax,
    maxIdle: opts.poolMax,
    waitForConnections: true,
  });

  /**
   * Whether the server answers INSERT … RETURNING (MariaDB 10.5+; MySQL does not): asked
   * once by each new connection, before its first statement; unknown (false) until then.
   */
  let returning = false;
  pool.on('connection', (conn) => {
    conn.query({ sql: 'SELECT VERSION() AS v' }, (err, rows) => {
      const m = err ? null : /^(\d+)\.(\d+)\..*mariadb/i.exec(String((rows as { v: string }[])[0]?.v ?? ''));
      returning = m !== null && (Number(m[1]) > 10 || (Number(m[1]) === 10 && Number(m[2]) >= 5));
    });
  });

  /** A pooled connection, or a retryable failure after acquireTimeoutMs (the database down: UNAVAILABLE, not a frozen call). */
  const acquire = () => new Promise<Connection>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      reject(Object.assign(new Error(`no database connection within ${opts.acquireTimeoutMs} ms`), { code: 'POOL_ACQUIRE_TIMEOUT' }));
    }, opts.acquireTimeoutMs);
    pool.getConnection((err, conn) => {
      if (settled) {
        if (!err) conn.release();
        return;
      }
      settled = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(conn);
    });
  });

  /** One round trip. */
  const send = <T>(conn: Connection, sql: string, params: readonly unknown[], rowsAsArray = false) => new Promise<{ result: T; fields: Fields }>((resolve, reject) => {
    events.trip?.();
    conn.query({ sql, rowsAsArray }, params as unknown[], (err, result, fields) => (err ? reject(err) : resolve({ result: result as T, fields: (fields ?? []) as Fields })));
  });

  // --- Reads outside a unit.
  /** Row makers by statement text and by how many leading values to skip (a part's tag). */
  const makers = boundedCache<(values: unknown[]) => unknown>(256);
  const makerOf = (sql: string, fields: Fields, skip: number) => {
    const key = skip ? `${skip}\n${sql}` : sql;
    return makers.get(key) ?? makers.set(key, rowMaker(fields.slice(skip).map((f) => f.name), skip));
  };
  /** Texts of `n` parts of a `one` statement. */
  const unions = boundedCache<string>(256);
  const unionOf = (sql: string, n: number) => {
    const key = `${n}\n${sql}`;
    return unions.get(key)
      ?? unions.set(key, Array.from({ length: n }, (_, i) => `(SELECT ${i} AS read_no, ${sql.slice(7)})`).join(' UNION ALL '));
  };
  /** One read statement on a connection of its own for the while: its rows as arrays and its columns. */
  const read = async (sql: string, params: readonly unknown[]) => {
    const conn = await acquire();
    events.statement(sql, params);
    try {
      const { result, fields } = await send<unknown[][]>(conn, sql, params, true);
      return { rows: result, fields };
    } finally {
      // Back to the pool at once; one whose connection broke is dropped by the pool.
      conn.release();
    }
  };
  const settle = (r: AskedRead, rows: unknown[]) => { for (const w of r.waiting) w.resolve(rows); };
  const fail = (reads: AskedRead[], err: unknown) => { for (const r of reads) for (const w of r.waiting) w.reject(err); };

  /** Asked reads by kind ('1' one, '*' all) and text, sent after this turn. */
  let asked = new Map<string, AskedRead[]>();
  let scheduled = false;
  /** A flush is due in a microtask (an urgent read was asked). */
  let hurried = false;
  function flush() {
    scheduled = false;
    hurried = false;
    if (asked.size === 0) return;
    const now = asked;
    asked = new Map();
    for (const [key, reads] of now) {
      const sql = key.slice(1);
      if (key[0] !== '1' || reads.length === 1 || !sql.startsWith('SELECT ')) {
        for (const r of reads) read(sql, r.params).then(({ rows, fields }) => settle(r, rows.map(makerOf(sql, fields, 0))), (err) => fail([r], err));
        continue;
      }
      for (let at = 0; at < reads.length; at += MAX_PARTS) {
        const part = reads.slice(at, at + MAX_PARTS);
        read(unionOf(sql, part.length), part.flatMap((r) => r.params)).then(({ rows, fields }) => {
          const row = makerOf(sql, fields, 1);
          const found: unknown[][] = part.map(() => []);
          for (const values of rows) found[Number(values[0])]?.push(row(values));
          part.forEach((r, i) => settle(r, found[i]!));
        }, (err) => fail(part, err));
      }
    }
  }
  function ask(kind: '1' | '*', sql: string, params: readonly unknown[], urgent = false): Promise<unknown[]> {
    return new Promise((resolve, reject) => {
      const key = kind + sql;
      let reads = asked.get(key);
      if (!reads) asked.set(key, (reads = []));
      const same = reads.find((r) => sameValues(r.params, params));
      if (same) same.waiting.push({ resolve, reject });
      else reads.push({ params, waiting: [{ resolve, reject }] });
      if (urgent) {
        // Sent with what this step asked, before the rest of the turn's work (a woken long
        // poll's read goes out ahead of, say, the Kafka consumer's next fetch).
        if (!hurried) {
          hurried = true;
          queueMicrotask(flush);
        }
      } else if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
  }
  const one = async <R>(sql: string, params: readonly unknown[] = []) => (await ask('1', sql, params))[0] as R | undefined;
  const all = <R>(sql: string, params: readonly unknown[] = [], urgent = false) => ask('*', sql, params, urgent) as Promise<R[]>;

  // --- Units of work.
  const once = async <T>(body: (w: Writer) => Promise<T>, o: UnitOptions): Promise<T> => {
    const conn = await acquire();
    /** Queued statements (each counted when queued), sent with the next one; `answer` is told what it returned. */
    let queued: { sql: string; params: readonly unknown[]; answer?: (result: unknown) => void }[] = [];
    /** Whether anything has gone to the server (its transaction begun there). */
    let sent = false;
    /** Whether the connection may go back to the pool (not left inside a transaction). */
    let reusable = true;
    const queue = (sql: string, params: readonly unknown[] = [], answer?: (result: unknown) => void) => {
      events.statement(sql, params);
      queued.push({ sql, params, answer });
    };
    /** Sends the queued statements in one round trip: the last one's answer. */
    const flush = async (): Promise<unknown> => {
      const batch = queued;
      queued = [];
      if (batch.length === 0) return undefined;
      sent = true;
      if (batch.length === 1) {
        const { result } = await send(conn, batch[0]!.sql, batch[0]!.params);
        batch[0]!.answer?.(result);
        return result;
      }
      const { result } = await send<unknown[]>(conn, batch.map((b) => b.sql).join(';\n'), batch.flatMap((b) => b.params));
      batch.forEach((b, i) => b.answer?.(result[i]));
      return result[result.length - 1];
    };
    /** Sends the queued statements and then this one, in one round trip: this one's answer. */
    const exec = (sql: string, params: readonly unknown[] = []) => {
      queue(sql, params);
      return flush();
    };
    const w: Writer = {
      dialect: 'mysql',
      one: async <R>(sql: string, params?: readonly unknown[]) => ((await exec(sql, params)) as R[])[0],
      all: async <R>(sql: string, params?: readonly unknown[]) => (await exec(sql, params)) as R[],
      allOf: async <R>(columns: readonly string[], tail: string, params?: readonly unknown[]) => (await exec(selectText(columns, tail), params)) as R[],
      oneOf: async <R>(columns: readonly string[], tail: string, params?: readonly unknown[]) => ((await exec(selectText(columns, tail), params)) as R[])[0],
      run: async (sql, params) => ((await exec(sql, params)) as { affectedRows: number }).affectedRows,
      queue,
      allLater: <R>(sql: string, params: readonly unknown[] = []) => new Promise<R[]>((resolve) => queue(sql, params, (rows) => resolve(rows as R[]))),
      insert(table, columns, rows, onConflict) {
        for (let k = 0; k < rows.length; k += 200) {
          const chunk = rows.slice(k, k + 200);
          queue(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${valuesList(columns.length, chunk.length)}${conflictText(onConflict)}`, chunk.flat());
        }
      },
      ...(returning ? {
        insertIds(table: string, columns: readonly string[], rows: unknown[][]): Promise<number[]> {
          const parts: Promise<number[]>[] = [];
          for (let k = 0; k < rows.length; k += 200) {
            const chunk = rows.slice(k, k + 200);
            parts.push(new Promise((resolve) => queue(
              `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${valuesList(columns.length, chunk.length)} RETURNING id`, chunk.flat(),
              (answer) => resolve((answer as { id: number | string }[]).map((r) => Number(r.id))),
            )));
          }
          return Promise.all(parts).then((ids) => ids.flat());
        },
      } : {}),
      update(table, key, columns, rows) {
        for (let k = 0; k < rows.length; k += 500) {
          const chunk = rows.slice(k, k + 500);
          const keys = chunk.map((r) => r[0]);
          const params: unknown[] = [];
          const set = columns.map((c, i) => {
            // One value for every row (one row, or a constant such as a lease given back): no CASE.
            if (chunk.every((r) => r[i + 1] === chunk[0]![i + 1])) {
              params.push(chunk[0]![i + 1]);
              return `${c} = ?`;
            }
            for (const r of chunk) params.push(r[0], r[i + 1]);
            return `${c} = CASE ${key} ${chunk.map(() => 'WHEN ? THEN ?').join(' ')} END`;
          });
          params.push(...keys);
          queue(`UPDATE ${table} SET ${set.join(', ')} WHERE ${key} IN (${keys.map(() => '?').join(', ')})`, params);
        }
      },
    };
    try {
      if (o.transaction === false) {
        const result = await body(w);
        await flush();
        return result;
      }
      if (o.isolation) queue('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
      queue('START TRANSACTION');
      try {
        const result = await body(w);
        await exec('COMMIT');
        return result;
      } catch (err) {
        // What was queued is not sent: its transaction is the one rolled back. Nothing sent
        // yet (the body failed before its first statement that answers): no transaction
        // was begun on the server, and there is nothing to roll back. A deadlock victim is
        // rolled back already; a connection whose ROLLBACK fails is not reused.
        queued = [];
        if (sent) await exec('ROLLBACK').catch(() => { reusable = false; });
        throw err;
      }
    } finally {
      if (reusable) conn.release();
      else conn.destroy();
    }
  };
  const unit = <T>(body: (w: Writer) => Promise<T>, o: UnitOptions = {}) =>
    retryingDeadlocks(() => once(body, o), o.attempts ?? 4, o.retryable ?? isDeadlock);

  return {
    dialect: 'mysql',
    one,
    all,
    allOf: (columns, tail, params) => all(selectText(columns, tail), params),
    oneOf: (columns, tail, params) => one(selectText(columns, tail), params),
    run: (sql, params = [], o = {}) => unit((w) => w.run(sql, params), { ...o, transaction: false }),
    unit,
    close: () => new Promise<void>((resolve, reject) => pool.end((err) => (err ? reject(err) : resolve()))),
  };
}
