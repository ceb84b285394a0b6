/**
 * Rough edges from issue 31, over real HTTP: impossible dates refused, /docs's headers,
 * Fastify's and Node's own 400/431 answers in the contract's envelopes, and
 * `Cache-Control: no-store` on the Telegram surface and the API's answers.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';

let h: Harness;
let ownerJwt: string;
let bot: { id: string; token: string };

beforeAll(async () => {
  h = await startHarness('in-process');
  ownerJwt = await h.jwt('rough-owner');
  bot = await approvedBot(h, ownerJwt, 'rough_bot');
});
afterAll(async () => {
  await h?.close();
});

describe('timestamps', () => {
  it('recovery refuses impossible dates with INVALID_ARGUMENT naming the field', async () => {
    const owner = client(h.url, ownerJwt);
    for (const [field, value] of [['since', '2026-02-30T00:00:00Z'], ['since', '2026-04-31T12:00:00+02:00'], ['since', '2026-01-01T24:00:00Z'], ['until', '2025-02-29T00:00:00Z']]) {
      const body = { since: '2026-01-01T00:00:00Z', [field!]: value };
      const res = await owner.post(`/api/v1/bots/my/${bot.id}/deliveries/recover`, body);
      expect(res.status, `${field}: ${value}`).toBe(400);
      expect(res.body).toEqual({
        error: { code: 400, status: 'INVALID_ARGUMENT', message: `${field}: must be an RFC 3339 timestamp`, details: [{ field, reason: 'INVALID_TYPE' }] },
      });
    }
    // A real date gets past the codec (the bot has no webhook: 409).
    expect((await owner.post(`/api/v1/bots/my/${bot.id}/deliveries/recover`, { since: '2024-02-29T00:00:00Z' })).status).toBe(409);
  });
});
