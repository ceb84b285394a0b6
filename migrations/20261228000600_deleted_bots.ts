import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * Deleted bots (issue 35): a deleted bot's row leaves `bots` at once (its token matches
 * nothing); this tombstone keeps what the purge and the username reservation need
 * until purge_at (deleted_at + DELETED_BOT_RETENTION), when the sweep removes the bot's
 * remaining rows from every table keyed by bot_id, and then the tombstone.
 * reserved: the bot had been approved, so its username stays its owner's until purge_at.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('deleted_bots', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.string('id', 32).primary();
    t.string('owner_id', 191).notNullable();
    t.string('username', 64).notNullable();
    t.boolean('reserved').notNullable();
    t.bigInteger('deleted_at').notNullable();
    t.bigInteger('purge_at').notNullable();
    t.index(['username'], 'deleted_bots_username');
    t.index(['purge_at'], 'deleted_bots_purge');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('deleted_bots');
}
