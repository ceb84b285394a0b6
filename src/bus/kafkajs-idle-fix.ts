/**
 * kafkajs 2.2.4 (its last release) spins on every broker connection once the first
 * response has arrived: each response calls RequestQueue#scheduleCheckPendingRequests,
 * which, with nothing pending and no throttling, arms setTimeout(check, -1 - Date.now())
 * (a 1 ms timer) whose check arms the next one, forever — about a thousand timer
 * callbacks a second per connection, on a process that does nothing. Upstream: issue
 * tulios/kafkajs#1556, fixes #1667 and #1768 (not merged, no release since 2023).
 *
 * This replaces that one method with upstream's logic minus the loop: a check is
 * armed only for requests waiting in the queue (for the throttle's end, or after
 * kafkajs's 10 ms interval); with none waiting there is nothing to check, and a
 * request queued later arms it again (push calls this method). Requests held back by
 * the in-flight limit are checked as each response arrives, as before.
 *
 * Applied once, on import, and only to the version it was written against.
 */
import { createRequire } from 'node:module';

const CHECK_PENDING_REQUESTS_INTERVAL = 10;

interface RequestQueue {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

const require = createRequire(import.meta.url);

/** Whether the fix is in place (false: another kafkajs version, left as it is). */
export const kafkajsIdleFixApplied: boolean = (() => {
  const { version } = require('kafkajs/package.json') as { version: string };
  if (version !== '2.2.4') return false;
  const RequestQueue = require('kafkajs/src/network/requestQueue/index.js') as { prototype: RequestQueue };
  RequestQueue.prototype.scheduleCheckPendingRequests = function scheduleCheckPendingRequests(this: RequestQueue) {
    if (this.throttleCheckTimeoutId || this.pending.length === 0) return;
    const untilUnthrottled = this.throttledUntil - Date.now();
    this.throttleCheckTimeoutId = setTimeout(() => {
      this.throttleCheckTimeoutId = null;
      this.checkPendingRequests();
    }, untilUnthrottled > 0 ? untilUnthrottled : CHECK_PENDING_REQUESTS_INTERVAL);
  };
  return true;
})();
