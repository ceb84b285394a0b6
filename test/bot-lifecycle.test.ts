/**
 * A bot's whole life (issue 35): a pending application edited (and its scopes meaning
 * what they say) or withdrawn, a rejected one changed and resubmitted, an approved one
 * deleted: its token refused at once, its webhook stopped, its username reserved for its
 * owner until DELETED_BOT_RETENTION ends (compressed to 2 s in one harness), when the
 * sweep removes what is left and the username is free. Over HTTP and gRPC.
 */
import crypto from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleServiceClient, type CreateApplicationResponse, type DeleteBotResponse } from '../src/gen/botplatform/v1/console_service.js';
import { createDb } from '../src/storage/db.js';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';
import { startReceiver, type Receiver } from './helpers/receiver.js';
import { createTestPki, type TestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

const DAY = 86_400_000;

describe('a bot\'s whole life: edit, withdraw, resubmit, delete', () => {
  const harnesses: Harness[] = [];
  let h: Harness;
  let pki: TestPki;
  let owner: ReturnType<typeof client>;
  let ownerJwt: string;
  let admin: ReturnType<typeof client>;
  let stranger: ReturnType<typeof client>;
  const receivers: Receiver[] = [];

  async function start(extra: Record<string, string> = {}) {
    h = await startHarness('in-process', {
      WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_RETRY_SCHEDULE: '300ms,300ms,300ms,300ms', ...extra,
    });
    harnesses.push(h);
    ownerJwt = await h.jwt('lifecycle-owner');
    owner = client(h.url, ownerJwt);
    admin = client(h.url, await h.jwt('lifecycle-admin', { admin: true }));
    stranger = client(h.url, await h.jwt('lifecycle-stranger'));
  }
  beforeAll(async () => {
    pki = createTestPki();
    await start();
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    for (const x of harnesses) await x.close();
  });
  const apply = async (username: string, extra: object = {}) => {
    const r = await owner.post('/api/v1/bots/applications', { name: 'Life', username, ...extra });
    expect(r.status).toBe(201);
    return r.body as { id: string };
  };
  const edit = (id: string, body: object) => call(h.url, 'PATCH', `/api/v1/bots/my/${id}/application`, { token: ownerJwt, body });
  const remove = (id: string, as = ownerJwt) => call(h.url, 'DELETE', `/api/v1/bots/my/${id}`, { token: as, body: {} });

  it('a pending application is edited, its scopes meaning what they say; an approved one is not', async () => {
    const { id } = await apply('life_pending_bot');
    const changed = await edit(id, { name: 'Life, renamed', description: 'now described', scopes: ['send'], username: 'life_renamed_bot' });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ name: 'Life, renamed', description: 'now described', scopes: ['send'], username: 'life_renamed_bot', review_status: 'pending' });
    // An edit's empty list (or null) is refused, not taken for both.
    for (const scopes of [[], null]) {
      const none = await edit(id, { scopes });
      expect(none.status).toBe(400);
      expect(none.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', message: 'scopes: must name at least one of send, receive, or be left out' });
    }
    expect((await owner.get(`/api/v1/bots/my/${id}`)).body.scopes).toEqual(['send']);
    const bad = await edit(id, { username: 'Bad Name!' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.details[0].field).toBe('username');
    // description cleared by null; name cannot be cleared.
    expect((await edit(id, { description: null })).body.description).toBeUndefined();
    expect((await edit(id, { name: '' })).status).toBe(400);
    await apply('life_taken_bot');
    const taken = await edit(id, { username: 'life_taken_bot' });
    expect(taken.status).toBe(409);
    expect(taken.body.error.status).toBe('ALREADY_EXISTS');
    expect((await call(h.url, 'PATCH', `/api/v1/bots/my/${id}/application`, { token: await h.jwt('lifecycle-stranger'), body: { name: 'x' } })).status).toBe(404);

    const approved = await approvedBot(h, ownerJwt, 'life_approved_bot');
    const refused = await edit(approved.id, { name: 'Too late' });
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/the bot is approved: change its profile/);
  });

  it('an application created with scopes: [] over HTTP is refused naming the field; none given asks for both (gRPC cannot tell the two: both)', async () => {
    const none = await owner.post('/api/v1/bots/applications', { name: 'Life', username: 'life_no_scopes_bot', scopes: [] });
    expect(none.status).toBe(400);
    expect(none.body.error).toMatchObject({ status: 'INVALID_ARGUMENT', message: 'scopes: must name at least one of send, receive, or be left out' });
    expect(none.body.error.details).toEqual([expect.objectContaining({ field: 'scopes', reason: 'TOO_FEW' })]);
    // Nothing was created: the username is still free.
    expect((await apply('life_no_scopes_bot')).id).toBeTruthy();
    expect((await owner.post('/api/v1/bots/applications', { name: 'Life', username: 'life_one_scope_bot', scopes: ['receive'] })).body.scopes).toEqual(['receive']);
    expect((await owner.post('/api/v1/bots/applications', { name: 'Life', username: 'life_default_scopes_bot' })).body.scopes).toEqual(['send', 'receive']);
    const c = new ConsoleServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    try {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${ownerJwt}`);
      const created = await new Promise<CreateApplicationResponse>((resolve, reject) =>
        c.createApplication({ name: 'Life', username: 'life_grpc_scopes_bot', scopes: [] }, md, (err, r) => (err ? reject(err) : resolve(r))));
      expect(created.bot!.scopes).toEqual(['send', 'receive']);
    } finally {
      c.close();
    }
  });

  it('a rejected application is changed and resubmitted, and the reviewer approves it', async () => {
    const { id } = await apply('life_rejected_bot');
    expect((await owner.post(`/api/v1/bots/my/${id}/resubmit`, {})).status).toBe(409); // pending: nothing to resubmit
    expect((await admin.post(`/api/v1/admin/bots/${id}/reject`, { reason: 'Describe what it does' })).status).toBe(200);
    const rejected = (await owner.get(`/api/v1/bots/my/${id}`)).body;
    expect(rejected).toMatchObject({ review_status: 'rejected', review_reason: 'Describe what it does' });
    expect((await edit(id, { description: 'It echoes what you say.' })).body).toMatchObject({ review_status: 'rejected', description: 'It echoes what you say.' });
    const resubmitted = await owner.post(`/api/v1/bots/my/${id}/resubmit`, {});
    expect(resubmitted.status).toBe(200);
    expect(resubmitted.body.review_status).toBe('pending');
    expect(resubmitted.body.review_reason).toBeUndefined();
    const queue = (await admin.get('/api/v1/admin/bots?review_status=pending&limit=100')).body.items.map((b: { id: string }) => b.id);
    expect(queue).toContain(id);
    expect((await admin.post(`/api/v1/admin/bots/${id}/approve`, {})).body.review_status).toBe('approved');
    expect((await stranger.post(`/api/v1/bots/my/${id}/resubmit`, {})).status).toBe(404);
  });

  it('a pending application withdrawn: gone at once, its username free at once', async () => {
    const { id } = await apply('life_withdrawn_bot');
    const before = Date.now();
    const res = await remove(id);
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(id);
    expect(Date.parse(res.body.username_released_at)).toBeLessThanOrEqual(Date.now());
    expect(Date.parse(res.body.data_removed_at)).toBeGreaterThanOrEqual(before + 30 * DAY);
    expect((await owner.get(`/api/v1/bots/my/${id}`)).status).toBe(404);
    expect((await remove(id)).status).toBe(404);
    expect((await stranger.post('/api/v1/bots/applications', { name: 'Mine now', username: 'life_withdrawn_bot' })).status).toBe(201);
  });

  it('an approved bot deleted: token refused and webhook stopped at once; its username reserved for its owner; another account\'s delete is 404', async () => {
    const bot = await approvedBot(h, ownerJwt, 'life_deleted_bot');
    const receiver = await startReceiver(pki);
    receivers.push(receiver);
    receiver.always({ status: 500 });
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/webhook`, { url: receiver.url, secret_token: 'life_secret' })).status).toBe(200);
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'retry me' })).status).toBe(201);
    await receiver.waitFor(1);
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token: bot.token })).status).toBe(200);

    expect((await remove(bot.id, await h.jwt('lifecycle-stranger'))).status).toBe(404);
    const res = await remove(bot.id);
    expect(res.status).toBe(200);
    expect(res.body.username_released_at).toBe(res.body.data_removed_at);
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token: bot.token })).status).toBe(401);
    expect((await owner.get(`/api/v1/bots/my/${bot.id}`)).status).toBe(404);
    expect((await owner.get('/api/v1/bots/my?limit=100')).body.items.map((b: { id: string }) => b.id)).not.toContain(bot.id);
    // The retrying delivery is not attempted again.
    const seen = receiver.received.length;
    await new Promise((r) => setTimeout(r, 1200));
    expect(receiver.received.length).toBe(seen);

    const reserved = await stranger.post('/api/v1/bots/applications', { name: 'Impostor', username: 'life_deleted_bot' });
    expect(reserved.status).toBe(409);
    expect(reserved.body.error).toMatchObject({ status: 'ALREADY_EXISTS', details: [{ field: 'username', reason: 'RESERVED' }] });
    expect(reserved.body.error.message).toContain(`username: is reserved until ${res.body.data_removed_at}`);
    expect((await owner.post('/api/v1/bots/applications', { name: 'Back', username: 'life_deleted_bot' })).status).toBe(201);
  });

  it('over gRPC: DeleteBot answers the dates; NOT_FOUND for another account', async () => {
    const bot = await approvedBot(h, ownerJwt, 'life_grpc_bot');
    const c = new ConsoleServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    try {
      const md = (jwt: string) => {
        const m = new grpc.Metadata();
        m.set('authorization', `Bearer ${jwt}`);
        return m;
      };
      const del = (jwt: string) => new Promise<DeleteBotResponse>((resolve, reject) =>
        c.deleteBot({ id: bot.id }, md(jwt), (err, r) => (err ? reject(err) : resolve(r))));
      await expect(del(await h.jwt('lifecycle-stranger'))).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
      const res = await del(ownerJwt);
      expect(res.id).toBe(bot.id);
      expect(res.dataRemovedAt!.getTime()).toBeGreaterThan(Date.now() + 29 * DAY);
    } finally {
      c.close();
    }
    expect((await call(h.url, 'POST', '/api/v1/bots/getMe', { token: bot.token })).status).toBe(401);
  });

  it('after DELETED_BOT_RETENTION the sweep removes what is left and the username is free for anyone', async () => {
    await start({ DELETED_BOT_RETENTION: '2s' });
    const bot = await approvedBot(h, ownerJwt, 'life_purged_bot');
    const { update_id } = (await owner.post(`/api/v1/bots/my/${bot.id}/test-updates`, { text: 'kept until the purge' })).body;
    const sent = await call(h.url, 'POST', '/api/v1/bots/sendMessage', { token: bot.token, body: { chat_id: 100000001, text: 'a reply' } });
    expect(sent.status).toBe(200);
    expect((await call(h.url, 'POST', '/api/v1/bots/getUpdates', { token: bot.token, body: { offset: update_id + 1 } })).status).toBe(200);
    // A file of its own (an upload completed: its upload and its file recorded).
    const bytes = Buffer.from('the bot\'s own file');
    const checksum = crypto.createHash('sha256').update(bytes).digest('hex');
    const cred = await call(h.url, 'POST', '/api/v1/bots/files/upload-credentials', { token: bot.token, body: { fileName: 'own.txt', fileSize: bytes.length, checksum } });
    expect(cred.status).toBe(200);
    expect((await fetch(cred.body.result.uploadUrl, { method: 'PUT', headers: cred.body.result.headers, body: new Uint8Array(bytes) })).status).toBe(200);
    expect((await call(h.url, 'POST', '/api/v1/bots/files/complete', { token: bot.token, body: { checksum } })).status).toBe(200);
    // What the operator's database holds of the bot, table by table.
    const db = createDb(h.apps[0]!.config.database);
    // The tombstone read first: the purge removes every row in the transaction that drops it,
    // so once a read finds it gone, the reads after it see the purge whole.
    const rowsOf = async () => {
      const n: Record<string, number> = {};
      for (const table of ['deleted_bots', 'chats', 'messages', 'files', 'uploads', 'bot_stats']) {
        const key = table === 'deleted_bots' ? 'id' : 'bot_id';
        n[table] = Number((await db.query(db.knex(table).where(key, bot.id).count({ n: '*' })))[0]!.n);
      }
      return n;
    };
    try {
      // Its statistics reach the database within a second or two.
      await until(rowsOf, (n) => (n.bot_stats ?? 0) > 0, 10_000);
      const res = await remove(bot.id);
      expect(Date.parse(res.body.data_removed_at) - Date.now()).toBeLessThanOrEqual(2000);
      // Kept until data_removed_at (unless the sweep has already come by on a slow machine).
      const kept = await rowsOf();
      if (Date.now() < Date.parse(res.body.data_removed_at)) {
        expect(kept).toMatchObject({ deleted_bots: 1, files: 1, uploads: 1 });
        expect(kept.chats).toBeGreaterThan(0);
        expect(kept.messages).toBe(2); // the test message and the reply
      }
      expect((await stranger.post('/api/v1/bots/applications', { name: 'Early', username: 'life_purged_bot' })).status).toBe(409);
      const later = await until(
        () => stranger.post('/api/v1/bots/applications', { name: 'Later', username: 'life_purged_bot' }),
        (r) => r.status === 201, 10_000,
      );
      expect(later.status).toBe(201);
      // The purge removed its rows with the tombstone (the outbound feed keeps its messages).
      // (The username is free at data_removed_at; the sweep comes by within a second or so.)
      expect(await until(rowsOf, (n) => n.deleted_bots === 0, 10_000)).toEqual({ deleted_bots: 0, chats: 0, messages: 0, files: 0, uploads: 0, bot_stats: 0 });
    } finally {
      await db.destroy();
    }
  });
});
