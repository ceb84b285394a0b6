/**
 * What a storage failure means to a caller. Kept apart from db.ts (which loads knex)
 * so the core can classify errors without importing the database layer's drivers.
 */

/** Network and pool failures of the database connection: the call may succeed if retried later. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
  'PROTOCOL_CONNECTION_LOST', 'PROTOCOL_SEQUENCE_TIMEOUT', 'ER_CON_COUNT_ERROR', 'ER_SERVER_SHUTDOWN',
  'ER_LOCK_WAIT_TIMEOUT', 'ER_LOCK_DEADLOCK', 'SQLITE_BUSY', 'SQLITE_LOCKED',
  // The MySQL driver's own: no pooled connection came within DATABASE_ACQUIRE_TIMEOUT_MS.
  'POOL_ACQUIRE_TIMEOUT',
]);

/**
 * True when the database could not be reached or was too busy to answer (connection
 * refused or lost, the pool timed out waiting for a connection, a lock wait timed out,
 * a deadlock victim that its retries did not save): UNAVAILABLE to the caller, retryable,
 * rather than INTERNAL.
 */
export function isStorageUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; errno?: unknown; name?: unknown; fatal?: unknown } | null;
  if (!e || typeof e !== 'object') return false;
  if (typeof e.code === 'string' && UNREACHABLE_CODES.has(e.code)) return true;
  // mysql2 marks errors after which the connection is unusable as fatal.
  if (e.fatal === true) return true;
  return e.errno === 1205 || e.errno === 1213 || e.errno === 2002 || e.errno === 2003 || e.errno === 2006 || e.errno === 2013;
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

/**
 * A write refused because a unique key already holds the value, named in the
 * repository's words (`key`: "username"): what the domain sees of a unique violation
 * instead of the driver's error code.
 */
export class Conflict extends Error {
  constructor(readonly key: string, options?: { cause?: unknown }) {
    super(`${key} is already taken`, options);
    this.name = 'Conflict';
  }
}
