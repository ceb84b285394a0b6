import type { Knex } from 'knex';
import { mysql } from './dialect.js';

/**
 * Account ids (a JWT's sub) compare byte for byte. Under MySQL's default utf8mb4
 * collations "alice", "ALICE" and "álice" are equal, so one account would see
 * another's bots and count as holding its files. SQLite already compares exactly.
 * (The binary collation still pads trailing spaces; the verifier refuses a sub
 * that ends in whitespace.)
 */
const COLUMNS: [table: string, column: string][] = [
  ['bots', 'owner_id'],
  ['blob_owners', 'account_id'],
  ['uploads', 'account_id'],
  ['possession_challenges', 'account_id'],
  ['possession_tries', 'account_id'],
];

export async function up(knex: Knex): Promise<void> {
  if (!mysql(knex)) return;
  for (const [table, column] of COLUMNS) {
    await knex.raw('ALTER TABLE ?? MODIFY ?? VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL', [table, column]);
  }
}

export async function down(knex: Knex): Promise<void> {
  if (!mysql(knex)) return;
  for (const [table, column] of COLUMNS) {
    await knex.raw('ALTER TABLE ?? MODIFY ?? VARCHAR(191) CHARACTER SET utf8mb4 NOT NULL', [table, column]);
  }
}
