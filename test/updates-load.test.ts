/**
 * getUpdates under ordinary load, no fault injected: concurrent polls confirming
 * with offsets while updates are ingested for the same bots. Every call answers
 * (no 5xx: a statement picked as a deadlock victim is run again), and every update
 * is received once, in order. On MariaDB in the integration pass, SQLite otherwise.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InternalServiceClient, IngestUpdatesRequest } from '../src/gen/botplatform/v1/internal_service.js';
import { approvedBot, call, startHarness, TEST_INTERNAL_TOKEN, type Harness } from './helpers/harness.js';

describe('getUpdates under load', () => {
  let h: Harness;
  let internal: InternalServiceClient;

  beforeAll(async () => {
    h = await startHarness('in-process', { LIMITS_ENABLED: 'false' });
    internal = new InternalServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    internal?.close();
    await h?.close();
  });

  const ingest = (updates: object[]) =>
    new Promise<void>((resolve, reject) => {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
      internal.ingestUpdates(IngestUpdatesRequest.fromPartial({ updates }), md, (err) => (err ? reject(err) : resolve()));
    });
  const message = (text: string) => ({ messageId: 0, date: 0, chat: { id: 9, type: 'private' }, from: { id: 9, isBot: false }, text });

  it('concurrent polls with offsets and ingest for the same bots answer no 5xx and lose nothing', async () => {
    const ownerJwt = await h.jwt('load-owner');
    const bots: { id: string; token: string }[] = [];
    for (let i = 0; i < 6; i++) bots.push(await approvedBot(h, ownerJwt, `load_bot_${i}`));
    const statuses = new Map<number, number>();
    const received = new Map<string, number[]>(bots.map((b) => [b.id, []]));
    let ingesting = true;
    let sent = 0;

    // Each ingester sends batches spanning every bot, as fast as they are answered.
    const ingesters = Array.from({ length: 4 }, async (_, w) => {
      const until = Date.now() + 6000;
      for (let n = 0; Date.now() < until; n++) {
        await ingest(bots.flatMap((b) => [0, 1].map((k) => ({ botId: b.id, message: message(`${w}-${n}-${k}`) }))));
        sent += bots.length * 2;
      }
    });
    // Two pollers per bot (the newer call ends the older with 409: that is not a failure),
    // each confirming what it received through its offset.
    const pollers = bots.flatMap((b) => [0, 1].map(async () => {
      while (ingesting || received.get(b.id)!.length < sent / bots.length) {
        const seen = received.get(b.id)!;
        const res = await call(h.url, 'POST', '/api/v1/bots/getUpdates', { token: b.token, body: { offset: seen.length + 1, limit: 100, timeout: 1 } });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status !== 200) continue;
        for (const u of res.body.result as { update_seq: number }[]) if (u.update_seq === seen.length + 1) seen.push(u.update_seq);
      }
    }));
    await Promise.all(ingesters);
    ingesting = false;
    await Promise.all(pollers);

    const failures = [...statuses].filter(([s]) => s >= 500);
    expect(failures).toEqual([]);
    expect(statuses.get(200)).toBeGreaterThan(0);
    for (const b of bots) expect(received.get(b.id)).toEqual(Array.from({ length: sent / bots.length }, (_, i) => i + 1));
  }, 60_000);
});
