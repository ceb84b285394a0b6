import type { Knex } from 'knex';

/**
 * Webhook secret rotation (issue 35): the secret before the last rotation
 * (previous_secret_sealed, sealed like secret_sealed) stays valid until
 * previous_secret_until (epoch ms); until then deliveries carry a signature under each.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhooks', (t) => {
    t.text('previous_secret_sealed');
    t.bigInteger('previous_secret_until');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhooks', (t) => {
    t.dropColumn('previous_secret_until');
    t.dropColumn('previous_secret_sealed');
  });
}
