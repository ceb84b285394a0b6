import type { Knex } from 'knex';

/**
 * Webhook endpoint health and delivery rate:
 * - failing_since (epoch ms): the first failed attempt of the current run of failures
 *   (null after a success); once the run lasts WEBHOOK_DISABLE_AFTER the webhook is
 *   disabled: disabled_at (epoch ms) and disabled_reason are set, and deliveries stop
 *   until the webhook is set again or enabled.
 * - max_deliveries_per_second: the owner's limit on attempts per second (null: none).
 * The dispatcher's sweep leaves out disabled webhooks' bots (webhooks_disabled).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhooks', (t) => {
    t.integer('max_deliveries_per_second');
    t.bigInteger('failing_since');
    t.bigInteger('disabled_at');
    t.text('disabled_reason');
    t.index(['disabled_at'], 'webhooks_disabled');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhooks', (t) => {
    t.dropIndex(['disabled_at'], 'webhooks_disabled');
    t.dropColumn('disabled_reason');
    t.dropColumn('disabled_at');
    t.dropColumn('failing_since');
    t.dropColumn('max_deliveries_per_second');
  });
}
