import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * Updates and how they travel: the per-bot sequence and update-kind filter on
 * bots, webhook configuration, the updates themselves, the platform-wide id
 * counter, and the outbox from which committed updates are published to the bus.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('bots', (t) => {
    t.bigInteger('last_update_seq').notNullable().defaultTo(0);
    t.text('allowed_updates'); // JSON array of kinds; null means all
  });

  await knex.schema.createTable('webhooks', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.string('bot_id', 32).primary().references('id').inTable('bots').onDelete('CASCADE');
    t.string('url', 2048).notNullable();
    t.text('secret_sealed').notNullable(); // AES-GCM sealed secret_token
    t.text('allowed_ips').notNullable(); // JSON array of IPs/CIDRs
    t.integer('max_connections').notNullable();
    t.bigInteger('last_error_date');
    t.text('last_error_message');
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
  });

  await knex.schema.createTable('updates', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.bigInteger('update_id').primary();
    t.string('bot_id', 32).notNullable();
    t.bigInteger('update_seq').notNullable();
    t.string('kind', 32).notNullable();
    t.text('payload').notNullable(); // the message as it is on the JSON wire
    t.bigInteger('created_at').notNullable();
    t.unique(['bot_id', 'update_seq'], { indexName: 'updates_bot_seq' });
    t.index(['created_at'], 'updates_created');
  });

  await knex.schema.createTable('id_counters', (t) => {
    t.string('name', 64).primary();
    t.bigInteger('value').notNullable();
  });
  await knex('id_counters').insert({ name: 'update_id', value: 0 });

  await knex.schema.createTable('outbox', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.bigIncrements('id').primary();
    t.string('topic', 100).notNullable();
    t.string('msg_key', 191).notNullable();
    t.text('payload').notNullable();
    t.bigInteger('created_at').notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('outbox');
  await knex.schema.dropTable('id_counters');
  await knex.schema.dropTable('updates');
  await knex.schema.dropTable('webhooks');
  await knex.schema.alterTable('bots', (t) => {
    t.dropColumn('allowed_updates');
    t.dropColumn('last_update_seq');
  });
}
