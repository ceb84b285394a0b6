/**
 * The delivery state machine, table-driven: where each attempt (automatic or
 * manual, success or each kind of failure) takes a delivery on a 4-step schedule.
 */
import { describe, expect, it } from 'vitest';
import { nextDeliveryState, recoveredState, type AttemptFailure, type AttemptResult, type DeliveryPosition } from '../src/dispatch/delivery-state.js';

const SCHEDULE = [60_000, 300_000, 900_000, 3_600_000];
const AT = 1_700_000_000_000;
const DUE = AT - 10;

const ok = (statusCode = 200): AttemptResult => ({ ok: true, statusCode, durationMs: 12, at: AT });
const fail = (failure: AttemptFailure = { kind: 'http', statusCode: 500, message: 'HTTP 500' }): AttemptResult =>
  ({ ok: false, failure, durationMs: 34, at: AT });
const row = (status: DeliveryPosition['status'], attempts: number, nextAttemptAt = DUE): DeliveryPosition => ({ status, attempts, nextAttemptAt });

describe('nextDeliveryState', () => {
  it.each([
    // [case, row, result, trigger, expected status, attempts, next_attempt_at, closed, dead-lettered]
    ['first attempt succeeds', row('pending', 0), ok(), 'auto', 'succeeded', 1, AT, true, false],
    ['first failure: retry after the first step', row('pending', 0), fail(), 'auto', 'retrying', 1, AT + 60_000, false, false],
    ['second failure: the second step', row('retrying', 1), fail(), 'auto', 'retrying', 2, AT + 300_000, false, false],
    ['third failure: the third step', row('retrying', 2), fail(), 'auto', 'retrying', 3, AT + 900_000, false, false],
    ['fourth failure: the last step', row('retrying', 3), fail(), 'auto', 'retrying', 4, AT + 3_600_000, false, false],
    ['the last retry fails: dead_letter', row('retrying', 4), fail(), 'auto', 'dead_letter', 5, AT, true, true],
    ['a retry succeeds', row('retrying', 3), ok(204), 'auto', 'succeeded', 4, AT, true, false],
    ['manual retry of a retrying delivery fails: schedule and count untouched', row('retrying', 2, AT + 5000), fail(), 'manual', 'retrying', 2, AT + 5000, false, false],
    ['manual retry on its last step fails: still retrying, not dead', row('retrying', 4, AT + 5000), fail(), 'manual', 'retrying', 4, AT + 5000, false, false],
    ['manual retry of a pending delivery fails: still pending, still due', row('pending', 0), fail(), 'manual', 'pending', 0, DUE, false, false],
    ['manual retry of a retrying delivery succeeds', row('retrying', 2, AT + 5000), ok(), 'manual', 'succeeded', 2, AT, true, false],
    ['manual retry of a dead_letter fails: stays dead, not counted again', row('dead_letter', 5, AT - 1000), fail(), 'manual', 'dead_letter', 5, AT - 1000, false, false],
    ['manual retry of a dead_letter succeeds', row('dead_letter', 5, AT - 1000), ok(), 'manual', 'succeeded', 5, AT, false, false],
  ] as const)('%s', (_case, before, result, trigger, status, attempts, nextAttemptAt, closed, deadLettered) => {
    expect(nextDeliveryState(before, result, trigger, SCHEDULE)).toMatchObject({ status, attempts, nextAttemptAt, closed, deadLettered });
  });

  it('a one-step schedule: one retry, then dead_letter', () => {
    expect(nextDeliveryState(row('pending', 0), fail(), 'auto', [1000])).toMatchObject({ status: 'retrying', attempts: 1, nextAttemptAt: AT + 1000 });
    expect(nextDeliveryState(row('retrying', 1), fail(), 'auto', [1000])).toMatchObject({ status: 'dead_letter', attempts: 2, deadLettered: true });
  });

  it.each([
    ['http', { kind: 'http', statusCode: 503, message: 'HTTP 503' }, 503, 'HTTP 503'],
    ['redirect', { kind: 'http', statusCode: 302, message: 'redirect (302) not followed' }, 302, 'redirect (302) not followed'],
    ['timeout', { kind: 'timeout', message: 'timed out after 800 ms' }, null, 'timed out after 800 ms'],
    ['refused', { kind: 'refused', message: 'refused target: loopback' }, null, 'refused target: loopback'],
    ['network', { kind: 'network', message: 'ECONNREFUSED: connect ECONNREFUSED' }, null, 'ECONNREFUSED: connect ECONNREFUSED'],
  ] as const)('every failure kind (%s) is retried and recorded as the last attempt', (_kind, failure, lastStatusCode, lastError) => {
    for (const trigger of ['auto', 'manual'] as const) {
      expect(nextDeliveryState(row('retrying', 1), fail(failure), trigger, SCHEDULE)).toMatchObject({
        status: 'retrying', lastStatusCode, lastError, lastAttemptAt: AT, lastDurationMs: 34,
      });
    }
  });

  it('a success is recorded as the last attempt, with no error', () => {
    expect(nextDeliveryState(row('retrying', 1), ok(201), 'manual', SCHEDULE)).toMatchObject({
      lastStatusCode: 201, lastError: null, lastAttemptAt: AT, lastDurationMs: 12,
    });
  });
});

describe('recoveredState', () => {
  it('a dead_letter delivery becomes pending, due now; a retrying one stays retrying, due now; others are not recoverable', () => {
    expect(recoveredState('dead_letter', AT)).toEqual({ status: 'pending', nextAttemptAt: AT });
    expect(recoveredState('retrying', AT)).toEqual({ status: 'retrying', nextAttemptAt: AT });
    expect(recoveredState('pending', AT)).toBeNull();
    expect(recoveredState('succeeded', AT)).toBeNull();
  });

  it('attempts count on: a recovered dead_letter delivery gets one more automatic attempt, and is dead_letter again if it fails', () => {
    const back = { ...row('dead_letter', 5), ...recoveredState('dead_letter', DUE)! };
    expect(nextDeliveryState(back, fail(), 'auto', SCHEDULE)).toMatchObject({ status: 'dead_letter', attempts: 6, closed: true, deadLettered: true });
    expect(nextDeliveryState(back, ok(), 'auto', SCHEDULE)).toMatchObject({ status: 'succeeded', attempts: 6, closed: true });
  });
});
