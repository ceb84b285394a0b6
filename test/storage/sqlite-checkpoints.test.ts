/**
 * The embedded default's WAL checkpoints (src/storage/sqlite/driver.ts, `timer`): the main
 * thread's writer copies the WAL back into the database file on its timer when another
 * connection (a dispatcher thread) committed since its last checkpoint, or after
 * CHECKPOINT_UNITS units of its own; a few units of its own stay in the WAL (SQLite's own
 * autocheckpoint past 1,000 pages still applies), so its next commit does not start the WAL
 * over. Seen from outside: in WAL mode only a checkpoint writes the database file, so its
 * size says whether one ran.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CHECKPOINT_MS, CHECKPOINT_UNITS, createSqliteDriver } from '../../src/storage/sqlite/driver.js';
import type { Sql } from '../../src/storage/port.js';

describe('the SQLite writer\'s checkpoint timer', () => {
  let dir: string;
  let file: string;
  let sql: Sql;
  let other: Database.Database;
  const size = () => fs.statSync(file).size;
  /** One unit of the driver's writer: a row of about 5 KiB (new pages of the file, once copied back). */
  const unit = () => sql.unit(async (w) => {
    await w.run('INSERT INTO t (v) VALUES (?)', ['x'.repeat(5000)]);
  });

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-checkpoints-'));
    file = path.join(dir, 'db.sqlite');
    other = new Database(file);
    other.pragma('journal_mode = WAL');
    other.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    other.pragma('wal_checkpoint(TRUNCATE)');
    sql = createSqliteDriver(file, { statement: () => {} }, { checkpoints: 'timer' });
  });
  afterEach(async () => {
    await sql.close();
    other.close();
    vi.useRealTimers();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('leaves a few units of its own in the WAL', async () => {
    for (let i = 0; i < 5; i++) await unit();
    const before = size();
    vi.advanceTimersByTime(CHECKPOINT_MS * 8);
    expect(size()).toBe(before);
    // What they wrote is there, read by another connection.
    expect(other.prepare('SELECT count(*) FROM t').pluck().get()).toBe(5);
  });

  it('checkpoints on its next tick once another connection committed', async () => {
    await unit();
    const before = size();
    other.prepare('INSERT INTO t (v) VALUES (?)').run('y'.repeat(5000));
    vi.advanceTimersByTime(CHECKPOINT_MS);
    expect(size()).toBeGreaterThan(before);
  });

  it(`checkpoints on its next tick after ${CHECKPOINT_UNITS} units of its own`, async () => {
    for (let i = 0; i < CHECKPOINT_UNITS - 1; i++) await unit();
    vi.advanceTimersByTime(CHECKPOINT_MS);
    const before = size();
    await unit();
    vi.advanceTimersByTime(CHECKPOINT_MS);
    expect(size()).toBeGreaterThan(before);
  });
});
