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
    const writing = db.transaction(async (tx) => {
      await tx('bots').where({ id }).update({ name: 'Renamed in a transaction' });
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
});
