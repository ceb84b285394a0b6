/**
 * Request validation: each rule adds a field violation; a request with any is
 * refused once, with every violation listed.
 */
import { ApiError, Code, type FieldViolation } from '../errors.js';

export class Violations {
  readonly list: FieldViolation[] = [];

  add(field: string, reason: string, description: string): void {
    this.list.push({ field, reason, description });
  }

  /** Throws INVALID_ARGUMENT naming the first problem (and how many more) if there is any. */
  throwIfAny(): void {
    if (this.list.length === 0) return;
    const [first] = this.list;
    const more = this.list.length > 1 ? ` (and ${this.list.length - 1} more)` : '';
    throw new ApiError(Code.INVALID_ARGUMENT, `${first!.field}: ${first!.description}${more}`, { details: this.list });
  }
}

/** Length in Unicode code points, which is what "characters" means to a user (and to utf8mb4 columns). */
export const charLength = (s: string): number => [...s].length;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * What no text of the interface may hold: U+0000 (which C strings, logs and some
 * databases cut at) and unpaired surrogates (not Unicode: JSON can spell them as
 * "\ud800", and every UTF-8 encoder on the way to storage or to gRPC replaces
 * them, so the text kept would not be the text sent).
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000\p{Cs}]/u;

/**
 * Every free text of the interface passes here: true when it is safe, else one
 * violation naming the field.
 */
export function safeText(v: Violations, field: string, value: string | undefined | null): boolean {
  if (value === undefined || value === null || !UNSAFE.test(value)) return true;
  v.add(field, 'INVALID_CHARACTERS', 'must not contain NUL characters or unpaired surrogates');
  return false;
}

/** A required single-line text of 1..max characters. */
export function requiredText(v: Violations, field: string, value: string | undefined, max: number): void {
  if (value === undefined || value.trim() === '') v.add(field, 'REQUIRED', 'is required');
  else optionalText(v, field, value, max, { singleLine: true });
}

/** An optional text of at most max characters. */
export function optionalText(
  v: Violations,
  field: string,
  value: string | undefined | null,
  max: number,
  opts: { singleLine?: boolean } = {},
): void {
  if (value === undefined || value === null || !safeText(v, field, value)) return;
  if (charLength(value) > max) v.add(field, 'TOO_LONG', `must be at most ${max} characters`);
  else if (opts.singleLine && CONTROL.test(value)) v.add(field, 'INVALID_FORMAT', 'must not contain control characters');
}

/** A required message text of 1..max characters; line breaks are allowed. */
export function messageText(v: Violations, field: string, value: string | undefined, max: number): void {
  if (!value) v.add(field, 'REQUIRED', 'is required');
  else if (safeText(v, field, value) && charLength(value) > max) v.add(field, 'TOO_LONG', `must be 1 to ${max} characters`);
}

/*
 * Characters a file name may not hold, besides NUL and unpaired surrogates: path
 * separators, C0 and C1 controls and DEL, line and paragraph separators, and the
 * bidirectional controls (embeddings, overrides, isolates, LRM/RLM/ALM) that let
 * "invoice\u202Egpj.exe" display as "invoiceexe.jpg".
 */
// eslint-disable-next-line no-control-regex
const BAD_FILE_NAME_CHARS = /[/\\\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/;

/** A plain file name of 1..max characters, displayed as it reads. */
export function fileName(v: Violations, field: string, value: string, max: number): void {
  if (!value) return v.add(field, 'REQUIRED', 'is required');
  if (!safeText(v, field, value)) return;
  if (charLength(value) > max) return v.add(field, 'TOO_LONG', `must be at most ${max} characters`);
  if (BAD_FILE_NAME_CHARS.test(value) || value === '.' || value === '..') {
    v.add(field, 'INVALID_FORMAT', 'must be a plain file name, without path separators, control characters or bidirectional controls');
  }
}

const USERNAME = /^[a-z][a-z0-9_]*$/;

export function username(v: Violations, field: string, value: string | undefined): void {
  if (value === undefined || value === '') return v.add(field, 'REQUIRED', 'is required');
  if (!/^[a-z]/.test(value)) return v.add(field, 'INVALID_FORMAT', 'must start with a lowercase letter');
  if (!USERNAME.test(value)) return v.add(field, 'INVALID_FORMAT', 'may contain only a-z, 0-9 and underscore');
  if (value.length < 3 || value.length > 64) v.add(field, 'INVALID_LENGTH', 'must be 3 to 64 characters');
}

/** An https URL with a host and no embedded credentials. */
export function httpsUrl(v: Violations, field: string, value: string | undefined | null): void {
  if (value === undefined || value === null || !safeText(v, field, value)) return;
  if (value.length > 2048) return v.add(field, 'TOO_LONG', 'must be at most 2048 characters');
  // The URL parser drops tabs and line breaks and trims controls: what is stored must be what is used.
  if (CONTROL.test(value)) return v.add(field, 'INVALID_URL', 'must not contain control characters');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return v.add(field, 'INVALID_URL', 'must be an absolute https URL');
  }
  if (url.protocol !== 'https:') return v.add(field, 'INVALID_URL', 'must be an https URL');
  if (!url.hostname) return v.add(field, 'INVALID_URL', 'must have a host');
  if (url.username || url.password) v.add(field, 'INVALID_URL', 'must not contain credentials');
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]{2,}$/;

export function email(v: Violations, field: string, value: string | undefined): void {
  if (value === undefined || !safeText(v, field, value)) return;
  if (value.length > 254 || CONTROL.test(value) || !EMAIL.test(value)) v.add(field, 'INVALID_FORMAT', 'must be an e-mail address');
}

/** Page (default 1, at least 1) and limit (default 20, 1 to 100) of a listing. */
export function pageAndLimit(page: number | undefined, limit: number | undefined): { page: number; limit: number } {
  const v = new Violations();
  if (page !== undefined && page < 1) v.add('page', 'OUT_OF_RANGE', 'must be 1 or more');
  if (limit !== undefined && (limit < 1 || limit > 100)) v.add('limit', 'OUT_OF_RANGE', 'must be 1 to 100');
  v.throwIfAny();
  return { page: page ?? 1, limit: limit ?? 20 };
}
