import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * The delivery log (issue 35): one row per webhook attempt, with the request as sent
 * (URL without credentials, headers with the signature and never the secret; the body
 * only when it differs from the delivery's payload) and the answer (status, headers,
 * the first 4 KiB of the body), the error and the duration. Rows older than
 * DELIVERY_LOG_RETENTION are deleted by the core's sweep (attempts_at).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('delivery_attempts', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.string('id', 32).primary();
    t.string('bot_id', 32).notNullable();
    t.string('delivery_id', 32).notNullable();
    t.bigInteger('update_id').notNullable();
    t.bigInteger('attempted_at').notNullable();
    t.string('trigger', 16).notNullable();
    t.boolean('ok').notNullable();
    t.bigInteger('duration_ms').notNullable();
    t.text('error');
    t.text('url').notNullable();
    t.text('request_headers').notNullable(); // JSON object
    t.text('request_body'); // null: the delivery's payload
    t.integer('status_code');
    t.text('response_headers'); // JSON object; null without an answer
    t.text('response_body');
    t.boolean('response_truncated').notNullable().defaultTo(false);
    t.index(['bot_id', 'delivery_id', 'attempted_at'], 'attempts_of_delivery');
    t.index(['attempted_at'], 'attempts_at');
  });
  // The sweep finds closed deliveries past the retention through deliveries_due (status, next_attempt_at).
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('delivery_attempts');
}
