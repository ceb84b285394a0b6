/**
 * The SSRF guard: a table of loopback, private, link-local, CGNAT, multicast and
 * reserved targets in many spellings (decimal, octal, hex, short IPv4 forms, IPv6
 * transition forms), names that resolve to them, and the same refusal at connect
 * time in the real webhook client, before any byte reaches the target.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookClient } from '../src/dispatch/webhook-client.js';
import { checkTarget, parseCidrs } from '../src/net/ssrf.js';
import { createTestPki, type TestPki } from './helpers/tls.js';

/** Names under .test are resolved by this table (no DNS here); localhost goes to the system resolver. */
const NAMES: Record<string, string[]> = {
  'internal.test': ['10.1.2.3'],
  'metadata.test': ['169.254.169.254'],
  'mixed.test': ['93.184.216.34', '192.168.1.1'],
  'v6-private.test': ['fd12:3456::1'],
  'public.test': ['93.184.216.34'],
};
const lookup = async (host: string) => {
  if (NAMES[host]) return NAMES[host]!;
  const { systemLookup } = await import('../src/net/ssrf.js');
  return systemLookup(host);
};

const REFUSED = [
  'https://127.0.0.1/', 'https://127.1/', 'https://2130706433/', 'https://0x7f000001/', 'https://017700000001/',
  'https://0x7f.0.0.1/', 'https://0177.0.0.1/', 'https://127.255.255.254/', 'https://0.0.0.0/', 'https://0/',
  'https://10.0.0.1/', 'https://172.16.0.1/', 'https://172.31.255.255/', 'https://192.168.0.1/', 'https://169.254.169.254/',
  'https://100.64.0.1/', 'https://224.0.0.1/', 'https://255.255.255.255/', 'https://240.0.0.1/', 'https://198.18.0.1/',
  'https://[::1]/', 'https://[::]/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/', 'https://[::ffff:10.0.0.1]/',
  'https://[fe80::1]/', 'https://[fc00::1]/', 'https://[fd00::abcd]/', 'https://[ff02::1]/', 'https://[64:ff9b::7f00:1]/',
  'https://[2002:7f00:1::]/', 'https://[2001::1]/', 'https://localhost/', 'https://internal.test/', 'https://metadata.test/',
  'https://mixed.test/', 'https://v6-private.test/', 'https://no-such-name.invalid/',
];

describe('SSRF guard', () => {
  it.each(REFUSED)('refuses %s', async (url) => {
    const { refusal } = await checkTarget(new URL(url), [], lookup);
    expect(refusal).not.toBeNull();
  });

  it('accepts public addresses and names, and ranges on the allow-list', async () => {
    expect((await checkTarget(new URL('https://93.184.216.34/'), [], lookup)).refusal).toBeNull();
    expect((await checkTarget(new URL('https://[2606:2800:220:1::1]/'), [], lookup)).refusal).toBeNull();
    expect((await checkTarget(new URL('https://public.test/'), [], lookup)).refusal).toBeNull();
    expect((await checkTarget(new URL('https://127.0.0.1/'), parseCidrs(['127.0.0.0/8']), lookup)).refusal).toBeNull();
    expect((await checkTarget(new URL('https://[::ffff:127.0.0.1]/'), parseCidrs(['127.0.0.0/8']), lookup)).refusal).toBeNull();
  });
});

describe('SSRF at connect time', () => {
  let pki: TestPki;
  let server: https.Server;
  let hits = 0;
  let port = 0;

  beforeAll(async () => {
    pki = createTestPki();
    server = https.createServer({ key: pki.key, cert: pki.cert }, (_req, res) => {
      hits++;
      res.end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('without an allow-list, the client refuses loopback however it is spelled and never connects', async () => {
    const strict = createWebhookClient({ timeoutMs: 2000, allowedCidrs: [], caFile: pki.caFile, lookup });
    for (const host of ['127.0.0.1', '2130706433', '0x7f.1', '[::ffff:127.0.0.1]', 'localhost', 'internal.test']) {
      const r = await strict.send({ url: `https://${host}:${port}/hook`, body: '{}', secret: 's', updateId: 1, allowedIps: [] });
      expect(r.ok, host).toBe(false);
      expect(r.error, host).toMatch(/refused target|cannot resolve/);
    }
    strict.close();
    expect(hits).toBe(0);
  });

  it('with the allow-list, the same client delivers to the checked address', async () => {
    const lenient = createWebhookClient({ timeoutMs: 2000, allowedCidrs: parseCidrs(['127.0.0.0/8']), caFile: pki.caFile, lookup });
    const r = await lenient.send({ url: `https://localhost:${port}/hook`, body: '{}', secret: 's', updateId: 1, allowedIps: [] });
    lenient.close();
    expect(r).toMatchObject({ ok: true, statusCode: 200 });
    expect(hits).toBe(1);
  });
});
