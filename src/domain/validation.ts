/**
 * Request validation: each rule adds a field violation; a request with any is
 * refused once, with every violation listed. The limits (lengths, patterns,
 * ranges, counts) are not written here: callers pass the field's constraints
 * from src/gen/constraints.ts, generated from the (botplatform.v1.constraints)
 * the protos declare (and the OpenAPI document publishes); what no constraint
 * can say (unpaired surrogates, https URLs) is checked here.
 */
import { ApiError, Code, type FieldViolation } from '../errors.js';

/** Length limits of a text field, from its (botplatform.v1.constraints). */
interface MaxLength { readonly maxLength: number }
interface Lengths extends MaxLength { readonly minLength: number }
interface Patterned extends Lengths { readonly pattern: RegExp }
/** A text's declared limits: its length, and the pattern of the characters it may hold, when it declares one. */
interface TextLimits extends MaxLength { readonly pattern?: RegExp }
interface Range { readonly minimum?: number; readonly maximum?: number }

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

/**
 * A required text of 1..maxLength characters, not blank (JavaScript's trim() leaves
 * something), of the characters its declared pattern allows (a single line: no control
 * characters).
 */
export function requiredText(v: Violations, field: string, value: string | undefined, limits: MaxLength & { readonly pattern: RegExp }): void {
  if (value === undefined || value.trim() === '') v.add(field, 'REQUIRED', 'is required');
  else optionalText(v, field, value, limits);
}

/** An optional text of at most max characters, of the characters its declared pattern allows. */
export function optionalText(v: Violations, field: string, value: string | undefined | null, limits: TextLimits): void {
  if (value === undefined || value === null || !safeText(v, field, value)) return;
  if (charLength(value) > limits.maxLength) v.add(field, 'TOO_LONG', `must be at most ${limits.maxLength} characters`);
  else if (limits.pattern && !limits.pattern.test(value)) v.add(field, 'INVALID_FORMAT', 'must not contain control characters');
}

/** A required message text of minLength..maxLength characters; line breaks are allowed (its pattern refuses only NUL). */
export function messageText(v: Violations, field: string, value: string | undefined, limits: Lengths & { readonly pattern?: RegExp }): void {
  if (!value) return v.add(field, 'REQUIRED', 'is required');
  if (!safeText(v, field, value)) return;
  const length = charLength(value);
  if (length < limits.minLength || length > limits.maxLength) {
    v.add(field, length > limits.maxLength ? 'TOO_LONG' : 'TOO_SHORT', `must be ${limits.minLength} to ${limits.maxLength} characters`);
  } else if (limits.pattern && !limits.pattern.test(value)) v.add(field, 'INVALID_CHARACTERS', 'must not contain NUL characters');
}

/**
 * A single-token value (an identifier, a secret, a hex digest): minLength..maxLength
 * characters, all matching the pattern. `what` tells the characters, e.g. "of a-z,
 * 0-9 and underscore"; the description reads "must be 1 to 32 of a-z, ...".
 */
export function token(v: Violations, field: string, value: string, limits: Patterned, what: string): boolean {
  const length = charLength(value);
  if (length >= limits.minLength && length <= limits.maxLength && limits.pattern.test(value)) return true;
  const count = limits.minLength === limits.maxLength ? `${limits.maxLength}` : `${limits.minLength} to ${limits.maxLength}`;
  v.add(field, 'INVALID_FORMAT', `must be ${count} ${what}`);
  return false;
}

/** The description of a range: "must be 1 to 100", "must be 1 or more", "must be at most 50". */
export function rangeText(limits: Range): string {
  const { minimum: min, maximum: max } = limits;
  if (min !== undefined && max !== undefined) return `must be ${min} to ${max}`;
  return min !== undefined ? `must be ${min} or more` : `must be at most ${max}`;
}

/** A number within its range, when given. */
export function inRange(v: Violations, field: string, value: number | undefined | null, limits: Range, description = rangeText(limits)): void {
  if (value === undefined || value === null) return;
  if ((limits.minimum !== undefined && value < limits.minimum) || (limits.maximum !== undefined && value > limits.maximum)) {
    v.add(field, 'OUT_OF_RANGE', description);
  }
}

/** A list of at most maxItems entries. */
export function maxItems(v: Violations, field: string, list: readonly unknown[], limits: { readonly maxItems: number }, noun = 'entries'): void {
  if (list.length > limits.maxItems) v.add(field, 'TOO_MANY', `must have at most ${limits.maxItems} ${noun}`);
}

/**
 * A plain file name of 1..maxLength characters, displayed as it reads. Its declared
 * pattern refuses, besides NUL: path separators, C0 and C1 controls and DEL, line and
 * paragraph separators, the bidirectional controls (embeddings, overrides, isolates,
 * LRM/RLM/ALM) that let "invoice\u202Egpj.exe" display as "invoiceexe.jpg", and the
 * names "." and "..".
 */
export function fileName(v: Violations, field: string, value: string, limits: MaxLength & { readonly pattern: RegExp }): void {
  if (!value) return v.add(field, 'REQUIRED', 'is required');
  if (!safeText(v, field, value)) return;
  if (charLength(value) > limits.maxLength) return v.add(field, 'TOO_LONG', `must be at most ${limits.maxLength} characters`);
  if (!limits.pattern.test(value)) {
    v.add(field, 'INVALID_FORMAT', 'must be a plain file name, without path separators, control characters or bidirectional controls');
  }
}

/** A bot username: the pattern (a lowercase letter, then a-z, 0-9 and underscore) and its length. */
export function username(v: Violations, field: string, value: string | undefined, limits: Patterned): void {
  if (value === undefined || value === '') return v.add(field, 'REQUIRED', 'is required');
  if (!/^[a-z]/.test(value)) return v.add(field, 'INVALID_FORMAT', 'must start with a lowercase letter');
  if (!limits.pattern.test(value)) return v.add(field, 'INVALID_FORMAT', 'may contain only a-z, 0-9 and underscore');
  const length = charLength(value);
  if (length < limits.minLength || length > limits.maxLength) {
    v.add(field, 'INVALID_LENGTH', `must be ${limits.minLength} to ${limits.maxLength} characters`);
  }
}

/** An https URL with a host and no embedded credentials. */
export function httpsUrl(v: Violations, field: string, value: string | undefined | null, limits: MaxLength): void {
  if (value === undefined || value === null || !safeText(v, field, value)) return;
  if (charLength(value) > limits.maxLength) return v.add(field, 'TOO_LONG', `must be at most ${limits.maxLength} characters`);
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

export function email(v: Violations, field: string, value: string | undefined, limits: MaxLength & { readonly pattern: RegExp }): void {
  if (value === undefined || !safeText(v, field, value)) return;
  if (charLength(value) > limits.maxLength || CONTROL.test(value) || !limits.pattern.test(value)) {
    v.add(field, 'INVALID_FORMAT', 'must be an e-mail address');
  }
}

/** Page (default 1) and limit (default 20) of a listing, within their ranges. */
export function pageAndLimit(
  page: number | undefined,
  limit: number | undefined,
  limits: { page: Range; limit: Range },
): { page: number; limit: number } {
  const v = new Violations();
  inRange(v, 'page', page, limits.page);
  inRange(v, 'limit', limit, limits.limit);
  v.throwIfAny();
  return { page: page ?? 1, limit: limit ?? 20 };
}
