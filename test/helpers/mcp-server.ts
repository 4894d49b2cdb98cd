/**
 * An MCP server on 127.0.0.1 built with the official SDK (McpServer), for tests: two tools
 * (`add`, `lookup_city`), served over streamable HTTP at `/mcp` and over SSE at `/sse` (its
 * messages at `/messages`), behind a plain node:http front that records every request's
 * headers and can answer otherwise: `/status/<code>/...` answers that status, `/moved/...`
 * redirects (307) to `redirectTo`. `stall()` holds the next tool calls until released (or the
 * client cancels them), for timeouts; `echoHeader` makes `lookup_city` repeat a request header
 * in its answer (a server that leaks what it was sent).
 *
 * @example
 *   const server = await McpTestServer.start();
 *   const connection = server.connection('streamable-http', { headers: { Authorization: 'Bearer {secret.MCP_TOKEN}' } });
 *   ...
 *   await server.close();
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import type { McpServerConnection, McpServerType } from '../../lib/mcp/types';

export interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  /** The JSON-RPC method of a POST (`initialize`, `tools/list`, `tools/call`, ...). */
  rpc?: string;
}

export interface SeenCall {
  tool: string;
  arguments: Record<string, unknown>;
}

const CITIES: Record<string, string> = {
  oslo: 'Oslo, Norway: population 709,037; capital since 1814.',
  lima: 'Lima, Peru: population 10,092,000; founded 1535.',
};

export class McpTestServer {
  readonly requests: SeenRequest[] = [];
  readonly calls: SeenCall[] = [];
  /** Where `/moved/...` sends the client. */
  redirectTo = '';
  /** A request header `lookup_city` repeats in its answer, when set. */
  echoHeader: string | undefined;
  readonly #streamable = new Map<string, StreamableHTTPServerTransport>();
  readonly #sse = new Map<string, SSEServerTransport>();
  #stall: { release: () => void; held: Promise<void>; arrived: () => void; calls: Promise<void> } | undefined;
  #sessionsEnded = 0;

  private constructor(
    private readonly server: Server,
    readonly origin: string,
  ) {}

  static async start(host = '127.0.0.1'): Promise<McpTestServer> {
    let self: McpTestServer | undefined;
    const server = createServer((req, res) => void self?.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    self = new McpTestServer(server, `http://${host.includes(':') ? `[${host}]` : host}:${port}`);
    return self;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** The JSON-RPC methods received, in order. */
  get rpcs(): string[] {
    return this.requests.flatMap((r) => (r.rpc ? [r.rpc] : []));
  }

  /** Streamable HTTP sessions the client ended with a DELETE. */
  get sessionsEnded(): number {
    return this.#sessionsEnded;
  }

  /** A registry entry for this server. */
  connection(type: McpServerType, extra: Partial<McpServerConnection> & { path?: string } = {}): McpServerConnection {
    const { path, ...rest } = extra;
    return {
      id: `mcp-${type}`,
      name: `Cities (${type})`,
      url: `${this.origin}${path ?? (type === 'sse' ? '/sse' : '/mcp')}`,
      server_type: type,
      headers: {},
      variables: {},
      ...rest,
    };
  }

  /** Holds tool calls from now on; `arrived` resolves when one is held, `release` lets them go. */
  stall(): { arrived: Promise<void>; release: () => void } {
    let release!: () => void;
    let arrived!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const calls = new Promise<void>((r) => (arrived = r));
    this.#stall = { release, held, arrived, calls };
    return {
      arrived: calls,
      release: () => {
        this.#stall = undefined;
        release();
      },
    };
  }

  async close(): Promise<void> {
    this.#stall?.release();
    for (const t of [...this.#streamable.values(), ...this.#sse.values()]) await t.close().catch(() => {});
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** The SDK server with the two tools, one per session as the SDK expects. */
  #mcpServer(): McpServer {
    const server = new McpServer({ name: 'cities', version: '1.0.0' });
    server.registerTool(
      'add',
      { description: 'Adds two numbers.', inputSchema: { a: z.number(), b: z.number() } },
      async ({ a, b }) => {
        await this.#held('add', { a, b });
        return { content: [{ type: 'text', text: String(a + b) }] };
      },
    );
    server.registerTool(
      'lookup_city',
      { description: 'Facts about a city: its country and population.', inputSchema: { city: z.string().describe('The city name, e.g. Oslo') } },
      async ({ city }, extra) => {
        await this.#held('lookup_city', { city }, extra.signal);
        const fact = CITIES[city.toLowerCase()];
        if (!fact) return { isError: true, content: [{ type: 'text', text: `no city named ${city}` }] };
        const echoed = this.echoHeader ? ` (${this.echoHeader}: ${String(extra.requestInfo?.headers[this.echoHeader])})` : '';
        return { content: [{ type: 'text', text: `${fact}${echoed}` }] };
      },
    );
    return server;
  }

  async #held(tool: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<void> {
    this.calls.push({ tool, arguments: args });
    const stall = this.#stall;
    if (!stall) return;
    stall.arrived();
    await new Promise<void>((resolve) => {
      void stall.held.then(resolve);
      signal?.addEventListener('abort', () => resolve(), { once: true });
    });
  }

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.origin);
    const body = await readJson(req);
    const rpc = (body as { method?: unknown } | undefined)?.method;
    this.requests.push({ method: req.method ?? '', path: url.pathname, headers: req.headers, ...(typeof rpc === 'string' ? { rpc } : {}) });
    try {
      const status = /^\/status\/(\d{3})\//.exec(url.pathname)?.[1];
      if (status) {
        res.writeHead(Number(status), { 'content-type': 'text/plain' }).end(`answered ${status}`);
      } else if (url.pathname.startsWith('/moved/')) {
        res.writeHead(307, { location: this.redirectTo }).end();
      } else if (url.pathname === '/mcp') {
        await this.#streamableRequest(req, res, body);
      } else if (url.pathname === '/sse' && req.method === 'GET') {
        const transport = new SSEServerTransport('/messages', res);
        this.#sse.set(transport.sessionId, transport);
        transport.onclose = () => this.#sse.delete(transport.sessionId);
        await this.#mcpServer().connect(transport);
      } else if (url.pathname === '/messages' && req.method === 'POST') {
        const transport = this.#sse.get(url.searchParams.get('sessionId') ?? '');
        if (!transport) res.writeHead(404).end('no such session');
        else await transport.handlePostMessage(req, res, body);
      } else {
        res.writeHead(404).end('not found');
      }
    } catch (error) {
      if (!res.headersSent) res.writeHead(500).end(String(error));
    }
  }

  async #streamableRequest(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
    const id = req.headers['mcp-session-id'];
    const existing = typeof id === 'string' ? this.#streamable.get(id) : undefined;
    if (existing) {
      if (req.method === 'DELETE') this.#sessionsEnded++;
      return existing.handleRequest(req, res, body);
    }
    if (req.method !== 'POST') return void res.writeHead(400).end('no session');
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sessionId) => void this.#streamable.set(sessionId, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) this.#streamable.delete(transport.sessionId);
    };
    await this.#mcpServer().connect(transport);
    await transport.handleRequest(req, res, body);
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
