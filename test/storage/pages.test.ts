/**
 * A listed page and its total come from one snapshot: the console's lists (the delivery
 * log, a delivery's attempts, a chat's sent messages, an owner's bots, the review desk)
 * never answer "total 6" beside five rows, whatever commits while they are read. The
 * CI once saw exactly that: the delivery log's rows and its count were two statements,
 * and a dispatcher thread's commit came between them.
 *
 * Each list here reads through a view of the database that commits a change to the very
 * rows listed between any two statements the list runs.
 * Run on SQLite always and on MySQL/MariaDB too when TEST_DATABASE_URL is set.
 */
import { describe, expect, it } from 'vitest';
import { createAttemptsRepo } from '../../src/storage/attempts-repo.js';
import { createBotsRepo } from '../../src/storage/bots-repo.js';
import type { Reads, Tx } from '../../src/storage/db.js';
import { createDeliveriesRepo } from '../../src/storage/deliveries-repo.js';
import { createMessagesRepo } from '../../src/storage/messages-repo.js';
import { engines, migratedDb } from '../helpers/engines.js';

describe.each(engines())('a page and its total on $name', (engine) => {
  const store = migratedDb(engine);

  /**
   * The database as the lists read it, except that before each statement after the first,
   * `change` commits: the worst a concurrent writer can do. Passed where a list takes its unit.
   */
  function racing(change: () => Promise<unknown>): Tx {
    let statements = 0;
    const between = async <T>(read: () => Promise<T>) => {
      if (statements++ > 0) await change();
      return read();
    };
    const reads: Reads = {
      dialect: store.db.sql.dialect,
      one: (sql, params) => between(() => store.db.sql.one(sql, params)),
      all: (sql, params, urgent) => between(() => store.db.sql.all(sql, params, urgent)),
      allOf: (columns, tail, params) => between(() => store.db.sql.allOf(columns, tail, params)),
      oneOf: (columns, tail, params) => between(() => store.db.sql.oneOf(columns, tail, params)),
    };
    return reads as Tx;
  }
  /** Runs `rows` one statement on its own, as a concurrent writer's commit. */
  const insert = (table: string, rows: Record<string, unknown>[]) => store.db.sql.run(store.db.knex(table).insert(rows).toString());

  /** What a page says is consistent: it holds the rows its total leaves for it. */
  const consistent = (found: { items: unknown[]; total: number }, page: number, limit: number) =>
    expect(found.items).toHaveLength(Math.min(limit, Math.max(0, found.total - (page - 1) * limit)));

  let next = 0;
  const delivery = (botId: string, seq: number, status: string) => ({
    id: `d${++next}`, bot_id: botId, update_id: seq, update_seq: seq, status, attempts: 3, next_attempt_at: 0, payload: '{}', created_at: 1000 + seq,
  });

  it('the delivery log: a delivery dying while the page is read is in both or in neither', async () => {
    const deliveries = createDeliveriesRepo(store.db);
    await insert('deliveries', [1, 2, 3, 4, 5].map((seq) => delivery('b1', seq, 'dead_letter')));
    let seq = 5;
    const page = await deliveries.listForBot('b1', 1, 100, { status: 'dead_letter' }, racing(() => insert('deliveries', [delivery('b1', ++seq, 'dead_letter')])));
    consistent(page, 1, 100);
    expect(page.total).toBeGreaterThanOrEqual(5);
    // A later page; a page past the end still says how many there are.
    const second = await deliveries.listForBot('b1', 2, 4, { status: 'dead_letter' }, racing(() => insert('deliveries', [delivery('b1', ++seq, 'dead_letter')])));
    consistent(second, 2, 4);
    const past = await deliveries.listForBot('b1', 9, 4, { status: 'dead_letter' });
    expect(past).toEqual({ items: [], total: seq });
    expect((await deliveries.listForBot('b1', 1, 4, { status: 'succeeded' })).total).toBe(0);
  });

  it('a delivery\'s attempts, a chat\'s sent messages, an owner\'s bots and the review desk', async () => {
    let n = 0;
    const attempt = () => ({
      id: `a${++n}`, bot_id: 'b2', delivery_id: 'd-x', update_id: 1, attempted_at: n, attempt_trigger: 'automatic', ok: 0, duration_ms: 1, url: 'https://x.test/',
      request_headers: '{}', request_body: '{}', response_truncated: 0,
    });
    await insert('delivery_attempts', [attempt(), attempt()]);
    const attempts = await createAttemptsRepo(store.db).listForDelivery('b2', 'd-x', 1, 100, racing(() => insert('delivery_attempts', [attempt()])));
    consistent(attempts, 1, 100);

    let m = 0;
    const sent = () => ({ bot_id: 'b2', chat_id: 7, message_id: ++m, outbound: 1, created_at: m, payload: JSON.stringify({ message_id: m }) });
    await insert('messages', [sent(), sent(), sent()]);
    const messages = await createMessagesRepo(store.db).listSent('b2', 7, 1, 100, racing(() => insert('messages', [sent()])));
    consistent(messages, 1, 100);

    let b = 0;
    const bot = (owner: string) => ({
      id: `bot${++b}`, owner_id: owner, name: 'n', username: `u${b}_bot`, description: '', avatar: '', scopes: '[]', review_status: 'pending',
      status: 'inactive', delivery_mode: 'polling', links: '[]', command_menu: '[]', created_at: b, updated_at: b,
    });
    await insert('bots', [bot('o1'), bot('o1'), bot('o1')]);
    const bots = createBotsRepo(store.db);
    // Later pages: a first page that is not full is its own total.
    const mine = await bots.listForOwner('o1', 2, 2, racing(() => insert('bots', [bot('o1')])));
    consistent(mine, 2, 2);
    const desk = await bots.listAll('pending', 2, 4, racing(() => insert('bots', [bot('o2')])));
    consistent(desk, 2, 4);
  });
});
