/**
 * The runtime's MCP wiring: the connector built from the runtime's guard, and a tenant's
 * `RunMcp` handed to that tenant's runs through the engine's services.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readConfig } from '../../lib/config';
import { createRunMcp } from '../../lib/mcp/client';
import type { McpServerConnection, RunMcp } from '../../lib/mcp/types';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { buildEngine, buildGuard, buildMcpConnector } from '../../lib/runtime';
import type { StoreContext } from '../../lib/store/dynamo';
import { McpTestServer } from '../helpers/mcp-server';
import { testServices } from '../helpers/services';

let server: McpTestServer;
beforeAll(async () => {
  server = await McpTestServer.start();
});
afterAll(async () => {
  await server.close();
});

describe('the runtime', () => {
  it('hands each tenant’s runs its own MCP servers, through a connector on the runtime’s guard (EASEL_SSRF_ALLOW)', async () => {
    const config = readConfig({ EASEL_SSRF_ALLOW: '127.0.0.1' });
    const connector = buildMcpConnector({ guard: buildGuard(config) });
    const registries: Record<string, McpServerConnection[]> = { acme: [server.connection('streamable-http', { headers: { Authorization: 'Bearer {secret.MCP_TOKEN}' } })], other: [] };
    const secrets: Record<string, Record<string, string>> = { acme: { MCP_TOKEN: 'acme-token-0451' } };
    const engine = buildEngine(config, {
      // the engine's services are built without touching the store
      store: {} as StoreContext,
      models: testServices().models as never,
      guard: new SsrfGuard(),
      secretsFor: (tenant) => async (name) => secrets[tenant]?.[name],
      mcp: {
        forTenant: (tenant) => createRunMcp({ lookup: async (id) => registries[tenant]?.find((s) => s.id === id), connector, secret: (name) => secrets[tenant]?.[name] }),
      },
    });
    const acme = (engine.servicesFor?.('acme') as { mcp?: RunMcp }).mcp;
    const other = (engine.servicesFor?.('other') as { mcp?: RunMcp }).mcp;
    expect(await other?.server('mcp-streamable-http')).toBeUndefined();
    const connection = await acme?.server('mcp-streamable-http');
    if (!acme || !connection) throw new Error('the runtime gives acme no MCP server');
    const session = await acme.open(connection, {});
    try {
      expect((await session.listTools()).map((t) => t.name)).toEqual(['add', 'lookup_city']);
    } finally {
      await session.close();
    }
    expect(server.requests[0]?.headers.authorization).toBe('Bearer acme-token-0451');
  });
});
