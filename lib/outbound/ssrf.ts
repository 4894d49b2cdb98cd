/**
 * The SSRF guard: decides whether a tenant-supplied URL may be fetched, and to which address.
 *
 * Only http: and https: without credentials pass. An IP-literal host is judged directly; a
 * name is resolved and EVERY address it resolves to must pass, so a round-robin answer that
 * mixes a public and a private address is refused. The caller must then connect to the
 * address the guard returns (see `outboundRequest`), never resolve the name again, or a DNS
 * answer that changes between check and connect (rebinding) would walk around the guard.
 *
 * The allow list (`EASEL_SSRF_ALLOW`) lets operators and tests reach hosts the guard would
 * refuse: a hostname on it passes whatever it resolves to; an address passes if it lies in an
 * allowed IP or CIDR.
 *
 * @example
 * const guard = new SsrfGuard({ allow: parseAllowList(process.env.EASEL_SSRF_ALLOW) });
 * const { url, address } = await guard.check('https://api.example.com/v1?q=1');
 */
import { lookup } from 'node:dns/promises';
import { EaselError } from '../errors';
import { type AddressClass, type Cidr, cidrContains, classifyIp, formatIp, type IpAddress, parseCidr, parseIp } from './ip';

export type SsrfReason = AddressClass | 'scheme' | 'credentials' | 'unresolvable';

/**
 * A URL the guard refuses. `host` is the URL's hostname only; the message names the class
 * and never the path, query or credentials of the URL.
 */
export class SsrfBlockedError extends EaselError {
  readonly reason: SsrfReason;
  readonly host: string;

  constructor(reason: SsrfReason, host: string, message: string, options?: { cause?: unknown }) {
    super('ssrf_blocked', message, options);
    this.reason = reason;
    this.host = host;
  }
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface SsrfGuardOptions {
  /**
   * Hostnames, exact IPs or CIDRs to let through although the guard would refuse them.
   * @default []
   */
  allow?: readonly string[];
  /**
   * Resolves a hostname to all its addresses.
   * @default node:dns/promises lookup with `{ all: true, verbatim: true }`
   */
  resolve?: Resolver;
}

/** A URL that passed, with the address to connect to (the first of `addresses`). */
export interface SsrfCheckResult {
  url: URL;
  address: string;
  family: 4 | 6;
  /** Every address the host resolved to, all of them checked, in resolver order. */
  addresses: readonly ResolvedAddress[];
}

const ALLOWED_PROTOCOLS = new Set(['http:', 'https:']);

export class SsrfGuard {
  readonly #hosts: ReadonlySet<string>;
  readonly #networks: readonly Cidr[];
  readonly #resolve: Resolver;

  /** @throws EaselError `invalid_config` for an allow-list entry that is not a host, IP or CIDR. */
  constructor(options: SsrfGuardOptions = {}) {
    const hosts = new Set<string>();
    const networks: Cidr[] = [];
    for (const entry of options.allow ?? []) {
      const parsed = parseAllowEntry(entry);
      if (typeof parsed === 'string') hosts.add(parsed);
      else networks.push(parsed);
    }
    this.#hosts = hosts;
    this.#networks = networks;
    this.#resolve = options.resolve ?? defaultResolve;
  }

  /**
   * Checks a URL and returns the parsed URL with the address(es) to connect to.
   *
   * @throws SsrfBlockedError if the URL may not be fetched.
   * @throws TypeError if `url` is not a valid absolute URL.
   */
  async check(url: string | URL): Promise<SsrfCheckResult> {
    const parsed = new URL(typeof url === 'string' ? url : url.href);
    const host = parsed.hostname;
    if (!ALLOWED_PROTOCOLS.has(parsed.protocol)) {
      // Non-special schemes may carry anything in "host"; name only the scheme.
      throw new SsrfBlockedError('scheme', host, `outbound request refused: scheme ${parsed.protocol} is not allowed (only http: and https:)`);
    }
    if (parsed.username !== '' || parsed.password !== '') {
      throw new SsrfBlockedError('credentials', host, `outbound request refused: the URL to ${host} carries credentials`);
    }

    const literal = parseIp(host);
    if (literal) {
      const refused = this.#refusal(literal);
      if (refused) throw new SsrfBlockedError(refused, host, `outbound request refused: ${host} is ${describe(refused)} address`);
      const address = { address: formatIp(literal), family: literal.family };
      return { url: parsed, ...address, addresses: [address] };
    }

    const name = normalizeHostname(host);
    let resolved: ResolvedAddress[];
    try {
      resolved = await this.#resolve(host);
    } catch (cause) {
      throw new SsrfBlockedError('unresolvable', host, `outbound request refused: ${host} could not be resolved`, { cause });
    }
    const addresses: ResolvedAddress[] = [];
    for (const r of resolved) {
      const ip = parseIp(r.address);
      if (!ip) throw new SsrfBlockedError('unresolvable', host, `outbound request refused: ${host} resolved to something that is not an IP address`);
      addresses.push({ address: formatIp(ip), family: ip.family });
      if (this.#hosts.has(name)) continue;
      const refused = this.#refusal(ip);
      // The resolved address is not echoed: it may reveal the layout of an internal network.
      if (refused) throw new SsrfBlockedError(refused, host, `outbound request refused: ${host} resolves to ${describe(refused)} address`);
    }
    const first = addresses[0];
    if (!first) throw new SsrfBlockedError('unresolvable', host, `outbound request refused: ${host} has no address`);
    return { url: parsed, address: first.address, family: first.family, addresses };
  }

  /** The class that refuses `ip`, or null if it is public or allowed. */
  #refusal(ip: IpAddress): AddressClass | null {
    if (this.#networks.some((n) => cidrContains(n, ip))) return null;
    return classifyIp(ip);
  }
}

/**
 * Why the guard refuses `url`, or null if it passes. For URLs a tenant hands over to be called
 * later (a callback, a webhook target): checked when they are given, so a refused one is
 * answered at once rather than failing when its time comes. The call itself is checked again
 * (what a name resolves to may have changed by then).
 *
 * @example await urlRefusal(guard, 'http://169.254.169.254/') // 'outbound request refused: 169.254.169.254 is a link-local address'
 */
export async function urlRefusal(guard: SsrfGuard, url: string): Promise<string | null> {
  try {
    await guard.check(url);
    return null;
  } catch (error) {
    if (error instanceof SsrfBlockedError) return error.message;
    if (error instanceof TypeError) return 'not a valid absolute URL';
    throw error;
  }
}

/**
 * Splits an allow-list setting (`EASEL_SSRF_ALLOW`) on commas and white space, trimming and
 * dropping empty entries.
 *
 * @example parseAllowList('127.0.0.1, localhost 10.0.0.0/8') // ['127.0.0.1', 'localhost', '10.0.0.0/8']
 * @throws EaselError `invalid_config` naming the first entry that is not a host, IP or CIDR.
 */
export function parseAllowList(text: string | undefined): string[] {
  const entries = (text ?? '').split(/[\s,]+/).filter((e) => e !== '');
  for (const entry of entries) parseAllowEntry(entry);
  return entries;
}

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

function parseAllowEntry(raw: string): string | Cidr {
  const entry = raw.trim();
  if (entry.includes('/')) {
    const network = parseCidr(entry);
    if (!network) {
      throw new EaselError('invalid_config', `SSRF allow list: "${entry}" is not a valid CIDR (expected e.g. 10.0.0.0/8 or fd00::/8)`);
    }
    return network;
  }
  const ip = parseIp(entry);
  if (ip) return { family: ip.family, bytes: ip.bytes, prefix: ip.family === 4 ? 32 : 128 };
  const name = normalizeHostname(entry);
  // Digits and dots only would be a mistyped address, not a name (the URL parser agrees).
  if (/^[\d.]+$/.test(name) || !HOSTNAME.test(name)) {
    throw new EaselError('invalid_config', `SSRF allow list: "${entry}" is not a hostname, IP address or CIDR`);
  }
  return name;
}

/** Lower case, without the trailing dot of a fully qualified name. */
function normalizeHostname(host: string): string {
  const lower = host.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

function describe(cls: AddressClass): string {
  return cls === 'unspecified' ? 'an unspecified' : `a ${cls}`;
}

async function defaultResolve(hostname: string): Promise<ResolvedAddress[]> {
  const results = await lookup(hostname, { all: true, verbatim: true });
  return results.map((r) => ({ address: r.address, family: r.family === 6 ? 6 : 4 }));
}
