/**
 * How the gateway reaches the core. Two implementations: over a gRPC client (the
 * gateway as its own process) and, in one process, a direct call into the core's
 * interceptor chain (wired by src/app.ts). Both reject with ApiError.
 */
import * as grpc from '@grpc/grpc-js';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { ApiError, Code } from '../../src/errors.js';
import { fromServiceError } from '../../src/grpc/status-details.js';
import type { RouteSpec } from './schema.js';

export interface Invoker {
  invoke(route: RouteSpec, request: unknown, metadata: Record<string, string>, signal: AbortSignal): Promise<unknown>;
  /** Whether the core can take calls. */
  ready(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * A gRPC client to one core address or several ("host:port,host:port": calls are
 * spread round-robin).
 */
export function createGrpcInvoker(address: string): Invoker {
  const target = address.includes(',') && !address.includes(':///') ? `ipv4:${address}` : address;
  const client = new grpc.Client(target, grpc.credentials.createInsecure(), {
    'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
    'grpc.keepalive_time_ms': 30_000,
  });

  return {
    invoke(route, request, metadata, signal) {
      return new Promise((resolve, reject) => {
        const md = new grpc.Metadata();
        for (const [k, v] of Object.entries(metadata)) md.set(k, v);
        const call = client.makeUnaryRequest(
          route.grpc.path,
          route.grpc.requestSerialize as (v: unknown) => Buffer,
          route.grpc.responseDeserialize,
          request,
          md,
          {},
          (err, response) => (err ? reject(fromServiceError(err)) : resolve(response)),
        );
        signal.addEventListener('abort', () => call.cancel(), { once: true });
      });
    },

    ready() {
      // grpc.health.v1.Health/Check with an empty request (service ""); SERVING is 1.
      return new Promise((resolve) => {
        client.makeUnaryRequest(
          '/grpc.health.v1.Health/Check',
          () => Buffer.alloc(0),
          (buf: Buffer) => {
            const reader = new BinaryReader(buf);
            let status = 0;
            while (reader.pos < reader.len) {
              const [field, wire] = reader.tag();
              if (field === 1) status = reader.int32();
              else reader.skip(wire);
            }
            return status;
          },
          {},
          new grpc.Metadata(),
          { deadline: Date.now() + 2000 },
          (err, status) => resolve(!err && status === 1),
        );
      });
    },

    async close() {
      client.close();
    },
  };
}

/** An invoker for a core in the same process. */
export function createDirectInvoker(core: {
  invoke(path: string, request: unknown, metadata: Record<string, string>, signal?: AbortSignal): Promise<unknown>;
}, ready: () => Promise<boolean>): Invoker {
  return {
    invoke: (route, request, metadata, signal) => core.invoke(route.grpc.path, request, metadata, signal),
    ready,
    async close() {},
  };
}

export { ApiError, Code };
