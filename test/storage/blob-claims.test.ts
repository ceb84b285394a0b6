/**
 * The blob sweep's claim against a reuse committing at the same moment (files-repo.ts):
 * both take the content row's lock, so a claim waits for a file being made on the content
 * and then finds it (no claim: the bytes stay), and a file is never made on content the
 * sweep has claimed (BlobGone, for a reuse and a completed upload alike). On SQLite, or on
 * MariaDB with TEST_DATABASE_URL (its row locks; SQLite's units run one at a time).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, migrateLatest, type Db } from '../../src/storage/db.js';
import { BlobGone, createFilesRepo, type FilesRepo, type FileSpec } from '../../src/storage/files-repo.js';
import { createTestDatabase, type TestDatabase } from '../helpers/harness.js';

describe('blob claims and reuse, under the content row\'s lock', () => {
  let handle: TestDatabase;
  let db: Db;
  let files: FilesRepo;
  let n = 0;

  beforeAll(async () => {
    handle = await createTestDatabase(fs.mkdtempSync(path.join(os.tmpdir(), 'bp-blob-claims-')));
    const url = handle.url;
    db = createDb(url.startsWith('sqlite:') ? { kind: 'sqlite', filename: url.slice('sqlite:'.length) } : { kind: 'mysql', url, poolMax: 4 });
    await migrateLatest(db);
    files = createFilesRepo(db);
  });
  afterAll(async () => {
    await db?.destroy();
    await handle?.drop();
  });

  /** Content no file refers to, unreferenced since long ago (the sweep's to claim). */
  async function orphan(): Promise<FileSpec> {
    const checksum = (++n).toString(16).padStart(64, 'a');
    await db.query(db.knex('blobs').insert({ checksum, size: 10, created_at: 1, unreferenced_since: 1 }));
    return { botId: `bot${n}`, accountId: 'acct', checksum, size: 10, fileName: 'f', mimeType: 'text/plain', reuseRequestId: null };
  }
  const row = (checksum: string) => db.query<Record<string, unknown>>(db.knex('blobs').where({ checksum }).first('unreferenced_since', 'deleting_by'));

  it('a claim made while a reuse holds the row waits for it, then finds its file: no claim, the mark cleared', async () => {
    const spec = await orphan();
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    let locked!: () => void;
    const lockTaken = new Promise<void>((r) => { locked = r; });
    // A reuse's transaction, kept open after its file is written (the lock held).
    const reuse = db.sql.unit(async (tx) => {
      await files.addFile('file_reuse', spec, Date.now(), undefined, tx);
      locked();
      await held;
    }, { attempts: 1 });
    await lockTaken;
    let settled = false;
    const claim = files.claimUnreferencedBlob(spec.checksum, Date.now(), Date.now(), 'sweeper', Date.now() - 600_000).finally(() => { settled = true; });
    await new Promise((r) => setTimeout(r, 300));
    expect(settled, 'the claim waits for the row').toBe(false);
    release();
    await reuse;
    expect(await claim).toBe(false);
    expect(await row(spec.checksum)).toEqual({ unreferenced_since: null, deleting_by: null });
  });

  it('content claimed by the sweep gets no file: a reuse and a completion are refused (BlobGone, deleting), and the row goes with the claimer\'s drop', async () => {
    const spec = await orphan();
    expect(await files.claimUnreferencedBlob(spec.checksum, Date.now(), Date.now(), 'sweeper', Date.now() - 600_000)).toBe(true);
    // Another sweep finds it claimed (not stale): no second claim.
    expect(await files.claimUnreferencedBlob(spec.checksum, Date.now(), Date.now(), 'other', Date.now() - 600_000)).toBe(false);
    await expect(files.addFile('file_late', spec, Date.now())).rejects.toMatchObject({ constructor: BlobGone, deleting: true });
    const upload = { ...spec, id: `up_${n}`, fileId: null, createdAt: Date.now(), expiresAt: Date.now() + 60_000 };
    await files.createUpload(upload);
    await expect(files.completeUpload(upload, 'file_completed', Date.now())).rejects.toMatchObject({ constructor: BlobGone, deleting: true });
    expect(await db.query(db.knex('files').where({ checksum: spec.checksum }))).toEqual([]);
    expect(await files.dropClaimedBlob(spec.checksum, 'other')).toBe(false);
    expect(await files.dropClaimedBlob(spec.checksum, 'sweeper')).toBe(true);
    expect(await row(spec.checksum)).toBeUndefined();
    // Gone: a reuse is refused; a completion stores the content anew.
    await expect(files.addFile('file_after', spec, Date.now())).rejects.toMatchObject({ constructor: BlobGone, deleting: false });
    expect((await files.completeUpload(upload, 'file_completed', Date.now())).checksum).toBe(spec.checksum);
    expect(await row(spec.checksum)).toEqual({ unreferenced_since: null, deleting_by: null });
  });

  it('a claim older than ten minutes is taken to be a stopped sweep\'s: another claims it', async () => {
    const spec = await orphan();
    await db.query(db.knex('blobs').where({ checksum: spec.checksum }).update({ deleting_by: 'crashed', deleting_since: Date.now() - 11 * 60_000 }));
    expect(await files.claimUnreferencedBlob(spec.checksum, Date.now(), Date.now(), 'sweeper', Date.now() - 600_000)).toBe(true);
    expect(await files.dropClaimedBlob(spec.checksum, 'crashed')).toBe(false);
    expect(await files.dropClaimedBlob(spec.checksum, 'sweeper')).toBe(true);
  });
});
