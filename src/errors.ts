/**
 * The one error type of the service. Every failure that reaches a caller is an
 * ApiError: a gRPC status code, a message safe to show, optional field violations
 * and a retry hint. The cause is kept for logs and never sent.
 */

/** gRPC status codes (google.rpc.Code). */
export enum Code {
  OK = 0,
  CANCELLED = 1,
  UNKNOWN = 2,
  INVALID_ARGUMENT = 3,
  DEADLINE_EXCEEDED = 4,
  NOT_FOUND = 5,
  ALREADY_EXISTS = 6,
  PERMISSION_DENIED = 7,
  RESOURCE_EXHAUSTED = 8,
  FAILED_PRECONDITION = 9,
  ABORTED = 10,
  OUT_OF_RANGE = 11,
  UNIMPLEMENTED = 12,
  INTERNAL = 13,
  UNAVAILABLE = 14,
  DATA_LOSS = 15,
  UNAUTHENTICATED = 16,
}

/** One bad field of a request (google.rpc.BadRequest.FieldViolation). */
export interface FieldViolation {
  /** Path of the field as it is spelled on the JSON wire, e.g. "links[0].url". */
  field: string;
  /** Machine-readable reason, e.g. "REQUIRED", "INVALID_FORMAT", "TOO_LONG". */
  reason: string;
  /** Human-readable explanation. */
  description: string;
}

/** The domain of every ApiError's reason (google.rpc.ErrorInfo.domain). */
export const ERROR_DOMAIN = 'botplatform.dev';

export interface ApiErrorOptions {
  details?: FieldViolation[];
  /**
   * Machine-readable cause in UPPER_SNAKE_CASE (google.rpc.ErrorInfo.reason), unique
   * within ERROR_DOMAIN. Defaults to the status code's name, e.g. "NOT_FOUND".
   */
  reason?: string;
  /** Facts about the failure for programs (google.rpc.ErrorInfo.metadata); never secrets. */
  metadata?: Record<string, string>;
  /** Seconds after which the call may succeed (RESOURCE_EXHAUSTED). */
  retryAfterSeconds?: number;
  /**
   * The HTTP status the gateway answers instead of the status table's, for the few
   * HTTP-only failures whose gRPC code maps to a less precise status (a body too
   * large is INVALID_ARGUMENT but 413). Ignored over gRPC.
   */
  httpStatus?: number;
  cause?: unknown;
}

/** The field of a single violation and the retry hint, as ErrorInfo metadata. */
function defaultMetadata(details: FieldViolation[], retryAfterSeconds: number | undefined): Record<string, string> {
  const metadata: Record<string, string> = {};
  if (details.length === 1) metadata.field = details[0]!.field;
  if (retryAfterSeconds !== undefined) metadata.retry_after_seconds = String(retryAfterSeconds);
  return metadata;
}

export class ApiError extends Error {
  readonly code: Code;
  readonly details: FieldViolation[];
  readonly retryAfterSeconds?: number;
  /** UPPER_SNAKE_CASE cause within ERROR_DOMAIN (google.rpc.ErrorInfo.reason). */
  readonly reason: string;
  /** google.rpc.ErrorInfo.metadata. */
  readonly metadata: Record<string, string>;
  /** HTTP status override for the gateway (see ApiErrorOptions.httpStatus). */
  readonly httpStatus?: number;
  /** Logged, never sent. */
  readonly internalCause?: unknown;

  constructor(code: Code, message: string, options: ApiErrorOptions = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.details = options.details ?? [];
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.reason = options.reason ?? Code[code] ?? 'UNKNOWN';
    this.metadata = options.metadata ?? defaultMetadata(this.details, options.retryAfterSeconds);
    this.httpStatus = options.httpStatus;
    this.internalCause = options.cause;
  }

  /** Normalises anything thrown into an ApiError; unknown failures become INTERNAL with a bland message. */
  static from(err: unknown): ApiError {
    if (err instanceof ApiError) return err;
    return new ApiError(Code.INTERNAL, 'internal error', { cause: err });
  }

  /** A single bad field: INVALID_ARGUMENT with one violation; the message names the field. */
  static invalid(field: string, reason: string, description: string): ApiError {
    return new ApiError(Code.INVALID_ARGUMENT, `${field}: ${description}`, {
      details: [{ field, reason, description }],
    });
  }

  static notFound(what: string): ApiError {
    return new ApiError(Code.NOT_FOUND, `${what} not found`);
  }

  static unauthenticated(message: string): ApiError {
    return new ApiError(Code.UNAUTHENTICATED, message);
  }

  static failedPrecondition(message: string): ApiError {
    return new ApiError(Code.FAILED_PRECONDITION, message);
  }
}
