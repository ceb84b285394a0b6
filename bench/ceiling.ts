/**
 * The ceiling of bench:webhooks, run as its own process (as the service is): a minimal
 * HTTPS client posting signed update bodies, the same shape and signature headers the
 * dispatcher sends, to the bench's receiver, CEILING_TARGETS distinct paths round robin,
 * CEILING_CONCURRENCY requests at a time over keep-alive sockets. No database, no
 * leases, no checks: what one node process can post on this machine.
 * Prints one JSON line: { requests, seconds, cpuSeconds }.
 */
import fs from 'node:fs';
import https from 'node:https';
import { signatureHeaders } from '../src/dispatch/webhook-client.js';

const base = process.env.CEILING_BASE!;
const count = Number(process.env.CEILING_COUNT ?? 10_000);
const targets = Number(process.env.CEILING_TARGETS ?? 1000);
const concurrency = Number(process.env.CEILING_CONCURRENCY ?? 256);
const firstId = Number(process.env.CEILING_FIRST_ID ?? 1e12);

const agent = new https.Agent({ keepAlive: true, maxSockets: concurrency, maxFreeSockets: concurrency, ca: fs.readFileSync(process.env.CEILING_CA!, 'utf8') });
const message = { message_id: 0, date: 0, chat: { id: 5, type: 'private' }, from: { id: 5, is_bot: false }, text: 'bench' };

function post(n: number): Promise<void> {
  const updateId = firstId + n;
  const body = JSON.stringify({ update_id: updateId, message });
  const url = `${base}/fast/${n % targets}`;
  return new Promise((resolve, reject) => {
    const req = https.request(url, {
      method: 'POST', agent,
      headers: { ...signatureHeaders('bench', body, updateId), 'content-length': Buffer.byteLength(body), 'user-agent': 'ceiling/1' },
    }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function main() {
  // Cold, as the service's burst is: the first requests pay the TLS handshakes.
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count) await post(next++);
  }));
  const seconds = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpu0);
  console.log(JSON.stringify({ requests: count, seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 }));
  agent.destroy();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
