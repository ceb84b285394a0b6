/**
 * A TCP proxy in front of a real server (MariaDB, a Kafka broker) that a test can cut
 * and restore, to play an outage of that server without touching the server itself,
 * which other test files share. Cut: the listener closes (new connections are refused)
 * and every open connection is reset. Restore: it listens on the same port again.
 */
import net from 'node:net';

export interface TcpProxy {
  port: number;
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;

  const listen = async () => {
    const s = net.createServer((client) => {
      const upstream = net.connect(targetPort, targetHost);
      for (const sock of [client, upstream]) {
        sockets.add(sock);
        sock.once('close', () => sockets.delete(sock));
        sock.on('error', () => { client.destroy(); upstream.destroy(); });
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => resolve());
    });
    port = (s.address() as net.AddressInfo).port;
    server = s;
  };
  const stop = async () => {
    const s = server;
    server = undefined;
    for (const sock of sockets) sock.resetAndDestroy();
    sockets.clear();
    if (s) await new Promise<void>((r) => s.close(() => r()));
  };

  await listen();
  return {
    get port() { return port; },
    cut: stop,
    restore: listen,
    close: stop,
  };
}
