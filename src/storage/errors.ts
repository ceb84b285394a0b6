/**
 * What a storage failure means to a caller. Kept apart from db.ts (which loads knex)
 * so the core can classify errors without importing the database layer's driver.
 */

/** Network and pool failures of the database connection: the call may succeed if retried later. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
  'PROTOCOL_CONNECTION_LOST', 'PROTOCOL_SEQUENCE_TIMEOUT', 'ER_CON_COUNT_ERROR', 'ER_SERVER_SHUTDOWN',
  'ER_LOCK_WAIT_TIMEOUT', 'ER_LOCK_DEADLOCK', 'SQLITE_BUSY', 'SQLITE_LOCKED',
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
  if (e.name === 'KnexTimeoutError') return true; // "Knex: Timeout acquiring a connection"
  if (typeof e.code === 'string' && UNREACHABLE_CODES.has(e.code)) return true;
  // mysql2 marks errors after which the connection is unusable as fatal.
  if (e.fatal === true) return true;
  return e.errno === 1205 || e.errno === 1213 || e.errno === 2002 || e.errno === 2003 || e.errno === 2006 || e.errno === 2013;
}
