/**
 * JSON ⇄ message objects, driven by the generated schemas. Decoding is strict: a
 * wrong type, an unknown field or an out-of-range number is INVALID_ARGUMENT
 * naming the field as it is spelled on the wire. Objects are shaped like the
 * ts-proto interfaces, so they go straight to the core or to the gRPC serializer.
 */
import { ApiError } from '../../src/errors.js';
import { isoTime } from './iso-time.js';
import { nullableOnWire, type EnumSchema, type FieldSchema, type FieldType, type MessageSchema, type RouteTable, type Surface } from './schema.js';

type Obj = Record<string, unknown>;

const INT_RANGE = {
  int32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
} as const;

const bad = (field: string, description: string, reason = 'INVALID_TYPE') => ApiError.invalid(field, reason, description);

/**
 * A list given with fewer entries than its min_items (or cleared by null in an update): the
 * JSON shows it was given, so it is refused rather than read as absent (the default).
 */
function tooFew(field: string, min: { count: number; values?: readonly string[] }): ApiError {
  const what = min.values
    ? `name at least ${min.count === 1 ? 'one' : min.count} of ${min.values.join(', ')}`
    : `have at least ${min.count} ${min.count === 1 ? 'entry' : 'entries'}`;
  return ApiError.invalid(field, 'TOO_FEW', `must ${what}, or be left out`);
}

const UNPAIRED_SURROGATE = /\p{Cs}/u;

const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.\d{1,9})?(?:[Zz]|[+-](\d\d):(\d\d))$/;

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const isLeapYear = (y: number) => y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);

/**
 * An RFC 3339 timestamp as a Date, or undefined: it must carry an offset (without one,
 * Date would read the time in the server's zone) and name a real moment (RFC 3339's
 * day-of-month rules: Date alone rolls 2026-02-30 over to March 2nd and takes 24:00),
 * within google.protobuf.Timestamp's years 0001 to 9999. No leap second (:60), as
 * protojson takes none.
 */
function parseTimestamp(v: string): Date | undefined {
  const m = RFC3339.exec(v);
  if (!m) return undefined;
  type Parts = [number, number, number, number, number, number, number, number];
  const [year, month, day, hour, minute, second, offsetHours, offsetMinutes] = m.slice(1).map((n) => Number(n ?? 0)) as Parts;
  if (month < 1 || month > 12 || day < 1) return undefined;
  if (day > (month === 2 && isLeapYear(year) ? 29 : DAYS_IN_MONTH[month - 1]!)) return undefined;
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return undefined;
  const d = new Date(v);
  const utcYear = d.getUTCFullYear();
  return utcYear >= 1 && utcYear <= 9999 ? d : undefined;
}

const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** "links[0].url" style paths. */
const join = (parent: string, name: string) => (parent ? `${parent}.${name}` : name);

const camelToSnake = (s: string) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * How a JSON object is read. Strict (the HTTP API's bodies, as the OpenAPI document
 * describes them): every REQUIRED field is given and not null, and null is a value only
 * where the document says so (nullableOnWire). Otherwise (the Telegram surface's
 * parameters) an absent field takes its default and null reads as absent, as protojson has it.
 */
export interface DecodeOptions {
  strict?: boolean;
  /** Top-level fields given elsewhere (path and query parameters): not required in the body. */
  givenElsewhere?: ReadonlySet<string>;
  /** The top level of an update's body (AIP-134): null clears any field; the domain refuses what may not be cleared. */
  nullClears?: boolean;
}

export function createCodec(table: Pick<RouteTable, 'messages' | 'enums'>) {
  const lookups = new Map<string, Map<string, FieldSchema>>();
  const lookup = (type: string) => {
    let m = lookups.get(type);
    if (!m) {
      m = new Map();
      for (const f of schemaOf(type).fields) {
        m.set(f.json, f);
        m.set(f.proto, f);
      }
      lookups.set(type, m);
    }
    return m;
  };
  const schemaOf = (type: string): MessageSchema => {
    const s = table.messages[type];
    if (!s) throw new Error(`no schema for ${type}`);
    return s;
  };
  const enumOf = (ref: string): EnumSchema => table.enums[ref]!;
  /** Each enum's number → its wire name ("REVIEW_STATUS_APPROVED" → "approved"); UNSPECIFIED has none. */
  const wireNameMaps = new Map<string, Map<number, string>>();
  const wireNames = (ref: string) => {
    let m = wireNameMaps.get(ref);
    if (!m) {
      const e = enumOf(ref);
      m = new Map();
      for (const [name, n] of Object.entries(e.values)) {
        if (!name.endsWith('_UNSPECIFIED') && !m.has(n)) m.set(n, name.slice(e.prefix.length).toLowerCase());
      }
      wireNameMaps.set(ref, m);
    }
    return m;
  };
  const enumNames = (e: EnumSchema) =>
    Object.keys(e.values).filter((n) => !n.endsWith('_UNSPECIFIED')).map((n) => n.slice(e.prefix.length).toLowerCase());

  /** The proto3 default of a field, as ts-proto represents it. */
  function defaultOf(f: FieldSchema): unknown {
    if (f.repeated) return [];
    if (f.optional) return undefined;
    switch (f.type.kind) {
      case 'scalar':
        return f.type.scalar === 'string' ? '' : f.type.scalar === 'bool' ? false : f.type.scalar === 'bytes' ? new Uint8Array() : 0;
      case 'enum':
        return 0;
      case 'map':
        return {};
      default:
        return undefined;
    }
  }

  function emptyMessage(type: string): Obj {
    const out: Obj = {};
    for (const f of schemaOf(type).fields) out[f.ts] = defaultOf(f);
    return out;
  }

  /** One value from JSON (or, with fromText, from a path or query string). */
  function decodeValue(t: FieldType, v: unknown, field: string, fromText: boolean, strict = false): unknown {
    switch (t.kind) {
      case 'scalar': {
        const s = t.scalar;
        if (s === 'string') {
          if (typeof v !== 'string') throw bad(field, 'must be a string');
          // JSON may spell an unpaired surrogate ("\ud800"); protobuf would carry it on as U+FFFD.
          if (UNPAIRED_SURROGATE.test(v)) throw bad(field, 'must not contain unpaired surrogates', 'INVALID_CHARACTERS');
          return v;
        }
        if (s === 'bool') {
          if (typeof v === 'boolean') return v;
          if (fromText && (v === 'true' || v === 'false')) return v === 'true';
          throw bad(field, 'must be a boolean');
        }
        if (s === 'double') {
          const n = typeof v === 'number' ? v : fromText && typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
          if (!Number.isFinite(n)) throw bad(field, 'must be a number');
          return n;
        }
        if (s === 'bytes') {
          if (typeof v !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(v)) throw bad(field, 'must be base64');
          return new Uint8Array(Buffer.from(v, 'base64'));
        }
        // Integers: JSON numbers, or decimal strings (protojson accepts both; query values are strings).
        let n: number;
        if (typeof v === 'number') n = v;
        else if (typeof v === 'string' && /^-?\d+$/.test(v)) n = Number(v);
        else throw bad(field, 'must be an integer');
        if (!Number.isInteger(n)) throw bad(field, 'must be an integer');
        const [min, max] = INT_RANGE[s];
        if (n < min || n > max) throw bad(field, `must be between ${min} and ${max}`, 'OUT_OF_RANGE');
        return n;
      }
      case 'enum': {
        const e = enumOf(t.ref);
        if (typeof v === 'string') {
          const full = v.startsWith(e.prefix) ? v : e.prefix + v.toUpperCase();
          const n = e.values[full];
          if (n !== undefined && !full.endsWith('_UNSPECIFIED') && /^[a-z0-9_]+$|^[A-Z0-9_]+$/.test(v)) return n;
        } else if (typeof v === 'number' && Object.values(e.values).includes(v)) return v;
        throw bad(field, `must be one of ${enumNames(e).join(', ')}`, 'INVALID_VALUE');
      }
      case 'message':
        if (!isObject(v)) throw bad(field, 'must be an object');
        return decodeMessage(t.ref, v, field, emptyMessage(t.ref), { strict });
      case 'timestamp': {
        const d = typeof v === 'string' ? parseTimestamp(v) : undefined;
        if (!d) throw bad(field, 'must be an RFC 3339 timestamp');
        return d;
      }
      case 'fieldmask':
        if (typeof v !== 'string') throw bad(field, 'must be a comma-separated list of field paths');
        return v.split(',').map((p) => p.trim()).filter(Boolean).map((p) => p.split('.').map(camelToSnake).join('.'));
      case 'map': {
        if (!isObject(v)) throw bad(field, 'must be an object');
        const out: Obj = {};
        for (const [k, item] of Object.entries(v)) {
          decodeValue({ kind: 'scalar', scalar: t.key }, k, `${field}.${k}`, true);
          // Defined, not assigned: a "__proto__" key is a key like any other.
          Object.defineProperty(out, k, { value: decodeValue(t.value, item, `${field}.${k}`, false, strict), enumerable: true, writable: true, configurable: true });
        }
        return out;
      }
    }
  }

  /** One field's value from JSON; null reads as the field's default (strict: where null is a value of the field). */
  function decodeField(f: FieldSchema, v: unknown, field: string, fromText = false, strict = false): unknown {
    if (v === null) {
      if (strict && !nullableOnWire(f)) throw bad(field, 'must not be null');
      return defaultOf(f);
    }
    if (f.repeated) {
      if (!Array.isArray(v)) throw bad(field, 'must be an array');
      return v.map((item, i) => {
        if (item === null) throw bad(`${field}[${i}]`, 'must not be null');
        return decodeValue(f.type, item, `${field}[${i}]`, fromText, strict);
      });
    }
    return decodeValue(f.type, v, field, fromText, strict);
  }

  /** A JSON object → message object; every field not given takes its default. */
  function decodeMessage(type: string, json: Obj, path = '', into: Obj = emptyMessage(type), opts: DecodeOptions = {}): Obj {
    const fields = lookup(type);
    const strict = opts.strict === true;
    for (const [key, value] of Object.entries(json)) {
      const f = fields.get(key);
      if (!f) throw bad(join(path, key), 'is not a known field', 'UNKNOWN_FIELD');
      if (f.minItems && (Array.isArray(value) ? value.length < f.minItems.count : value === null && opts.nullClears)) throw tooFew(join(path, f.json), f.minItems);
      into[f.ts] = value === null && opts.nullClears ? defaultOf(f) : decodeField(f, value, join(path, f.json), false, strict);
    }
    // An update's body is partial: what it does not name is left as it is.
    if (strict && !opts.nullClears) {
      for (const f of schemaOf(type).fields) {
        if (!f.required || opts.givenElsewhere?.has(f.proto)) continue;
        const given = Object.hasOwn(json, f.json) ? json[f.json] : Object.hasOwn(json, f.proto) ? json[f.proto] : undefined;
        if (given === undefined || given === null) throw bad(join(path, f.json), 'is required', 'REQUIRED');
      }
    }
    return into;
  }

  /** Sets a field (by proto-name path, e.g. ["id"]) from a path or query string value. */
  function setFromText(type: string, target: Obj, fieldPath: string[], values: string[], wireName: string): void {
    let schema = type;
    let obj = target;
    for (let i = 0; i < fieldPath.length; i++) {
      const f = lookup(schema).get(fieldPath[i]!);
      if (!f) throw bad(wireName, 'is not a known parameter', 'UNKNOWN_FIELD');
      if (i === fieldPath.length - 1) {
        if (f.repeated) obj[f.ts] = values.map((v, j) => decodeValue(f.type, v, `${wireName}[${j}]`, true));
        else if (values.length > 1) throw bad(wireName, 'must be given once');
        else if (f.type.kind === 'message' || f.type.kind === 'map') throw bad(wireName, 'cannot be set from the query string');
        else obj[f.ts] = decodeValue(f.type, values[0], wireName, true);
        return;
      }
      if (f.type.kind !== 'message' || f.repeated) throw bad(wireName, 'is not a known parameter', 'UNKNOWN_FIELD');
      schema = f.type.ref;
      obj = (obj[f.ts] as Obj | undefined) ?? (obj[f.ts] = emptyMessage(schema));
    }
  }

  /** Wire name → proto-name path of a (possibly dotted) parameter name. */
  function fieldPathOf(type: string, wireName: string): string[] | undefined {
    const out: string[] = [];
    let schema = type;
    for (const part of wireName.split('.')) {
      const f = lookup(schema).get(part);
      if (!f) return undefined;
      out.push(f.proto);
      if (f.type.kind === 'message') schema = f.type.ref;
    }
    return out;
  }

  /**
   * Message object → JSON. Non-optional scalars are always written (has_token: false
   * is information); repeated fields always, even empty. Unset optional scalars
   * are left out, or null on the console when marked null_when_unset. Unset messages are null on the console and left out on the runtime
   * API (Telegram's habit of omitting what is absent).
   */
  function encodeValue(t: FieldType, v: unknown, surface: Surface): unknown {
    switch (t.kind) {
      case 'scalar':
        return t.scalar === 'bytes' ? Buffer.from(v as Uint8Array).toString('base64') : v;
      case 'enum':
        return wireNames(t.ref).get(v as number) ?? null;
      case 'message':
        return encodeMessage(t.ref, v as Obj, surface);
      case 'timestamp':
        return isoTime(v as Date);
      case 'fieldmask':
        return (v as string[]).join(',');
      case 'map':
        return Object.fromEntries(Object.entries(v as Obj).map(([k, item]) => [k, encodeValue(t.value, item, surface)]));
    }
  }

  function encodeField(f: FieldSchema, v: unknown, surface: Surface): unknown {
    if (f.repeated) return ((v as unknown[] | undefined) ?? []).map((item) => encodeValue(f.type, item, surface));
    if (v === undefined || v === null) {
      if (f.optional) return f.nullWhenUnset && surface === 'console' ? null : undefined;
      if (f.type.kind === 'message' || f.type.kind === 'timestamp' || f.type.kind === 'fieldmask') {
        return surface === 'console' ? null : undefined;
      }
      return encodeValue(f.type, defaultOf(f), surface);
    }
    const out = encodeValue(f.type, v, surface);
    if (surface === 'runtime' && f.type.kind === 'map' && Object.keys(out as Obj).length === 0) return undefined;
    return out === null && surface === 'runtime' ? undefined : out;
  }

  /**
   * Whether a field of a message is left out when it is an empty list: on the runtime
   * API, a list of messages (a Message's entities, a keyboard's rows), as Telegram leaves
   * out what is absent. Lists of scalars, and a response's own result, are always written.
   */
  const omitWhenEmpty = (f: FieldSchema, surface: Surface) => surface === 'runtime' && f.repeated && f.type.kind === 'message';

  function encodeMessage(type: string, message: Obj, surface: Surface): Obj {
    const out: Obj = {};
    for (const f of schemaOf(type).fields) {
      if (omitWhenEmpty(f, surface) && !(message[f.ts] as unknown[] | undefined)?.length) continue;
      const v = encodeField(f, message[f.ts], surface);
      if (v !== undefined) out[f.json] = v;
    }
    return out;
  }

  /*
   * The same encoding written straight to JSON text: what JSON.stringify(encodeMessage(…))
   * gives, byte for byte, without building the intermediate objects. One writer per type
   * and surface, made from the schema at its first use. Leaves (scalars, enums,
   * timestamps, field masks, maps) are written by JSON.stringify of what encodeField gives.
   */
  type Writer = (v: unknown) => string | undefined;
  const messageWriters = new Map<string, (m: Obj) => string>();

  function messageWriter(type: string, surface: Surface): (m: Obj) => string {
    const key = `${surface} ${type}`;
    let writer = messageWriters.get(key);
    if (writer) return writer;
    const fields = schemaOf(type).fields;
    const writers = fields.map((f): Writer => {
      const w = fieldWriter(f, surface);
      return omitWhenEmpty(f, surface) ? (v) => ((v as unknown[] | undefined)?.length ? w(v) : undefined) : w;
    });
    // Unrolled, one statement per field: each field a named property read and a call of
    // its own writer (a loop over the fields reads by key and calls every writer from one
    // site, which V8 can neither specialise nor inline). The names are the schema's, each
    // written as a JSON string literal.
    const body = fields.map((f, i) => {
      const name = JSON.stringify(`${JSON.stringify(f.json)}:`);
      return `t = w[${i}](m[${JSON.stringify(f.ts)}]);\n  if (t !== undefined) { out += first ? ${name} + t : "," + ${name} + t; first = false; }`;
    }).join('\n  ');
    writer = new Function('w', `return function write(m) {\n  let out = "{", first = true, t;\n  ${body}\n  return out + "}";\n};`)(writers) as (m: Obj) => string;
    messageWriters.set(key, writer);
    return writer;
  }

  function fieldWriter(f: FieldSchema, surface: Surface): Writer {
    const t = f.type;
    if (f.repeated) {
      // An element JSON.stringify would write as undefined is null in an array.
      let item: (v: unknown) => string;
      if (t.kind === 'message') {
        let w: ((m: Obj) => string) | undefined; // made at first use: types may nest themselves
        item = (v) => (w ??= messageWriter(t.ref, surface))(v as Obj);
      } else if (t.kind === 'scalar' && t.scalar !== 'bytes') {
        item = (v) => JSON.stringify(v) ?? 'null';
      } else {
        item = (v) => JSON.stringify(encodeValue(t, v, surface)) ?? 'null';
      }
      return (v) => {
        const list = (v as unknown[] | undefined) ?? [];
        let out = '';
        for (let i = 0; i < list.length; i++) out += i === 0 ? item(list[i]) : `,${item(list[i])}`;
        return `[${out}]`;
      };
    }
    if (t.kind === 'message') {
      const unset = JSON.stringify(encodeField(f, undefined, surface));
      let w: ((m: Obj) => string) | undefined;
      return (v) => (v === undefined || v === null ? unset : (w ??= messageWriter(t.ref, surface))(v as Obj));
    }
    // Unset (undefined or null), a field writes what encodeField gives for it: a constant.
    const unset = JSON.stringify(encodeField(f, undefined, surface));
    if (t.kind === 'scalar' && t.scalar === 'bool') {
      return (v) => (v === true ? 'true' : v === false ? 'false' : v === undefined || v === null ? unset : JSON.stringify(v));
    }
    if (t.kind === 'scalar' && t.scalar !== 'bytes') return (v) => (v === undefined || v === null ? unset : JSON.stringify(v));
    if (t.kind === 'enum') {
      // A number with no wire name is null: written on the console, left out on the runtime API.
      const texts = new Map([...wireNames(t.ref)].map(([n, name]) => [n, JSON.stringify(name)]));
      const unknown = surface === 'runtime' ? undefined : 'null';
      return (v) => {
        if (v === undefined || v === null) return unset;
        const text = texts.get(v as number);
        return text === undefined ? unknown : text;
      };
    }
    // An RFC 3339 text (digits, '-', ':', '.', 'T', 'Z': nothing to escape), as encodeValue writes it.
    if (t.kind === 'timestamp') return (v) => (v === undefined || v === null ? unset : `"${isoTime(v as Date)}"`);
    return (v) => JSON.stringify(encodeField(f, v, surface));
  }

  /** JSON.stringify(encodeMessage(type, message, surface)), written directly. */
  const encodeMessageJson = (type: string, message: Obj, surface: Surface): string => messageWriter(type, surface)(message);

  /** JSON.stringify(encodeField(f, v, surface)) (undefined when the field is left out), written directly. */
  const fieldWriters = new WeakMap<FieldSchema, Partial<Record<Surface, Writer>>>();
  function encodeFieldJson(f: FieldSchema, v: unknown, surface: Surface): string | undefined {
    let bySurface = fieldWriters.get(f);
    if (!bySurface) fieldWriters.set(f, (bySurface = {}));
    return (bySurface[surface] ??= fieldWriter(f, surface))(v);
  }

  return {
    emptyMessage, decodeMessage, decodeField, setFromText, fieldPathOf, encodeMessage, encodeField, encodeMessageJson, encodeFieldJson, lookup, schemaOf,
  };
}

export type Codec = ReturnType<typeof createCodec>;
