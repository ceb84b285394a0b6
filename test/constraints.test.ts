/**
 * Every limit declared with (botplatform.v1.constraints) in the protos is the one
 * the service enforces. For each entry of the generated table (src/gen/constraints.ts)
 * and each of its keywords, the real API is driven — HTTP through the gateway, or
 * gRPC for what only InternalService reaches — with a value just outside the limit
 * (refused: 400 / INVALID_ARGUMENT naming the field) and just inside it (not refused
 * for that field, and accepted where the rest of the request allows it). A constraint
 * added to a proto without a case here fails the completeness check.
 */
import crypto from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { constraintTable, type FieldConstraints } from '../src/gen/constraints.js';
import { InternalServiceClient, type StreamIngestUpdatesResponse, IngestUpdatesRequest, StreamIngestUpdatesRequest } from '../src/gen/botplatform/v1/internal_service.js';
import { BadRequest } from '../src/gen/google/rpc/error_details.js';
import { fromServiceError } from '../src/grpc/status-details.js';
import { approvedBot, client, startHarness, TEST_INTERNAL_TOKEN, type Harness, type HttpResult } from './helpers/harness.js';

/** What a call answered: its status and the field paths a refusal names. */
interface Outcome { status: number | string; fields: string[] }

interface Case {
  /** Drives the API with the field set to `value`. */
  send: (value: unknown) => Promise<Outcome>;
  /** The field path a refusal names. */
  path: string;
  /** An otherwise valid value of n characters (length and pattern keywords). */
  text?: (n: number) => string;
  /** A value the pattern refuses (its length within the limits). */
  mismatch?: string;
  /** An otherwise valid entry number i of the list (max_items, min_items). */
  item?: (i: number) => unknown;
  /** The field's value of one of its allowed values (allowed_values): the value, or a list of it. */
  value?: (v: string) => unknown;
  /** The path a refusal of such a value names, when not `path` (an entry: "scopes[0]"). */
  valuePath?: string;
  /** A valid value (non_zero's inside). */
  valid?: unknown;
  /** Drives the API with the field set to `value` and the field it conflicts with set too (conflicts_with). */
  withOther?: (value: unknown) => Promise<Outcome>;
  /** False where a value inside the limits is still refused for another reason (e.g. no such upload). */
  acceptsInside?: boolean;
}

const SCOPES = ['send', 'receive'];
const sha256 = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');
let seq = 0;
/** A unique string of exactly n characters from `alphabet` (n >= 1). */
const unique = (n: number, prefix: string, fill: string) => (prefix + (seq++).toString(36) + fill.repeat(n)).slice(0, n);
const httpsUrl = (n: number, base = 'https://example.com/') => base + 'a'.repeat(n - base.length);
/** An https URL of n characters, of at least `base` and one more when n is shorter (a URL's min_length is 1), '' for 0. */
const url = (base = 'https://example.com/') => (n: number) => (n === 0 ? '' : httpsUrl(Math.max(n, base.length + 1), base));
/** Values the declared patterns refuse: a control character in a single line, NUL in any text. */
const line = { mismatch: 'a\u0001b' };
const text = { mismatch: 'a\u0000b' };
const email = (n: number) => `a@${'b'.repeat(n - 6)}.com`;
/** A MIME type of n characters (type and subtype at most 63 each). */
const mime = (n: number) => {
  const type = Math.min(63, n - 2);
  return `${'a'.repeat(type)}/${'b'.repeat(n - 1 - type)}`;
};

function consoleOutcome(res: HttpResult): Outcome {
  const details = (res.body?.error?.details ?? []) as { field: string }[];
  return { status: res.status, fields: res.status === 400 ? details.map((d) => d.field) : [] };
}

/** The runtime (Telegram) body names the first bad field: "Bad Request: <field>: <why>". */
function runtimeOutcome(res: HttpResult): Outcome {
  const field = /^Bad Request: ([^:\s]+): /.exec(String(res.body?.description ?? ''))?.[1];
  return { status: res.status, fields: res.status === 400 && field ? [field] : [] };
}

describe('constraints declared in the protos are the limits the API enforces', () => {
  let h: Harness;
  let internal: InternalServiceClient;
  /** The update_id of a delivery of ctx.hook (made in beforeAll). */
  let hookUpdateId = 0;
  /** An application still pending (made in beforeAll). */
  let pendingAppId = '';
  const ctx = {} as {
    owner: ReturnType<typeof client>;
    admin: ReturnType<typeof client>;
    main: { id: string; token: string };
    hook: { id: string; token: string };
    photoId: string;
    documentId: string;
    /** An image of ctx.inline's, for its photo results. */
    inlinePhotoId: string;
    /** A message of ctx.main in CHAT with callback buttons ('d', 64 × 'd'), and a bot in inline mode. */
    keyboard: number;
    inline: { id: string; token: string };
    /** Messages the main bot sent to CHAT: a text and a photo, to edit. */
    textMessage: number;
    photoMessage: number;
  };
  const CHAT = 100_000_001;
  /** The maximum the served OpenAPI document gives a field bounded by a setting (maximum_setting), by table entry. */
  const served: Record<string, number> = {};

  beforeAll(async () => {
    h = await startHarness('in-process', { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', LIMITS_ENABLED: 'false' });
    const ownerJwt = await h.jwt('constraints-owner');
    ctx.owner = client(h.url, ownerJwt);
    ctx.admin = client(h.url, await h.jwt('constraints-admin', { admin: true }));
    ctx.main = await approvedBot(h, ownerJwt, 'cons_main');
    ctx.hook = await approvedBot(h, ownerJwt, 'cons_hook');
    // A webhook to rotate the secret of (RotateWebhookSecretRequest's cases).
    expect((await ctx.owner.post(`/api/v1/bots/my/${ctx.hook.id}/webhook`, { url: 'https://127.0.0.1/hook', secret_token: 's' })).status).toBe(200);
    // A delivery whose attempts to list (ListDeliveryAttemptsRequest's cases).
    const delivered = await ctx.owner.post(`/api/v1/bots/my/${ctx.hook.id}/test-updates`, { text: 'to the webhook' });
    expect(delivered.status).toBe(201);
    hookUpdateId = delivered.body.update_id;
    // An application under review (ApplicationFields' cases edit it).
    const pending = await ctx.owner.post('/api/v1/bots/applications', { name: 'Pending', username: 'cons_pending_app' });
    expect(pending.status).toBe(201);
    pendingAppId = pending.body.id;
    internal = new InternalServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    // The test chat writes first: message 1 of the bot, in chat CHAT, which sends can reply to.
    expect((await ctx.owner.post(`/api/v1/bots/my/${ctx.main.id}/test-updates`, { text: 'hello' })).status).toBe(201);
    const rt = client(h.url, ctx.main.token);
    const upload = async (bytes: Buffer, fileType: string, as = rt) => {
      const cred = await as.post('/api/v1/bots/files/upload-credentials', { fileName: 'f', fileSize: bytes.length, checksum: sha256(bytes), fileType });
      const r = cred.body.result;
      expect((await fetch(r.uploadUrl, { method: 'PUT', headers: r.headers, body: new Uint8Array(bytes) })).status).toBe(200);
      const done = await as.post('/api/v1/bots/files/complete', { checksum: sha256(bytes) });
      expect(done.status).toBe(200);
      return done.body.result.file_id as string;
    };
    ctx.photoId = await upload(crypto.randomBytes(64), 'image/png');
    ctx.documentId = await upload(crypto.randomBytes(64), 'text/plain');
    const kb = await rt.post('/api/v1/bots/sendMessage', {
      chat_id: CHAT, text: 'k', reply_markup: { inline_keyboard: [{ buttons: [{ text: '1', callback_data: 'd' }, { text: '64', callback_data: 'd'.repeat(64) }] }] },
    });
    expect(kb.status).toBe(200);
    ctx.keyboard = kb.body.result.message_id;
    ctx.inline = await approvedBot(h, ownerJwt, 'cons_inline');
    expect((await ctx.owner.patch(`/api/v1/bots/my/${ctx.inline.id}`, { supports_inline_queries: true })).status).toBe(200);
    ctx.inlinePhotoId = await upload(crypto.randomBytes(64), 'image/png', client(h.url, ctx.inline.token));
    ctx.textMessage = (await rt.post('/api/v1/bots/sendMessage', { chat_id: CHAT, text: 'to edit' })).body.result.message_id;
    ctx.photoMessage = (await rt.post('/api/v1/bots/sendPhoto', { chat_id: CHAT, file_id: ctx.photoId, caption: 'to edit' })).body.result.message_id;
    const doc = (await client(h.url).get('/api/v1/openapi.json')).body;
    for (const [message, fields] of Object.entries(constraintTable)) {
      for (const [field, c] of Object.entries(fields)) {
        if (!c.maximumSetting) continue;
        const props = Object.values(doc.components.schemas[message].properties as Record<string, { maximum: number; 'x-maximum-setting'?: string }>);
        served[`${message}.${field}`] = props.find((p) => p['x-maximum-setting'] === c.maximumSetting)!.maximum;
      }
    }
  });
  afterAll(async () => {
    internal?.close();
    await h?.close();
  });

  const consoleCall = (method: 'post' | 'patch' | 'get', path: () => string, body?: (v: unknown) => object) =>
    async (v: unknown) => {
      const c = ctx.owner;
      const res = method === 'get' ? await c.get(`${path()}${String(v)}`) : await c[method](path(), body!(v));
      return consoleOutcome(res);
    };
  const runtime = (method: string, body: (v: unknown) => object, bot: () => { token: string } = () => ctx.main) =>
    async (v: unknown) => runtimeOutcome(await client(h.url, bot().token).post(`/api/v1/bots/${method}`, body(v)));
  const ingest = (updates: (v: unknown) => object[]) => (v: unknown) =>
    new Promise<Outcome>((resolve) => {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
      internal.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates: updates(v) }), md, (err) => {
        if (!err) return resolve({ status: 'OK', fields: [] });
        const e = fromServiceError(err);
        resolve({ status: grpc.status[err.code]!, fields: err.code === grpc.status.INVALID_ARGUMENT ? e.details.map((d) => d.field) : [] });
      });
    });
  const md = () => {
    const m = new grpc.Metadata();
    m.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
    return m;
  };
  const grpcOutcome = (err: grpc.ServiceError | null): Outcome => {
    if (!err) return { status: 'OK', fields: [] };
    const e = fromServiceError(err);
    return { status: grpc.status[err.code]!, fields: err.code === grpc.status.INVALID_ARGUMENT ? e.details.map((d) => d.field) : [] };
  };
  /** One batch over StreamIngestUpdates: its acknowledgement's error (a google.rpc.Status), or OK. */
  const streamIngest = (batch: (v: unknown) => object) => (v: unknown) =>
    new Promise<Outcome>((resolve) => {
      const stream = internal.streamIngestUpdates(md());
      const acks: StreamIngestUpdatesResponse[] = [];
      stream.on('data', (a: StreamIngestUpdatesResponse) => acks.push(a));
      stream.on('error', (err: grpc.ServiceError) => resolve(grpcOutcome(err)));
      stream.on('end', () => {
        const error = acks[0]?.error;
        if (!error) return resolve({ status: acks.length === 1 ? 'OK' : `no acknowledgement (${acks.length})`, fields: [] });
        const fields = error.details.filter((d) => d.typeUrl.endsWith('google.rpc.BadRequest'))
          .flatMap((d) => BadRequest.decode(d.value).fieldViolations.map((f) => f.field));
        resolve({ status: grpc.status[error.code]!, fields });
      });
      stream.write(StreamIngestUpdatesRequest.fromPartial({ updates: [], sequence: 0, ...batch(v) }));
      stream.end();
    });
  /** Opens the outbound feed: OK once it answers its first assignment (then cancelled), or how it failed. */
  const feed = (request: (v: unknown) => object) => (v: unknown) =>
    new Promise<Outcome>((resolve) => {
      const stream = internal.streamSentMessages({ group: 'constraints', start: [], ...request(v) } as never, md());
      stream.on('data', () => {
        resolve({ status: 'OK', fields: [] });
        stream.cancel();
      });
      stream.on('error', (err: grpc.ServiceError) => resolve(grpcOutcome(err)));
    });
  const commit = (request: (v: unknown) => object) => (v: unknown) =>
    new Promise<Outcome>((resolve) => {
      internal.commitSentMessages({ group: 'constraints', positions: [{ partition: 0, seq: 0 }], ...request(v) } as never, md(), (err) => resolve(grpcOutcome(err)));
    });
  const message = (extra: object = {}) => ({ messageId: 0, date: 0, chat: { id: 555, type: 'private' }, from: { id: 555, isBot: false }, text: 'x', ...extra });

  const app = (v: object) => ({ name: 'Bot', username: unique(12, 'app', 'x'), ...v });
  const editApp = (body: (v: unknown) => object) => consoleCall('patch', () => `/api/v1/bots/my/${pendingAppId}/application`, body);
  const profile = (body: (v: unknown) => object) => consoleCall('patch', () => `/api/v1/bots/my/${ctx.main.id}`, body);
  const testUpdate = (body: (v: unknown) => object) => consoleCall('post', () => `/api/v1/bots/my/${ctx.main.id}/test-updates`, body);
  const consoleHook = (body: (v: unknown) => object) =>
    consoleCall('post', () => `/api/v1/bots/my/${ctx.hook.id}/webhook`, (v) => ({ url: 'https://127.0.0.1/hook', secret_token: 's', ...body(v) }));
  const runtimeHook = (body: (v: unknown) => object) =>
    runtime('setWebhook', (v) => ({ url: 'https://127.0.0.1/hook', secret_token: 's', ...body(v) }), () => ctx.hook);
  const credentials = (body: (v: unknown) => object) =>
    runtime('files/upload-credentials', (v) => ({ fileName: 'a.bin', fileSize: 10, checksum: 'a'.repeat(64), ...body(v) }));
  const command = (i: number) => ({ command: `c${i}`, description: 'd' });
  /** A press of ctx.main's keyboard in CHAT, and an inline query to ctx.inline, by the test user. */
  const press = (extra: object = {}) => ({ botId: ctx.main.id, callbackQuery: { from: { id: CHAT, isBot: false }, message: { messageId: ctx.keyboard, chat: { id: CHAT } }, data: 'd', ...extra } });
  const asked = (extra: object = {}) => ({ botId: ctx.inline.id, inlineQuery: { from: { id: 7, isBot: false }, query: 'q', offset: '', ...extra } });
  /** A query of the bot with this id (a new one, ingested), or none for the empty id. */
  const queryWithId = async (kind: 'callback' | 'inline', id: unknown) => {
    if (typeof id !== 'string' || id === '') return;
    const outcome = await ingest(() => [kind === 'callback' ? press({ id }) : asked({ id })])(undefined);
    expect(outcome.status).toBe('OK');
  };
  const answerCallback = (body: (v: unknown) => object) => async (v: unknown) => {
    const id = unique(20, 'cb', 'c');
    await queryWithId('callback', id);
    return runtime('answerCallbackQuery', (x) => ({ callback_query_id: id, ...body(x) }))(v);
  };
  const answerInline = (body: (v: unknown) => object) => async (v: unknown) => {
    const id = unique(20, 'iq', 'i');
    await queryWithId('inline', id);
    return runtime('answerInlineQuery', (x) => ({ inline_query_id: id, results: [], ...body(x) }), () => ctx.inline)(v);
  };
  const article = (i: number) => ({ type: 'article', id: `r${i}`, title: 't', input_message_content: { message_text: 'x' } });
  const secret = { text: (n: number) => 's'.repeat(n), mismatch: 'not a secret!' };
  const hex = { text: (n: number) => 'ab'.repeat(n).slice(0, n), mismatch: 'z'.repeat(64) };
  const webhook = (send: (b: (v: unknown) => object) => Case['send']): Record<string, Case> => ({
    url: { send: send((v) => ({ url: v })), path: 'url', text: url('https://127.0.0.1/') },
    allowed_updates: { send: send((v) => ({ allowed_updates: v })), path: 'allowed_updates', value: (v) => [v], valuePath: 'allowed_updates[0]' },
    secret_token: { send: send((v) => ({ secret_token: v })), path: 'secret_token', ...secret },
    allowed_ips: { send: send((v) => ({ allowed_ips: v })), path: 'allowed_ips', item: (i) => `127.0.${i}.0/24` },
    max_connections: { send: send((v) => ({ max_connections: v })), path: 'max_connections' },
    max_deliveries_per_second: { send: send((v) => ({ max_deliveries_per_second: v })), path: 'max_deliveries_per_second' },
  });
  const sendFile = (method: string, fileId: () => string): Record<string, Case> => ({
    caption: { send: runtime(method, (v) => ({ chat_id: CHAT, file_id: fileId(), caption: v })), path: 'caption', text: (n: number) => 'c'.repeat(n), ...text },
    reply_to_message_id: { send: runtime(method, (v) => ({ chat_id: CHAT, file_id: fileId(), reply_to_message_id: v })), path: 'reply_to_message_id' },
    chat_id: { send: runtime(method, (v) => ({ chat_id: v, file_id: fileId() })), path: 'chat_id', valid: CHAT },
    file_id: { send: runtime(method, (v) => ({ chat_id: CHAT, file_id: v })), path: 'file_id', text: (n: number) => (n === 0 ? '' : fileId()) },
  });

  /** An edit's text or caption: new each time, so that no edit is refused as not modified. */
  const edited = (n: number) => unique(n, 'e', 'e');
  /** An inline keyboard new each time (an edit of the keyboard alone changes something). */
  const newKeyboard = () => ({ inline_keyboard: [{ buttons: [{ text: 'k', callback_data: unique(12, 'k', 'k') }] }] });
  const album = (media: unknown, extra: object = {}) => ({ chat_id: CHAT, media, ...extra });
  const photos = (n: number, caption?: unknown) =>
    Array.from({ length: n }, (_, i) => ({ type: 'photo', media: ctx.photoId, ...(i === 0 && caption !== undefined ? { caption } : {}) }));

  /** message → field → how to reach it (one case, or several routes to the same field). */
  const CASES: Record<string, Record<string, Case | Case[]>> = {
    'botplatform.v1.CreateApplicationRequest': {
      name: { send: consoleCall('post', () => '/api/v1/bots/applications', (v) => app({ name: v })), path: 'name', text: (n) => 'N'.repeat(n), ...line },
      username: {
        send: consoleCall('post', () => '/api/v1/bots/applications', (v) => app({ username: v })), path: 'username',
        text: (n) => unique(n, 'u', 'x'), mismatch: 'bad-name',
      },
      description: { send: consoleCall('post', () => '/api/v1/bots/applications', (v) => app({ description: v })), path: 'description', text: (n) => 'd'.repeat(n), ...text },
      avatar: { send: consoleCall('post', () => '/api/v1/bots/applications', (v) => app({ avatar: v })), path: 'avatar', text: url() },
      scopes: { send: consoleCall('post', () => '/api/v1/bots/applications', (v) => app({ scopes: v })), path: 'scopes', value: (v) => [v], valuePath: 'scopes[0]', item: (i) => SCOPES[i] },
    },
    'botplatform.v1.ApplicationFields': {
      name: { send: editApp((v) => ({ name: v })), path: 'name', text: (n) => 'N'.repeat(n), ...line },
      username: { send: editApp((v) => ({ username: v })), path: 'username', text: (n) => unique(n, 'e', 'x'), mismatch: 'bad-name' },
      description: { send: editApp((v) => ({ description: v })), path: 'description', text: (n) => 'd'.repeat(n), ...text },
      avatar: { send: editApp((v) => ({ avatar: v })), path: 'avatar', text: url() },
      scopes: { send: editApp((v) => ({ scopes: v })), path: 'scopes', value: (v) => [v], valuePath: 'scopes[0]', item: (i) => SCOPES[i] },
    },
    'botplatform.v1.ListMyBotsRequest': {
      page: { send: consoleCall('get', () => '/api/v1/bots/my?page='), path: 'page' },
      limit: { send: consoleCall('get', () => '/api/v1/bots/my?limit='), path: 'limit' },
    },
    'botplatform.v1.BotProfile': {
      name: { send: profile((v) => ({ name: v })), path: 'name', text: (n) => 'N'.repeat(n), ...line },
      description: { send: profile((v) => ({ description: v })), path: 'description', text: (n) => 'd'.repeat(n), ...text },
      avatar: { send: profile((v) => ({ avatar: v })), path: 'avatar', text: url() },
      short_description: { send: profile((v) => ({ short_description: v })), path: 'short_description', text: (n) => 's'.repeat(n), ...line },
      about: { send: profile((v) => ({ about: v })), path: 'about', text: (n) => 'a'.repeat(n), ...text },
      cover_url: { send: profile((v) => ({ cover_url: v })), path: 'cover_url', text: url() },
      links: { send: profile((v) => ({ links: v })), path: 'links', item: (i) => ({ title: `t${i}`, url: 'https://example.com/' }) },
      command_menu: { send: profile((v) => ({ command_menu: v })), path: 'command_menu', item: command },
    },
    'botplatform.v1.BotLink': {
      title: { send: profile((v) => ({ links: [{ title: v, url: 'https://example.com/' }] })), path: 'links[0].title', text: (n) => 'T'.repeat(n), ...line },
      url: { send: profile((v) => ({ links: [{ title: 't', url: v }] })), path: 'links[0].url', text: url() },
    },
    'botplatform.v1.BotContact': {
      email: { send: profile((v) => ({ contact: { email: v } })), path: 'contact.email', text: email, mismatch: 'not-an-address' },
      url: { send: profile((v) => ({ contact: { url: v } })), path: 'contact.url', text: url() },
      note: { send: profile((v) => ({ contact: { note: v } })), path: 'contact.note', text: (n) => 'n'.repeat(n), ...line },
    },
    'botplatform.v1.BotCommand': {
      command: {
        send: profile((v) => ({ command_menu: [{ command: v, description: 'd' }] })), path: 'command_menu[0].command',
        text: (n) => 'c'.repeat(n), mismatch: 'Not-A-Command',
      },
      description: { send: profile((v) => ({ command_menu: [{ command: 'c', description: v }] })), path: 'command_menu[0].description', text: (n) => 'd'.repeat(n), ...line },
    },
    'botplatform.v1.SetBotWebhookRequest': webhook(consoleHook),
    'botplatform.v1.RotateWebhookSecretRequest': {
      secret_token: { send: consoleCall('post', () => `/api/v1/bots/my/${ctx.hook.id}/webhook/rotate-secret`, (v) => ({ secret_token: v })), path: 'secret_token', ...secret },
      overlap_seconds: { send: consoleCall('post', () => `/api/v1/bots/my/${ctx.hook.id}/webhook/rotate-secret`, (v) => ({ overlap_seconds: v })), path: 'overlap_seconds' },
    },
    'botplatform.v1.CreateTestUpdateRequest': {
      text: { send: testUpdate((v) => ({ text: v })), path: 'text', text: (n) => 't'.repeat(n), ...text },
      chat_id: { send: testUpdate((v) => ({ text: 'hi', chat_id: v })), path: 'chat_id', valid: 42 },
    },
    'botplatform.v1.User': {
      id: [
        { send: testUpdate((v) => ({ text: 'hi', from: { id: v, is_bot: false } })), path: 'from.id', valid: 7 },
        { send: ingest((v) => [{ botId: ctx.main.id, message: message({ from: { id: v, isBot: false } }) }]), path: 'updates[0].message.from.id', valid: 7 },
      ],
      username: [
        { send: testUpdate((v) => ({ text: 'hi', from: { id: 7, is_bot: false, username: v } })), path: 'from.username', text: (n) => 'u'.repeat(n), ...text },
        { send: ingest((v) => [{ botId: ctx.main.id, message: message({ from: { id: 7, isBot: false, username: v } }) }]), path: 'updates[0].message.from.username', text: (n) => 'u'.repeat(n), ...text },
      ],
      first_name: [
        { send: testUpdate((v) => ({ text: 'hi', from: { id: 7, is_bot: false, first_name: v } })), path: 'from.first_name', text: (n) => 'F'.repeat(n), ...text },
        { send: ingest((v) => [{ botId: ctx.main.id, message: message({ from: { id: 7, isBot: false, firstName: v } }) }]), path: 'updates[0].message.from.first_name', text: (n) => 'F'.repeat(n), ...text },
      ],
    },
    'botplatform.v1.Chat': {
      id: { send: ingest((v) => [{ botId: ctx.main.id, message: message({ chat: { id: v, type: 'private' } }) }]), path: 'updates[0].message.chat.id', valid: 555 },
      ...Object.fromEntries((['title', 'username', 'first_name', 'last_name'] as const).map((f) => {
        const key = f.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
        const at = `updates[0].message.chat.${f}`;
        return [f, { send: ingest((v) => [{ botId: ctx.main.id, message: message({ chat: { id: 555, type: 'private', [key]: v } }) }]), path: at, text: (n: number) => 'c'.repeat(n), ...text }];
      })),
    },
    'botplatform.v1.ListDeliveriesRequest': {
      page: { send: consoleCall('get', () => `/api/v1/bots/my/${ctx.hook.id}/deliveries?page=`), path: 'page' },
      limit: { send: consoleCall('get', () => `/api/v1/bots/my/${ctx.hook.id}/deliveries?limit=`), path: 'limit' },
      update_id: { send: consoleCall('get', () => `/api/v1/bots/my/${ctx.hook.id}/deliveries?update_id=`), path: 'update_id' },
    },
    'botplatform.v1.ListDeliveryAttemptsRequest': {
      page: { send: consoleCall('get', () => `/api/v1/bots/my/${ctx.hook.id}/deliveries/${hookUpdateId}/attempts?page=`), path: 'page' },
      limit: { send: consoleCall('get', () => `/api/v1/bots/my/${ctx.hook.id}/deliveries/${hookUpdateId}/attempts?limit=`), path: 'limit' },
    },
    'botplatform.v1.ListChatMessagesRequest': {
      chat_id: { send: async (v) => consoleOutcome(await ctx.owner.get(`/api/v1/bots/my/${ctx.main.id}/chats/${String(v)}/messages`)), path: 'chat_id', valid: CHAT },
      page: { send: consoleCall('get', () => `/api/v1/bots/my/${ctx.main.id}/chats/${CHAT}/messages?page=`), path: 'page' },
      limit: { send: consoleCall('get', () => `/api/v1/bots/my/${ctx.main.id}/chats/${CHAT}/messages?limit=`), path: 'limit' },
    },
    'botplatform.v1.GetBotMetricsRequest': {
      window_seconds: { send: consoleCall('get', () => `/api/v1/bots/my/${ctx.main.id}/metrics?window_seconds=`), path: 'window_seconds' },
    },
    'botplatform.v1.ListBotsRequest': {
      page: { send: async (v) => consoleOutcome(await ctx.admin.get(`/api/v1/admin/bots?page=${String(v)}`)), path: 'page' },
      limit: { send: async (v) => consoleOutcome(await ctx.admin.get(`/api/v1/admin/bots?limit=${String(v)}`)), path: 'limit' },
    },
    'botplatform.v1.RejectBotRequest': {
      reason: {
        send: async (v) => {
          const pending = await ctx.owner.post('/api/v1/bots/applications', app({}));
          return consoleOutcome(await ctx.admin.post(`/api/v1/admin/bots/${pending.body.id}/reject`, { reason: v }));
        },
        path: 'reason', text: (n) => 'r'.repeat(n), ...line,
      },
    },
    'botplatform.v1.GetUpdatesRequest': {
      // The bot always has an update waiting, so a long poll answers at once.
      offset: { send: runtime('getUpdates', (v) => ({ offset: v, limit: 1 })), path: 'offset' },
      tail: { send: runtime('getUpdates', (v) => ({ tail: v })), path: 'tail', withOther: runtime('getUpdates', (v) => ({ tail: v, offset: 0 })) },
      allowed_updates: { send: runtime('getUpdates', (v) => ({ allowed_updates: v, limit: 1 })), path: 'allowed_updates', value: (v) => [v], valuePath: 'allowed_updates[0]' },
      limit: { send: runtime('getUpdates', (v) => ({ limit: v })), path: 'limit' },
      timeout: { send: runtime('getUpdates', (v) => ({ timeout: v, limit: 1 })), path: 'timeout' },
    },
    'botplatform.v1.SetWebhookRequest': webhook(runtimeHook),
    'botplatform.v1.SendMessageRequest': {
      text: { send: runtime('sendMessage', (v) => ({ chat_id: CHAT, text: v })), path: 'text', text: (n) => 'm'.repeat(n), ...text },
      reply_to_message_id: { send: runtime('sendMessage', (v) => ({ chat_id: CHAT, text: 'x', reply_to_message_id: v })), path: 'reply_to_message_id' },
      chat_id: { send: runtime('sendMessage', (v) => ({ chat_id: v, text: 'x' })), path: 'chat_id', valid: CHAT },
    },
    'botplatform.v1.SendPhotoRequest': sendFile('sendPhoto', () => ctx.photoId),
    'botplatform.v1.SendDocumentRequest': sendFile('sendDocument', () => ctx.documentId),
    'botplatform.v1.CreateUploadCredentialsRequest': {
      file_name: { send: credentials((v) => ({ fileName: v })), path: 'fileName', text: (n) => 'f'.repeat(n), mismatch: 'a/b' },
      file_size: { send: credentials((v) => ({ fileSize: v })), path: 'fileSize' },
      checksum: { send: credentials((v) => ({ checksum: v })), path: 'checksum', ...hex },
      file_type: { send: credentials((v) => ({ fileType: v })), path: 'fileType', text: mime, mismatch: 'not a type' },
      reuse_request_id: { send: credentials((v) => ({ reuseRequestId: v })), path: 'reuseRequestId', text: (n) => unique(n, 'r', 'r'), mismatch: 'no spaces' },
    },
    'botplatform.v1.CompleteUploadRequest': {
      checksum: { send: runtime('files/complete', (v) => ({ checksum: v })), path: 'checksum', ...hex, acceptsInside: false },
      reuse_request_id: {
        send: runtime('files/complete', (v) => ({ checksum: 'a'.repeat(64), reuseRequestId: v })), path: 'reuseRequestId',
        text: (n) => unique(n, 'r', 'r'), mismatch: 'no spaces', acceptsInside: false,
      },
    },
    'botplatform.v1.ProvePossessionRequest': {
      proof: { send: runtime('files/possession', (v) => ({ challengeId: 'pc_none', proof: v })), path: 'proof', ...hex, acceptsInside: false },
      challenge_id: {
        send: runtime('files/possession', (v) => ({ challengeId: v, proof: 'a'.repeat(64) })), path: 'challengeId', text: (n) => 'p'.repeat(n), acceptsInside: false,
      },
    },
    'botplatform.v1.GetFileRequest': {
      file_id: { send: runtime('getFile', (v) => ({ file_id: v })), path: 'file_id', text: (n) => 'f'.repeat(n), acceptsInside: false },
    },
    'botplatform.v1.RecoverDeliveriesRequest': {
      status: {
        send: consoleCall('post', () => `/api/v1/bots/my/${ctx.hook.id}/deliveries/recover`, (v) => ({ since: new Date(0).toISOString(), status: v })),
        path: 'status', acceptsInside: false,
      },
    },
    'botplatform.v1.SetMyCommandsRequest': {
      commands: { send: runtime('setMyCommands', (v) => ({ commands: v })), path: 'commands', item: command },
    },
    'botplatform.v1.IngestUpdatesRequest': {
      updates: { send: ingest((v) => v as object[]), path: 'updates', item: () => ({ botId: ctx.main.id, message: message() }) },
    },
    'botplatform.v1.IncomingUpdate': {
      idempotency_key: {
        send: ingest((v) => [{ botId: ctx.main.id, message: message(), idempotencyKey: v }]), path: 'updates[0].idempotency_key',
        text: (n) => unique(n, 'k', 'k'),
      },
    },
    'botplatform.v1.StreamIngestUpdatesRequest': {
      updates: { send: streamIngest((v) => ({ updates: v })), path: 'updates', item: () => ({ botId: ctx.main.id, message: message() }) },
      sequence: { send: streamIngest((v) => ({ updates: [{ botId: ctx.main.id, message: message() }], sequence: v })), path: 'sequence' },
    },
    'botplatform.v1.StreamSentMessagesRequest': {
      group: { send: feed((v) => ({ group: v })), path: 'group', text: (n) => unique(n, 'g', 'g'), mismatch: 'bad group!' },
      start: { send: feed((v) => ({ start: v })), path: 'start', item: (i) => ({ partition: i, seq: 0 }) },
    },
    'botplatform.v1.CommitSentMessagesRequest': {
      group: { send: commit((v) => ({ group: v })), path: 'group', text: (n) => unique(n, 'g', 'g'), mismatch: 'bad group!' },
      positions: { send: commit((v) => ({ positions: v })), path: 'positions', item: (i) => ({ partition: i, seq: 0 }) },
    },
    'botplatform.v1.FeedPosition': {
      partition: [
        { send: feed((v) => ({ start: [{ partition: v, seq: 0 }] })), path: 'start[0].partition' },
        { send: commit((v) => ({ positions: [{ partition: v, seq: 0 }] })), path: 'positions[0].partition' },
      ],
      // Through the feed's start only: a commit's seq is also held to what its partition
      // has (2^53-1 is refused there, naming the same field; test/feed.test.ts).
      seq: { send: feed((v) => ({ start: [{ partition: 0, seq: v }] })), path: 'start[0].seq' },
    },
    'botplatform.v1.CallbackQuery': {
      id: { send: ingest((v) => [press({ id: v })]), path: 'updates[0].callback_query.id', text: (n) => unique(n, 'k', 'k'), mismatch: 'has space' },
      chat_instance: { send: ingest((v) => [press({ chatInstance: v })]), path: 'updates[0].callback_query.chat_instance', text: (n) => 'c'.repeat(n), mismatch: 'has space' },
    },
    'botplatform.v1.InlineQuery': {
      id: { send: ingest((v) => [asked({ id: v })]), path: 'updates[0].inline_query.id', text: (n) => unique(n, 'k', 'k'), mismatch: 'has space' },
      query: { send: ingest((v) => [asked({ query: v })]), path: 'updates[0].inline_query.query', text: (n) => 'q'.repeat(n), ...text },
      offset: { send: ingest((v) => [asked({ offset: v })]), path: 'updates[0].inline_query.offset', text: (n) => 'o'.repeat(n), ...text },
    },
    'botplatform.v1.AnswerCallbackQueryRequest': {
      callback_query_id: {
        send: async (v) => {
          await queryWithId('callback', v);
          return runtime('answerCallbackQuery', (x) => ({ callback_query_id: x }))(v);
        },
        path: 'callback_query_id', text: (n) => unique(n, '', 'q'),
      },
      text: { send: answerCallback((v) => ({ text: v })), path: 'text', text: (n) => 't'.repeat(n), ...text },
      cache_time: { send: answerCallback((v) => ({ cache_time: v })), path: 'cache_time' },
    },
    'botplatform.v1.AnswerInlineQueryRequest': {
      inline_query_id: {
        send: async (v) => {
          await queryWithId('inline', v);
          return runtime('answerInlineQuery', (x) => ({ inline_query_id: x, results: [] }), () => ctx.inline)(v);
        },
        path: 'inline_query_id', text: (n) => unique(n, '', 'q'),
      },
      results: { send: answerInline((v) => ({ results: v })), path: 'results', item: article },
      cache_time: { send: answerInline((v) => ({ cache_time: v })), path: 'cache_time' },
    },
    'botplatform.v1.CreateTestCallbackQueryRequest': {
      chat_id: { send: consoleCall('post', () => `/api/v1/bots/my/${ctx.main.id}/test-callback-queries`, (v) => ({ chat_id: v, message_id: ctx.keyboard, callback_data: 'd' })), path: 'chat_id', valid: CHAT },
      // Message 1 is the test user's (a bot's own message can never be its first): not found, not refused by the limit.
      message_id: { send: consoleCall('post', () => `/api/v1/bots/my/${ctx.main.id}/test-callback-queries`, (v) => ({ message_id: v, callback_data: 'd' })), path: 'message_id', acceptsInside: false },
      callback_data: { send: consoleCall('post', () => `/api/v1/bots/my/${ctx.main.id}/test-callback-queries`, (v) => ({ message_id: ctx.keyboard, callback_data: v })), path: 'callback_data', text: (n) => 'd'.repeat(n) },
    },
    'botplatform.v1.EditMessageTextRequest': {
      chat_id: { send: runtime('editMessageText', (v) => ({ chat_id: v, message_id: ctx.textMessage, text: edited(8) })), path: 'chat_id', valid: CHAT },
      // Message 1 is the one the chat wrote: found, but not the bot's to edit.
      message_id: { send: runtime('editMessageText', (v) => ({ chat_id: CHAT, message_id: v, text: edited(8) })), path: 'message_id', acceptsInside: false },
      text: { send: runtime('editMessageText', (v) => ({ chat_id: CHAT, message_id: ctx.textMessage, text: v })), path: 'text', text: edited, ...text },
    },
    'botplatform.v1.EditMessageCaptionRequest': {
      chat_id: { send: runtime('editMessageCaption', (v) => ({ chat_id: v, message_id: ctx.photoMessage, caption: edited(8) })), path: 'chat_id', valid: CHAT },
      message_id: { send: runtime('editMessageCaption', (v) => ({ chat_id: CHAT, message_id: v, caption: edited(8) })), path: 'message_id', acceptsInside: false },
      caption: { send: runtime('editMessageCaption', (v) => ({ chat_id: CHAT, message_id: ctx.photoMessage, caption: v })), path: 'caption', text: edited, ...text },
    },
    'botplatform.v1.EditMessageReplyMarkupRequest': {
      chat_id: { send: runtime('editMessageReplyMarkup', (v) => ({ chat_id: v, message_id: ctx.textMessage, reply_markup: newKeyboard() })), path: 'chat_id', valid: CHAT },
      message_id: { send: runtime('editMessageReplyMarkup', (v) => ({ chat_id: CHAT, message_id: v, reply_markup: newKeyboard() })), path: 'message_id', acceptsInside: false },
    },
    'botplatform.v1.DeleteMessageRequest': {
      // Nothing is deleted: message 999999 does not exist (message 1 stays for the replies above).
      chat_id: { send: runtime('deleteMessage', (v) => ({ chat_id: v, message_id: 999_999 })), path: 'chat_id', valid: CHAT, acceptsInside: false },
      message_id: { send: runtime('deleteMessage', (v) => ({ chat_id: CHAT + 1, message_id: v })), path: 'message_id', acceptsInside: false },
    },
    'botplatform.v1.DeleteMessagesRequest': {
      // Ids of no message: skipped, as Telegram does.
      chat_id: { send: runtime('deleteMessages', (v) => ({ chat_id: v, message_ids: [999_999] })), path: 'chat_id', valid: CHAT },
      message_ids: { send: runtime('deleteMessages', (v) => ({ chat_id: CHAT, message_ids: v })), path: 'message_ids', item: (i) => 900_000 + i },
    },
    'botplatform.v1.SendChatActionRequest': {
      chat_id: { send: runtime('sendChatAction', (v) => ({ chat_id: v, action: 'typing' })), path: 'chat_id', valid: CHAT },
    },
    'botplatform.v1.GetChatRequest': {
      chat_id: { send: runtime('getChat', (v) => ({ chat_id: v })), path: 'chat_id', valid: CHAT },
    },
    'botplatform.v1.CopyMessageRequest': {
      chat_id: { send: runtime('copyMessage', (v) => ({ chat_id: v, from_chat_id: CHAT, message_id: 1 })), path: 'chat_id', valid: CHAT },
      from_chat_id: { send: runtime('copyMessage', (v) => ({ chat_id: CHAT, from_chat_id: v, message_id: 1 })), path: 'from_chat_id', valid: CHAT },
      message_id: { send: runtime('copyMessage', (v) => ({ chat_id: CHAT, from_chat_id: CHAT, message_id: v })), path: 'message_id' },
      caption: {
        send: runtime('copyMessage', (v) => ({ chat_id: CHAT, from_chat_id: CHAT, message_id: ctx.photoMessage, caption: v })), path: 'caption',
        text: (n) => 'c'.repeat(n), ...text,
      },
      reply_to_message_id: { send: runtime('copyMessage', (v) => ({ chat_id: CHAT, from_chat_id: CHAT, message_id: 1, reply_to_message_id: v })), path: 'reply_to_message_id' },
    },
    'botplatform.v1.ForwardMessageRequest': {
      chat_id: { send: runtime('forwardMessage', (v) => ({ chat_id: v, from_chat_id: CHAT, message_id: 1 })), path: 'chat_id', valid: CHAT },
      from_chat_id: { send: runtime('forwardMessage', (v) => ({ chat_id: CHAT, from_chat_id: v, message_id: 1 })), path: 'from_chat_id', valid: CHAT },
      message_id: { send: runtime('forwardMessage', (v) => ({ chat_id: CHAT, from_chat_id: CHAT, message_id: v })), path: 'message_id' },
    },
    'botplatform.v1.SendMediaGroupRequest': {
      chat_id: { send: runtime('sendMediaGroup', (v) => ({ ...album(photos(2)), chat_id: v })), path: 'chat_id', valid: CHAT },
      media: { send: runtime('sendMediaGroup', (v) => album(v)), path: 'media', item: () => ({ type: 'photo', media: ctx.photoId }) },
      reply_to_message_id: { send: runtime('sendMediaGroup', (v) => album(photos(2), { reply_to_message_id: v })), path: 'reply_to_message_id' },
    },
    'botplatform.v1.InputMessageContent': {
      message_text: {
        send: answerInline((v) => ({ results: [{ type: 'article', id: 'a', title: 't', input_message_content: { message_text: v } }] })),
        path: 'results[0].input_message_content.message_text', text: (n) => 'm'.repeat(n), ...text,
      },
    },
    'botplatform.v1.InlineQueryResult': {
      caption: {
        send: answerInline((v) => ({ results: [{ type: 'photo', id: 'p', photo_file_id: ctx.inlinePhotoId, caption: v }] })),
        path: 'results[0].caption', text: (n) => 'c'.repeat(n), ...text,
      },
    },
    'botplatform.v1.InputMedia': {
      caption: { send: runtime('sendMediaGroup', (v) => album(photos(2, v))), path: 'media[0].caption', text: (n) => 'c'.repeat(n), ...text },
    },
    'botplatform.v1.Message': {
      text: { send: ingest((v) => [{ botId: ctx.main.id, message: message({ text: v }) }]), path: 'updates[0].message.text', text: (n) => 'x'.repeat(n), ...text },
      caption: { send: ingest((v) => [{ botId: ctx.main.id, message: message({ caption: v }) }]), path: 'updates[0].message.caption', text: (n) => 'c'.repeat(n), ...text },
    },
  };

  interface Probe {
    name: string; entry: string; outside: (c: Case) => unknown; inside: (c: Case) => unknown;
    /** How the outside value is sent, when not by the case's send (conflicts_with: with the other field). */
    sendOutside?: (c: Case) => Case['send'];
    /** The path the refusal names, when not the case's path. */
    refusedAt?: (c: Case) => string;
  }

  /** Just outside and just inside each keyword of one field's constraints. */
  function probes(entry: string, c: FieldConstraints): Probe[] {
    const list: Probe[] = [];
    const items = (n: number) => (k: Case) => Array.from({ length: n }, (_, i) => k.item!(i));
    if (c.minLength !== undefined && c.minLength > 0) {
      list.push({ name: `min_length ${c.minLength}`, entry, outside: (k) => k.text!(c.minLength! - 1), inside: (k) => k.text!(c.minLength!) });
    }
    if (c.maxLength !== undefined && c.parsedMaxLength !== undefined) {
      // A message text or caption: max_length bounds the raw input, parsed_max_length what it is once parsed.
      // Inside: that many characters, of which what Telegram trims makes up all but a few (a text parsing short).
      const raw = (k: Case, n: number) => k.text!(8).padEnd(n, ' ');
      list.push({ name: `max_length ${c.maxLength} (raw input)`, entry, outside: (k) => k.text!(c.maxLength! + 1), inside: (k) => raw(k, c.maxLength!) });
      list.push({ name: `parsed_max_length ${c.parsedMaxLength}`, entry, outside: (k) => k.text!(c.parsedMaxLength! + 1), inside: (k) => k.text!(c.parsedMaxLength!) });
    } else if (c.maxLength !== undefined) {
      list.push({ name: `max_length ${c.maxLength}`, entry, outside: (k) => k.text!(c.maxLength! + 1), inside: (k) => k.text!(c.maxLength!) });
    }
    if (c.pattern) {
      const fits = Math.max(c.minLength ?? 0, Math.min(c.maxLength ?? 40, 40));
      list.push({ name: `pattern ${c.pattern.source}`, entry, outside: (k) => k.mismatch!, inside: (k) => k.text!(fits) });
    }
    if (c.minimum !== undefined) list.push({ name: `minimum ${c.minimum}`, entry, outside: () => c.minimum! - 1, inside: () => c.minimum! });
    if (c.maximum !== undefined) list.push({ name: `maximum ${c.maximum}`, entry, outside: () => c.maximum! + 1, inside: () => c.maximum! });
    if (c.maxItems !== undefined) list.push({ name: `max_items ${c.maxItems}`, entry, outside: items(c.maxItems + 1), inside: items(c.maxItems) });
    // A list given with fewer entries (the HTTP JSON shows it given; gRPC cannot tell an empty list from none).
    if (c.minItems !== undefined) list.push({ name: `min_items ${c.minItems}`, entry, outside: items(c.minItems - 1), inside: items(c.minItems) });
    if (c.allowedValues) {
      const wrap = (k: Case, v: string) => (k.value ? k.value(v) : v);
      list.push({
        name: `allowed_values ${c.allowedValues.join(', ')}`, entry, outside: (k) => wrap(k, 'not_a_value'), inside: (k) => wrap(k, c.allowedValues![0]!),
        refusedAt: (k) => k.valuePath ?? k.path,
      });
    }
    if (c.nonZero) list.push({ name: 'non_zero', entry, outside: () => 0, inside: (k) => k.valid });
    if (c.maximumSetting) {
      list.push({ name: `maximum_setting ${c.maximumSetting}`, entry, outside: () => served[entry]! + 1, inside: () => served[entry]! });
    }
    if (c.conflictsWith) {
      const fits = c.minimum ?? 1;
      list.push({ name: `conflicts_with ${c.conflictsWith}`, entry, outside: () => fits, inside: () => fits, sendOutside: (k) => k.withOther! });
    }
    return list;
  }

  const entries = Object.entries(constraintTable).flatMap(([message, fields]) =>
    Object.entries(fields).map(([field, c]) => ({ message, field, c, key: `${message}.${field}` })));
  const casesOf = (message: string, field: string): Case[] => {
    const c = CASES[message]?.[field];
    return c === undefined ? [] : Array.isArray(c) ? c : [c];
  };

  it('every constrained field of the table has a case here, with what its keywords need (and no case is stale)', () => {
    const missing: string[] = [];
    for (const { message, field, c, key } of entries) {
      const cases = casesOf(message, field);
      if (cases.length === 0) missing.push(`${key}: no case`);
      for (const k of cases) {
        if ((c.minLength !== undefined || c.maxLength !== undefined || c.pattern) && !k.text) missing.push(`${key}: text`);
        if (c.pattern && k.mismatch === undefined) missing.push(`${key}: mismatch`);
        if ((c.maxItems !== undefined || c.minItems !== undefined) && !k.item) missing.push(`${key}: item`);
        if (c.nonZero && k.valid === undefined) missing.push(`${key}: valid`);
        if (c.conflictsWith && !k.withOther) missing.push(`${key}: withOther`);
      }
    }
    expect(missing).toEqual([]);
    const known = new Set(entries.map((e) => e.key));
    const stale = Object.entries(CASES).flatMap(([m, fields]) => Object.keys(fields).map((f) => `${m}.${f}`)).filter((k) => !known.has(k));
    expect(stale).toEqual([]);
  });

  const rows = entries.flatMap(({ message, field, c }) =>
    casesOf(message, field).flatMap((k, route) => probes(`${message}.${field}`, c).map((p) => ({ ...p, k, route }))));

  it.each(rows.map((r) => [`${r.entry} (${r.k.path}) ${r.name}`, r] as const))('%s', async (_name, { k, outside, inside, sendOutside, refusedAt }) => {
    const refused = await (sendOutside?.(k) ?? k.send)(outside(k));
    expect(refused.status, `outside: ${JSON.stringify(refused)}`).toSatisfy((s) => s === 400 || s === 'INVALID_ARGUMENT');
    expect(refused.fields).toContain(refusedAt?.(k) ?? k.path);

    const accepted = await k.send(inside(k));
    expect(accepted.fields, `inside: ${JSON.stringify(accepted)}`).not.toContain(refusedAt?.(k) ?? k.path);
    if (k.acceptsInside !== false) {
      expect([200, 201, 'OK'], `inside: ${JSON.stringify(accepted)}`).toContain(accepted.status);
    }
  }, 30_000);
});
