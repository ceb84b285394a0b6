/** `npm run migrate`: brings the database schema up to date; exits non-zero on any failure. */
import { ConfigError, loadConfig } from '../config.js';
import { createDb, migrateLatest } from '../storage/db.js';

let config;
try {
  config = loadConfig();
} catch (err) {
  process.stderr.write(`${err instanceof ConfigError ? err.message : String(err)}\n`);
  process.exit(2);
}
const db = createDb(config.database);
try {
  const applied = await migrateLatest(db);
  process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n');
} catch (err) {
  process.stderr.write(`migration failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
} finally {
  await db.destroy();
}
