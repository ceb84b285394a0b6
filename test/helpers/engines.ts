/**
 * The storage engines a storage test runs on: SQLite always, MySQL/MariaDB too when
 * TEST_DATABASE_URL is set (the integration pass). `describe.each(engines())` and, in
 * the block, `migratedDb(engine)`: a migrated database of the test's own, gone after it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { createDb, migrateLatest, type Db } from '../../src/storage/db.js';
import { createTestDatabase, type TestDatabase } from './harness.js';

export interface Engine {
  name: 'sqlite' | 'mysql';
  open(dir: string): Promise<{ db: Db; handle?: TestDatabase }>;
}

export function engines(): Engine[] {
  const list: Engine[] = [{ name: 'sqlite', open: async (dir) => ({ db: createDb({ kind: 'sqlite', filename: path.join(dir, 'test.sqlite') }) }) }];
  if (process.env.TEST_DATABASE_URL) {
    list.push({
      name: 'mysql',
      open: async (dir) => {
        const handle = await createTestDatabase(dir);
        return { db: createDb({ kind: 'mysql', url: handle.url, poolMax: 3 }), handle };
      },
    });
  }
  return list;
}

/** Opens and migrates the engine's database before the block's tests, and drops it after them: read `.db` in a test. */
export function migratedDb(engine: Engine): { readonly db: Db } {
  const opened: { db?: Db; handle?: TestDatabase } = {};
  beforeAll(async () => {
    Object.assign(opened, await engine.open(fs.mkdtempSync(path.join(os.tmpdir(), `bp-${engine.name}-`))));
    await migrateLatest(opened.db!);
  });
  afterAll(async () => {
    await opened.db?.destroy();
    await opened.handle?.drop();
  });
  return { get db() { return opened.db!; } };
}
