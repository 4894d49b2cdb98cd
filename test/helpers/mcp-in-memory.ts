/**
 * A real MCP server (the SDK's `McpServer`) reached through the SDK's in-memory transport, as
 * an `McpConnector`: each `open` links a fresh client/server pair. Headers are resolved as a
 * connector resolves them (`${var}` from the server's variables, then `{secret.NAME}` from the
 * tenant's secrets) and checked against `requireHeaders`, as a server checks a bearer token;
 * every resolved set is kept in `opened` for the test to read.
 *
 * @example
 *   const mcp = inMemoryMcp({ requireHeaders: { Authorization: 'Bearer tok' } });
 *   const registry = new McpRegistry({ ..., connector: mcp.connector });
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { McpRegistry } from '../../lib/mcp/registry';
import type { McpConnector, McpServerConnection, McpToolMeta } from '../../lib/mcp/types';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { secretResolver } from '../../lib/secrets/resolver';
import type { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import type { StoreContext } from '../../lib/store/dynamo';

export interface InMemoryMcp {
  connector: McpConnector;
  /** The headers each open sent, resolved. */
  opened: { server: McpServerConnection; headers: Record<string, string> }[];
  /** Tools the server offers from the next open on: two by default, a third with `extraTool`. */
  extraTool: boolean;
  /** When set, opening fails with this message (an unreachable server). */
  failWith?: string;
}

export function inMemoryMcp(options: { requireHeaders?: Record<string, string> } = {}): InMemoryMcp {
  const state: InMemoryMcp = {
    opened: [],
    extraTool: false,
    connector: {
      async open(server, opts) {
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(server.headers)) {
          headers[substitute(name, server.variables)] = await resolveSecrets(substitute(value, server.variables), opts.secret);
        }
        state.opened.push({ server, headers });
        if (state.failWith) throw new Error(state.failWith);
        for (const [name, value] of Object.entries(options.requireHeaders ?? {})) {
          if (headers[name] !== value) throw new Error(`HTTP 401: the server refused the credentials (${name}: ${headers[name] ?? 'missing'})`);
        }
        const mcp = toolServer(state.extraTool);
        const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
        await mcp.connect(serverSide);
        const client = new Client({ name: 'easel-test', version: '1.0.0' });
        await client.connect(clientSide);
        return {
          async listTools() {
            return (await client.listTools()).tools as McpToolMeta[];
          },
          async callTool(name, args) {
            const result = await client.callTool({ name, arguments: args });
            const content = (result.content ?? []) as { type: string; text?: string }[];
            return { isError: result.isError === true, text: content.find((c) => c.type === 'text')?.text ?? '', content };
          },
          async close() {
            await client.close();
            await mcp.close();
          },
        };
      },
    },
  };
  return state;
}

function toolServer(extraTool: boolean): McpServer {
  const server = new McpServer({ name: 'test-tools', version: '1.0.0' });
  server.registerTool('add', { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  server.registerTool('echo', { description: 'Says the text back', inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: 'text', text }] }));
  if (extraTool) server.registerTool('shout', { description: 'Says the text louder', inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: 'text', text: text.toUpperCase() }] }));
  return server;
}

/** Python's `Template.safe_substitute`: `${x}` and `$x` from the variables, the rest left. */
function substitute(text: string, variables: Record<string, unknown>): string {
  return text.replace(/\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))/g, (m, braced?: string, bare?: string) => {
    const value = variables[(braced ?? bare) as string];
    return value === undefined ? m : String(value);
  });
}

async function resolveSecrets(text: string, secret: (name: string) => string | undefined | Promise<string | undefined>): Promise<string> {
  let out = text;
  for (const m of text.matchAll(/\{secret\.([A-Za-z_][A-Za-z0-9_]{0,63})\}/g)) out = out.replace(m[0], (await secret(m[1] as string)) ?? m[0]);
  return out;
}

/** The host the test registries' guard lets through (every other name resolves to loopback, refused). */
export const MCP_TEST_URL = 'https://mcp.example.test/mcp';

/** A registry on the engine's store and the app's tenant secrets, reaching an in-memory server. */
export function testMcpRegistry(store: StoreContext, secrets: TenantSecrets, mcp: InMemoryMcp = inMemoryMcp()): McpRegistry {
  const guard = new SsrfGuard({ allow: [new URL(MCP_TEST_URL).hostname], resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
  return new McpRegistry({ store, guard, secrets, secretsFor: secretResolver({ tenantSecrets: secrets }), connector: mcp.connector });
}
