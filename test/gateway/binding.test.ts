/**
 * The google.api.http binding of the gateway, without a server: how path
 * parameters, query parameters and the JSON body merge into one request message,
 * what each binding refuses, and the update mask a PATCH implies (AIP-134).
 */
import { describe, expect, it } from 'vitest';
import { bindRequest, impliedUpdateMask, parseJsonBody, type HttpRequestParts } from '../../gateway/runtime/binding.js';
import { createCodec } from '../../gateway/runtime/codec.js';
import type { FieldSchema, FieldType, RouteSpec, RouteTable } from '../../gateway/runtime/schema.js';
import { ApiError, Code } from '../../src/errors.js';

const str: FieldType = { kind: 'scalar', scalar: 'string' };
const int: FieldType = { kind: 'scalar', scalar: 'int32' };
const field = (proto: string, type: FieldType, extra: Partial<FieldSchema> = {}): FieldSchema => {
  const camel = proto.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  return { proto, json: camel, ts: camel, type, repeated: false, optional: false, ...extra };
};

const table: Pick<RouteTable, 'messages' | 'enums'> = {
  messages: {
    // GET /things/{id}?verbose=&page=&tags=&filter.owner=  and  POST /things/{id} body "*"
    'fx.ThingRequest': {
      fields: [
        field('id', str),
        field('name', str),
        field('verbose', { kind: 'scalar', scalar: 'bool' }),
        field('page', int, { optional: true }),
        field('tags', str, { repeated: true }),
        field('filter', { kind: 'message', ref: 'fx.Filter' }),
      ],
    },
    'fx.Filter': { fields: [field('owner', str), field('min_age', int)] },
    // POST /owners/{owner.id}/things body "*"
    'fx.NestedPathRequest': { fields: [field('owner', { kind: 'message', ref: 'fx.Owner' }), field('note', str)] },
    'fx.Owner': { fields: [field('id', int), field('name', str)] },
    // PATCH /things/{id} body "thing"
    'fx.UpdateThingRequest': {
      fields: [
        field('id', str),
        field('thing', { kind: 'message', ref: 'fx.Thing' }),
        field('update_mask', { kind: 'fieldmask' }, { json: 'update_mask' }),
      ],
    },
    'fx.Thing': { fields: [field('display_name', str), field('about', str), field('size', int)] },
    // PATCH /notes/{id} body "note" (a named body without a mask field)
    'fx.UpdateNoteRequest': { fields: [field('id', str), field('note', { kind: 'message', ref: 'fx.Thing' })] },
    // POST /things/{id}/create body "*": REQUIRED fields, and null where the document allows it
    'fx.CreateRequest': {
      fields: [
        field('id', str, { required: true }),
        field('title', str, { required: true }),
        field('flag', { kind: 'scalar', scalar: 'bool' }),
        field('owner', { kind: 'message', ref: 'fx.Person' }),
        field('memo', str, { optional: true, nullWhenUnset: true }),
        field('label', str, { optional: true }),
        field('when', { kind: 'timestamp' }),
      ],
    },
    'fx.Person': { fields: [field('id', int, { required: true }), field('name', str)] },
  },
  enums: {},
};
const codec = createCodec(table);

type Spec = Pick<RouteSpec, 'requestType' | 'body' | 'pathParams'>;
const getThing: Spec = { requestType: 'fx.ThingRequest', body: null, pathParams: [{ param: 'id', field: ['id'] }] };
const postThing: Spec = { ...getThing, body: '*' };
const postNested: Spec = { requestType: 'fx.NestedPathRequest', body: '*', pathParams: [{ param: 'owner__id', field: ['owner', 'id'] }] };
const patchThing: Spec = { requestType: 'fx.UpdateThingRequest', body: 'thing', pathParams: [{ param: 'id', field: ['id'] }] };
const patchNote: Spec = { requestType: 'fx.UpdateNoteRequest', body: 'note', pathParams: [{ param: 'id', field: ['id'] }] };
const createThing: Spec = { requestType: 'fx.CreateRequest', body: '*', pathParams: [{ param: 'id', field: ['id'] }] };

const bind = (spec: Spec, parts: Partial<HttpRequestParts>) =>
  bindRequest(codec, spec, { body: undefined, query: {}, params: { id: 't1' }, ...parts });

function refusal(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe(Code.INVALID_ARGUMENT);
    const [d] = (err as ApiError).details;
    return { field: d!.field, reason: d!.reason };
  }
  throw new Error('expected a refusal');
}

describe('binding: path, query and body', () => {
  it('a GET takes the path parameter and the query, by JSON or proto name, dotted into messages', () => {
    const m = bind(getThing, { query: { verbose: 'true', page: '2', tags: ['a', 'b'], 'filter.owner': 'ann', 'filter.min_age': '18' } });
    expect(m).toEqual({ id: 't1', name: '', verbose: true, page: 2, tags: ['a', 'b'], filter: { owner: 'ann', minAge: 18 } });
  });

  it('a single query value of a repeated field is a one-element list', () => {
    expect(bind(getThing, { query: { tags: 'solo' } }).tags).toEqual(['solo']);
  });

  it('path parameters are typed and may name a nested field', () => {
    const m = bind(postNested, { params: { owner__id: '42' }, body: { owner: { name: 'Ann' }, note: 'n' } });
    expect(m).toEqual({ owner: { id: 42, name: 'Ann' }, note: 'n' });
    expect(refusal(() => bind(postNested, { params: { owner__id: 'x' } }))).toEqual({ field: 'owner.id', reason: 'INVALID_TYPE' });
  });

  it('with body "*", the body fills the message; it wins over the query and loses to the path', () => {
    const m = bind(postThing, { query: { name: 'from-query', page: '3' }, body: { name: 'from-body', id: 'from-body' } });
    expect(m).toMatchObject({ id: 't1', name: 'from-body', page: 3 });
  });

  it('a query parameter may not name a path field, the named body field or an unknown field', () => {
    expect(refusal(() => bind(getThing, { query: { id: 'other' } }))).toEqual({ field: 'id', reason: 'UNKNOWN_FIELD' });
    expect(refusal(() => bind(patchThing, { query: { thing: 'x' } }))).toEqual({ field: 'thing', reason: 'UNKNOWN_FIELD' });
    expect(refusal(() => bind(patchThing, { query: { 'thing.about': 'x' } }))).toEqual({ field: 'thing.about', reason: 'UNKNOWN_FIELD' });
    expect(refusal(() => bind(getThing, { query: { colour: 'red' } }))).toEqual({ field: 'colour', reason: 'UNKNOWN_FIELD' });
    expect(refusal(() => bind(getThing, { query: { 'filter.nope': 'x' } }))).toEqual({ field: 'filter.nope', reason: 'UNKNOWN_FIELD' });
  });

  it('a query value is parsed by its field\'s type, and a message cannot come from the query', () => {
    expect(refusal(() => bind(getThing, { query: { page: 'two' } }))).toEqual({ field: 'page', reason: 'INVALID_TYPE' });
    expect(refusal(() => bind(getThing, { query: { filter: 'x' } }))).toEqual({ field: 'filter', reason: 'INVALID_TYPE' });
    expect(refusal(() => bind(getThing, { query: { page: ['1', '2'] } }))).toEqual({ field: 'page', reason: 'INVALID_TYPE' });
  });

  it('refuses a body where the binding takes none, and a "*" body that is not an object', () => {
    expect(refusal(() => bind(getThing, { body: {} }))).toEqual({ field: 'body', reason: 'UNEXPECTED_BODY' });
    for (const body of [[1], 'text', 3, null]) {
      expect(refusal(() => bind(postThing, { body }))).toEqual({ field: 'body', reason: 'INVALID_TYPE' });
    }
  });

  it('a "*" body is decoded strictly, fields named as on the wire', () => {
    expect(refusal(() => bind(postThing, { body: { filter: { minAge: 'old' } } }))).toEqual({ field: 'filter.minAge', reason: 'INVALID_TYPE' });
    expect(refusal(() => bind(postThing, { body: { extra: 1 } }))).toEqual({ field: 'extra', reason: 'UNKNOWN_FIELD' });
  });

  it('a named body field takes the whole body, which is then required', () => {
    expect(bind(patchNote, { body: { about: 'hi' } })).toEqual({ id: 't1', note: { displayName: '', about: 'hi', size: 0 } });
    expect(refusal(() => bind(patchNote, {}))).toEqual({ field: 'body', reason: 'REQUIRED' });
    expect(refusal(() => bind(patchNote, { body: ['x'] }))).toEqual({ field: 'body', reason: 'INVALID_TYPE' });
    expect(refusal(() => bind(patchNote, { body: { colour: 'red' } }))).toEqual({ field: 'colour', reason: 'UNKNOWN_FIELD' });
  });
});

describe('binding: the update mask of a PATCH', () => {
  it('is the proto names of the keys present in the body, null ones included (they clear)', () => {
    const m = bind(patchThing, { body: { displayName: 'New', about: null } });
    expect(m.updateMask).toEqual(['display_name', 'about']);
    expect(m.thing).toEqual({ displayName: 'New', about: '', size: 0 });
    expect(bind(patchThing, { body: { display_name: 'x', size: 3 } }).updateMask).toEqual(['display_name', 'size']);
  });

  it('is empty for an empty body (a missing one is refused: the body is required)', () => {
    expect(bind(patchThing, { body: {} }).updateMask).toEqual([]);
    expect(refusal(() => bind(patchThing, {}))).toEqual({ field: 'body', reason: 'REQUIRED' });
  });

  it('an explicit update_mask in the query is taken as given (lowerCamel paths read as proto names)', () => {
    expect(bind(patchThing, { body: { about: 'x' }, query: { update_mask: 'displayName,about' } }).updateMask).toEqual(['display_name', 'about']);
    expect(bind(patchThing, { body: { about: 'x' }, query: { update_mask: '' } }).updateMask).toEqual([]);
  });

  it('is implied only for a named body field of a request that has an update_mask FieldMask', () => {
    expect(impliedUpdateMask(codec, patchThing, { about: 'x' }, {})).toEqual({ ts: 'updateMask', paths: ['about'] });
    expect(impliedUpdateMask(codec, patchNote, { about: 'x' }, {})).toBeUndefined();
    expect(impliedUpdateMask(codec, { ...patchThing, body: '*' }, { about: 'x' }, {})).toBeUndefined();
    expect(impliedUpdateMask(codec, { ...patchThing, body: null }, undefined, {})).toBeUndefined();
    expect(impliedUpdateMask(codec, patchThing, { about: 'x' }, { update_mask: 'about' })).toBeUndefined();
  });
});

describe('binding: a body is read as the OpenAPI document describes it', () => {
  it('a REQUIRED field must be given, unless the path or the query gives it; a missing body gives none', () => {
    expect(bind(createThing, { body: { title: 'x' } })).toMatchObject({ id: 't1', title: 'x' });
    expect(bind(createThing, { query: { title: 'x' } })).toMatchObject({ id: 't1', title: 'x' });
    for (const body of [undefined, {}, { flag: true }]) {
      expect(refusal(() => bind(createThing, { body }))).toEqual({ field: 'title', reason: 'REQUIRED' });
    }
    expect(refusal(() => bind(createThing, { body: { title: 'x', owner: { name: 'n' } } }))).toEqual({ field: 'owner.id', reason: 'REQUIRED' });
    expect(bind(createThing, { body: { title: 'x', owner: { id: 3 } } }).owner).toEqual({ id: 3, name: '' });
  });

  it('null is refused where the document does not allow it, and reads as unset where it does', () => {
    for (const [key, at] of [['flag', 'flag'], ['title', 'title'], ['label', 'label']] as const) {
      expect(refusal(() => bind(createThing, { body: { title: 'x', [key]: null } })), key).toEqual({ field: at, reason: 'INVALID_TYPE' });
    }
    expect(refusal(() => bind(createThing, { body: { title: 'x', owner: { id: 1, name: null } } }))).toEqual({ field: 'owner.name', reason: 'INVALID_TYPE' });
    // A message, a timestamp and a null_when_unset field may be null: the document says so.
    expect(bind(createThing, { body: { title: 'x', owner: null, when: null, memo: null } })).toMatchObject({ owner: undefined, when: undefined, memo: undefined });
  });

  it("an update's body may clear any field with null (the domain refuses what cannot be cleared)", () => {
    expect(bind(patchThing, { body: { size: null, display_name: null } }).thing).toEqual({ displayName: '', about: '', size: 0 });
  });

  it('an empty body is none; whitespace alone, or anything not one JSON document, is malformed', () => {
    const parse = (text: string) => {
      let out: { err: unknown; body: unknown } | undefined;
      parseJsonBody(undefined, text, (err, body) => (out = { err, body }));
      return out!;
    };
    expect(parse('')).toEqual({ err: null, body: undefined });
    expect(parse(' {"a": 1} \n')).toEqual({ err: null, body: { a: 1 } });
    for (const text of [' ', '\n', '\t \r\n', '{} {}']) {
      const { err } = parse(text);
      expect(err, JSON.stringify(text)).toBeInstanceOf(ApiError);
      expect((err as ApiError).details[0]).toMatchObject({ field: 'body', reason: 'MALFORMED_JSON' });
    }
  });
});
