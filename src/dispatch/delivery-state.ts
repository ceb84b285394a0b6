/**
 * The one place that decides a delivery's next state after an attempt. Pure: the
 * dispatcher's attempts and the console's manual retry ask it, and the repository
 * only writes what it answers.
 *
 *   pending ──fail──▶ retrying ──fail (schedule left)──▶ retrying
 *      │                  │──fail (last retry)──▶ dead_letter
 *      └──ok──▶ succeeded ◀──ok──┘
 *
 * Automatic attempts walk the retry schedule: `attempts` counts them, and the
 * n-th failure waits schedule[n-1] before the next one; the failure after the last
 * step makes the delivery dead_letter. A manual retry is outside the schedule: it
 * never changes `attempts`, `next_attempt_at` or the status, except that a success
 * ends the delivery as succeeded. Every attempt, manual or not, is recorded as the
 * delivery's last one (status code, error, time, duration).
 *
 * A recovery (the console's bulk recover) queues a delivery again without an attempt:
 *
 *   dead_letter ──recover──▶ pending (due now)      retrying ──recover──▶ retrying (due now)
 *
 * It keeps `attempts`: the schedule is not restarted, so a recovered dead_letter
 * delivery gets one more automatic attempt, and its failure makes it dead_letter
 * again (recover it again to retry once more). Other deliveries are not recoverable.
 */
import type { DeliveryStatusValue } from '../storage/deliveries-repo.js';

/** Why an attempt failed. */
export type AttemptFailure =
  /** The receiver answered, with a status other than 2xx (redirects included: never followed). */
  | { kind: 'http'; statusCode: number; message: string }
  /** No full answer within the timeout. */
  | { kind: 'timeout'; message: string }
  /** The target was not contacted: its address is not allowed (SSRF rules, allowed_ips) or its URL is not valid. */
  | { kind: 'refused'; message: string }
  /** Connection-level failure: DNS, TCP, TLS. */
  | { kind: 'network'; message: string };

/** What one attempt came to. `at`: when it ended (epoch ms). */
export type AttemptResult = ({ ok: true; statusCode: number } | { ok: false; failure: AttemptFailure }) & {
  durationMs: number;
  at: number;
};

/** auto: the dispatcher, walking the schedule. manual: the console's retry endpoint. */
export type AttemptTrigger = 'auto' | 'manual';

/** The parts of a delivery row the decision depends on. */
export interface DeliveryPosition {
  status: DeliveryStatusValue;
  attempts: number;
  nextAttemptAt: number;
}

/** The delivery's values after the attempt, and what else the attempt causes. */
export interface DeliveryTransition {
  status: DeliveryStatusValue;
  attempts: number;
  /** When the next automatic attempt is due (for a closed delivery: the attempt's time). */
  nextAttemptAt: number;
  lastStatusCode: number | null;
  lastError: string | null;
  lastAttemptAt: number;
  lastDurationMs: number;
  /** This attempt closed the delivery (succeeded or dead_letter): its update leaves the bot's queue. */
  closed: boolean;
  /** This attempt made the delivery dead_letter (counted once, by the attempt that does it). */
  deadLettered: boolean;
}

const isOpen = (s: DeliveryStatusValue) => s === 'pending' || s === 'retrying';

/**
 * The next state of a delivery at `row` after `result`. `scheduleMs`: the delays
 * before each retry (attempts in all: its length + 1).
 */
export function nextDeliveryState(
  row: DeliveryPosition, result: AttemptResult, trigger: AttemptTrigger, scheduleMs: readonly number[],
): DeliveryTransition {
  const last = {
    lastStatusCode: result.ok ? result.statusCode : result.failure.kind === 'http' ? result.failure.statusCode : null,
    lastError: result.ok ? null : result.failure.message,
    lastAttemptAt: result.at,
    lastDurationMs: result.durationMs,
  };
  const unchanged = { status: row.status, attempts: row.attempts, nextAttemptAt: row.nextAttemptAt, ...last, closed: false, deadLettered: false };

  if (result.ok) {
    if (row.status === 'succeeded') return unchanged;
    return {
      status: 'succeeded',
      attempts: trigger === 'auto' ? row.attempts + 1 : row.attempts,
      nextAttemptAt: result.at,
      ...last,
      closed: isOpen(row.status),
      deadLettered: false,
    };
  }
  // A failed manual retry leaves the delivery where it was; so does an automatic
  // attempt at a delivery that is no longer open (nothing is scheduled for it).
  if (trigger === 'manual' || !isOpen(row.status)) return unchanged;

  const attempts = row.attempts + 1;
  // The delay before the next attempt: schedule[0] after the first failure, and so on.
  const delay = scheduleMs[attempts - 1];
  if (delay !== undefined) {
    return { status: 'retrying', attempts, nextAttemptAt: result.at + delay, ...last, closed: false, deadLettered: false };
  }
  return { status: 'dead_letter', attempts, nextAttemptAt: result.at, ...last, closed: true, deadLettered: true };
}

/** Deliveries a recovery may take: dead_letter (the default) and retrying. */
export type RecoverableStatus = 'dead_letter' | 'retrying';

/**
 * The state of a `status` delivery after a recovery at `now` (attempts unchanged),
 * or null when a delivery in that status is not recoverable.
 */
export function recoveredState(
  status: DeliveryStatusValue, now: number,
): { status: DeliveryStatusValue; nextAttemptAt: number } | null {
  if (status === 'dead_letter') return { status: 'pending', nextAttemptAt: now };
  if (status === 'retrying') return { status: 'retrying', nextAttemptAt: now };
  return null;
}
