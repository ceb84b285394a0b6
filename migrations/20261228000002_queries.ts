import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * Callback and inline queries (issue 33): each one a bot was given, written by ingest in
 * the same unit as its update, so that answerCallbackQuery and answerInlineQuery can
 * check that a query is the bot's own, not answered yet, and recent enough
 * (QUERY_ANSWER_TIMEOUT). A callback query keeps the message whose button was pressed
 * (the answer's place on the outbound feed is that chat's); an inline query has no chat,
 * its answer goes to the user's partition. Rows are kept for INGEST_IDEMPOTENCY_WINDOW
 * (at least QUERY_ANSWER_TIMEOUT), so an id a messaging service gave is not taken twice.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('queries', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.string('bot_id', 32).notNullable();
    t.string('id', 64).notNullable();
    t.string('kind', 16).notNullable(); // callback_query | inline_query
    t.bigInteger('chat_id'); // callback_query: the message's chat
    t.bigInteger('message_id'); // callback_query: the message
    t.bigInteger('user_id').notNullable(); // who pressed or typed
    t.bigInteger('created_at').notNullable();
    t.bigInteger('answered_at');
    t.primary(['bot_id', 'id']);
    t.index(['created_at'], 'queries_created');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('queries');
}
