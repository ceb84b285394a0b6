/**
 * A TCP proxy in front of a Kafka broker that a test can cut (every connection reset,
 * new ones refused) and restore: a broker outage for one service instance, without
 * touching the broker other tests share.
 *
 * Kafka clients connect to the bootstrap address, then to the addresses the broker
 * advertises (in Metadata and FindCoordinator answers). The proxy rewrites the
 * advertised port to its own in every answer frame, so all of the client's traffic
 * goes through it. (The host/port pair is encoded as an int16-length string and an
 * int32: the same number of bytes either way.)
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface KafkaProxy {
  /** host:port for KAFKA_BROKERS. */
  address: string;
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

function hostPort(host: string, port: number): Buffer {
  const h = Buffer.from(host);
  const b = Buffer.alloc(2 + h.length + 4);
  b.writeInt16BE(h.length, 0);
  h.copy(b, 2);
  b.writeInt32BE(port, 2 + h.length);
  return b;
}

export async function startKafkaProxy(broker: string): Promise<KafkaProxy> {
  const [host, portText] = broker.split(':') as [string, string];
  const brokerPort = Number(portText);
  if (host !== '127.0.0.1') throw new Error('the Kafka proxy expects a broker advertised on 127.0.0.1');
  const sockets = new Set<net.Socket>();
  let port = 0;
  let from: Buffer;
  let to: Buffer;

  /** Forwards whole response frames, the advertised address rewritten. */
  function rewriting(upstream: net.Socket, client: net.Socket) {
    let pending = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4) {
        const size = pending.readInt32BE(0);
        if (pending.length < 4 + size) break;
        const frame = Buffer.from(pending.subarray(0, 4 + size));
        pending = pending.subarray(4 + size);
        for (let at = frame.indexOf(from); at >= 0; at = frame.indexOf(from, at + from.length)) to.copy(frame, at);
        client.write(frame);
      }
    });
  }

  const server = net.createServer((client) => {
    const upstream = net.connect(brokerPort, host);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    rewriting(upstream, client);
  });
  const listen = () => new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  await listen();
  port = (server.address() as AddressInfo).port;
  from = hostPort(host, brokerPort);
  to = hostPort(host, port);

  const stop = () => new Promise<void>((resolve) => {
    server.close(() => resolve());
    for (const s of sockets) s.destroy();
    sockets.clear();
  });
  return {
    address: `127.0.0.1:${port}`,
    cut: stop,
    restore: listen,
    close: async () => {
      if (server.listening) await stop();
    },
  };
}
