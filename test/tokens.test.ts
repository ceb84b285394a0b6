/** One-time token retention and the races around tokens and usernames. */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RuntimeServiceClient } from '../src/gen/botplatform/v1/runtime_service.js';
import { approvedBot, client, startHarness, type Harness } from './helpers/harness.js';

describe('one-time token and races', () => {
  let h: Harness;
  let alice: ReturnType<typeof client>;
  let aliceJwt: string;

  beforeAll(async () => {
    // Retention compressed through configuration, as the 7 days are in production.
    h = await startHarness('in-process', { ONE_TIME_TOKEN_RETENTION: '1500ms' });
    aliceJwt = await h.jwt('alice');
    alice = client(h.url, aliceJwt);
  });
  afterAll(() => h?.close());

  it('an unread one-time token is discarded after its retention, and the token itself still works', async () => {
    const created = await alice.post('/api/v1/bots/applications', { name: 'Late', username: 'late_reader' });
    const admin = client(h.url, await h.jwt('root', { admin: true }));
    expect((await admin.post(`/api/v1/admin/bots/${created.body.id}/approve`)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1700));
    const detail = await alice.get(`/api/v1/bots/my/${created.body.id}`);
    expect(detail.body.one_time_token).toBeUndefined();
    expect(detail.body.has_token).toBe(true);
    // The owner recovers by regenerating.
    const regen = await alice.post(`/api/v1/bots/my/${created.body.id}/regenerate-token`);
    expect((await client(h.url, regen.body.one_time_token).post('/api/v1/bots/getMe')).status).toBe(200);
  });

  it('a regenerated token is refused at once, over HTTP and gRPC, however recently it was accepted', async () => {
    const created = await approvedBot(h, aliceJwt, 'regen_now');
    const grpcClient = new RuntimeServiceClient(h.grpcAddress, grpc.credentials.createInsecure());
    const grpcGetMe = (token: string) => new Promise<number>((resolve) => {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${token}`);
      grpcClient.getMe({}, md, (err) => resolve(err ? err.code! : grpc.status.OK));
    });
    const httpGetMe = async (token: string) => (await client(h.url, token).post('/api/v1/bots/getMe')).status;
    try {
      let token = created.token;
      for (let round = 0; round < 3; round++) {
        // The token was just accepted, by a burst of calls on both transports.
        for (let i = 0; i < 5; i++) expect(await httpGetMe(token)).toBe(200);
        expect(await grpcGetMe(token)).toBe(grpc.status.OK);
        const regen = await alice.post(`/api/v1/bots/my/${created.id}/regenerate-token`);
        expect(regen.status).toBe(200);
        expect(await httpGetMe(token)).toBe(401);
        expect(await grpcGetMe(token)).toBe(grpc.status.UNAUTHENTICATED);
        token = regen.body.one_time_token;
        expect(await httpGetMe(token)).toBe(200);
      }
    } finally {
      grpcClient.close();
    }
  });

  it('concurrent detail reads show the one-time token to exactly one of them', async () => {
    const created = await alice.post('/api/v1/bots/applications', { name: 'Race', username: 'race_reader' });
    const admin = client(h.url, await h.jwt('root', { admin: true }));
    await admin.post(`/api/v1/admin/bots/${created.body.id}/approve`);
    const reads = await Promise.all(Array.from({ length: 8 }, () => alice.get(`/api/v1/bots/my/${created.body.id}`)));
    expect(reads.every((r) => r.status === 200)).toBe(true);
    expect(reads.filter((r) => r.body.one_time_token).length).toBe(1);
  });

  it('concurrent creates of one username: one 201, the rest 409, never a 500', async () => {
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => client(h.url, aliceJwt).post('/api/v1/bots/applications', { name: `n${i}`, username: 'contended' })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 409, 409, 409, 409, 409]);
  });

  it('concurrent approvals of one application: exactly one succeeds, the others 409', async () => {
    const created = await alice.post('/api/v1/bots/applications', { name: 'Twice', username: 'approve_race' });
    const admin = client(h.url, await h.jwt('root', { admin: true }));
    const results = await Promise.all(Array.from({ length: 4 }, () => admin.post(`/api/v1/admin/bots/${created.body.id}/approve`)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409]);
    const { token } = { token: (await alice.get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token };
    expect((await client(h.url, token).post('/api/v1/bots/getMe')).status).toBe(200);
  });

  it('tokens are stored only as hashes', async () => {
    const { token } = await approvedBot(h, aliceJwt, 'hashed_bot');
    const db = h.apps[0]!.db!;
    const rows = await db.query(db.knex('bots').select('*'));
    expect(JSON.stringify(rows)).not.toContain(token);
    expect(JSON.stringify(rows)).not.toContain(token.slice(12));
  });
});
