/**
 * The embedded default's data is for the service's user alone (issue 31): the data
 * directory and the blob directories are created 0700, the SQLite database (its -wal
 * and -shm files too), the blobs and the local secrets 0600, whatever the umask lets
 * through (this process's is usually 022, which left them 0755 and 0644).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { mintAccountJwt } from '../src/auth/account-jwt.js';
import { startApp, type App } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { call, client } from './helpers/harness.js';

let app: App | undefined;
const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-modes-'));
afterAll(async () => {
  await app?.close();
  fs.rmSync(parent, { recursive: true, force: true });
});

const modeOf = (p: string) => (fs.statSync(p).mode & 0o777).toString(8);

it('a fresh DATA_DIR is 0700, and everything the service writes in it is 0600 (directories 0700)', async () => {
  const dataDir = path.join(parent, 'data');
  // The embedded default: no DATABASE_URL, no AUTH_* (a local signing secret is created), no SECRET_KEY.
  app = await startApp(loadConfig({ ROLE: 'all', HOST: '127.0.0.1', PORT: '0', GRPC_PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'silent' }), createLogger('silent'));
  const base = app.httpUrl!;
  const dev = await mintAccountJwt(app.localJwtSecret!, { sub: 'modes-dev' });
  const admin = await mintAccountJwt(app.localJwtSecret!, { sub: 'modes-admin', roles: ['admin'] });
  const created = await client(base, dev).post('/api/v1/bots/applications', { name: 'Modes', username: 'modes_bot' });
  expect((await client(base, admin).post(`/api/v1/admin/bots/${created.body.id}/approve`)).status).toBe(200);
  const token = (await client(base, dev).get(`/api/v1/bots/my/${created.body.id}`)).body.one_time_token as string;

  // A file, so that blobs are written.
  const bytes = crypto.randomBytes(2000);
  const checksum = crypto.createHash('sha256').update(bytes).digest('hex');
  const creds = await call(base, 'POST', '/api/v1/bots/files/upload-credentials', {
    token, body: { fileName: 'a.bin', fileSize: bytes.length, fileType: 'application/octet-stream', checksum, reuseRequestId: 'm1' },
  });
  expect((await fetch(creds.body.result.uploadUrl, { method: 'PUT', body: bytes })).status).toBe(200);
  expect((await call(base, 'POST', '/api/v1/bots/files/complete', { token, body: { checksum, reuseRequestId: 'm1' } })).status).toBe(200);

  const entries: string[] = [];
  const walk = (dir: string) => {
    for (const name of fs.readdirSync(dir)) {
      const p = path.join(dir, name);
      entries.push(p);
      if (fs.statSync(p).isDirectory()) walk(p);
    }
  };
  walk(dataDir);
  const rel = (p: string) => path.relative(dataDir, p);
  const names = entries.map(rel);
  expect(names).toEqual(expect.arrayContaining([
    'botplatform.sqlite', 'botplatform.sqlite-wal', 'botplatform.sqlite-shm', 'jwt-secret', 'secret-key', 'internal-api-token',
    'files', path.join('files', 'blobs'), path.join('files', 'staging'), path.join('files', 'tmp'),
  ]));
  expect(names.some((n) => n.startsWith(path.join('files', 'blobs') + path.sep))).toBe(true);

  expect(modeOf(dataDir)).toBe('700');
  for (const p of entries) expect(`${rel(p)} ${modeOf(p)}`).toBe(`${rel(p)} ${fs.statSync(p).isDirectory() ? '700' : '600'}`);
});
