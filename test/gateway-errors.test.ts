/**
 * The gateway as its own process (ROLE=gateway) in front of a gRPC core that
 * answers DEADLINE_EXCEEDED: HTTP 504 in each surface's error envelope, with a
 * message that says what happened (not "internal error").
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { ConsoleServiceService } from '../src/gen/botplatform/v1/console_service.js';
import { RuntimeServiceService } from '../src/gen/botplatform/v1/runtime_service.js';
import { createLogger } from '../src/logger.js';
import { call, TEST_JWT_SECRET } from './helpers/harness.js';
import { mintAccountJwt } from '../src/auth/account-jwt.js';

describe('a core call past its deadline', () => {
  let core: grpc.Server;
  let gateway: App;
  let dir: string;

  beforeAll(async () => {
    // Stands in for a core whose call ran out of time (a core never answers this itself).
    const late: grpc.handleUnaryCall<unknown, unknown> = (_call, callback) =>
      callback({ code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline exceeded after 30.001s' });
    core = new grpc.Server();
    core.addService(RuntimeServiceService, { getMe: late } as never);
    core.addService(ConsoleServiceService, { listMyBots: late } as never);
    const port = await new Promise<number>((resolve, reject) =>
      core.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-deadline-'));
    gateway = await startApp(loadConfig({
      ROLE: 'gateway', HOST: '127.0.0.1', PORT: '0', DATA_DIR: dir, CORE_GRPC_ADDRESS: `127.0.0.1:${port}`,
      AUTH_JWT_SECRET: TEST_JWT_SECRET, SECRET_KEY: Buffer.alloc(32, 7).toString('base64'), LOG_LEVEL: 'silent',
    }), createLogger('silent'));
  });
  afterAll(async () => {
    await gateway?.close();
    core?.forceShutdown();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers 504 DEADLINE_EXCEEDED in the console envelope', async () => {
    const jwt = await mintAccountJwt(TEST_JWT_SECRET, { sub: 'late' });
    const res = await call(gateway.httpUrl!, 'GET', '/api/v1/bots/my', { token: jwt });
    expect(res.status).toBe(504);
    expect(res.body).toEqual({ error: { code: 504, status: 'DEADLINE_EXCEEDED', message: 'the call did not finish in time; retry it' } });
  });

  it('answers 504 in the runtime envelope', async () => {
    const res = await call(gateway.httpUrl!, 'POST', '/api/v1/bots/getMe', { token: `sbot_${'a'.repeat(40)}` });
    expect(res.status).toBe(504);
    expect(res.body).toEqual({ ok: false, error_code: 504, description: 'Gateway Timeout: the call did not finish in time; retry it' });
  });
});
