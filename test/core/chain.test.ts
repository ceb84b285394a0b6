/**
 * The core's one interceptor chain, without a transport: unary calls and streams run
 * the same steps (route, undecodable, auth, limits, failure, record), a stream's
 * outcome is recorded once, when its responses stop (taken to the last, failed between
 * two, or left by its consumer), and a stream's parts are calls of their own.
 */
import { describe, expect, it } from 'vitest';
import { createCore, UndecodableRequest, type BoundMethod, type StreamingHandler } from '../../src/core/core.js';
import type { CallContext, Principal } from '../../src/core/context.js';
import type { Limiter } from '../../src/core/limits.js';
import { ApiError, Code } from '../../src/errors.js';
import { methodSettings } from '../../src/gen/methods.js';
import { createLogger } from '../../src/logger.js';
import type { Telemetry } from '../../src/telemetry/metrics.js';
import { collectLogLines } from '../helpers/log-lines.js';

const GET_ME = '/botplatform.v1.RuntimeService/GetMe';
const SENT = '/botplatform.v1.InternalService/StreamSentMessages'; // server stream
const INGEST = '/botplatform.v1.InternalService/StreamIngestUpdates'; // bidirectional

const BOT: Principal = { kind: 'bot', botId: 'bot_1', ownerId: 'acct_1' };

/** A core over fake handlers: `overrides` by path, every other method answering {}. */
function setup(overrides: Record<string, BoundMethod> = {}, opts: { limiter?: Pick<Limiter, 'check'> } = {}) {
  const handlers: Record<string, BoundMethod> = {};
  for (const [path, s] of Object.entries(methodSettings)) {
    handlers[path] = overrides[path] ?? (s.streaming ? { streaming: s.streaming, call: async function* () {} } : async () => ({}));
  }
  const authenticated: string[] = [];
  const counted: { kind: 'rpc' | 'stream'; method: string; status: string }[] = [];
  const { sink, lines } = collectLogLines();
  const core = createCore({
    // Any credential but "good" is refused; "good" proves a bot, whatever the method wants.
    authenticator: {
      authenticate: async (credential, metadata) => {
        authenticated.push(credential);
        if (metadata.authorization !== 'Bearer good') throw ApiError.unauthenticated('invalid credential');
        return BOT;
      },
    },
    handlers,
    logger: createLogger('info', sink),
    limiter: opts.limiter as Limiter | undefined,
    telemetry: {
      rpc: (method: string, status: string) => counted.push({ kind: 'rpc', method, status }),
      stream: (method: string, status: string) => counted.push({ kind: 'stream', method, status }),
    } as unknown as Telemetry,
  });
  const rpcLines = () => lines.filter((l) => l.msg === 'rpc' || l.msg === 'rpc stream');
  return { core, authenticated, counted, lines, rpcLines };
}

const good = { authorization: 'Bearer good', 'x-request-id': 'req-1' };

async function drain(responses: AsyncIterable<unknown>, take = Infinity): Promise<{ got: unknown[]; error?: unknown }> {
  const got: unknown[] = [];
  try {
    for await (const r of responses) {
      got.push(r);
      if (got.length >= take) break;
    }
  } catch (error) {
    return { got, error };
  }
  return { got };
}

describe('the core chain (unary and streaming alike)', () => {
  it('refuses a bad credential before the handler, counted and logged under the method, for a call and a stream', async () => {
    let reached = 0;
    const { core, counted, rpcLines } = setup({
      [GET_ME]: async () => {
        reached++;
        return {};
      },
      [SENT]: { streaming: 'server', call: async function* () { reached++; yield {}; } },
    });
    const bad = { authorization: 'Bearer bad', 'x-request-id': 'req-bad' };
    await expect(core.invoke(GET_ME, {}, bad)).rejects.toMatchObject({ code: Code.UNAUTHENTICATED });
    const { got, error } = await drain(core.stream(SENT, {}, bad));
    expect(got).toEqual([]);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).code).toBe(Code.UNAUTHENTICATED);
    expect(reached).toBe(0);
    expect(counted).toEqual([
      { kind: 'rpc', method: 'GetMe', status: 'UNAUTHENTICATED' },
      { kind: 'stream', method: 'StreamSentMessages', status: 'UNAUTHENTICATED' },
    ]);
    expect(rpcLines()).toMatchObject([
      { msg: 'rpc', rpc: 'GetMe', code: 'UNAUTHENTICATED', requestId: 'req-bad' },
      { msg: 'rpc stream', rpc: 'StreamSentMessages', code: 'UNAUTHENTICATED', requestId: 'req-bad', sent: 0 },
    ]);
  });

  it('answers a path with no RPC of the kind called UNIMPLEMENTED, without reading the credential', async () => {
    const { core, authenticated, counted } = setup();
    await expect(core.invoke(SENT, {}, good)).rejects.toMatchObject({ code: Code.UNIMPLEMENTED, message: `unknown method ${SENT}` });
    const { error } = await drain(core.stream(GET_ME, {}, good));
    expect(error).toMatchObject({ code: Code.UNIMPLEMENTED, message: `unknown streaming method ${GET_ME}` });
    await expect(core.invoke('/nope.Service/Nope', {}, good)).rejects.toMatchObject({ code: Code.UNIMPLEMENTED });
    expect(authenticated).toEqual([]);
    expect(counted.map((c) => `${c.kind} ${c.method} ${c.status}`)).toEqual([
      'rpc StreamSentMessages UNIMPLEMENTED', 'stream GetMe UNIMPLEMENTED', 'rpc unknown UNIMPLEMENTED',
    ]);
  });

  it('refuses an undecodable request with its own error, still attributed to the caller whose credential holds', async () => {
    const { core, rpcLines } = setup();
    const undecodable = new UndecodableRequest(ApiError.invalid('body', 'MALFORMED_PROTOBUF', 'is not a valid message'));
    await expect(core.invoke(GET_ME, undecodable, good)).rejects.toBe(undecodable.error);
    const { error } = await drain(core.stream(SENT, undecodable, { authorization: 'Bearer bad' }));
    expect(error).toBe(undecodable.error);
    expect(rpcLines()).toMatchObject([
      { msg: 'rpc', rpc: 'GetMe', code: 'INVALID_ARGUMENT', bot: 'bot_1' },
      { msg: 'rpc stream', rpc: 'StreamSentMessages', code: 'INVALID_ARGUMENT' },
    ]);
    expect(rpcLines()[1]).not.toHaveProperty('bot');
  });

  it('admits a call of one request (unary, or a server stream) through the limiter, and a refused one never reaches its handler', async () => {
    const checked: string[] = [];
    let reached = 0;
    const { core, counted } = setup({
      [GET_ME]: async () => {
        reached++;
        return {};
      },
      [SENT]: { streaming: 'server', call: async function* () { reached++; yield {}; } },
    }, {
      limiter: {
        check: async (botId: string, path: string) => {
          checked.push(`${botId} ${path}`);
          throw new ApiError(Code.RESOURCE_EXHAUSTED, 'too many requests', { retryAfterSeconds: 1 });
        },
      },
    });
    await expect(core.invoke(GET_ME, {}, good)).rejects.toMatchObject({ code: Code.RESOURCE_EXHAUSTED });
    expect((await drain(core.stream(SENT, {}, good))).error).toMatchObject({ code: Code.RESOURCE_EXHAUSTED });
    // A bidirectional stream's requests are limited by its parts, not as one call.
    expect((await drain(core.stream(INGEST, (async function* () {})(), good))).error).toBeUndefined();
    expect(checked).toEqual([`bot_1 ${GET_ME}`, `bot_1 ${SENT}`]);
    expect(reached).toBe(0);
    expect(counted.map((c) => c.status)).toEqual(['RESOURCE_EXHAUSTED', 'RESOURCE_EXHAUSTED', 'OK']);
  });

  it('turns a plain error into INTERNAL, logged once as the service\'s fault, whether a handler throws it or a stream between two responses', async () => {
    const { core, counted, lines, rpcLines } = setup({
      [GET_ME]: async () => {
        throw new Error('boom');
      },
      [SENT]: {
        streaming: 'server',
        call: async function* () {
          yield { n: 1 };
          yield { n: 2 };
          throw new Error('boom in the stream');
        },
      },
    });
    await expect(core.invoke(GET_ME, {}, good)).rejects.toMatchObject({ code: Code.INTERNAL, message: 'internal error' });
    const { got, error } = await drain(core.stream(SENT, {}, good));
    expect(got).toEqual([{ n: 1 }, { n: 2 }]);
    expect(error).toMatchObject({ code: Code.INTERNAL, message: 'internal error' });
    expect(lines.filter((l) => l.msg === 'call failed').map((l) => l.rpc)).toEqual(['GetMe', 'StreamSentMessages']);
    expect(counted.map((c) => c.status)).toEqual(['INTERNAL', 'INTERNAL']);
    expect(rpcLines()[1]).toMatchObject({ msg: 'rpc stream', code: 'INTERNAL', sent: 2, bot: 'bot_1' });
  });

  it('records a stream once, when its consumer leaves early: what it sent, and the status the caller saw if it left with one', async () => {
    let closed = 0;
    const endless: StreamingHandler = {
      streaming: 'server',
      call: async function* () {
        try {
          for (let n = 0; ; n++) yield { n };
        } finally {
          closed++;
        }
      },
    };
    const { core, counted, rpcLines } = setup({ [SENT]: endless });
    expect((await drain(core.stream(SENT, {}, good), 3)).got).toHaveLength(3);
    const left = new AbortController();
    const responses = core.stream(SENT, {}, good, left.signal);
    const it = responses[Symbol.asyncIterator]();
    await it.next();
    left.abort(new ApiError(Code.CANCELLED, 'the client cancelled the call'));
    await it.return!();
    expect(closed).toBe(2);
    expect(counted).toEqual([
      { kind: 'stream', method: 'StreamSentMessages', status: 'OK' },
      { kind: 'stream', method: 'StreamSentMessages', status: 'CANCELLED' },
    ]);
    expect(rpcLines()).toMatchObject([{ code: 'OK', sent: 3 }, { code: 'CANCELLED', sent: 1 }]);
    // A stream never read runs nothing.
    core.stream(SENT, {}, good);
    expect(counted).toHaveLength(2);
  });

  it('runs a stream\'s part as a call of its own: its error as the ApiError a call would get, on an rpc line with its fields', async () => {
    const ingest: StreamingHandler = {
      streaming: 'bidi',
      call: async function* (_requests: unknown, ctx: CallContext) {
        yield await ctx.part!({ sequence: 1 }, async () => ({ ok: 1 }));
        try {
          await ctx.part!({ sequence: 2 }, async () => {
            throw new Error('part failed');
          });
        } catch (err) {
          yield { error: (err as ApiError).code };
        }
      },
    };
    const { core, counted, rpcLines } = setup({ [INGEST]: ingest });
    const { got } = await drain(core.stream(INGEST, (async function* () {})(), good));
    expect(got).toEqual([{ ok: 1 }, { error: Code.INTERNAL }]);
    expect(counted).toEqual([
      { kind: 'rpc', method: 'StreamIngestUpdates', status: 'OK' },
      { kind: 'rpc', method: 'StreamIngestUpdates', status: 'INTERNAL' },
      { kind: 'stream', method: 'StreamIngestUpdates', status: 'OK' },
    ]);
    expect(rpcLines()).toMatchObject([
      { msg: 'rpc', sequence: 1, code: 'OK', bot: 'bot_1', requestId: 'req-1' },
      { msg: 'rpc', sequence: 2, code: 'INTERNAL', bot: 'bot_1', requestId: 'req-1' },
      { msg: 'rpc stream', code: 'OK', sent: 2 },
    ]);
  });

  it('gives a unary call\'s rpc fields to the log sink that takes them, and logs them itself when it does not', async () => {
    const { core, rpcLines } = setup();
    const taken: Record<string, unknown>[] = [];
    await core.invoke(GET_ME, {}, good, undefined, { takeRpcLog: (fields) => (taken.push(fields), true) });
    expect(taken).toMatchObject([{ rpc: 'GetMe', code: 'OK', bot: 'bot_1' }]);
    expect(rpcLines()).toEqual([]);
    await core.invoke(GET_ME, {}, good, undefined, { takeRpcLog: () => false });
    expect(rpcLines()).toMatchObject([{ msg: 'rpc', rpc: 'GetMe', code: 'OK' }]);
  });
});
