/** A real HTTPS webhook receiver on loopback that records every request and answers as told. */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TestPki } from './tls.js';

export interface Received {
  headers: Record<string, string | string[] | undefined>;
  raw: Buffer;
  at: number;
}

/** An answer (after `delayMs`, when given), or none at all. */
export type Behaviour = { status: number; location?: string; delayMs?: number; body?: string; headers?: Record<string, string> } | { hang: true };

export async function startReceiver(pki: TestPki) {
  const received: Received[] = [];
  const behaviours: Behaviour[] = [];
  let fallback: Behaviour = { status: 200 };
  const waiters: (() => void)[] = [];
  const hung = new Set<import('node:http').ServerResponse>();
  /** Requests received and not yet answered; the most seen at once; those whose client went away unanswered. */
  const concurrency = { now: 0, max: 0, samples: [] as { at: number; now: number }[] };
  const abandoned: Received[] = [];
  const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const r = { headers: req.headers, raw: Buffer.concat(chunks), at: Date.now() };
      received.push(r);
      concurrency.now++;
      concurrency.max = Math.max(concurrency.max, concurrency.now);
      concurrency.samples.push({ at: r.at, now: concurrency.now });
      // Unanswered until the answer is written (not until its 'close' event, which comes a
      // turn later: a dispatcher in another thread may send its next request first).
      let answered = false;
      const settle = () => {
        if (answered) return;
        answered = true;
        concurrency.now--;
      };
      res.once('close', () => {
        settle();
        if (!res.writableFinished) abandoned.push(r);
      });
      waiters.splice(0).forEach((w) => w());
      const b = behaviours.shift() ?? fallback;
      if ('hang' in b) {
        hung.add(res);
        return;
      }
      const answer = () => {
        if (res.destroyed) return;
        settle();
        res.writeHead(b.status, { ...(b.location ? { location: b.location } : {}), ...b.headers });
        res.end(b.body ?? 'ok');
      };
      if (b.delayMs) setTimeout(answer, b.delayMs);
      else answer();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}/hook`,
    received,
    /** Unanswered requests now and at most (with a sample at each arrival). */
    concurrency,
    /** Requests whose client closed the connection before they were answered. */
    abandoned,
    /** The next answers, in order; then `always`. */
    script(...next: Behaviour[]) {
      behaviours.push(...next);
    },
    always(b: Behaviour) {
      fallback = b;
    },
    /** Resolves once `n` requests have arrived (or rejects after ms). */
    async waitFor(n: number, ms = 10_000) {
      const end = Date.now() + ms;
      while (received.length < n) {
        if (Date.now() > end) throw new Error(`receiver got ${received.length} of ${n} requests`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 50);
        });
      }
    },
    async close() {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;
