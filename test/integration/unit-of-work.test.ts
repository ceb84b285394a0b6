/**
 * MySQL's units of work (mysql/driver.ts) send the statements whose answers they do not
 * read together with the next one: a send's transaction in three round trips, not nine,
 * and a read whose rows they need later (allLater) too; on MariaDB an insert answers
 * its rows' ids with the COMMIT (insertIds).
 * What they write is still all or nothing, in the order written. Run by the integration
 * pass (MariaDB).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateLatest, type Db, type Sql } from '../../src/storage/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/harness.js';

const COLUMNS = ['topic', 'msg_key', 'payload', 'created_at'] as const;

describe('MySQL units of work', () => {
  let handle: TestDatabase;
  let db: Db;
  let unit: Sql['unit'];
  /** Round trips to the server (queries the driver sent) while counting. */
  let trips = 0;

  beforeAll(async () => {
    handle = await createTestDatabase(fs.mkdtempSync(path.join(os.tmpdir(), 'bp-units-')));
    db = createDb({ kind: 'mysql', url: handle.url, poolMax: 3 });
    await migrateLatest(db);
    // Count what goes over the wire: the driver reports each round trip.
    db.on('trip', () => trips++);
    unit = db.sql.unit;
  });
  afterAll(async () => {
    await db?.destroy();
    await handle?.drop();
  });

  const topics = async (key: string) =>
    (await db.sql.all<{ topic: string }>('SELECT topic FROM outbox WHERE msg_key = ? ORDER BY id', [key])).map((r) => r.topic);

  it('queued statements go with the next one, in order, and commit with the unit: a six-statement unit in two round trips', async () => {
    trips = 0;
    const seen = await unit(async (w) => {
      w.insert('outbox', [...COLUMNS], [['t1', 'k-order', '{}', 1]]);
      w.insert('outbox', [...COLUMNS], [['t2', 'k-order', '{}', 2]]);
      // The queued inserts are sent first, on the same connection: this read sees them.
      const rows = await w.all<{ topic: string }>('SELECT topic FROM outbox WHERE msg_key = ? ORDER BY id', ['k-order']);
      w.queue('UPDATE outbox SET topic = ? WHERE msg_key = ? AND topic = ?', ['t2-updated', 'k-order', 't2']);
      return rows.map((r) => r.topic);
    });
    expect(seen).toEqual(['t1', 't2']);
    // START TRANSACTION + two inserts + the read; the update + COMMIT.
    expect(trips).toBe(2);
    expect(await topics('k-order')).toEqual(['t1', 't2-updated']);
  });

  it('a failing statement fails the unit and nothing it queued before is written', async () => {
    await expect(unit(async (w) => {
      w.insert('outbox', [...COLUMNS], [['t1', 'k-fail', '{}', 1]]);
      await w.all('SELECT * FROM no_such_table', []);
    })).rejects.toThrow(/no_such_table/);
    expect(await topics('k-fail')).toEqual([]);
  });

  it('a failing queued statement fails the call it went with, and neither it nor those around it are written', async () => {
    let reached = false;
    await expect(unit(async (w) => {
      w.insert('outbox', [...COLUMNS], [['t1', 'k-queued', '{}', 1]]);
      // topic is NOT NULL: the server refuses this one, and runs nothing after it.
      w.insert('outbox', [...COLUMNS], [[null, 'k-queued', '{}', 2]]);
      w.insert('outbox', [...COLUMNS], [['t3', 'k-queued', '{}', 3]]);
      await w.run('UPDATE outbox SET payload = ? WHERE msg_key = ?', ['{"x":1}', 'k-queued']);
      reached = true;
    })).rejects.toThrow(/topic/);
    expect(reached).toBe(false);
    expect(await topics('k-queued')).toEqual([]);
    // The connection went back to the pool usable, outside any transaction.
    await unit(async (w) => w.insert('outbox', [...COLUMNS], [['after', 'k-queued', '{}', 4]]));
    expect(await topics('k-queued')).toEqual(['after']);
  });

  it('a unit that fails before anything went to the server sends nothing, not even a ROLLBACK', async () => {
    trips = 0;
    await expect(unit(async (w) => {
      w.insert('outbox', [...COLUMNS], [['t1', 'k-early', '{}', 1]]);
      throw new Error('refused before any statement that answers');
    })).rejects.toThrow(/refused before/);
    expect(trips).toBe(0);
    expect(await topics('k-early')).toEqual([]);
    // A failure after the first round trip still rolls back: one more trip.
    trips = 0;
    await expect(unit(async (w) => {
      await w.all('SELECT 1', []);
      throw new Error('refused after a read');
    })).rejects.toThrow(/refused after/);
    expect(trips).toBe(2);
  });

  it('a read held back (allLater) goes with the next statement that answers, and an insert answers its ids with the COMMIT (insertIds, MariaDB)', async () => {
    // A connection that has asked the server's version (each new one does, before anything else).
    await db.sql.all('SELECT 1', []);
    trips = 0;
    let ids: Promise<number[]> | undefined;
    const counts = await unit(async (w) => {
      const held = w.allLater<{ n: number }>('SELECT COUNT(*) AS n FROM outbox WHERE msg_key = ?', ['k-held']);
      ids = w.insertIds?.('outbox', [...COLUMNS, 'claimed_until'], [['a', 'k-held', '{}', 1, 5], ['b', 'k-held', '{}', 2, 5]]);
      const after = await w.all<{ n: number }>('SELECT COUNT(*) AS n FROM outbox WHERE msg_key = ?', ['k-held']);
      return [Number((await held)[0]!.n), Number(after[0]!.n)];
    });
    // The held read ran first, in order, in the same round trip as the later read; then the COMMIT.
    expect(counts).toEqual([0, 2]);
    expect(trips).toBe(2);
    expect(ids).toBeDefined();
    const stored = (await db.sql.all<{ id: number }>('SELECT id FROM outbox WHERE msg_key = ? ORDER BY id', ['k-held'])).map((r) => Number(r.id));
    expect(await ids).toEqual(stored);
  });

  it('a unit without a transaction sends what it queued when its body ends', async () => {
    trips = 0;
    await unit(async (w) => {
      w.insert('outbox', [...COLUMNS], [['a', 'k-plain', '{}', 1]]);
      w.insert('outbox', [...COLUMNS], [['b', 'k-plain', '{}', 2]]);
    }, { transaction: false });
    expect(trips).toBe(1);
    expect(await topics('k-plain')).toEqual(['a', 'b']);
  });
});
