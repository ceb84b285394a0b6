/**
 * Rate-limit and quota counters (fixed windows) and per-bot usage statistics, in
 * the database: they survive restarts and every core instance shares them. The
 * only writer of rate_counters and bot_stats; every method takes the caller's
 * transaction, when it has one, as its last argument.
 * Callers batch: one `admit` transaction decides many calls, one `addStats`
 * statement records many increments; on SQLite a batch whose calls all fit is one statement.
 */
import { exec, inTransaction, isDeadlockOrLockWait, type Db, type Tx } from './db.js';
import { inChunks, marks, valuesList } from './statement-texts.js';

/** SQLite's upsert of `rows` statistics rows (addStats), by size: each chunk's text made once. */
const statsUpserts = new Map<number, string>();
function sqliteStatsUpsert(rows: number): string {
  let text = statsUpserts.get(rows);
  if (text === undefined) {
    statsUpserts.set(rows, (text = `INSERT INTO bot_stats (bot_id, minute, name, "count", sum_ms, max_ms) VALUES ${valuesList(6, rows)}
      ON CONFLICT (bot_id, minute, name) DO UPDATE SET "count" = "count" + excluded."count", sum_ms = sum_ms + excluded.sum_ms, max_ms = max(max_ms, excluded.max_ms)`));
  }
  return text;
}

/** One counter a call must fit in: at most `limit` admissions per window. */
export interface CounterRule {
  key: string;
  limit: number;
  windowStart: number;
  windowEnd: number;
}

/** Per call: admitted, or the first rule it did not fit in. */
export type AdmitResult = { ok: true } | { ok: false; rule: CounterRule };

export interface CounterState {
  windowStart: number;
  windowEnd: number;
  count: number;
}

export interface StatIncrement {
  botId: string;
  /** Epoch ms of the minute's start. */
  minute: number;
  name: string;
  count: number;
  sumMs: number;
  maxMs: number;
}

export interface StatTotal {
  name: string;
  count: number;
  sumMs: number;
  maxMs: number;
}

interface CounterRow {
  counter_key: string;
  window_start: number | string;
  window_end: number | string;
  count: number | string;
}

/**
 * Admissions an instance asks for beyond its calls', to decide later calls on its own
 * (the limiter's allowance): `n` on the counter of `rule` when it has at least twice
 * that left after the batch's calls (near its limit, calls are decided one by one in
 * the database, exactly), and none when a call of the batch that needs it is refused.
 */
export interface Reservation {
  rule: CounterRule;
  n: number;
}

/** What `admitReserving` answers: each call's result, and how many admissions each reservation got. */
export interface AdmitReserved {
  results: AdmitResult[];
  granted: Map<string, number>;
}

/** The calls decided in order against the counters' state (updated in place), then the reservations: each call's result, what each reservation got, and the counters changed. */
function decideCalls(calls: CounterRule[][], state: Map<string, CounterState>, reservations: Reservation[] = []): { results: AdmitResult[]; granted: Map<string, number>; changed: { key: string; s: CounterState }[] } {
  const changed = new Set<string>();
  // Counts in a window other than the rule's are from an earlier window: they start again.
  const current = (r: CounterRule) => {
    const s = state.get(r.key);
    return s && s.windowStart === r.windowStart ? s.count : 0;
  };
  /** Counters of refused calls: demand that did not fit (a reservation there would go unused). */
  const short = new Set<string>();
  const results: AdmitResult[] = calls.map((rules) => {
    const refused = rules.find((r) => current(r) + 1 > r.limit);
    if (refused) {
      for (const r of rules) short.add(r.key);
      return { ok: false, rule: refused };
    }
    for (const r of rules) {
      state.set(r.key, { windowStart: r.windowStart, windowEnd: r.windowEnd, count: current(r) + 1 });
      changed.add(r.key);
    }
    return { ok: true };
  });
  const granted = new Map<string, number>();
  for (const { rule, n } of reservations) {
    if (short.has(rule.key)) continue;
    const count = current(rule);
    // Near its limit (less than twice the reservation left), a counter's calls are decided here, one by one.
    if (n <= 0 || count + 2 * n > rule.limit) continue;
    state.set(rule.key, { windowStart: rule.windowStart, windowEnd: rule.windowEnd, count: count + n });
    changed.add(rule.key);
    granted.set(rule.key, n);
  }
  return { results, granted, changed: [...changed].sort().map((key) => ({ key, s: state.get(key)! })) };
}

const stateOf = (rows: CounterRow[]) => new Map<string, CounterState>(rows.map((r) => [r.counter_key, {
  windowStart: Number(r.window_start), windowEnd: Number(r.window_end), count: Number(r.count),
}]));

/** The counters' statements (`count` quoted: a reserved word on MySQL; SQLite takes the same quotes). */
const SQL = {
  read: (n: number) => `SELECT counter_key, window_start, window_end, \`count\` FROM rate_counters WHERE counter_key IN (${marks(n)})`,
  counter: 'SELECT counter_key, window_start, window_end, `count` FROM rate_counters WHERE counter_key = ? LIMIT 1',
  purgeCounters: 'DELETE FROM rate_counters WHERE window_end < ?',
  purgeStats: 'DELETE FROM bot_stats WHERE minute < ?',
  /**
   * The SQLite fast path (admitAll): several calls in one statement when all of them
   * fit. Its own text: MySQL has no such upsert of a CTE's rows, and decides in `decide`'s unit.
   */
  admitAll: (n: number) => `WITH v(k, ws, we, lim, n) AS (VALUES ${Array(n).fill('(?, ?, ?, ?, ?)').join(', ')})
      INSERT INTO rate_counters (counter_key, window_start, window_end, count)
      SELECT k, ws, we, n FROM v
      WHERE NOT EXISTS (
        SELECT 1 FROM v LEFT JOIN rate_counters c ON c.counter_key = v.k
        WHERE (CASE WHEN c.window_start = v.ws THEN c.count ELSE 0 END) + v.n > v.lim)
      ON CONFLICT (counter_key) DO UPDATE SET
        count = CASE WHEN rate_counters.window_start = excluded.window_start THEN rate_counters.count + excluded.count ELSE excluded.count END,
        window_start = excluded.window_start,
        window_end = excluded.window_end`,
};
const COUNTER_COLUMNS = ['counter_key', 'window_start', 'window_end', '`count`'] as const;

/** A counter a batch needs: `n` admissions in all, `reserved` of them a reservation's. */
type Tallied = CounterRule & { n: number; reserved: number };

export function createLimitsRepo(db: Db) {
  const { sql, knex } = db;
  const retryLocks = { attempts: 5, retryable: isDeadlockOrLockWait };

  /**
   * Several calls on SQLite in one statement, when all of them fit: each counter gets
   * `n` admissions (the calls that need it and what is reserved on it), or — when any
   * would not fit, counting twice what is reserved (Reservation's rule) — none does (then
   * `decide`'s unit decides call by call). All fitting, in order or at once is the
   * same: a counter's count only grows.
   */
  async function admitAll(counters: Tallied[]): Promise<boolean> {
    const params = counters.flatMap((r) => [r.key, r.windowStart, r.windowEnd, r.limit - r.reserved, r.n]);
    return (await sql.run(SQL.admitAll(counters.length), params)) > 0;
  }

  /**
   * The counters a batch needs, each with how many admissions (its calls', and what the
   * batch reserves on it); undefined when two calls see one counter differently (a window
   * turned between them, another limit): those are decided call by call.
   */
  function tally(calls: CounterRule[][], reservations: Reservation[]): Tallied[] | undefined {
    const byKey = new Map<string, Tallied>();
    const add = (r: CounterRule, n: number, reserved = 0) => {
      const t = byKey.get(r.key);
      if (!t) byKey.set(r.key, { ...r, n, reserved });
      else if (t.windowStart !== r.windowStart || t.windowEnd !== r.windowEnd || t.limit !== r.limit) return false;
      else {
        t.n += n;
        t.reserved += reserved;
      }
      return true;
    };
    for (const rules of calls) {
      const seen = new Set<string>();
      for (const r of rules) {
        if (seen.has(r.key)) return undefined;
        seen.add(r.key);
        if (!add(r, 1)) return undefined;
      }
    }
    for (const { rule, n } of reservations) if (!add(rule, n, n)) return undefined;
    return [...byKey.values()];
  }

  /** One transaction (the caller's, or its own run again, 5 tries in all, after a deadlock or a lock wait timeout). */
  async function decide(calls: CounterRule[][], reservations: Reservation[], outer?: Tx): Promise<AdmitReserved> {
    const counters = sql.dialect === 'sqlite' && !outer ? tally(calls, reservations) : undefined;
    if (counters && counters.length > 0) {
      // All fit, the reservations too.
      if (await admitAll(counters)) return { results: calls.map(() => ({ ok: true })), granted: new Map(reservations.map((r) => [r.rule.key, r.n])) };
      // Some call or reservation does not fit: the unit below finds which (and admits, should a window have turned meanwhile).
    }
    return inTransaction(db, outer, async (w) => {
      // Every counter row locked (the missing ones created) in key order, so two
      // instances deciding overlapping batches queue instead of deadlocking; then read,
      // decide, write.
      const keys = [...new Set([...calls.flat().map((r) => r.key), ...reservations.map((r) => r.rule.key)])].sort();
      w.insert('rate_counters', COUNTER_COLUMNS, keys.map((k) => [k, 0, 0, 0]), { keys: ['counter_key'] });
      const { results, granted, changed } = decideCalls(calls, stateOf(await w.all<CounterRow>(SQL.read(keys.length), keys)), reservations);
      if (changed.length > 0) {
        w.insert('rate_counters', COUNTER_COLUMNS, changed.map(({ key, s }) => [key, s.windowStart, s.windowEnd, s.count]),
          { keys: ['counter_key'], set: ['window_start', 'window_end', '`count`'] });
      }
      return { results, granted };
    }, retryLocks.attempts, retryLocks.retryable);
  }

  return {
    /**
     * Decides calls in order, each needing one admission from each of its rules;
     * a refused call takes nothing from any counter.
     */
    async admit(calls: CounterRule[][], tx?: Tx): Promise<AdmitResult[]> {
      return (await decide(calls, [], tx)).results;
    },

    /**
     * `admit`, and besides it reserves admissions on counters for the caller to decide
     * later calls with (see Reservation).
     */
    admitReserving: (calls: CounterRule[][], reservations: Reservation[], tx?: Tx): Promise<AdmitReserved> => decide(calls, reservations, tx),

    /**
     * Gives back admissions reserved and not used, to counters still in the window they
     * were reserved in (a window since turned has nothing of them).
     */
    async release(items: { key: string; windowStart: number; n: number }[], tx?: Tx): Promise<void> {
      // One statement per 200 counters: each gives back its own count, if still in its window.
      for (let i = 0; i < items.length; i += 200) {
        const chunk = items.slice(i, i + 200);
        const byKey = (pick: (x: (typeof chunk)[number]) => number) => ({
          sql: `CASE counter_key ${chunk.map(() => 'WHEN ? THEN ?').join(' ')} END`,
          params: chunk.flatMap((x) => [x.key, pick(x)]),
        });
        const n = byKey((x) => x.n);
        const windowStart = byKey((x) => x.windowStart);
        const text = `UPDATE rate_counters SET \`count\` = \`count\` - ${n.sql}
          WHERE counter_key IN (${marks(chunk.length)}) AND window_start = ${windowStart.sql} AND \`count\` >= ${n.sql}`;
        const params = [...n.params, ...chunk.map((x) => x.key), ...windowStart.params, ...n.params];
        if (tx) await tx.run(text, params);
        else await sql.run(text, params, retryLocks);
      }
    },

    async counter(key: string, tx?: Tx): Promise<CounterState | undefined> {
      const row = await (tx ?? sql).one<CounterRow>(SQL.counter, [key]);
      return row && { windowStart: Number(row.window_start), windowEnd: Number(row.window_end), count: Number(row.count) };
    },

    /** Forgets counters whose window ended before `before`. */
    async purgeCounters(before: number, tx?: Tx): Promise<number> {
      return (tx ?? sql).run(SQL.purgeCounters, [before]);
    },

    /** Adds increments to the per-minute statistics (one statement per 500). */
    async addStats(items: StatIncrement[], tx?: Tx): Promise<void> {
      if (sql.dialect === 'sqlite') {
        // One transaction, a prepared upsert per power-of-two chunk (a dispatcher flushes
        // thousands of increments a second during a burst: building each statement with
        // knex cost more than running it).
        const rows = items.map((s) => [s.botId, s.minute, s.name, s.count, s.sumMs, s.maxMs]);
        await inTransaction(db, tx, async (w) => inChunks(rows, (size, params) => w.queue(sqliteStatsUpsert(size), params)));
        return;
      }
      // Knex writes the upsert; the merged values are each dialect's own.
      const merge = sql.dialect === 'mysql'
        ? { count: knex.raw('`count` + VALUES(`count`)'), sum_ms: knex.raw('`sum_ms` + VALUES(`sum_ms`)'), max_ms: knex.raw('GREATEST(`max_ms`, VALUES(`max_ms`))') }
        : { count: knex.raw('"count" + excluded."count"'), sum_ms: knex.raw('"sum_ms" + excluded."sum_ms"'), max_ms: knex.raw('max("max_ms", excluded."max_ms")') };
      for (let i = 0; i < items.length; i += 500) {
        const chunk = items.slice(i, i + 500).map((s) => ({
          bot_id: s.botId, minute: s.minute, name: s.name, count: s.count, sum_ms: s.sumMs, max_ms: s.maxMs,
        }));
        await exec(tx ?? sql, knex('bot_stats').insert(chunk).onConflict(['bot_id', 'minute', 'name']).merge(merge));
      }
    },

    /** Totals per statistic name of one bot since `sinceMinute` (inclusive). */
    async statTotals(botId: string, sinceMinute: number, tx?: Tx): Promise<StatTotal[]> {
      const rows = (await exec(tx ?? sql, knex('bot_stats').where({ bot_id: botId }).andWhere('minute', '>=', sinceMinute)
        .groupBy('name').select('name', knex.raw('sum(count) as count'), knex.raw('sum(sum_ms) as sum_ms'), knex.raw('max(max_ms) as max_ms')))) as
        { name: string; count: number | string; sum_ms: number | string; max_ms: number | string }[];
      return rows.map((r) => ({ name: r.name, count: Number(r.count), sumMs: Number(r.sum_ms), maxMs: Number(r.max_ms) }));
    },

    /** One bot's statistics per minute and name since `sinceMinute` (inclusive), in minute order. */
    async statRows(botId: string, sinceMinute: number, tx?: Tx): Promise<(StatTotal & { minute: number })[]> {
      const rows = (await exec(tx ?? sql, knex('bot_stats').where({ bot_id: botId }).andWhere('minute', '>=', sinceMinute)
        .orderBy('minute').select('minute', 'name', 'count', 'sum_ms', 'max_ms'))) as
        { minute: number | string; name: string; count: number | string; sum_ms: number | string; max_ms: number | string }[];
      return rows.map((r) => ({ minute: Number(r.minute), name: r.name, count: Number(r.count), sumMs: Number(r.sum_ms), maxMs: Number(r.max_ms) }));
    },

    /** Forgets statistics of minutes before `before`. */
    async purgeStats(before: number, tx?: Tx): Promise<number> {
      return (tx ?? sql).run(SQL.purgeStats, [before]);
    },
  };
}

export type LimitsRepo = ReturnType<typeof createLimitsRepo>;
