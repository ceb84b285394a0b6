/**
 * The gRPC adapter: serves every service's methods from the core's chain, plus
 * gRPC health checking and server reflection (from the generated descriptor set)
 * so grpcurl and generated clients in any language can discover it.
 */
import fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { ApiError, Code } from '../errors.js';
import { AdminServiceService } from '../gen/botplatform/v1/admin_service.js';
import { ConsoleServiceService } from '../gen/botplatform/v1/console_service.js';
import { InternalServiceService } from '../gen/botplatform/v1/internal_service.js';
import { RuntimeServiceService } from '../gen/botplatform/v1/runtime_service.js';
import { CallAbort, type CallMetadata } from '../core/context.js';
import type { Core } from '../core/core.js';
import { toGrpcStatus } from './status-details.js';
import { undecodableRequest } from './undecodable.js';

const SERVICES = {
  'botplatform.v1.ConsoleService': ConsoleServiceService,
  'botplatform.v1.AdminService': AdminServiceService,
  'botplatform.v1.RuntimeService': RuntimeServiceService,
  'botplatform.v1.InternalService': InternalServiceService,
} as const;

const DESCRIPTORS = new URL('../gen/descriptors.binpb', import.meta.url);

function metadataOf(md: grpc.Metadata): CallMetadata {
  const out: CallMetadata = {};
  for (const [key, value] of Object.entries(md.getMap())) {
    if (typeof value === 'string') out[key] = value;
  }
  return out;
}

/** The call's deadline in epoch ms; Infinity when the client set none. */
function deadlineOf(call: { getDeadline(): grpc.Deadline }): number {
  const d = call.getDeadline();
  return d instanceof Date ? d.getTime() : d;
}

/**
 * A cancel this close to the deadline is the deadline: a client's own deadline timer
 * fires about when the server's does, and its cancel may arrive a little before.
 */
const DEADLINE_SLACK_MS = 100;
/** setTimeout's longest delay; a farther deadline is left to grpc-js's 'cancelled'. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const deadlineExceeded = () => new ApiError(Code.DEADLINE_EXCEEDED, 'the deadline passed before the call finished');
const clientCancelled = () => new ApiError(Code.CANCELLED, 'the client cancelled the call');

/** The encoded FileDescriptorProtos of a FileDescriptorSet (field 1), byte for byte. */
function rawFileDescriptors(set: Buffer): Buffer[] {
  const reader = new BinaryReader(set);
  const files: Buffer[] = [];
  while (reader.pos < reader.len) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WireType.LengthDelimited) files.push(Buffer.from(reader.bytes()));
    else reader.skip(wire);
  }
  return files;
}

/** The name (field 1) of an encoded FileDescriptorProto. */
function fileName(file: Buffer): string | undefined {
  const reader = new BinaryReader(file);
  while (reader.pos < reader.len) {
    const [field, wire] = reader.tag();
    if (field === 1 && wire === WireType.LengthDelimited) return reader.string();
    reader.skip(wire);
  }
  return undefined;
}

/**
 * @grpc/reflection indexes the files through protobufjs, whose round trip drops every
 * custom option (google.api.http, field_behavior, our own): answer with the bytes buf
 * built instead, options included. Its index (by symbol, by extension) is kept.
 */
function serveRawFiles(reflection: ReflectionService, files: Buffer[]): void {
  const raw = new Map(files.map((f) => [fileName(f), f] as const));
  type Impl = { files?: Record<string, object>; fileEncodings?: Map<object, Uint8Array> };
  for (const impl of Object.values(reflection as unknown as Record<string, Impl>)) {
    if (!impl?.files || !(impl.fileEncodings instanceof Map)) throw new Error('unexpected @grpc/reflection internals');
    for (const [name, file] of Object.entries(impl.files)) {
      const bytes = raw.get(name);
      if (bytes) impl.fileEncodings.set(file, bytes);
    }
  }
}

/**
 * Server reflection, its index of the API's files built at the first reflection request
 * (about 2.5 MB of heap every process held from its start, for a tool that a few ever
 * ask). The service registered is one of no files whose request handling (v1 and
 * v1alpha) defers to the full one, made then.
 */
function lazyReflection(): ReflectionService {
  type Impl = { handleServerReflectionRequest?: (message: unknown) => unknown };
  const stub = new ReflectionService({} as never);
  let full: ReflectionService | undefined;
  const built = () => {
    if (!full) {
      // Reflection serves the files exactly as buf built them (health.proto included):
      // proto-loader's round trip drops well-known types and mangles map entries,
      // which grpcurl then cannot resolve.
      const files = rawFileDescriptors(fs.readFileSync(DESCRIPTORS));
      full = new ReflectionService({ 'descriptor set': { fileDescriptorProtos: files } } as never);
      serveRawFiles(full, files);
    }
    return full as unknown as Record<string, Impl>;
  };
  for (const [version, impl] of Object.entries(stub as unknown as Record<string, Impl>)) {
    if (typeof impl?.handleServerReflectionRequest !== 'function') throw new Error('unexpected @grpc/reflection internals');
    impl.handleServerReflectionRequest = (message) => built()[version]!.handleServerReflectionRequest!(message);
  }
  return stub;
}

/**
 * Aborts the returned signal when the caller is gone (grpc-js has answered it
 * DEADLINE_EXCEEDED itself, or it cancelled), with the status the caller saw, which the
 * core records in place of the handler's own outcome. `finished` stops watching. A unary
 * call gets a CallAbort (no EventTarget per call); a stream an AbortController's signal,
 * which AbortSignal.any combines with the server's shutdown.
 */
type WatchedCall = { getDeadline(): grpc.Deadline; on(event: 'cancelled', fn: () => void): unknown };
function callerWatch(call: WatchedCall, unary: true): { signal: CallAbort; finished(): void };
function callerWatch(call: WatchedCall, unary: false): { signal: AbortSignal; finished(): void };
function callerWatch(call: WatchedCall, unary: boolean) {
  const abort = unary ? new CallAbort() : new AbortController();
  const signal = abort instanceof CallAbort ? abort : abort.signal;
  const deadline = deadlineOf(call);
  let done = false;
  const callerLeft = () => {
    if (done || signal.aborted) return;
    abort.abort(Date.now() >= deadline - DEADLINE_SLACK_MS ? deadlineExceeded() : clientCancelled());
  };
  const wait = deadline - Date.now();
  const timer = wait <= MAX_TIMER_MS ? setTimeout(callerLeft, Math.max(0, wait)) : undefined;
  call.on('cancelled', callerLeft);
  return {
    signal,
    finished: () => {
      done = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}

type StreamCall = (grpc.ServerDuplexStream<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown> | grpc.ServerReadableStream<unknown, unknown>) & {
  request?: unknown;
};

/**
 * The caller's messages, one per step (grpc-js reads from HTTP/2 only as messages are
 * taken: a handler that stops taking stops the caller by flow control), ending when the
 * caller half-closes or leaves, or the signal aborts.
 *
 * Not Node's async iterator of the stream (`call.iterator()`), even with
 * `destroyOnReturn: false`: its `return()` waits behind a pending `next()`, which only a
 * message, the end or an error settles, and meanwhile its end-of-stream watcher stays on
 * the call. When the call then ended with an error status (`emit('error')`, in
 * serveStream) while responses were still buffered, the watcher took that for a failed
 * stream, woke the iterator, and the iterator destroyed the call on its way out: the
 * buffered responses and the status were dropped, and the caller's stream ended only
 * when shutdown forced the server closed. This one listens to the call only while it
 * waits, stops the moment the signal aborts, and never destroys the call.
 */
async function* incoming(call: grpc.ServerReadableStream<unknown, unknown>, signal: AbortSignal): AsyncGenerator<unknown> {
  for (;;) {
    if (signal.aborted) return;
    const message: unknown = call.read();
    if (message !== null) {
      yield message;
      continue;
    }
    if (call.readableEnded || call.destroyed) return;
    if (!(await moved(call, signal))) return;
  }
}

/**
 * Settles true when the call has a message or has ended, false once the signal aborts (at
 * once: the call is not listened to after). Its listeners last one wait: a promise kept
 * across steps would keep every message of the stream in its reactions, and the caller's
 * signal (with shutdown's, for the server's life) would keep it after the stream ended.
 */
function moved(call: grpc.ServerReadableStream<unknown, unknown>, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const settle = (then: () => void) => {
      call.off('readable', ready);
      call.off('end', ready);
      call.off('close', ready);
      call.off('error', failed);
      signal.removeEventListener('abort', left);
      then();
    };
    const ready = () => settle(() => resolve(true));
    const left = () => settle(() => resolve(false));
    const failed = (err: unknown) => settle(() => reject(err));
    call.on('readable', ready);
    call.on('end', ready);
    call.on('close', ready);
    call.on('error', failed);
    signal.addEventListener('abort', left, { once: true });
  });
}

/** Streaming calls do not end by themselves (a feed never does): shutdown ends them with this. */
const shuttingDown = () =>
  new ApiError(Code.UNAVAILABLE, 'the service is shutting down; call again (resume from your cursor)', { retryAfterSeconds: 1 });

/**
 * Serves a streaming call from the core: the requests in (one, or the caller's stream),
 * the responses out as the core makes them. A response is written only once the
 * previous one has drained (grpc-js's write returns false while the caller's window is
 * full), so a caller that does not read holds the core's stream, which holds its reads.
 * `shutdown` aborting ends the call: the handler sees its signal aborted (reads no more,
 * sends what it still has), then the caller gets UNAVAILABLE.
 */
async function serveStream(
  core: Core, path: string, call: StreamCall, clientStreams: boolean, unaryCallback: grpc.sendUnaryData<unknown> | undefined,
  shutdown: AbortSignal,
): Promise<void> {
  const caller = callerWatch(call, false);
  const signal = AbortSignal.any([caller.signal, shutdown]);
  const input = clientStreams ? incoming(call as grpc.ServerReadableStream<unknown, unknown>, signal) : call.request;
  const writable = call as grpc.ServerWritableStream<unknown, unknown>;
  const drained = () => new Promise<void>((resolve) => {
    const done = () => {
      writable.off('drain', done);
      caller.signal.removeEventListener('abort', done);
      resolve();
    };
    writable.on('drain', done);
    caller.signal.addEventListener('abort', done, { once: true });
  });
  let failure: ApiError | undefined;
  try {
    for await (const response of core.stream(path, input, metadataOf(call.metadata), signal, call.getPeer())) {
      if (caller.signal.aborted) break;
      if (unaryCallback) {
        unaryCallback(null, response);
        return;
      }
      if (!writable.write(response)) await drained();
    }
  } catch (err) {
    failure = ApiError.from(err);
  } finally {
    caller.finished();
  }
  if (caller.signal.aborted) return; // the caller is gone: nothing to answer
  if (shutdown.aborted) failure = shutdown.reason as ApiError;
  if (unaryCallback) unaryCallback(toGrpcStatus(failure ?? new ApiError(Code.INTERNAL, 'no response')));
  else if (failure) writable.emit('error', toGrpcStatus(failure));
  else writable.end();
}

export interface GrpcServer {
  /** The bound port. */
  port: number;
  health: HealthImplementation;
  /** Stops accepting calls, waits for in-flight ones up to `graceMs`, then cancels the rest. */
  close(graceMs?: number): Promise<void>;
}

export async function startGrpcServer(core: Core, host: string, port: number): Promise<GrpcServer> {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 8 * 1024 * 1024 });
  /** Aborted when the server closes: ends its streaming calls. */
  const shutdown = new AbortController();
  for (const definition of Object.values(SERVICES)) {
    const impl: grpc.UntypedServiceImplementation = {};
    const methods: Record<string, unknown> = {};
    for (const [key, method] of Object.entries(definition)) {
      // A request that does not decode reaches the core as an UndecodableRequest,
      // not as a throw into grpc-js (which would answer INTERNAL, unlogged, uncounted).
      methods[key] = {
        ...method,
        requestDeserialize(bytes: Buffer) {
          try {
            return method.requestDeserialize(bytes);
          } catch (err) {
            return undecodableRequest(method.path, bytes, err);
          }
        },
      };
      if (method.requestStream || method.responseStream) {
        // A client stream's one response goes to grpc-js's callback; the other streams write theirs.
        impl[key] = (call: StreamCall, callback?: grpc.sendUnaryData<unknown>) =>
          serveStream(core, method.path, call, Boolean(method.requestStream), method.responseStream ? undefined : callback, shutdown.signal);
        continue;
      }
      impl[key] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const { signal, finished } = callerWatch(call, true);
        core.invoke(method.path, call.request, metadataOf(call.metadata), signal).then(
          (response) => {
            finished();
            callback(null, response);
          },
          // A call ended because its caller left answers with the status the caller saw
          // (the server's deadline timer can fire just before the client's own).
          (err) => {
            finished();
            callback(toGrpcStatus(signal.reason instanceof ApiError ? signal.reason : ApiError.from(err)));
          },
        );
      };
    }
    server.addService(methods as grpc.ServiceDefinition, impl);
  }

  const health = new HealthImplementation({
    '': 'SERVING',
    ...Object.fromEntries(Object.keys(SERVICES).map((s) => [s, 'SERVING' as const])),
  });
  health.addToServer(server);
  lazyReflection().addToServer(server);

  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );

  return {
    port: bound,
    health,
    async close(graceMs = 10_000) {
      for (const s of ['', ...Object.keys(SERVICES)]) health.setStatus(s, 'NOT_SERVING');
      shutdown.abort(shuttingDown());
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
