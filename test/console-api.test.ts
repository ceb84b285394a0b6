/**
 * The console, admin and runtime-auth contract over real HTTP, run twice: with the
 * gateway calling the core in-process (role=all), and with a separate gateway
 * process role reaching the core over gRPC. Both must behave identically.
 */
import crypto from 'node:crypto';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, call, client, startHarness, type GatewayMode, type Harness } from './helpers/harness.js';

const modes: GatewayMode[] = ['in-process', 'separate-gateway'];

describe.each(modes)('console API (%s)', (mode) => {
  let h: Harness;
  let alice: ReturnType<typeof client>;
  let bob: ReturnType<typeof client>;
  let admin: ReturnType<typeof client>;
  let aliceJwt: string;

  beforeAll(async () => {
    h = await startHarness(mode);
    aliceJwt = await h.jwt('alice');
    alice = client(h.url, aliceJwt);
    bob = client(h.url, await h.jwt('bob'));
    admin = client(h.url, await h.jwt('root', { admin: true }));
  });
  afterAll(() => h?.close());

  const expectConsoleError = (res: { status: number; body: any }, status: number, grpcStatus: string, field?: string) => {
    expect(res.status).toBe(status);
    expect(res.body.error.code).toBe(status);
    expect(res.body.error.status).toBe(grpcStatus);
    expect(typeof res.body.error.message).toBe('string');
    if (field) expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
  };

  describe('create application', () => {
    it('creates a pending bot with no token', async () => {
      const res = await alice.post('/api/v1/bots/applications', {
        name: 'Weather', username: 'weather_bot', description: 'Forecasts', avatar: 'https://example.com/a.png',
      });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({
        name: 'Weather', username: 'weather_bot', description: 'Forecasts', avatar: 'https://example.com/a.png',
        review_status: 'pending', status: 'inactive', has_token: false, scopes: ['send', 'receive'], delivery_mode: 'polling',
      });
      expect(typeof res.body.id).toBe('string');
      expect(res.body.token_prefix).toBeNull();
      expect(res.body.one_time_token).toBeUndefined();
    });

    it('accepts the boundaries: 100-character name (code points), 3- and 64-character usernames', async () => {
      const emojiName = '🤖'.repeat(100);
      expect((await alice.post('/api/v1/bots/applications', { name: emojiName, username: 'abc' })).status).toBe(201);
      const long = `a${'b'.repeat(63)}`;
      const res = await alice.post('/api/v1/bots/applications', { name: 'x', username: long });
      expect(res.status).toBe(201);
      expect(res.body.username).toBe(long);
    });

    it.each([
      [{ username: 'no_name_bot' }, 'name', 'REQUIRED'],
      [{ name: '   ', username: 'blank_name' }, 'name', 'REQUIRED'],
      [{ name: 'x'.repeat(101), username: 'long_name' }, 'name', 'TOO_LONG'],
      [{ name: 'n' }, 'username', 'REQUIRED'],
      [{ name: 'n', username: 'Upper' }, 'username', 'INVALID_FORMAT'],
      [{ name: 'n', username: '1abc' }, 'username', 'INVALID_FORMAT'],
      [{ name: 'n', username: '_abc' }, 'username', 'INVALID_FORMAT'],
      [{ name: 'n', username: 'ab-cd' }, 'username', 'INVALID_FORMAT'],
      [{ name: 'n', username: 'abC' }, 'username', 'INVALID_FORMAT'],
      [{ name: 'n', username: 'ab' }, 'username', 'INVALID_LENGTH'],
      [{ name: 'n', username: `a${'b'.repeat(64)}` }, 'username', 'INVALID_LENGTH'],
      [{ name: 'n', username: 'avatar_http', avatar: 'http://example.com/a.png' }, 'avatar', 'INVALID_URL'],
      [{ name: 'n', username: 'avatar_bad', avatar: 'not a url' }, 'avatar', 'INVALID_URL'],
      [{ name: 'n', username: 'scopes_bad', scopes: ['admin'] }, 'scopes[0]', 'INVALID_VALUE'],
      [{ name: 123, username: 'typed' }, 'name', 'INVALID_TYPE'],
      [{ name: 'n', username: 'typed2', scopes: 'send' }, 'scopes', 'INVALID_TYPE'],
      [{ name: 'n', username: 'unknown_f', colour: 'red' }, 'colour', 'UNKNOWN_FIELD'],
    ])('refuses %j: 400 on %s (%s)', async (body, field, reason) => {
      const res = await alice.post('/api/v1/bots/applications', body);
      expectConsoleError(res, 400, 'INVALID_ARGUMENT', field);
      expect(res.body.error.details.find((d: { field: string }) => d.field === field).reason).toBe(reason);
      expect(res.body.error.message).toContain(field);
    });

    it('explains the username rule in the contract\'s words', async () => {
      const res = await alice.post('/api/v1/bots/applications', { name: 'n', username: '9lives' });
      expect(res.body).toEqual({
        error: {
          code: 400, status: 'INVALID_ARGUMENT', message: 'username: must start with a lowercase letter',
          details: [{ field: 'username', reason: 'INVALID_FORMAT' }],
        },
      });
    });

    it('answers 409 ALREADY_EXISTS for a taken username, whoever holds it', async () => {
      expect((await alice.post('/api/v1/bots/applications', { name: 'A', username: 'taken_name' })).status).toBe(201);
      expectConsoleError(await bob.post('/api/v1/bots/applications', { name: 'B', username: 'taken_name' }), 409, 'ALREADY_EXISTS', 'username');
    });

    it('refuses malformed JSON, a non-object body, a non-JSON content type and an oversized body', async () => {
      expectConsoleError(await call(h.url, 'POST', '/api/v1/bots/applications', { token: aliceJwt, rawBody: '{"name": ' }), 400, 'INVALID_ARGUMENT');
      expectConsoleError(await call(h.url, 'POST', '/api/v1/bots/applications', { token: aliceJwt, rawBody: '[1,2]' }), 400, 'INVALID_ARGUMENT');
      const text = await call(h.url, 'POST', '/api/v1/bots/applications', {
        token: aliceJwt, rawBody: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      expect(text.status).toBe(415);
      expect(text.body.error.message).toMatch(/application\/json/);
      const big = await alice.post('/api/v1/bots/applications', { name: 'n', username: 'big_body', description: 'x'.repeat(2 * 1024 * 1024) });
      expectConsoleError(big, 413, 'INVALID_ARGUMENT');
    });

    it('refuses an empty body as missing fields, not as a crash', async () => {
      const res = await call(h.url, 'POST', '/api/v1/bots/applications', { token: aliceJwt });
      expectConsoleError(res, 400, 'INVALID_ARGUMENT', 'name');
    });
  });

  describe('authentication', () => {
    it('401 with WWW-Authenticate for no credential, garbage, a foreign signature, an expired JWT, alg none and a bot token', async () => {
      const foreign = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('alice').setExpirationTime('1h')
        .sign(new TextEncoder().encode('another-secret-another-secret-another-secret'));
      const expired = await h.jwt('alice', { expiresIn: '-10s' });
      const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${Buffer.from(JSON.stringify({ sub: 'alice', exp: 9999999999 })).toString('base64url')}.`;
      const { token } = await approvedBot(h, aliceJwt, 'auth_probe_bot');
      for (const credential of [undefined, 'garbage', foreign, expired, none, token]) {
        const res = await call(h.url, 'GET', '/api/v1/bots/my', { token: credential });
        expectConsoleError(res, 401, 'UNAUTHENTICATED');
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
        expect(JSON.stringify(res.body)).not.toContain(token);
      }
      const basic = await call(h.url, 'GET', '/api/v1/bots/my', { headers: { authorization: 'Basic YWxpY2U6eA==' } });
      expectConsoleError(basic, 401, 'UNAUTHENTICATED');
    });

    it('a JWT without exp is refused', async () => {
      const noExp = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('alice')
        .sign(new TextEncoder().encode(h.env.AUTH_JWT_SECRET));
      expectConsoleError(await call(h.url, 'GET', '/api/v1/bots/my', { token: noExp }), 401, 'UNAUTHENTICATED');
    });

    it('a JWT whose sub is not a non-empty string is 401 on every console call, and leaves no row behind', async () => {
      const signed = (claims: Record<string, unknown>) =>
        new SignJWT({ exp: Math.floor(Date.now() / 1000) + 600, ...claims }).setProtectedHeader({ alg: 'HS256' })
          .sign(new TextEncoder().encode(h.env.AUTH_JWT_SECRET));
      const totalBots = async () => (await admin.get('/api/v1/admin/bots?limit=1')).body.pagination.total as number;
      const before = await totalBots();
      const subs: unknown[] = [['a'], true, 1, '', {}, null];
      for (const [i, sub] of subs.entries()) {
        for (const claims of [{ sub }, { sub, roles: ['admin'] }]) {
          const jwt = await signed(claims);
          const created = await call(h.url, 'POST', '/api/v1/bots/applications', { token: jwt, body: { name: 'Ghost', username: `ghost_sub_${i}` } });
          expectConsoleError(created, 401, 'UNAUTHENTICATED');
          expect(created.headers.get('www-authenticate')).toBe('Bearer');
          expectConsoleError(await call(h.url, 'GET', '/api/v1/bots/my', { token: jwt }), 401, 'UNAUTHENTICATED');
          expectConsoleError(await call(h.url, 'GET', '/api/v1/admin/bots', { token: jwt }), 401, 'UNAUTHENTICATED');
        }
      }
      expect(await totalBots()).toBe(before);
      // The username is still free: nothing was written under it.
      expect((await alice.post('/api/v1/bots/applications', { name: 'Real', username: 'ghost_sub_0' })).status).toBe(201);
      // A numeric sub is not the account whose id is that number spelled as a string.
      const one = client(h.url, await h.jwt('1'));
      expect((await one.post('/api/v1/bots/applications', { name: 'One', username: 'account_one_bot' })).status).toBe(201);
      expectConsoleError(await call(h.url, 'GET', '/api/v1/bots/my', { token: await signed({ sub: 1 }) }), 401, 'UNAUTHENTICATED');
    });

    it('a roles claim that is not an array is refused, not read as admin', async () => {
      const jwt = await new SignJWT({ roles: 'admin' }).setProtectedHeader({ alg: 'HS256' }).setSubject('root')
        .setExpirationTime('1h').sign(new TextEncoder().encode(h.env.AUTH_JWT_SECRET));
      expectConsoleError(await call(h.url, 'GET', '/api/v1/admin/bots', { token: jwt }), 401, 'UNAUTHENTICATED');
    });

    it('admin endpoints need the admin role: 403 without it', async () => {
      expectConsoleError(await alice.get('/api/v1/admin/bots'), 403, 'PERMISSION_DENIED');
      expect((await admin.get('/api/v1/admin/bots')).status).toBe(200);
    });
  });

  describe('listing and reading', () => {
    it('lists only the caller\'s bots, newest first, paginated', async () => {
      const carol = client(h.url, await h.jwt('carol'));
      for (const u of ['carol_one', 'carol_two', 'carol_three']) {
        expect((await carol.post('/api/v1/bots/applications', { name: u, username: u })).status).toBe(201);
      }
      const all = await carol.get('/api/v1/bots/my');
      expect(all.status).toBe(200);
      expect(all.body.items.map((b: { username: string }) => b.username)).toEqual(['carol_three', 'carol_two', 'carol_one']);
      expect(all.body.items[0]).toMatchObject({ review_status: 'pending', status: 'inactive', has_token: false });
      expect(all.body.pagination).toEqual({ page: 1, limit: 20, total: 3, has_more: false });
      const page = await carol.get('/api/v1/bots/my?page=2&limit=2');
      expect(page.body.items.map((b: { username: string }) => b.username)).toEqual(['carol_one']);
      expect(page.body.pagination).toEqual({ page: 2, limit: 2, total: 3, has_more: false });
      const first = await carol.get('/api/v1/bots/my?limit=2');
      expect(first.body.pagination.has_more).toBe(true);
      const dave = client(h.url, await h.jwt('dave'));
      expect((await dave.get('/api/v1/bots/my')).body).toEqual({ items: [], pagination: { page: 1, limit: 20, total: 0, has_more: false } });
    });

    it('list items carry every summary field, token_prefix null while there is no token (developer and admin lists)', async () => {
      const frank = client(h.url, await h.jwt('frank'));
      const pending = (await frank.post('/api/v1/bots/applications', { name: 'Frank', username: 'frank_summary_bot' })).body;
      expect(pending.token_prefix).toBeNull();
      const { id: approvedId } = await approvedBot(h, await h.jwt('frank'), 'frank_summary_ok');
      const SUMMARY = ['id', 'name', 'username', 'review_status', 'status', 'has_token', 'token_prefix'];
      const mine = (await frank.get('/api/v1/bots/my')).body.items as Record<string, unknown>[];
      const adminItems = (await admin.get('/api/v1/admin/bots?limit=100')).body.items as Record<string, unknown>[];
      for (const items of [mine, adminItems]) {
        const p = items.find((b) => b.id === pending.id)!;
        const a = items.find((b) => b.id === approvedId)!;
        for (const item of [p, a]) expect(Object.keys(item)).toEqual(expect.arrayContaining(SUMMARY));
        expect(p).toMatchObject({ review_status: 'pending', status: 'inactive', has_token: false, token_prefix: null });
        expect(a).toMatchObject({ review_status: 'approved', status: 'active', has_token: true, token_prefix: expect.stringMatching(/^sbot_.{7}$/) });
        expect(p.one_time_token).toBeUndefined();
      }
      expect((await frank.get(`/api/v1/bots/my/${pending.id}`)).body.token_prefix).toBeNull();
    });

    it('account ids are compared exactly: a sub differing in case or accents is another account', async () => {
      const erin = client(h.url, await h.jwt('erin'));
      const created = await erin.post('/api/v1/bots/applications', { name: 'Erin', username: 'erin_case_bot' });
      expect(created.status).toBe(201);
      for (const sub of ['ERIN', 'Erin', 'érin']) {
        const other = client(h.url, await h.jwt(sub));
        expect((await other.get('/api/v1/bots/my')).body.pagination.total).toBe(0);
        expectConsoleError(await other.get(`/api/v1/bots/my/${created.body.id}`), 404, 'NOT_FOUND');
      }
    });

    it.each(['limit=0', 'limit=101', 'page=0', 'page=-1', 'limit=abc', 'limit=1.5', 'sort=name'])('refuses ?%s with 400', async (q) => {
      expectConsoleError(await alice.get(`/api/v1/bots/my?${q}`), 400, 'INVALID_ARGUMENT');
    });

    it('another account\'s bot is 404, exactly like a bot that does not exist', async () => {
      const created = await alice.post('/api/v1/bots/applications', { name: 'Mine', username: 'alice_private' });
      const foreign = await bob.get(`/api/v1/bots/my/${created.body.id}`);
      const missing = await bob.get('/api/v1/bots/my/bot_doesnotexist');
      expectConsoleError(foreign, 404, 'NOT_FOUND');
      expect(foreign.body).toEqual(missing.body);
      expect(foreign.body.error.message).not.toContain(created.body.id);
      expect((await bob.patch(`/api/v1/bots/my/${created.body.id}`, { about: 'x' })).status).toBe(404);
      expect((await bob.post(`/api/v1/bots/my/${created.body.id}/regenerate-token`)).status).toBe(404);
    });

    it('every method that names an own bot answers one 404 for another account\'s bot, and one 409 for a bot not approved', async () => {
      const created = await alice.post('/api/v1/bots/applications', { name: 'Named', username: 'named_everywhere' });
      const id = created.body.id as string;
      type Client = ReturnType<typeof client>;
      const calls: [string, boolean, (c: Client, bot: string) => ReturnType<Client['get']>][] = [
        ['GetMyBot', false, (c, bot) => c.get(`/api/v1/bots/my/${bot}`)],
        ['UpdateMyBot', true, (c, bot) => c.patch(`/api/v1/bots/my/${bot}`, { about: 'x' })],
        ['RegenerateToken', true, (c, bot) => c.post(`/api/v1/bots/my/${bot}/regenerate-token`)],
        ['SetBotWebhook', true, (c, bot) => c.post(`/api/v1/bots/my/${bot}/webhook`, { url: 'https://example.com/hook', secret_token: 'secret_1' })],
        ['DeleteBotWebhook', true, (c, bot) => c.del(`/api/v1/bots/my/${bot}/webhook`)],
        ['EnableBotWebhook', true, (c, bot) => c.post(`/api/v1/bots/my/${bot}/webhook/enable`)],
        ['CreateTestUpdate', true, (c, bot) => c.post(`/api/v1/bots/my/${bot}/test-updates`, { text: 'hi' })],
        ['ListDeliveries', false, (c, bot) => c.get(`/api/v1/bots/my/${bot}/deliveries`)],
        ['RetryDelivery', false, (c, bot) => c.post(`/api/v1/bots/my/${bot}/deliveries/dlv_nope/retry`)],
        ['RecoverDeliveries', false, (c, bot) => c.post(`/api/v1/bots/my/${bot}/deliveries/recover`, { since: '2020-01-01T00:00:00Z' })],
        ['GetBotMetrics', false, (c, bot) => c.get(`/api/v1/bots/my/${bot}/metrics`)],
      ];
      const missing = (await alice.get('/api/v1/bots/my/bot_doesnotexist')).body;
      expect(missing.error.message).toBe('bot not found');
      for (const [rpc, needsApproval, send] of calls) {
        const foreign = await send(bob, id);
        expect(foreign.status, rpc).toBe(404);
        expect(foreign.body, rpc).toEqual(missing);
        if (!needsApproval) continue;
        const pending = await send(alice, id);
        expectConsoleError(pending, 409, 'FAILED_PRECONDITION');
        expect(pending.body.error.message, rpc).toBe('bot is not approved (review_status: pending)');
      }
    });

    it('the detail read shows command_menu, a null webhook and the profile', async () => {
      const created = await alice.post('/api/v1/bots/applications', { name: 'Detail', username: 'detail_bot' });
      const res = await alice.get(`/api/v1/bots/my/${created.body.id}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: created.body.id, command_menu: [], webhook: null, has_token: false });
    });
  });

  describe('review, tokens and runtime auth', () => {
    it('approval issues a token shown once on the next detail read; the token works on the runtime API', async () => {
      const created = await alice.post('/api/v1/bots/applications', { name: 'Echo', username: 'echo_once' });
      const id = created.body.id;
      const before = await alice.get(`/api/v1/bots/my/${id}`);
      expect(before.body.one_time_token).toBeUndefined();

      const approved = await admin.post(`/api/v1/admin/bots/${id}/approve`);
      expect(approved.status).toBe(200);
      expect(approved.body).toMatchObject({ review_status: 'approved', status: 'active', has_token: true });
      expect(approved.body.one_time_token).toBeUndefined();

      const first = await alice.get(`/api/v1/bots/my/${id}`);
      const token: string = first.body.one_time_token;
      expect(token).toMatch(/^sbot_[0-9A-Za-z]{32,}$/);
      expect(first.body.token_prefix).toBe(token.slice(0, 12));
      expect(first.body.has_token).toBe(true);
      // Beside it, the same token in Telegram's "<bot user id>:<token>" form: taken on the
      // Telegram surface (getMe's id is that user id), not on the native API.
      const tgMe = await call(h.url, 'GET', `/bot${token}/getMe`);
      expect(first.body.telegram_token).toBe(`${tgMe.body.result.id}:${token}`);
      expect((await call(h.url, 'GET', `/bot${first.body.telegram_token}/getMe`)).body).toEqual(tgMe.body);
      expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token: first.body.telegram_token })).status).toBe(401);
      const second = await alice.get(`/api/v1/bots/my/${id}`);
      expect(second.body.one_time_token).toBeUndefined();
      expect(second.body.telegram_token).toBeUndefined();
      expect(second.body.token_prefix).toBe(token.slice(0, 12));

      const me = await client(h.url, token).post('/api/v1/bots/getMe');
      expect(me.status).toBe(200);
      expect(me.body).toEqual({ ok: true, result: { id, is_bot: true, name: 'Echo', username: 'echo_once', supports_inline_queries: false, can_join_groups: true } });
      expect((await client(h.url, token).get('/api/v1/bots/getMe')).body.result.id).toBe(id);

      const listed = await alice.get('/api/v1/bots/my');
      const summary = listed.body.items.find((b: { id: string }) => b.id === id);
      expect(summary).toMatchObject({ has_token: true, token_prefix: token.slice(0, 12), status: 'active' });
      expect(JSON.stringify(listed.body)).not.toContain(token);
    });

    it('regenerate-token returns a new token; the old one answers 401 at once; the detail read does not show it', async () => {
      const { id, token: old } = await approvedBot(h, aliceJwt, 'regen_bot');
      const res = await alice.post(`/api/v1/bots/my/${id}/regenerate-token`);
      expect(res.status).toBe(200);
      expect(Object.keys(res.body).sort()).toEqual(['bot_id', 'one_time_token', 'telegram_token', 'token_prefix']);
      expect(res.body.bot_id).toBe(id);
      expect(res.body.one_time_token).not.toBe(old);
      expect(res.body.token_prefix).toBe(res.body.one_time_token.slice(0, 12));
      const stale = await client(h.url, old).post('/api/v1/bots/getMe');
      expect(stale.status).toBe(401);
      expect(stale.body).toMatchObject({ ok: false, error_code: 401 });
      expect(stale.headers.get('www-authenticate')).toBe('Bearer');
      expect((await client(h.url, res.body.one_time_token).post('/api/v1/bots/getMe')).status).toBe(200);
      expect(res.body.telegram_token).toMatch(new RegExp(`^\\d+:${res.body.one_time_token}$`));
      expect((await call(h.url, 'GET', `/bot${res.body.telegram_token}/getMe`)).status).toBe(200);
      expect((await call(h.url, 'GET', `/bot${res.body.telegram_token.replace(/^\d+/, '1')}/getMe`)).status).toBe(401);
      expect((await alice.get(`/api/v1/bots/my/${id}`)).body.one_time_token).toBeUndefined();
    });

    it('runtime credentials: none, garbage, an account JWT and an unknown token are 401 in the runtime envelope', async () => {
      for (const credential of [undefined, 'nonsense', aliceJwt, `sbot_${'x'.repeat(40)}`]) {
        const res = await call(h.url, 'POST', '/api/v1/bots/getMe', { token: credential });
        expect(res.status).toBe(401);
        expect(res.body.ok).toBe(false);
        expect(res.body.error_code).toBe(401);
        expect(res.body.description).toMatch(/^Unauthorized: /);
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
      }
      const jwtRes = await call(h.url, 'POST', '/api/v1/bots/getMe', { token: aliceJwt });
      expect(jwtRes.body.description).toBe('Unauthorized: account JWTs are not accepted on the runtime API');
    });

    it('an unknown runtime method is 404 in the runtime envelope; an unknown console path in the console envelope', async () => {
      const { token } = await approvedBot(h, aliceJwt, 'unknown_method_bot');
      const res = await client(h.url, token).post('/api/v1/bots/sendSmokeSignal', {});
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ ok: false, error_code: 404 });
      expectConsoleError(await alice.get('/api/v1/bots/my/x/y/z'), 404, 'NOT_FOUND');
    });

    it('an unknown path is 404 in its envelope without echoing the path (it may carry a token)', async () => {
      const { token } = await approvedBot(h, aliceJwt, 'unknown_path_bot');
      const consolePath = await alice.get(`/api/v1/bots/my/x/${token}/z?secret=${token}`);
      expectConsoleError(consolePath, 404, 'NOT_FOUND');
      // Under /api/v1/files/ (signed URLs, whose path is a grant) the runtime envelope, as its routes.
      const filesPath = await call(h.url, 'GET', `/api/v1/files/download/${token}/extra`);
      expect(filesPath.status).toBe(404);
      expect(filesPath.body).toMatchObject({ ok: false, error_code: 404 });
      // A Telegram habit: the token in the path instead of the header.
      const runtimePath = await call(h.url, 'POST', `/api/v1/bots/bot${token}/getMe`, { body: {} });
      expect(runtimePath.status).toBe(404);
      expect(runtimePath.body).toMatchObject({ ok: false, error_code: 404 });
      for (const res of [consolePath, filesPath, runtimePath]) expect(JSON.stringify(res.body)).not.toContain(token.slice(5));
    });

    it('an undecodable or over-long path parameter is a 400/414 in the contract\'s envelope, not Fastify\'s, and is not echoed', async () => {
      const bad = await alice.get('/api/v1/bots/my/%E0%A4%A-sbot_secretish');
      expectConsoleError(bad, 400, 'INVALID_ARGUMENT');
      expect(JSON.stringify(bad.body)).not.toContain('secretish');
      const long = await alice.get(`/api/v1/bots/my/${'s'.repeat(3000)}`);
      expectConsoleError(long, 414, 'INVALID_ARGUMENT');
      expect(JSON.stringify(long.body)).not.toContain('s'.repeat(100));
      const runtime = await call(h.url, 'GET', `/api/v1/files/download/${'g'.repeat(3000)}`);
      expect(runtime.status).toBe(414);
      expect(runtime.body).toMatchObject({ ok: false, error_code: 414 });
      expect(JSON.stringify(runtime.body)).not.toContain('g'.repeat(100));
    });

    it('PATCH and regenerate-token need an approved bot (409); approve and reject need a pending one (409)', async () => {
      const created = await alice.post('/api/v1/bots/applications', { name: 'Pending', username: 'pending_bot' });
      const id = created.body.id;
      expectConsoleError(await alice.patch(`/api/v1/bots/my/${id}`, { about: 'x' }), 409, 'FAILED_PRECONDITION');
      expectConsoleError(await alice.post(`/api/v1/bots/my/${id}/regenerate-token`), 409, 'FAILED_PRECONDITION');
      const rejected = await admin.post(`/api/v1/admin/bots/${id}/reject`, { reason: 'Name is misleading' });
      expect(rejected.status).toBe(200);
      expect(rejected.body).toMatchObject({ review_status: 'rejected', review_reason: 'Name is misleading', has_token: false });
      expectConsoleError(await admin.post(`/api/v1/admin/bots/${id}/approve`), 409, 'FAILED_PRECONDITION');
      expectConsoleError(await admin.post(`/api/v1/admin/bots/${id}/reject`, { reason: 'again' }), 409, 'FAILED_PRECONDITION');
      expectConsoleError(await alice.patch(`/api/v1/bots/my/${id}`, { about: 'x' }), 409, 'FAILED_PRECONDITION');
      expectConsoleError(await admin.post('/api/v1/admin/bots/bot_nope/approve'), 404, 'NOT_FOUND');
      const other = await alice.post('/api/v1/bots/applications', { name: 'P2', username: 'pending_two' });
      expectConsoleError(await admin.post(`/api/v1/admin/bots/${other.body.id}/reject`, {}), 400, 'INVALID_ARGUMENT', 'reason');
    });

    it('admin listing filters by review_status and refuses an unknown one', async () => {
      const res = await admin.get('/api/v1/admin/bots?review_status=rejected&limit=100');
      expect(res.status).toBe(200);
      expect(res.body.items.length).toBeGreaterThan(0);
      expect(res.body.items.every((b: { review_status: string }) => b.review_status === 'rejected')).toBe(true);
      expectConsoleError(await admin.get('/api/v1/admin/bots?review_status=maybe'), 400, 'INVALID_ARGUMENT', 'review_status');
    });
  });

  describe('text inputs', () => {
    // Raw JSON with escapes: "\u0000" is a NUL, a lone "\ud800" or "\udc00" an unpaired surrogate.
    const BAD = [['a NUL', 'a\\u0000b'], ['a lone high surrogate', 'a\\ud800b'], ['a lone low surrogate', 'a\\udc00b']] as const;
    const raw = (method: string, path: string, json: string, token = aliceJwt) =>
      call(h.url, method, path, { token, rawBody: json });

    it.each(BAD)('a bot name or description with %s is a 400 naming the field, and nothing is created', async (_what, bad) => {
      const before = (await alice.get('/api/v1/bots/my?limit=1')).body.pagination.total;
      const tag = crypto.randomBytes(3).toString('hex');
      expectConsoleError(await raw('POST', '/api/v1/bots/applications', `{"name":"${bad}","username":"bad_name_${tag}"}`), 400, 'INVALID_ARGUMENT', 'name');
      expectConsoleError(
        await raw('POST', '/api/v1/bots/applications', `{"name":"ok","username":"bad_desc_${tag}","description":"${bad}"}`),
        400, 'INVALID_ARGUMENT', 'description',
      );
      expect((await alice.get('/api/v1/bots/my?limit=1')).body.pagination.total).toBe(before);
    });

    it.each(BAD)('profile texts with %s are refused with the field named', async (_what, bad) => {
      const { id } = await approvedBot(h, aliceJwt, `texts_${crypto.randomBytes(3).toString('hex')}`);
      const cases: [string, string][] = [
        [`{"name":"${bad}"}`, 'name'],
        [`{"description":"${bad}"}`, 'description'],
        [`{"short_description":"${bad}"}`, 'short_description'],
        [`{"about":"${bad}"}`, 'about'],
        [`{"links":[{"title":"${bad}","url":"https://example.com"}]}`, 'links[0].title'],
        [`{"links":[{"title":"t","url":"https://example.com/${bad}"}]}`, 'links[0].url'],
        [`{"contact":{"note":"${bad}"}}`, 'contact.note'],
        [`{"contact":{"email":"${bad}@example.com"}}`, 'contact.email'],
        [`{"command_menu":[{"command":"start","description":"${bad}"}]}`, 'command_menu[0].description'],
      ];
      for (const [json, field] of cases) {
        expectConsoleError(await raw('PATCH', `/api/v1/bots/my/${id}`, json), 400, 'INVALID_ARGUMENT', field);
      }
      const detail = (await alice.get(`/api/v1/bots/my/${id}`)).body;
      expect(detail).toMatchObject({ name: expect.stringMatching(/^Bot texts_/), links: [], command_menu: [] });
      expect(detail.about).toBeUndefined();
    });

    it.each(BAD)('a reject reason and a test-update text with %s are refused with the field named', async (_what, bad) => {
      const pending = await alice.post('/api/v1/bots/applications', { name: 'R', username: `reason_${crypto.randomBytes(3).toString('hex')}` });
      const adminJwt = await h.jwt('root', { admin: true });
      expectConsoleError(await raw('POST', `/api/v1/admin/bots/${pending.body.id}/reject`, `{"reason":"${bad}"}`, adminJwt), 400, 'INVALID_ARGUMENT', 'reason');
      expect((await alice.get(`/api/v1/bots/my/${pending.body.id}`)).body.review_status).toBe('pending');

      const { id } = await approvedBot(h, aliceJwt, `testupd_${crypto.randomBytes(3).toString('hex')}`);
      expectConsoleError(await raw('POST', `/api/v1/bots/my/${id}/test-updates`, `{"text":"${bad}"}`), 400, 'INVALID_ARGUMENT', 'text');
      expectConsoleError(
        await raw('POST', `/api/v1/bots/my/${id}/test-updates`, `{"text":"hi","from":{"id":5,"is_bot":false,"first_name":"${bad}"}}`),
        400, 'INVALID_ARGUMENT', 'from.first_name',
      );
    });

    it('texts in any script, with emoji and line breaks, are kept as sent', async () => {
      const name = 'Бот 🤖 ボット عربي';
      const description = 'Line one\nLine two — “quoted” 👩‍👩‍👧';
      const res = await alice.post('/api/v1/bots/applications', { name, username: 'unicode_ok_bot', description });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ name, description });
    });
  });

  describe('profile update', () => {
    it('updates every optional profile field and leaves the others alone', async () => {
      const { id } = await approvedBot(h, aliceJwt, 'profile_bot');
      const patch = {
        name: 'Profile Bot', description: 'Long text', avatar: 'https://cdn.example.com/a.png',
        short_description: 'Short', about: 'About', cover_url: 'https://cdn.example.com/c.png',
        links: [{ title: 'Docs', url: 'https://example.com/docs' }],
        contact: { email: 'ops@example.com', url: 'https://example.com/support' },
        supports_inline_queries: true, friend_request_mode: 'auto_accept', group_privacy: false, can_join_groups: false,
        command_menu: [{ command: 'start', description: 'Start talking' }, { command: 'help', description: 'Help' }],
      };
      const res = await alice.patch(`/api/v1/bots/my/${id}`, patch);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ ...patch, username: 'profile_bot', review_status: 'approved' });
      const again = await alice.patch(`/api/v1/bots/my/${id}`, { about: 'New about', cover_url: null });
      const { cover_url: _cleared, ...kept } = patch;
      expect(again.body).toMatchObject({ ...kept, about: 'New about' });
      expect(again.body.cover_url).toBeUndefined();
      expect((await alice.get(`/api/v1/bots/my/${id}`)).body.command_menu).toEqual(patch.command_menu);
    });

    it('getMe shows a profile change at once, though it answered from a kept principal just before', async () => {
      const { id, token } = await approvedBot(h, aliceJwt, 'getme_fresh_bot');
      const bot = client(h.url, token);
      expect((await bot.post('/api/v1/bots/getMe')).body.result).toMatchObject({ name: expect.any(String), can_join_groups: true });
      expect((await bot.post('/api/v1/bots/getMe')).status).toBe(200); // answered from the kept principal
      const patched = await alice.patch(`/api/v1/bots/my/${id}`, { name: 'Renamed Bot', supports_inline_queries: true, can_join_groups: false });
      expect(patched.status).toBe(200);
      expect((await bot.post('/api/v1/bots/getMe')).body).toEqual({
        ok: true, result: { id, is_bot: true, name: 'Renamed Bot', username: 'getme_fresh_bot', supports_inline_queries: true, can_join_groups: false },
      });
    });

    it.each([
      [{ username: 'renamed' }, 'username'],
      [{ name: '' }, 'name'],
      [{ name: 'x'.repeat(101) }, 'name'],
      [{ avatar: 'ftp://example.com/a' }, 'avatar'],
      [{ avatar: 'https://cdn.exam\tple.com/a.png' }, 'avatar'], // the URL parser would silently drop the tab
      [{ cover_url: 'https://cdn.example.com/c.png\n' }, 'cover_url'],
      [{ short_description: 'x'.repeat(121) }, 'short_description'],
      [{ about: 'x'.repeat(513) }, 'about'],
      [{ links: [{ title: 'x', url: 'http://insecure.example.com' }] }, 'links[0].url'],
      [{ links: Array.from({ length: 11 }, () => ({ title: 't', url: 'https://e.com' })) }, 'links'],
      [{ contact: { email: 'not-an-email' } }, 'contact.email'],
      [{ contact: {} }, 'contact'],
      [{ friend_request_mode: 'sometimes' }, 'friend_request_mode'],
      [{ group_privacy: 'yes' }, 'group_privacy'],
      [{ command_menu: [{ command: 'Start!', description: 'x' }] }, 'command_menu[0].command'],
      [{ command_menu: [{ command: 'a', description: 'x' }, { command: 'a', description: 'y' }] }, 'command_menu[1].command'],
      [{ review_status: 'approved' }, 'review_status'],
    ])('refuses %j with 400 on %s and changes nothing', async (body, field) => {
      const { id } = await approvedBot(h, aliceJwt, `p_${Math.random().toString(36).slice(2, 10)}`);
      const before = await alice.get(`/api/v1/bots/my/${id}`);
      const res = await alice.patch(`/api/v1/bots/my/${id}`, { about: 'should not stick', ...body });
      expectConsoleError(res, 400, 'INVALID_ARGUMENT', field);
      const after = await alice.get(`/api/v1/bots/my/${id}`);
      expect(after.body.about).toBeUndefined();
      expect(after.body.updated_at).toBe(before.body.updated_at);
    });
  });

  it('serves /healthz and the OpenAPI document', async () => {
    const health = await call(h.url, 'GET', '/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: 'ok' });
    const doc = await call(h.url, 'GET', '/api/v1/openapi.json');
    expect(doc.status).toBe(200);
    expect(Object.keys(doc.body.paths)).toEqual(expect.arrayContaining(['/api/v1/bots/applications', '/api/v1/bots/my/{id}', '/api/v1/bots/getMe']));
  });
});
