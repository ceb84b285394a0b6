/**
 * The two error bodies of the contract and the runtime success envelope.
 * Console: {"error": {code, status, message, details}}.
 * Runtime: {"ok": false, "error_code", "description", "parameters"?} (Telegram's shape).
 * renderError is the gateway's one way to answer a failure, whatever its origin.
 */
import { Code, type ApiError } from '../../src/errors.js';
import type { Surface } from './schema.js';
import { httpStatusOf, statusNameOf } from './status.js';

/** A failure as the gateway answers it: HTTP status, gRPC status name, safe message. */
interface HttpFailure {
  http: number;
  status: string;
  message: string;
  details?: { field: string; reason: string }[];
  retryAfterSeconds?: number;
}

const REASON_PHRASE: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Request Entity Too Large',
  414: 'URI Too Long',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  499: 'Client Closed Request',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** An error response: status, headers and the surface's envelope. */
export interface RenderedError {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * Any ApiError as the gateway answers it on a surface: the HTTP status from the one
 * status table (or the error's explicit httpStatus), WWW-Authenticate on 401,
 * Retry-After with a retry hint, and the surface's envelope.
 */
export function renderError(err: ApiError, surface: Surface): RenderedError {
  const http = err.httpStatus ?? httpStatusOf(err.code);
  const failure: HttpFailure = {
    http,
    status: statusNameOf(err.code),
    // 5xx never carry internals: the core already replaced them with a bland message. A
    // deadline is not an internal error: it says so, in words of the gateway's own.
    message: err.code === Code.DEADLINE_EXCEEDED
      ? 'the call did not finish in time; retry it'
      : http >= 500 && err.code !== Code.UNAVAILABLE ? 'internal error' : err.message,
    details: err.details.map(({ field, reason }) => ({ field, reason })),
    retryAfterSeconds: err.retryAfterSeconds,
  };
  // An error is never worth keeping in a cache (and on the Telegram surface its URL holds a token).
  const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-store' };
  if (http === 401) headers['www-authenticate'] = 'Bearer';
  if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(err.retryAfterSeconds);
  return { status: http, headers, body: errorBody(surface, failure) };
}

function errorBody(surface: Surface, f: HttpFailure): unknown {
  if (surface === 'runtime') {
    const phrase = REASON_PHRASE[f.http] ?? 'Error';
    const description = f.retryAfterSeconds !== undefined && f.http === 429
      ? `${phrase}: retry after ${f.retryAfterSeconds}`
      : `${phrase}: ${f.message}`;
    return {
      ok: false,
      error_code: f.http,
      description,
      ...(f.retryAfterSeconds !== undefined ? { parameters: { retry_after: f.retryAfterSeconds } } : {}),
    };
  }
  return {
    error: {
      code: f.http,
      status: f.status,
      message: f.message,
      ...(f.details && f.details.length > 0 ? { details: f.details } : {}),
    },
  };
}

export function successBody(surface: Surface, result: unknown): unknown {
  return surface === 'runtime' ? { ok: true, result } : result;
}

/**
 * Which surface an unrouted path belongs to: runtime methods live directly under
 * /api/v1/bots/, and the signed file URLs under /api/v1/files/ and the Telegram surface
 * (/bot<token>/..., /file/bot<token>/...) answer as runtime too.
 */
export function surfaceOfPath(path: string): Surface {
  if (/^\/(?:api\/v1\/files\/|bot|file\/bot)/.test(path)) return 'runtime';
  return /^\/api\/v1\/bots\/(?!my(\/|$|\?)|applications(\/|$|\?))[^?]/.test(path) ? 'runtime' : 'console';
}
