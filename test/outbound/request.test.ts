/**
 * outboundRequest against real HTTP servers on loopback. A fence around net.Socket#connect
 * records every connection attempt and fails any that is not to loopback, so "refused before
 * connecting" is observed, not assumed, and no test can send a packet off this machine.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import net, { type AddressInfo, isIP, type LookupFunction } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OutboundError, outboundRequest, type OutboundRequestOptions, SsrfBlockedError, SsrfGuard } from '../../lib/outbound';

// ---------------------------------------------------------------------------------------------
// Loopback servers

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}
type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;
interface TestServer {
  server: Server;
  port: number;
  /** Origin as a URL prefix, e.g. http://127.0.0.1:4321 */
  origin: string;
  seen: Seen[];
}

const servers: Server[] = [];

async function serve(handler: Handler, host = '127.0.0.1'): Promise<TestServer> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  servers.push(server);
  const { port } = server.address() as AddressInfo;
  return { server, port, origin: `http://${host.includes(':') ? `[${host}]` : host}:${port}`, seen };
}

const echo: Handler = (req, res, body) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body }));
};

function redirectTo(location: (req: IncomingMessage) => string, status = 302): Handler {
  return (req, res) => {
    res.statusCode = status;
    res.setHeader('location', location(req));
    res.end();
  };
}

// ---------------------------------------------------------------------------------------------
// The fence

interface Attempt {
  host: string;
  port: number;
}
let attempts: Attempt[] = [];
const originalConnect = net.Socket.prototype.connect;

function isLoopback(address: string): boolean {
  return /^127\./.test(address) || address === '::1' || /^::ffff:127\./i.test(address) || /^::ffff:7f[0-9a-f]{2}:/i.test(address);
}

beforeEach(() => {
  attempts = [];
  net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
    // net.createConnection passes its normalised [options, callback] array as the first argument.
    const first = args[0];
    const options = (Array.isArray(first) ? first[0] : first) as { host?: string; port?: number; lookup?: LookupFunction } | undefined;
    const host = options?.host ?? '';
    attempts.push({ host, port: Number(options?.port) });
    if (isIP(host) !== 0) {
      if (!isLoopback(host)) throw new Error(`fence: connection to ${host} attempted`);
    } else {
      const lookup = options?.lookup;
      if (!options || typeof lookup !== 'function') throw new Error(`fence: ${host} would be resolved by the system`);
      options.lookup = (hostname, opts, callback) =>
        lookup(hostname, opts, (err, address, family) => {
          const list = typeof address === 'string' ? [address] : address.map((a) => a.address);
          if (!err && !list.every(isLoopback)) return callback(new Error(`fence: ${hostname} pinned to ${list.join(',')}`), '', 0);
          callback(err, address, family);
        });
    }
    return (originalConnect as (...a: unknown[]) => net.Socket).apply(this, args);
  } as typeof net.Socket.prototype.connect;
});

afterEach(async () => {
  net.Socket.prototype.connect = originalConnect;
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.closeAllConnections();
          s.close(() => resolve());
        }),
    ),
  );
});

// ---------------------------------------------------------------------------------------------

const loopbackGuard = () => new SsrfGuard({ allow: ['127.0.0.1'] });

function request(options: Partial<OutboundRequestOptions> & Pick<OutboundRequestOptions, 'url'>) {
  return outboundRequest({ method: 'GET', timeoutMs: 5_000, guard: loopbackGuard(), ...options });
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the request to fail');
}

async function outboundFailure(promise: Promise<unknown>): Promise<OutboundError> {
  const err = await failure(promise);
  expect(err).toBeInstanceOf(OutboundError);
  return err as OutboundError;
}

async function blocked(promise: Promise<unknown>): Promise<SsrfBlockedError> {
  const err = await failure(promise);
  expect(err).toBeInstanceOf(SsrfBlockedError);
  return err as SsrfBlockedError;
}

describe('outboundRequest to an allowed loopback server', () => {
  it('sends a GET and returns status, headers, body, final URL', async () => {
    const s = await serve((_req, res) => {
      res.setHeader('x-answer', '42');
      res.setHeader('set-cookie', ['a=1', 'b=2']);
      res.end('hello');
    });
    const res = await request({ url: `${s.origin}/path?q=1#fragment`, headers: { Accept: 'text/plain' } });
    expect(res).toMatchObject({ status: 200, body: 'hello', url: `${s.origin}/path?q=1`, redirects: 0 });
    expect(res.headers['x-answer']).toBe('42');
    expect(res.headers['set-cookie']).toBe('a=1, b=2');
    expect(s.seen).toHaveLength(1);
    expect(s.seen[0]).toMatchObject({ method: 'GET', url: '/path?q=1', body: '' });
    expect(s.seen[0]?.headers).toMatchObject({ host: `127.0.0.1:${s.port}`, accept: 'text/plain', 'user-agent': 'easel' });
    expect(attempts).toHaveLength(1);
  });

  it('sends a POST with a JSON body', async () => {
    const s = await serve(echo);
    const payload = { name: 'Ada', tags: ['x', 'ü'] };
    const res = await request({
      url: `${s.origin}/items`,
      method: 'post',
      headers: { 'Content-Type': 'application/json', 'Content-Length': '1', Host: 'evil.example' },
      body: JSON.stringify(payload),
    });
    expect(res.status).toBe(200);
    const echoed = JSON.parse(res.body) as { method: string; headers: Record<string, string>; body: string };
    expect(echoed.method).toBe('POST');
    expect(JSON.parse(echoed.body)).toEqual(payload);
    expect(echoed.headers['content-type']).toBe('application/json');
    // The caller cannot set the framing or the Host header.
    expect(echoed.headers['content-length']).toBe(String(Buffer.byteLength(JSON.stringify(payload))));
    expect(echoed.headers.host).toBe(`127.0.0.1:${s.port}`);
  });

  it('sends a Uint8Array body as is and decodes the response charset', async () => {
    const s = await serve((_req, res, body) => {
      res.setHeader('content-type', 'text/plain; charset=iso-8859-1');
      res.end(Buffer.from(`${body.length} caf\xe9`, 'latin1'));
    });
    const bytes = new Uint8Array([0, 1, 2, 104, 105, 0]).subarray(3, 5);
    const res = await request({ url: s.origin, method: 'PUT', body: bytes });
    expect(res.body).toBe('2 café');
    expect(s.seen[0]?.body).toBe('hi');
  });

  it('returns error statuses as responses (the caller decides)', async () => {
    const s = await serve((_req, res) => {
      res.statusCode = 503;
      res.end('busy');
    });
    await expect(request({ url: s.origin })).resolves.toMatchObject({ status: 503, body: 'busy' });
  });

  it('allows by CIDR (127.0.0.0/8)', async () => {
    const s = await serve(echo);
    const res = await request({ url: `${s.origin}/`, guard: new SsrfGuard({ allow: ['127.0.0.0/8'] }) });
    expect(res.status).toBe(200);
  });

  it('allows by hostname (localhost, real resolver)', async () => {
    const s = await serve(echo);
    const res = await request({ url: `http://localhost:${s.port}/x`, guard: new SsrfGuard({ allow: ['localhost'] }) });
    expect(res.status).toBe(200);
    expect(s.seen[0]?.headers.host).toBe(`localhost:${s.port}`);
  });

  it('connects to the address the guard approved, not to a fresh resolution of the name', async () => {
    const s = await serve(echo);
    const calls: string[] = [];
    const guard = new SsrfGuard({
      allow: ['127.0.0.1'],
      resolve: async (hostname) => {
        calls.push(hostname);
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    // `api.internal.test` exists nowhere; only the pinned lookup can make this reach the server.
    const res = await request({ url: `http://api.internal.test:${s.port}/v1`, guard });
    expect(res.status).toBe(200);
    expect(s.seen[0]?.headers.host).toBe(`api.internal.test:${s.port}`);
    expect(calls).toEqual(['api.internal.test']);
  });
});

describe('outboundRequest refusals happen before any connection', () => {
  it('refuses the same loopback server without an allow list', async () => {
    const s = await serve(echo);
    const err = await blocked(request({ url: `${s.origin}/`, guard: new SsrfGuard() }));
    expect(err).toMatchObject({ code: 'ssrf_blocked', reason: 'loopback', host: '127.0.0.1' });
    expect(s.seen).toHaveLength(0);
    expect(attempts).toHaveLength(0);
  });

  it.each([
    ['http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['http://[fd00:ec2::254]/latest/meta-data/', 'unique-local'],
    ['http://[::ffff:169.254.169.254]/', 'link-local'],
    ['http://[::ffff:a9fe:a9fe]/', 'link-local'],
    ['http://[64:ff9b::169.254.169.254]/', 'link-local'],
    ['http://[2002:a9fe:a9fe::1]/', 'link-local'],
    ['http://[fe80::1]/', 'link-local'],
    ['http://2130706433/', 'loopback'],
    ['http://0177.0.0.1/', 'loopback'],
    ['http://0x7f.1/', 'loopback'],
    ['http://0x7f000001/', 'loopback'],
    ['http://127.1/', 'loopback'],
    ['http://0xa9fea9fe/', 'link-local'],
    ['http://[::1]/', 'loopback'],
    ['http://[::ffff:127.0.0.1]:8080/', 'loopback'],
    ['http://[::127.0.0.1]/', 'loopback'],
    ['http://0.0.0.0/', 'unspecified'],
    ['http://0/', 'unspecified'],
    ['http://[::]/', 'unspecified'],
    ['http://10.0.0.1/', 'private'],
    ['http://172.16.5.4:8443/', 'private'],
    ['https://192.168.1.1/', 'private'],
    ['http://[::ffff:10.0.0.1]/', 'private'],
    ['http://100.64.0.1/', 'shared'],
    ['http://[fc00::1]/', 'unique-local'],
    ['http://224.0.0.1/', 'multicast'],
    ['http://[ff02::1]/', 'multicast'],
    ['http://240.0.0.1/', 'reserved'],
    ['http://255.255.255.255/', 'reserved'],
    ['http://192.0.0.170/', 'reserved'],
    ['http://198.18.0.1/', 'reserved'],
    ['http://[100::1]/', 'reserved'],
    ['http://192.0.2.1/', 'documentation'],
    ['http://198.51.100.1/', 'documentation'],
    ['http://203.0.113.1/', 'documentation'],
    ['http://[2001:db8::1]/', 'documentation'],
  ])('%s is refused as %s', async (url, reason) => {
    const err = await blocked(request({ url, guard: new SsrfGuard() }));
    expect(err.reason).toBe(reason);
    expect(attempts).toHaveLength(0);
  });

  it('lets through exactly what the allow list names', async () => {
    for (const url of ['http://127.0.0.2/', 'http://[::1]/', 'http://10.0.0.1/']) {
      await expect(request({ url, guard: new SsrfGuard({ allow: ['127.0.0.1'] }) })).rejects.toBeInstanceOf(SsrfBlockedError);
    }
    expect(attempts).toHaveLength(0);
  });

  it('refuses non-http schemes and credentials', async () => {
    expect((await blocked(request({ url: 'file:///etc/passwd' }))).reason).toBe('scheme');
    expect((await blocked(request({ url: 'ftp://127.0.0.1/' }))).reason).toBe('scheme');
    expect((await blocked(request({ url: 'http://user:secret@127.0.0.1/' }))).reason).toBe('credentials');
    expect(attempts).toHaveLength(0);
  });

  it('refuses a name that resolves to a private address', async () => {
    const guard = new SsrfGuard({ resolve: async () => [{ address: '10.1.2.3', family: 4 }] });
    const err = await blocked(request({ url: 'http://internal.example/admin', guard }));
    expect(err).toMatchObject({ reason: 'private', host: 'internal.example' });
    expect(attempts).toHaveLength(0);
  });

  it('refuses a name with one public and one private address', async () => {
    const guard = new SsrfGuard({
      resolve: async () => [
        { address: '93.184.216.34', family: 4 },
        { address: '192.168.0.10', family: 4 },
      ],
    });
    expect((await blocked(request({ url: 'http://mixed.example/', guard }))).reason).toBe('private');
    expect(attempts).toHaveLength(0);
  });

  it('refuses localhost through the real resolver', async () => {
    const s = await serve(echo);
    const err = await blocked(request({ url: `http://localhost:${s.port}/`, guard: new SsrfGuard() }));
    expect(err.reason).toBe('loopback');
    expect(s.seen).toHaveLength(0);
    expect(attempts).toHaveLength(0);
  });

  it('reports an invalid URL as a permanent failure', async () => {
    const err = await outboundFailure(request({ url: 'not a url' }));
    expect(err).toMatchObject({ code: 'outbound_failed', reason: 'invalid_url', transient: false });
  });
});

describe('outboundRequest redirects', () => {
  it('follows a redirect on the same server', async () => {
    const s = await serve((req, res) => (req.url === '/final' ? res.end('done') : redirectTo(() => '/final', 301)(req, res, '')));
    const res = await request({ url: `${s.origin}/start` });
    expect(res).toMatchObject({ status: 200, body: 'done', url: `${s.origin}/final`, redirects: 1 });
  });

  it('refuses a redirect to the metadata address before contacting it', async () => {
    const s = await serve(redirectTo(() => 'http://169.254.169.254/latest/meta-data/iam/security-credentials/'));
    const err = await blocked(request({ url: `${s.origin}/` }));
    expect(err).toMatchObject({ code: 'ssrf_blocked', reason: 'link-local', host: '169.254.169.254' });
    expect(err.message).not.toContain('security-credentials');
    expect(s.seen).toHaveLength(1);
    expect(attempts).toEqual([{ host: '127.0.0.1', port: s.port }]);
  });

  it('refuses a redirect to [::1] before contacting it', async () => {
    let v6: TestServer | undefined;
    try {
      v6 = await serve(echo, '::1');
    } catch {
      v6 = undefined; // no IPv6 loopback here: the refusal is still checked through the fence
    }
    const port = v6?.port ?? 9;
    const s = await serve(redirectTo(() => `http://[::1]:${port}/`, 307));
    const err = await blocked(request({ url: `${s.origin}/`, method: 'POST', body: '{}' }));
    expect(err).toMatchObject({ reason: 'loopback', host: '[::1]' });
    if (v6) expect(v6.seen).toHaveLength(0);
    expect(attempts).toEqual([{ host: '127.0.0.1', port: s.port }]);
  });

  it('refuses a redirect to another scheme', async () => {
    const s = await serve(redirectTo(() => 'file:///etc/passwd'));
    expect((await blocked(request({ url: s.origin }))).reason).toBe('scheme');
  });

  it('re-resolves and re-checks the name on every hop', async () => {
    const s = await serve((req, res) => (req.url === '/2' ? res.end('no') : redirectTo(() => '/2')(req, res, '')));
    const answers = [[{ address: '127.0.0.1', family: 4 as const }], [{ address: '10.0.0.5', family: 4 as const }]];
    const guard = new SsrfGuard({ allow: ['127.0.0.1'], resolve: async () => answers.shift() ?? [] });
    const err = await blocked(request({ url: `http://rebind.test:${s.port}/1`, guard }));
    expect(err.reason).toBe('private');
    expect(s.seen.map((r) => r.url)).toEqual(['/1']);
  });

  it.each([
    [303, 'POST', 'GET', ''],
    [303, 'PUT', 'GET', ''],
    [301, 'POST', 'GET', ''],
    [302, 'POST', 'GET', ''],
    [302, 'PUT', 'PUT', '{"a":1}'],
    [307, 'POST', 'POST', '{"a":1}'],
    [308, 'POST', 'POST', '{"a":1}'],
  ])('%i after %s continues as %s', async (status, method, expectedMethod, expectedBody) => {
    const s = await serve((req, res, body) => (req.url === '/next' ? echo(req, res, body) : redirectTo(() => '/next', status)(req, res, body)));
    const res = await request({ url: `${s.origin}/`, method, headers: { 'content-type': 'application/json' }, body: '{"a":1}' });
    const echoed = JSON.parse(res.body) as { method: string; body: string; headers: Record<string, string> };
    expect(echoed.method).toBe(expectedMethod);
    expect(echoed.body).toBe(expectedBody);
    expect(echoed.headers['content-type']).toBe(expectedBody ? 'application/json' : undefined);
  });

  it('drops Authorization and Cookie when the origin changes, keeps them on the same origin', async () => {
    const other = await serve(echo);
    const s = await serve((req, res, body) =>
      req.url === '/same' ? redirectTo(() => `${other.origin}/other`)(req, res, body) : redirectTo(() => '/same')(req, res, body),
    );
    const res = await request({
      url: `${s.origin}/`,
      headers: { Authorization: 'Bearer secret', Cookie: 'sid=1', 'X-Trace': 't1' },
    });
    expect(res.redirects).toBe(2);
    expect(s.seen[1]?.headers).toMatchObject({ authorization: 'Bearer secret', cookie: 'sid=1' });
    expect(other.seen[0]?.headers.authorization).toBeUndefined();
    expect(other.seen[0]?.headers.cookie).toBeUndefined();
    expect(other.seen[0]?.headers['x-trace']).toBe('t1');
  });

  it('fails after too many redirects (a loop)', async () => {
    const s = await serve(redirectTo((req) => req.url ?? '/'));
    const err = await outboundFailure(request({ url: `${s.origin}/loop` }));
    expect(err).toMatchObject({ reason: 'too_many_redirects', transient: false });
    expect(s.seen).toHaveLength(6); // the first request and 5 redirects followed
  });

  it('honours maxRedirects: 0', async () => {
    const s = await serve(redirectTo(() => '/elsewhere'));
    const err = await outboundFailure(request({ url: s.origin, maxRedirects: 0 }));
    expect(err.reason).toBe('too_many_redirects');
    expect(s.seen).toHaveLength(1);
  });

  it('returns a redirect status without Location as the response', async () => {
    const s = await serve((_req, res) => {
      res.statusCode = 302;
      res.end('nowhere');
    });
    await expect(request({ url: s.origin })).resolves.toMatchObject({ status: 302, body: 'nowhere', redirects: 0 });
  });
});

describe('outboundRequest limits and failures', () => {
  it('refuses a response whose declared length exceeds the cap (default 1 MiB)', async () => {
    const s = await serve((_req, res) => res.end(Buffer.alloc(1024 * 1024 + 1, 120)));
    const err = await outboundFailure(request({ url: s.origin }));
    expect(err).toMatchObject({ reason: 'response_too_large', transient: false });
  });

  it('stops reading a streamed (chunked) response at the cap', async () => {
    const s = await serve((_req, res) => {
      const chunk = Buffer.alloc(4096, 120);
      const write = (left: number): void => {
        if (left === 0 || res.destroyed) return void res.end();
        res.write(chunk, () => write(left - 1));
      };
      write(1000);
    });
    const err = await outboundFailure(request({ url: s.origin, maxResponseBytes: 10_000 }));
    expect(err.reason).toBe('response_too_large');
  });

  it('does not hold the declared length of a HEAD response against the cap', async () => {
    const s = await serve((_req, res) => {
      res.setHeader('content-length', String(50 * 1024 * 1024));
      res.end();
    });
    await expect(request({ url: s.origin, method: 'HEAD' })).resolves.toMatchObject({ status: 200, body: '' });
  });

  it('accepts a response of exactly the cap', async () => {
    const s = await serve((_req, res) => res.end('x'.repeat(100)));
    await expect(request({ url: s.origin, maxResponseBytes: 100 })).resolves.toMatchObject({ body: 'x'.repeat(100) });
  });

  it('times out, transiently, when the server never answers', async () => {
    const s = await serve(() => undefined);
    const started = Date.now();
    const err = await outboundFailure(request({ url: `${s.origin}/hook/s3cr3t-path?token=s3cr3t`, timeoutMs: 300 }));
    const elapsed = Date.now() - started;
    expect(err).toMatchObject({ reason: 'timeout', transient: true });
    expect(err.message).toBe(`outbound request to ${s.origin} timed out after 300 ms`);
    // not before the deadline; after it, the reason says the deadline ended it
    expect(elapsed).toBeGreaterThanOrEqual(280);
    expect(s.seen).toHaveLength(1);
  });

  it('keeps one deadline across redirects', async () => {
    const s = await serve((req, res) => setTimeout(() => redirectTo(() => `/${Number(req.url?.slice(1)) + 1}`)(req, res, ''), 150));
    // a deadline per hop would follow all 20 redirects (3 s) and fail on their number instead
    const err = await outboundFailure(request({ url: `${s.origin}/0`, timeoutMs: 500, maxRedirects: 20 }));
    expect(err.reason).toBe('timeout');
    expect(s.seen.length).toBeLessThanOrEqual(4);
  });

  it('counts name resolution against the deadline', async () => {
    const guard = new SsrfGuard({ resolve: () => new Promise(() => undefined) });
    const err = await outboundFailure(request({ url: 'http://slow-dns.test/', guard, timeoutMs: 200 }));
    expect(err).toMatchObject({ reason: 'timeout', transient: true });
    expect(attempts).toHaveLength(0);
  });

  it('reports a refused connection as transient', async () => {
    const s = await serve(echo);
    const port = s.port;
    await new Promise<void>((resolve) => s.server.close(() => resolve()));
    const err = await outboundFailure(request({ url: `http://127.0.0.1:${port}/` }));
    expect(err).toMatchObject({ reason: 'connection', transient: true });
    expect((err.cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
    expect(err.message).toBe(`outbound request to http://127.0.0.1:${port} failed: ECONNREFUSED`);
  });

  it('reports a dropped connection (socket hang up) as transient', async () => {
    const s = await serve((req) => req.socket.destroy());
    const err = await outboundFailure(request({ url: s.origin }));
    expect(err).toMatchObject({ reason: 'connection', transient: true });
  });

  it('stops when the caller aborts', async () => {
    const controller = new AbortController();
    // aborted once the server has the request; a request that did not stop would time out instead
    const s = await serve(() => controller.abort());
    const err = await outboundFailure(request({ url: s.origin, signal: controller.signal, timeoutMs: 60_000 }));
    expect(err).toMatchObject({ reason: 'aborted', transient: true });
  });

  it('does nothing when the caller signal is already aborted', async () => {
    const s = await serve(echo);
    const err = await outboundFailure(request({ url: s.origin, signal: AbortSignal.abort() }));
    expect(err.reason).toBe('aborted');
    expect(attempts).toHaveLength(0);
  });

  it('rejects an invalid header before connecting', async () => {
    const s = await serve(echo);
    const err = await outboundFailure(request({ url: s.origin, headers: { 'bad header': 'x' } }));
    expect(err).toMatchObject({ reason: 'invalid_request', transient: false });
    expect(s.seen).toHaveLength(0);
    expect(attempts).toHaveLength(0);
  });
});
