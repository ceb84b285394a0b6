/**
 * Server-side request forgery guard for webhook targets. Only globally routable
 * unicast addresses pass (ipaddr.js classifies ranges); IPv4-mapped IPv6 is
 * judged as the IPv4 address it carries. WEBHOOK_ALLOWED_CIDRS exempts ranges.
 * Odd IPv4 spellings (decimal, octal, hex, short forms) are normalised by the
 * WHATWG URL parser before any check.
 */
import dns from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

export type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number];

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

const inAny = (ip: ipaddr.IPv4 | ipaddr.IPv6, cidrs: Cidr[]) =>
  cidrs.some(([range, bits]) => range.kind() === ip.kind() && ip.match(range as never, bits));

/** Why an address may not be a webhook target, or null when it may. */
export function refusalOf(address: string, allowed: Cidr[]): string | null {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.parse(address.replace(/^\[|\]$/g, ''));
  } catch {
    return `not an IP address: ${address}`;
  }
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  if (inAny(ip, allowed)) return null;
  const range = ip.range();
  return range === 'unicast' ? null : `${ip.toString()} is a ${range} address`;
}

export type Lookup = (host: string) => Promise<string[]>;

export const systemLookup: Lookup = async (host) => (await dns.lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** Resolves the URL's host and returns the refusal reason for the first bad address, or null. */
export async function checkTarget(url: URL, allowed: Cidr[], lookup: Lookup = systemLookup): Promise<{ refusal: string | null; addresses: string[] }> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  if (ipaddr.isValid(host)) addresses = [host];
  else {
    try {
      addresses = await lookup(host);
    } catch {
      return { refusal: `cannot resolve ${host}`, addresses: [] };
    }
    if (addresses.length === 0) return { refusal: `cannot resolve ${host}`, addresses };
  }
  for (const a of addresses) {
    const refusal = refusalOf(a, allowed);
    if (refusal) return { refusal, addresses };
  }
  return { refusal: null, addresses };
}
