/**
 * StreamIngestUpdates over real gRPC on loopback: batches in, one acknowledgement per
 * batch out in order (results, or that batch's own error as a google.rpc.Status with
 * its details), idempotency keys across batches, the internal credential, flow
 * control (a caller that stops reading stops the service reading), and the per-batch
 * log lines and metrics of the unary call.
 */
import http2 from 'node:http2';
import v8 from 'node:v8';
import vm from 'node:vm';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  IncomingUpdate,
  InternalServiceClient,
  StreamIngestUpdatesRequest,
  StreamIngestUpdatesResponse,
} from '../src/gen/botplatform/v1/internal_service.js';
import { Message } from '../src/gen/botplatform/v1/update.js';
import { BadRequest, ErrorInfo } from '../src/gen/google/rpc/error_details.js';
import type { Status } from '../src/gen/google/rpc/status.js';
import { approvedBot, call, startHarness, TEST_INTERNAL_TOKEN, type Harness } from './helpers/harness.js';
import { collectLogLines } from './helpers/log-lines.js';
import { until } from './helpers/until.js';

const PATH = '/botplatform.v1.InternalService/StreamIngestUpdates';

/** The field violations and ErrorInfo reason of a batch's error. */
function detailsOf(status: Status | undefined) {
  const out: { violations: [string, string][]; reason?: string; domain?: string } = { violations: [] };
  for (const any of status?.details ?? []) {
    if (any.typeUrl.endsWith('google.rpc.BadRequest')) out.violations = BadRequest.decode(any.value).fieldViolations.map((v) => [v.field, v.reason]);
    if (any.typeUrl.endsWith('google.rpc.ErrorInfo')) {
      const info = ErrorInfo.decode(any.value);
      out.reason = info.reason;
      out.domain = info.domain;
    }
  }
  return out;
}

describe('StreamIngestUpdates', () => {
  let h: Harness;
  let internal: InternalServiceClient;
  let raw: grpc.Client;
  let alice: string;
  const { sink, lines: logs } = collectLogLines();

  beforeAll(async () => {
    h = await startHarness('in-process', { LOG_LEVEL: 'info' }, sink);
    internal = new InternalServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    raw = new grpc.Client(h.grpcAddress, grpc.credentials.createInsecure());
    alice = await h.jwt('stream-owner');
  });
  afterAll(async () => {
    internal?.close();
    raw?.close();
    await h?.close();
  });

  const metadata = (credential = TEST_INTERNAL_TOKEN, requestId?: string) => {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${credential}`);
    if (requestId) md.set('x-request-id', requestId);
    return md;
  };
  const message = (text: string, chatId = 777) => Message.fromPartial({
    messageId: 0, date: 0, chat: { id: chatId, type: 'private' }, from: { id: chatId, isBot: false }, text,
  });
  const update = (botId: string, m: Message, idempotencyKey?: string): IncomingUpdate => IncomingUpdate.fromPartial({ botId, message: m, idempotencyKey });

  /** Opens a stream; `acks` fills as acknowledgements arrive, `ended` settles with the call's status. */
  function open(md = metadata()) {
    const stream = internal.streamIngestUpdates(md);
    const acks: StreamIngestUpdatesResponse[] = [];
    stream.on('data', (a: StreamIngestUpdatesResponse) => acks.push(a));
    const ended = new Promise<grpc.StatusObject>((resolve) => {
      stream.on('status', resolve);
      stream.on('error', () => {}); // the status says it
    });
    return { stream, acks, ended };
  }

  const poll = (token: string, offset = 0, limit = 100) =>
    call(h.url, 'POST', '/api/v1/bots/getUpdates', { token, body: { offset, limit } });
  const pending = async (token: string) =>
    (await call(h.url, 'POST', '/api/v1/bots/getWebhookInfo', { token })).body.result.pending_update_count as number;

  it('acknowledges every batch in order with its results; a bad batch gets its own error and the stream goes on', async () => {
    const { id, token } = await approvedBot(h, alice, 'stream_order_bot');
    const { stream, acks, ended } = open();
    stream.write({ sequence: 10, updates: [update(id, message('a1')), update(id, message('a2'))] });
    // Refused whole: one bad update among good ones, so nothing of it is stored.
    stream.write({ sequence: 11, updates: [update(id, message('b1')), update(id, { ...message(''), text: '' })] });
    stream.write({ sequence: 12, updates: [update('no-such-bot', message('c1'))] });
    stream.write({ sequence: 13, updates: [] });
    stream.write({ sequence: 14, updates: [update(id, message('d1'))] });
    stream.end();
    const status = await ended;
    expect(status.code).toBe(grpc.status.OK);

    expect(acks.map((a) => a.sequence)).toEqual([10, 11, 12, 13, 14]);
    expect(acks[0]!.error).toBeUndefined();
    expect(acks[0]!.results.map((r) => r.updateSeq)).toEqual([1, 2]);
    expect(acks[1]!.results).toEqual([]);
    expect(acks[1]!.error).toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    expect(detailsOf(acks[1]!.error)).toEqual({
      violations: [['updates[1].message.text', 'INVALID_LENGTH']], reason: 'INVALID_ARGUMENT', domain: 'botplatform.dev',
    });
    expect(acks[2]!.error).toMatchObject({ code: grpc.status.NOT_FOUND, message: 'updates[0].bot_id: no such bot' });
    expect(detailsOf(acks[3]!.error).violations).toEqual([['updates', 'REQUIRED']]);
    expect(acks[4]!.error).toBeUndefined();
    expect(acks[4]!.results.map((r) => r.updateSeq)).toEqual([3]);

    const got = await poll(token);
    expect(got.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['a1', 'a2', 'd1']);
  });

  it('stores batches in the order they were written: one bot\'s update_seqs follow the stream, however its batches\' checks interleave', async () => {
    const { id, token } = await approvedBot(h, alice, 'stream_seq_bot');
    const { stream, acks, ended } = open();
    const N = 200;
    for (let i = 0; i < N; i++) stream.write({ sequence: i + 1, updates: [update(id, message(`n${i}`))] });
    stream.end();
    expect((await ended).code).toBe(grpc.status.OK);
    expect(acks.map((a) => a.error)).toEqual(Array(N).fill(undefined));
    expect(acks.map((a) => a.results[0]!.updateSeq)).toEqual(Array.from({ length: N }, (_, i) => i + 1));
    const got = await poll(token, 0, 100);
    expect(got.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(Array.from({ length: 100 }, (_, i) => `n${i}`));
  });

  it('keeps nothing of what a stream carried once it has answered it: 24 MB through one stream leave the heap as it was', async () => {
    const { id } = await approvedBot(h, alice, 'stream_memory_bot');
    // The heap measured live (garbage collected first), as a heap snapshot counts it.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const liveHeap = () => {
      gc();
      gc();
      return process.memoryUsage().heapUsed;
    };
    const before = liveHeap();
    const { stream, acks, ended } = open();
    const BATCHES = 60;
    for (let i = 0; i < BATCHES; i++) {
      // 100 texts of 4,000 characters, each its own.
      const updates = Array.from({ length: 100 }, (_, k) => update(id, message(`${i}:${k}:`.padEnd(4000, 'x'))));
      if (!stream.write({ sequence: i + 1, updates })) await new Promise((r) => stream.once('drain', r));
    }
    stream.end();
    expect((await ended).code).toBe(grpc.status.OK);
    expect(acks.filter((a) => a.error === undefined && a.results.length === 100)).toHaveLength(BATCHES);
    // Each step of the stream used to race one promise pending for the stream's life
    // (and kept after it by the server's shutdown signal): every batch stayed in its reactions.
    expect(liveHeap() - before).toBeLessThan(8 * 2 ** 20);
  });

  it('answers a batch that does not decode with INVALID_ARGUMENT naming the field and its sequence, and goes on', async () => {
    const { id, token } = await approvedBot(h, alice, 'stream_garbage_bot');
    const encode = (m: StreamIngestUpdatesRequest) => Buffer.from(StreamIngestUpdatesRequest.encode(m).finish());
    // sequence 21, then updates[0] whose message.chat.id is beyond 2^53-1: ts-proto cannot decode it.
    const chat = new BinaryWriter().tag(1, WireType.Varint).int64(2n ** 60n).finish();
    const msg = new BinaryWriter().tag(3, WireType.LengthDelimited).bytes(chat).finish();
    const badUpdate = new BinaryWriter().tag(1, WireType.LengthDelimited).string(id).tag(2, WireType.LengthDelimited).bytes(msg).finish();
    const garbage = Buffer.from(new BinaryWriter().tag(2, WireType.Varint).int64(21).tag(1, WireType.LengthDelimited).bytes(badUpdate).finish());

    const stream = raw.makeBidiStreamRequest(PATH, (b: Buffer) => b, (b: Buffer) => StreamIngestUpdatesResponse.decode(b), metadata());
    const acks: StreamIngestUpdatesResponse[] = [];
    stream.on('data', (a: StreamIngestUpdatesResponse) => acks.push(a));
    const ended = new Promise<grpc.StatusObject>((resolve) => stream.on('status', resolve));
    stream.on('error', () => {});
    stream.write(encode({ sequence: 20, updates: [update(id, message('before'))] }));
    stream.write(garbage);
    stream.write(encode({ sequence: 22, updates: [update(id, message('after'))] }));
    stream.end();
    expect((await ended).code).toBe(grpc.status.OK);
    expect(acks.map((a) => [a.sequence, a.error?.code ?? 0])).toEqual([[20, 0], [21, grpc.status.INVALID_ARGUMENT], [22, 0]]);
    expect(detailsOf(acks[1]!.error).violations).toEqual([['updates[0].message.chat.id', 'OUT_OF_RANGE']]);
    expect((await poll(token)).body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual(['before', 'after']);
  });

  it('keeps idempotency keys across batches and streams: a resent batch answers the ids it got', async () => {
    const { id, token } = await approvedBot(h, alice, 'stream_keys_bot');
    const batch = (sequence: number) => ({
      sequence,
      updates: [1, 2, 3].map((k) => update(id, message(`k${k}`), `src-${k}`)),
    });
    const first = open();
    first.stream.write(batch(1));
    first.stream.write(batch(2));
    first.stream.end();
    await first.ended;
    const second = open();
    second.stream.write(batch(3));
    second.stream.end();
    await second.ended;
    const ids = first.acks[0]!.results.map((r) => r.updateId);
    expect(first.acks[0]!.results.every((r) => !r.duplicate)).toBe(true);
    for (const ack of [first.acks[1]!, second.acks[0]!]) {
      expect(ack.results.map((r) => r.updateId)).toEqual(ids);
      expect(ack.results.every((r) => r.duplicate)).toBe(true);
    }
    expect((await poll(token)).body.result).toHaveLength(3);
  });

  it('ends UNAUTHENTICATED without the internal credential, storing nothing', async () => {
    const { id, token } = await approvedBot(h, alice, 'stream_auth_bot');
    for (const md of [new grpc.Metadata(), metadata('wrong-token'), metadata(token)]) {
      const { stream, acks, ended } = open(md);
      stream.write({ sequence: 1, updates: [update(id, message('nope'))] });
      stream.end();
      const status = await ended;
      expect(status.code).toBe(grpc.status.UNAUTHENTICATED);
      expect(status.details).not.toContain(token);
      expect(acks).toEqual([]);
    }
    expect(await pending(token)).toBe(0);
  });

  it('flow control: a caller that stops reading stops the service reading; reading again lets it all through', async () => {
    const { id, token } = await approvedBot(h, alice, 'stream_flow_bot');
    const BATCHES = 400;
    const PER_BATCH = 100;
    const { stream, acks, ended } = open();
    stream.pause(); // read no acknowledgement
    let refused = 0;
    for (let i = 0; i < BATCHES; i++) {
      const ok = stream.write({ sequence: i + 1, updates: Array.from({ length: PER_BATCH }, (_, k) => (update(id, message(`m${i}.${k}`)))) });
      if (!ok) refused++;
    }
    stream.end();
    expect(refused).toBeGreaterThan(0); // the caller's own writes back up
    // The service stops once its window of acknowledgements is full: the count settles well short of everything.
    let last = -1;
    await until(async () => {
      await new Promise((r) => setTimeout(r, 500));
      const now = await pending(token);
      const settled = now === last && now > 0;
      last = now;
      return settled;
    }, (settled) => settled, 20_000);
    expect(last).toBeGreaterThan(0);
    expect(last).toBeLessThan((BATCHES * PER_BATCH) / 2);
    stream.resume();
    expect((await ended).code).toBe(grpc.status.OK);
    expect(acks).toHaveLength(BATCHES);
    expect(acks.map((a) => a.sequence)).toEqual(Array.from({ length: BATCHES }, (_, i) => i + 1));
    expect(acks.every((a) => !a.error && a.results.length === PER_BATCH)).toBe(true);
    expect(await pending(token)).toBe(BATCHES * PER_BATCH);
  }, 60_000);

  it('on shutdown stops reading, acknowledges what it holds (in order, none refused), and ends UNAVAILABLE at once', async () => {
    const own = await startHarness('in-process', { SHUTDOWN_TIMEOUT: '30s' });
    const { id } = await approvedBot(own, await own.jwt('stream-owner'), 'stream_shutdown_bot');
    const c = new InternalServiceClient(own.grpcAddress, grpc.credentials.createInsecure());
    const stream = c.streamIngestUpdates(metadata());
    const acks: StreamIngestUpdatesResponse[] = [];
    stream.on('data', (a: StreamIngestUpdatesResponse) => acks.push(a));
    const ended = new Promise<grpc.StatusObject>((resolve) => stream.on('status', resolve));
    stream.on('error', () => {});
    let sequence = 0;
    const writer = setInterval(() => stream.write({ sequence: ++sequence, updates: [update(id, message(`s${sequence}`))] }), 2);
    await until(async () => acks.length, (n) => n >= 20);
    const t0 = Date.now();
    const closing = own.close();
    const status = await ended;
    // The stream ends at once; the rest of the close (the Kafka clients leaving their groups on a
    // broker other test files keep busy) is not what this measures.
    const endedAfter = Date.now() - t0;
    clearInterval(writer);
    await closing;
    c.close();
    expect(endedAfter).toBeLessThan(10_000);
    expect(status.code).toBe(grpc.status.UNAVAILABLE);
    expect(acks.map((a) => a.sequence)).toEqual(Array.from({ length: acks.length }, (_, i) => i + 1));
    expect(acks.every((a) => !a.error)).toBe(true);
  }, 60_000);

  it('on shutdown, acknowledgements the caller has not taken yet still reach it, in order, before UNAVAILABLE', async () => {
    // A caller that stops writing but keeps the stream open and reads nothing: past its window
    // (1 KiB), the service's acknowledgements wait on it. The service has read every batch and
    // waits for the next when it shuts down, so its stream ends with acknowledgements still to
    // send; the caller reads them afterwards. Plain HTTP/2 with gRPC's framing: a grpc-js client
    // whose caller reads nothing still takes every message off the connection into its own buffer.
    const own = await startHarness('in-process', { SHUTDOWN_TIMEOUT: '30s' });
    const { id, token } = await approvedBot(own, await own.jwt('stream-owner'), 'stream_unread_bot');
    const session = http2.connect(`http://${own.grpcAddress}`, { settings: { initialWindowSize: 1024 } });
    await new Promise((resolve) => session.once('localSettings', resolve)); // the service applies the window from the first byte
    const req = session.request({
      ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc', te: 'trailers', authorization: `Bearer ${TEST_INTERNAL_TOKEN}`,
    });
    req.pause();
    session.on('error', () => {});
    req.on('error', () => {});
    // The status, or nothing if the stream closes without one (as when the server is forced closed).
    const trailers = new Promise<http2.IncomingHttpHeaders>((resolve) => {
      req.once('trailers', resolve);
      req.once('close', () => resolve({}));
    });
    const frame = (m: StreamIngestUpdatesRequest) => {
      const bytes = StreamIngestUpdatesRequest.encode(m).finish();
      const out = Buffer.alloc(5 + bytes.length);
      out.writeUInt32BE(bytes.length, 1);
      out.set(bytes, 5);
      return out;
    };
    const BATCHES = 12; // fewer than the service holds at once (IN_FLIGHT): it reads every one
    const PER_BATCH = 500; // about 4 KiB an acknowledgement: 48 KiB in all
    for (let i = 0; i < BATCHES; i++) {
      req.write(frame({ sequence: i + 1, updates: Array.from({ length: PER_BATCH }, (_, k) => update(id, message(`u${i}.${k}`))) }));
    }
    const stored = await until(
      async () => (await call(own.url, 'POST', '/api/v1/bots/getWebhookInfo', { token })).body.result.pending_update_count as number,
      (n) => n === BATCHES * PER_BATCH,
    );
    expect(stored).toBe(BATCHES * PER_BATCH);
    const goaway = new Promise((resolve) => session.once('goaway', resolve));
    const t0 = Date.now();
    const closing = own.close();
    await goaway; // the gRPC server is closing (after the HTTP server): it has told the stream to end
    await new Promise((r) => setTimeout(r, 100)); // and the stream has ended by now, acknowledgements still to send
    const chunks: Buffer[] = [];
    const drain = () => {
      for (let chunk: Buffer | null; (chunk = req.read()) !== null;) chunks.push(chunk);
    };
    req.on('readable', drain);
    drain();
    const status = await trailers;
    const endedAfter = Date.now() - t0;
    req.close(); // as a gRPC client does once it has the status
    await closing;
    session.close();
    const body = Buffer.concat(chunks);
    const acks: StreamIngestUpdatesResponse[] = [];
    for (let at = 0; at < body.length; at += 5 + body.readUInt32BE(at + 1)) {
      acks.push(StreamIngestUpdatesResponse.decode(body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1))));
    }
    expect(Number(status['grpc-status'])).toBe(grpc.status.UNAVAILABLE);
    expect(acks.map((a) => a.sequence)).toEqual(Array.from({ length: BATCHES }, (_, i) => i + 1));
    expect(acks.every((a) => !a.error && a.results.length === PER_BATCH)).toBe(true);
    expect(endedAfter).toBeLessThan(10_000); // not at SHUTDOWN_TIMEOUT
  }, 60_000);

  it('logs and counts each batch as a call of the method, and the stream once when it ends', async () => {
    const { id } = await approvedBot(h, alice, 'stream_telemetry_bot');
    const metrics = async () => (await fetch(`${h.url}/metrics`)).text();
    const count = (text: string, name: string, code: string) =>
      Number(new RegExp(`^${name}\\{method="StreamIngestUpdates",code="${code}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
    const before = await metrics();
    const { stream, ended } = open(metadata(TEST_INTERNAL_TOKEN, 'stream-req-1'));
    stream.write({ sequence: 1, updates: [update(id, message('t1'))] });
    stream.write({ sequence: 2, updates: [] });
    stream.end();
    await ended;
    await until(async () => logs.some((l) => l.msg === 'rpc stream' && l.requestId === 'stream-req-1'), Boolean);
    const after = await metrics();
    expect(count(after, 'botplatform_rpc_calls_total', 'OK') - count(before, 'botplatform_rpc_calls_total', 'OK')).toBe(1);
    expect(count(after, 'botplatform_rpc_calls_total', 'INVALID_ARGUMENT') - count(before, 'botplatform_rpc_calls_total', 'INVALID_ARGUMENT')).toBe(1);
    expect(count(after, 'botplatform_rpc_streams_total', 'OK') - count(before, 'botplatform_rpc_streams_total', 'OK')).toBe(1);
    const lines = logs.filter((l) => l.requestId === 'stream-req-1');
    // Batches run concurrently: their lines come as each finishes.
    const batchLines = lines.filter((l) => l.msg === 'rpc').sort((x, y) => Number(x.sequence) - Number(y.sequence));
    expect(batchLines.map((l) => [l.rpc, l.sequence, l.code])).toEqual([
      ['StreamIngestUpdates', 1, 'OK'], ['StreamIngestUpdates', 2, 'INVALID_ARGUMENT'],
    ]);
    expect(lines.find((l) => l.msg === 'rpc stream')).toMatchObject({ rpc: 'StreamIngestUpdates', code: 'OK', sent: 2 });
    expect(JSON.stringify(lines)).not.toContain(TEST_INTERNAL_TOKEN);
  });
});
