/**
 * The request message of a route from the three parts of an HTTP request (the
 * google.api.http binding): path parameters, query parameters and the JSON body,
 * plus the update mask a PATCH implies. Pure: no Fastify, no I/O; every bad input
 * is an ApiError naming the field.
 */
import { ApiError } from '../../src/errors.js';
import type { Codec } from './codec.js';
import type { RouteSpec } from './schema.js';

/** The parts of an HTTP request the binding reads (as Fastify parses them). */
export interface HttpRequestParts {
  /** Parsed JSON body; undefined when there was none. */
  body: unknown;
  query: Record<string, string | string[]>;
  /** Fastify path parameters (by RouteSpec.pathParams[].param). */
  params: Record<string, string>;
}

type Obj = Record<string, unknown>;
type BindingSpec = Pick<RouteSpec, 'requestType' | 'body' | 'pathParams'>;

const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The one JSON body parser of both surfaces (Fastify's content-type parser for
 * application/json, read as a string): an empty body is no body (undefined); anything
 * else must be one JSON document (whitespace alone is none: malformed), else a 400 in
 * the route's envelope.
 */
export function parseJsonBody(_request: unknown, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void {
  const text = String(body);
  if (text === '') return done(null, undefined);
  try {
    done(null, JSON.parse(text));
  } catch {
    done(ApiError.invalid('body', 'MALFORMED_JSON', 'is not valid JSON'), undefined);
  }
}

/** A route's top-level fields given by its path (worked out once per route). */
const pathFieldSets = new WeakMap<BindingSpec, ReadonlySet<string>>();
function pathFieldsOf(spec: BindingSpec): ReadonlySet<string> {
  let set = pathFieldSets.get(spec);
  if (!set) pathFieldSets.set(spec, (set = new Set(spec.pathParams.map((p) => p.field[0]!))));
  return set;
}

/**
 * Builds the request message from path, body and query. The body is read strictly, as
 * the OpenAPI document describes it: its REQUIRED fields given (unless the path or the
 * query gives them), null only where the document allows it; a named body field (an
 * update's) is required.
 */
export function bindRequest(codec: Codec, spec: BindingSpec, { body, query, params }: HttpRequestParts): Obj {
  const message = codec.emptyMessage(spec.requestType);
  if (body !== undefined && spec.body === null) throw ApiError.invalid('body', 'UNEXPECTED_BODY', 'this method takes no body');
  if (body !== undefined && !isObject(body) && spec.body === '*') {
    throw ApiError.invalid('body', 'INVALID_TYPE', 'must be a JSON object');
  }
  // Query parameters bind every field not taken by the path (or by a named body
  // field); a "*" body, read after them, wins where both give a field.
  const pathFields = pathFieldsOf(spec);
  let givenElsewhere: ReadonlySet<string> = pathFields;
  for (const name in query) {
    const raw = query[name]!;
    if (givenElsewhere === pathFields) givenElsewhere = new Set(pathFields);
    const path = codec.fieldPathOf(spec.requestType, name);
    if (!path || pathFields.has(path[0]!) || path[0] === spec.body) {
      throw ApiError.invalid(name, 'UNKNOWN_FIELD', 'is not a known parameter');
    }
    codec.setFromText(spec.requestType, message, path, Array.isArray(raw) ? raw : [raw], name);
    (givenElsewhere as Set<string>).add(path[0]!);
  }
  if (body === undefined && spec.body !== null && spec.body !== '*') throw ApiError.invalid('body', 'REQUIRED', 'is required');
  if (spec.body === '*') {
    codec.decodeMessage(spec.requestType, (body ?? {}) as Obj, '', message, { strict: true, givenElsewhere });
  } else if (spec.body) {
    const field = codec.lookup(spec.requestType).get(spec.body)!;
    if (body !== undefined) message[field.ts] = decodeBodyField(codec, spec, field.proto, body);
  }
  for (const p of spec.pathParams) codec.setFromText(spec.requestType, message, p.field, [params[p.param]!], p.field.join('.'));

  const mask = impliedUpdateMask(codec, spec, body, query);
  if (mask) message[mask.ts] = mask.paths;
  return message;
}

function decodeBodyField(codec: Codec, spec: BindingSpec, proto: string, value: unknown) {
  const f = codec.lookup(spec.requestType).get(proto)!;
  if (f.type.kind === 'message' && !f.repeated) {
    if (!isObject(value)) throw ApiError.invalid('body', 'INVALID_TYPE', 'must be a JSON object');
    // An update's body: null clears a field (the keys present are the mask).
    const update = codec.lookup(spec.requestType).get('update_mask')?.type.kind === 'fieldmask';
    return codec.decodeMessage(f.type.ref, value, '', codec.emptyMessage(f.type.ref), { strict: true, nullClears: update });
  }
  throw ApiError.invalid('body', 'INVALID_TYPE', 'unsupported body binding');
}

/**
 * AIP-134: a PATCH-style binding (a named message body field) of a request with an
 * `update_mask` FieldMask, and no mask in the query, updates the keys present in the
 * body: the mask is their proto names (top level only). undefined when no mask is implied.
 */
export function impliedUpdateMask(
  codec: Codec,
  spec: BindingSpec,
  body: unknown,
  query: Record<string, unknown>,
): { ts: string; paths: string[] } | undefined {
  if (!spec.body || spec.body === '*') return undefined;
  const mask = codec.lookup(spec.requestType).get('update_mask');
  if (mask?.type.kind !== 'fieldmask' || 'update_mask' in query || 'updateMask' in query) return undefined;
  const target = codec.lookup(spec.requestType).get(spec.body)!;
  const keys = isObject(body) ? Object.keys(body) : [];
  const paths = target.type.kind === 'message'
    ? keys.map((k) => codec.lookup((target.type as { ref: string }).ref).get(k)?.proto ?? k)
    : [];
  return { ts: mask.ts, paths };
}
