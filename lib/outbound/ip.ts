/**
 * IP address text <-> bytes, and the classes of addresses a tenant's URL may not reach.
 *
 * The parser is strict on purpose: it reads the canonical spellings that the WHATWG URL parser
 * and the resolver produce (dotted-decimal IPv4 without leading zeros, RFC 4291 IPv6 text).
 * Exotic IPv4 spellings (`2130706433`, `0177.0.0.1`, `0x7f.1`) never reach it: `new URL()` has
 * already normalised them to `127.0.0.1`.
 *
 * @example
 * classifyIp('169.254.169.254'); // 'link-local'
 * classifyIp('::ffff:7f00:1');   // 'loopback' (IPv4-mapped 127.0.0.1)
 * classifyIp('8.8.8.8');         // null (public)
 */

/** A parsed address: 4 bytes for IPv4, 16 for IPv6, network order. */
export interface IpAddress {
  readonly family: 4 | 6;
  readonly bytes: Uint8Array;
}

/** Why an address is refused. `null` from {@link classifyIp} means public. */
export type AddressClass =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'shared'
  | 'link-local'
  | 'unique-local'
  | 'multicast'
  | 'reserved'
  | 'documentation';

/** A network: the address with its host bits cleared, and the prefix length. */
export interface Cidr {
  readonly family: 4 | 6;
  readonly bytes: Uint8Array;
  readonly prefix: number;
}

const DECIMAL_OCTET = /^(0|[1-9]\d{0,2})$/;
const HEX_GROUP = /^[0-9a-f]{1,4}$/i;

/**
 * Parses IPv4 dotted-decimal or IPv6 text (optionally in brackets, optionally with a `%zone`,
 * which is ignored) into bytes. Returns `null` for anything else, including hostnames.
 */
export function parseIp(text: string): IpAddress | null {
  let s = text.trim();
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  if (s.includes(':')) {
    const zone = s.indexOf('%');
    if (zone >= 0) s = s.slice(0, zone);
    const bytes = parseIpv6(s);
    return bytes ? { family: 6, bytes } : null;
  }
  const bytes = parseIpv4(s);
  return bytes ? { family: 4, bytes } : null;
}

function parseIpv4(s: string): Uint8Array | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  const bytes = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const part = parts[i] as string;
    if (!DECIMAL_OCTET.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    bytes[i] = n;
  }
  return bytes;
}

function parseIpv6(s: string): Uint8Array | null {
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const head = parseGroups(halves[0] as string, halves.length === 1);
  const tail = halves.length === 2 ? parseGroups(halves[1] as string, true) : [];
  if (!head || !tail) return null;
  const groups = head.length + tail.length;
  // Without `::` all eight groups are spelled out; with it, `::` stands for at least one.
  if (halves.length === 1 ? groups !== 8 : groups > 7) return null;
  const words = [...head, ...new Array<number>(8 - groups).fill(0), ...tail];
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[i * 2] = w >> 8;
    bytes[i * 2 + 1] = w & 0xff;
  });
  return bytes;
}

/** 16-bit groups of one side of `::`; an embedded dotted IPv4 may end the last side. */
function parseGroups(side: string, last: boolean): number[] | null {
  if (side === '') return [];
  const parts = side.split(':');
  const words: number[] = [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] as string;
    if (last && i === parts.length - 1 && part.includes('.')) {
      const v4 = parseIpv4(part);
      if (!v4) return null;
      words.push(((v4[0] as number) << 8) | (v4[1] as number), ((v4[2] as number) << 8) | (v4[3] as number));
    } else {
      if (!HEX_GROUP.test(part)) return null;
      words.push(parseInt(part, 16));
    }
  }
  return words;
}

/** Canonical text: dotted-decimal, or RFC 5952 IPv6 (lower case, longest zero run as `::`). */
export function formatIp(address: IpAddress): string {
  const b = address.bytes;
  if (address.family === 4) return Array.from(b).join('.');
  const words = Array.from({ length: 8 }, (_, i) => ((b[i * 2] as number) << 8) | (b[i * 2 + 1] as number));
  let bestStart = -1;
  let bestLen = 1; // a single zero group is not shortened
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) [bestStart, bestLen] = [i, j - i];
    i = j;
  }
  const hex = words.map((w) => w.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

// ---------------------------------------------------------------------------------------------
// Classification

const cidr = (text: string): Cidr => {
  const parsed = parseCidr(text);
  if (!parsed) throw new Error(`bad built-in CIDR ${text}`);
  return parsed;
};

/** First match wins; more specific ranges come before the ones containing them. */
const IPV4_CLASSES: readonly [Cidr, AddressClass][] = [
  [cidr('0.0.0.0/8'), 'unspecified'],
  [cidr('127.0.0.0/8'), 'loopback'],
  [cidr('10.0.0.0/8'), 'private'],
  [cidr('172.16.0.0/12'), 'private'],
  [cidr('192.168.0.0/16'), 'private'],
  [cidr('100.64.0.0/10'), 'shared'],
  [cidr('169.254.0.0/16'), 'link-local'],
  [cidr('224.0.0.0/4'), 'multicast'],
  [cidr('240.0.0.0/4'), 'reserved'], // includes 255.255.255.255
  [cidr('192.0.0.0/24'), 'reserved'],
  [cidr('198.18.0.0/15'), 'reserved'],
  [cidr('192.0.2.0/24'), 'documentation'],
  [cidr('198.51.100.0/24'), 'documentation'],
  [cidr('203.0.113.0/24'), 'documentation'],
];

const V6_UNSPECIFIED = cidr('::/128');
const V6_LOOPBACK = cidr('::1/128');

const IPV6_CLASSES: readonly [Cidr, AddressClass][] = [
  [V6_UNSPECIFIED, 'unspecified'],
  [V6_LOOPBACK, 'loopback'],
  [cidr('fe80::/10'), 'link-local'],
  [cidr('fec0::/10'), 'reserved'], // deprecated site-local: the old IPv6 "private"
  [cidr('fc00::/7'), 'unique-local'], // includes AWS's fd00:ec2::254
  [cidr('ff00::/8'), 'multicast'],
  [cidr('100::/64'), 'reserved'], // discard-only
  [cidr('2001:db8::/32'), 'documentation'],
  // RFC 8215 local-use NAT64: where the IPv4 sits depends on a prefix length we cannot know.
  [cidr('64:ff9b:1::/48'), 'reserved'],
];

/** IPv6 ranges that carry an IPv4 address, and the byte offset where it sits. */
const IPV4_EMBEDDINGS: readonly [Cidr, number][] = [
  [cidr('::ffff:0:0/96'), 12], // IPv4-mapped
  [cidr('::/96'), 12], // IPv4-compatible (deprecated); `::` and `::1` are matched before
  [cidr('::ffff:0:0:0/96'), 12], // IPv4-translated (SIIT)
  [cidr('64:ff9b::/96'), 12], // NAT64 well-known prefix
  [cidr('2002::/16'), 2], // 6to4
];

const GLOBAL_UNICAST = cidr('2000::/3');

/**
 * The IPv4 address an IPv6 address stands for (IPv4-mapped, IPv4-compatible, SIIT, NAT64,
 * 6to4), or `null`. `::` and `::1` are IPv6's own and embed nothing.
 */
export function embeddedIpv4(address: IpAddress): IpAddress | null {
  if (address.family !== 6) return null;
  if (cidrContains(V6_UNSPECIFIED, address) || cidrContains(V6_LOOPBACK, address)) return null;
  for (const [range, offset] of IPV4_EMBEDDINGS) {
    if (cidrContains(range, address)) return { family: 4, bytes: address.bytes.slice(offset, offset + 4) };
  }
  return null;
}

/**
 * Classifies an address: `null` if it is public, else the class that refuses it. IPv6 that
 * embeds IPv4 is judged by the IPv4 address; IPv6 outside 2000::/3 that no rule names is
 * 'reserved' (nothing public lives there).
 *
 * @throws TypeError if `address` is text that is not an IP address.
 */
export function classifyIp(address: IpAddress | string): AddressClass | null {
  const ip = typeof address === 'string' ? parseIp(address) : address;
  if (!ip) throw new TypeError('not an IP address');
  if (ip.family === 4) return matchClass(IPV4_CLASSES, ip);
  const specific = matchClass(IPV6_CLASSES, ip);
  if (specific) return specific;
  const v4 = embeddedIpv4(ip);
  if (v4) return matchClass(IPV4_CLASSES, v4);
  return cidrContains(GLOBAL_UNICAST, ip) ? null : 'reserved';
}

function matchClass(table: readonly [Cidr, AddressClass][], ip: IpAddress): AddressClass | null {
  for (const [range, cls] of table) if (cidrContains(range, ip)) return cls;
  return null;
}

// ---------------------------------------------------------------------------------------------
// CIDR

/**
 * Parses `a.b.c.d/n` or `v6::/n`; a bare address is a single-host network (/32, /128). Host
 * bits after the prefix are cleared (`10.1.2.3/8` is `10.0.0.0/8`). Returns `null` if invalid.
 */
export function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf('/');
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  if (!ip) return null;
  const max = ip.family === 4 ? 32 : 128;
  let prefix = max;
  if (slash >= 0) {
    const p = text.slice(slash + 1).trim();
    if (!/^(0|[1-9]\d{0,2})$/.test(p)) return null;
    prefix = Number(p);
    if (prefix > max) return null;
  }
  return { family: ip.family, bytes: maskBytes(ip.bytes, prefix), prefix };
}

/**
 * Whether `address` lies in `network`. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is the
 * same host as its IPv4 address and matches IPv4 networks.
 */
export function cidrContains(network: Cidr, address: IpAddress): boolean {
  let ip = address;
  if (network.family === 4 && ip.family === 6 && isMapped(ip)) ip = { family: 4, bytes: ip.bytes.slice(12) };
  if (network.family !== ip.family) return false;
  const masked = maskBytes(ip.bytes, network.prefix);
  return masked.every((b, i) => b === network.bytes[i]);
}

function isMapped(ip: IpAddress): boolean {
  const b = ip.bytes;
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

function maskBytes(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let i = 0; i < bytes.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    out[i] = (bytes[i] as number) & ((0xff << (8 - bits)) & 0xff);
  }
  return out;
}
