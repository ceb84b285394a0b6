/**
 * The SSRF guard: a table of loopback, private, link-local, CGNAT, multicast and
 * reserved targets in many spellings (decimal, octal, hex, short IPv4 forms, IPv6
 * transition forms), names that resolve to them, and the same refusal at connect
 * time in the real webhook client, before any byte reaches the target.
 */
import https from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebhookClient } from '../src/dispatch/webhook-client.js';
import { checkTarget, DEFAULT_WEBHOOK_PORTS, parseCidrs, type TargetPolicy } from '../src/net/ssrf.js';
import { createTestPki, type TestPki } from './helpers/tls.js';

/** Names under .test are resolved by this table (no DNS here); localhost goes to the system resolver. */
const NAMES: Record<string, string[]> = {
  'internal.test': ['10.1.2.3'],
  'metadata.test': ['169.254.169.254'],
  'mixed.test': ['93.184.216.34', '192.168.1.1'],
  'v6-private.test': ['fd12:3456::1'],
  'compat.test': ['::7f00:1'],
  'nat64.test': ['64:ff9b::a9fe:a9fe'],
  'empty.test': [],
  'public.test': ['93.184.216.34'],
};
const lookup = async (host: string) => {
  if (NAMES[host]) return NAMES[host]!;
  const { systemLookup } = await import('../src/net/ssrf.js');
  return systemLookup(host);
};
const STRICT = { allowedCidrs: [], allowedPorts: DEFAULT_WEBHOOK_PORTS };
const check = (url: string, policy: TargetPolicy = STRICT) => checkTarget(new URL(url), policy, lookup);

const REFUSED = [
  // IPv4 in every spelling the URL parser normalises
  'https://127.0.0.1/', 'https://127.1/', 'https://2130706433/', 'https://0x7f000001/', 'https://017700000001/',
  'https://0x7f.0.0.1/', 'https://0177.0.0.1/', 'https://127.255.255.254/', 'https://0.0.0.0/', 'https://0/',
  'https://0.0.0.1/', 'https://10.0.0.1/', 'https://10.1/', 'https://172.16.0.1/', 'https://172.31.255.255/',
  'https://192.168.0.1/', 'https://0300.0250.0.1/', 'https://169.254.169.254/', 'https://2852039166/', 'https://0xa9.0xfe.0xa9.0xfe/',
  'https://169.254.0.1/', 'https://100.64.0.1/', 'https://100.127.255.254/', 'https://192.0.0.1/', 'https://192.0.0.9/',
  'https://192.0.0.170/', 'https://192.0.2.1/', 'https://198.51.100.7/', 'https://203.0.113.9/', 'https://198.18.0.1/',
  'https://198.19.255.255/', 'https://192.88.99.1/', 'https://224.0.0.1/', 'https://239.255.255.250/', 'https://240.0.0.1/',
  'https://255.255.255.255/',
  // IPv6 special-purpose space
  'https://[::1]/', 'https://[::]/', 'https://[0:0:0:0:0:0:0:1]/', 'https://[fe80::1]/', 'https://[fc00::1]/',
  'https://[fd00::abcd]/', 'https://[fd00:ec2::254]/', 'https://[fec0::1]/', 'https://[ff02::1]/', 'https://[ff05::1:3]/',
  'https://[100::1]/', 'https://[100:0:0:1::1]/', 'https://[2001:db8::1]/', 'https://[2001:2::1]/', 'https://[2001:10::1]/',
  'https://[2001:1::1]/', 'https://[3fff::1]/', 'https://[5f00::1]/', 'https://[4000::1]/', 'https://[::2]/',
  // IPv4-mapped (judged as the IPv4)
  'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/', 'https://[::ffff:10.0.0.1]/', 'https://[::ffff:169.254.169.254]/',
  'https://[::ffff:a9fe:a9fe]/', 'https://[0:0:0:0:0:ffff:7f00:1]/', 'https://[::ffff:0.0.0.0]/', 'https://[::ffff:100.64.0.1]/',
  'https://[::ffff:ffff:ffff]/',
  // IPv4-compatible ::/96 and IPv4-translated ::ffff:0:0:0/96 (refused whatever they carry)
  'https://[::127.0.0.1]/', 'https://[::7f00:1]/', 'https://[::a9fe:a9fe]/', 'https://[::10.0.0.1]/', 'https://[::8.8.8.8]/',
  'https://[0:0:0:0:0:0:127.0.0.1]/', 'https://[::ffff:0:7f00:1]/', 'https://[::ffff:0:808:808]/',
  // NAT64, 6to4, Teredo, ISATAP carrying non-global IPv4; local-use NAT64
  'https://[64:ff9b::7f00:1]/', 'https://[64:ff9b::a9fe:a9fe]/', 'https://[64:ff9b::10.0.0.1]/', 'https://[64:ff9b::c0a8:1]/',
  'https://[64:ff9b:1::808:808]/', 'https://[2002:7f00:1::]/', 'https://[2002:a9fe:a9fe::]/', 'https://[2002:c0a8:101::1]/',
  'https://[2002:a00:1:1::1]/', 'https://[2001::1]/', 'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
  'https://[2001:0:a00:1::f7f7:f7f7]/', 'https://[2001:0:808:808::80ff:fffe]/', 'https://[2a00:1450::5efe:a00:1]/',
  'https://[2a00:1450::200:5efe:c0a8:1]/',
  // ports outside WEBHOOK_ALLOWED_PORTS, and port 0
  'https://93.184.216.34:22/', 'https://93.184.216.34:8080/', 'https://93.184.216.34:65535/', 'https://93.184.216.34:0/',
  'https://[2606:2800:220:1::1]:6379/', 'https://public.test:25/', 'https://public.test:0/',
  // names
  'https://localhost/', 'https://internal.test/', 'https://metadata.test/', 'https://mixed.test/', 'https://v6-private.test/',
  'https://compat.test/', 'https://nat64.test/', 'https://empty.test/', 'https://no-such-name.invalid/',
];

const ACCEPTED = [
  'https://93.184.216.34/', 'https://93.184.216.34:80/', 'https://93.184.216.34:88/', 'https://93.184.216.34:8443/',
  'https://1.1.1.1/', 'https://100.128.0.1/', 'https://172.32.0.1/', 'https://192.0.1.1/', 'https://198.20.0.1/',
  'https://[2606:2800:220:1::1]/', 'https://[2a00:1450:4001:80b::200e]:8443/', 'https://[::ffff:93.184.216.34]/',
  'https://[64:ff9b::93.184.216.34]/', 'https://[2002:5db8:d822::1]/', 'https://[2001:0:4136:e378:8000:63bf:a247:2bdd]/',
  'https://public.test/', 'https://public.test:8443/',
];

describe('SSRF guard', () => {
  it('the table is long', () => expect(REFUSED.length).toBeGreaterThanOrEqual(80));

  it.each(REFUSED)('refuses %s', async (url) => {
    const { refusal } = await check(url);
    expect(refusal).not.toBeNull();
  });

  it.each(ACCEPTED)('accepts %s', async (url) => {
    expect((await check(url)).refusal).toBeNull();
  });

  it('ranges on the allow-list are exempt from the address and the port rule; port 0 never is', async () => {
    const lenient = { allowedCidrs: parseCidrs(['127.0.0.0/8', '192.168.0.0/16']), allowedPorts: DEFAULT_WEBHOOK_PORTS };
    for (const url of ['https://127.0.0.1/', 'https://127.0.0.1:1234/', 'https://[::ffff:127.0.0.1]:9/', 'https://localhost:5/']) {
      expect((await check(url, lenient)).refusal, url).toBeNull();
    }
    expect((await check('https://mixed.test:1234/', lenient)).refusal).toMatch(/^port 1234 is not allowed/);
    expect((await check('https://mixed.test/', lenient)).refusal).toBeNull();
    expect((await check('https://127.0.0.1:0/', lenient)).refusal).toMatch(/port 0/);
    expect((await check('https://93.184.216.34:3000/', { allowedCidrs: [], allowedPorts: [3000] })).refusal).toBeNull();
  });

  it('says why a literal is refused, but never what a name resolved to', async () => {
    expect((await check('https://[::127.0.0.1]/')).refusal).toMatch(/IPv4-compatible/);
    expect((await check('https://[2002:a9fe:a9fe::]/')).refusal).toMatch(/6to4 carrying 169\.254\.169\.254: link-local/);
    expect((await check('https://93.184.216.34:22/')).refusal).toBe('port 22 is not allowed (use one of 443, 80, 88, 8443)');
    for (const [name, addresses] of Object.entries(NAMES).filter(([n]) => n !== 'public.test' && n !== 'mixed.test' && n !== 'empty.test')) {
      const { refusal } = await check(`https://${name}/`);
      expect(refusal).toBe(`${name} resolves to a non-public address`);
      for (const a of addresses) expect(refusal).not.toContain(a);
    }
    expect((await check('https://mixed.test/')).refusal).toBe('mixed.test resolves to a non-public address');
    expect((await check('https://localhost/')).refusal).toBe('localhost resolves to a non-public address');
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

  it('a refused name does not say what it resolved to', async () => {
    const strict = createWebhookClient({ timeoutMs: 2000, allowedCidrs: [], caFile: pki.caFile, lookup });
    const r = await strict.send({ url: `https://localhost:${port}/hook`, body: '{}', secret: 's', updateId: 1, allowedIps: [] });
    strict.close();
    expect(r.error).toBe('refused target: localhost resolves to a non-public address');
  });

  it('at delivery time too, only the allowed ports are used outside the allow-list', async () => {
    const strict = createWebhookClient({ timeoutMs: 2000, allowedCidrs: [], caFile: pki.caFile, lookup });
    for (const url of ['https://93.184.216.34:22/', 'https://public.test:6379/', 'https://[2606:2800:220:1::1]:8080/']) {
      const r = await strict.send({ url, body: '{}', secret: 's', updateId: 1, allowedIps: [] });
      expect(r.error, url).toMatch(/^refused target: port \d+ is not allowed/);
    }
    const zero = await strict.send({ url: 'https://93.184.216.34:0/', body: '{}', secret: 's', updateId: 1, allowedIps: [] });
    expect(zero.error).toBe('refused target: port 0 is not allowed');
    strict.close();
  });

  it('a socket another bot left in the pool does not carry a bot past its allowed_ips', async () => {
    const c = createWebhookClient({ timeoutMs: 2000, allowedCidrs: parseCidrs(['127.0.0.0/8']), caFile: pki.caFile, lookup });
    const url = `https://localhost:${port}/hook`;
    const before = hits;
    const y = () => c.send({ url, body: '{}', secret: 's', updateId: 2, allowedIps: ['127.0.0.2/32'] });
    expect((await y()).error).toBe('refused target: localhost resolves to an address outside allowed_ips');
    expect(await c.send({ url, body: '{}', secret: 's', updateId: 1, allowedIps: [] })).toMatchObject({ ok: true });
    expect((await y()).error).toMatch(/outside allowed_ips/);
    expect(await c.send({ url, body: '{}', secret: 's', updateId: 3, allowedIps: ['127.0.0.1'] })).toMatchObject({ ok: true });
    c.close();
    expect(hits - before).toBe(2);
  });

  it('says why no answer came: refused before contact, timed out, or a connection failure', async () => {
    const c = createWebhookClient({ timeoutMs: 300, allowedCidrs: parseCidrs(['127.0.0.0/8']), caFile: pki.caFile, lookup });
    const send = (url: string) => c.send({ url, body: '{}', secret: 's', updateId: 1, allowedIps: [] });
    expect(await send(`https://localhost:${port}/hook`)).toMatchObject({ ok: true, noAnswer: null });
    expect(await send('not a url')).toMatchObject({ ok: false, statusCode: null, noAnswer: 'refused' });
    expect(await send(`http://localhost:${port}/hook`)).toMatchObject({ ok: false, noAnswer: 'refused' });
    // A listener that accepts and never answers: the timeout.
    const held: net.Socket[] = [];
    const silent = net.createServer((socket) => { held.push(socket); });
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const silentPort = (silent.address() as AddressInfo).port;
    expect(await send(`https://127.0.0.1:${silentPort}/hook`)).toMatchObject({ ok: false, statusCode: null, noAnswer: 'timeout' });
    // Nothing listening: a connection failure.
    const closed = new Promise<void>((r) => silent.close(() => r()));
    for (const socket of held) socket.destroy();
    await closed;
    expect(await send(`https://127.0.0.1:${silentPort}/hook`)).toMatchObject({ ok: false, statusCode: null, noAnswer: 'network' });
    c.close();
  });

  it('with the allow-list, the same client delivers to the checked address', async () => {
    const lenient = createWebhookClient({ timeoutMs: 2000, allowedCidrs: parseCidrs(['127.0.0.0/8']), caFile: pki.caFile, lookup });
    const before = hits;
    const r = await lenient.send({ url: `https://localhost:${port}/hook`, body: '{}', secret: 's', updateId: 1, allowedIps: [] });
    lenient.close();
    expect(r).toMatchObject({ ok: true, statusCode: 200 });
    expect(hits - before).toBe(1);
  });
});
