/**
 * Secrets the embedded default creates for itself in DATA_DIR when none is
 * configured: the JWT signing secret and the key that seals secrets at rest.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

/** Reads DATA_DIR/<name>, creating it (0600, 32 random bytes, base64) on first use. */
export function loadOrCreateSecret(dataDir: string, name: string): string {
  const file = path.join(dataDir, name);
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const value = crypto.randomBytes(32).toString('base64');
  try {
    fs.writeFileSync(file, value + '\n', { mode: 0o600, flag: 'wx' });
    return value;
  } catch (err) {
    // Another process of this installation created it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8').trim();
    throw err;
  }
}

export const LOCAL_JWT_SECRET_FILE = 'jwt-secret';
export const LOCAL_SECRET_KEY_FILE = 'secret-key';
export const LOCAL_INTERNAL_TOKEN_FILE = 'internal-api-token';
