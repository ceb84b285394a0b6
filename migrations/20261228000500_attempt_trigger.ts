import type { Knex } from 'knex';

/**
 * delivery_attempts.trigger is a reserved word in MySQL/MariaDB, which the storage port's
 * statements do not quote: the column is attempt_trigger (automatic or manual).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('delivery_attempts', (t) => {
    t.renameColumn('trigger', 'attempt_trigger');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('delivery_attempts', (t) => {
    t.renameColumn('attempt_trigger', 'trigger');
  });
}
