/**
 * A scheduled retry survives the service: the first attempt fails, the process is
 * killed (-9) before the retry is due, and the restarted service makes the retry at
 * its scheduled time, not before, to a real HTTPS receiver.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { client, createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET } from './helpers/harness.js';
import { freePort } from './helpers/ports.js';
import { startReceiver } from './helpers/receiver.js';
import { serviceProcesses } from './helpers/processes.js';
import { createTestPki } from './helpers/tls.js';
import { until } from './helpers/until.js';

const { start } = serviceProcesses();

describe('a retry scheduled before a crash', () => {
  it('is made by the restarted service when it falls due', async () => {
    const pki = createTestPki();
    const receiver = await startReceiver(pki);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-retry-restart-'));
    const db = await createTestDatabase(dir);
    const delay = '15s'; // long enough to restart before it falls due, on a loaded 2-core machine too (8 s was not, once, with three test files at a time)
    try {
      const env = {
        DATA_DIR: dir, DATABASE_URL: db.url, AUTH_JWT_SECRET: TEST_JWT_SECRET, INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN,
        SECRET_KEY: crypto.randomBytes(32).toString('base64'), LOG_LEVEL: 'silent',
        WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_RETRY_SCHEDULE: [delay, delay, delay, delay].join(','),
        PORT: String(await freePort()), GRPC_PORT: String(await freePort()), ...kafkaEnv(),
      };
      let server = await start(env);
      const base = `http://127.0.0.1:${env.PORT}`;
      const owner = client(base, await mintAccountJwt(TEST_JWT_SECRET, { sub: 'restart-owner' }));
      const created = await owner.post('/api/v1/bots/applications', { name: 'Restart', username: 'restart_hook_bot' });
      const reviewer = client(base, await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] }));
      expect((await reviewer.post(`/api/v1/admin/bots/${created.body.id}/approve`)).status).toBe(200);
      expect((await owner.post(`/api/v1/bots/my/${created.body.id}/webhook`, { url: receiver.url, secret_token: 'restart-secret' })).status).toBe(200);

      receiver.always({ status: 500 });
      const update = await owner.post(`/api/v1/bots/my/${created.body.id}/test-updates`, { text: 'outlive the crash' });
      expect(update.status).toBe(201);
      await receiver.waitFor(1);
      const listing = () => owner.get(`/api/v1/bots/my/${created.body.id}/deliveries`);
      const listed = await until(listing, (l) => l.body.items[0]?.attempts === 1, 5000);
      expect(listed.body.items[0]).toMatchObject({ update_id: update.body.update_id, status: 'retrying', attempts: 1, last_status_code: 500 });
      const due = Date.parse(listed.body.items[0].next_attempt_at);
      expect(due).toBeGreaterThan(Date.now() + 1000);

      server.kill('SIGKILL');
      await new Promise((r) => server.once('exit', r));
      receiver.always({ status: 200 });
      server = await start(env);
      expect(Date.now()).toBeLessThan(due); // restarted before the retry fell due

      await receiver.waitFor(2, 40_000);
      expect(receiver.received[1]!.at).toBeGreaterThanOrEqual(due - 50);
      expect(receiver.received.map((r) => r.headers['x-service-update-id'])).toEqual([String(update.body.update_id), String(update.body.update_id)]);
      const after = await until(listing, (l) => l.body.items[0]?.status === 'succeeded', 5000);
      expect(after.body.items[0]).toMatchObject({ status: 'succeeded', attempts: 2, last_status_code: 200 });
      expect(receiver.received).toHaveLength(2);
      server.kill('SIGTERM');
    } finally {
      await receiver.close();
      await db.drop();
    }
  }, 90_000);
});
