/**
 * The two error bodies of the contract and the runtime success envelope.
 * Console: {"error": {code, status, message, details}}.
 * Runtime: {"ok": false, "error_code", "description", "parameters"?} (Telegram's shape).
 */
import type { Surface } from './schema.js';

/** A failure as the gateway answers it: HTTP status, gRPC status name, safe message. */
export interface HttpFailure {
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
  409: 'Conflict',
  413: 'Request Entity Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  499: 'Client Closed Request',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

export function errorBody(surface: Surface, f: HttpFailure): unknown {
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

/** Which surface an unrouted path belongs to: runtime methods live directly under /api/v1/bots/. */
export function surfaceOfPath(path: string): Surface {
  return /^\/api\/v1\/bots\/(?!my(\/|$|\?)|applications(\/|$|\?))[^?]/.test(path) ? 'runtime' : 'console';
}
