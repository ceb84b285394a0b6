/**
 * Server-side request forgery guard for webhook targets.
 *
 * An address passes only when it is globally reachable: the tables below are the
 * "Globally Reachable = False" rows of the IANA special-purpose address registries
 *   https://www.iana.org/assignments/iana-ipv4-special-registry/
 *   https://www.iana.org/assignments/iana-ipv6-special-registry/
 * plus multicast and reserved space, and IPv6 outside the global unicast block
 * 2000::/3 (https://www.iana.org/assignments/ipv6-address-space/). Deliberately
 * stricter than the registry: anycast service addresses the registry marks global
 * (PCP/TURN/DNS-SD anycast, AMT, AS112, the 6to4 relay) and all of 2001::/23 but
 * Teredo are refused too — anycast reaches the nearest instance, which may sit in
 * the platform's own network, and no webhook receiver lives there.
 *
 * IPv6 forms that carry an IPv4 address are judged by that address:
 * IPv4-mapped ::ffff:0:0/96 and NAT64 64:ff9b::/96 (the last 32 bits), 6to4
 * 2002::/16 (bits 16-48), Teredo 2001::/32 (server in bits 32-64, client the
 * bitwise NOT of the last 32 bits; both must be global) and ISATAP interface
 * identifiers (…:0:5efe:a.b.c.d). IPv4-compatible ::/96 and IPv4-translated
 * ::ffff:0:0:0/96 (both obsolete, unroutable) and 64:ff9b:1::/48 (local-use
 * translation, not global per the registry) are refused whatever they carry.
 *
 * Ports: only WEBHOOK_ALLOWED_PORTS (Telegram's 443, 80, 88, 8443 by default);
 * port 0 never. WEBHOOK_ALLOWED_CIDRS exempts ranges from the address and the port
 * rule (tests, private installs). Odd IPv4 spellings (decimal, octal, hex, short
 * forms) are normalised by the WHATWG URL parser before any check. A refusal of a
 * name never says what the name resolved to.
 */
import dns from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

type Ip = ipaddr.IPv4 | ipaddr.IPv6;
export type Cidr = [Ip, number];

export function parseCidrs(list: string[]): Cidr[] {
  return list.map((c) => (c.includes('/') ? ipaddr.parseCIDR(c) : ([ipaddr.parse(c), ipaddr.parse(c).kind() === 'ipv4' ? 32 : 128] as Cidr)));
}

export function isValidIpOrCidr(value: string): boolean {
  try {
    parseCidrs([value]);
    return true;
  } catch {
    return false;
  }
}

/** The default of WEBHOOK_ALLOWED_PORTS: the ports Telegram allows for webhooks. */
export const DEFAULT_WEBHOOK_PORTS = [443, 80, 88, 8443];

export interface TargetPolicy {
  /** Ranges exempt from the address and the port rule (WEBHOOK_ALLOWED_CIDRS). */
  allowedCidrs: Cidr[];
  /** Ports a target outside allowedCidrs may use (WEBHOOK_ALLOWED_PORTS). */
  allowedPorts: number[];
}

const table = (rows: [string, string][]) => rows.map(([cidr, name]) => ({ range: ipaddr.parseCIDR(cidr), name }));

/** IPv4 special-purpose registry rows that are not globally reachable, and more (see above). */
const IPV4_REFUSED = table([
  ['0.0.0.0/8', '"this network"'],
  ['10.0.0.0/8', 'private-use'],
  ['100.64.0.0/10', 'shared (CGNAT)'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private-use'],
  ['192.0.0.0/24', 'IETF protocol assignment'], // incl. /29 DS-Lite, .8 dummy, .9 PCP and .10 TURN anycast, .170/.171 NAT64 discovery
  ['192.0.2.0/24', 'documentation'],
  ['192.31.196.0/24', 'AS112 anycast'],
  ['192.52.193.0/24', 'AMT anycast'],
  ['192.88.99.0/24', 'deprecated 6to4 relay anycast'],
  ['192.168.0.0/16', 'private-use'],
  ['192.175.48.0/24', 'AS112 anycast'],
  ['198.18.0.0/15', 'benchmarking'],
  ['198.51.100.0/24', 'documentation'],
  ['203.0.113.0/24', 'documentation'],
  ['224.0.0.0/4', 'multicast'],
  ['255.255.255.255/32', 'limited broadcast'],
  ['240.0.0.0/4', 'reserved'],
]);

/** IPv6 special-purpose registry rows that are not globally reachable, and more (see above). */
const IPV6_REFUSED = table([
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['::/96', 'IPv4-compatible (obsolete)'],
  ['::ffff:0:0:0/96', 'IPv4-translated'],
  ['64:ff9b:1::/48', 'local-use IPv4/IPv6 translation'],
  ['100::/64', 'discard-only'],
  ['100:0:0:1::/64', 'dummy prefix'],
  ['2001::/23', 'IETF protocol assignment'], // Teredo 2001::/32 is judged by what it carries, before this row
  ['2001:db8::/32', 'documentation'],
  ['2620:4f:8000::/48', 'AS112 anycast'],
  ['3fff::/20', 'documentation'],
  ['5f00::/16', 'segment routing SID'],
  ['fc00::/7', 'unique local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'site-local (deprecated)'],
  ['ff00::/8', 'multicast'],
]);

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');
const MAPPED = ipaddr.parseCIDR('::ffff:0:0/96');
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');
const TEREDO = ipaddr.parseCIDR('2001::/32');

const matches = (ip: Ip, [range, bits]: Cidr) => range.kind() === ip.kind() && ip.match(range as never, bits);
const inAny = (ip: Ip, cidrs: Cidr[]) => cidrs.some((c) => matches(ip, c));
const v4 = (hi: number, lo: number) => ipaddr.fromByteArray([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]) as ipaddr.IPv4;

/** Parses an address; IPv4-mapped IPv6 becomes the IPv4 address it is. */
function parse(address: string): Ip | null {
  try {
    const ip = ipaddr.parse(address.replace(/^\[|\]$/g, ''));
    return ip.kind() === 'ipv6' && matches(ip, MAPPED) ? (ip as ipaddr.IPv6).toIPv4Address() : ip;
  } catch {
    return null;
  }
}

/** Why an address is not globally reachable ("loopback", "6to4 carrying 10.0.0.1: private-use"), or null. */
function notGlobal(ip: Ip): string | null {
  if (ip.kind() === 'ipv4') return IPV4_REFUSED.find(({ range }) => matches(ip, range))?.name ?? null;
  const w = (ip as ipaddr.IPv6).parts;
  const carried = (form: string, embedded: ipaddr.IPv4[]) => {
    for (const e of embedded) {
      const why = notGlobal(e);
      if (why) return `${form} carrying ${e.toString()}: ${why}`;
    }
    return null;
  };
  if (matches(ip, NAT64)) return carried('NAT64', [v4(w[6]!, w[7]!)]);
  if (matches(ip, SIX_TO_FOUR)) return carried('6to4', [v4(w[1]!, w[2]!)]);
  if (matches(ip, TEREDO)) return carried('Teredo', [v4(w[2]!, w[3]!), v4(~w[6]! & 0xffff, ~w[7]! & 0xffff)]);
  const row = IPV6_REFUSED.find(({ range }) => matches(ip, range));
  if (row) return row.name;
  if (!matches(ip, GLOBAL_UNICAST_V6)) return 'reserved';
  // ISATAP interface identifier: 0000:5efe or 0200:5efe (u/g bits aside), then the IPv4 address.
  if ((w[4]! & 0xfcff) === 0 && w[5] === 0x5efe) return carried('ISATAP', [v4(w[6]!, w[7]!)]);
  return null;
}

/** Why an address may not be a webhook target, or null when it may (the address is named: give it only for IP literals). */
export function refusalOf(address: string, allowed: Cidr[]): string | null {
  const ip = parse(address);
  if (!ip) return `not an IP address: ${address}`;
  if (inAny(ip, allowed)) return null;
  const why = notGlobal(ip);
  return why ? `${ip.toString()} is not a public address (${why})` : null;
}

/** Whether an address lies in one of the ranges (IPv4-mapped IPv6 judged as its IPv4). */
export function inside(address: string, cidrs: Cidr[]): boolean {
  const ip = parse(address);
  return ip !== null && inAny(ip, cidrs);
}

/** The port a URL connects to (its scheme's default when it names none). */
export function portOf(url: URL): number {
  return url.port ? Number(url.port) : url.protocol === 'http:' ? 80 : 443;
}

const portRefusal = (port: number, policy: TargetPolicy) =>
  `port ${port} is not allowed (use one of ${policy.allowedPorts.join(', ')})`;

/**
 * Judges the addresses `host` (a name or an IP literal, brackets optional) resolved
 * to, for a connection to `port`: the address rule, the port rule and, when given,
 * a bot's allowed_ips. For a name, the refusal does not say what it resolved to.
 */
export function judgeAddresses(host: string, port: number, addresses: string[], policy: TargetPolicy, allowedIps: Cidr[] = []): string | null {
  const bare = host.replace(/^\[|\]$/g, '');
  const literal = ipaddr.isValid(bare);
  if (port === 0) return 'port 0 is not allowed';
  if (addresses.length === 0) return `cannot resolve ${bare}`;
  for (const a of addresses) {
    const refusal = refusalOf(a, policy.allowedCidrs);
    if (refusal) return literal ? refusal : `${bare} resolves to a non-public address`;
  }
  if (!policy.allowedPorts.includes(port) && !addresses.every((a) => inside(a, policy.allowedCidrs))) return portRefusal(port, policy);
  if (allowedIps.length > 0 && !addresses.every((a) => inside(a, allowedIps))) {
    return literal ? `${bare} is outside allowed_ips` : `${bare} resolves to an address outside allowed_ips`;
  }
  return null;
}

export type Lookup = (host: string) => Promise<string[]>;

export const systemLookup: Lookup = async (host) => (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** Resolves the URL's host and judges every address (judgeAddresses); the refusal, or null, and the addresses. */
export async function checkTarget(
  url: URL, policy: TargetPolicy, lookup: Lookup = systemLookup, allowedIps: Cidr[] = [],
): Promise<{ refusal: string | null; addresses: string[] }> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = portOf(url);
  if (port === 0) return { refusal: 'port 0 is not allowed', addresses: [] };
  let addresses: string[];
  if (ipaddr.isValid(host)) addresses = [host];
  else {
    try {
      addresses = await lookup(host);
    } catch {
      return { refusal: `cannot resolve ${host}`, addresses: [] };
    }
  }
  return { refusal: judgeAddresses(host, port, addresses, policy, allowedIps), addresses };
}
