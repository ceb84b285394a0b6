/**
 * Requests that do not decode. ts-proto's decoders throw on broken wire bytes
 * and, generated with forceLong=number, on any 64-bit integer beyond
 * +-(2^53-1), which Go, Java or Python clients may legally send. Thrown from a
 * deserializer, grpc-js would answer INTERNAL before any of our code ran, with
 * nothing logged or counted. Instead the deserializer hands the core an
 * UndecodableRequest, which the core answers INVALID_ARGUMENT like any refused
 * call. To name the field, the bytes are read again (only after a failure)
 * against the request's descriptor: the first field out of range or broken,
 * as a JSON path such as updates[1].message.chat.id; "body" when the bytes are
 * not a message at all.
 */
import fs from 'node:fs';
import { createFileRegistry, fromBinary, ScalarType, type DescField, type DescMessage, type FileRegistry } from '@bufbuild/protobuf';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { ApiError } from '../errors.js';
import { UndecodableRequest } from '../core/core.js';

const DESCRIPTORS = new URL('../gen/descriptors.binpb', import.meta.url);

/** The largest magnitude of an integer the API carries: JavaScript's and JSON's exact integers. */
const MAX = BigInt(Number.MAX_SAFE_INTEGER);
const SIGNED_64 = new Set([ScalarType.INT64, ScalarType.SINT64, ScalarType.SFIXED64]);
const UNSIGNED_64 = new Set([ScalarType.UINT64, ScalarType.FIXED64]);
/** ts-proto refuses deeper messages; so does this walk. */
const MAX_DEPTH = 100;

/** The field a walk stopped at, and why. */
class Violation {
  constructor(readonly field: string, readonly reason: string, readonly description: string) {}
}

const malformed = (field: string, err: unknown) =>
  new Violation(field, 'MALFORMED_PROTOBUF', `is not valid protobuf wire format (${err instanceof Error ? err.message : String(err)})`);

function wireTypeOf(t: ScalarType): WireType {
  switch (t) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return WireType.LengthDelimited;
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WireType.Bit64;
    case ScalarType.FLOAT:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return WireType.Bit32;
    default:
      return WireType.Varint;
  }
}

const READ: Record<ScalarType, (r: BinaryReader) => unknown> = {
  [ScalarType.DOUBLE]: (r) => r.double(),
  [ScalarType.FLOAT]: (r) => r.float(),
  [ScalarType.INT64]: (r) => r.int64(),
  [ScalarType.UINT64]: (r) => r.uint64(),
  [ScalarType.INT32]: (r) => r.int32(),
  [ScalarType.FIXED64]: (r) => r.fixed64(),
  [ScalarType.FIXED32]: (r) => r.fixed32(),
  [ScalarType.BOOL]: (r) => r.bool(),
  [ScalarType.STRING]: (r) => r.string(),
  [ScalarType.BYTES]: (r) => r.bytes(),
  [ScalarType.UINT32]: (r) => r.uint32(),
  [ScalarType.SFIXED32]: (r) => r.sfixed32(),
  [ScalarType.SFIXED64]: (r) => r.sfixed64(),
  [ScalarType.SINT32]: (r) => r.sint32(),
  [ScalarType.SINT64]: (r) => r.sint64(),
};

function readScalar(r: BinaryReader, t: ScalarType, path: string): void {
  const value = READ[t](r);
  const min = SIGNED_64.has(t) ? -MAX : UNSIGNED_64.has(t) ? 0n : undefined;
  if (min === undefined) return;
  const n = BigInt(value as bigint | string);
  if (n < min || n > MAX) throw new Violation(path, 'OUT_OF_RANGE', `must be between ${min} and ${MAX}`);
}

/** Length of a length-delimited value, checked against the bytes there are. */
function lengthOf(r: BinaryReader): number {
  const len = r.uint32();
  if (r.pos + len > r.len) throw new RangeError('premature EOF');
  return len;
}

/** One or more (packed) elements of a repeated scalar, each checked at path[i]. */
function readScalars(r: BinaryReader, t: ScalarType, wire: WireType, path: string, next: () => number): void {
  if (wire === wireTypeOf(t)) {
    readScalar(r, t, `${path}[${next()}]`);
  } else if (wire === WireType.LengthDelimited) {
    const end = r.pos + lengthOf(r);
    while (r.pos < end) readScalar(r, t, `${path}[${next()}]`);
  } else {
    r.skip(wire);
  }
}

function readField(r: BinaryReader, f: DescField, wire: WireType, path: string, depth: number, next: () => number): void {
  switch (f.fieldKind) {
    case 'scalar':
      if (wire === wireTypeOf(f.scalar)) readScalar(r, f.scalar, path);
      else r.skip(wire);
      return;
    case 'enum':
      if (wire === WireType.Varint) r.int32();
      else r.skip(wire);
      return;
    case 'message':
      if (wire === WireType.LengthDelimited) walk(r, f.message, r.pos + lengthOf(r), path, depth + 1);
      else r.skip(wire);
      return;
    case 'list':
      if (f.listKind === 'message') {
        if (wire === WireType.LengthDelimited) walk(r, f.message, r.pos + lengthOf(r), `${path}[${next()}]`, depth + 1);
        else r.skip(wire);
      } else {
        readScalars(r, f.listKind === 'enum' ? ScalarType.INT32 : f.scalar, wire, path, next);
      }
      return;
    case 'map': {
      if (wire !== WireType.LengthDelimited) {
        r.skip(wire);
        return;
      }
      // An entry: key = 1, value = 2; anything wrong in it is the map's.
      const end = r.pos + lengthOf(r);
      while (r.pos < end) {
        const tag = r.uint32();
        const [no, w] = [tag >>> 3, tag & 7];
        if (no === 1 && w === wireTypeOf(f.mapKey)) readScalar(r, f.mapKey, path);
        else if (no === 2 && f.mapKind === 'scalar' && w === wireTypeOf(f.scalar)) readScalar(r, f.scalar, path);
        else if (no === 2 && f.mapKind === 'message' && w === WireType.LengthDelimited) walk(r, f.message, r.pos + lengthOf(r), path, depth + 1);
        else r.skip(w);
      }
    }
  }
}

/**
 * Reads one message the way ts-proto's decode does (a field with an unexpected
 * wire type is skipped; an end-group tag or tag 0 ends the message) and throws
 * a Violation at the first problem. Broken framing between fields is the
 * message's own (`path`); broken bytes inside a field are that field's.
 */
function walk(r: BinaryReader, desc: DescMessage, end: number, path: string, depth: number): void {
  if (depth > MAX_DEPTH) throw new Violation(path, 'MALFORMED_PROTOBUF', `is nested more than ${MAX_DEPTH} deep`);
  const seen = new Map<number, number>();
  try {
    while (r.pos < end) {
      const tag = r.uint32();
      const [no, wire] = [tag >>> 3, (tag & 7) as WireType];
      if (wire === WireType.EndGroup || tag === 0) return;
      const f = desc.fields.find((x) => x.number === no);
      if (!f) {
        r.skip(wire);
        continue;
      }
      const at = path ? `${path}.${f.jsonName}` : f.jsonName;
      const next = () => {
        const i = seen.get(no) ?? 0;
        seen.set(no, i + 1);
        return i;
      };
      try {
        readField(r, f, wire, at, depth, next);
      } catch (err) {
        throw err instanceof Violation ? err : malformed(at, err);
      }
    }
  } catch (err) {
    throw err instanceof Violation ? err : malformed(path || 'body', err);
  }
}

let registry: FileRegistry | undefined;

/** The request type of an RPC path ("/pkg.Service/Method"), from the descriptor set the server reflects. */
function requestTypeOf(path: string): DescMessage | undefined {
  registry ??= createFileRegistry(fromBinary(FileDescriptorSetSchema, fs.readFileSync(DESCRIPTORS)));
  const [, service, method] = path.split('/');
  return registry.getService(service ?? '')?.methods.find((m) => m.name === method)?.input;
}

/** The INVALID_ARGUMENT for request bytes of `path` that failed to decode with `cause`, naming the field. */
export function undecodableRequest(path: string, bytes: Uint8Array, cause: unknown): UndecodableRequest {
  const type = requestTypeOf(path);
  let found: Violation | undefined;
  if (type) {
    try {
      walk(new BinaryReader(bytes), type, bytes.length, '', 0);
    } catch (err) {
      if (err instanceof Violation) found = err;
    }
  }
  // The walk agrees with ts-proto on everything ts-proto refuses; should they ever
  // differ, the request as a whole is named.
  found ??= malformed('body', cause);
  return new UndecodableRequest(ApiError.invalid(found.field, found.reason, found.description), topLevelVarints(bytes));
}

/** The top-level varint fields of message bytes, by number (the last of each), as far as they read. */
function topLevelVarints(bytes: Uint8Array): Map<number, bigint> {
  const out = new Map<number, bigint>();
  const r = new BinaryReader(bytes);
  try {
    while (r.pos < r.len) {
      const [no, wire] = r.tag();
      if (wire === WireType.Varint) out.set(no, BigInt(r.int64()));
      else r.skip(wire);
    }
  } catch {
    // Broken from here on: what was read stands.
  }
  return out;
}
