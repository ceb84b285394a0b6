import type { Knex } from 'knex';

/**
 * secret_header: the webhook was set through the Telegram-compatible surface, so its
 * deliveries also carry Telegram's `X-Telegram-Bot-Api-Secret-Token` (the secret
 * itself). Webhooks set through the native API get only the V2 signature, which never
 * reveals the secret.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhooks', (t) => {
    t.boolean('secret_header').notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhooks', (t) => {
    t.dropColumn('secret_header');
  });
}
