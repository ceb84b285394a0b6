/**
 * What every HTTP server of the service has besides its routes: /healthz,
 * /metrics (Prometheus), and a graceful close.
 *
 * Draining: health answers 503 (load balancers stop sending) and every response
 * closes its connection. Closing: stop listening; requests in flight finish; a
 * request arriving on an open keep-alive connection is still answered (503 with
 * Connection: close) rather than reset. Node's own close() would drop every idle
 * keep-alive connection at once, racing a client that is writing its next request
 * on it; here a connection is closed only once it has been idle for a second (a
 * client that busy is not about to write). After the grace period, calls still
 * waiting are answered 503, and half a second later every connection is closed.
 */
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Telemetry } from '../../src/telemetry/metrics.js';

export interface Lifecycle {
  drain(): void;
  close(graceMs: number): Promise<void>;
}

const IDLE_CLOSE_MS = 1000;

export function addLifecycle(
  app: FastifyInstance,
  opts: {
    ready: () => Promise<boolean>;
    telemetry: Telemetry;
    cancelInFlight?: () => void;
    /** Why the service is degraded (serving, but e.g. the bus is down), if it is. */
    degraded?: () => string[];
  },
): Lifecycle {
  let draining = false;
  // Per open connection: requests in flight, and when it last did anything.
  const sockets = new Map<Socket, { busy: number; at: number }>();

  app.server.on('connection', (socket: Socket) => {
    sockets.set(socket, { busy: 0, at: Date.now() });
    // on, not once, here and below: 'close' comes once, and once() wraps each listener
    // (held by every open connection and every waiting request: long polls).
    socket.on('close', () => sockets.delete(socket));
  });
  app.server.on('request', (req, res) => {
    const s = sockets.get(req.socket);
    if (!s) return;
    s.busy++;
    s.at = Date.now();
    res.on('close', () => {
      s.busy--;
      s.at = Date.now();
    });
  });

  app.get('/healthz', async (_request, reply) => {
    const ok = !draining && (await opts.ready().catch(() => false));
    if (!ok) return reply.code(503).send({ status: 'unavailable' });
    // Degraded still answers 200: the instance serves (from the database), it should stay in rotation.
    const reasons = opts.degraded?.() ?? [];
    return reply.code(200).send(reasons.length > 0 ? { status: 'degraded', reasons } : { status: 'ok' });
  });
  if (opts.telemetry.enabled) {
    app.get('/metrics', async (_request, reply) => {
      const { contentType, body } = await opts.telemetry.render();
      return reply.type(contentType).send(body);
    });
  }
  // Callback form, as the gateway's per-request hooks (no promise per response).
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) reply.header('connection', 'close');
    done(null, payload);
  });

  return {
    drain() {
      draining = true;
    },
    async close(graceMs) {
      draining = true;
      const server = app.server;
      // Looked at in the event loop's check phase, after its poll phase has read what came: a
      // request already waiting in the kernel's buffer when the timer fired (a process busy
      // past it) has made its connection busy by then. Closed with it unread, its client
      // would get a reset.
      const closeIdle = () => setImmediate(() => {
        const now = Date.now();
        for (const [socket, s] of sockets) if (s.busy === 0 && now - s.at >= IDLE_CLOSE_MS) socket.destroy();
      });
      // Node's close() calls closeIdleConnections(); idle ones are ours to close (above).
      server.closeIdleConnections = () => {};
      const idle = setInterval(closeIdle, 100);
      // Past the grace period: calls still waiting are answered (503), then whatever is left is closed.
      const force = setTimeout(() => {
        opts.cancelInFlight?.();
        setTimeout(() => server.closeAllConnections(), 500).unref();
      }, graceMs);
      try {
        await app.close();
      } finally {
        clearInterval(idle);
        clearTimeout(force);
      }
    },
  };
}
