/**
 * Files: blobs (one per content, by SHA-256), the accounts that have shown they
 * hold each blob, logical files (one per registration), upload sessions and
 * possession challenges. Every file read is scoped by the bot that owns it. The
 * only writer of files, blobs, blob_owners, uploads, possession_tries and
 * possession_challenges; every method takes the caller's transaction, when it has
 * one, as its last argument (its own multi-statement writes then run in a savepoint).
 */
import { exec, inTransaction, isDeadlockOrLockWait, isUniqueViolation, type Db, type Tx } from './db.js';

export interface FileRecord {
  id: string;
  botId: string;
  checksum: string;
  size: number;
  fileName: string;
  mimeType: string;
  reuseRequestId: string | null;
  createdAt: number;
  /** An image's width and height in pixels, as its header says (absent for other files, and when it could not be read). */
  image?: ImageSize;
}

/** An image's dimensions. */
export interface ImageSize {
  width: number;
  height: number;
}

export interface FileSpec {
  botId: string;
  accountId: string;
  checksum: string;
  size: number;
  fileName: string;
  mimeType: string;
  reuseRequestId: string | null;
}

export interface UploadRecord extends FileSpec {
  id: string;
  fileId: string | null;
  createdAt: number;
  expiresAt: number;
}

export interface ChallengeRecord extends FileSpec {
  id: string;
  nonce: string;
  ranges: { offset: number; length: number }[];
  used: boolean;
  expiresAt: number;
}

/** How many possession challenges an account may be handed for one content within a window. */
export interface TryLimit {
  maxTries: number;
  windowMs: number;
}

/**
 * The content has no bytes a file may be made on: gone (the blob sweep removed it), or
 * going (`deleting`: a sweep claimed it and is deleting its bytes).
 */
export class BlobGone extends Error {
  constructor(readonly checksum: string, readonly deleting: boolean) {
    super(deleting ? 'the content is being removed from the blob store' : 'no such content in the blob store');
  }
}

/* eslint-disable @typescript-eslint/no-explicit-any */
const fileOf = (r: any): FileRecord => ({
  id: r.id, botId: r.bot_id, checksum: r.checksum, size: Number(r.size), fileName: r.file_name, mimeType: r.mime_type,
  reuseRequestId: r.reuse_request_id ?? null, createdAt: Number(r.created_at),
  ...(r.width != null && r.height != null ? { image: { width: Number(r.width), height: Number(r.height) } } : {}),
});
const specRow = (s: FileSpec) => ({
  bot_id: s.botId, account_id: s.accountId, checksum: s.checksum, size: s.size, file_name: s.fileName,
  mime_type: s.mimeType, reuse_request_id: s.reuseRequestId,
});
const specOf = (r: any): FileSpec => ({
  botId: r.bot_id, accountId: r.account_id, checksum: r.checksum, size: Number(r.size), fileName: r.file_name,
  mimeType: r.mime_type, reuseRequestId: r.reuse_request_id ?? null,
});
/* eslint-enable @typescript-eslint/no-explicit-any */

export function createFilesRepo(db: Db) {
  const { sql, knex } = db;
  const mysql = sql.dialect === 'mysql';
  /** Reads and single writes (knex-built: these are cold), in the caller's unit or on their own. */
  const on = (tx?: Tx) => tx ?? sql;

  /**
   * Inserts a logical file (and makes the account an owner of the blob). When the
   * bot already has a file for this reuseRequestId, that one is the answer.
   */
  async function insertFile(tx: Tx, id: string, spec: FileSpec, now: number, image?: ImageSize): Promise<FileRecord> {
    await exec(tx, knex('blob_owners').insert({ checksum: spec.checksum, account_id: spec.accountId, created_at: now })
      .onConflict(['checksum', 'account_id']).ignore());
    const row = {
      id, bot_id: spec.botId, checksum: spec.checksum, size: spec.size, file_name: spec.fileName,
      mime_type: spec.mimeType, reuse_request_id: spec.reuseRequestId, created_at: now,
      width: image?.width ?? null, height: image?.height ?? null,
    };
    await exec(tx, knex('files').insert(row));
    return fileOf(row);
  }

  /**
   * The content's row, locked (MySQL: FOR UPDATE; SQLite's units run one at a time) against
   * the blob sweep, which claims a row under the same lock only when no file refers to it.
   * A file made while holding it is seen by every later claim. Clears the row's
   * unreferenced mark: the content has a file again.
   */
  async function lockLiveBlob(tx: Tx, checksum: string): Promise<void> {
    let q = knex('blobs').where({ checksum }).first('deleting_by', 'unreferenced_since');
    if (mysql) q = q.forUpdate();
    const r = await exec(tx, q);
    if (!r) throw new BlobGone(checksum, false);
    if (r.deleting_by != null) throw new BlobGone(checksum, true);
    if (r.unreferenced_since != null) await exec(tx, knex('blobs').where({ checksum }).update({ unreferenced_since: null }));
  }

  /** A transaction of its own, or a savepoint in the caller's: its writes are undone together. */
  async function atomically<T>(outer: Tx | undefined, body: (tx: Tx) => Promise<T>): Promise<T> {
    if (!outer) return sql.unit(body, { attempts: 1 });
    await outer.run('SAVEPOINT files_write');
    try {
      const result = await body(outer);
      await outer.run('RELEASE SAVEPOINT files_write');
      return result;
    } catch (err) {
      await outer.run('ROLLBACK TO SAVEPOINT files_write').catch(() => {});
      throw err;
    }
  }

  /** Runs `write`; a unique violation on (bot, reuseRequestId) answers the existing file instead. */
  async function idempotent(spec: FileSpec, write: () => Promise<FileRecord>, tx?: Tx): Promise<FileRecord> {
    try {
      return await write();
    } catch (err) {
      if (!isUniqueViolation(err) || !spec.reuseRequestId) throw err;
      const existing = await exec(on(tx), knex('files').where({ bot_id: spec.botId, reuse_request_id: spec.reuseRequestId }).first());
      if (!existing) throw err;
      return fileOf(existing);
    }
  }

  return {
    async fileOfBot(botId: string, fileId: string, tx?: Tx): Promise<FileRecord | undefined> {
      const r = await exec(on(tx), knex('files').where({ id: fileId, bot_id: botId }).first());
      return r ? fileOf(r) : undefined;
    },

    async fileByReuseId(botId: string, reuseRequestId: string, tx?: Tx): Promise<FileRecord | undefined> {
      const r = await exec(on(tx), knex('files').where({ bot_id: botId, reuse_request_id: reuseRequestId }).first());
      return r ? fileOf(r) : undefined;
    },

    async blobSize(checksum: string, tx?: Tx): Promise<number | undefined> {
      const r = await exec(on(tx), knex('blobs').where({ checksum }).first('size'));
      return r ? Number(r.size) : undefined;
    },

    async isBlobOwner(checksum: string, accountId: string, tx?: Tx): Promise<boolean> {
      return Boolean(await exec(on(tx), knex('blob_owners').where({ checksum, account_id: accountId }).first('checksum')));
    },

    /**
     * A new logical file on an existing blob (a trusted reuse hit or a passed challenge), with
     * its image size when it is an image. BlobGone when the content was removed, or is being
     * removed, by the blob sweep: no file is ever made on bytes that are going.
     */
    async addFile(id: string, spec: FileSpec, now: number, image?: ImageSize, outer?: Tx): Promise<FileRecord> {
      return idempotent(spec, () => atomically(outer, async (tx) => {
        await lockLiveBlob(tx, spec.checksum);
        return insertFile(tx, id, spec, now, image);
      }), outer);
    },

    async createUpload(u: Omit<UploadRecord, 'fileId'>, tx?: Tx): Promise<void> {
      await exec(on(tx), knex('uploads').insert({ id: u.id, ...specRow(u), created_at: u.createdAt, expires_at: u.expiresAt }));
    },

    /** An open (not completed, not expired) upload of this bot for the same file, to hand out again. */
    async openUpload(spec: FileSpec, now: number, tx?: Tx): Promise<UploadRecord | undefined> {
      const r = await exec(on(tx), knex('uploads')
        .where({ bot_id: spec.botId, checksum: spec.checksum, size: spec.size, file_name: spec.fileName, mime_type: spec.mimeType })
        .andWhere((q) => (spec.reuseRequestId ? q.where('reuse_request_id', spec.reuseRequestId) : q.whereNull('reuse_request_id')))
        .whereNull('file_id')
        .andWhere('expires_at', '>', now)
        .orderBy('created_at', 'desc')
        .first());
      return r ? { ...specOf(r), id: r.id, fileId: null, createdAt: Number(r.created_at), expiresAt: Number(r.expires_at) } : undefined;
    },

    /** The bot's newest upload with this checksum (and reuseRequestId, when given), completed or not. */
    async uploadFor(botId: string, checksum: string, reuseRequestId: string | null, tx?: Tx): Promise<UploadRecord | undefined> {
      let q = knex('uploads').where({ bot_id: botId, checksum });
      if (reuseRequestId) q = q.andWhere('reuse_request_id', reuseRequestId);
      const r = await exec(on(tx), q.orderByRaw('file_id is null desc').orderBy('created_at', 'desc').first());
      return r
        ? { ...specOf(r), id: r.id, fileId: r.file_id ?? null, createdAt: Number(r.created_at), expiresAt: Number(r.expires_at) }
        : undefined;
    },

    /**
     * Registers an uploaded file: the blob (once per content), the file, and the
     * upload marked completed, in one transaction. The verified bytes are at their
     * content address already (the caller copies them there first: no store call
     * inside the transaction). `image`: its size, when it is an image.
     */
    async completeUpload(upload: UploadRecord, fileId: string, now: number, image?: ImageSize, outer?: Tx): Promise<FileRecord> {
      return idempotent(upload, () => atomically(outer, async (tx) => {
        let q = knex('uploads').where({ id: upload.id }).first('file_id');
        if (mysql) q = q.forUpdate();
        const current = await exec(tx, q);
        if (current?.file_id) {
          const done = await exec(tx, knex('files').where({ id: current.file_id }).first());
          if (done) return fileOf(done);
        }
        // The content's row, created or locked either way (concurrent completions queue here):
        // BlobGone (deleting) while the blob sweep removes these bytes; the caller waits for it.
        await exec(tx, knex('blobs').insert({ checksum: upload.checksum, size: upload.size, created_at: now }).onConflict('checksum').merge(['checksum']));
        await lockLiveBlob(tx, upload.checksum);
        const file = await insertFile(tx, fileId, upload, now, image);
        await exec(tx, knex('uploads').where({ id: upload.id }).update({ file_id: fileId }));
        return file;
      }), outer);
    },

    /**
     * Hands out a challenge as one try of the account at this content: refused
     * (with the time a try frees up) when the account already had `maxTries` in the
     * last `windowMs`, answered or not. Else the try is counted, the account's
     * unanswered challenges for this content are spent (a new one replaces them),
     * and the challenge is stored — one transaction, the tries row locked, so every
     * instance counts the same.
     */
    async issueChallenge(
      c: Omit<ChallengeRecord, 'used'>, now: number, limit: TryLimit, outer?: Tx,
    ): Promise<{ ok: true } | { ok: false; retryAt: number }> {
      return inTransaction(db, outer, async (tx) => {
        const key = { account_id: c.accountId, checksum: c.checksum };
        if (mysql) {
          // Creates the row when missing and locks it either way: concurrent asks queue here.
          await exec(tx, knex('possession_tries').insert({ ...key, tried_at: '[]', last_tried_at: 0 })
            .onConflict(['account_id', 'checksum']).merge(['account_id']));
        }
        let q = knex('possession_tries').where(key).first('tried_at');
        if (mysql) q = q.forUpdate();
        const row = await exec(tx, q);
        const recent = (row ? (JSON.parse(row.tried_at) as number[]) : []).filter((t) => t > now - limit.windowMs);
        if (recent.length >= limit.maxTries) return { ok: false, retryAt: recent[recent.length - limit.maxTries]! + limit.windowMs };
        recent.push(now);
        await exec(tx, knex('possession_tries')
          .insert({ ...key, tried_at: JSON.stringify(recent.slice(-limit.maxTries)), last_tried_at: now })
          .onConflict(['account_id', 'checksum']).merge(['tried_at', 'last_tried_at']));
        await exec(tx, knex('possession_challenges').where({ ...key, used: false }).update({ used: true }));
        await exec(tx, knex('possession_challenges').insert({
          id: c.id, ...specRow(c), nonce: c.nonce, ranges: JSON.stringify(c.ranges), used: false, created_at: now, expires_at: c.expiresAt,
        }));
        return { ok: true as const };
      }, 5, isDeadlockOrLockWait);
    },

    /**
     * Takes a challenge of this bot for its one try: marks it used and returns it,
     * or says why it cannot be tried (USED: tried already, or replaced by a newer one).
     */
    async takeChallenge(botId: string, id: string, now: number, tx?: Tx): Promise<ChallengeRecord | 'NOT_FOUND' | 'USED' | 'EXPIRED'> {
      const r = await exec(on(tx), knex('possession_challenges').where({ id, bot_id: botId }).first());
      if (!r) return 'NOT_FOUND';
      if (Number(r.expires_at) <= now) return 'EXPIRED';
      const taken = await exec(on(tx), knex('possession_challenges').where({ id, bot_id: botId, used: false }).update({ used: true }));
      if (taken === 0) return 'USED';
      return { ...specOf(r), id: r.id, nonce: r.nonce, ranges: JSON.parse(r.ranges), used: true, expiresAt: Number(r.expires_at) };
    },

    /** Content no file has referred to since before `before` (claimed or not), oldest first. */
    async blobsUnreferencedBefore(before: number, limit: number, tx?: Tx): Promise<string[]> {
      return exec(on(tx), knex('blobs').whereNotNull('unreferenced_since').andWhere('unreferenced_since', '<', before)
        .orderBy('unreferenced_since').limit(limit).pluck('checksum'));
    },

    /**
     * The blob sweep's claim on content to remove, under the row's lock: true when it has
     * been unreferenced since before `before` and still no file refers to it (a locking read:
     * a file committed by a reuse or completion that held the lock first is seen), and no
     * other sweep holds a claim made since `staleBefore`. The row then says deleting
     * (`claimer`): from here on no file is made on it until it is gone. A file found clears
     * the unreferenced mark instead.
     */
    async claimUnreferencedBlob(checksum: string, before: number, now: number, claimer: string, staleBefore: number): Promise<boolean> {
      return sql.unit(async (tx) => {
        let q = knex('blobs').where({ checksum }).first('unreferenced_since', 'deleting_by', 'deleting_since');
        if (mysql) q = q.forUpdate();
        const r = await exec(tx, q);
        if (!r || r.unreferenced_since == null || Number(r.unreferenced_since) >= before) return false;
        if (r.deleting_by != null && Number(r.deleting_since) >= staleBefore) return false;
        let f = knex('files').where({ checksum }).first('id');
        if (mysql) f = f.forShare();
        if (await exec(tx, f)) {
          await exec(tx, knex('blobs').where({ checksum }).update({ unreferenced_since: null, deleting_by: null, deleting_since: null }));
          return false;
        }
        await exec(tx, knex('blobs').where({ checksum }).update({ deleting_by: claimer, deleting_since: now }));
        return true;
      });
    },

    /** After its bytes are deleted: the content's row (if still this claimer's) and its owners go. */
    async dropClaimedBlob(checksum: string, claimer: string): Promise<boolean> {
      return sql.unit(async (tx) => {
        const gone = await exec(tx, knex('blobs').where({ checksum, deleting_by: claimer }).delete());
        if (gone) await exec(tx, knex('blob_owners').where({ checksum }).delete());
        return gone > 0;
      });
    },

    /** Forgets expired uploads that never completed, expired challenges, and tries last made before `triesBefore`. */
    async purgeExpired(now: number, triesBefore: number, tx?: Tx): Promise<number> {
      const uploads = await exec(on(tx), knex('uploads').whereNull('file_id').andWhere('expires_at', '<', now).delete());
      const challenges = await exec(on(tx), knex('possession_challenges').andWhere('expires_at', '<', now).delete());
      const tries = await exec(on(tx), knex('possession_tries').where('last_tried_at', '<', triesBefore).delete());
      return uploads + challenges + tries;
    },
  };
}

export type FilesRepo = ReturnType<typeof createFilesRepo>;
