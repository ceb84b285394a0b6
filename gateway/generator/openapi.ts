/** OpenAPI 3.1 document of the routed methods, derived from the same schemas as the route table. */
import { nullableOnWire, type EnumSchema, type FieldSchema, type FieldType, type MessageSchema, type RouteSpec } from '../runtime/schema.js';

/** A field's google.api.field_behavior and (botplatform.v1.constraints), as in buf's JSON image. */
export interface FieldOptions {
  behavior: string[];
  constraints?: {
    minLength?: number; maxLength?: number; pattern?: string;
    /** int64 in the JSON image: a string. */
    minimum?: string | number; maximum?: string | number;
    maxItems?: number;
    minItems?: number;
    allowedValues?: string[];
    conflictsWith?: string;
    maximumSetting?: string;
    nonZero?: boolean;
    parsedMaxLength?: number;
  };
}

interface Input {
  routes: Omit<RouteSpec, 'grpc'>[];
  messages: Record<string, MessageSchema>;
  enums: Record<string, EnumSchema>;
  comments: Record<string, string>;
  /** "Message.field" (proto names) → options. */
  fieldOptions: Record<string, FieldOptions>;
  /** "botplatform.v1.Service/Method" → credential (account_jwt, admin_jwt, bot_token, internal). */
  credentials: Record<string, string>;
}

type Json = Record<string, unknown>;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/**
 * 64-bit integers carry at most +-(2^53-1), what JSON numbers and JavaScript hold
 * exactly; the gateway and the gRPC server refuse anything beyond (INVALID_ARGUMENT).
 */
const INT64_BOUNDS = {
  int64: { minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER },
  uint64: { minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
} as const;
const enumValues = (e: EnumSchema) =>
  Object.keys(e.values)
    .filter((n) => !n.endsWith('_UNSPECIFIED'))
    .map((n) => n.slice(e.prefix.length).toLowerCase());

function typeSchema(type: FieldType, input: Input): Json {
  let s: Json;
  switch (type.kind) {
    case 'enum':
      s = { type: 'string', enum: enumValues(input.enums[type.ref]!) };
      break;
    case 'message':
      s = ref(type.ref);
      break;
    case 'timestamp':
      s = { type: 'string', format: 'date-time' };
      break;
    case 'fieldmask':
      s = { type: 'string', description: 'comma-separated field paths' };
      break;
    case 'map':
      s = { type: 'object', additionalProperties: typeSchema(type.value, input) };
      break;
    default: {
      const t = type.scalar;
      s =
        t === 'string' ? { type: 'string' }
        : t === 'bool' ? { type: 'boolean' }
        : t === 'double' ? { type: 'number' }
        : t === 'bytes' ? { type: 'string', contentEncoding: 'base64' }
        : { type: 'integer', format: t, ...(t === 'int64' || t === 'uint64' ? INT64_BOUNDS[t] : {}) };
    }
  }
  return s;
}

/** JSON Schema keywords of a field's (botplatform.v1.constraints). */
function constraintKeywords(options: FieldOptions | undefined): { value: Json; array: Json } {
  const c = options?.constraints;
  if (!c) return { value: {}, array: {} };
  const value: Json = {};
  if (c.minLength !== undefined) value.minLength = c.minLength;
  if (c.maxLength !== undefined) value.maxLength = c.maxLength;
  if (c.pattern) value.pattern = c.pattern;
  if (c.minimum !== undefined) value.minimum = Number(c.minimum);
  if (c.maximum !== undefined) value.maximum = Number(c.maximum);
  // The deployment's setting: the served document carries its value (gateway/runtime/gateway.ts).
  if (c.maximumSetting) value['x-maximum-setting'] = c.maximumSetting;
  if (c.allowedValues?.length) value.enum = c.allowedValues;
  if (c.nonZero) value.not = { const: 0 };
  // Counted after parsing (parse_mode, entities), as Telegram counts a text: no JSON Schema keyword says it.
  if (c.parsedMaxLength !== undefined) value['x-parsed-max-length'] = c.parsedMaxLength;
  const array: Json = {};
  // JSON Schema's minItems holds only for a property present: a list left out takes the method's default.
  if (c.minItems !== undefined) array.minItems = c.minItems;
  if (c.maxItems !== undefined) array.maxItems = c.maxItems;
  return { value, array };
}

/**
 * A field's schema. Null is a value where the gateway writes it and reads it
 * (nullableOnWire: on the console an unset singular message, timestamp or field mask is
 * null, and so is an unset optional field marked null_when_unset), or where the caller
 * says so (an update's body: null clears).
 */
function fieldSchema(f: FieldSchema, input: Input, owner: string, nullable = nullableOnWire(f)): Json {
  const { value, array } = constraintKeywords(input.fieldOptions[`${owner}.${f.proto}`]);
  let s: Json = { ...typeSchema(f.type, input), ...value };
  if (f.repeated) s = { type: 'array', items: s, ...array };
  if (!nullable) return s;
  if (typeof s.type === 'string') return { ...s, type: [s.type, 'null'], ...(s.enum ? { enum: [...(s.enum as unknown[]), null] } : {}) };
  return { anyOf: [s, { type: 'null' }] };
}

/**
 * Whether an update (a PATCH body) may clear the field with null: the field's proto3
 * default, which null reads as, meets its constraints ("" is no name of 1 to 100
 * characters, so a name cannot be cleared).
 */
function clearable(f: FieldSchema, options: FieldOptions | undefined): boolean {
  // AIP-203: a REQUIRED field an update names must have a value.
  if (options?.behavior.includes('REQUIRED')) return false;
  // null unsets an optional field, and empties a list, a map or a message.
  const c = options?.constraints;
  // A list of at least min_items when given: null (an empty list) does not clear it.
  if (f.repeated && (c?.minItems ?? 0) > 0) return false;
  if (!c || f.optional || f.repeated || f.type.kind !== 'scalar' || f.type.scalar !== 'string') return true;
  if ((c.minLength ?? 0) > 0) return false;
  return !c.pattern || new RegExp(c.pattern, 'u').test('');
}

/** Messages reachable from these roots (the roots and every message their fields hold). */
function reachable(input: Input, roots: string[]): Set<string> {
  const seen = new Set<string>();
  const visit = (name: string) => {
    if (seen.has(name)) return;
    seen.add(name);
    for (const f of input.messages[name]?.fields ?? []) {
      const t = f.type.kind === 'map' ? f.type.value : f.type;
      if (t.kind === 'message') visit(t.ref);
    }
  };
  for (const root of roots) visit(root);
  return seen;
}

/** Messages a request may carry (request types and every message reachable from them). */
const requestMessages = (input: Input) => reachable(input, input.routes.map((r) => r.requestType));
/** Messages the runtime API answers with (its responses and every message reachable from them). */
const runtimeMessages = (input: Input) => reachable(input, input.routes.filter((r) => r.surface === 'runtime').map((r) => r.responseType));

/**
 * Properties every instance has. In a request: the fields marked
 * (google.api.field_behavior) = REQUIRED. In a message only ever sent by the
 * service, also the fields the gateway always writes: repeated fields (empty or
 * not; but a list of messages the runtime API answers is left out when empty, as
 * Telegram leaves out what is absent) and non-optional scalars.
 */
function requiredFields(name: string, fields: FieldSchema[], input: Input, inRequests: boolean, onRuntime: boolean): string[] {
  return fields
    .filter((f) => {
      if (input.fieldOptions[`${name}.${f.proto}`]?.behavior.includes('REQUIRED')) return true;
      if (inRequests) return false;
      if (f.repeated) return !(onRuntime && f.type.kind === 'message');
      return !f.optional && f.type.kind === 'scalar';
    })
    .map((f) => f.json);
}

/**
 * `not: {required: [a, b]}` for each pair of fields that may not be given together
 * ((botplatform.v1.constraints).conflicts_with), among the fields present.
 */
function conflictKeywords(name: string, fields: FieldSchema[], input: Input): Json {
  const byProto = new Map(fields.map((f) => [f.proto, f]));
  const pairs = fields.flatMap((f) => {
    const other = byProto.get(input.fieldOptions[`${name}.${f.proto}`]?.constraints?.conflictsWith ?? '');
    return other ? [{ not: { required: [f.json, other.json] } }] : [];
  });
  if (pairs.length === 0) return {};
  return pairs.length === 1 ? pairs[0]! : { allOf: pairs };
}

/**
 * A message's schema. `update`: the body of an update (AIP-134: the keys present are the
 * mask), whose IMMUTABLE fields are left out, none is required, and null clears a field
 * wherever the field can be cleared.
 */
function messageSchema(name: string, input: Input, inRequests: boolean, onRuntime = false, omit: Set<string> = new Set(), update = false): Json {
  const behaviorOf = (f: FieldSchema) => input.fieldOptions[`${name}.${f.proto}`]?.behavior ?? [];
  const fields = input.messages[name]!.fields.filter((f) => !omit.has(f.proto) && !(update && behaviorOf(f).includes('IMMUTABLE')));
  const required = update ? [] : requiredFields(name, fields, input, inRequests, onRuntime);
  return {
    type: 'object',
    description: input.comments[name] || undefined,
    additionalProperties: false,
    required: required.length ? required : undefined,
    ...(inRequests ? conflictKeywords(name, fields, input) : {}),
    properties: Object.fromEntries(
      fields.map((f) => {
        const behavior = behaviorOf(f);
        // A REQUIRED field of a request has a value: null is not one (the gateway refuses it).
        const nullable = update ? clearable(f, input.fieldOptions[`${name}.${f.proto}`]) : nullableOnWire(f) && !(inRequests && behavior.includes('REQUIRED'));
        return [f.json, {
          ...fieldSchema(f, input, name, nullable),
          readOnly: behavior.includes('OUTPUT_ONLY') || undefined,
          description: input.comments[`${name}.${f.proto}`] || undefined,
        }];
      }),
    ),
  };
}

const CONSOLE_ERROR = {
  type: 'object',
  description: 'Console and admin error body: the gRPC status name, its HTTP code, a message and, for INVALID_ARGUMENT, the bad fields.',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'status', 'message'],
      properties: {
        code: { type: 'integer', description: 'HTTP status code' },
        status: { type: 'string', description: 'gRPC status name, e.g. INVALID_ARGUMENT' },
        message: { type: 'string' },
        details: {
          type: 'array',
          items: {
            type: 'object',
            required: ['field', 'reason'],
            properties: { field: { type: 'string' }, reason: { type: 'string', description: 'e.g. REQUIRED, INVALID_FORMAT, TOO_LONG' } },
          },
        },
      },
    },
  },
};

const RUNTIME_ERROR = {
  type: 'object',
  description: 'Runtime (bot API) error body, as Telegram writes it.',
  required: ['ok', 'error_code', 'description'],
  properties: {
    ok: { type: 'boolean', const: false },
    error_code: { type: 'integer', description: 'HTTP status code' },
    description: { type: 'string' },
    parameters: { type: 'object', properties: { retry_after: { type: 'integer', description: 'seconds to wait before retrying' } } },
  },
};

/** One security scheme per credential; internal is gRPC only and listed for completeness. */
const SECURITY_SCHEMES = {
  accountJwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Account JWT (console API).' },
  adminJwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Account JWT whose roles claim contains "admin" (admin API).' },
  botToken: { type: 'http', scheme: 'bearer', description: "The bot's token, sbot_... (runtime API)." },
  internal: { type: 'http', scheme: 'bearer', description: "The platform's internal credential (INTERNAL_API_TOKEN); InternalService, over gRPC only." },
} as const;
const SCHEME_OF: Record<string, keyof typeof SECURITY_SCHEMES> = {
  account_jwt: 'accountJwt', admin_jwt: 'adminJwt', bot_token: 'botToken', internal: 'internal',
};

const ERROR_DESCRIPTIONS: Record<string, string> = {
  '400': 'Invalid argument: malformed JSON, a wrong type, a value out of range or a missing required field',
  '401': 'No credential, or an invalid, expired or revoked one',
  '403': 'The account JWT has no admin role',
  '404': 'No such resource (or it belongs to someone else), or no such method',
  '409': 'Conflict: the resource is not in a state that allows the call, or it already exists',
  '413': 'The request body is larger than the configured limit',
  '429': 'Rate limit or quota exhausted; retry after the number of seconds in Retry-After',
  default: 'Unexpected error (5xx); the body never carries internals',
};

function errorResponses(surface: string, credential: string | undefined, hasBody: boolean): Json {
  const schema = { $ref: `#/components/schemas/${surface === 'runtime' ? 'RuntimeError' : 'ConsoleError'}` };
  const codes = ['400', '401', ...(credential === 'admin_jwt' ? ['403'] : []), '404', '409', ...(hasBody ? ['413'] : []), '429', 'default'];
  return Object.fromEntries(codes.map((code) => {
    const response: Json = { description: ERROR_DESCRIPTIONS[code], content: { 'application/json': { schema } } };
    if (code === '429') response.headers = { 'Retry-After': { description: 'seconds', schema: { type: 'integer' } } };
    if (code === '401') response.headers = { 'WWW-Authenticate': { schema: { type: 'string' } } };
    return [code, response];
  }));
}

export function buildOpenApi(input: Input): Json {
  const inRequests = requestMessages(input);
  const onRuntime = runtimeMessages(input);
  const paths: Record<string, Json> = {};
  for (const r of input.routes) {
    const openapiPath = r.template.replace(/\{([a-z0-9_.]+)(=\*)?\}/g, '{$1}');
    const req = input.messages[r.requestType]!;
    const pathFields = new Set(r.pathParams.map((p) => p.field[0]!));
    const bodyFields = r.body === '*' ? new Set(req.fields.map((f) => f.proto)) : new Set(r.body ? [r.body] : []);
    const parameters = [
      ...r.pathParams.map((p) => ({ name: p.field.join('.'), in: 'path', required: true, schema: { type: 'string' } })),
      ...req.fields
        .filter((f) => !pathFields.has(f.proto) && !bodyFields.has(f.proto) && f.type.kind !== 'message')
        .map((f) => ({
          name: f.json,
          in: 'query',
          required: input.fieldOptions[`${r.requestType}.${f.proto}`]?.behavior.includes('REQUIRED') ?? false,
          schema: fieldSchema(f, input, r.requestType),
          description: input.comments[`${r.requestType}.${f.proto}`] || undefined,
        })),
    ];
    let requestBody: Json | undefined;
    if (r.body === '*') {
      const schema = messageSchema(r.requestType, input, true, false, pathFields);
      requestBody = { required: Boolean(schema.required), content: { 'application/json': { schema } } };
    } else if (r.body) {
      // A named body field: the body is that field's value, never null. An update's
      // (the request has an update_mask) is a partial message of its own.
      const f = req.fields.find((x) => x.proto === r.body)!;
      const update = f.type.kind === 'message' && !f.repeated && req.fields.some((x) => x.proto === 'update_mask' && x.type.kind === 'fieldmask');
      const schema = update
        ? messageSchema((f.type as { ref: string }).ref, input, true, false, new Set(), true)
        : fieldSchema(f, input, r.requestType, false);
      requestBody = { required: true, content: { 'application/json': { schema } } };
    }
    let result: Json = ref(r.responseType);
    if (r.responseBody) result = fieldSchema(input.messages[r.responseType]!.fields.find((f) => f.proto === r.responseBody)!, input, r.responseType);
    const success = r.surface === 'runtime'
      ? { type: 'object', required: ['ok', 'result'], properties: { ok: { type: 'boolean', const: true }, result } }
      : result;
    const [service, method] = r.rpc.split('/');
    const credential = input.credentials[r.rpc];
    paths[openapiPath] ??= {};
    paths[openapiPath]![r.method.toLowerCase()] = {
      operationId: `${service!.split('.').pop()}_${method}${r.method === 'GET' && r.surface === 'runtime' ? '_get' : ''}`,
      summary: input.comments[r.rpc] || undefined,
      tags: [service!.split('.').pop()],
      security: credential ? [{ [SCHEME_OF[credential]!]: [] }] : [],
      parameters: parameters.length ? parameters : undefined,
      requestBody,
      responses: {
        [String(r.successCode)]: { description: 'Success', content: { 'application/json': { schema: success } } },
        ...errorResponses(r.surface, credential, Boolean(r.body)),
      },
    };
  }
  const schemas = Object.fromEntries(Object.keys(input.messages).sort().map((m) => [m, messageSchema(m, input, inRequests.has(m), onRuntime.has(m))]));
  return {
    openapi: '3.1.0',
    info: {
      title: 'Bot platform API',
      version: 'v1',
      description: 'Console (account JWT), admin (admin JWT) and runtime (bot token) APIs. Generated from proto/.',
    },
    servers: [{ url: '/', description: 'The service that serves this document' }],
    components: {
      securitySchemes: SECURITY_SCHEMES,
      schemas: { ...schemas, ConsoleError: CONSOLE_ERROR, RuntimeError: RUNTIME_ERROR },
    },
    paths,
  };
}
