/**
 * The gateway's JSON ⇄ message codec on a small hand-written schema, without a
 * server: what a JSON body or a query string turns into, which inputs are refused
 * (as INVALID_ARGUMENT naming the field as spelled on the wire), and how messages
 * are written back on each surface.
 */
import { describe, expect, it } from 'vitest';
import { createCodec } from '../../gateway/runtime/codec.js';
import type { FieldSchema, FieldType, RouteTable } from '../../gateway/runtime/schema.js';
import { ApiError, Code } from '../../src/errors.js';

const scalar = (s: 'string' | 'bool' | 'int32' | 'uint32' | 'int64' | 'uint64' | 'double' | 'bytes'): FieldType => ({ kind: 'scalar', scalar: s });
const field = (proto: string, type: FieldType, extra: Partial<FieldSchema> = {}): FieldSchema => {
  const camel = proto.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  return { proto, json: camel, ts: camel, type, repeated: false, optional: false, ...extra };
};

const table: Pick<RouteTable, 'messages' | 'enums'> = {
  messages: {
    'fx.Thing': {
      fields: [
        field('name', scalar('string')),
        field('count', scalar('int32')),
        field('small', scalar('uint32')),
        field('big_id', scalar('int64'), { json: 'big_id' }),
        field('ubig', scalar('uint64')),
        field('ratio', scalar('double')),
        field('flag', scalar('bool')),
        field('blob', scalar('bytes')),
        field('colour', { kind: 'enum', ref: 'fx.Colour' }),
        field('tags', scalar('string'), { repeated: true }),
        field('child', { kind: 'message', ref: 'fx.Child' }),
        field('children', { kind: 'message', ref: 'fx.Child' }, { repeated: true }),
        field('at', { kind: 'timestamp' }),
        field('mask', { kind: 'fieldmask' }),
        field('labels', { kind: 'map', key: 'string', value: scalar('int64') }),
        field('counts', { kind: 'map', key: 'int32', value: scalar('string') }),
        field('nickname', scalar('string'), { optional: true }),
        field('token_prefix', scalar('string'), { optional: true, nullWhenUnset: true, json: 'token_prefix' }),
        field('display_name', scalar('string')),
      ],
    },
    'fx.Child': { fields: [field('email', scalar('string')), field('age', scalar('int32'))] },
  },
  enums: {
    'fx.Colour': { prefix: 'COLOUR_', values: { COLOUR_UNSPECIFIED: 0, COLOUR_RED: 1, COLOUR_DARK_BLUE: 2 } },
  },
};

const codec = createCodec(table);
const decode = (json: Record<string, unknown>) => codec.decodeMessage('fx.Thing', json);

/** The one field violation an input is refused with. */
function refusal(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    const e = err as ApiError;
    expect(e.code).toBe(Code.INVALID_ARGUMENT);
    expect(e.details).toHaveLength(1);
    expect(e.message).toBe(`${e.details[0]!.field}: ${e.details[0]!.description}`);
    return { field: e.details[0]!.field, reason: e.details[0]!.reason, description: e.details[0]!.description };
  }
  throw new Error('expected a refusal');
}

describe('codec: decoding JSON', () => {
  it('gives every field not in the JSON its proto3 default, shaped like the ts-proto interface', () => {
    expect(decode({})).toEqual({
      name: '', count: 0, small: 0, bigId: 0, ubig: 0, ratio: 0, flag: false, blob: new Uint8Array(), colour: 0,
      tags: [], child: undefined, children: [], at: undefined, mask: undefined, labels: {}, counts: {},
      nickname: undefined, tokenPrefix: undefined, displayName: '',
    });
  });

  it('accepts the JSON name and the proto name of a field', () => {
    expect(decode({ displayName: 'a' }).displayName).toBe('a');
    expect(decode({ display_name: 'b' }).displayName).toBe('b');
  });

  it('refuses an unknown field, naming its path', () => {
    expect(refusal(() => decode({ colour: 'red', shade: 'x' }))).toMatchObject({ field: 'shade', reason: 'UNKNOWN_FIELD' });
    expect(refusal(() => decode({ child: { email: 'a@b.c', phone: '1' } }))).toMatchObject({ field: 'child.phone', reason: 'UNKNOWN_FIELD' });
    expect(refusal(() => decode({ children: [{}, { nope: 1 }] }))).toMatchObject({ field: 'children[1].nope', reason: 'UNKNOWN_FIELD' });
  });

  it('names nested fields by their JSON names', () => {
    expect(refusal(() => decode({ big_id: 'x' })).field).toBe('big_id');
    expect(refusal(() => decode({ children: [{ age: 1 }, { age: 'old' }] })).field).toBe('children[1].age');
    expect(refusal(() => decode({ display_name: 5 })).field).toBe('displayName');
  });

  describe('integers', () => {
    it('accept JSON numbers and decimal strings', () => {
      expect(decode({ count: -5, big_id: '9007199254740991', ubig: 42 })).toMatchObject({ count: -5, bigId: 9007199254740991, ubig: 42 });
    });

    it.each([
      [{ count: 2 ** 31 }, 'count'],
      [{ count: -(2 ** 31) - 1 }, 'count'],
      [{ small: -1 }, 'small'],
      [{ small: 2 ** 32 }, 'small'],
      [{ big_id: 2 ** 53 }, 'big_id'],
      [{ big_id: '9007199254740992' }, 'big_id'],
      [{ big_id: '-9007199254740992' }, 'big_id'],
      [{ ubig: -1 }, 'ubig'],
    ])('refuse %j as OUT_OF_RANGE', (json, name) => {
      expect(refusal(() => decode(json))).toMatchObject({ field: name, reason: 'OUT_OF_RANGE' });
    });

    it('take the bounds themselves', () => {
      expect(decode({ count: 2 ** 31 - 1, small: 2 ** 32 - 1, big_id: Number.MIN_SAFE_INTEGER })).toMatchObject({
        count: 2 ** 31 - 1, small: 2 ** 32 - 1, bigId: Number.MIN_SAFE_INTEGER,
      });
    });

    it.each([[1.5], ['1.0'], ['12abc'], [''], [true], [[1]], [{}]])('refuse %j as not an integer', (v) => {
      expect(refusal(() => decode({ count: v }))).toMatchObject({ field: 'count', reason: 'INVALID_TYPE', description: 'must be an integer' });
    });
  });

  it('doubles, booleans and strings take their JSON types only', () => {
    expect(decode({ ratio: 0.25, flag: true, name: 'n' })).toMatchObject({ ratio: 0.25, flag: true, name: 'n' });
    expect(refusal(() => decode({ ratio: '0.5' })).field).toBe('ratio');
    expect(refusal(() => decode({ flag: 'true' })).field).toBe('flag');
    expect(refusal(() => decode({ name: 1 })).field).toBe('name');
    expect(refusal(() => decode({ name: 'a\ud800b' }))).toMatchObject({ field: 'name', reason: 'INVALID_CHARACTERS' });
  });

  describe('bytes', () => {
    it('accept standard and URL-safe base64, padded or not', () => {
      expect(Buffer.from(decode({ blob: 'AP8Q' }).blob as Uint8Array)).toEqual(Buffer.from([0, 255, 16]));
      expect(Buffer.from(decode({ blob: '-_8=' }).blob as Uint8Array)).toEqual(Buffer.from([0xfb, 0xff]));
      expect(Buffer.from(decode({ blob: '+/8' }).blob as Uint8Array)).toEqual(Buffer.from([0xfb, 0xff]));
      expect(decode({ blob: '' }).blob).toEqual(new Uint8Array());
    });

    it.each([['not base64!'], ['AA==AA'], [12], [[1, 2]]])('refuse %j', (v) => {
      expect(refusal(() => decode({ blob: v }))).toMatchObject({ field: 'blob', description: 'must be base64' });
    });

    it('are written as standard base64', () => {
      const out = codec.encodeMessage('fx.Thing', { ...decode({}), blob: new Uint8Array([0xfb, 0xff]) }, 'console');
      expect(out.blob).toBe('+/8=');
    });
  });

  describe('enums', () => {
    it('accept the short name in lower case, the full name and the number', () => {
      expect(decode({ colour: 'dark_blue' }).colour).toBe(2);
      expect(decode({ colour: 'DARK_BLUE' }).colour).toBe(2);
      expect(decode({ colour: 'COLOUR_RED' }).colour).toBe(1);
      expect(decode({ colour: 2 }).colour).toBe(2);
    });

    it.each([['Dark_Blue'], ['purple'], ['unspecified'], ['COLOUR_UNSPECIFIED'], [7], [true]])('refuse %j, listing the values', (v) => {
      expect(refusal(() => decode({ colour: v }))).toEqual({ field: 'colour', reason: 'INVALID_VALUE', description: 'must be one of red, dark_blue' });
    });

    it('write the short name in lower case; unspecified is null on the console and left out on the runtime API', () => {
      expect(codec.encodeMessage('fx.Thing', { ...decode({}), colour: 2 }, 'console').colour).toBe('dark_blue');
      expect(codec.encodeMessage('fx.Thing', decode({}), 'console').colour).toBeNull();
      expect('colour' in codec.encodeMessage('fx.Thing', decode({}), 'runtime')).toBe(false);
    });
  });

  describe('nulls', () => {
    it('null is the field\'s default: zero, empty, unset', () => {
      const m = decode({ name: null, count: null, tags: null, child: null, nickname: null, at: null, labels: null, colour: null });
      expect(m).toMatchObject({ name: '', count: 0, tags: [], child: undefined, nickname: undefined, at: undefined, labels: {}, colour: 0 });
    });

    it('a null inside a list is refused, naming the element', () => {
      expect(refusal(() => decode({ tags: ['a', null] }))).toMatchObject({ field: 'tags[1]', description: 'must not be null' });
    });
  });

  it('messages, lists and maps must have their JSON shapes', () => {
    expect(refusal(() => decode({ child: 'x' }))).toMatchObject({ field: 'child', description: 'must be an object' });
    expect(refusal(() => decode({ child: [] }))).toMatchObject({ field: 'child', description: 'must be an object' });
    expect(refusal(() => decode({ tags: 'a' }))).toMatchObject({ field: 'tags', description: 'must be an array' });
    expect(refusal(() => decode({ labels: [] }))).toMatchObject({ field: 'labels', description: 'must be an object' });
  });

  it('maps check their keys and values by the map\'s types', () => {
    expect(decode({ labels: { a: 1, b: '2' }, counts: { '-3': 'x' } })).toMatchObject({ labels: { a: 1, b: 2 }, counts: { '-3': 'x' } });
    expect(refusal(() => decode({ labels: { a: 'one' } })).field).toBe('labels.a');
    expect(refusal(() => decode({ counts: { three: 'x' } })).field).toBe('counts.three');
  });

  it('a map key that is also an Object.prototype name is an ordinary key', () => {
    const m = decode(JSON.parse('{"labels": {"__proto__": 1, "constructor": 2}}'));
    expect(Object.entries(m.labels as object)).toEqual([['__proto__', 1], ['constructor', 2]]);
    expect(codec.encodeMessage('fx.Thing', m, 'console').labels).toEqual(JSON.parse('{"__proto__": 1, "constructor": 2}'));
  });

  describe('well-known types', () => {
    it('Timestamp: an RFC 3339 string with an offset ⇄ Date', () => {
      expect(decode({ at: '2024-02-03T04:05:06Z' }).at).toEqual(new Date(Date.UTC(2024, 1, 3, 4, 5, 6)));
      expect(decode({ at: '2024-02-03T04:05:06.5+02:00' }).at).toEqual(new Date(Date.UTC(2024, 1, 3, 2, 5, 6, 500)));
      // Leap days, and the ends of the range.
      expect(decode({ at: '2024-02-29T23:59:59Z' }).at).toEqual(new Date(Date.UTC(2024, 1, 29, 23, 59, 59)));
      expect(decode({ at: '2000-02-29T00:00:00Z' }).at).toEqual(new Date(Date.UTC(2000, 1, 29)));
      expect((decode({ at: '0001-01-01T00:00:00Z' }).at as Date).toISOString()).toBe('0001-01-01T00:00:00.000Z');
      expect((decode({ at: '9999-12-31T23:59:59.999999999Z' }).at as Date).toISOString()).toBe('9999-12-31T23:59:59.999Z');
      expect((decode({ at: '2026-01-01T00:30:00+23:59' }).at as Date).toISOString()).toBe('2025-12-31T00:31:00.000Z');
      const out = codec.encodeMessage('fx.Thing', { ...decode({}), at: new Date(Date.UTC(2024, 1, 3, 4, 5, 6)) }, 'console');
      expect(out.at).toBe('2024-02-03T04:05:06.000Z');
    });

    it.each([
      ['2024-02-03'], ['2024-02-03T04:05:06'], ['2024-13-03T04:05:06Z'], ['yesterday'], [1706933106],
      // Impossible calendar dates and times, which Date alone rolls over or takes.
      ['2026-02-30T00:00:00Z'], ['2026-02-29T00:00:00Z'], ['2100-02-29T00:00:00Z'], ['2026-04-31T00:00:00Z'], ['2026-01-00T00:00:00Z'],
      ['2026-01-01T24:00:00Z'], ['2026-01-01T23:60:00Z'], ['2026-12-31T23:59:60Z'], ['2026-01-01T00:00:00+24:00'], ['2026-01-01T00:00:00+01:60'],
      // Outside google.protobuf.Timestamp's years 0001 to 9999.
      ['0000-12-31T23:59:59Z'], ['0001-01-01T00:00:00+00:01'], ['9999-12-31T23:59:59-00:01'],
    ])('Timestamp: refuses %j', (v) => {
      expect(refusal(() => decode({ at: v }))).toMatchObject({ field: 'at', description: 'must be an RFC 3339 timestamp' });
    });

    it('FieldMask: "a,b.c" with lowerCamel or snake paths ⇄ proto paths', () => {
      expect(decode({ mask: 'displayName, child.email,,token_prefix' }).mask).toEqual(['display_name', 'child.email', 'token_prefix']);
      expect(decode({ mask: '' }).mask).toEqual([]);
      expect(refusal(() => decode({ mask: ['a'] })).field).toBe('mask');
      expect(codec.encodeMessage('fx.Thing', { ...decode({}), mask: ['display_name', 'child'] }, 'console').mask).toBe('display_name,child');
    });
  });
});

describe('codec: query and path text', () => {
  const empty = () => codec.emptyMessage('fx.Thing');

  it('parses text by the field type, naming the parameter as given', () => {
    const m = empty();
    codec.setFromText('fx.Thing', m, ['count'], ['-7'], 'count');
    codec.setFromText('fx.Thing', m, ['flag'], ['true'], 'flag');
    codec.setFromText('fx.Thing', m, ['ratio'], ['1.5'], 'ratio');
    codec.setFromText('fx.Thing', m, ['colour'], ['red'], 'colour');
    codec.setFromText('fx.Thing', m, ['tags'], ['a', 'b'], 'tags');
    codec.setFromText('fx.Thing', m, ['child', 'email'], ['x@y.z'], 'child.email');
    expect(m).toMatchObject({ count: -7, flag: true, ratio: 1.5, colour: 1, tags: ['a', 'b'], child: { email: 'x@y.z', age: 0 } });
  });

  it('refuses a repeated single value, a message, a wrong type and an unknown path', () => {
    expect(refusal(() => codec.setFromText('fx.Thing', empty(), ['count'], ['1', '2'], 'count')).description).toBe('must be given once');
    expect(refusal(() => codec.setFromText('fx.Thing', empty(), ['child'], ['x'], 'child')).description).toBe('cannot be set from the query string');
    expect(refusal(() => codec.setFromText('fx.Thing', empty(), ['flag'], ['yes'], 'flag')).field).toBe('flag');
    expect(refusal(() => codec.setFromText('fx.Thing', empty(), ['count'], ['1e3'], 'count')).field).toBe('count');
    expect(refusal(() => codec.setFromText('fx.Thing', empty(), ['tags'], ['a', 'b\udc00'], 'tags')).field).toBe('tags[1]');
    expect(refusal(() => codec.setFromText('fx.Thing', empty(), ['name', 'x'], ['v'], 'name.x'))).toMatchObject({ field: 'name.x', reason: 'UNKNOWN_FIELD' });
  });

  it('maps wire names (JSON or proto, dotted) to proto paths', () => {
    expect(codec.fieldPathOf('fx.Thing', 'displayName')).toEqual(['display_name']);
    expect(codec.fieldPathOf('fx.Thing', 'child.email')).toEqual(['child', 'email']);
    expect(codec.fieldPathOf('fx.Thing', 'child.phone')).toBeUndefined();
  });
});

describe('codec: encoding', () => {
  const full = () => ({ ...codec.emptyMessage('fx.Thing') });

  it('writes non-optional scalars and lists always (on the runtime API, empty lists of messages left out); unset optionals and messages per surface', () => {
    const consoleOut = codec.encodeMessage('fx.Thing', full(), 'console');
    expect(consoleOut).toEqual({
      name: '', count: 0, small: 0, big_id: 0, ubig: 0, ratio: 0, flag: false, blob: '', colour: null, tags: [],
      child: null, children: [], at: null, mask: null, labels: {}, counts: {}, token_prefix: null, displayName: '',
    });
    const runtimeOut = codec.encodeMessage('fx.Thing', full(), 'runtime');
    expect(runtimeOut).toEqual({
      name: '', count: 0, small: 0, big_id: 0, ubig: 0, ratio: 0, flag: false, blob: '', tags: [], displayName: '',
    });
    expect(codec.encodeMessage('fx.Thing', { ...full(), children: [{ email: 'e', age: 1 }] }, 'runtime')).toMatchObject({ children: [{ email: 'e', age: 1 }] });
  });

  it('writes set values by JSON name, nested messages recursively', () => {
    const out = codec.encodeMessage('fx.Thing', {
      ...full(), bigId: 12, nickname: 'nick', tokenPrefix: 'sbot_abc', child: { email: 'e', age: 3 }, labels: { a: 1 },
    }, 'runtime');
    expect(out).toMatchObject({ big_id: 12, nickname: 'nick', token_prefix: 'sbot_abc', child: { email: 'e', age: 3 }, labels: { a: 1 } });
  });

  it('writes JSON text directly, byte for byte what JSON.stringify of the encoded object gives, on both surfaces', () => {
    const messages = [
      full(),
      decode({}),
      {
        ...full(), name: 'quote " backslash \\ newline \n tab \t', count: -7, small: 4294967295, bigId: 9007199254740991, ubig: 12,
        ratio: 0.1, flag: true, blob: new Uint8Array([0xfb, 0xff, 0]), colour: 2, tags: ['a', 'é', '\u2028', 'lone \ud800', '</script>'],
        child: { email: 'e@x', age: 3 }, children: [{ email: '', age: 0 }, { email: 'z', age: -1 }], at: new Date(Date.UTC(2024, 1, 3, 4, 5, 6, 7)),
        mask: ['display_name', 'child'], labels: { b: 2, a: 1, 10: 3, __proto__: 4 }, counts: { 2: 'two', 1: 'one' },
        nickname: '', tokenPrefix: 'sbot_abc', displayName: '😀',
      },
      { ...full(), colour: 99, ratio: Number.NaN, children: [], labels: {}, nickname: 'n' },
    ];
    for (const surface of ['console', 'runtime'] as const) {
      for (const m of messages) {
        expect(codec.encodeMessageJson('fx.Thing', m, surface)).toBe(JSON.stringify(codec.encodeMessage('fx.Thing', m, surface)));
      }
      const fields = codec.schemaOf('fx.Thing').fields;
      for (const f of fields) {
        for (const m of messages) {
          const v = (m as Record<string, unknown>)[f.ts];
          expect(codec.encodeFieldJson(f, v, surface)).toBe(JSON.stringify(codec.encodeField(f, v, surface)));
        }
        expect(codec.encodeFieldJson(f, undefined, surface)).toBe(JSON.stringify(codec.encodeField(f, undefined, surface)));
      }
    }
  });
});
