/**
 * The gateway's one error path, without a server: every failure (the core's, the
 * binding's, Fastify's, the router's) becomes an ApiError once, and one function
 * renders it — status from the one table or the error's override, headers, and the
 * envelope of the surface.
 */
import { describe, expect, it } from 'vitest';
import { renderError, surfaceOfPath } from '../../gateway/runtime/envelopes.js';
import { apiErrorOf, routeNotFound } from '../../gateway/runtime/errors.js';
import { ApiError, Code } from '../../src/errors.js';

const fastifyError = (code: string, statusCode: number) => Object.assign(new Error(`fastify says ${code} for /api/v1/bots/my/sbot_SECRET`), { code, statusCode });

describe('error path: the status table', () => {
  it.each([
    [Code.INVALID_ARGUMENT, 400], [Code.UNAUTHENTICATED, 401], [Code.PERMISSION_DENIED, 403], [Code.NOT_FOUND, 404],
    [Code.UNIMPLEMENTED, 404], [Code.ALREADY_EXISTS, 409], [Code.FAILED_PRECONDITION, 409], [Code.ABORTED, 409],
    [Code.OUT_OF_RANGE, 400], [Code.RESOURCE_EXHAUSTED, 429], [Code.CANCELLED, 499], [Code.UNKNOWN, 500],
    [Code.INTERNAL, 500], [Code.DATA_LOSS, 500], [Code.UNAVAILABLE, 503], [Code.DEADLINE_EXCEEDED, 504],
  ])('code %i is HTTP %i on both surfaces, named in the console body', (code, http) => {
    const err = new ApiError(code, 'm');
    expect(renderError(err, 'console')).toMatchObject({ status: http, body: { error: { code: http, status: Code[code] } } });
    expect(renderError(err, 'runtime')).toMatchObject({ status: http, body: { ok: false, error_code: http } });
  });

  it('an explicit httpStatus overrides the table; the gRPC status name stays', () => {
    const err = new ApiError(Code.INVALID_ARGUMENT, 'request body is too large', { httpStatus: 413 });
    expect(renderError(err, 'console')).toEqual({
      status: 413,
      headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
      body: { error: { code: 413, status: 'INVALID_ARGUMENT', message: 'request body is too large' } },
    });
    expect(renderError(err, 'runtime').body).toEqual({ ok: false, error_code: 413, description: 'Request Entity Too Large: request body is too large' });
  });
});

describe('error path: envelopes and headers', () => {
  it('console: code, status, message and the field violations (field and reason)', () => {
    const r = renderError(ApiError.invalid('username', 'INVALID_FORMAT', 'must start with a lowercase letter'), 'console');
    expect(r.body).toEqual({
      error: {
        code: 400, status: 'INVALID_ARGUMENT', message: 'username: must start with a lowercase letter',
        details: [{ field: 'username', reason: 'INVALID_FORMAT' }],
      },
    });
  });

  it('runtime: Telegram\'s shape, the reason phrase before the message', () => {
    const r = renderError(ApiError.failedPrecondition("can't use getUpdates while a webhook is active"), 'runtime');
    expect(r.body).toEqual({ ok: false, error_code: 409, description: "Conflict: can't use getUpdates while a webhook is active" });
  });

  it('401 carries WWW-Authenticate: Bearer on both surfaces', () => {
    for (const surface of ['console', 'runtime'] as const) {
      expect(renderError(ApiError.unauthenticated('no credential'), surface).headers['www-authenticate']).toBe('Bearer');
    }
    expect(renderError(ApiError.notFound('bot'), 'console').headers['www-authenticate']).toBeUndefined();
  });

  it('a retry hint is Retry-After, and on the runtime surface parameters.retry_after', () => {
    const err = new ApiError(Code.RESOURCE_EXHAUSTED, 'rate limit', { retryAfterSeconds: 3 });
    const runtime = renderError(err, 'runtime');
    expect(runtime.headers['retry-after']).toBe('3');
    expect(runtime.body).toEqual({ ok: false, error_code: 429, description: 'Too Many Requests: retry after 3', parameters: { retry_after: 3 } });
    expect(renderError(err, 'console').headers['retry-after']).toBe('3');
  });

  it('5xx never carry internals; UNAVAILABLE keeps its advice', () => {
    const internal = new ApiError(Code.INTERNAL, 'SELECT * FROM bots failed at db.ts:12', { cause: new Error('x') });
    expect(renderError(internal, 'console').body).toEqual({ error: { code: 500, status: 'INTERNAL', message: 'internal error' } });
    expect(renderError(internal, 'runtime').body).toEqual({ ok: false, error_code: 500, description: 'Internal Server Error: internal error' });
    const unavailable = new ApiError(Code.UNAVAILABLE, 'the service is shutting down; retry the call');
    expect(renderError(unavailable, 'console').body).toMatchObject({ error: { message: 'the service is shutting down; retry the call' } });
  });
});

describe('error path: failures that are not ApiErrors yet', () => {
  it('an ApiError stays itself', () => {
    const err = ApiError.notFound('bot');
    expect(apiErrorOf(err)).toBe(err);
  });

  it.each([
    ['FST_ERR_CTP_BODY_TOO_LARGE', 413, 413],
    ['FST_ERR_CTP_INVALID_MEDIA_TYPE', 415, 415],
    ['FST_ERR_CTP_INVALID_CONTENT_LENGTH', 400, 400],
    ['FST_ERR_BAD_URL', 400, 400],
    ['FST_ERR_MAX_PARAM_LENGTH', 414, 414],
    ['FST_ERR_SOMETHING_NEW', 431, 400],
  ])('Fastify\'s %s (%i) is INVALID_ARGUMENT, HTTP %i, without Fastify\'s message', (code, statusCode, http) => {
    const err = apiErrorOf(fastifyError(code, statusCode));
    expect(err.code).toBe(Code.INVALID_ARGUMENT);
    const { status, body } = renderError(err, 'console');
    expect(status).toBe(http);
    expect(JSON.stringify(body)).not.toContain('SECRET');
    expect(JSON.stringify(body)).not.toContain('fastify says');
  });

  it('the 415 names what is understood', () => {
    expect(apiErrorOf(fastifyError('FST_ERR_CTP_INVALID_MEDIA_TYPE', 415)).message).toBe('Content-Type must be application/json');
  });

  it('anything else is INTERNAL with a bland message, the cause kept for the log', () => {
    const boom = new TypeError('cannot read properties of undefined (reading "token")');
    const err = apiErrorOf(boom);
    expect(err.code).toBe(Code.INTERNAL);
    expect(err.internalCause).toBe(boom);
    expect(renderError(err, 'console')).toMatchObject({ status: 500, body: { error: { message: 'internal error' } } });
    expect(apiErrorOf(Object.assign(new Error('x'), { statusCode: 502 })).code).toBe(Code.INTERNAL);
    expect(apiErrorOf('a string').code).toBe(Code.INTERNAL);
  });

  it('an unknown route is NOT_FOUND that does not repeat the path', () => {
    expect(renderError(routeNotFound('runtime', 'POST'), 'runtime').body).toEqual({ ok: false, error_code: 404, description: 'Not Found: method not found' });
    expect(renderError(routeNotFound('console', 'GET'), 'console').body).toEqual({ error: { code: 404, status: 'NOT_FOUND', message: 'no route for GET at this path' } });
  });
});

describe('error path: the surface of an unrouted path', () => {
  it.each([
    ['/api/v1/bots/getMe', 'runtime'],
    ['/api/v1/bots/sendSmokeSignal?x=1', 'runtime'],
    ['/api/v1/bots/files/upload-credentials', 'runtime'],
    ['/api/v1/files/download/anything', 'runtime'],
    ['/botsbot_x/getMe', 'runtime'],
    ['/bot123:sbot_x/sendMessage?chat_id=1', 'runtime'],
    ['/file/botsbot_x/some-file', 'runtime'],
    ['/files/bot', 'console'],
    ['/api/v1/bots/my', 'console'],
    ['/api/v1/bots/my/x/y', 'console'],
    ['/api/v1/bots/my?page=2', 'console'],
    ['/api/v1/bots/applications', 'console'],
    ['/api/v1/bots/', 'console'],
    ['/api/v1/admin/bots', 'console'],
    ['/elsewhere', 'console'],
  ])('%s is %s', (path, surface) => {
    expect(surfaceOfPath(path)).toBe(surface);
  });
});
