import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { EaselError } from '../../lib/canvas/errors';
import { outboundRequest, parseAllowList, type Resolver, SsrfBlockedError, SsrfGuard } from '../../lib/outbound';

/** A resolver for tests that must never resolve anything. */
const noResolve: Resolver = async (hostname) => {
  throw new Error(`unexpected resolution of ${hostname}`);
};

const fixed =
  (...addresses: string[]): Resolver =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? (6 as const) : (4 as const) }));

async function refusal(guard: SsrfGuard, url: string | URL): Promise<SsrfBlockedError> {
  try {
    await guard.check(url);
  } catch (err) {
    expect(err).toBeInstanceOf(SsrfBlockedError);
    expect(err).toBeInstanceOf(EaselError);
    return err as SsrfBlockedError;
  }
  throw new Error(`expected ${String(url)} to be refused`);
}

describe('parseAllowList', () => {
  it.each([
    [undefined, []],
    ['', []],
    ['  , ,, ', []],
    ['127.0.0.1,localhost,10.0.0.0/8', ['127.0.0.1', 'localhost', '10.0.0.0/8']],
    [' 127.0.0.1 , localhost\n10.0.0.0/8\t::1 ', ['127.0.0.1', 'localhost', '10.0.0.0/8', '::1']],
    ['fd00::/8,[::1],api.internal.example.', ['fd00::/8', '[::1]', 'api.internal.example.']],
  ])('parses %j', (text, expected) => {
    expect(parseAllowList(text)).toEqual(expected);
  });

  it.each(['10.0.0.0/33', '::/129', '10.0.0.0/', '10.0.0/8', 'localhost/8', '10.0.0.0/x'])('rejects the invalid CIDR %j', (entry) => {
    expect(() => parseAllowList(`127.0.0.1,${entry}`)).toThrow(`"${entry}" is not a valid CIDR`);
  });

  it.each(['http://localhost', 'localhost:8080', '256.1.1.1', '0177.0.0.1', 'bad!host', '-leading.example', 'a..b'])(
    'rejects %j, which is no hostname, IP or CIDR',
    (entry) => {
      expect(() => parseAllowList(entry)).toThrow(/not a (hostname|valid CIDR)/);
    },
  );

  it('raises a typed configuration error, also from the guard constructor', () => {
    expect(() => parseAllowList('10.0.0.0/40')).toThrow(EaselError);
    expect(() => new SsrfGuard({ allow: ['10.0.0.0/40'] })).toThrow(expect.objectContaining({ code: 'invalid_config' }));
  });
});

describe('SsrfGuard.check on IP literals', () => {
  const guard = new SsrfGuard({ resolve: noResolve });

  it.each([
    ['http://0.0.0.0/', 'unspecified'],
    ['http://0/', 'unspecified'],
    ['http://[::]/', 'unspecified'],
    ['http://[::ffff:0.0.0.0]/', 'unspecified'],
    ['http://127.0.0.1/', 'loopback'],
    ['http://127.0.0.1:8080/path', 'loopback'],
    ['http://127.255.255.254/', 'loopback'],
    ['http://[::1]/', 'loopback'],
    ['http://[0:0:0:0:0:0:0:1]/', 'loopback'],
    ['http://[::ffff:127.0.0.1]/', 'loopback'],
    ['http://[::ffff:7f00:1]/', 'loopback'],
    ['http://[0:0:0:0:0:ffff:7f00:0001]/', 'loopback'],
    ['http://[::127.0.0.1]/', 'loopback'],
    ['http://[64:ff9b::127.0.0.1]/', 'loopback'],
    ['http://[2002:7f00:1::]/', 'loopback'],
    ['http://2130706433/', 'loopback'],
    ['http://0177.0.0.1/', 'loopback'],
    ['http://0x7f.1/', 'loopback'],
    ['http://0x7f.0.0.1/', 'loopback'],
    ['http://0x7f000001/', 'loopback'],
    ['http://017700000001/', 'loopback'],
    ['http://127.1/', 'loopback'],
    ['http://127.0.1/', 'loopback'],
    ['http://10.0.0.1/', 'private'],
    ['http://012.0.0.1/', 'private'],
    ['http://167772161/', 'private'],
    ['http://172.16.0.1/', 'private'],
    ['http://172.31.255.255/', 'private'],
    ['http://192.168.0.1/', 'private'],
    ['http://0xc0.0xa8.0.1/', 'private'],
    ['http://[::ffff:192.168.0.1]/', 'private'],
    ['http://[64:ff9b::a00:1]/', 'private'],
    ['http://100.64.0.1/', 'shared'],
    ['http://100.127.255.255/', 'shared'],
    ['http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['http://2852039166/', 'link-local'],
    ['http://0xa9fea9fe/', 'link-local'],
    ['http://0251.0376.0251.0376/', 'link-local'],
    ['http://[::ffff:169.254.169.254]/', 'link-local'],
    ['http://[::ffff:a9fe:a9fe]/', 'link-local'],
    ['http://[fe80::1]/', 'link-local'],
    ['http://[fe80::a9fe:a9fe]/', 'link-local'],
    ['http://[fd00:ec2::254]/', 'unique-local'],
    ['http://[fc00::1]/', 'unique-local'],
    ['http://224.0.0.1/', 'multicast'],
    ['http://239.255.255.250:1900/', 'multicast'],
    ['http://[ff02::1]/', 'multicast'],
    ['http://240.0.0.1/', 'reserved'],
    ['http://255.255.255.255/', 'reserved'],
    ['http://4294967295/', 'reserved'],
    ['http://192.0.0.1/', 'reserved'],
    ['http://198.18.0.1/', 'reserved'],
    ['http://[100::1]/', 'reserved'],
    ['http://192.0.2.1/', 'documentation'],
    ['http://198.51.100.1/', 'documentation'],
    ['http://203.0.113.1/', 'documentation'],
    ['http://[2001:db8::1]/', 'documentation'],
    ['https://[2001:db8::1]:8443/', 'documentation'],
  ])('refuses %s as %s', async (url, reason) => {
    const err = await refusal(guard, url);
    expect(err.reason).toBe(reason);
    expect(err.code).toBe('ssrf_blocked');
    expect(err.message).toContain(reason);
  });

  it.each([
    ['http://8.8.8.8/', '8.8.8.8', 4],
    ['https://1.1.1.1:8443/x', '1.1.1.1', 4],
    ['http://134744072/', '8.8.8.8', 4],
    ['http://[2606:4700::1]/', '2606:4700::1', 6],
    ['http://[::ffff:8.8.8.8]/', '::ffff:808:808', 6],
  ])('passes the public %s (no resolution, no connection)', async (url, address, family) => {
    const result = await guard.check(url);
    expect(result).toMatchObject({ address, family, addresses: [{ address, family }] });
    expect(result.url).toBeInstanceOf(URL);
  });

  it('names the host and class but never the path, query or credentials', async () => {
    const err = await refusal(guard, 'http://10.0.0.1/hooks/T0/B0/s3cr3t?token=abcdef#frag');
    expect(err.message).toBe('outbound request refused: 10.0.0.1 is a private address');
    expect(err.host).toBe('10.0.0.1');
  });
});

describe('SsrfGuard.check on schemes and credentials', () => {
  const guard = new SsrfGuard({ resolve: noResolve });

  it.each(['ftp://files.internal.test/', 'file:///etc/passwd', 'gopher://127.0.0.1:6379/_INFO', 'ws://127.0.0.1/', 'data:text/plain,hi', 'javascript:alert(1)'])(
    'refuses %s by scheme',
    async (url) => {
      expect((await refusal(guard, url)).reason).toBe('scheme');
    },
  );

  it.each(['http://user:pa55word@api.internal.test/', 'https://user@api.internal.test/', 'http://:pa55word@8.8.8.8/'])(
    'refuses credentials in %s without echoing them',
    async (url) => {
      const err = await refusal(guard, url);
      expect(err.reason).toBe('credentials');
      expect(err.message).not.toMatch(/pa55word|user@/);
    },
  );

  it('throws TypeError for text that is not a URL', async () => {
    await expect(guard.check('not a url')).rejects.toBeInstanceOf(TypeError);
  });

  it('accepts a URL object and does not share it with the caller', async () => {
    const input = new URL('http://8.8.8.8/a');
    const { url } = await guard.check(input);
    expect(url.href).toBe(input.href);
    expect(url).not.toBe(input);
  });
});

describe('SsrfGuard.check on names', () => {
  it('refuses localhost with the real resolver', async () => {
    const err = await refusal(new SsrfGuard(), 'http://localhost:1/');
    expect(err).toMatchObject({ reason: 'loopback', host: 'localhost' });
  });

  it('refuses a name that an injected resolver maps to 10.1.2.3, without echoing the address', async () => {
    const err = await refusal(new SsrfGuard({ resolve: fixed('10.1.2.3') }), 'http://internal.example/admin?x=1');
    expect(err).toMatchObject({ reason: 'private', host: 'internal.example' });
    expect(err.message).toBe('outbound request refused: internal.example resolves to a private address');
  });

  it.each([
    [['93.184.216.34', '10.0.0.7'], 'private'],
    [['10.0.0.7', '93.184.216.34'], 'private'],
    [['2606:4700::1', 'fd00:ec2::254'], 'unique-local'],
    [['93.184.216.34', '::ffff:169.254.169.254'], 'link-local'],
    [['93.184.216.34', '127.0.0.1'], 'loopback'],
  ])('refuses a name resolving to %j (every address must pass)', async (addresses, reason) => {
    const err = await refusal(new SsrfGuard({ resolve: fixed(...addresses) }), 'https://rr.example/');
    expect(err.reason).toBe(reason);
  });

  it('passes a name whose addresses are all public, pinning the first', async () => {
    const guard = new SsrfGuard({ resolve: fixed('2606:4700::1', '93.184.216.34') });
    const result = await guard.check('https://public.example/x');
    expect(result).toMatchObject({
      address: '2606:4700::1',
      family: 6,
      addresses: [
        { address: '2606:4700::1', family: 6 },
        { address: '93.184.216.34', family: 4 },
      ],
    });
  });

  it.each([
    ['a resolver error', (async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
    }) as Resolver],
    ['no address', fixed()],
    ['something that is not an address', fixed('not-an-ip')],
  ])('refuses as unresolvable on %s', async (_what, resolve) => {
    const err = await refusal(new SsrfGuard({ resolve }), 'http://nowhere.example/');
    expect(err).toMatchObject({ reason: 'unresolvable', host: 'nowhere.example' });
  });
});

describe('SsrfGuard allow list', () => {
  it('allows an exact IP and nothing next to it', async () => {
    const guard = new SsrfGuard({ allow: ['127.0.0.1'], resolve: noResolve });
    await expect(guard.check('http://127.0.0.1:9/')).resolves.toMatchObject({ address: '127.0.0.1' });
    await expect(guard.check('http://[::ffff:127.0.0.1]:9/')).resolves.toMatchObject({ address: '::ffff:7f00:1' });
    expect((await refusal(guard, 'http://127.0.0.2/')).reason).toBe('loopback');
    expect((await refusal(guard, 'http://[::1]/')).reason).toBe('loopback');
  });

  it('allows by CIDR, for literals and for every resolved address', async () => {
    const guard = new SsrfGuard({ allow: ['127.0.0.0/8', '10.0.0.0/8', 'fd00::/8'], resolve: fixed('10.1.2.3', 'fd00:ec2::254') });
    await expect(guard.check('http://127.9.9.9/')).resolves.toMatchObject({ address: '127.9.9.9' });
    await expect(guard.check('http://internal.example/')).resolves.toMatchObject({ address: '10.1.2.3' });
  });

  it('refuses a name when one address is outside the allowed CIDRs', async () => {
    const guard = new SsrfGuard({ allow: ['10.0.0.0/8'], resolve: fixed('10.1.2.3', '192.168.1.1') });
    expect((await refusal(guard, 'http://internal.example/')).reason).toBe('private');
  });

  it('allows by hostname, whatever it resolves to, in any case and with a trailing dot', async () => {
    const guard = new SsrfGuard({ allow: ['Internal.Example'], resolve: fixed('10.1.2.3', '127.0.0.1') });
    await expect(guard.check('http://internal.example/')).resolves.toMatchObject({ address: '10.1.2.3' });
    await expect(guard.check('http://INTERNAL.example./')).resolves.toMatchObject({ address: '10.1.2.3' });
    expect((await refusal(guard, 'http://other.example/')).reason).toBe('private');
  });

  it('does not let an allowed hostname bypass the scheme or credential rules', async () => {
    const guard = new SsrfGuard({ allow: ['localhost'] });
    expect((await refusal(guard, 'ftp://localhost/')).reason).toBe('scheme');
    expect((await refusal(guard, 'http://u:p@localhost/')).reason).toBe('credentials');
  });
});

describe('SsrfGuard in front of a real loopback server', () => {
  let server: Server | undefined;
  let hits = 0;

  afterEach(async () => {
    const s = server;
    server = undefined;
    hits = 0;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  });

  async function start(): Promise<number> {
    server = createServer((_req, res) => {
      hits++;
      res.end('ok');
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', () => resolve()));
    return (server.address() as AddressInfo).port;
  }

  it.each([
    ['127.0.0.1', (port: number) => `http://127.0.0.1:${port}/`],
    ['127.0.0.0/8', (port: number) => `http://127.0.0.1:${port}/`],
    ['localhost', (port: number) => `http://localhost:${port}/`],
  ])('reaches it when the allow list holds %s', async (entry, url) => {
    const port = await start();
    const guard = new SsrfGuard({ allow: parseAllowList(entry) });
    const res = await outboundRequest({ url: url(port), method: 'GET', timeoutMs: 5_000, guard });
    expect(res).toMatchObject({ status: 200, body: 'ok' });
    expect(hits).toBe(1);
  });

  it.each([(port: number) => `http://127.0.0.1:${port}/`, (port: number) => `http://localhost:${port}/`])(
    'never reaches it without the allow list (%#)',
    async (url) => {
      const port = await start();
      await expect(outboundRequest({ url: url(port), method: 'GET', timeoutMs: 5_000, guard: new SsrfGuard() })).rejects.toMatchObject({
        code: 'ssrf_blocked',
        reason: 'loopback',
      });
      expect(hits).toBe(0);
    },
  );
});
