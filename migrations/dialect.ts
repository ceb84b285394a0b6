import type { Knex } from 'knex';

/** Whether the migration runs on MySQL/MariaDB (where tables get an explicit utf8mb4 charset). */
export const mysql = (knex: Knex) => knex.client.config.client === 'mysql2';
