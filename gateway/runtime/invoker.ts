/**
 * How the gateway reaches the core. Two implementations: over a gRPC client (the
 * gateway as its own process) and, in one process, a direct call into the core's
 * interceptor chain (wired by src/app.ts). Both reject with ApiError.
 */
import * as grpc from '@grpc/grpc-js';
import { PUBLIC_BASE_URL_METADATA } from '../../src/core/context.js';
import { ApiError, Code } from '../../src/errors.js';
import { fromServiceError } from '../../src/grpc/status-details.js';
import {
  HealthCheckRequest,
  HealthCheckResponse,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from '../../src/gen/grpc/health/v1/health.js';
import type { RpcLogSink } from '../../src/core/core.js';
import type { CallSignal } from '../../src/core/context.js';
import type { RouteSpec } from './schema.js';

export interface Invoker {
  /**
   * One call. `logSink` (in one process) takes the core's `rpc` log fields for the
   * request's own log line; over gRPC the core, a process of its own, logs them itself.
   */
  invoke(route: RouteSpec, request: unknown, metadata: Record<string, string>, signal: CallSignal, logSink?: RpcLogSink): Promise<unknown>;
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

  const addresses = target.startsWith('ipv4:') ? address.split(',').map((a) => a.trim()).filter(Boolean) : [];
  const healthClients = addresses.length > 1
    ? addresses.map((a) => new grpc.Client(a, grpc.credentials.createInsecure()))
    : [client];

  return {
    invoke(route, request, metadata, signal) {
      return new Promise((resolve, reject) => {
        const md = new grpc.Metadata();
        for (const [k, v] of Object.entries(metadata)) {
          try {
            md.set(k, v);
          } catch {
            // grpc-js refuses a value that is not printable ASCII, and its error repeats the
            // value (a credential, for authorization): refused here without it. The gateway
            // checks the credential before this (a 401); this is the backstop.
            const header = k === PUBLIC_BASE_URL_METADATA ? 'Host' : k;
            reject(new ApiError(Code.INVALID_ARGUMENT, `the request's ${header} header is not printable ASCII`));
            return;
          }
        }
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

    async ready() {
      // Each core is asked on its own channel: one health call through the round-robin
      // channel would land on whichever core is next, and a dead one would make the
      // gateway look down while the others serve.
      const answers = await Promise.all(healthClients.map((c) => healthy(c)));
      return answers.some(Boolean);
    },

    async close() {
      client.close();
      for (const c of healthClients) if (c !== client) c.close();
    },
  };
}

/** The standard health check of a whole server (service ""), answered within 2 s. */
function healthy(client: grpc.Client): Promise<boolean> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      '/grpc.health.v1.Health/Check',
      (req: HealthCheckRequest) => Buffer.from(HealthCheckRequest.encode(req).finish()),
      (buf: Buffer) => HealthCheckResponse.decode(buf),
      { service: '' },
      new grpc.Metadata(),
      { deadline: Date.now() + 2000 },
      (err, res) => resolve(!err && res?.status === ServingStatus.SERVING),
    );
  });
}

/** An invoker for a core in the same process. */
export function createDirectInvoker(core: {
  invoke(path: string, request: unknown, metadata: Record<string, string>, signal?: CallSignal, logSink?: RpcLogSink): Promise<unknown>;
}, ready: () => Promise<boolean>): Invoker {
  return {
    invoke: (route, request, metadata, signal, logSink) => core.invoke(route.grpc.path, request, metadata, signal, logSink),
    ready,
    async close() {},
  };
}

