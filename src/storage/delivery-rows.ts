/**
 * The shape of a new `deliveries` row, shared by the writes that create one: ingest
 * (an update for a bot in webhook mode) and setting a webhook (the updates already
 * queued). On its own so those repositories and the deliveries repository do not
 * import each other.
 */
import crypto from 'node:crypto';

/** What a delivery row is made from: the update as stored. */
export interface DeliverableUpdate {
  botId: string;
  updateId: number;
  updateSeq: number;
  kind: string;
  message: unknown;
}

/** Random bytes drawn in blocks (one call to the system's generator per 273 ids, not one per id); each byte is used once. */
let pool = Buffer.alloc(0);
let used = 0;
function randomBytes(n: number): Buffer {
  if (used + n > pool.length) {
    pool = crypto.randomBytes(4096);
    used = 0;
  }
  used += n;
  return pool.subarray(used - n, used);
}

/** "dlv_" + 20 random base64url-safe letters and digits: never all digits. */
export function newDeliveryId(): string {
  return `dlv_${randomBytes(15).toString('base64url').replace(/[-_]/g, 'x')}`;
}

/** The webhook body of an update: what a receiver gets. */
export function webhookBody(u: Omit<DeliverableUpdate, 'botId'>): string {
  return JSON.stringify({ update_id: u.updateId, update_seq: u.updateSeq, [u.kind]: u.message });
}

/** A new delivery row of an update, due at `now`. */
export function deliveryRow(u: DeliverableUpdate, now: number) {
  return {
    id: newDeliveryId(), bot_id: u.botId, update_id: u.updateId, update_seq: u.updateSeq, status: 'pending',
    attempts: 0, next_attempt_at: now, lease_until: 0, payload: webhookBody(u), created_at: now,
  };
}
