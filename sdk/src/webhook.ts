/**
 * Verifying a webhook delivery (CONTRACT §5): HMAC-SHA256 of `timestamp + "." +
 * raw body` under the bot's secret_token, compared in constant time (during a secret
 * rotation's overlap the header carries two signatures separated by a space, one per
 * secret: any one matching is enough, so a receiver may switch secrets at any moment of
 * the window), a timestamp
 * within 300 seconds of now either way, and X-Service-Update-Id equal to the
 * body's update_id. The signature is checked over the bytes as received, before
 * any JSON parsing: re-serialised JSON would not match.
 */
import crypto from 'node:crypto';
import type { Update } from './generated/api.js';

export const SIGNATURE_HEADER = 'x-service-signature-v2';
export const TIMESTAMP_HEADER = 'x-service-timestamp';
export const UPDATE_ID_HEADER = 'x-service-update-id';
/** Clock skew the official SDK tolerates, either way. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export type WebhookFailure =
  | 'missing_header'
  | 'invalid_timestamp'
  | 'timestamp_out_of_tolerance'
  | 'invalid_signature'
  | 'invalid_body'
  | 'update_id_mismatch';

/** A delivery that must not be trusted. `reason` says which check failed. */
export class WebhookVerificationError extends Error {
  override readonly name: string = 'WebhookVerificationError';
  constructor(
    readonly reason: WebhookFailure,
    message: string,
  ) {
    super(message);
  }
}
/** A signature, timestamp or update id header is absent (or given twice). */
export class WebhookMissingHeaderError extends WebhookVerificationError {
  override readonly name = 'WebhookMissingHeaderError';
  constructor(readonly header: string) {
    super('missing_header', `missing or repeated header ${header}`);
  }
}
/** X-Service-Timestamp is not unix seconds. */
export class WebhookInvalidTimestampError extends WebhookVerificationError {
  override readonly name = 'WebhookInvalidTimestampError';
  constructor() {
    super('invalid_timestamp', `${TIMESTAMP_HEADER} is not a unix time in seconds`);
  }
}
/** The timestamp is further from now than the tolerance: a replay, or a wrong clock. */
export class WebhookTimestampError extends WebhookVerificationError {
  override readonly name = 'WebhookTimestampError';
  constructor(
    readonly timestamp: number,
    readonly now: number,
    readonly toleranceSeconds: number,
  ) {
    super('timestamp_out_of_tolerance', `timestamp is ${Math.abs(now - timestamp)} s ${timestamp < now ? 'old' : 'ahead'}; at most ${toleranceSeconds} s is tolerated`);
  }
}
/** The signature does not match: a changed body or timestamp, or another secret. */
export class WebhookSignatureError extends WebhookVerificationError {
  override readonly name = 'WebhookSignatureError';
  constructor() {
    super('invalid_signature', 'signature does not match the body, the timestamp and the secret');
  }
}
/** Signed correctly, but not an update (cannot happen with the service; kept for safety). */
export class WebhookBodyError extends WebhookVerificationError {
  override readonly name = 'WebhookBodyError';
  constructor(detail: string) {
    super('invalid_body', `body is not an update: ${detail}`);
  }
}
/** X-Service-Update-Id names another update than the body. */
export class WebhookUpdateIdMismatchError extends WebhookVerificationError {
  override readonly name = 'WebhookUpdateIdMismatchError';
  constructor(
    readonly headerUpdateId: string,
    readonly bodyUpdateId: string,
  ) {
    super('update_id_mismatch', `${UPDATE_ID_HEADER} ${headerUpdateId} does not match the body's update_id ${bodyUpdateId}`);
  }
}

/** Headers as node:http, Fastify and Express give them, or a fetch Headers object. */
export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** The bot's webhook secret_token. */
  secret: string;
  /** Seconds of clock skew accepted either way (default 300). */
  toleranceSeconds?: number;
  /** Current time in unix seconds (default: the clock). */
  now?: number;
}

function header(headers: HeaderSource, name: string): string {
  let v: string | string[] | null | undefined;
  if (typeof (headers as Headers).get === 'function') v = (headers as Headers).get(name);
  else {
    const h = headers as Record<string, string | string[] | undefined>;
    v = h[name] ?? Object.entries(h).find(([k]) => k.toLowerCase() === name)?.[1];
  }
  if (Array.isArray(v)) v = v.length === 1 ? v[0] : undefined;
  if (typeof v !== 'string' || v === '' || v.includes(',')) throw new WebhookMissingHeaderError(name);
  return v;
}

/** The lowercase hex signature the service sends: HMAC-SHA256(secret, timestamp + "." + body). */
export function signWebhook(secret: string, timestamp: number | string, rawBody: Uint8Array | string): string {
  return crypto.createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

/**
 * Verifies one delivery and returns the update. Throws a WebhookVerificationError
 * subclass naming the failed check. `rawBody` must be the request body bytes as
 * received (a Buffer or Uint8Array): a string or a parsed object is refused.
 */
export function verifyWebhook(rawBody: Uint8Array, headers: HeaderSource, options: VerifyOptions): Update {
  if (!(rawBody instanceof Uint8Array)) {
    throw new TypeError('verifyWebhook needs the raw body bytes (Buffer or Uint8Array), not parsed or re-encoded JSON');
  }
  if (!options.secret) throw new TypeError('verifyWebhook needs the webhook secret');
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const signature = header(headers, SIGNATURE_HEADER);
  const tsText = header(headers, TIMESTAMP_HEADER);
  const updateIdHeader = header(headers, UPDATE_ID_HEADER);

  if (!/^\d{1,12}$/.test(tsText)) throw new WebhookInvalidTimestampError();
  const expected = Buffer.from(signWebhook(options.secret, tsText, rawBody), 'hex');
  // One signature, or several separated by spaces (a rotation's overlap): each compared in
  // constant time, a malformed one included, before deciding.
  let same = false;
  for (const one of signature.split(' ').slice(0, 8)) {
    const wellFormed = /^[0-9a-fA-F]{64}$/.test(one);
    const given = wellFormed ? Buffer.from(one, 'hex') : Buffer.alloc(expected.length);
    if (crypto.timingSafeEqual(expected, given) && wellFormed) same = true;
  }
  if (!same) throw new WebhookSignatureError();

  const timestamp = Number(tsText);
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > tolerance) throw new WebhookTimestampError(timestamp, now, tolerance);

  let update: unknown;
  try {
    update = JSON.parse(Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength).toString('utf8'));
  } catch {
    throw new WebhookBodyError('not JSON');
  }
  const id = (update as { update_id?: unknown } | null)?.update_id;
  if (typeof id !== 'number' || !Number.isSafeInteger(id)) throw new WebhookBodyError('no update_id');
  if (updateIdHeader !== String(id)) throw new WebhookUpdateIdMismatchError(updateIdHeader, String(id));
  return update as Update;
}
