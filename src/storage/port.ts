/**
 * The storage port: what every repository runs its statements through, on either
 * engine. One driver implements it per engine (`sqlite/driver.ts`, `mysql/driver.ts`),
 * chosen once when the database is opened (db.ts), as svix's queue picks its backend
 * once and each backend implements one trait. A repository writes each operation once,
 * against this port; a statement's text differs by engine only where the dialects do.
 *
 * Values are bound (`?`), never written into a text, except checked integer literals
 * (db.ts's literalInt).
 */

export type Dialect = 'sqlite' | 'mysql';

/** Reads, outside a unit of work (the last committed state) or inside one (its own writes too). */
export interface Reads {
  readonly dialect: Dialect;
  /** The first row the statement returns, or undefined (a statement of at most one row: `LIMIT 1`, an aggregate). */
  one<R>(sql: string, params?: readonly unknown[]): Promise<R | undefined>;
  /**
   * Every row the statement returns. `urgent`: a caller waiting to be answered from it (a
   * woken long poll): sent as soon as the current step's reads are asked (MySQL, a
   * microtask), rather than after the event loop's turn, ahead of what else the turn does.
   */
  all<R>(sql: string, params?: readonly unknown[], urgent?: boolean): Promise<R[]>;
  /**
   * Rows of many columns, `SELECT <columns> <tail>`: each driver fetches wide rows its
   * cheapest way (SQLite's reader: one JSON array per row, cheaper than converting each value).
   */
  allOf<R>(columns: readonly string[], tail: string, params?: readonly unknown[]): Promise<R[]>;
  /** `allOf` of a statement of at most one row. */
  oneOf<R>(columns: readonly string[], tail: string, params?: readonly unknown[]): Promise<R | undefined>;
}

/** What an insert does with a row whose key is taken: set these columns from the new row, or (none named) keep the old row. */
export interface OnConflict {
  keys: readonly string[];
  set?: readonly string[];
}

/**
 * The statements of one unit of work, on its one connection. Statements whose answer
 * the unit does not read (`queue`, `insert`, `update`) may be held back and sent with
 * the unit's next statement that answers, or with its COMMIT (MySQL: one round trip);
 * they run in the order written, and a failure fails the unit.
 */
export interface Writer extends Reads {
  /** Runs a statement that answers no rows: how many rows it matched. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  /** A statement whose answer the unit does not need. */
  queue(sql: string, params?: readonly unknown[]): void;
  /**
   * A read whose rows the unit needs later: held back like `queue` (MySQL: sent with the
   * unit's next statement that answers, in the same round trip), its rows answered once
   * it has run. Await it after that next statement, or it waits for the COMMIT.
   */
  allLater<R>(sql: string, params?: readonly unknown[]): Promise<R[]>;
  /** Inserts rows (each the columns' values in order), in multi-row statements. */
  insert(table: string, columns: readonly string[], rows: unknown[][], onConflict?: OnConflict): void;
  /**
   * Sets `columns` of several rows, each row its key's value then the columns' values,
   * rows in the order given (MySQL locks them in that order).
   */
  update(table: string, key: string, columns: readonly string[], rows: unknown[][]): void;
  /**
   * Inserts rows as `insert` does, held back with the unit's next statements as `insert`
   * is, and answers the ids the table's auto-increment key gave them (in row order) once
   * that statement has run. Only where the engine answers them in the same round trip
   * (INSERT … RETURNING: MariaDB's, sent with the unit's next statement or its COMMIT;
   * SQLite's, at once): absent otherwise (MySQL). Await it after the unit, never in it
   * (it may be sent with the COMMIT).
   */
  insertIds?(table: string, columns: readonly string[], rows: unknown[][]): Promise<number[]>;
}

export interface UnitOptions {
  /** READ COMMITTED for this transaction (MySQL; SQLite's one writer has no other). */
  isolation?: 'read committed';
  /** false: a body of one statement, atomic by itself, run without BEGIN … COMMIT. */
  transaction?: boolean;
  /** Runs in all when `retryable` says so of what the body threw (default 4; deadlock victims). */
  attempts?: number;
  retryable?: (err: unknown) => boolean;
}

/** The database as the repositories see it. */
export interface Sql extends Reads {
  /** One statement on its own (autocommit), run again as a unit is: how many rows it matched. */
  run(sql: string, params?: readonly unknown[], opts?: Pick<UnitOptions, 'attempts' | 'retryable'>): Promise<number>;
  /**
   * Runs `body` in one transaction (rolled back when it throws), run again whole when
   * `retryable` says so (MySQL's deadlock victims). The body only writes through `w`,
   * and awaits nothing but `w`'s answers (SQLite: the one writer waits meanwhile).
   */
  unit<T>(body: (w: Writer) => Promise<T>, opts?: UnitOptions): Promise<T>;
  close(): Promise<void>;
}

/** What a driver reports: each statement sent (counted as the botplatform_db_statements gauge), each round trip to a server. */
export interface DriverEvents {
  statement(sql: string, params: readonly unknown[]): void;
  trip?(): void;
  /** SQLite: a unit waited `ms` for the write lock another thread or process held. */
  lockWait?(ms: number): void;
}
