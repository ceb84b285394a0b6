/**
 * The shapes of the generated route table (gateway/generated/routes.ts). The
 * generator writes them from the protos' descriptors; the runtime only reads them.
 */

export type ScalarType = 'string' | 'bool' | 'int32' | 'uint32' | 'int64' | 'uint64' | 'double' | 'bytes';

export type FieldType =
  | { kind: 'scalar'; scalar: ScalarType }
  | { kind: 'enum'; ref: string }
  | { kind: 'message'; ref: string }
  /** google.protobuf.Timestamp: an RFC 3339 string on the wire, a Date in TypeScript. */
  | { kind: 'timestamp' }
  /** google.protobuf.FieldMask: "a,b.c" on the wire, string[] in TypeScript. */
  | { kind: 'fieldmask' }
  /** map<K, V>: a JSON object (keys are strings on the wire), a plain object in TypeScript. */
  | { kind: 'map'; key: ScalarType; value: FieldType };

export interface FieldSchema {
  /** Name in the .proto file (snake_case). */
  proto: string;
  /** Name on the JSON wire (json_name). */
  json: string;
  /** Property name of the ts-proto generated interface. */
  ts: string;
  type: FieldType;
  repeated: boolean;
  /** proto3 `optional`: presence is tracked, unset is undefined. */
  optional: boolean;
  /** (botplatform.v1.null_when_unset): an unset optional field is null on the console, not left out. */
  nullWhenUnset?: boolean;
  /** (google.api.field_behavior) = REQUIRED: a request's JSON must give it (not null). */
  required?: boolean;
  /**
   * (botplatform.v1.constraints).min_items of a repeated field: a request's JSON that gives
   * the list gives at least this many entries (a list left out takes the method's default;
   * gRPC, without presence, cannot tell the two apart). `values`: its allowed_values, named
   * in the refusal.
   */
  minItems?: { count: number; values?: readonly string[] };
}

/**
 * Whether null is a value of the field on the wire: an unset singular message, timestamp
 * or field mask (written null on the console), or an optional field marked
 * null_when_unset. The OpenAPI document says so, and a request may send null there (it
 * reads as unset); elsewhere a request's null is a wrong type.
 */
export function nullableOnWire(f: FieldSchema): boolean {
  if (f.repeated) return false;
  if (f.optional) return Boolean(f.nullWhenUnset);
  return f.type.kind === 'message' || f.type.kind === 'timestamp' || f.type.kind === 'fieldmask';
}

export interface MessageSchema {
  fields: FieldSchema[];
}

export interface EnumSchema {
  /** Common prefix stripped on the wire: REVIEW_STATUS_PENDING is "pending". */
  prefix: string;
  values: Record<string, number>;
}

export type Surface = 'console' | 'runtime';
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** The parts of a grpc-js method definition the gRPC invoker needs (ts-proto's Service objects). */
export interface GrpcMethod {
  path: string;
  requestSerialize(value: never): Buffer;
  responseDeserialize(value: Buffer): unknown;
}

export interface RouteSpec {
  /** "botplatform.v1.ConsoleService/CreateApplication". */
  rpc: string;
  method: HttpMethod;
  /** Path template as written in the proto, e.g. /api/v1/bots/my/{id}. */
  template: string;
  /** Same path in Fastify's syntax, e.g. /api/v1/bots/my/:id. */
  fastifyPath: string;
  /** Path parameter name in the Fastify path → field path (proto names) in the request. */
  pathParams: { param: string; field: string[] }[];
  /** "*" (whole body), a top-level request field (proto name), or null (no body). */
  body: string | null;
  /** Top-level response field (proto name) sent as the result, or null for the whole response. */
  responseBody: string | null;
  successCode: number;
  surface: Surface;
  requestType: string;
  responseType: string;
  grpc: GrpcMethod;
}

export interface RouteTable {
  routes: RouteSpec[];
  messages: Record<string, MessageSchema>;
  enums: Record<string, EnumSchema>;
}
