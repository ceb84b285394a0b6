/** OpenAPI 3.1 document of the routed methods, derived from the same schemas as the route table. */
import type { EnumSchema, FieldSchema, FieldType, MessageSchema, RouteSpec } from '../runtime/schema.js';

/** A field's google.api.field_behavior and (botplatform.v1.constraints), as in buf's JSON image. */
export interface FieldOptions {
  behavior: string[];
  constraints?: {
    minLength?: number; maxLength?: number; pattern?: string;
    /** int64 in the JSON image: a string. */
    minimum?: string | number; maximum?: string | number;
    maxItems?: number;
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
  return { value, array: c.maxItems !== undefined ? { maxItems: c.maxItems } : {} };
}

/**
 * Whether the gateway may write null for the field: on the console an unset
 * singular message, timestamp or field mask is null, and so is an unset optional
 * field marked null_when_unset (the runtime API leaves both out).
 */
function mayBeNull(f: FieldSchema): boolean {
  if (f.repeated) return false;
  if (f.optional) return Boolean(f.nullWhenUnset);
  return f.type.kind === 'message' || f.type.kind === 'timestamp' || f.type.kind === 'fieldmask';
}

function fieldSchema(f: FieldSchema, input: Input, owner: string): Json {
  const { value, array } = constraintKeywords(input.fieldOptions[`${owner}.${f.proto}`]);
  const s = { ...typeSchema(f.type, input), ...value };
  if (f.repeated) return { type: 'array', items: s, ...array };
  if (!mayBeNull(f)) return s;
  if (typeof s.type === 'string') return { ...s, type: [s.type, 'null'] };
  return { anyOf: [s, { type: 'null' }] };
}

/** Messages a request may carry (request types and every message reachable from them). */
function requestMessages(input: Input): Set<string> {
  const seen = new Set<string>();
  const visit = (name: string) => {
    if (seen.has(name)) return;
    seen.add(name);
    for (const f of input.messages[name]?.fields ?? []) {
      const t = f.type.kind === 'map' ? f.type.value : f.type;
      if (t.kind === 'message') visit(t.ref);
    }
  };
  for (const r of input.routes) visit(r.requestType);
  return seen;
}

/**
 * Properties every instance has. In a request: the fields marked
 * (google.api.field_behavior) = REQUIRED. In a message only ever sent by the
 * service, also the fields the gateway always writes: repeated fields (empty or
 * not) and non-optional scalars.
 */
function requiredFields(name: string, fields: FieldSchema[], input: Input, inRequests: boolean): string[] {
  return fields
    .filter((f) => {
      if (input.fieldOptions[`${name}.${f.proto}`]?.behavior.includes('REQUIRED')) return true;
      if (inRequests) return false;
      return f.repeated || (!f.optional && f.type.kind === 'scalar');
    })
    .map((f) => f.json);
}

function messageSchema(name: string, input: Input, inRequests: boolean, omit: Set<string> = new Set()): Json {
  const fields = input.messages[name]!.fields.filter((f) => !omit.has(f.proto));
  const required = requiredFields(name, fields, input, inRequests);
  return {
    type: 'object',
    description: input.comments[name] || undefined,
    additionalProperties: false,
    required: required.length ? required : undefined,
    properties: Object.fromEntries(
      fields.map((f) => {
        const behavior = input.fieldOptions[`${name}.${f.proto}`]?.behavior ?? [];
        return [f.json, {
          ...fieldSchema(f, input, name),
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
      const schema = messageSchema(r.requestType, input, true, pathFields);
      requestBody = { required: Boolean(schema.required), content: { 'application/json': { schema } } };
    } else if (r.body) {
      const f = req.fields.find((x) => x.proto === r.body)!;
      requestBody = { required: true, content: { 'application/json': { schema: fieldSchema(f, input, r.requestType) } } };
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
  const schemas = Object.fromEntries(Object.keys(input.messages).sort().map((m) => [m, messageSchema(m, input, inRequests.has(m))]));
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
