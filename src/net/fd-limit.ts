/**
 * The process's limit on open files (its soft RLIMIT_NOFILE, which Node raises to the hard
 * limit at start), read from /proc/self/limits; undefined where there is no such file.
 */
import fs from 'node:fs';

export function openFileLimit(limits = '/proc/self/limits'): number | undefined {
  try {
    const line = fs.readFileSync(limits, 'utf8').split('\n').find((l) => l.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    return soft === undefined || soft === 'unlimited' ? undefined : Number(soft);
  } catch {
    return undefined;
  }
}

/** File descriptors kept free for everything but webhook connections (database, bus, servers, logs). */
export const RESERVED_FDS = 1024;

/** `wanted` webhook connections, lowered to leave RESERVED_FDS of `limit` free (at least 16). */
export function socketCapWithin(wanted: number, limit: number | undefined): number {
  if (limit === undefined) return wanted;
  return Math.max(16, Math.min(wanted, limit - RESERVED_FDS));
}
