/** Where account JWTs are verified from (and, for `mint-jwt`, signed with). */
import type { Config } from '../config.js';
import type { JwtKeySource } from './account-jwt.js';
import { LOCAL_JWT_SECRET_FILE, loadOrCreateSecret } from './local-secrets.js';

/** The JWT key source: configured, or the embedded default's local secret. */
export function jwtKeySource(config: Config): { source: JwtKeySource; localSecret?: string } {
  if (config.auth.kind !== 'local') return { source: config.auth };
  const secret = loadOrCreateSecret(config.dataDir, LOCAL_JWT_SECRET_FILE);
  return { source: { kind: 'secret', secret }, localSecret: secret };
}
