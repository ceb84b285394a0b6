/**
 * A consumer of the outbound feed (InternalService.StreamSentMessages) as a messaging
 * service would write one: it keeps its cursor (the last seq handled per partition),
 * follows its assignment, and can be cut off (the stream cancelled, as when its process
 * dies) and resumed from its cursor.
 */
import * as grpc from '@grpc/grpc-js';
import {
  InternalServiceClient,
  type FeedPosition,
  type SentMessage,
  type StreamSentMessagesResponse,
} from '../../src/gen/botplatform/v1/internal_service.js';
import { TEST_INTERNAL_TOKEN } from './harness.js';
import { until } from './until.js';

export interface FeedConsumer {
  /** Messages received, in arrival order. */
  messages: SentMessage[];
  /** The partitions held, as the last assignment said. */
  partitions(): number[];
  /** Whether an assignment has come (a stream's first event: the member has joined its group). */
  assigned(): boolean;
  /** The last seq received per partition (what it would resume from). */
  cursor(): FeedPosition[];
  /** How the stream ended, once it has. */
  ended: Promise<grpc.StatusObject>;
  /** Cancels the stream (as a consumer process that dies). */
  kill(): void;
  /** Waits until `ok` holds. */
  waitFor(ok: () => boolean, ms?: number): Promise<void>;
}

/**
 * Opens a stream. Each consumer makes its own client unless `opts.client` is given (then
 * that client's connection carries it, and it is left open). grpc-js's clients of one
 * address with the same options share one connection; `grpc.use_local_subchannel_pool`
 * in a client's options gives it one of its own.
 */
export function openFeed(
  address: string, group: string, start: FeedPosition[] = [], credential = TEST_INTERNAL_TOKEN, opts: { client?: InternalServiceClient } = {},
): FeedConsumer {
  const client = opts.client ?? new InternalServiceClient(address, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${credential}`);
  const stream = client.streamSentMessages({ group, start }, md);
  const messages: SentMessage[] = [];
  const positions = new Map(start.map((p) => [p.partition, p.seq]));
  let held: number[] = [];
  let assigned = false;
  stream.on('data', (e: StreamSentMessagesResponse) => {
    if (e.assignment) {
      held = e.assignment.partitions;
      assigned = true;
    }
    if (e.message) {
      messages.push(e.message);
      positions.set(e.message.partition, e.message.seq);
    }
  });
  const ended = new Promise<grpc.StatusObject>((resolve) => {
    stream.on('status', (s) => {
      if (!opts.client) client.close();
      resolve(s);
    });
    stream.on('error', () => {});
  });
  return {
    messages,
    partitions: () => held,
    assigned: () => assigned,
    cursor: () => [...positions].map(([partition, seq]) => ({ partition, seq })),
    ended,
    kill: () => stream.cancel(),
    async waitFor(ok, ms = 15_000) {
      const done = await until(async () => ok(), Boolean, ms);
      if (!done) throw new Error('feed consumer: condition not reached in time');
    },
  };
}

/** The texts each chat's messages carried, in the order received: "bot/chat" → texts. */
export function byChat(messages: SentMessage[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const m of messages) {
    const key = `${m.botId}/${m.message!.chat!.id}`;
    out.set(key, [...(out.get(key) ?? []), m.message!.text ?? '']);
  }
  return out;
}
