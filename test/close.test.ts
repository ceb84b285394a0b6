/**
 * App.close() may be called more than once (a second signal, a test's clean-up):
 * every shutdown step runs once, in its order, whichever call comes first.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { expect, it } from 'vitest';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { startApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { createDb } from '../src/storage/db.js';
import { approvedBot, call, createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET, type Harness } from './helpers/harness.js';

it('close() twice at once, and once more after, shuts down once and in order: no step fails, nothing is lost', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-close-'));
  const db = await createTestDatabase(dir);
  const warnings: string[] = [];
  let closing = false;
  const sink = new Writable({
    write(chunk, _enc, cb) {
      const line = JSON.parse(String(chunk)) as { level: number; msg: string };
      if (closing && line.level >= 40) warnings.push(line.msg);
      cb();
    },
  });
  try {
    const config = loadConfig({
      DATA_DIR: dir, DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', AUTH_JWT_SECRET: TEST_JWT_SECRET,
      INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN, STATS_FLUSH_INTERVAL: '1m', ...kafkaEnv(),
    });
    const app = await startApp(config, createLogger('warn', sink));
    const h = { url: app.httpUrl, jwt: (sub: string, o: { admin?: boolean } = {}) => mintAccountJwt(TEST_JWT_SECRET, { sub, roles: o.admin ? ['admin'] : [] }) };
    const bot = await approvedBot(h as unknown as Harness, await h.jwt('closer'), 'close_twice');
    // A call whose usage statistic is only written by the flush on close.
    expect((await call(app.httpUrl!, 'POST', '/api/v1/bots/getMe', { token: bot.token })).status).toBe(200);

    closing = true;
    await Promise.all([app.close(), app.close()]);
    await app.close();
    await expect(fetch(`${app.httpUrl}/healthz`)).rejects.toThrow();
    expect(warnings).toEqual([]);
    const check = createDb(config.database);
    try {
      const rows = await check.query(check.knex('bot_stats').where({ bot_id: bot.id, name: 'call:getMe:OK' }).select('count'));
      expect(rows.map((r) => Number(r.count))).toEqual([1]);
    } finally {
      await check.destroy();
    }
  } finally {
    await db.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
