/**
 * The same core over gRPC: generated ts-proto clients on loopback, status codes
 * and google.rpc.BadRequest details as any gRPC client sees them, requests that
 * do not decode (as raw bytes), plus the standard health and reflection services.
 */
import path from 'node:path';
import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCore, type BoundMethod, type StreamingHandler } from '../src/core/core.js';
import { Code } from '../src/errors.js';
import { AdminServiceClient } from '../src/gen/botplatform/v1/admin_service.js';
import { ReviewStatus } from '../src/gen/botplatform/v1/bot.js';
import {
  ConsoleServiceClient,
  type CreateApplicationResponse,
  type ListMyBotsResponse,
  type UpdateMyBotResponse,
} from '../src/gen/botplatform/v1/console_service.js';
import { RuntimeServiceClient, SendMessageRequest, type GetMeResponse } from '../src/gen/botplatform/v1/runtime_service.js';
import { IngestUpdatesRequest, InternalServiceClient } from '../src/gen/botplatform/v1/internal_service.js';
import { methodSettings } from '../src/gen/methods.js';
import { fromServiceError } from '../src/grpc/status-details.js';
import { createLogger } from '../src/logger.js';
import { approvedBot, client, startHarness, TEST_INTERNAL_TOKEN, usingMysql, type Harness } from './helpers/harness.js';
import { until } from './helpers/until.js';

type Callback = (err: grpc.ServiceError | null, res: unknown) => void;

/** Promisifies one unary method of a generated client. */
function rpc<Res>(client: grpc.Client, method: unknown, req: unknown, credential?: string): Promise<Res> {
  const md = new grpc.Metadata();
  if (credential) md.set('authorization', `Bearer ${credential}`);
  const fn = method as (req: unknown, md: grpc.Metadata, cb: Callback) => unknown;
  return new Promise((resolve, reject) => fn.call(client, req, md, (err, res) => (err ? reject(err) : resolve(res as Res))));
}

async function grpcError(p: Promise<unknown>) {
  try {
    await p;
  } catch (err) {
    return err as grpc.ServiceError;
  }
  throw new Error('expected the call to fail');
}

/** One sample of a Prometheus exposition (summed over the other labels); 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^([^{ ]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) total += Number(m[3]);
  }
  return total;
}

describe('gRPC API', () => {
  let h: Harness;
  let consoleClient: ConsoleServiceClient;
  let adminClient: AdminServiceClient;
  let runtimeClient: RuntimeServiceClient;
  let internalClient: InternalServiceClient;
  /** Sends bytes as they are, whatever the method's request type: what a client of another language may put on the wire. */
  let rawClient: grpc.Client;
  let alice: string;
  const logs: Record<string, unknown>[] = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const l of chunk.toString().split('\n').filter(Boolean)) logs.push(JSON.parse(l));
        done();
      },
    });
    h = await startHarness('in-process', { LOG_LEVEL: 'info' }, sink);
    const creds = grpc.credentials.createInsecure();
    consoleClient = new ConsoleServiceClient(h.grpcAddress, creds);
    adminClient = new AdminServiceClient(h.grpcAddress, creds);
    runtimeClient = new RuntimeServiceClient(h.grpcAddress, creds);
    internalClient = new InternalServiceClient(h.grpcAddress, creds);
    rawClient = new grpc.Client(h.grpcAddress, creds);
    alice = await h.jwt('alice');
  });
  afterAll(async () => {
    consoleClient?.close();
    adminClient?.close();
    runtimeClient?.close();
    internalClient?.close();
    rawClient?.close();
    await h?.close();
  });

  /** A unary call with `bytes` as the encoded request; resolves with the error it must fail with. */
  const rawCall = (method: string, bytes: Uint8Array, credential?: string, requestId?: string) => {
    const md = new grpc.Metadata();
    if (credential) md.set('authorization', `Bearer ${credential}`);
    if (requestId) md.set('x-request-id', requestId);
    return grpcError(new Promise((resolve, reject) => {
      rawClient.makeUnaryRequest(method, (b: Buffer) => b, (b: Buffer) => b, Buffer.from(bytes), md, (err, res) => (err ? reject(err) : resolve(res)));
    }));
  };
  const violations = (err: grpc.ServiceError) => fromServiceError(err).details.map((d) => [d.field, d.reason]);
  /** SendMessageRequest{chat_id, text} encoded by hand, so chat_id can be any int64. */
  const sendMessageBytes = (chatId: bigint, text = 'hi') =>
    new BinaryWriter().tag(1, WireType.Varint).int64(chatId).tag(2, WireType.LengthDelimited).string(text).finish();
  const SEND_MESSAGE = '/botplatform.v1.RuntimeService/SendMessage';

  const create = (req: { name: string; username: string }, jwt?: string) =>
    rpc<CreateApplicationResponse>(consoleClient, consoleClient.createApplication, { ...req, scopes: [] }, jwt);

  it('creates, lists and reads with an account JWT', async () => {
    const created = await create({ name: 'Grpc Bot', username: 'grpc_bot' }, alice);
    expect(created.bot).toMatchObject({ username: 'grpc_bot', reviewStatus: ReviewStatus.REVIEW_STATUS_PENDING, hasToken: false });
    const listed = await rpc<ListMyBotsResponse>(consoleClient, consoleClient.listMyBots, {}, alice);
    expect(listed.items.map((b) => b.id)).toContain(created.bot!.id);
    expect(listed.pagination).toEqual({ page: 1, limit: 20, total: 1, hasMore: false });
  });

  it('carries validation failures as INVALID_ARGUMENT with google.rpc.BadRequest field violations', async () => {
    const err = await grpcError(create({ name: 'x'.repeat(101), username: 'Bad' }, alice));
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    const decoded = fromServiceError(err);
    expect(decoded.details.map((d) => [d.field, d.reason])).toEqual([
      ['name', 'TOO_LONG'],
      ['username', 'INVALID_FORMAT'],
    ]);
  });

  it('refuses NUL characters in texts with the field named, as over HTTP', async () => {
    const err = await grpcError(create({ name: 'a\u0000b', username: 'grpc_nul_bot' }, alice));
    expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(fromServiceError(err).details.map((d) => [d.field, d.reason])).toEqual([['name', 'INVALID_CHARACTERS']]);
    const { token } = await approvedBot(h, alice, 'grpc_nul_sender');
    const text = await grpcError(rpc(runtimeClient, runtimeClient.sendMessage, SendMessageRequest.fromPartial({ chatId: 1, text: 'hi\u0000' }), token));
    expect(text.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(fromServiceError(text).details.map((d) => d.field)).toContain('text');
  });

  it('refuses a JWT whose sub is not a string as UNAUTHENTICATED, before any handler', async () => {
    const claims: Record<string, unknown> = { sub: ['a'], exp: Math.floor(Date.now() / 1000) + 600 };
    const jwt = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256' })
      .sign(new TextEncoder().encode(h.env.AUTH_JWT_SECRET));
    expect((await grpcError(create({ name: 'n', username: 'grpc_array_sub' }, jwt))).code).toBe(grpc.status.UNAUTHENTICATED);
    // Nothing was written: the username is still free.
    expect((await create({ name: 'n', username: 'grpc_array_sub' }, await h.jwt('bob'))).bot!.username).toBe('grpc_array_sub');
  });

  it('names the contract\'s statuses: UNAUTHENTICATED, ALREADY_EXISTS, NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION', async () => {
    expect((await grpcError(create({ name: 'n', username: 'no_auth' }))).code).toBe(grpc.status.UNAUTHENTICATED);
    await create({ name: 'n', username: 'dup_name' }, alice);
    expect((await grpcError(create({ name: 'n', username: 'dup_name' }, await h.jwt('bob')))).code).toBe(grpc.status.ALREADY_EXISTS);
    const mine = await create({ name: 'n', username: 'alice_only' }, alice);
    const foreign = await grpcError(rpc(consoleClient, consoleClient.getMyBot, { id: mine.bot!.id }, await h.jwt('bob')));
    expect(foreign.code).toBe(grpc.status.NOT_FOUND);
    const notAdmin = await grpcError(rpc(adminClient, adminClient.listBots, { reviewStatus: 0 }, alice));
    expect(notAdmin.code).toBe(grpc.status.PERMISSION_DENIED);
    const pending = await grpcError(rpc(consoleClient, consoleClient.regenerateToken, { id: mine.bot!.id }, alice));
    expect(pending.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(Code[pending.code]).toBe('FAILED_PRECONDITION');
  });

  it('recognises a bot by its token on the runtime service and refuses a JWT there', async () => {
    const { id, token } = await approvedBot(h, alice, 'grpc_runtime_bot');
    const me = await rpc<GetMeResponse>(runtimeClient, runtimeClient.getMe, {}, token);
    expect(me.result).toMatchObject({ id, isBot: true, username: 'grpc_runtime_bot' });
    expect((await grpcError(rpc(runtimeClient, runtimeClient.getMe, {}, alice))).code).toBe(grpc.status.UNAUTHENTICATED);
    expect((await grpcError(rpc(consoleClient, consoleClient.listMyBots, {}, token))).code).toBe(grpc.status.UNAUTHENTICATED);
  });

  it('updates with an explicit update_mask', async () => {
    const { id } = await approvedBot(h, alice, 'grpc_mask_bot');
    const res = await rpc<UpdateMyBotResponse>(consoleClient, consoleClient.updateMyBot, {
      id,
      bot: { about: 'from gRPC', name: 'ignored: not in mask', links: [], commandMenu: [] } as never,
      updateMask: ['about'],
    }, alice);
    expect(res.bot).toMatchObject({ about: 'from gRPC', name: 'Bot grpc_mask_bot' });
  });

  it('binds every RPC the protos declare: each one reaches the chain (no UNIMPLEMENTED), and the core covers them all', async () => {
    const paths = Object.keys(methodSettings);
    expect([...h.apps[0]!.core!.paths()].sort()).toEqual([...paths].sort());
    for (const path of paths) {
      const err = await rawCall(path, new Uint8Array(), undefined);
      expect([path, err.code]).toEqual([path, grpc.status.UNAUTHENTICATED]);
    }
  });

  it('a core missing the handler of a declared RPC refuses to start, naming it', () => {
    const handler = async () => ({});
    const handlers = Object.fromEntries(Object.keys(methodSettings).map((p) => [p, handler]));
    delete handlers['/botplatform.v1.RuntimeService/GetFile'];
    delete handlers['/botplatform.v1.ConsoleService/RetryDelivery'];
    const start = () => createCore({
      authenticator: { authenticate: () => Promise.reject(new Error('not called')) },
      handlers,
      logger: createLogger('silent'),
    });
    expect(start).toThrow('no handler for RPC botplatform.v1.ConsoleService/RetryDelivery, botplatform.v1.RuntimeService/GetFile');
  });

  it('a core whose handler does not stream as its RPC does (or streams where it is unary) refuses to start, naming it', () => {
    const unary = async () => ({});
    const streaming: StreamingHandler = { streaming: 'bidi', call: async function* () {} };
    const handlers: Record<string, BoundMethod> = Object.fromEntries(
      Object.entries(methodSettings).map(([p, s]) => [p, s.streaming ? { ...streaming, streaming: s.streaming } : unary]),
    );
    const start = () => createCore({
      authenticator: { authenticate: () => Promise.reject(new Error('not called')) },
      handlers,
      logger: createLogger('silent'),
    });
    expect(start).not.toThrow();
    handlers['/botplatform.v1.InternalService/StreamIngestUpdates'] = unary;
    handlers['/botplatform.v1.RuntimeService/GetMe'] = streaming;
    // Both named, in the generated table's order.
    expect(start).toThrow(/^handler of the wrong kind for RPC (.+\(.+\)), (.+\(.+\))$/);
    expect(start).toThrow('botplatform.v1.InternalService/StreamIngestUpdates (bidi, got unary)');
    expect(start).toThrow('botplatform.v1.RuntimeService/GetMe (unary, got bidi)');
  });

  it('answers undecodable bytes INVALID_ARGUMENT naming the request body, logged and counted under the method, credential or not', async () => {
    const { id, token } = await approvedBot(h, alice, 'grpc_garbage_bot');
    const before = await (await fetch(`${h.url}/metrics`)).text();
    const garbage = Buffer.from('not a protobuf message at all');
    for (const credential of [token, undefined, `${token}x`]) {
      const err = await rawCall(SEND_MESSAGE, garbage, credential, 'garbage-req-1');
      expect(err.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err.details).toMatch(/^body: /);
      expect(violations(err)).toEqual([['body', 'MALFORMED_PROTOBUF']]);
    }
    const after = await (await fetch(`${h.url}/metrics`)).text();
    const labels = { method: 'SendMessage', code: 'INVALID_ARGUMENT' };
    expect(sample(after, 'botplatform_rpc_calls_total', labels) - sample(before, 'botplatform_rpc_calls_total', labels)).toBe(3);
    const lines = logs.filter((l) => l.msg === 'rpc' && l.requestId === 'garbage-req-1');
    expect(lines).toHaveLength(3);
    for (const l of lines) expect(l).toMatchObject({ rpc: 'SendMessage', code: 'INVALID_ARGUMENT' });
    // The caller is still known when its credential is good: the bot's own call.
    expect(lines[0]).toMatchObject({ bot: id });
  });

  it('refuses an int64 beyond +-(2^53-1) as INVALID_ARGUMENT on that field, and takes 2^53-1 itself', async () => {
    const { token } = await approvedBot(h, alice, 'grpc_int64_bot');
    const max = 2n ** 53n - 1n;
    for (const chatId of [max + 1n, -(max + 1n), 2n ** 63n - 1n, -(2n ** 63n)]) {
      const err = await rawCall(SEND_MESSAGE, sendMessageBytes(chatId), token);
      expect(err.code, String(chatId)).toBe(grpc.status.INVALID_ARGUMENT);
      expect(violations(err)).toEqual([['chat_id', 'OUT_OF_RANGE']]);
      expect(err.details).toBe('chat_id: must be between -9007199254740991 and 9007199254740991');
    }
    // In range: decoded and handed to the method, which knows no such chat.
    for (const chatId of [max, -max]) {
      expect(violations(await rawCall(SEND_MESSAGE, sendMessageBytes(chatId), token))).toEqual([['chat_id', 'CHAT_NOT_FOUND']]);
    }
  });

  it('names nested and repeated fields by their path, and the field whose bytes are broken', async () => {
    const { id, token } = await approvedBot(h, alice, 'grpc_nested_bot');
    // CreateTestUpdateRequest{id, text, from: User{id: 2^53}}.
    const user = new BinaryWriter().tag(1, WireType.Varint).int64(2n ** 53n).finish();
    const testUpdate = new BinaryWriter().tag(1, WireType.LengthDelimited).string(id).tag(2, WireType.LengthDelimited).string('x')
      .tag(4, WireType.LengthDelimited).bytes(user).finish();
    const nested = await rawCall('/botplatform.v1.ConsoleService/CreateTestUpdate', testUpdate, alice);
    expect(violations(nested)).toEqual([['from.id', 'OUT_OF_RANGE']]);

    // IngestUpdatesRequest{updates: [ok, {bot_id, message: {chat: {id: -2^63}}}]}.
    const chat = new BinaryWriter().tag(1, WireType.Varint).int64(-(2n ** 63n)).finish();
    const message = (chatBytes: Uint8Array) => new BinaryWriter().tag(1, WireType.Varint).int64(1).tag(3, WireType.LengthDelimited).bytes(chatBytes).finish();
    const update = (m: Uint8Array) => new BinaryWriter().tag(1, WireType.LengthDelimited).string(id).tag(2, WireType.LengthDelimited).bytes(m).finish();
    const okChat = new BinaryWriter().tag(1, WireType.Varint).int64(5).finish();
    const ingest = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(update(message(okChat)))
      .tag(1, WireType.LengthDelimited).bytes(update(message(chat))).finish();
    const repeated = await rawCall('/botplatform.v1.InternalService/IngestUpdates', ingest, TEST_INTERNAL_TOKEN);
    expect(repeated.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(violations(repeated)).toEqual([['updates[1].message.chat.id', 'OUT_OF_RANGE']]);

    // text: a length past the end of the request.
    const truncated = Buffer.concat([new BinaryWriter().tag(1, WireType.Varint).int64(7).finish(), Buffer.from([0x12, 50, 0x61, 0x62])]);
    expect(violations(await rawCall(SEND_MESSAGE, truncated, token))).toEqual([['text', 'MALFORMED_PROTOBUF']]);
    // Nothing was ingested for the bot.
    expect((await client(h.url, alice).get(`/api/v1/bots/my/${id}/metrics`)).body.updates).toMatchObject({ pending: 0 });
  });

  it('states the +-(2^53-1) bound on every int64 of the OpenAPI document (narrower where the proto constrains it)', async () => {
    const doc = await (await fetch(`${h.url}/api/v1/openapi.json`)).json();
    const bounded: unknown[] = [];
    const visit = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(visit);
      else if (node && typeof node === 'object') {
        const o = node as Record<string, unknown>;
        if (o.format === 'int64') bounded.push([o.minimum, o.maximum]);
        Object.values(o).forEach(visit);
      }
    };
    visit(doc);
    expect(bounded.length).toBeGreaterThan(20);
    // A (botplatform.v1.constraints) minimum (offset >= 0, reply_to_message_id and file_size >= 1) narrows the lower
    // bound; file_size's maximum is the deployment's MAX_FILE_BYTES (2 GiB by default), which the served document carries.
    expect(new Set(bounded.map((b) => JSON.stringify(b)))).toEqual(new Set([
      [-(2 ** 53 - 1), 2 ** 53 - 1], [0, 2 ** 53 - 1], [1, 2 ** 53 - 1], [1, 2 ** 31],
    ].map((b) => JSON.stringify(b))));
    expect(doc.components.schemas['botplatform.v1.SendMessageRequest'].properties.chat_id.description).toContain('2^53-1');
  });

  describe('a call whose caller left before it finished', () => {
    const metrics = async () => (await fetch(`${h.url}/metrics`)).text();
    /** How many calls of `method` were counted with each of `codes` since `before`. */
    const counted = async (before: string, method: string, codes: string[]) => {
      const now = await metrics();
      return Object.fromEntries(codes.map((code) => [code,
        sample(now, 'botplatform_rpc_calls_total', { method, code }) - sample(before, 'botplatform_rpc_calls_total', { method, code })]));
    };
    const callOptions = (credential: string, requestId: string) => {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${credential}`);
      md.set('x-request-id', requestId);
      return md;
    };
    /** Holds the bot's row (MariaDB) or the only connection (SQLite): its ingest cannot commit until released. */
    const holdWrites = async (botId: string) => {
      let release!: () => void;
      let held!: () => void;
      const holding = new Promise<void>((r) => { held = r; });
      const done = h.apps[0]!.db!.sql.unit(async (w) => {
        await w.all(`SELECT id FROM bots WHERE id = ?${usingMysql() ? ' FOR UPDATE' : ''}`, [botId]);
        held();
        await new Promise<void>((r) => { release = r; });
        throw new Error('rolled back');
      }, { attempts: 1 }).catch(() => {});
      await holding;
      return () => {
        release();
        return done;
      };
    };
    const message = { messageId: 0, date: 0, chat: { id: 77, type: 'private' }, from: { id: 77, isBot: false }, text: 'late' };

    it('a long poll past its deadline is released at the deadline and counted DEADLINE_EXCEEDED, not at its timeout', async () => {
      const { token } = await approvedBot(h, alice, 'grpc_deadline_poller');
      const before = await metrics();
      const started = Date.now();
      const err = await new Promise<grpc.ServiceError | null>((resolve) => runtimeClient.getUpdates(
        { timeout: 2, allowedUpdates: [] }, callOptions(token, 'deadline-poll-1'), { deadline: Date.now() + 300 }, (e) => resolve(e)));
      expect(err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
      const codes = ['DEADLINE_EXCEEDED', 'CANCELLED', 'OK'];
      // Counted and released at the deadline, well before the poll's 2 s timeout.
      const seen = await until(() => counted(before, 'GetUpdates', codes), (c) => c.DEADLINE_EXCEEDED! > 0, 1000);
      expect(Date.now() - started).toBeLessThan(1500);
      expect(seen).toEqual({ DEADLINE_EXCEEDED: 1, CANCELLED: 0, OK: 0 });
      expect(sample(await metrics(), 'botplatform_long_polls_open', {})).toBe(0);
      expect(logs.filter((l) => l.msg === 'rpc' && l.requestId === 'deadline-poll-1')).toEqual([
        expect.objectContaining({ rpc: 'GetUpdates', code: 'DEADLINE_EXCEEDED' }),
      ]);
    });

    it('an ingest that commits after its deadline passed is counted and logged DEADLINE_EXCEEDED, not OK', async () => {
      const { id } = await approvedBot(h, alice, 'grpc_deadline_ingest');
      const before = await metrics();
      const release = await holdWrites(id);
      let err: grpc.ServiceError | null;
      try {
        err = await new Promise<grpc.ServiceError | null>((resolve) => internalClient.ingestUpdates(
          IngestUpdatesRequest.fromPartial({ updates: [{ botId: id, message }] }), callOptions(TEST_INTERNAL_TOKEN, 'deadline-ingest-1'), { deadline: Date.now() + 300 },
          (e) => resolve(e)));
        // Still hung well after the deadline (as on the server's clock, a little behind the client's).
        await new Promise((r) => setTimeout(r, 200));
      } finally {
        await release();
      }
      expect(err?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
      // The write goes through once the database is free; the call is counted as its caller saw it.
      const seen = await until(() => counted(before, 'IngestUpdates', ['DEADLINE_EXCEEDED', 'OK']), (c) => c.DEADLINE_EXCEEDED! + c.OK! > 0, 5000);
      expect(seen).toEqual({ DEADLINE_EXCEEDED: 1, OK: 0 });
      expect(logs.filter((l) => l.msg === 'rpc' && l.requestId === 'deadline-ingest-1')).toEqual([
        expect.objectContaining({ rpc: 'IngestUpdates', code: 'DEADLINE_EXCEEDED' }),
      ]);
    });

    it('an ingest its client cancelled is counted and logged CANCELLED, not OK', async () => {
      const { id } = await approvedBot(h, alice, 'grpc_cancelled_ingest');
      const before = await metrics();
      const release = await holdWrites(id);
      let err: grpc.ServiceError | null;
      try {
        err = await new Promise<grpc.ServiceError | null>((resolve) => {
          const call = internalClient.ingestUpdates(
            IngestUpdatesRequest.fromPartial({ updates: [{ botId: id, message }] }), callOptions(TEST_INTERNAL_TOKEN, 'cancelled-ingest-1'), { deadline: Date.now() + 10_000 },
            (e) => resolve(e));
          setTimeout(() => call.cancel(), 200);
        });
        await new Promise((r) => setTimeout(r, 100)); // the cancel reaches the server while the write still waits
      } finally {
        await release();
      }
      expect(err?.code).toBe(grpc.status.CANCELLED);
      const seen = await until(() => counted(before, 'IngestUpdates', ['CANCELLED', 'DEADLINE_EXCEEDED', 'OK']), (c) => c.CANCELLED! + c.OK! > 0, 5000);
      expect(seen).toEqual({ CANCELLED: 1, DEADLINE_EXCEEDED: 0, OK: 0 });
      expect(logs.filter((l) => l.msg === 'rpc' && l.requestId === 'cancelled-ingest-1')).toEqual([
        expect.objectContaining({ rpc: 'IngestUpdates', code: 'CANCELLED' }),
      ]);
    });
  });

  it('answers the standard health check', async () => {
    const require = createRequire(import.meta.url);
    const { protoPath } = require('grpc-health-check') as { protoPath: string };
    const def = grpc.loadPackageDefinition(protoLoader.loadSync(protoPath, { enums: String })) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    const health = new def.grpc.health.v1.Health(h.grpcAddress, grpc.credentials.createInsecure());
    const res = await new Promise<{ status: string }>((resolve, reject) =>
      health.check({ service: 'botplatform.v1.ConsoleService' }, (err: Error | null, r: { status: string }) => (err ? reject(err) : resolve(r))),
    );
    expect(res.status).toBe('SERVING');
    health.close();
  });

  it('serves reflection: services are listed and their descriptors resolve', async () => {
    const require = createRequire(import.meta.url);
    const reflectionProto = path.join(path.dirname(require.resolve('@grpc/reflection/package.json')), 'build/proto/grpc/reflection/v1/reflection.proto');
    const def = grpc.loadPackageDefinition(protoLoader.loadSync(reflectionProto, { keepCase: true })) as any; // eslint-disable-line @typescript-eslint/no-explicit-any
    const reflection = new def.grpc.reflection.v1.ServerReflection(h.grpcAddress, grpc.credentials.createInsecure());
    const ask = (request: object) =>
      new Promise<any>((resolve, reject) => { // eslint-disable-line @typescript-eslint/no-explicit-any
        const stream = reflection.ServerReflectionInfo();
        stream.on('data', (d: unknown) => {
          resolve(d);
          stream.end();
        });
        stream.on('error', reject);
        stream.write(request);
      });
    const list = await ask({ list_services: '' });
    const names = list.list_services_response.service.map((s: { name: string }) => s.name);
    expect(names).toEqual(expect.arrayContaining([
      'botplatform.v1.ConsoleService', 'botplatform.v1.AdminService', 'botplatform.v1.RuntimeService', 'grpc.health.v1.Health',
    ]));
    const file = await ask({ file_containing_symbol: 'botplatform.v1.ConsoleService' });
    expect(file.file_descriptor_response.file_descriptor_proto.length).toBeGreaterThan(0);
    reflection.close();
  });
});
