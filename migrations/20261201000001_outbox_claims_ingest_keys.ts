import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * outbox.claimed_until: the outbox relay claims a batch (a short transaction), publishes
 * it outside any transaction, then deletes it; a claim lapses at this time (epoch ms)
 * if its relay died meanwhile, and another relay publishes the batch again.
 *
 * ingest_keys: the idempotency keys of ingested updates, per bot, with the ids the
 * update got, so a producer retrying a batch gets the same ids and creates nothing new.
 * Kept for INGEST_IDEMPOTENCY_WINDOW (created_at, epoch ms).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('outbox', (t) => {
    t.bigInteger('claimed_until').notNullable().defaultTo(0);
  });
  await knex.schema.createTable('ingest_keys', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.string('bot_id', 32).notNullable();
    t.string('idempotency_key', 128).notNullable();
    t.bigInteger('update_id').notNullable();
    t.bigInteger('update_seq').notNullable();
    t.bigInteger('created_at').notNullable();
    t.primary(['bot_id', 'idempotency_key']);
    t.index(['created_at'], 'ingest_keys_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('ingest_keys');
  await knex.schema.alterTable('outbox', (t) => {
    t.dropColumn('claimed_until');
  });
}
