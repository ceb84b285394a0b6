import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * Possession tries: per (account, content), when the account was last handed
 * challenges for content another account brought (JSON list of epoch ms, the most
 * recent few), so the cap holds across instances and restarts. Challenges get an
 * index by (account, content), to replace the unanswered one when a new one is made.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('possession_tries', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.string('account_id', 191).notNullable();
    t.string('checksum', 64).notNullable();
    t.text('tried_at').notNullable(); // JSON [epoch ms, ...], oldest first
    t.bigInteger('last_tried_at').notNullable();
    t.primary(['account_id', 'checksum']);
    t.index(['last_tried_at'], 'possession_tries_last');
  });
  await knex.schema.alterTable('possession_challenges', (t) => {
    t.index(['account_id', 'checksum'], 'possession_account_checksum');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('possession_challenges', (t) => {
    t.dropIndex(['account_id', 'checksum'], 'possession_account_checksum');
  });
  await knex.schema.dropTable('possession_tries');
}
