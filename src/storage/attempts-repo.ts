/**
 * The delivery log: one row per webhook attempt (delivery_attempts), and the only
 * module that writes it. Rows are written with their outcomes (units.ts,
 * recordAttempts: one multi-row insert per group commit) and deleted by the core's
 * sweep once older than DELIVERY_LOG_RETENTION. Reads are scoped by bot id.
 */
import { exec, pageOf, type Db, type Tx, type Writer } from './db.js';

/** One attempt as the log keeps it. */
export interface AttemptLog {
  id: string;
  botId: string;
  deliveryId: string;
  updateId: number;
  attemptedAt: number;
  trigger: 'automatic' | 'manual';
  ok: boolean;
  durationMs: number;
  error: string | null;
  /** Without user name or password. */
  url: string;
  requestHeaders: Record<string, string>;
  /** Null: the body was the delivery's payload. */
  requestBody: string | null;
  /** Null without an answer. */
  statusCode: number | null;
  responseHeaders: Record<string, string> | null;
  responseBody: string | null;
  responseTruncated: boolean;
}

const COLUMNS = [
  'id', 'bot_id', 'delivery_id', 'update_id', 'attempted_at', 'attempt_trigger', 'ok', 'duration_ms', 'error', 'url',
  'request_headers', 'request_body', 'status_code', 'response_headers', 'response_body', 'response_truncated',
] as const;

/* eslint-disable @typescript-eslint/no-explicit-any */
function fromRow(r: any): AttemptLog {
  return {
    id: r.id,
    botId: r.bot_id,
    deliveryId: r.delivery_id,
    updateId: Number(r.update_id),
    attemptedAt: Number(r.attempted_at),
    trigger: r.attempt_trigger,
    ok: Boolean(Number(r.ok)),
    durationMs: Number(r.duration_ms),
    error: r.error,
    url: r.url,
    requestHeaders: JSON.parse(r.request_headers),
    requestBody: r.request_body,
    statusCode: r.status_code === null ? null : Number(r.status_code),
    responseHeaders: r.response_headers === null ? null : JSON.parse(r.response_headers),
    responseBody: r.response_body,
    responseTruncated: Boolean(Number(r.response_truncated)),
  };
}
/* eslint-enable @typescript-eslint/no-explicit-any */

/** Most rows one sweep statement deletes. */
const PURGE_CHUNK = 1000;

export function createAttemptsRepo(db: Db) {
  const { sql, knex } = db;
  return {
    /** Logs these attempts, in the caller's unit (one multi-row insert). */
    insert(rows: AttemptLog[], w: Writer): void {
      if (rows.length === 0) return;
      w.insert('delivery_attempts', COLUMNS, rows.map((a) => [
        a.id, a.botId, a.deliveryId, a.updateId, a.attemptedAt, a.trigger, a.ok ? 1 : 0, a.durationMs, a.error, a.url,
        JSON.stringify(a.requestHeaders), a.requestBody, a.statusCode,
        a.responseHeaders === null ? null : JSON.stringify(a.responseHeaders), a.responseBody, a.responseTruncated ? 1 : 0,
      ]));
    },

    /** One page of a delivery's attempts, newest first, with how many there are. */
    async listForDelivery(botId: string, deliveryId: string, page: number, limit: number, tx?: Tx): Promise<{ items: AttemptLog[]; total: number }> {
      const where = () => knex('delivery_attempts').where({ bot_id: botId, delivery_id: deliveryId });
      const { rows, total } = await pageOf<Record<string, unknown>>(tx ?? sql, knex, where, (b) => b.select('*')
        .orderBy([{ column: 'attempted_at', order: 'desc' }, { column: 'id', order: 'desc' }]), page, limit);
      return { items: rows.map(fromRow), total };
    },

    /** Deletes attempts made before `before` (ms), a chunk per statement; answers how many. */
    async purgeOlderThan(before: number, tx?: Tx): Promise<number> {
      let total = 0;
      for (;;) {
        const ids = (await exec(tx ?? sql, knex('delivery_attempts').where('attempted_at', '<', before).limit(PURGE_CHUNK).pluck('id'))) as string[];
        if (ids.length === 0) return total;
        total += await exec(tx ?? sql, knex('delivery_attempts').whereIn('id', ids).delete());
      }
    },
  };
}

export type AttemptsRepo = ReturnType<typeof createAttemptsRepo>;
