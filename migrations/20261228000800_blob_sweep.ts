import type { Knex } from 'knex';

/**
 * Content no file refers to any more (issue 35: a deleted bot's bytes stayed in the blob
 * store forever). unreferenced_since: when the purge of a deleted bot removed the last
 * file on the content (null while a file refers to it); the blob sweep removes the bytes
 * and the row UNREFERENCED_BLOB_RETENTION later, when under the row's lock still no file
 * refers to it. deleting_by / deleting_since: the sweep that claimed it, between the claim
 * and the row's removal (its bytes being deleted): a reuse or a completed upload of that
 * content waits for the removal instead of taking bytes about to go. Content without a
 * file when this runs (deleted bots purged before) starts its retention now.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('blobs', (t) => {
    t.bigInteger('unreferenced_since');
    t.string('deleting_by', 32);
    t.bigInteger('deleting_since');
    t.index(['unreferenced_since'], 'blobs_unreferenced');
  });
  await knex('blobs')
    .whereNotExists(knex('files').select(knex.raw('1')).whereRaw('files.checksum = blobs.checksum'))
    .update({ unreferenced_since: Date.now() });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('blobs', (t) => {
    t.dropIndex(['unreferenced_since'], 'blobs_unreferenced');
    t.dropColumn('deleting_since');
    t.dropColumn('deleting_by');
    t.dropColumn('unreferenced_since');
  });
}
