/**
 * The runtime's MCP server registry on DynamoDB Local: built when the runtime is given a
 * connector, the one the APIs manage (`appDeps(runtime).mcp`) and the one each tenant's runs
 * open (`servicesFor(tenant).mcp`), one tenant at a time; without a connector there is neither,
 * and an Agent's `mcp` entries fail saying so.
 */
import { describe, expect, it } from 'vitest';
import type { ComponentContext } from '../../lib/canvas/component';
import { mcpOf } from '../../lib/components/services';
import { readConfig } from '../../lib/config';
import { appDeps } from '../../lib/http/deps';
import { buildRuntime } from '../../lib/runtime';
import { StaticKeyRing } from '../../lib/secrets/master-key';
import { newTenant } from '../helpers/engine';
import { testTable } from '../helpers/dynamo';
import { inMemoryMcp } from '../helpers/mcp-in-memory';

const TOKEN = 'runtime-mcp-token-0123456789';

describe('Runtime.mcp', () => {
  it('is what each tenant\u2019s runs open, with the tenant\u2019s secrets, and only their own servers', async () => {
    const { endpoint, tableName } = testTable();
    const mcp = inMemoryMcp({ requireHeaders: { Authorization: `Bearer ${TOKEN}` } });
    // an allow-listed address: the guard passes it without a lookup (the in-memory server is reached by no URL)
    const config = readConfig({ EASEL_DYNAMODB_ENDPOINT: endpoint, EASEL_DYNAMODB_TABLE: tableName, EASEL_SSRF_ALLOW: '127.0.0.1' });
    const runtime = buildRuntime(config, { mcpConnector: mcp.connector, secrets: { masterSource: new StaticKeyRing() } });
    try {
      expect(appDeps(runtime).mcp).toBe(runtime.mcp);
      const tenant = newTenant();
      const { server } = await runtime.mcp.create(tenant, { name: 'calc', url: 'http://127.0.0.1:9/mcp', server_type: 'streamable-http', headers: { Authorization: `Bearer ${TOKEN}` } });
      const ctx = (t: string) => ({ services: runtime.engine.servicesFor!(t) }) as unknown as ComponentContext;
      const run = mcpOf(ctx(tenant));
      const connection = await run.server(server.id);
      expect(connection).toMatchObject({ id: server.id, headers: { Authorization: '{secret.MCP_CALC_AUTHORIZATION}' } });
      const session = await run.open(connection!, {});
      expect((await session.callTool('add', { a: 20, b: 22 }, {})).text).toBe('42');
      await session.close();
      expect(await mcpOf(ctx(newTenant())).server(server.id)).toBeUndefined();
    } finally {
      runtime.dynamo.destroy();
    }
    // no connector given: the registry speaks MCP through the SSRF-guarded connector of the runtime
    const bare = buildRuntime(config);
    try {
      expect(appDeps(bare).mcp).toBe(bare.mcp);
      expect(bare.mcp).toBeDefined();
      const tenant = newTenant();
      // nothing listens on port 9: the real connector tried, and the server is kept without tools, as RAGFlow keeps it
      const created = await bare.mcp.create(tenant, { name: 'nowhere', url: 'http://127.0.0.1:9/mcp', server_type: 'streamable-http' });
      expect(created.toolsError).toMatch(/127\.0\.0\.1:9|connect|refused/i);
      expect(await mcpOf({ services: bare.engine.servicesFor!(tenant) } as unknown as ComponentContext).server('nothing')).toBeUndefined();
    } finally {
      bare.dynamo.destroy();
    }
  });
});
