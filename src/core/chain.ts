/**
 * The shape of the core's interceptor chain (connect-es `Interceptor`,
 * packages/connect/src/interceptor.ts): each step is `(next) => (call) => …`, wraps
 * the rest of the chain, and is written once for unary and streaming calls alike. A
 * unary call's answer is the response; a streaming call's is its responses, as an async
 * iterable the transport pulls from (its flow control). A step that must see how a call
 * ended — a stream ends when its last response is taken, not when it starts — uses
 * `onOutcome`, which looks the same for both.
 */
import type { Credential } from '../gen/methods.js';
import type { CallContext, CallMetadata, CallSignal, Principal } from './context.js';

/** One unary RPC's implementation as the chain calls it: typed where it is bound (bindService), by path here. */
export type Handler = (request: unknown, ctx: CallContext) => Promise<unknown>;

/**
 * One streaming RPC's implementation as the chain calls it: its input (the request, or
 * for a client stream an async iterable of them) in, an async iterable of responses
 * (server and bidirectional streams) or one response (client streams) out.
 */
export interface StreamingHandler {
  streaming: 'client' | 'server' | 'bidi';
  call: (input: unknown, ctx: CallContext) => AsyncIterable<unknown> | Promise<unknown>;
}

/** What bindService makes of each method: a unary handler, or a streaming one tagged with which side streams. */
export type BoundMethod = Handler | StreamingHandler;

/** Which side of an RPC streams; 'unary': neither. */
export type CallKind = 'unary' | StreamingHandler['streaming'];

/**
 * Takes a call's `rpc` log fields in place of the core writing its own `rpc` line: the
 * in-process gateway adds them to its request's one `http` line. Answers false when it
 * can no longer take them (its line is already written): the core then writes its own.
 */
export interface RpcLogSink {
  /** An object's method, not a closure per call: the in-process gateway's request is the sink (held while a long poll waits). */
  takeRpcLog(fields: Record<string, unknown>): boolean;
}

/** An RPC as the chain knows it, worked out once per path. */
export interface Method {
  /** The RPC's name as logs and metrics give it ("GetMe"). */
  rpc: string;
  /** The name bots call it by, in their usage ("getMe"). */
  bot: string;
  credential: Credential;
  kind: CallKind;
  handler: BoundMethod;
}

/** One call as the chain's steps see it: what the transport gave, and what the steps found out. */
export interface Call {
  readonly path: string;
  /** The RPC at `path`, of whatever kind; undefined when there is none. */
  readonly method: Method | undefined;
  /** How the transport called: as a stream (responses as an async iterable) or unary. */
  readonly streaming: boolean;
  /** The request, an async iterable of them (client streams), or an undecodable request. */
  readonly input: unknown;
  readonly metadata: CallMetadata;
  readonly signal: CallSignal;
  readonly requestId: string;
  /** Streams: the transport connection the call came on. */
  readonly connection?: string;
  /** Unary calls of the in-process gateway: where the `rpc` log fields go. */
  readonly logSink?: RpcLogSink;
  /** A stream's part (CallContext.part): the fields its `rpc` line carries. */
  readonly fields?: Record<string, unknown>;
  /** Who the credential proves: set by the auth step (by the undecodable step when it holds). */
  principal?: Principal;
  /** When the call began (performance.now()): set by the step that accounts for it. */
  started: number;
}

/** The rest of the chain from a step's point of view: a unary call's response, or a stream's responses. */
export type Next = (call: Call) => Promise<unknown>;

/** One step of the chain. */
export type Interceptor = (next: Next) => Next;

/** The steps around `last`, the first step outermost (it runs first and sees the outcome last). */
export function compose(steps: readonly Interceptor[], last: Next): Next {
  return steps.reduceRight((next, step) => step(next), last);
}

/**
 * Called once, when a call's outcome is known: `failed` with the error thrown, or not;
 * `sent`, the responses given out. What it returns in a failure is thrown in the
 * error's place.
 */
export type OutcomeHandler = (call: Call, failed: boolean, error: unknown, sent: number) => unknown;

/**
 * What `next` answers for `call`, with `end` called when the call is over: a unary
 * call's response or error settled (a throw from `next` itself included); a stream's
 * responses taken to the last, or failed (before the first or between two), or left by
 * the transport (its `return`: the caller went away).
 */
export function onOutcome(next: Next, call: Call, end: OutcomeHandler): Promise<unknown> {
  // Chained with then(), not awaited in an async function: a call waiting (a long poll, by
  // the thousand) holds a reaction and its two callbacks here, not a suspended frame with
  // its register file, promise and resume closures. A response is no thenable, so
  // nothing is adopted (no more turns per call than an await).
  let answer: Promise<unknown>;
  try {
    answer = next(call);
  } catch (err) {
    return Promise.reject(end(call, true, err, 0));
  }
  const failed = (err: unknown): never => {
    throw end(call, true, err, 0);
  };
  if (call.streaming) return answer.then((responses) => observed(responses as AsyncIterable<unknown>, call, end), failed);
  return answer.then((response) => {
    end(call, false, undefined, 1);
    return response;
  }, failed);
}

/** A stream's responses, passed through one by one, with `end` called once when they stop. */
function observed(responses: AsyncIterable<unknown>, call: Call, end: OutcomeHandler): AsyncIterableIterator<unknown> {
  const it = responses[Symbol.asyncIterator]();
  let sent = 0;
  let ended = false;
  const finish = (failed: boolean, error: unknown) => {
    if (ended) return error;
    ended = true;
    return end(call, failed, error, sent);
  };
  const step = (r: IteratorResult<unknown>) => {
    if (r.done) finish(false, undefined);
    else sent++;
    return r;
  };
  const fail = (err: unknown): never => {
    throw finish(true, err);
  };
  return {
    next: () => it.next().then(step, fail),
    async return(value?: unknown) {
      try {
        await it.return?.(value);
      } catch (err) {
        fail(err);
      }
      finish(false, undefined);
      return { done: true, value };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
