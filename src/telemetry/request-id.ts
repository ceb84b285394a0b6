/**
 * Request ids: taken from the caller's x-request-id when it is a plain token (so a
 * client or proxy can correlate), otherwise made up. Anything else could forge or
 * break log lines.
 */
import crypto from 'node:crypto';

const PLAIN = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestIdOf(given: unknown): string {
  return typeof given === 'string' && PLAIN.test(given) ? given : crypto.randomUUID();
}
