/**
 * A gateway in front of two cores: while one core is killed and the other keeps
 * serving, the gateway's /healthz stays 200 (it asks each core, not whichever one
 * the round robin picks next) and calls keep succeeding.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { mintAccountJwt } from '../../src/auth/account-jwt.js';
import { client, createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET } from '../helpers/harness.js';
import { freePort } from '../helpers/ports.js';
import { serviceProcesses } from '../helpers/processes.js';

const { start } = serviceProcesses();

describe('gateway health with two cores', () => {
  it('stays healthy while one of two cores is down', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-gwhealth-'));
    const db = await createTestDatabase(dir);
    try {
      const common = {
        DATA_DIR: dir, DATABASE_URL: db.url, AUTH_JWT_SECRET: TEST_JWT_SECRET, INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN,
        SECRET_KEY: crypto.randomBytes(32).toString('base64'), LOG_LEVEL: 'silent', ...kafkaEnv(),
      };
      const [grpcA, grpcB] = [await freePort(), await freePort()];
      const coreA = await start({ ...common, ROLE: 'core', PORT: String(await freePort()), GRPC_PORT: String(grpcA) });
      await start({ ...common, ROLE: 'core', PORT: String(await freePort()), GRPC_PORT: String(grpcB) });
      const port = String(await freePort());
      await start({ ...common, ROLE: 'gateway', PORT: port, CORE_GRPC_ADDRESS: `127.0.0.1:${grpcA},127.0.0.1:${grpcB}` });
      const base = `http://127.0.0.1:${port}`;
      const jwt = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'gw-health' });

      coreA.kill('SIGKILL');
      const statuses: number[] = [];
      const end = Date.now() + 3000;
      while (Date.now() < end) {
        statuses.push((await fetch(`${base}/healthz`)).status);
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(statuses.length).toBeGreaterThan(20);
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      // Calls are served by the core that is left (round robin drops the dead one).
      expect((await client(base, jwt).get('/api/v1/bots/my')).status).toBe(200);
    } finally {
      await db.drop();
    }
  }, 90_000);
});
