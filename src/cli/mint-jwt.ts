/**
 * `npm run mint-jwt -- --sub alice [--admin] [--ttl 7d]`: prints an account JWT
 * signed with AUTH_JWT_SECRET or, on the embedded default, the local secret in DATA_DIR.
 */
import { parseArgs } from 'node:util';
import { mintAccountJwt } from '../auth/account-jwt.js';
import { jwtKeySource } from '../auth/jwt-key-source.js';
import { loadConfig } from '../config.js';

const { values } = parseArgs({
  options: { sub: { type: 'string' }, admin: { type: 'boolean', default: false }, ttl: { type: 'string', default: '30d' } },
});
if (!values.sub) {
  process.stderr.write('usage: npm run mint-jwt -- --sub <account id> [--admin] [--ttl 30d]\n');
  process.exit(2);
}
const config = loadConfig();
const { source } = jwtKeySource(config);
if (source.kind !== 'secret') {
  process.stderr.write('mint-jwt signs with an HS256 secret; with a public key or JWKS, your identity provider issues tokens\n');
  process.exit(2);
}
const jwt = await mintAccountJwt(source.secret, {
  sub: values.sub,
  roles: values.admin ? ['admin'] : [],
  expiresIn: values.ttl,
  issuer: config.auth.issuer,
  audience: config.auth.audience,
});
process.stdout.write(`${jwt}\n`);
