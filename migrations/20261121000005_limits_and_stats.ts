import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * Rate-limit and quota counters, and per-bot usage statistics, in the database so
 * that they survive a restart and are shared by every core instance.
 *
 * rate_counters: one fixed-window counter per key ("rate:<bot>", "chat:<bot>:<chat>",
 * "quota:<bot>"): the window it counts and the calls admitted in it.
 *
 * bot_stats: per bot and minute, named counters ("call:<method>:<http status>",
 * "webhook:ok", "webhook:failed", "updates:delivered", ...) with a count, a sum and
 * a maximum of milliseconds (webhook latency). Written in batches by each process.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('rate_counters', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.string('counter_key', 160).primary();
    t.bigInteger('window_start').notNullable();
    t.bigInteger('window_end').notNullable();
    t.integer('count').notNullable();
    t.index(['window_end'], 'rate_counters_end');
  });
  await knex.schema.createTable('bot_stats', (t) => {
    if (mysql(knex)) t.charset('utf8mb4');
    t.string('bot_id', 32).notNullable();
    t.bigInteger('minute').notNullable(); // epoch ms of the minute's start
    t.string('name', 120).notNullable();
    t.bigInteger('count').notNullable().defaultTo(0);
    t.bigInteger('sum_ms').notNullable().defaultTo(0);
    t.bigInteger('max_ms').notNullable().defaultTo(0);
    t.primary(['bot_id', 'minute', 'name']);
    t.index(['minute'], 'bot_stats_minute');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('bot_stats');
  await knex.schema.dropTable('rate_counters');
}
