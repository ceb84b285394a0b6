/**
 * A request that reaches the gateway while it is closing (on a keep-alive
 * connection still open) is answered 503 in the contract's envelope — the same
 * error path as every other failure, not Fastify's own body.
 */
import http from 'node:http';
import { expect, it } from 'vitest';
import { approvedBot, startHarness } from '../helpers/harness.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function get(agent: http.Agent, url: string, token: string): Promise<{ status: number; body: unknown } | { error: string }> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
  });
}

it('answers a request arriving during close with 503 in the runtime envelope', async () => {
  const h = await startHarness('in-process');
  let closed: Promise<void> | undefined;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const { token } = await approvedBot(h, await h.jwt('closing-owner'), 'closing_bot');
    const url = `${h.url}/api/v1/bots/getMe`;
    expect(await get(agent, url, token)).toMatchObject({ status: 200 });
    closed = h.close();
    let answer: Awaited<ReturnType<typeof get>> | undefined;
    // The same keep-alive connection, busy enough not to be closed as idle, until the gateway refuses.
    for (let i = 0; i < 100; i++) {
      answer = await get(agent, url, token);
      if ('error' in answer || answer.status !== 200) break;
      await sleep(50);
    }
    expect(answer).toMatchObject({ status: 503, body: { ok: false, error_code: 503 } });
    expect((answer as { body: { description: string } }).body.description).toMatch(/^Service Unavailable: /);
  } finally {
    agent.destroy();
    await (closed ?? h.close());
  }
});
