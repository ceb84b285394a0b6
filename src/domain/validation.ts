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
  if (value === undefined || value === null) return;
  if (charLength(value) > max) v.add(field, 'TOO_LONG', `must be at most ${max} characters`);
  else if (opts.singleLine && CONTROL.test(value)) v.add(field, 'INVALID_FORMAT', 'must not contain control characters');
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
  if (value === undefined || value === null) return;
  if (value.length > 2048) return v.add(field, 'TOO_LONG', 'must be at most 2048 characters');
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
  if (value === undefined) return;
  if (value.length > 254 || !EMAIL.test(value)) v.add(field, 'INVALID_FORMAT', 'must be an e-mail address');
}

/** Page (default 1, at least 1) and limit (default 20, 1 to 100) of a listing. */
export function pageAndLimit(page: number | undefined, limit: number | undefined): { page: number; limit: number } {
  const v = new Violations();
  if (page !== undefined && page < 1) v.add('page', 'OUT_OF_RANGE', 'must be 1 or more');
  if (limit !== undefined && (limit < 1 || limit > 100)) v.add('limit', 'OUT_OF_RANGE', 'must be 1 to 100');
  v.throwIfAny();
  return { page: page ?? 1, limit: limit ?? 20 };
}
