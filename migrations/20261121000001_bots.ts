import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/** Bots and their review state, profile and (hashed) token. Times are epoch milliseconds. */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('bots', (t) => {
    if (mysql(knex)) t.charset('utf8mb4'); // whatever the database's default, text is Unicode
    t.string('id', 32).primary();
    t.string('owner_id', 191).notNullable();
    t.string('name', 100).notNullable();
    t.string('username', 64).notNullable().unique('bots_username_unique');
    t.text('description');
    t.string('avatar', 2048);
    t.text('scopes').notNullable(); // JSON array of strings
    t.string('review_status', 16).notNullable();
    t.text('review_reason');
    t.string('status', 16).notNullable();
    t.string('delivery_mode', 16).notNullable().defaultTo('polling');
    t.string('short_description', 120);
    t.text('about');
    t.string('cover_url', 2048);
    t.text('links').notNullable(); // JSON array of {title, url}
    t.text('contact'); // JSON object or null
    t.boolean('supports_inline_queries').notNullable().defaultTo(false);
    t.string('friend_request_mode', 16);
    t.boolean('group_privacy').notNullable().defaultTo(true);
    t.boolean('can_join_groups').notNullable().defaultTo(true);
    t.text('command_menu').notNullable(); // JSON array of {command, description}
    t.string('token_hash', 64).unique('bots_token_hash_unique');
    t.string('token_prefix', 12);
    t.bigInteger('token_issued_at');
    t.text('one_time_token_enc'); // AES-GCM sealed plaintext token, until read or expired
    t.bigInteger('one_time_token_expires_at');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['owner_id', 'created_at'], 'bots_owner_created');
    t.index(['review_status', 'created_at'], 'bots_review_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('bots');
}
