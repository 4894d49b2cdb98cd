/**
 * From the registry to a run, as a tenant uses it: an MCP server built with the SDK on loopback
 * (let through the SSRF guard as EASEL_SSRF_ALLOW would) is registered through RAGFlow's
 * `POST /api/v1/mcp/servers` with its bearer token, which goes to the tenant's secrets; a
 * workflow whose Agent names it by `mcp_id` is created and run through the execute API, and the
 * Agent lists and calls the server's tools over the SDK's real transports with the token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpConnector } from '../../lib/mcp/client';
import { McpRegistry } from '../../lib/mcp/registry';
import type { McpServerType } from '../../lib/mcp/types';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { secretResolver } from '../../lib/secrets/resolver';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { graph } from '../helpers/dsl-builder';
import { newTenant, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { McpTestServer } from '../helpers/mcp-server';
import { OpenAiServer } from '../llm/openai-server';

const TOKEN = 'mcp-e2e-token-Qw93-kept-in-secrets';

let api: Served;
let mcp: McpTestServer;
let model: OpenAiServer;
beforeAll(async () => {
  [mcp, model] = await Promise.all([McpTestServer.start(), OpenAiServer.start()]);
  const engine = testEngine({ openaiUrl: model.url });
  const secrets = new TenantSecrets({ store: engine.store, master: new MasterKeys(new StaticKeyRing()) });
  const guard = new SsrfGuard({ allow: ['127.0.0.1'] });
  const secretsFor = secretResolver({ tenantSecrets: secrets });
  const registry = new McpRegistry({ store: engine.store, guard, secrets, secretsFor, connector: createMcpConnector({ guard }) });
  // as the runtime wires a tenant's runs: their secrets and their MCP servers
  engine.servicesFor = (tenant) => ({ ...engine.services, secret: secretsFor(tenant), mcp: registry.forTenant(tenant) });
  api = await serveApp(engine, { secrets, mcp: registry });
});
afterAll(async () => {
  await Promise.all([api?.close(), mcp?.close(), model?.close()]);
});

const agentDsl = (mcpId: string) => graph({
  begin: ['Begin', { mode: 'conversational' }, ['Agent:Calc']],
  'Agent:Calc': ['Agent', { llm_id: 'writer@Local', sys_prompt: 'You add numbers.', prompts: [{ role: 'user', content: '{sys.query}' }], max_rounds: 2, mcp: [{ mcp_id: mcpId, tools: {} }] }, ['Message:Out']],
  'Message:Out': ['Message', { content: ['{Agent:Calc@content}'] }],
});

describe.each<McpServerType>(['streamable-http', 'sse'])('an MCP server registered over RAGFlow’s API (%s)', (type) => {
  it('is listed at registration, its token moved to the tenant’s secrets, and an Agent naming it calls its tools', async () => {
    const tenant = newTenant();
    const key = await api.addKey(tenant, 'admin');
    const url = mcp.connection(type).url;
    const seen = mcp.requests.length;
    const created = await api.call('POST', '/api/v1/mcp/servers', { key, body: { name: `calc-${type}`, url, server_type: type, headers: { Authorization: `Bearer ${TOKEN}` } } });
    expect(created.json.code).toBe(0);
    expect(Object.keys(created.json.data.variables.tools).sort()).toEqual(['add', 'lookup_city']);
    expect(created.text).not.toContain(TOKEN);

    const workflow = await api.call('POST', '/workflows/v1/workflows', { key, body: { name: 'calc', dsl: agentDsl(created.json.data.id) } });
    expect(workflow.status).toBe(201);
    model.enqueue({ kind: 'tools', calls: [{ name: 'add_0', arguments: { a: 40, b: 2 } }] }, { kind: 'text', text: 'It is 42.' });
    const calls = mcp.calls.length;
    const res = await api.call('POST', `/workflows/v1/workflows/${workflow.json.id}/execute`, { key, body: { run_input: { query: 'What is 40 + 2?' } } });
    expect(res.status).toBe(200);
    expect(res.json.status).toBe('completed');
    const agent = (res.json.events as { event: string; data: any }[]).find((e) => e.event === 'node_finished' && e.data?.component_id === 'Agent:Calc');
    expect(agent?.data.outputs.use_tools).toEqual([{ name: 'add_0', arguments: { a: 40, b: 2 }, result: '42' }]);
    expect(mcp.calls.slice(calls).map((c) => [c.tool, c.arguments])).toEqual([['add', { a: 40, b: 2 }]]);
    // every request the server saw carried the token, from the tenant's secrets
    expect(mcp.requests.slice(seen).every((r) => r.headers.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(res.text).not.toContain(TOKEN);
  });
});
