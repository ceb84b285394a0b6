/**
 * The blob sweep (issue 35 audit: a deleted bot's file bytes stayed in the blob store
 * forever). Content is stored once per SHA-256 and shared by every file with it; when
 * the purge of a deleted bot removes the last file on some content, the sweep removes its
 * bytes and its row UNREFERENCED_BLOB_RETENTION later, unless a file refers to it again
 * by then. Shared content stays. A reuse never gets a file_id on content the sweep is
 * removing, and a completed upload of the same content waits for the removal and ends with
 * its bytes stored. On local disk and on S3 (s3proxy), on SQLite or MariaDB
 * (TEST_DATABASE_URL).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../src/storage/db.js';
import { approvedBot, call, client, startHarness, type Harness } from './helpers/harness.js';
import { createTestBucket, type TestBucket } from './helpers/s3.js';
import { until } from './helpers/until.js';

const sha256 = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');

describe.each(['local disk', 'S3'] as const)('the blob sweep, %s', (store) => {
  const harnesses: Harness[] = [];
  const dbs: Db[] = [];
  let bucket: TestBucket | undefined;

  beforeAll(async () => {
    if (store === 'S3') bucket = await createTestBucket();
  }, 300_000);
  afterAll(async () => {
    for (const h of harnesses) await h.close();
    for (const db of dbs) await db.destroy();
    await bucket?.drop();
  });

  async function start(env: Record<string, string>) {
    const h = await startHarness('in-process', { ...(bucket?.env ?? {}), ...env });
    harnesses.push(h);
    const db = createDb(h.apps[0]!.config.database);
    dbs.push(db);
    const ownerJwt = await h.jwt('blob-sweep-owner');
    const blobDir = h.apps[0]!.config.blobDir;
    /** Whether the store holds the content's bytes. */
    const stored = async (checksum: string) => (bucket
      ? (await bucket.keys('blobs/')).includes(`blobs/${checksum}`)
      : fs.existsSync(path.join(blobDir, 'blobs', checksum)));
    /** Deletes the content's bytes from the store, as the sweep does. */
    const deleteBytes = async (checksum: string) => {
      if (bucket) await bucket.client.send(new DeleteObjectCommand({ Bucket: bucket.name, Key: `blobs/${checksum}` }));
      else await fs.promises.rm(path.join(blobDir, 'blobs', checksum));
    };
    const blobRow = async (checksum: string) => db.query<Record<string, unknown> | undefined>(db.knex('blobs').where({ checksum }).first());
    const owners = async (checksum: string) => Number((await db.query(db.knex('blob_owners').where({ checksum }).count({ n: '*' })))[0]!.n);
    const rt = (token: string, method: string, body: object) => call(h.url, 'POST', `/api/v1/bots/${method}`, { token, body });
    const credentials = (token: string, bytes: Buffer, extra: object = {}) =>
      rt(token, 'files/upload-credentials', { fileName: 'data.bin', fileSize: bytes.length, checksum: sha256(bytes), ...extra });
    /** PUTs the bytes to the upload URL the credentials gave. */
    const put = async (cred: { uploadUrl: string; headers: Record<string, string> }, bytes: Buffer) => {
      expect((await fetch(cred.uploadUrl, { method: 'PUT', headers: cred.headers, body: new Uint8Array(bytes) })).status).toBe(200);
    };
    const upload = async (token: string, bytes: Buffer) => {
      const cred = await credentials(token, bytes);
      expect(cred.body.result.uploadRequired).toBe(true);
      await put(cred.body.result, bytes);
      const done = await rt(token, 'files/complete', { checksum: sha256(bytes) });
      expect(done.status).toBe(200);
      return done.body.result.file_id as string;
    };
    /** The file's bytes, downloaded through getFile's URL. */
    const download = async (token: string, fileId: string) => {
      const got = await rt(token, 'getFile', { file_id: fileId });
      expect(got.status).toBe(200);
      const res = await fetch(got.body.result.download_url);
      return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
    };
    const remove = async (botId: string) => {
      expect((await call(h.url, 'DELETE', `/api/v1/bots/my/${botId}`, { token: ownerJwt, body: {} })).status).toBe(200);
    };
    return { h, db, ownerJwt, owner: client(h.url, ownerJwt), stored, deleteBytes, blobRow, owners, rt, credentials, put, upload, download, remove };
  }

  it('removes a deleted bot\'s content once no file refers to it, after UNREFERENCED_BLOB_RETENTION; content another bot shares stays; the same bytes can be stored again', async () => {
    const t = await start({ DELETED_BOT_RETENTION: '1s', UNREFERENCED_BLOB_RETENTION: '2s' });
    const gone = await approvedBot(t.h, t.ownerJwt, 'sweep_gone');
    const kept = await approvedBot(t.h, t.ownerJwt, 'sweep_kept');
    const own = crypto.randomBytes(1500 + (store === 'S3' ? 1 : 0));
    const shared = crypto.randomBytes(2000);
    await t.upload(gone.token, own);
    await t.upload(gone.token, shared);
    // The other bot shares the content (a trusted reuse: the same account holds it).
    const reused = (await t.credentials(kept.token, shared, { reuseExisting: true })).body.result;
    expect(reused).toMatchObject({ uploadRequired: false, file_id: expect.any(String) });
    expect([await t.stored(sha256(own)), await t.stored(sha256(shared))]).toEqual([true, true]);

    await t.remove(gone.id);
    const purgedAt = await until(async () => (await t.blobRow(sha256(own)))?.unreferenced_since, (v) => v != null, 15_000);
    expect(purgedAt).not.toBeNull();
    // Kept through its retention (unless the sweep came by already on a slow machine).
    if (Date.now() < Number(purgedAt) + 2000) expect(await t.stored(sha256(own))).toBe(true);
    // Then its bytes, its row and its owners go.
    expect(await until(() => t.stored(sha256(own)), (s) => !s, 15_000)).toBe(false);
    expect(await until(() => t.blobRow(sha256(own)), (r) => r === undefined, 5000)).toBeUndefined();
    expect(await t.owners(sha256(own))).toBe(0);
    // The shared content stays, unmarked, and downloads.
    expect(await t.stored(sha256(shared))).toBe(true);
    expect(await t.blobRow(sha256(shared))).toMatchObject({ unreferenced_since: null, deleting_by: null });
    expect(await t.download(kept.token, reused.file_id)).toEqual({ status: 200, bytes: shared });

    // The removed content is no reuse hit any more: its bytes are asked for, and stored again.
    const again = (await t.credentials(kept.token, own, { reuseExisting: true })).body.result;
    expect(again.uploadRequired).toBe(true);
    expect(again.file_id).toBeUndefined();
    await t.put(again, own);
    const done = await t.rt(kept.token, 'files/complete', { checksum: sha256(own) });
    expect(done.status).toBe(200);
    expect(await t.download(kept.token, done.body.result.file_id)).toEqual({ status: 200, bytes: own });
  }, 60_000);

  it('content reused within its retention is kept: the reuse clears its mark', async () => {
    const t = await start({ DELETED_BOT_RETENTION: '1s', UNREFERENCED_BLOB_RETENTION: '3s' });
    const gone = await approvedBot(t.h, t.ownerJwt, 'sweep_gone_reused');
    const later = await approvedBot(t.h, t.ownerJwt, 'sweep_later');
    const bytes = crypto.randomBytes(1200);
    await t.upload(gone.token, bytes);
    await t.remove(gone.id);
    expect(await until(async () => (await t.blobRow(sha256(bytes)))?.unreferenced_since, (v) => v != null, 15_000)).not.toBeNull();
    const hit = (await t.credentials(later.token, bytes, { reuseExisting: true })).body.result;
    expect(hit).toMatchObject({ uploadRequired: false, file_id: expect.any(String) });
    expect((await t.blobRow(sha256(bytes)))?.unreferenced_since).toBeNull();
    // Past the retention and a few sweeps: still there.
    await new Promise((r) => setTimeout(r, 5000));
    expect(await t.stored(sha256(bytes))).toBe(true);
    expect(await t.download(later.token, hit.file_id)).toEqual({ status: 200, bytes });
  }, 60_000);

  it('while the sweep removes content, a reuse gets no file_id and a completed upload of it waits, then stores the bytes again', async () => {
    // A day's retention: the service's own sweep leaves the claim below alone (not stale for 10 minutes).
    const t = await start({ DELETED_BOT_RETENTION: '1s', UNREFERENCED_BLOB_RETENTION: '1d' });
    const gone = await approvedBot(t.h, t.ownerJwt, 'sweep_gone_racing');
    const other = await approvedBot(t.h, t.ownerJwt, 'sweep_racing');
    const bytes = crypto.randomBytes(1800);
    const checksum = sha256(bytes);
    await t.upload(gone.token, bytes);
    await t.remove(gone.id);
    expect(await until(async () => (await t.blobRow(checksum))?.unreferenced_since, (v) => v != null, 15_000)).not.toBeNull();
    // A sweep's claim, as it stands while it deletes the bytes: the row says deleting.
    await t.db.query(t.db.knex('blobs').where({ checksum }).update({ unreferenced_since: 1, deleting_by: 'test-sweep', deleting_since: Date.now() }));

    // The account owns the content, but it is going: no hit, its bytes are asked for.
    const cred = (await t.credentials(other.token, bytes, { reuseExisting: true })).body.result;
    expect(cred.uploadRequired).toBe(true);
    expect(cred.file_id).toBeUndefined();
    await t.put(cred, bytes);
    // Its completion waits while the claim holds (the copy found the old bytes, about to go)...
    const completing = t.rt(other.token, 'files/complete', { checksum });
    await new Promise((r) => setTimeout(r, 500));
    expect(await t.db.query(t.db.knex('files').where({ bot_id: other.id })), 'no file while the content is being removed').toEqual([]);
    // ...the sweep deletes the bytes and the row...
    await t.deleteBytes(checksum);
    await t.db.query(t.db.knex('blobs').where({ checksum, deleting_by: 'test-sweep' }).delete());
    // ...and the completion stores them again: the file downloads.
    const done = await completing;
    expect(done.status).toBe(200);
    expect(await t.stored(checksum)).toBe(true);
    expect(await t.blobRow(checksum)).toMatchObject({ unreferenced_since: null, deleting_by: null });
    expect(await t.download(other.token, done.body.result.file_id)).toEqual({ status: 200, bytes });

    // A claim that does not end in time: the completion answers 503 with Retry-After, and no file.
    const stuck = crypto.randomBytes(900);
    const stuckSum = sha256(stuck);
    await t.upload(other.token, stuck);
    await t.db.query(t.db.knex('files').where({ checksum: stuckSum }).delete());
    await t.db.query(t.db.knex('uploads').where({ checksum: stuckSum }).delete());
    await t.db.query(t.db.knex('blobs').where({ checksum: stuckSum }).update({ unreferenced_since: 1, deleting_by: 'test-sweep', deleting_since: Date.now() }));
    const cred2 = (await t.credentials(other.token, stuck)).body.result;
    await t.put(cred2, stuck);
    const refused = await t.rt(other.token, 'files/complete', { checksum: stuckSum });
    expect(refused.status).toBe(503);
    expect(refused.body, JSON.stringify(refused.body)).toMatchObject({ ok: false, error_code: 503, description: expect.stringMatching(/being removed from storage/) });
    expect(await t.db.query(t.db.knex('files').where({ checksum: stuckSum }))).toEqual([]);
  }, 60_000);
});
