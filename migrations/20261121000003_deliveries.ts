import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * Webhook deliveries: one per update sent to a bot in webhook mode, with its state
 * (pending → succeeded | retrying → … → dead_letter), attempt count, last outcome,
 * when it is due, and a lease so that only one dispatcher attempts it at a time.
 * The body is kept here: the update itself leaves the queue once delivered.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('deliveries', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.string('id', 32).primary();
    t.string('bot_id', 32).notNullable();
    t.bigInteger('update_id').notNullable();
    t.bigInteger('update_seq').notNullable();
    t.string('status', 16).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('last_status_code');
    t.text('last_error');
    t.bigInteger('last_attempt_at');
    t.bigInteger('last_duration_ms');
    t.bigInteger('next_attempt_at').notNullable();
    t.bigInteger('lease_until').notNullable().defaultTo(0);
    t.string('leased_by', 100); // the dispatcher (or console retry) holding the lease
    t.text('payload').notNullable(); // the JSON body sent
    t.bigInteger('created_at').notNullable();
    t.unique(['bot_id', 'update_id'], { indexName: 'deliveries_bot_update' });
    t.index(['status', 'next_attempt_at'], 'deliveries_due');
    t.index(['bot_id', 'status', 'update_seq'], 'deliveries_bot_open');
    t.index(['bot_id', 'created_at'], 'deliveries_bot_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('deliveries');
}
