/**
 * Kill -9 of a dispatcher during a stream of 10,000 deliveries, in the at-scale
 * setup (MariaDB + Kafka; the core and the dispatcher are separate processes):
 * the dispatcher is killed mid-stream and a new one started. Every update reaches the receiver at least once; duplicates
 * (attempts cut off after the receiver got them) are counted and reported.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { mintAccountJwt } from '../../src/auth/account-jwt.js';
import { AdminServiceClient } from '../../src/gen/botplatform/v1/admin_service.js';
import { ConsoleServiceClient } from '../../src/gen/botplatform/v1/console_service.js';
import { InternalServiceClient } from '../../src/gen/botplatform/v1/internal_service.js';
import { createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET } from '../helpers/harness.js';
import { freePort } from '../helpers/ports.js';
import { startReceiver } from '../helpers/receiver.js';
import { createTestPki } from '../helpers/tls.js';
import { serviceProcesses } from '../helpers/processes.js';

const { start } = serviceProcesses();

function unary<T>(client: grpc.Client, method: unknown, req: unknown, credential: string): Promise<T> {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${credential}`);
  const fn = method as (r: unknown, m: grpc.Metadata, cb: (e: Error | null, v: T) => void) => void;
  return new Promise((resolve, reject) => fn.call(client, req, md, (e, v) => (e ? reject(e) : resolve(v))));
}

describe('kill -9 of a dispatcher', () => {
  it('every one of 10,000 updates reaches the receiver at least once', async () => {
    const pki = createTestPki();
    const receiver = await startReceiver(pki);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-dispatch-'));
    const db = await createTestDatabase(dir);
    try {
      const common = {
        DATA_DIR: dir, DATABASE_URL: db.url, AUTH_JWT_SECRET: TEST_JWT_SECRET, INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN,
        SECRET_KEY: crypto.randomBytes(32).toString('base64'), LOG_LEVEL: 'silent', WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
        WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms', ...kafkaEnv(),
      };
      const grpcPort = String(await freePort());
      await start({ ...common, ROLE: 'core', PORT: String(await freePort()), GRPC_PORT: grpcPort });
      let dispatcher = await start({ ...common, ROLE: 'dispatcher', PORT: String(await freePort()) });

      const address = `127.0.0.1:${grpcPort}`;
      const creds = grpc.credentials.createInsecure();
      const consoleClient = new ConsoleServiceClient(address, creds);
      const admin = new AdminServiceClient(address, creds);
      const ingest = new InternalServiceClient(address, creds);
      const owner = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'dispatch-owner' });
      const reviewer = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] });
      const botIds: string[] = [];
      for (let i = 0; i < 10; i++) {
        const created = await unary<{ bot: { id: string } }>(consoleClient, consoleClient.createApplication, { name: `d${i}`, username: `dispatch_${i}`, scopes: [] }, owner);
        await unary(admin, admin.approveBot, { id: created.bot.id }, reviewer);
        await unary(consoleClient, consoleClient.setBotWebhook, {
          id: created.bot.id, url: receiver.url, secretToken: 's', allowedUpdates: [], allowedIps: [], dropPendingUpdates: false,
        }, owner);
        botIds.push(created.bot.id);
      }

      const TOTAL = 10_000;
      const message = { messageId: 0, date: 0, chat: { id: 3, type: 'private' }, from: { id: 3, isBot: false }, text: 'x' };
      for (let sent = 0; sent < TOTAL; sent += 500) {
        await unary(ingest, ingest.ingestUpdates, { updates: Array.from({ length: 500 }, (_, k) => ({ botId: botIds[(sent + k) % 10], message })) }, TEST_INTERNAL_TOKEN);
      }
      // Kill the dispatcher in the middle of the stream, then start another.
      await receiver.waitFor(TOTAL / 4, 120_000);
      dispatcher.kill('SIGKILL');
      const atKill = receiver.received.length;
      dispatcher = await start({ ...common, ROLE: 'dispatcher', PORT: String(await freePort()) });

      const ids = () => new Set(receiver.received.map((r) => String(r.headers['x-service-update-id'])));
      const end = Date.now() + 150_000;
      while (ids().size < TOTAL && Date.now() < end) await new Promise((r) => setTimeout(r, 200));
      const unique = ids().size;
      const duplicates = receiver.received.length - unique;
      console.log(`dispatcher kill -9: ${TOTAL} updates, killed after ${atKill} receipts; delivered ${unique} distinct, ${duplicates} duplicates`);
      expect(unique).toBe(TOTAL);
      dispatcher.kill('SIGTERM');
      consoleClient.close();
      admin.close();
      ingest.close();
    } finally {
      await receiver.close();
      await db.drop();
    }
  }, 300_000);
});
