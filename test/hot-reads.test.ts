/**
 * The hot reads (console list and detail, the bot-token lookup, getUpdates and
 * getWebhookInfo) answer from the last committed state, and do not wait for a write
 * transaction in progress: on the embedded default, a long write (an ingest batch, a
 * sweep) used to hold the database's one connection and queue every read behind it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvedBot, client, startHarness, type Harness } from './helpers/harness.js';

/** The call's answer, or 'waited' when it has not answered within `ms`. */
const within = <T>(ms: number, p: Promise<T>) =>
  Promise.race([p, new Promise<'waited'>((r) => setTimeout(() => r('waited'), ms))]);

describe('reads during a write in progress', () => {
  let h: Harness;

  beforeAll(async () => {
    // Every bot call reads its token's row (no kept principals). Limits are off: their
    // counters are a write, and on SQLite a write waits for the writer in progress.
    h = await startHarness('in-process', { AUTH_CACHE_TTL: '0', LIMITS_ENABLED: 'false' });
  });
  afterAll(() => h?.close());

  it('console and runtime reads answer the committed state while a write transaction is open, and see it once committed', async () => {
    const jwt = await h.jwt('hot-reader');
    const owner = client(h.url, jwt);
    const { id, token } = await approvedBot(h, jwt, 'hot_reader_bot');
    const bot = client(h.url, token);
    const reads = () => [
      owner.get('/api/v1/bots/my'),
      owner.get(`/api/v1/bots/my/${id}`),
      bot.post('/api/v1/bots/getMe'),
      bot.post('/api/v1/bots/getUpdates', { timeout: 0 }),
      bot.post('/api/v1/bots/getWebhookInfo'),
    ];
    for (const r of await Promise.all(reads())) expect(r.status).toBe(200);

    // A write transaction on the service's own database handle, held open.
    const db = h.apps[0]!.db!;
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    let opened!: () => void;
    const isOpen = new Promise<void>((r) => { opened = r; });
    const writing = db.sql.unit(async (w) => {
      await w.run('UPDATE bots SET name = ? WHERE id = ?', ['Renamed in a transaction', id]);
      opened();
      await released;
    });
    try {
      await isOpen;
      const answers = await within(3000, Promise.all(reads()));
      expect(answers).not.toBe('waited');
      const [list, detail, me, updates, info] = answers as Awaited<ReturnType<typeof owner.get>>[];
      for (const r of [list, detail, me, updates, info]) expect(r!.status).toBe(200);
      // What was committed, not the open transaction's change.
      expect(list!.body.items.map((b: { id: string; name: string }) => [b.id, b.name])).toEqual([[id, 'Bot hot_reader_bot']]);
      expect(detail!.body.name).toBe('Bot hot_reader_bot');
      expect(me!.body.result).toMatchObject({ id, username: 'hot_reader_bot', name: 'Bot hot_reader_bot' });
      expect(updates!.body).toEqual({ ok: true, result: [] });
      expect(info!.body.result).toMatchObject({ url: '', pending_update_count: 0 });
    } finally {
      release();
      await writing;
    }
    // Committed: the next reads show it.
    expect((await owner.get(`/api/v1/bots/my/${id}`)).body.name).toBe('Renamed in a transaction');
    expect((await owner.get('/api/v1/bots/my')).body.items[0].name).toBe('Renamed in a transaction');
    expect((await bot.post('/api/v1/bots/getMe')).body.result.name).toBe('Renamed in a transaction');
  });

  it('reads of several bots and owners made at once each answer their own (on MySQL they may share a statement)', async () => {
    const owners = await Promise.all([0, 1, 2].map((i) => h.jwt(`many-reader-${i}`)));
    const bots = await Promise.all(owners.map((jwt, i) => approvedBot(h, jwt, `many_reader_${i}`)));
    // The second bot has two updates waiting, the third one: their counts and queues differ.
    for (const [i, n] of [[1, 2], [2, 1]] as const) {
      for (let k = 0; k < n; k++) expect((await client(h.url, owners[i]).post(`/api/v1/bots/my/${bots[i]!.id}/test-updates`, { text: `m${k}` })).status).toBe(201);
    }
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(bots.map(async (b, i) => {
        const bot = client(h.url, b.token);
        const [me, detail, list, info, updates] = await Promise.all([
          bot.post('/api/v1/bots/getMe'),
          client(h.url, owners[i]).get(`/api/v1/bots/my/${b.id}`),
          client(h.url, owners[i]).get('/api/v1/bots/my'),
          bot.post('/api/v1/bots/getWebhookInfo'),
          bot.post('/api/v1/bots/getUpdates', { timeout: 0 }),
        ]);
        return { me, detail, list, info, updates };
      }));
      answers.forEach(({ me, detail, list, info, updates }, i) => {
        const { id } = bots[i]!;
        expect(me.body.result).toMatchObject({ id: expect.anything(), username: `many_reader_${i}` });
        expect(detail.body).toMatchObject({ id, username: `many_reader_${i}` });
        expect(list.body.items.map((b: { id: string }) => b.id)).toEqual([id]);
        expect(info.body.result.pending_update_count).toBe([0, 2, 1][i]);
        expect(updates.body.result.map((u: { message: { text: string } }) => u.message.text)).toEqual([[], ['m0', 'm1'], ['m0']][i]);
      });
    }
  });
});
