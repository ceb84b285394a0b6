/**
 * The OpenAPI document is one generated clients can trust: a third-party validator
 * accepts it; what the service answers (successes and both error envelopes, nulls
 * included) matches the schemas it publishes; the limits it publishes are the ones
 * the service enforces; a client generated from it by openapi-typescript works with
 * openapi-fetch; and /docs serves an interactive reference without any CDN.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import createClient from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { paths } from '../gateway/generated/openapi-types.js';
import { call, client, startHarness, type Harness, type HttpResult } from './helpers/harness.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('the OpenAPI document', () => {
  let h: Harness;
  let doc: Json;
  let ownerJwt: string;
  let adminJwt: string;
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });

  beforeAll(async () => {
    h = await startHarness('in-process');
    ownerJwt = await h.jwt('openapi-owner');
    adminJwt = await h.jwt('openapi-admin', { admin: true });
    const res = await call(h.url, 'GET', '/api/v1/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body;
  }, 60_000);
  afterAll(() => h?.close());

  /** Asserts that an answer matches the document's schema for (path, method, status). */
  function expectConforms(path: string, method: string, res: HttpResult) {
    const responses = doc.paths[path]?.[method]?.responses;
    expect(responses, `${method} ${path} in the document`).toBeDefined();
    const response = responses[String(res.status)] ?? responses.default;
    expect(response, `${method} ${path} documents status ${res.status}`).toBeDefined();
    const schema = response.content['application/json'].schema;
    const defs = JSON.parse(JSON.stringify(doc.components.schemas).replaceAll('#/components/schemas/', '#/$defs/'));
    const wrapped = JSON.parse(JSON.stringify(schema).replaceAll('#/components/schemas/', '#/$defs/'));
    const validate = ajv.compile({ ...wrapped, $defs: defs });
    const ok = validate(res.body);
    expect(ok ? [] : validate.errors!.map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`), `${method} ${path} → ${res.status}: ${JSON.stringify(res.body)}`).toEqual([]);
  }

  it('is a valid OpenAPI 3.1 document for a third-party validator', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['accountJwt', 'adminJwt', 'botToken', 'internal']);
    expect(doc.paths['/api/v1/bots/my'].get.security).toEqual([{ accountJwt: [] }]);
    expect(doc.paths['/api/v1/admin/bots'].get.security).toEqual([{ adminJwt: [] }]);
    expect(doc.paths['/api/v1/bots/getMe'].get.security).toEqual([{ botToken: [] }]);
    const getMe = doc.paths['/api/v1/bots/getMe'].get.responses;
    expect(getMe['200'].content['application/json'].schema.properties.ok).toEqual({ type: 'boolean', const: true });
    expect(Object.keys(getMe)).toEqual(expect.arrayContaining(['400', '401', '404', '409', '429']));
    expect(doc.components.schemas['botplatform.v1.CreateApplicationRequest'].required).toEqual(['name', 'username']);
  });

  it('describes what the service answers, nulls and errors included', async () => {
    const owner = client(h.url, ownerJwt);
    const admin = client(h.url, adminJwt);
    const created = await owner.post('/api/v1/bots/applications', { name: 'Schema', username: 'schema_bot' });
    expectConforms('/api/v1/bots/applications', 'post', created);
    const id = created.body.id as string;

    const pending = await owner.get(`/api/v1/bots/my/${id}`);
    expect(pending.body.contact).toBeNull();
    expect(pending.body.webhook).toBeNull();
    expectConforms('/api/v1/bots/my/{id}', 'get', pending);
    expectConforms('/api/v1/bots/my', 'get', await owner.get('/api/v1/bots/my'));
    expectConforms('/api/v1/admin/bots', 'get', await admin.get('/api/v1/admin/bots'));
    expectConforms('/api/v1/admin/bots/{id}/approve', 'post', await admin.post(`/api/v1/admin/bots/${id}/approve`));
    const approved = await owner.get(`/api/v1/bots/my/${id}`);
    expectConforms('/api/v1/bots/my/{id}', 'get', approved);
    expectConforms('/api/v1/bots/my/{id}/metrics', 'get', await owner.get(`/api/v1/bots/my/${id}/metrics`));

    const bot = client(h.url, approved.body.one_time_token);
    expectConforms('/api/v1/bots/getMe', 'get', await bot.get('/api/v1/bots/getMe'));
    expectConforms('/api/v1/bots/getWebhookInfo', 'post', await bot.post('/api/v1/bots/getWebhookInfo'));
    expectConforms('/api/v1/bots/getUpdates', 'post', await bot.post('/api/v1/bots/getUpdates', { timeout: 0 }));

    // Errors: each in its surface's envelope, under its own status.
    const invalid = await owner.post('/api/v1/bots/applications', { name: 'X', username: 'Bad' });
    expect(invalid.status).toBe(400);
    expectConforms('/api/v1/bots/applications', 'post', invalid);
    const taken = await owner.post('/api/v1/bots/applications', { name: 'X', username: 'schema_bot' });
    expect(taken.status).toBe(409);
    expectConforms('/api/v1/bots/applications', 'post', taken);
    const anonymous = await call(h.url, 'GET', '/api/v1/bots/my');
    expect(anonymous.status).toBe(401);
    expectConforms('/api/v1/bots/my', 'get', anonymous);
    const forbidden = await owner.get('/api/v1/admin/bots');
    expect(forbidden.status).toBe(403);
    expectConforms('/api/v1/admin/bots', 'get', forbidden);
    const missing = await owner.get('/api/v1/bots/my/00000000-0000-0000-0000-000000000000');
    expect(missing.status).toBe(404);
    expectConforms('/api/v1/bots/my/{id}', 'get', missing);
    const badPoll = await bot.post('/api/v1/bots/getUpdates', { limit: 101 });
    expect(badPoll.status).toBe(400);
    expectConforms('/api/v1/bots/getUpdates', 'post', badPoll);
    const badToken = await call(h.url, 'GET', '/api/v1/bots/getMe', { token: 'sbot_notatokennotatokennotatokennotatoken' });
    expect(badToken.status).toBe(401);
    expectConforms('/api/v1/bots/getMe', 'get', badToken);
  });

  it('publishes the limits the service enforces', async () => {
    const owner = client(h.url, ownerJwt);
    const create = doc.components.schemas['botplatform.v1.CreateApplicationRequest'].properties;
    expect(create.name).toMatchObject({ minLength: 1, maxLength: 100 });
    expect(create.username).toMatchObject({ minLength: 3, maxLength: 64, pattern: '^[a-z][a-z0-9_]*$' });
    let n = 0;
    const valid = () => ({ name: 'Limits', username: `limits_${n++}` });
    const filler = (field: string, length: number) =>
      field === 'avatar' ? `https://example.com/${'a'.repeat(length - 20)}` : 'a'.repeat(length);
    for (const [field, schema] of Object.entries(create) as [string, Json][]) {
      if (schema.maxLength !== undefined) {
        const over = await owner.post('/api/v1/bots/applications', { ...valid(), [field]: filler(field, schema.maxLength + 1) });
        expect(over.status, `${field} of ${schema.maxLength + 1}`).toBe(400);
        expect(over.body.error.details.map((d: { field: string }) => d.field)).toEqual([field]);
        const at = await owner.post('/api/v1/bots/applications', { ...valid(), [field]: filler(field, schema.maxLength) });
        expect(at.status, `${field} of ${schema.maxLength}: ${JSON.stringify(at.body)}`).toBe(201);
      }
      if (schema.minLength !== undefined && schema.minLength > 1) {
        const under = await owner.post('/api/v1/bots/applications', { ...valid(), [field]: filler(field, schema.minLength - 1) });
        expect(under.status, `${field} of ${schema.minLength - 1}`).toBe(400);
      }
    }

    const created = await owner.post('/api/v1/bots/applications', valid());
    await client(h.url, adminJwt).post(`/api/v1/admin/bots/${created.body.id}/approve`);
    const token = (await owner.get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token;
    const bot = client(h.url, token);
    const poll = doc.components.schemas['botplatform.v1.GetUpdatesRequest'].properties;
    expect(poll.limit).toMatchObject({ minimum: 1, maximum: 100 });
    expect(poll.timeout).toMatchObject({ minimum: 0, maximum: 50 });
    for (const field of ['limit', 'timeout']) {
      const { minimum, maximum } = poll[field];
      for (const bad of [minimum - 1, maximum + 1]) {
        const res = await bot.post('/api/v1/bots/getUpdates', { [field]: bad });
        expect(res.status, `${field} ${bad}`).toBe(400);
        expect(res.body.description).toContain(field);
      }
      const res = await bot.post('/api/v1/bots/getUpdates', field === 'limit' ? { limit: maximum, timeout: 0 } : { timeout: minimum });
      expect(res.status, `${field} at its bound`).toBe(200);
    }
    const list = doc.paths['/api/v1/bots/my'].get.parameters as Json[];
    const limit = list.find((p) => p.name === 'limit')!.schema;
    expect(limit).toMatchObject({ minimum: 1, maximum: 100 });
    expect((await owner.get(`/api/v1/bots/my?limit=${limit.maximum + 1}`)).status).toBe(400);
    expect((await owner.get(`/api/v1/bots/my?limit=${limit.maximum}`)).status).toBe(200);
  });

  it('drives the service through a client generated by openapi-typescript and openapi-fetch', async () => {
    const owner = createClient<paths>({ baseUrl: h.url, headers: { authorization: `Bearer ${ownerJwt}` } });
    const admin = createClient<paths>({ baseUrl: h.url, headers: { authorization: `Bearer ${adminJwt}` } });
    const created = await owner.POST('/api/v1/bots/applications', { body: { name: 'Generated', username: 'generated_bot' } });
    expect(created.error).toBeUndefined();
    const id = created.data!.id!;
    expect(created.data!.review_status).toBe('pending');

    const approved = await admin.POST('/api/v1/admin/bots/{id}/approve', { params: { path: { id } }, body: {} });
    expect(approved.error).toBeUndefined();
    expect(approved.data!.review_status).toBe('approved');

    const detail = await owner.GET('/api/v1/bots/my/{id}', { params: { path: { id } } });
    const token = detail.data!.one_time_token!;
    expect(token).toMatch(/^sbot_/);

    const bot = createClient<paths>({ baseUrl: h.url, headers: { authorization: `Bearer ${token}` } });
    const me = await bot.GET('/api/v1/bots/getMe');
    expect(me.error).toBeUndefined();
    expect(me.data).toMatchObject({ ok: true, result: { username: 'generated_bot', is_bot: true } });

    const refused = await owner.POST('/api/v1/bots/applications', { body: { name: 'Generated', username: 'generated_bot' } });
    expect(refused.response.status).toBe(409);
    expect(refused.error).toMatchObject({ error: { status: 'ALREADY_EXISTS', code: 409 } });
  });

  it('serves an interactive reference at /docs from its own assets', async () => {
    const page = await fetch(`${h.url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    const hardened = (res: Response) => [res.headers.get('x-content-type-options'), res.headers.get('referrer-policy')];
    expect(hardened(page)).toEqual(['nosniff', 'no-referrer']);
    expect(hardened(await fetch(`${h.url}/docs/`))).toEqual(['nosniff', 'no-referrer']);
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\//);
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toEqual(expect.arrayContaining(['/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css', '/docs/init.js']));
    for (const asset of assets) {
      const res = await fetch(h.url + asset);
      expect(res.status, asset).toBe(200);
      expect(hardened(res), asset).toEqual(['nosniff', 'no-referrer']);
      expect((await res.arrayBuffer()).byteLength, asset).toBeGreaterThan(0);
    }
    expect(await (await fetch(`${h.url}/docs/init.js`)).text()).toContain("url: '/api/v1/openapi.json'");
    expect((await fetch(`${h.url}/docs/nope.js`)).status).toBe(404);
  });
});
