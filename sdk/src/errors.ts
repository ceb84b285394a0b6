/**
 * One error class for every failed call, whichever surface answered: the runtime's
 * {ok:false, error_code, description, parameters.retry_after} and the console's
 * {error:{code, status, message, details}} both become a BotPlatformError.
 */

/** gRPC status names, as the console's error body spells them (CONTRACT §1). */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED'
  | 'NOT_FOUND'
  | 'UNIMPLEMENTED'
  | 'ALREADY_EXISTS'
  | 'FAILED_PRECONDITION'
  | 'ABORTED'
  | 'RESOURCE_EXHAUSTED'
  | 'CANCELLED'
  | 'DEADLINE_EXCEEDED'
  | 'INTERNAL'
  | 'UNAVAILABLE'
  | 'UNKNOWN';

export interface ErrorDetail {
  field: string;
  reason: string;
}

/** The runtime API names no gRPC status: derive one from the HTTP status. */
const CODE_OF_HTTP: Record<number, ErrorCode> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
  // 409 is FAILED_PRECONDITION (webhook active) or ABORTED (a newer getUpdates); the
  // runtime body does not say which, so the description does.
  409: 'FAILED_PRECONDITION',
  413: 'INVALID_ARGUMENT',
  429: 'RESOURCE_EXHAUSTED',
  499: 'CANCELLED',
  500: 'INTERNAL',
  501: 'UNIMPLEMENTED',
  502: 'UNAVAILABLE',
  503: 'UNAVAILABLE',
  504: 'DEADLINE_EXCEEDED',
};

export interface BotPlatformErrorInit {
  /** HTTP status of the answer; 0 when there was none (connection refused, reset). */
  httpStatus: number;
  code: ErrorCode;
  /** The service's explanation, safe to show. */
  message: string;
  details?: ErrorDetail[];
  /** Seconds to wait before trying again (429). */
  retryAfter?: number;
  /** The method called, "getUpdates" or "createApplication". */
  method?: string;
  cause?: unknown;
}

export class BotPlatformError extends Error {
  override readonly name = 'BotPlatformError';
  readonly httpStatus: number;
  readonly code: ErrorCode;
  readonly details: ErrorDetail[];
  readonly retryAfter: number | undefined;
  readonly method: string | undefined;

  constructor(init: BotPlatformErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.httpStatus = init.httpStatus;
    this.code = init.code;
    this.details = init.details ?? [];
    this.retryAfter = init.retryAfter;
    this.method = init.method;
  }

  /**
   * Reads an error answer of either surface. `body` is the parsed JSON, or
   * undefined when the body was not JSON (a proxy's HTML page, an empty 502).
   */
  static fromResponse(httpStatus: number, body: unknown, headers?: Headers, method?: string): BotPlatformError {
    const retryHeader = headers?.get('retry-after');
    const headerRetry = retryHeader && /^\d+$/.test(retryHeader) ? Number(retryHeader) : undefined;
    const b = body as Record<string, any> | undefined; // eslint-disable-line @typescript-eslint/no-explicit-any
    if (b && typeof b === 'object' && b.ok === false) {
      const retry = typeof b.parameters?.retry_after === 'number' ? b.parameters.retry_after : headerRetry;
      return new BotPlatformError({
        httpStatus,
        code: codeOfHttp(typeof b.error_code === 'number' ? b.error_code : httpStatus),
        message: typeof b.description === 'string' ? b.description : `HTTP ${httpStatus}`,
        retryAfter: retry,
        method,
      });
    }
    if (b && typeof b === 'object' && b.error && typeof b.error === 'object') {
      const e = b.error;
      return new BotPlatformError({
        httpStatus,
        code: typeof e.status === 'string' ? (e.status as ErrorCode) : codeOfHttp(httpStatus),
        message: typeof e.message === 'string' ? e.message : `HTTP ${httpStatus}`,
        details: Array.isArray(e.details) ? e.details : [],
        retryAfter: headerRetry,
        method,
      });
    }
    return new BotPlatformError({ httpStatus, code: codeOfHttp(httpStatus), message: `HTTP ${httpStatus}`, retryAfter: headerRetry, method });
  }

  /** Anything thrown by a call, as a BotPlatformError (an abort is passed through unchanged by the clients). */
  static from(err: unknown, method?: string): BotPlatformError {
    if (err instanceof BotPlatformError) return err;
    return new BotPlatformError({
      httpStatus: 0,
      code: 'UNAVAILABLE',
      message: `request failed: ${err instanceof Error ? err.message : String(err)}`,
      method,
      cause: err,
    });
  }

  /** Whether trying the same call again later may succeed. */
  get retryable(): boolean {
    return this.httpStatus === 0 || this.httpStatus === 429 || this.httpStatus >= 500;
  }
}

function codeOfHttp(status: number): ErrorCode {
  return CODE_OF_HTTP[status] ?? (status >= 500 ? 'INTERNAL' : 'UNKNOWN');
}
