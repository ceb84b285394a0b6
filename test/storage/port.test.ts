/**
 * The storage port answers the same on both drivers: one scenario, written once against
 * port.ts, run on SQLite always and on MySQL/MariaDB too when TEST_DATABASE_URL is set.
 */
import { describe, expect, it } from 'vitest';
import { engines, migratedDb } from '../helpers/engines.js';

const COLUMNS = ['group_name', 'member', 'expires_at'];

describe.each(engines())('the storage port on $name', (engine) => {
  const store = migratedDb(engine);
  const members = async (group: string) =>
    (await store.db.sql.all<{ member: string; expires_at: number | string }>('SELECT member, expires_at FROM feed_members WHERE group_name = ? ORDER BY member', [group]))
      .map((r) => [r.member, Number(r.expires_at)]);

  it('inserts in multi-row statements, on a taken key keeping the row or setting the columns named', async () => {
    const rows = Array.from({ length: 300 }, (_, i) => ['g1', `m${String(i).padStart(3, '0')}`, i]);
    await store.db.sql.unit(async (w) => w.insert('feed_members', COLUMNS, rows));
    await store.db.sql.unit(async (w) => w.insert('feed_members', COLUMNS, [['g1', 'm000', 1000]], { keys: ['group_name', 'member'] }));
    expect((await members('g1')).slice(0, 2)).toEqual([['m000', 0], ['m001', 1]]);
    await store.db.sql.unit(async (w) => w.insert('feed_members', COLUMNS, [['g1', 'm001', 1001], ['g1', 'new', 7]], { keys: ['group_name', 'member'], set: ['expires_at'] }));
    const after = await members('g1');
    expect(after).toHaveLength(301);
    expect(after.slice(0, 2)).toEqual([['m000', 0], ['m001', 1001]]);
    expect(after.at(-1)).toEqual(['new', 7]);
  });

  it('updates several rows by key, each its own values, or one value for all', async () => {
    await store.db.sql.unit(async (w) => w.insert('feed_members', COLUMNS, [['g2', 'a', 1], ['g2', 'b', 2], ['g2', 'c', 3]]));
    await store.db.sql.unit(async (w) => {
      w.update('feed_members', 'member', ['expires_at'], [['a', 10], ['c', 30]]);
      w.update('feed_members', 'member', ['group_name'], [['b', 'g2'], ['c', 'g2']]);
    });
    expect(await members('g2')).toEqual([['a', 10], ['b', 2], ['c', 30]]);
  });

  it('answers the same reads: one, all, allOf, oneOf, and the rows a write matched', async () => {
    await store.db.sql.unit(async (w) => w.insert('feed_members', COLUMNS, [['g3', 'x', 5], ['g3', 'y', 6]]));
    expect(await store.db.sql.one('SELECT member FROM feed_members WHERE group_name = ? AND member = ? LIMIT 1', ['g3', 'y'])).toEqual({ member: 'y' });
    expect(await store.db.sql.one('SELECT member FROM feed_members WHERE group_name = ? AND member = ? LIMIT 1', ['g3', 'none'])).toBeUndefined();
    expect(await store.db.sql.allOf(['member', 'group_name'], 'FROM feed_members WHERE group_name = ? ORDER BY member', ['g3']))
      .toEqual([{ member: 'x', group_name: 'g3' }, { member: 'y', group_name: 'g3' }]);
    expect(await store.db.sql.oneOf(['member'], 'FROM feed_members WHERE group_name = ? ORDER BY member DESC LIMIT 1', ['g3'])).toEqual({ member: 'y' });
    // Reads asked for together answer each its own (MySQL sends them as one statement).
    const [x, y, none] = await Promise.all(['x', 'y', 'z'].map((m) => store.db.sql.one<{ member: string }>('SELECT member FROM feed_members WHERE group_name = ? AND member = ? LIMIT 1', ['g3', m])));
    expect([x?.member, y?.member, none]).toEqual(['x', 'y', undefined]);
    // Matched rows, not changed ones: setting a value it already has still counts.
    expect(await store.db.sql.run('UPDATE feed_members SET expires_at = ? WHERE group_name = ?', [5, 'g3'])).toBe(2);
    expect(await store.db.query(store.db.knex('feed_members').where({ group_name: 'g3' }).pluck('member'))).toEqual(['x', 'y']);
  });

  it('a unit that throws writes nothing, and its reads saw its own writes', async () => {
    let seen: unknown;
    await expect(store.db.sql.unit(async (w) => {
      w.insert('feed_members', COLUMNS, [['g4', 'a', 1]]);
      seen = await w.all('SELECT member FROM feed_members WHERE group_name = ?', ['g4']);
      throw new Error('refused');
    })).rejects.toThrow('refused');
    expect(seen).toEqual([{ member: 'a' }]);
    expect(await members('g4')).toEqual([]);
    // A statement the database refuses fails its unit the same way.
    await expect(store.db.sql.unit(async (w) => {
      w.insert('feed_members', COLUMNS, [['g4', 'b', 1]]);
      await w.run('UPDATE no_such_table SET x = 1');
    })).rejects.toThrow(/no_such_table/);
    expect(await members('g4')).toEqual([]);
  });

  it('an insert answers the ids its rows got, in row order, once its unit is over (insertIds: SQLite and MariaDB)', async () => {
    const columns = ['topic', 'msg_key', 'payload', 'created_at', 'claimed_until'];
    // 3 rows: two multi-row statements (2 + 1), as inserts are split.
    const rows = [['t', 'ids-a', '{}', 1, 5], ['t', 'ids-b', '{}', 2, 5], ['t', 'ids-c', '{}', 3, 5]];
    let ids: Promise<number[]> | undefined;
    await store.db.sql.unit(async (w) => {
      w.insert('outbox', columns.slice(0, 4), [['t', 'ids-before', '{}', 0]]);
      ids = w.insertIds?.('outbox', columns, rows);
    });
    expect(ids).toBeDefined();
    const stored = await store.db.sql.all<{ id: number | string; msg_key: string }>(
      "SELECT id, msg_key FROM outbox WHERE msg_key IN ('ids-a', 'ids-b', 'ids-c') ORDER BY id");
    expect(stored.map((r) => r.msg_key)).toEqual(['ids-a', 'ids-b', 'ids-c']);
    expect(await ids).toEqual(stored.map((r) => Number(r.id)));
  });
});
