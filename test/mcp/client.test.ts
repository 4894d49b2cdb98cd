/**
 * createMcpConnector against an MCP server built with the SDK on 127.0.0.1, over both
 * transports, behind the connection fence: listing and calling, headers from variables and
 * the tenant's secrets, how failures are classified, every refused address class refused before
 * any connection (also after a redirect), and timeouts on a timer the test fires.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMcpConnector, type McpConnectorDeps } from '../../lib/mcp/client';
import type { McpServerConnection, McpServerType, McpSession } from '../../lib/mcp/types';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { ToolError, ToolTransientError } from '../../lib/tools/errors';
import { connectFence } from '../helpers/connect-fence';
import { McpTestServer } from '../helpers/mcp-server';
import { deferred, manualTimer } from '../tools/support';

const TOKEN = 'mcp-token-7Hq2-never-shown';
const secrets: Record<string, string> = { MCP_TOKEN: TOKEN };
const secret = (name: string) => secrets[name];
const TYPES: McpServerType[] = ['streamable-http', 'sse'];

let server: McpTestServer;
const fence = connectFence();
const opened: McpSession[] = [];

beforeAll(async () => {
  server = await McpTestServer.start();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  server.requests.length = 0;
  server.calls.length = 0;
  server.echoHeader = undefined;
  fence.install();
});
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
  fence.remove();
});

const allowed = (deps: Partial<McpConnectorDeps> = {}) => createMcpConnector({ guard: new SsrfGuard({ allow: ['127.0.0.1'] }), ...deps });

async function open(connection: McpServerConnection, deps: Partial<McpConnectorDeps> = {}, headers?: Record<string, string>) {
  const session = await allowed(deps).open(connection, { secret, ...(headers ? { headers } : {}) });
  opened.push(session);
  return session;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a failure');
}

describe.each(TYPES)('a session over %s', (type) => {
  it('lists both tools with their schemas, calls them, and reads results as RAGFlow does', async () => {
    const session = await open(server.connection(type));
    const tools = await session.listTools();
    expect(tools.map((t) => t.name)).toEqual(['add', 'lookup_city']);
    expect(tools[0]).toMatchObject({ description: 'Adds two numbers.', enabled: true, inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } } });
    expect(await session.callTool('add', { a: 2, b: 40 }, {})).toEqual({ isError: false, text: '42', content: [{ type: 'text', text: '42' }] });
    expect((await session.callTool('lookup_city', { city: 'Oslo' }, {})).text).toMatch(/^Oslo, Norway/);
    expect(await session.callTool('lookup_city', { city: 'Atlantis' }, {})).toMatchObject({ isError: true, text: 'MCP server error: no city named Atlantis' });
    expect(await session.callTool('subtract', {}, {})).toMatchObject({ isError: true, text: 'MCP server error: MCP error -32602: Tool subtract not found' });
    expect(server.calls).toEqual([
      { tool: 'add', arguments: { a: 2, b: 40 } },
      { tool: 'lookup_city', arguments: { city: 'Oslo' } },
      { tool: 'lookup_city', arguments: { city: 'Atlantis' } },
    ]);
    expect(server.rpcs.filter((m) => m === 'initialize')).toHaveLength(1);
  });

  it('sends the server’s headers with ${var} from its variables and {secret.NAME} from the tenant, then the custom ones', async () => {
    const connection = server.connection(type, {
      headers: { Authorization: 'Bearer {secret.MCP_TOKEN}', 'X-${team}-Region': '${region}', 'X-Empty': 'Bearer ', 'X-Kept': '$unknown and $$5' },
      variables: { team: 'Data', region: 'eu-north-1', tools: {} },
    });
    const session = await open(connection, {}, { 'X-Trace': '${trace}', trace: 'on', 'X-Kept': 'custom wins' });
    await session.listTools();
    const sent = server.requests.filter((r) => r.method === 'POST' || r.method === 'GET');
    expect(sent.length).toBeGreaterThan(1);
    for (const r of sent) {
      expect(r.headers).toMatchObject({ authorization: `Bearer ${TOKEN}`, 'x-data-region': 'eu-north-1', 'x-trace': 'on', 'x-kept': 'custom wins' });
      expect(r.headers['x-empty']).toBeUndefined();
    }
  });

  it('a header naming a secret the tenant does not have fails before any request, naming it', async () => {
    const connection = server.connection(type, { headers: { Authorization: 'Bearer {secret.MISSING_TOKEN}' } });
    const error = await failure(allowed().open(connection, { secret }));
    expect(error).toBeInstanceOf(ToolError);
    expect((error as Error).message).toBe(`MCP server "Cities (${type})": the header "Authorization" uses the tenant secret MISSING_TOKEN, which is not set`);
    expect(server.requests).toEqual([]);
  });

  it('redacts secret values a server echoes back in a tool result', async () => {
    server.echoHeader = 'authorization';
    const session = await open(server.connection(type, { headers: { Authorization: 'Bearer {secret.MCP_TOKEN}' } }));
    const result = await session.callTool('lookup_city', { city: 'Lima' }, {});
    expect(result.text).toMatch(/^Lima, Peru: .*\(authorization: Bearer \[redacted\]\)$/);
    expect(JSON.stringify(result)).not.toContain(TOKEN);
  });

  it('marks the tools the registry switched off, from its cached variables.tools', async () => {
    const session = await open(server.connection(type, { variables: { tools: { add: { name: 'add', enabled: false } } } }));
    expect((await session.listTools()).map((t) => [t.name, t.enabled])).toEqual([['add', false], ['lookup_city', true]]);
  });

  it('a 5xx is transient, a 4xx permanent, a closed port transient', async () => {
    const busy = await failure(allowed().open(server.connection(type, { path: '/status/503/mcp' }), { secret }));
    expect(busy).toBeInstanceOf(ToolTransientError);
    expect((busy as Error).message).toBe(`MCP server "Cities (${type})": the server answered 503`);
    const missing = await failure(allowed().open(server.connection(type, { path: '/status/404/mcp' }), { secret }));
    expect(missing).toBeInstanceOf(ToolError);
    expect((missing as Error).message).toBe(`MCP server "Cities (${type})": the server answered 404`);

    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const refused = await failure(allowed().open({ ...server.connection(type), url: `http://127.0.0.1:${port}/mcp` }, { secret }));
    expect(refused).toBeInstanceOf(ToolTransientError);
    expect((refused as Error).message).toBe(`MCP server "Cities (${type})": outbound request to http://127.0.0.1:${port} failed: ECONNREFUSED`);
  });

  it('a stalled call times out at its timeoutMs on the connector’s timer, and the server is told to stop', async () => {
    const { timer, armed } = manualTimer();
    const session = await open(server.connection(type), { timer });
    const stall = server.stall();
    const pending = failure(session.callTool('add', { a: 1, b: 1 }, { timeoutMs: 7_000 }));
    await stall.arrived;
    const deadline = armed.find((t) => t.ms === 7_000 && !t.cancelled);
    expect(deadline).toBeDefined();
    deadline?.fire();
    const error = await pending;
    expect(error).toBeInstanceOf(ToolTransientError);
    expect((error as Error).message).toBe(`MCP server "Cities (${type})": no answer calling add within 7000 ms`);
    stall.release();
  });

  it('the caller’s signal ends a call with the caller’s reason', async () => {
    const session = await open(server.connection(type));
    const stall = server.stall();
    const controller = new AbortController();
    const pending = failure(session.callTool('add', { a: 1, b: 1 }, { signal: controller.signal }));
    await stall.arrived;
    const reason = new ToolTransientError('tool "add": the call was cancelled');
    controller.abort(reason);
    expect(await pending).toBe(reason);
    stall.release();
  });
});

describe('closing a session', () => {
  it('ends a streamable HTTP session on the server (DELETE)', async () => {
    const before = server.sessionsEnded;
    const session = await allowed().open(server.connection('streamable-http'), { secret });
    await session.listTools();
    await session.close();
    await session.close();
    expect(server.sessionsEnded - before).toBe(1);
    expect(server.requests.filter((r) => r.method === 'DELETE')).toHaveLength(1);
  });
});

describe('connecting', () => {
  let silent: Server;
  let arrived = deferred();
  beforeAll(async () => {
    // accepts and never answers
    silent = createServer(() => arrived.resolve());
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
  });
  afterAll(async () => {
    silent.closeAllConnections();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it.each(TYPES)('times out over %s at timeoutMs on the timer the test fires, as transient', async (type) => {
    const { timer, armed } = manualTimer();
    arrived = deferred();
    const { port } = silent.address() as AddressInfo;
    const pending = failure(allowed({ timer, timeoutMs: 3_000 }).open({ ...server.connection(type), url: `http://127.0.0.1:${port}/mcp` }, { secret }));
    await arrived.promise;
    armed.find((t) => t.ms === 3_000)?.fire();
    const error = await pending;
    expect(error).toBeInstanceOf(ToolTransientError);
    expect((error as Error).message).toBe(`MCP server "Cities (${type})": no answer connecting within 3000 ms`);
  });

  it('refuses a URL that is not one', async () => {
    expect(await failure(allowed().open({ ...server.connection('sse'), url: 'not a url' }, { secret }))).toMatchObject({ message: 'MCP server "Cities (sse)": its URL is not valid' });
  });
});

describe('the SSRF guard, by default', () => {
  const refusedUrls = () => [
    [`http://127.0.0.1:${server.port}/mcp`, 'loopback'],
    [`http://[::1]:${server.port}/mcp`, 'loopback'],
    [`http://[::ffff:127.0.0.1]:${server.port}/mcp`, 'loopback'],
    ['http://0.0.0.0/mcp', 'unspecified'],
    ['http://[::]/mcp', 'unspecified'],
    ['http://10.0.0.5/mcp', 'private'],
    ['http://172.16.9.9/mcp', 'private'],
    ['http://192.168.1.20/mcp', 'private'],
    ['http://100.64.0.1/mcp', 'shared'],
    ['http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['http://[fe80::1]/mcp', 'link-local'],
    ['http://[fc00::1]/mcp', 'unique-local'],
    ['http://[fd00:ec2::254]/mcp', 'unique-local'],
    ['http://[::ffff:169.254.169.254]/mcp', 'link-local'],
  ] as const;

  it.each(TYPES)('refuses every refused address class over %s before connecting, as a permanent ssrf_blocked tool error', async (type) => {
    const guard = new SsrfGuard();
    for (const [url, reason] of refusedUrls()) {
      const error = await failure(createMcpConnector({ guard }).open({ ...server.connection(type), url }, { secret }));
      expect(error, url).toBeInstanceOf(ToolError);
      expect(error, url).toMatchObject({ code: 'ssrf_blocked', cause: { reason } });
      expect((error as Error).message, url).toMatch(new RegExp(`^MCP server "Cities \\(${type}\\)": outbound request refused: .* is an? ${reason} address$`));
    }
    expect(fence.attempts).toEqual([]);
    expect(server.requests).toEqual([]);
  });

  it('refuses a name that resolves to a loopback address', async () => {
    const guard = new SsrfGuard({ resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
    const error = await failure(createMcpConnector({ guard }).open({ ...server.connection('streamable-http'), url: `http://mcp.example.test:${server.port}/mcp` }, { secret }));
    expect(error).toMatchObject({ code: 'ssrf_blocked', message: 'MCP server "Cities (streamable-http)": outbound request refused: mcp.example.test resolves to a loopback address' });
    expect(server.requests).toEqual([]);
  });

  it('is lifted for what the allow list names (EASEL_SSRF_ALLOW)', async () => {
    const session = await open(server.connection('streamable-http'));
    expect(await session.listTools()).toHaveLength(2);
  });
});

describe('redirects', () => {
  it.each(TYPES)('over %s, a redirect from an allowed server to another origin is refused, and nothing reaches it', async (type) => {
    const other = await McpTestServer.start();
    try {
      // a refused address (loopback on another port), with the allow list naming only the first
      const guard = new SsrfGuard({ allow: [`127.0.0.1`], resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
      server.redirectTo = `http://localhost:${other.port}/${type === 'sse' ? 'sse' : 'mcp'}`;
      const error = await failure(createMcpConnector({ guard }).open(server.connection(type, { path: '/moved/mcp' }), { secret: () => undefined }));
      expect(error).toBeInstanceOf(ToolError);
      expect((error as Error).message).toBe(`MCP server "Cities (${type})": the server redirected to another origin, which is not followed (headers may carry credentials)`);
      expect(other.requests).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it('a redirect within the origin is followed, and its hop checked again (a name that now resolves to a private address is refused)', async () => {
    const answers = [[{ address: '127.0.0.1', family: 4 as const }], [{ address: '10.0.0.9', family: 4 as const }]];
    let resolutions = 0;
    const guard = new SsrfGuard({ allow: ['127.0.0.1'], resolve: async () => answers[Math.min(resolutions++, 1)] ?? [] });
    server.redirectTo = '/mcp';
    const url = `http://mcp.example.test:${server.port}/moved/mcp`;
    const error = await failure(createMcpConnector({ guard }).open({ ...server.connection('streamable-http'), url }, { secret }));
    expect(error).toMatchObject({ code: 'ssrf_blocked', message: 'MCP server "Cities (streamable-http)": outbound request refused: mcp.example.test resolves to a private address' });
    expect(server.requests.map((r) => r.path)).toEqual(['/moved/mcp']);

    resolutions = 0;
    const steady = new SsrfGuard({ allow: ['127.0.0.1'], resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
    const session = await createMcpConnector({ guard: steady }).open({ ...server.connection('streamable-http'), url }, { secret });
    opened.push(session);
    expect(await session.listTools()).toHaveLength(2);
  });
});
