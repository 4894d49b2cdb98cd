/**
 * createGuardedFetch against real HTTP servers on loopback, behind the connection fence: the
 * guard decides before any socket exists, the socket goes to the approved address, redirects
 * follow fetch's modes with every hop re-checked, bodies stream (a chunk is read before the
 * server has finished), the caller's signal and the bounds end an exchange at any point.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createGuardedFetch, type GuardedFetchOptions } from '../../lib/outbound/guarded-fetch';
import { OutboundError, SsrfBlockedError, SsrfGuard } from '../../lib/outbound';
import { connectFence } from '../helpers/connect-fence';
import { deferred, manualTimer } from '../tools/support';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}
type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

const servers: Server[] = [];
const fence = connectFence();

async function serve(handler: Handler, host = '127.0.0.1') {
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
  return { server, port, origin: `http://${host}:${port}`, seen };
}

const echo: Handler = (req, res, body) => {
  res.setHeader('content-type', 'application/json');
  res.setHeader('set-cookie', ['a=1', 'b=2']);
  res.end(JSON.stringify({ method: req.method, headers: req.headers, body }));
};
const redirectTo = (location: string, status = 302): Handler => (_req, res) => {
  res.statusCode = status;
  res.setHeader('location', location);
  res.end('moved');
};

const loopback = (options: Partial<GuardedFetchOptions> = {}) => createGuardedFetch({ guard: new SsrfGuard({ allow: ['127.0.0.1'] }), ...options });

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

beforeEach(() => fence.install());
afterEach(async () => {
  fence.remove();
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => {
    s.closeAllConnections();
    s.close(() => resolve());
  })));
});

describe('createGuardedFetch to an allowed server', () => {
  it('sends the method, headers and body, and answers as fetch does', async () => {
    const { origin, seen } = await serve(echo);
    const res = await loopback()(`${origin}/items?q=1#frag`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer t0k', host: 'evil.example', 'accept-encoding': 'gzip' },
      body: JSON.stringify({ a: 1 }),
    });
    expect(res.status).toBe(200);
    expect(res.ok).toBe(true);
    expect(res.url).toBe(`${origin}/items?q=1`);
    expect(res.redirected).toBe(false);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    const echoed = (await res.json()) as { method: string; headers: Record<string, string>; body: string };
    expect(echoed).toMatchObject({ method: 'POST', body: '{"a":1}' });
    // the host is the URL's and the body is never compressed: both are this module's to set
    expect(echoed.headers).toMatchObject({ authorization: 'Bearer t0k', host: new URL(origin).host, 'accept-encoding': 'identity', 'content-length': '7' });
    expect(seen[0]?.url).toBe('/items?q=1');
  });

  it('accepts a Request as input', async () => {
    const { origin } = await serve(echo);
    const res = await loopback()(new Request(`${origin}/r`, { method: 'PUT', body: 'x', headers: { 'x-one': '1' } }));
    expect(await res.json()).toMatchObject({ method: 'PUT', body: 'x', headers: { 'x-one': '1' } });
  });

  it('streams the body: the first chunk is read while the server is still writing', async () => {
    const more = deferred();
    await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: one\n\n');
      void more.promise.then(() => res.end('data: two\n\n'));
    }).then(async ({ origin }) => {
      const res = await loopback()(`${origin}/sse`);
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      expect(decoder.decode((await reader.read()).value)).toBe('data: one\n\n');
      more.resolve();
      let rest = '';
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += decoder.decode(chunk.value);
      expect(rest).toBe('data: two\n\n');
    });
  });

  it('the caller’s signal ends a streaming body, and the server sees the connection close', async () => {
    const closed = deferred();
    const { origin } = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
      req.socket.on('close', () => closed.resolve());
    });
    const controller = new AbortController();
    const res = await loopback()(`${origin}/sse`, { signal: controller.signal });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    const reason = new Error('the turn was cancelled');
    controller.abort(reason);
    expect(await failure(reader.read())).toBe(reason);
    await closed.promise;
  });

  it('an already aborted signal sends nothing', async () => {
    const { origin, seen } = await serve(echo);
    const controller = new AbortController();
    controller.abort(new Error('stop'));
    expect(await failure(loopback()(origin, { signal: controller.signal }))).toMatchObject({ message: 'stop' });
    expect(seen).toEqual([]);
    expect(fence.attempts).toEqual([]);
  });

  it('a body of a 204 is null, a HEAD has none', async () => {
    const { origin } = await serve((req, res) => {
      res.statusCode = req.url === '/none' ? 204 : 200;
      res.setHeader('content-length', '5');
      res.end(req.method === 'HEAD' || req.url === '/none' ? undefined : 'hello');
    });
    expect((await loopback()(`${origin}/none`)).body).toBeNull();
    const head = await loopback()(`${origin}/`, { method: 'HEAD' });
    expect(head.body).toBeNull();
    expect(head.headers.get('content-length')).toBe('5');
  });

  it('connects to the address the guard approved, not to a fresh resolution of the name', async () => {
    const { port } = await serve(echo);
    let resolutions = 0;
    const guard = new SsrfGuard({
      allow: ['127.0.0.1'],
      resolve: async () => {
        resolutions++;
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    const res = await createGuardedFetch({ guard })(`http://mcp.example.test:${port}/`);
    expect(((await res.json()) as { headers: { host: string } }).headers.host).toBe(`mcp.example.test:${port}`);
    expect(resolutions).toBe(1);
    expect(fence.attempts).toEqual([{ host: 'mcp.example.test', port }]);
  });
});

describe('createGuardedFetch refusals happen before any connection', () => {
  it('refuses a loopback server without an allow list', async () => {
    const { origin, seen } = await serve(echo);
    const error = await failure(createGuardedFetch({ guard: new SsrfGuard() })(origin));
    expect(error).toBeInstanceOf(SsrfBlockedError);
    expect(error).toMatchObject({ reason: 'loopback', message: 'outbound request refused: 127.0.0.1 is a loopback address' });
    expect(seen).toEqual([]);
    expect(fence.attempts).toEqual([]);
  });

  it.each([
    ['http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['http://10.1.2.3/', 'private'],
    ['http://[::1]:8080/', 'loopback'],
    ['file:///etc/passwd', 'scheme'],
  ])('refuses %s', async (url, reason) => {
    expect(await failure(loopback()(url))).toMatchObject({ reason });
    expect(fence.attempts).toEqual([]);
  });
});

describe('createGuardedFetch redirects', () => {
  it('follows on the same server, re-checking the hop, and says so', async () => {
    const { origin, seen } = await serve((req, res, body) => (req.url === '/old' ? redirectTo('/new', 307)(req, res, body) : echo(req, res, body)));
    const res = await loopback()(`${origin}/old`, { method: 'POST', body: 'kept' });
    expect(res.url).toBe(`${origin}/new`);
    expect(res.redirected).toBe(true);
    expect(await res.json()).toMatchObject({ method: 'POST', body: 'kept' });
    expect(seen.map((s) => s.url)).toEqual(['/old', '/new']);
    expect(fence.attempts).toHaveLength(2);
  });

  it('turns a POST into a GET on 303, without its body', async () => {
    const { origin } = await serve((req, res, body) => (req.url === '/form' ? redirectTo('/done', 303)(req, res, body) : echo(req, res, body)));
    const res = await loopback()(`${origin}/form`, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } });
    const echoed = (await res.json()) as { method: string; headers: Record<string, string>; body: string };
    expect(echoed).toMatchObject({ method: 'GET', body: '' });
    expect(echoed.headers['content-type']).toBeUndefined();
  });

  it.each(['http://169.254.169.254/', 'http://10.0.0.7/', 'http://[::1]/', 'http://[::ffff:10.0.0.1]/'])('refuses a redirect into %s before contacting it', async (target) => {
    const { origin, port } = await serve(redirectTo(target));
    const error = await failure(loopback()(origin));
    expect(error).toBeInstanceOf(SsrfBlockedError);
    expect(fence.attempts).toEqual([{ host: '127.0.0.1', port }]);
  });

  it('drops Authorization and Cookie at another origin', async () => {
    const other = await serve(echo);
    const { origin } = await serve(redirectTo(`http://localhost:${other.port}/`));
    const guard = new SsrfGuard({ allow: ['127.0.0.1'], resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
    const res = await createGuardedFetch({ guard })(origin, { headers: { authorization: 'Bearer t0k', cookie: 'c=1', 'x-kept': 'yes' } });
    const { headers } = (await res.json()) as { headers: Record<string, string> };
    expect(headers.authorization).toBeUndefined();
    expect(headers.cookie).toBeUndefined();
    expect(headers['x-kept']).toBe('yes');
  });

  it('hands back the 3xx with redirect: manual, and refuses it with redirect: error', async () => {
    const { origin, seen } = await serve(redirectTo('http://10.0.0.7/'));
    const res = await loopback()(origin, { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('http://10.0.0.7/');
    expect(await res.text()).toBe('moved');
    expect(await failure(loopback()(origin, { redirect: 'error' }))).toMatchObject({ reason: 'protocol', transient: false });
    expect(seen).toHaveLength(2);
  });

  it('stops after maxRedirects', async () => {
    const { origin } = await serve(redirectTo('/again'));
    expect(await failure(loopback({ maxRedirects: 2 })(origin))).toMatchObject({ reason: 'too_many_redirects' });
  });
});

describe('createGuardedFetch bounds and failures', () => {
  it('times out, transiently, when no headers come (the timer fired by the test)', async () => {
    const arrived = deferred();
    const { origin } = await serve(() => arrived.resolve());
    const { timer, fireAll, armed } = manualTimer();
    const pending = failure(loopback({ timer, headersTimeoutMs: 4_000 })(origin));
    await arrived.promise;
    expect(armed.map((t) => t.ms)).toEqual([4_000]);
    fireAll();
    const error = await pending;
    expect(error).toBeInstanceOf(OutboundError);
    expect(error).toMatchObject({ reason: 'timeout', transient: true, message: `outbound request to ${origin} got no answer within 4000 ms` });
  });

  it('the headers deadline does not cut a body that streams past it', async () => {
    const more = deferred();
    const { origin } = await serve((_req, res) => {
      res.write('a');
      void more.promise.then(() => res.end('b'));
    });
    const { timer, armed } = manualTimer();
    const res = await loopback({ timer })(origin);
    expect(armed.every((t) => t.cancelled)).toBe(true);
    more.resolve();
    expect(await res.text()).toBe('ab');
  });

  it('refuses a declared length over the cap, and errors a streamed body past it', async () => {
    const { origin } = await serve((req, res) => {
      if (req.url === '/declared') {
        res.setHeader('content-length', '2000');
        res.end('x'.repeat(2000));
      } else {
        res.write('x'.repeat(600));
        res.end('y'.repeat(600));
      }
    });
    expect(await failure(loopback({ maxResponseBytes: 1000 })(`${origin}/declared`))).toMatchObject({ reason: 'response_too_large' });
    const res = await loopback({ maxResponseBytes: 1000 })(`${origin}/chunked`);
    expect(await failure(res.text())).toMatchObject({ reason: 'response_too_large', transient: false });
  });

  it('refuses a request body over its cap before connecting', async () => {
    const { origin } = await serve(echo);
    expect(await failure(loopback({ maxRequestBytes: 10 })(origin, { method: 'POST', body: 'x'.repeat(11) }))).toMatchObject({ reason: 'invalid_request' });
    expect(fence.attempts).toEqual([]);
  });

  it('reports a refused connection and a dropped one as transient', async () => {
    const { origin, server } = await serve(echo);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    expect(await failure(loopback()(origin))).toMatchObject({ reason: 'connection', transient: true });
    const dropping = await serve((req) => req.socket.destroy());
    expect(await failure(loopback()(dropping.origin))).toMatchObject({ reason: 'connection', transient: true });
  });
});
