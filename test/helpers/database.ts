/** Throwaway databases on a MySQL/MariaDB server, for tests and benchmarks. */
import crypto from 'node:crypto';
import knexFactory from 'knex';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A fresh schema on a MySQL/MariaDB server (`server`: its URL), named `<prefix>_<random>`. */
export async function createMysqlDatabase(server: string, prefix: string): Promise<TestDatabase & { name: string }> {
  const name = `${prefix}_${crypto.randomBytes(6).toString('hex')}`;
  const admin = knexFactory({ client: 'mysql2', connection: server, pool: { min: 0, max: 1 } });
  await admin.raw(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await admin.destroy();
  const url = new URL(server);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async drop() {
      const k = knexFactory({ client: 'mysql2', connection: server, pool: { min: 0, max: 1 } });
      await k.raw(`DROP DATABASE IF EXISTS \`${name}\``);
      await k.destroy();
    },
  };
}
