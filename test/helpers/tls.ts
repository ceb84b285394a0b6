/** A throwaway CA and a server certificate for 127.0.0.1 / localhost (or `names`), made with the openssl CLI. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface TestPki {
  caFile: string;
  key: string;
  cert: string;
}

export function createTestPki(names = 'IP:127.0.0.1,DNS:localhost'): TestPki {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-pki-'));
  const f = (name: string) => path.join(dir, name);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.pem'),
    '-days', '2', '-subj', '/CN=botplatform test CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
  ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=localhost');
  fs.writeFileSync(f('ext.cnf'), `subjectAltName=${names}\nextendedKeyUsage=serverAuth\n`);
  ssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '2', '-extfile', f('ext.cnf'));
  return { caFile: f('ca.pem'), key: fs.readFileSync(f('server.key'), 'utf8'), cert: fs.readFileSync(f('server.pem'), 'utf8') };
}
