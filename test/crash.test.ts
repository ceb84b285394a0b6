/**
 * Kill -9 of the service in the middle of a stream of ingests: after a restart,
 * every update whose ingest was acknowledged is readable by getUpdates, once, in
 * update_seq order.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { IngestUpdatesRequest, InternalServiceClient } from '../src/gen/botplatform/v1/internal_service.js';
import { call, client, createTestDatabase, kafkaEnv, TEST_INTERNAL_TOKEN, TEST_JWT_SECRET } from './helpers/harness.js';
import { freePort } from './helpers/ports.js';
import { serviceProcesses } from './helpers/processes.js';

const { start } = serviceProcesses();

describe('kill -9 during ingest', () => {
  it('loses no acknowledged update and duplicates none', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-crash-'));
    const db = await createTestDatabase(dir);
    try {
      const env = {
        DATA_DIR: dir, DATABASE_URL: db.url, AUTH_JWT_SECRET: TEST_JWT_SECRET, INTERNAL_API_TOKEN: TEST_INTERNAL_TOKEN,
        LOG_LEVEL: 'silent', PORT: String(await freePort()), GRPC_PORT: String(await freePort()), ...kafkaEnv(),
      };
      let server = await start(env);
      const base = `http://127.0.0.1:${env.PORT}`;
      const jwt = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'crash-owner' });
      const created = await client(base, jwt).post('/api/v1/bots/applications', { name: 'Crash', username: 'crash_bot' });
      await client(base, await mintAccountJwt(TEST_JWT_SECRET, { sub: 'r', roles: ['admin'] })).post(`/api/v1/admin/bots/${created.body.id}/approve`);
      const token = (await client(base, jwt).get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token;

      const ingestClient = new InternalServiceClient(`127.0.0.1:${env.GRPC_PORT}`, grpc.credentials.createInsecure());
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${TEST_INTERNAL_TOKEN}`);
      const acked: string[] = [];
      let n = 0;
      let stop = false;
      let running = 8;
      let firstError: Error | undefined;
      // Each worker ingests until a call fails (the kill ends them all). The deadline is
      // generous: a busy machine must not end a worker before the kill.
      const worker = async () => {
        try {
          while (!stop) {
            const text = `m${n++}`;
            const ok = await new Promise<boolean>((resolve) =>
              ingestClient.ingestUpdates(IngestUpdatesRequest.fromPartial({
                updates: [{ botId: created.body.id, message: { messageId: 0, date: 0, chat: { id: 7, type: 'private' }, from: { id: 7, isBot: false }, text } }],
              }), md, { deadline: Date.now() + 15_000 }, (err) => {
                if (err) firstError ??= err;
                resolve(!err);
              }),
            );
            if (ok) acked.push(text);
            else return;
          }
        } finally {
          running--;
        }
      };
      const workers = Array.from({ length: running }, worker);
      while (acked.length < 300) {
        if (running === 0) throw new Error(`every ingest failed before the kill, after ${acked.length} acknowledged: ${firstError?.message}`);
        await new Promise((r) => setTimeout(r, 5));
      }
      server.kill('SIGKILL');
      stop = true;
      await Promise.all(workers);
      ingestClient.close();
      expect(acked.length).toBeGreaterThanOrEqual(300);

      server = await start(env);
      const seen: { seq: number; text: string }[] = [];
      let offset = 0;
      for (;;) {
        const res = await call(base, 'POST', '/api/v1/bots/getUpdates', { token, body: { offset, limit: 100 } });
        expect(res.status).toBe(200);
        if (res.body.result.length === 0) break;
        for (const u of res.body.result) seen.push({ seq: u.update_seq, text: u.message.text });
        offset = seen[seen.length - 1]!.seq + 1;
      }
      const texts = seen.map((s) => s.text);
      expect(new Set(texts).size).toBe(texts.length); // once each
      for (const t of acked) expect(texts).toContain(t); // nothing acknowledged is lost
      const seqs = seen.map((s) => s.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b)); // in update_seq order
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1)); // no gaps
      server.kill('SIGTERM');
    } finally {
      await db.drop();
    }
  }, 120_000);
});
