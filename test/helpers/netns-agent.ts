/**
 * The multi-host test's hands inside its "world" namespace (scripts/netns-hosts.sh), which
 * the test process, in the machine's own namespace, cannot reach by TCP: filesystem (unix)
 * sockets are not bound to a network namespace, so this process
 *  - forwards each `<dir>/<name>.sock` to a TCP address of a host (a gateway, a core's gRPC
 *    port, a health port), byte for byte;
 *  - runs the bots' HTTPS webhook receiver at AGENT_RECEIVER (host:port), recording every
 *    update it is sent, listed by GET /received on `<dir>/control.sock`;
 *  - creates the S3 bucket the services use (AGENT_BUCKET on AGENT_S3_ENDPOINT).
 * It prints "ready" once all of it listens. Config: AGENT_DIR, AGENT_FORWARD (JSON
 * {name: "host:port"}), AGENT_RECEIVER, AGENT_TLS_KEY/AGENT_TLS_CERT (files).
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { TEST_S3_CREDENTIALS } from './s3.js';

const dir = process.env.AGENT_DIR!;
const forward = JSON.parse(process.env.AGENT_FORWARD ?? '{}') as Record<string, string>;
const listening: Promise<void>[] = [];

for (const [name, target] of Object.entries(forward)) {
  const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
  const sock = path.join(dir, `${name}.sock`);
  fs.rmSync(sock, { force: true });
  const server = net.createServer((inbound) => {
    const outbound = net.connect({ host, port });
    inbound.pipe(outbound).pipe(inbound);
    const end = () => {
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on('error', end).on('close', end);
    outbound.on('error', end).on('close', end);
  });
  listening.push(new Promise((resolve) => server.listen(sock, resolve)));
}

const received: { path: string; update_id: number; signed: boolean }[] = [];
if (process.env.AGENT_RECEIVER) {
  const [host, port] = process.env.AGENT_RECEIVER.split(':');
  const receiver = https.createServer({ key: fs.readFileSync(process.env.AGENT_TLS_KEY!), cert: fs.readFileSync(process.env.AGENT_TLS_CERT!) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { update_id: number };
        received.push({ path: req.url ?? '', update_id: body.update_id, signed: typeof req.headers['x-service-signature-v2'] === 'string' });
      } catch {
        // not an update: not recorded
      }
      res.writeHead(200).end('ok');
    });
  });
  listening.push(new Promise((resolve) => receiver.listen(Number(port), host, resolve)));
}

const control = http.createServer((req, res) => {
  if (req.url === '/received') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(received));
  res.writeHead(404).end();
});
const controlSock = path.join(dir, 'control.sock');
fs.rmSync(controlSock, { force: true });
listening.push(new Promise((resolve) => control.listen(controlSock, resolve)));

(async () => {
  if (process.env.AGENT_BUCKET) {
    const s3 = new S3Client({ endpoint: process.env.AGENT_S3_ENDPOINT, region: 'us-east-1', forcePathStyle: true, credentials: TEST_S3_CREDENTIALS });
    await s3.send(new CreateBucketCommand({ Bucket: process.env.AGENT_BUCKET }));
    s3.destroy();
  }
  await Promise.all(listening);
  process.stdout.write('ready\n');
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
