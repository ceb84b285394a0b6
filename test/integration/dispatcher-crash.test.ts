/**
 * Kill -9 of a dispatcher during a stream of 10,000 deliveries, in the at-scale
 * setup (MariaDB + Kafka; the core and the dispatcher are separate processes):
 * the dispatcher is killed mid-stream and a new one started. Every update reaches the receiver at least once; duplicates
 * (attempts cut off after the receiver got them) are counted and reported. With two dispatchers running, the survivor
 * takes over the killed one's leases within 5 s, and duplicates stay within what the killed one had in flight.
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
import { IngestUpdatesRequest, InternalServiceClient } from '../../src/gen/botplatform/v1/internal_service.js';
import { createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET } from '../helpers/harness.js';
import { freePort } from '../helpers/ports.js';
import { until } from '../helpers/until.js';
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
        await unary(ingest, ingest.ingestUpdates, IngestUpdatesRequest.fromPartial({ updates: Array.from({ length: 500 }, (_, k) => ({ botId: botIds[(sent + k) % 10], message })) }), TEST_INTERNAL_TOKEN);
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

  it('a surviving dispatcher takes over the killed one\'s leases within 5 s, with duplicates bounded by its window', async () => {
    const pki = createTestPki();
    const receiver = await startReceiver(pki);
    receiver.always({ status: 200, delayMs: 200 }); // answers take a while: the killed dispatcher has attempts in flight
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-takeover-'));
    const db = await createTestDatabase(dir);
    try {
      const common = {
        DATA_DIR: dir, DATABASE_URL: db.url, AUTH_JWT_SECRET: TEST_JWT_SECRET, INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN,
        SECRET_KEY: crypto.randomBytes(32).toString('base64'), LOG_LEVEL: 'silent', WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8',
        WEBHOOK_CA_FILE: pki.caFile, WEBHOOK_TIMEOUT_MS: '3000', ...kafkaEnv(),
      };
      const grpcPort = String(await freePort());
      await start({ ...common, ROLE: 'core', PORT: String(await freePort()), GRPC_PORT: grpcPort });
      const doomed = await start({ ...common, ROLE: 'dispatcher', PORT: String(await freePort()) });
      const survivor = await start({ ...common, ROLE: 'dispatcher', PORT: String(await freePort()) });

      const address = `127.0.0.1:${grpcPort}`;
      const creds = grpc.credentials.createInsecure();
      const consoleClient = new ConsoleServiceClient(address, creds);
      const admin = new AdminServiceClient(address, creds);
      const ingest = new InternalServiceClient(address, creds);
      const owner = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'takeover-owner' });
      const reviewer = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] });
      const BOTS = 10;
      const MAX_CONNECTIONS = 10;
      const botIds: string[] = [];
      for (let i = 0; i < BOTS; i++) {
        const created = await unary<{ bot: { id: string } }>(consoleClient, consoleClient.createApplication, { name: `t${i}`, username: `takeover_${i}`, scopes: [] }, owner);
        await unary(admin, admin.approveBot, { id: created.bot.id }, reviewer);
        await unary(consoleClient, consoleClient.setBotWebhook, {
          id: created.bot.id, url: receiver.url, secretToken: 's', allowedUpdates: [], allowedIps: [], dropPendingUpdates: false,
          maxConnections: MAX_CONNECTIONS,
        }, owner);
        botIds.push(created.bot.id);
      }

      const TOTAL = 4000;
      const message = { messageId: 0, date: 0, chat: { id: 3, type: 'private' }, from: { id: 3, isBot: false }, text: 'x' };
      for (let sent = 0; sent < TOTAL; sent += 500) {
        await unary(ingest, ingest.ingestUpdates, IngestUpdatesRequest.fromPartial({ updates: Array.from({ length: 500 }, (_, k) => ({ botId: botIds[(sent + k) % BOTS], message })) }), TEST_INTERNAL_TOKEN);
      }
      await receiver.waitFor(TOTAL / 4, 120_000);
      const before = receiver.abandoned.length;
      doomed.kill('SIGKILL');
      const killedAt = Date.now();
      await new Promise((r) => doomed.once('exit', r));
      // Its sockets are closed by now; the receiver (busy in this process) may take a moment to see it.
      await until(async () => receiver.abandoned.length, (n) => n > before, 3000);
      // Requests the killed dispatcher had sent and not had answered: leased, then abandoned.
      const abandoned = receiver.abandoned.slice(before);

      const id = (r: { headers: Record<string, unknown> }) => String(r.headers['x-service-update-id']);
      const ids = () => new Set(receiver.received.map(id));
      // When each abandoned update was sent again (Infinity: not yet).
      const again = () => abandoned.map((a) => receiver.received.find((r) => r !== a && r.at >= a.at && id(r) === id(a))?.at ?? Infinity);
      const end = Date.now() + 120_000;
      while ((ids().size < TOTAL || again().some((t) => t === Infinity)) && Date.now() < end && Date.now() < killedAt + 30_000) {
        await new Promise((r) => setTimeout(r, 200));
      }
      await new Promise((r) => setTimeout(r, 1000)); // any other second attempt would have arrived by now
      const unique = ids().size;
      const duplicates = receiver.received.length - unique;
      const gaps = again().map((t) => t - killedAt);
      const worst = Math.max(...gaps);
      console.log(`dispatcher kill -9 with a survivor: ${TOTAL} updates, ${abandoned.length} attempts abandoned in flight, ` +
        `taken over after ${Math.min(...gaps)}..${worst} ms; ${unique} distinct delivered, ${duplicates} duplicates ` +
        `(bound ${BOTS * MAX_CONNECTIONS}), at most ${receiver.concurrency.max} requests at once`);
      expect(unique).toBe(TOTAL);
      expect(abandoned.length).toBeGreaterThan(0);
      expect(worst).toBeLessThan(5000);
      // Only what the killed dispatcher had in flight (at most max_connections per bot) can come twice.
      expect(duplicates).toBeLessThanOrEqual(BOTS * MAX_CONNECTIONS);
      survivor.kill('SIGTERM');
      consoleClient.close();
      admin.close();
      ingest.close();
    } finally {
      await receiver.close();
      await db.drop();
    }
  }, 300_000);
});
