/**
 * The gateway's failures in the service's one error type (as grpc-gateway's
 * DefaultRoutingErrorHandler turns routing failures into status errors): whatever
 * fails — the core, the binding, Fastify's body parsing, the router — becomes an
 * ApiError once, and renderError (envelopes.ts) answers it. Where the status table
 * would give a less precise HTTP status (413, 414, 415), the error carries an
 * explicit httpStatus. Messages never repeat the request's path or body: a path
 * can carry a bot token or a signed URL's grant.
 */
import { ApiError, Code } from '../../src/errors.js';
import type { Surface } from './schema.js';

/** What Fastify throws: an Error with its FST_ERR_* code and an HTTP status. */
interface FrameworkError {
  code?: string;
  statusCode?: number;
}

const invalid = (message: string, httpStatus?: number) =>
  new ApiError(Code.INVALID_ARGUMENT, message, httpStatus === undefined ? {} : { httpStatus });

/** Anything that reached the gateway's error handler, as an ApiError. */
export function apiErrorOf(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const { code, statusCode } = (typeof err === 'object' && err !== null ? err : {}) as FrameworkError;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return invalid('request body is too large', 413);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return unsupportedMediaType();
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return invalid('Content-Length does not match the body');
    case 'FST_ERR_BAD_URL':
      return invalid('the path is not validly percent-encoded');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return invalid('a path parameter is too long', 414);
    default:
      // Fastify's other client errors; anything else is ours, and internal.
      if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) return invalid('malformed request');
      return ApiError.from(err);
  }
}

/** A body that is not JSON: only JSON bodies are understood. */
export function unsupportedMediaType(): ApiError {
  return invalid('Content-Type must be application/json', 415);
}

/** No route for the method and path (grpc-gateway's routing 404). The path is not repeated. */
export function routeNotFound(surface: Surface, method: string): ApiError {
  return new ApiError(Code.NOT_FOUND, surface === 'runtime' ? 'method not found' : `no route for ${method} at this path`);
}

/**
 * A known path asked with a method it does not take (TRACE, OPTIONS, PUT...): 405, with
 * the methods it takes in `Allow` (RFC 9110 15.5.6). The path is not repeated.
 */
export function methodNotAllowed(method: string, allowed: readonly string[]): ApiError {
  return new ApiError(Code.UNIMPLEMENTED, `${method} is not allowed at this path; it takes ${allowed.join(', ')}`, { httpStatus: 405 });
}
