/** OpenAPI 3.1 document of the routed methods, derived from the same schemas as the route table. */
import type { EnumSchema, FieldSchema, FieldType, MessageSchema, RouteSpec } from '../runtime/schema.js';

interface Input {
  routes: Omit<RouteSpec, 'grpc'>[];
  messages: Record<string, MessageSchema>;
  enums: Record<string, EnumSchema>;
  comments: Record<string, string>;
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

function fieldSchema(f: FieldSchema, input: Input): Json {
  const s = typeSchema(f.type, input);
  if (f.nullWhenUnset && typeof s.type === 'string') return { ...s, type: [s.type, 'null'] };
  return f.repeated ? { type: 'array', items: s } : s;
}

function messageSchema(name: string, input: Input, omit: Set<string> = new Set()): Json {
  const fields = input.messages[name]!.fields.filter((f) => !omit.has(f.proto));
  return {
    type: 'object',
    description: input.comments[name] || undefined,
    additionalProperties: false,
    properties: Object.fromEntries(
      fields.map((f) => [f.json, { ...fieldSchema(f, input), description: input.comments[`${name}.${f.proto}`] || undefined }]),
    ),
  };
}

const CONSOLE_ERROR = {
  type: 'object',
  properties: {
    error: {
      type: 'object',
      properties: {
        code: { type: 'integer' },
        status: { type: 'string' },
        message: { type: 'string' },
        details: { type: 'array', items: { type: 'object', properties: { field: { type: 'string' }, reason: { type: 'string' } } } },
      },
    },
  },
};

const RUNTIME_ERROR = {
  type: 'object',
  properties: {
    ok: { const: false },
    error_code: { type: 'integer' },
    description: { type: 'string' },
    parameters: { type: 'object', properties: { retry_after: { type: 'integer' } } },
  },
};

export function buildOpenApi(input: Input): Json {
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
        .map((f) => ({ name: f.json, in: 'query', required: false, schema: fieldSchema(f, input), description: input.comments[`${r.requestType}.${f.proto}`] || undefined })),
    ];
    let requestBody: Json | undefined;
    if (r.body === '*') {
      requestBody = { required: false, content: { 'application/json': { schema: messageSchema(r.requestType, input, pathFields) } } };
    } else if (r.body) {
      const f = req.fields.find((x) => x.proto === r.body)!;
      requestBody = { required: true, content: { 'application/json': { schema: fieldSchema(f, input) } } };
    }
    let result: Json = ref(r.responseType);
    if (r.responseBody) result = fieldSchema(input.messages[r.responseType]!.fields.find((f) => f.proto === r.responseBody)!, input);
    const success = r.surface === 'runtime'
      ? { type: 'object', properties: { ok: { const: true }, result } }
      : result;
    const [service, method] = r.rpc.split('/');
    paths[openapiPath] ??= {};
    paths[openapiPath]![r.method.toLowerCase()] = {
      operationId: `${service!.split('.').pop()}_${method}${r.method === 'GET' && r.surface === 'runtime' ? '_get' : ''}`,
      summary: input.comments[r.rpc] || undefined,
      tags: [service!.split('.').pop()],
      security: [{ bearer: [] }],
      parameters: parameters.length ? parameters : undefined,
      requestBody,
      responses: {
        [String(r.successCode)]: { description: 'Success', content: { 'application/json': { schema: success } } },
        default: {
          description: 'Error',
          content: { 'application/json': { schema: r.surface === 'runtime' ? RUNTIME_ERROR : CONSOLE_ERROR } },
        },
      },
    };
  }
  const schemas = Object.fromEntries(Object.keys(input.messages).sort().map((m) => [m, messageSchema(m, input)]));
  return {
    openapi: '3.1.0',
    info: {
      title: 'Bot platform API',
      version: 'v1',
      description: 'Console (account JWT), admin (admin JWT) and runtime (bot token) APIs. Generated from proto/.',
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'Account JWT (console, admin) or bot token sbot_... (runtime)' } },
      schemas,
    },
    paths,
  };
}
