/**
 * A forwarding proxy on loopback in front of the real service, for the answers the
 * service cannot give on demand: it records getUpdates calls, answers scripted
 * getUpdates calls itself (a 429 with retry_after, a 503, a dropped connection),
 * and can rewrite or drop the service's answer to any other call.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Scripted = { status: number; body: unknown; headers?: Record<string, string> } | 'drop';

/** What to do with the service's answer: a new body, 'drop' (close the connection unanswered), or undefined (pass it on). */
export type AnswerHook = (path: string, status: number, body: string) => string | 'drop' | undefined;

export async function startProxy(target: string) {
  const calls: { at: number; body: Record<string, unknown> }[] = [];
  const script: Scripted[] = [];
  let onAnswer: AnswerHook | undefined;
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    if (req.url!.endsWith('/getUpdates')) {
      calls.push({ at: Date.now(), body: raw.length ? JSON.parse(raw.toString()) : {} });
      const next = script.shift();
      if (next === 'drop') return void req.socket.destroy();
      if (next) {
        res.writeHead(next.status, { 'content-type': 'application/json', ...next.headers });
        return void res.end(JSON.stringify(next.body));
      }
    }
    const ac = new AbortController();
    res.on('close', () => ac.abort());
    try {
      const upstream = await fetch(target + req.url, {
        method: req.method,
        headers: Object.fromEntries(Object.entries(req.headers).filter(([k]) => ['authorization', 'content-type'].includes(k))) as Record<string, string>,
        body: raw.length ? raw : undefined,
        signal: ac.signal,
      });
      let text = await upstream.text();
      const changed = onAnswer?.(req.url!, upstream.status, text);
      if (changed === 'drop') return void req.socket.destroy();
      if (changed !== undefined) text = changed;
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
      res.end(text);
    } catch {
      res.destroy();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** getUpdates calls, in order. */
    calls,
    /** Answers for the next getUpdates calls, given by the proxy instead of the service. */
    script,
    onAnswer(hook: AnswerHook | undefined) {
      onAnswer = hook;
    },
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

export type Proxy = Awaited<ReturnType<typeof startProxy>>;
