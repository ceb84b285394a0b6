/**
 * The HTTP transport of the clients: builds the request from a generated method
 * binding (path parameters, query string or JSON body), sends it with fetch, and
 * unwraps the runtime envelope or the console resource.
 */
import { BotPlatformError } from './errors.js';
import type { MethodBinding } from './generated/api.js';

export interface TransportOptions {
  /** Where the service is, e.g. "http://127.0.0.1:8080" (paths start with /api/v1). */
  baseUrl: string;
  /** Bot token (runtime) or account JWT (console, admin). */
  credential: string;
  /** fetch to use; the global one by default. */
  fetch?: typeof fetch;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

export interface CallOptions {
  /** Aborts the call; the promise then rejects with the signal's reason (an AbortError). */
  signal?: AbortSignal;
}

type Json = Record<string, unknown>;

/** Calls one method; `surface` decides how the answer is unwrapped. */
export async function invoke(
  t: TransportOptions,
  surface: 'runtime' | 'console',
  name: string,
  binding: MethodBinding,
  request: Json | undefined,
  options: CallOptions = {},
): Promise<unknown> {
  const req: Json = { ...(request ?? {}) };
  let path = binding.path;
  for (const p of binding.pathParams) {
    const v = req[p];
    if (v === undefined || v === null || v === '') throw new TypeError(`${name}: ${p} is required`);
    path = path.replace(`{${p}}`, encodeURIComponent(String(v)));
    delete req[p];
  }
  let body: unknown;
  if (binding.body === '*') {
    body = req;
  } else if (binding.body) {
    body = req[binding.body] ?? {};
    delete req[binding.body];
  }
  const query = new URLSearchParams();
  if (binding.body !== '*') {
    for (const [k, v] of Object.entries(req)) {
      if (v === undefined || v === null) continue;
      for (const item of Array.isArray(v) ? v : [v]) query.append(k, String(item));
    }
  }
  const qs = query.toString();
  const url = t.baseUrl.replace(/\/+$/, '') + path + (qs ? `?${qs}` : '');
  const headers: Record<string, string> = { accept: 'application/json', ...t.headers, authorization: `Bearer ${t.credential}` };
  if (body !== undefined) headers['content-type'] = 'application/json';

  let res: Response;
  let text: string;
  try {
    res = await (t.fetch ?? fetch)(url, {
      method: binding.httpMethod,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: options.signal,
    });
    text = await res.text();
  } catch (err) {
    if (options.signal?.aborted) throw options.signal.reason ?? err;
    throw BotPlatformError.from(err, name);
  }
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) throw BotPlatformError.fromResponse(res.status, parsed, res.headers, name);
  if (surface === 'runtime') {
    const envelope = parsed as { ok?: unknown; result?: unknown } | undefined;
    if (!envelope || envelope.ok !== true) {
      throw new BotPlatformError({ httpStatus: res.status, code: 'UNKNOWN', message: 'answer is not a runtime envelope', method: name });
    }
    return envelope.result;
  }
  return parsed;
}

/** Method signature from its generated types: the request may be left out when no field is required. */
export interface MethodShape {
  request: unknown;
  result: unknown;
  optionalRequest: boolean;
}

export type MethodOf<T extends MethodShape> =
  T['optionalRequest'] extends true
    ? (request?: T['request'], options?: CallOptions) => Promise<T['result']>
    : (request: T['request'], options?: CallOptions) => Promise<T['result']>;

export type ClientOf<Types extends { [K in keyof Types]: MethodShape }> = {
  readonly [K in keyof Types]: MethodOf<Types[K]>;
};

/** One function per generated binding. */
export function buildMethods<Types extends { [K in keyof Types]: MethodShape }>(
  t: TransportOptions,
  surface: 'runtime' | 'console',
  bindings: Record<string, MethodBinding>,
): ClientOf<Types> {
  const out: Record<string, unknown> = {};
  for (const [name, binding] of Object.entries(bindings)) {
    out[name] = (request?: Json, options?: CallOptions) => invoke(t, surface, name, binding, request, options);
  }
  return out as ClientOf<Types>;
}
