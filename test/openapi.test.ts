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
import { routeTable } from '../gateway/generated/routes.js';
import http from 'node:http';
import { approvedBot, call, client, startHarness, type Harness, type HttpResult } from './helpers/harness.js';

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

  it('describes every route the gateway serves, the rich-message methods of issue 33 among them, and their answers conform', async () => {
    const missing = routeTable.routes.filter((r) => !doc.paths[r.template]?.[r.method.toLowerCase()]).map((r) => `${r.method} ${r.template}`);
    expect(missing).toEqual([]);
    for (const method of ['editMessageText', 'editMessageCaption', 'editMessageReplyMarkup', 'deleteMessage', 'deleteMessages', 'sendChatAction',
      'copyMessage', 'forwardMessage', 'getChat', 'sendMediaGroup', 'answerCallbackQuery', 'answerInlineQuery']) {
      const op = doc.paths[`/api/v1/bots/${method}`]?.post;
      expect(op, method).toBeDefined();
      expect(op.security, method).toEqual([{ botToken: [] }]);
      expect(op.requestBody.content['application/json'].schema, method).toBeDefined();
      expect(op.responses['200'], method).toBeDefined();
    }
    const list = doc.paths['/api/v1/bots/my/{id}/chats/{chat_id}/messages'].get;
    expect(list.parameters.map((p: Json) => p.name).sort()).toEqual(['chat_id', 'id', 'limit', 'page']);
    expect(doc.paths['/api/v1/bots/my/{id}/test-callback-queries'].post.security).toEqual([{ accountJwt: [] }]);
    // The update's new kinds and the message's keyboard are in the schemas.
    expect(Object.keys(doc.components.schemas['botplatform.v1.Update'].properties)).toEqual(expect.arrayContaining(['callback_query', 'inline_query', 'edited_message']));
    expect(Object.keys(doc.components.schemas['botplatform.v1.Message'].properties)).toEqual(expect.arrayContaining(['reply_markup', 'entities', 'edit_date']));

    const { id, token } = await approvedBot(h, ownerJwt, 'openapi_chat_list');
    const owner = client(h.url, ownerJwt);
    await owner.post(`/api/v1/bots/my/${id}/test-updates`, { text: 'hi' });
    const sent = await call(h.url, 'POST', '/api/v1/bots/sendMessage', {
      token, body: { chat_id: 100_000_001, text: '<b>menu</b>', parse_mode: 'HTML', reply_markup: { inline_keyboard: [{ buttons: [{ text: 'A', callback_data: 'a' }] }] } },
    });
    expect(sent.status).toBe(200);
    expectConforms('/api/v1/bots/sendMessage', 'post', sent);
    const listed = await owner.get(`/api/v1/bots/my/${id}/chats/100000001/messages`);
    expect(listed.status).toBe(200);
    expect(listed.body.items).toHaveLength(1);
    expectConforms('/api/v1/bots/my/{id}/chats/{chat_id}/messages', 'get', listed);
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

  /**
   * What the document says of a request: whether its body (undefined: none) is valid for
   * the operation, by the same third-party validator the answers are checked with.
   */
  function documentAccepts(path: string, method: string, body: unknown): boolean {
    const requestBody = doc.paths[path][method].requestBody;
    if (body === undefined) return !requestBody?.required;
    const defs = JSON.parse(JSON.stringify(doc.components.schemas).replaceAll('#/components/schemas/', '#/$defs/'));
    const schema = JSON.parse(JSON.stringify(requestBody.content['application/json'].schema).replaceAll('#/components/schemas/', '#/$defs/'));
    return ajv.compile({ ...schema, $defs: defs })(body) as boolean;
  }

  /** A request in any method (fetch refuses TRACE), raw body as given. */
  function raw(method: string, path: string, headers: Record<string, string> = {}, body?: string) {
    const url = new URL(path, h.url);
    return new Promise<{ status: number; allow: string | undefined; body: string }>((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, method, path: url.pathname + url.search, headers }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, allow: res.headers.allow, body: text }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  // One case per kind of disagreement an outside schemathesis run (full checks, 70,003
  // requests) found between the document and the service: each request is sent, and the
  // service accepts it exactly when the document says it is valid.
  it('accepts what it documents and refuses what it does not', async () => {
    const owner = client(h.url, ownerJwt);
    const { id, token } = await approvedBot(h, ownerJwt, 'agree_bot');
    const bot = client(h.url, token);
    const agree = async (path: string, method: string, send: () => Promise<HttpResult>, body: unknown, valid: boolean) => {
      expect(documentAccepts(path, method, body), `the document on ${method} ${path} ${JSON.stringify(body)}`).toBe(valid);
      const res = await send();
      if (valid) expect(res.status, `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
      else expect(res.status, `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`).toBe(400);
    };
    const post = (c: ReturnType<typeof client>, path: string, at = path) => (body: unknown, valid: boolean) =>
      agree(path, 'post', () => c.post(at, body), body, valid);
    let n = 0;
    const app = (extra: object) => ({ name: 'Agree', username: `agree_${n++}`, ...extra });
    const create = post(owner, '/api/v1/bots/applications');

    // Value lists: scopes and update kinds are enums in the document.
    await create(app({ scopes: ['send'] }), true);
    await create(app({ scopes: ['admin'] }), false);
    const poll = post(bot, '/api/v1/bots/getUpdates');
    await poll({ allowed_updates: ['message'] }, true);
    await poll({ allowed_updates: ['poll_answer'] }, false);
    // Rules across fields: tail and offset exclude each other.
    await poll({ tail: 1 }, true);
    await poll({ tail: 1, offset: 0 }, false);

    // Required strings are not empty; required ids are given, and not 0.
    await post(bot, '/api/v1/bots/getFile')({ file_id: '' }, false);
    const testUpdate = post(owner, '/api/v1/bots/my/{id}/test-updates', `/api/v1/bots/my/${id}/test-updates`);
    await testUpdate({ text: 'hi', from: { id: 7, is_bot: false } }, true);
    await testUpdate({ text: 'hi', from: { is_bot: false } }, false);
    await testUpdate({ text: 'hi', from: { id: 0, is_bot: false } }, false);
    await post(bot, '/api/v1/bots/sendMessage')({ chat_id: 0, text: 'x' }, false);

    // Text patterns: a single line holds no control character, and a name is not blank.
    await create(app({ name: 'a\u0001b' }), false);
    await create(app({ name: ' \u3000 ' }), false);
    await create(app({ name: 'Tab\u00a0name' }), true);
    await create(app({ description: 'two\nlines' }), true);
    await create(app({ description: 'nul\u0000' }), false);
    await create(app({ avatar: '' }), false);

    // A delivery window that ends before it starts is empty, not an error.
    const since = new Date().toISOString();
    const earlier = new Date(Date.now() - 60_000).toISOString();
    const window = await owner.get(`/api/v1/bots/my/${id}/deliveries?since=${since}&until=${earlier}`);
    expect(window.status).toBe(200);
    expect(window.body.items).toEqual([]);
    // A REQUIRED timestamp is not null, though a timestamp the service writes may be.
    const recover = post(owner, '/api/v1/bots/my/{id}/deliveries/recover', `/api/v1/bots/my/${id}/deliveries/recover`);
    await recover({ since: null }, false);

    // An update's body is an object (never null); null clears what may be cleared.
    const patch = (body: unknown, valid: boolean) => agree('/api/v1/bots/my/{id}', 'patch',
      () => call(h.url, 'PATCH', `/api/v1/bots/my/${id}`, { token: ownerJwt, rawBody: body === undefined ? undefined : JSON.stringify(body) }), body, valid);
    await patch({ description: null, supports_inline_queries: null }, true);
    await patch({ name: null }, false);
    await patch({ username: 'renamed_bot' }, false);
    await patch(null, false);
    await patch(undefined, false);

    // null is not a boolean (nor any value the document does not make nullable).
    const drop = (body: unknown, valid: boolean) => agree('/api/v1/bots/my/{id}/webhook', 'delete',
      () => owner.del(`/api/v1/bots/my/${id}/webhook`, body), body, valid);
    await drop({ drop_pending_updates: false }, true);
    await drop({ drop_pending_updates: null }, false);

    // A body the document requires must be there; whitespace alone is not a JSON document.
    await agree('/api/v1/bots/setMyCommands', 'post', () => bot.post('/api/v1/bots/setMyCommands'), undefined, false);
    await post(bot, '/api/v1/bots/setMyCommands')({}, false);
    await post(bot, '/api/v1/bots/setMyCommands')({ commands: [] }, true);
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token, rawBody: ' \n ' })).status).toBe(400);
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token, rawBody: '' })).status).toBe(200);

    // A bound the deployment sets (MAX_FILE_BYTES) is the served document's maximum.
    const size = doc.components.schemas['botplatform.v1.CreateUploadCredentialsRequest'].properties.fileSize;
    expect(size).toMatchObject({ minimum: 1, maximum: 2 ** 31, 'x-maximum-setting': 'MAX_FILE_BYTES' });
    const credentials = post(bot, '/api/v1/bots/files/upload-credentials');
    await credentials({ fileName: 'a.bin', fileSize: size.maximum, checksum: 'a'.repeat(64) }, true);
    await credentials({ fileName: 'a.bin', fileSize: size.maximum + 1, checksum: 'a'.repeat(64) }, false);

    // What the runtime API leaves out (an empty list of entities) is not required by the document.
    const sent = await bot.post('/api/v1/bots/sendMessage', { chat_id: 100_000_001, text: 'plain' }); // the test updates' chat
    expect(sent.status).toBe(200);
    expect(sent.body.result.entities).toBeUndefined();
    expectConforms('/api/v1/bots/sendMessage', 'post', sent);
  });

  it('answers a method a documented path does not take with 405 and the methods it takes in Allow', async () => {
    for (const [path, operations] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      const concrete = path.replace(/\{[^}]+\}/g, 'x1');
      const documented = Object.keys(operations).map((m) => m.toUpperCase());
      // QUERY without a Content-Type fails in Fastify before routing: still a 405.
      for (const method of ['TRACE', 'OPTIONS', 'QUERY', ...['PUT', 'PATCH', 'DELETE', 'POST'].filter((m) => !documented.includes(m))]) {
        const res = await raw(method, concrete, { authorization: `Bearer ${ownerJwt}` });
        expect(res.status, `${method} ${path}`).toBe(405);
        const allow = res.allow!.split(', ');
        expect(allow.sort(), `${method} ${path}`).toEqual([...documented, ...(documented.includes('GET') ? ['HEAD'] : [])].sort());
        expect(JSON.parse(res.body).error ?? JSON.parse(res.body).description, `${method} ${path}`).toBeDefined();
      }
    }
    // A path the document does not have is still a 404.
    expect((await raw('TRACE', '/api/v1/bots/my/x1/nothing')).status).toBe(404);
    expect((await raw('GET', '/api/v1/nothing')).status).toBe(404);
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
