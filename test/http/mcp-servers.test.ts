/**
 * The MCP server registry through both APIs: RAGFlow's /api/v1/mcp/servers (its shapes, codes
 * and messages) and the native /workflows/v1/mcp-servers, against DynamoDB Local and a real SDK
 * MCP server over the in-memory transport. No credential appears in an answer, a log line or a
 * stored item.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpRegistry } from '../../lib/mcp/registry';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { secretResolver } from '../../lib/secrets/resolver';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { decompress } from '../../lib/store/codec';
import { newTenant, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { inMemoryMcp } from '../helpers/mcp-in-memory';

const TOKEN = 'mcp_http_secret_token_0123456789abcdef';
const URL_OK = 'https://mcp.example.test/mcp';
const logged: string[] = [];
let api: Served;
let mcp: ReturnType<typeof inMemoryMcp>;
let secrets: TenantSecrets;

beforeAll(async () => {
  const engine = testEngine();
  secrets = new TenantSecrets({ store: engine.store, master: new MasterKeys(new StaticKeyRing()) });
  mcp = inMemoryMcp({ requireHeaders: { Authorization: `Bearer ${TOKEN}` } });
  const guard = new SsrfGuard({ allow: ['mcp.example.test'], resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
  const registry = new McpRegistry({ store: engine.store, guard, secrets, secretsFor: secretResolver({ tenantSecrets: secrets }), connector: mcp.connector });
  api = await serveApp(engine, { secrets, mcp: registry, logger: { info: (m, f) => void logged.push(`${m} ${JSON.stringify(f ?? {})}`), error: (m, f) => void logged.push(`${m} ${JSON.stringify(f ?? {})}`) } });
});

afterAll(async () => {
  await api?.close();
});

async function storedText(tenant: string): Promise<string> {
  const { doc, table } = api.engine.store;
  const texts: string[] = [];
  for (const pk of [`T#${tenant}#MCP`, `T#${tenant}`]) {
    const { Items } = await doc.send(new QueryCommand({ TableName: table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk } }));
    for (const item of Items ?? []) texts.push(JSON.stringify({ ...item, doc: item.doc ? decompress(item.doc as Uint8Array) : undefined }));
  }
  return texts.join('\n');
}

describe('RAGFlow /api/v1/mcp/servers', () => {
  it('creates, gets, lists, updates, exports and deletes in RAGFlow\u2019s shapes', async () => {
    const key = await api.addKey(newTenant(), 'admin');
    const tenant = (await api.call('GET', '/api/v1/mcp/servers', { key })).json;
    expect(tenant).toEqual({ code: 0, message: 'success', data: { mcp_servers: [], total: 0 } });

    const created = await api.call('POST', '/api/v1/mcp/servers', { key, body: { name: 'docs', url: URL_OK, server_type: 'streamable-http', headers: JSON.stringify({ Authorization: `Bearer ${TOKEN}` }), timeout: 5 } });
    expect(created.json).toMatchObject({ code: 0, message: 'success; headers.Authorization is kept as the tenant secret MCP_DOCS_AUTHORIZATION' });
    const server = created.json.data;
    expect(server).toMatchObject({ id: expect.stringMatching(/^[0-9a-f]{32}$/), name: 'docs', url: URL_OK, server_type: 'streamable-http', description: null, headers: { Authorization: '{secret.MCP_DOCS_AUTHORIZATION}' } });
    expect(Object.keys(server)).toEqual(['id', 'name', 'tenant_id', 'url', 'server_type', 'description', 'variables', 'headers', 'create_time', 'create_date', 'update_time', 'update_date']);
    expect(server.variables.tools.add).toMatchObject({ name: 'add', enabled: true, inputSchema: { type: 'object' } });
    expect(created.text).not.toContain(TOKEN);

    const got = await api.call('GET', `/api/v1/mcp/servers/${server.id}`, { key });
    expect(got.json).toEqual({ code: 0, message: 'success', data: server });
    const listed = await api.call('GET', '/api/v1/mcp/servers?keywords=DOC&page=1&page_size=10', { key });
    expect(listed.json.data.total).toBe(1);
    expect(Object.keys(listed.json.data.mcp_servers[0])).toEqual(['id', 'name', 'server_type', 'url', 'description', 'variables', 'create_date', 'update_date']);
    expect((await api.call('GET', `/api/v1/mcp/servers?mcp_ids=${'f'.repeat(32)},${server.id}`, { key })).json.data.total).toBe(1);
    expect((await api.call('GET', '/api/v1/mcp/servers?keywords=nothing', { key })).json.data).toEqual({ mcp_servers: [], total: 0 });

    // update: the switch a client sends in variables.tools is kept across the listing RAGFlow's update does
    const updated = await api.call('PUT', `/api/v1/mcp/servers/${server.id}`, { key, body: { description: 'Docs search', variables: { tools: { echo: { enabled: false } } } } });
    expect(updated.json).toMatchObject({ code: 0, message: 'success', data: { description: 'Docs search', headers: server.headers, variables: { tools: { add: { enabled: true }, echo: { enabled: false } } } } });

    const exported = await api.call('GET', `/api/v1/mcp/servers/${server.id}?mode=download`, { key });
    expect(exported.json).toMatchObject({ code: 0, data: { mcpServers: { docs: { type: 'streamable-http', url: URL_OK, name: 'docs', authorization_token: '', tools: { echo: { enabled: false } } } } } });

    const tested = await api.call('POST', `/api/v1/mcp/servers/${server.id}/test`, { key, body: { url: URL_OK, server_type: 'streamable-http' } });
    expect(tested.json.data.map((t: { name: string; enabled: boolean }) => [t.name, t.enabled])).toEqual([['add', true], ['echo', false]]);

    expect((await api.call('DELETE', `/api/v1/mcp/servers/${server.id}`, { key })).json).toEqual({ code: 0, message: 'success', data: true });
    const tenantId = server.tenant_id;
    expect((await api.call('GET', `/api/v1/mcp/servers/${server.id}`, { key })).json).toEqual({ code: 102, message: `Cannot find MCP server ${server.id} for user ${tenantId}` });
    expect((await api.call('DELETE', `/api/v1/mcp/servers/${server.id}`, { key })).json).toEqual({ code: 102, message: `Cannot find MCP server ${server.id} for user ${tenantId}` });
    expect(await secrets.list(tenantId)).toEqual([]);
  });

  it('refuses with RAGFlow\u2019s codes and messages', async () => {
    const key = await api.addKey(newTenant(), 'admin');
    const post = async (body: unknown, path = '/api/v1/mcp/servers') => (await api.call('POST', path, { key, body })).json;
    const ok = { name: 'n', url: URL_OK, server_type: 'sse' };
    expect(await post({ name: 'n' })).toEqual({ code: 101, message: 'required argument are missing: url,server_type; ' });
    expect(await post({ ...ok, server_type: 'stdio' })).toEqual({ code: 102, message: 'Unsupported MCP server type.' });
    expect(await post({ ...ok, name: 'é'.repeat(200) })).toEqual({ code: 102, message: 'Invalid MCP name or length is 200 which is large than 255.' });
    expect(await post({ ...ok, name: '' })).toEqual({ code: 102, message: 'Invalid MCP name or length is 0 which is large than 255.' });
    expect(await post({ ...ok, url: '' })).toEqual({ code: 102, message: 'Invalid url.' });
    expect(await post({ ...ok, url: 'http://169.254.169.254/' })).toEqual({ code: 102, message: 'outbound request refused: 169.254.169.254 is a link-local address' });
    expect(await post({ ...ok, headers: { 'X-Bad': 1 } })).toEqual({ code: 101, message: 'headers.X-Bad: a header value is a string' });
    expect((await post(ok)).code).toBe(0);
    expect(await post({ ...ok, name: 'N' })).toEqual({ code: 102, message: 'Duplicated MCP server name.' });
    expect(await post([1], '/api/v1/mcp/servers')).toEqual({ code: 101, message: 'The request body must be a JSON object.' });
    // test
    const test = (body: unknown) => post(body, `/api/v1/mcp/servers/${'a'.repeat(32)}/test`);
    expect(await test({ url: URL_OK })).toEqual({ code: 101, message: 'required argument are missing: server_type; ' });
    expect(await test({ url: 3, server_type: 'sse' })).toEqual({ code: 102, message: 'Invalid MCP url.' });
    expect(await test({ url: URL_OK, server_type: 'x' })).toEqual({ code: 102, message: 'Unsupported MCP server type.' });
    expect(await test({ url: URL_OK, server_type: 'sse', headers: { Authorization: 'Bearer wrong-0123456789' } })).toEqual({ code: 102, message: 'Test MCP error: HTTP 401: the server refused the credentials (Authorization: [redacted])' });
    // list
    expect((await api.call('GET', '/api/v1/mcp/servers?page_size=101', { key })).json).toEqual({ code: 101, message: 'page_size must be less than or equal to 100' });
    const ids = Array.from({ length: 101 }, (_, i) => String(i)).join(',');
    expect((await api.call('GET', `/api/v1/mcp/servers?mcp_ids=${ids}`, { key })).json).toEqual({ code: 101, message: 'mcp_ids must contain at most 100 IDs' });
    // import
    expect(await post({}, '/api/v1/mcp/servers/import')).toEqual({ code: 101, message: 'required argument are missing: mcpServers; ' });
    expect(await post({ mcpServers: {} }, '/api/v1/mcp/servers/import')).toEqual({ code: 102, message: 'No MCP servers provided.' });
  });

  it('imports an mcpServers document, its token a tenant secret, one result per server', async () => {
    const tenant = newTenant();
    const key = await api.addKey(tenant, 'admin');
    const answer = await api.call('POST', '/api/v1/mcp/servers/import', {
      key,
      body: { mcpServers: { docs: { type: 'sse', url: URL_OK, authorization_token: TOKEN }, again: { type: 'sse', url: URL_OK, authorization_token: TOKEN }, bad: { url: URL_OK }, far: { type: 'sse', url: 'http://10.1.2.3/' }, docs_dup: { type: 'x', url: URL_OK } } },
    });
    expect(answer.json).toMatchObject({ code: 0, message: 'success' });
    expect(answer.json.data.results).toEqual([
      { server: 'docs', success: true, action: 'created', id: expect.any(String), new_name: 'docs' },
      { server: 'again', success: true, action: 'created', id: expect.any(String), new_name: 'again' },
      { server: 'bad', success: false, message: 'Missing required fields (type or url)' },
      { server: 'far', success: false, message: 'outbound request refused: 10.1.2.3 is a private address' },
      { server: 'docs_dup', success: false, message: 'Unsupported MCP server type.' },
    ]);
    const again = await api.call('POST', '/api/v1/mcp/servers/import', { key, body: { mcpServers: { docs: { type: 'sse', url: URL_OK } } } });
    expect(again.json.data.results[0]).toMatchObject({ success: true, new_name: 'docs_0', message: "Renamed from 'docs' to 'docs_0' avoid duplication" });
    const docs = (await api.call('GET', `/api/v1/mcp/servers/${answer.json.data.results[0].id}`, { key })).json.data;
    expect(docs.variables.authorization_token).toBe('{secret.MCP_DOCS_AUTHORIZATION_TOKEN}');
    expect(Object.keys(docs.variables.tools)).toEqual(['add', 'echo']);
    expect(mcp.opened.some((o) => o.headers.Authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(answer.text + again.text).not.toContain(TOKEN);
    expect(await storedText(tenant)).not.toContain(TOKEN);
  });

  it('is for admin keys: a bare execute key is refused as on every RAGFlow route (an end user\u2019s: isolation suite)', async () => {
    const { json } = await api.call('GET', '/api/v1/mcp/servers', { key: await api.addKey(newTenant(), 'execute') });
    expect(json).toMatchObject({ code: 109, data: false });
  });
});

describe('native /workflows/v1/mcp-servers', () => {
  it('creates, reads, lists, changes, relists and deletes', async () => {
    const tenant = newTenant();
    const key = await api.addKey(tenant, 'admin');
    const made = await api.call('POST', '/workflows/v1/mcp-servers', { key, body: { name: 'Search', url: URL_OK, server_type: 'sse', headers: { Authorization: `Bearer ${TOKEN}` }, description: 'search tools' } });
    expect(made.status).toBe(201);
    expect(made.json).toMatchObject({
      name: 'Search',
      headers: { Authorization: '{secret.MCP_SEARCH_AUTHORIZATION}' },
      variables: {},
      secrets: [{ field: 'headers.Authorization', secret: 'MCP_SEARCH_AUTHORIZATION' }],
      tools: [{ name: 'add', enabled: true }, { name: 'echo', enabled: true }],
    });
    expect(made.json.tools_error).toBeUndefined();
    const id = made.json.id;
    expect((await api.call('GET', `/workflows/v1/mcp-servers/${id}`, { key })).json).toMatchObject({ id, description: 'search tools', created_at: expect.any(String) });
    const opens = mcp.opened.length;
    const switched = await api.call('PATCH', `/workflows/v1/mcp-servers/${id}`, { key, body: { tools: { add: { enabled: false } }, name: 'Search 2' } });
    expect(switched.json).toMatchObject({ name: 'Search 2', secrets: [], tools: [{ name: 'add', enabled: false }, { name: 'echo', enabled: true }] });
    // nothing of the connection changed: no listing
    expect(mcp.opened.length).toBe(opens);
    const relisted = await api.call('POST', `/workflows/v1/mcp-servers/${id}/tools`, { key });
    expect(relisted.json.tools.map((t: { enabled: boolean }) => t.enabled)).toEqual([false, true]);
    expect(mcp.opened.length).toBe(opens + 1);

    for (let i = 0; i < 2; i++) await api.call('POST', '/workflows/v1/mcp-servers', { key, body: { name: `extra ${i}`, url: URL_OK, server_type: 'sse' } });
    const first = await api.call('GET', '/workflows/v1/mcp-servers?limit=2', { key });
    expect(first.json.items.map((s: { name: string }) => s.name)).toEqual(['extra 1', 'extra 0']);
    const second = await api.call('GET', `/workflows/v1/mcp-servers?limit=2&cursor=${first.json.next_cursor}`, { key });
    expect([second.json.items.map((s: { name: string }) => s.name), second.json.next_cursor]).toEqual([['Search 2'], null]);

    expect((await api.call('DELETE', `/workflows/v1/mcp-servers/${id}`, { key })).status).toBe(204);
    expect((await api.call('GET', `/workflows/v1/mcp-servers/${id}`, { key })).json).toEqual({ code: 'not_found', error: 'MCP server not found' });
    expect((await api.call('DELETE', `/workflows/v1/mcp-servers/${id}`, { key })).status).toBe(404);
    expect(await secrets.list(tenant)).toEqual([]);
    expect(made.text + switched.text + relisted.text).not.toContain(TOKEN);
  });

  it('refuses naming the field, and imports with one result per server', async () => {
    const tenant = newTenant();
    const key = await api.addKey(tenant, 'admin');
    const post = async (body: unknown) => api.call('POST', '/workflows/v1/mcp-servers', { key, body });
    expect((await post({ name: 'x', url: URL_OK, server_type: 'stdio' })).json).toMatchObject({ code: 'invalid_request', field: 'server_type' });
    expect((await post({ name: ' ', url: URL_OK, server_type: 'sse' })).json).toMatchObject({ code: 'invalid_request', field: 'name' });
    expect((await post({ name: 'x', url: 'http://[::1]/', server_type: 'sse' })).json).toEqual({ code: 'invalid_request', error: 'url: outbound request refused: [::1] is a loopback address', field: 'url' });
    expect((await post({ name: 'x', url: URL_OK, server_type: 'sse', headers: { 'a b': 'v' } })).json).toMatchObject({ code: 'invalid_request', field: 'headers.a b' });
    expect((await post({ name: 'x', url: URL_OK, server_type: 'sse', extra: 1 })).json).toMatchObject({ code: 'invalid_request', field: 'extra' });
    expect((await post({ name: 'x', url: URL_OK, server_type: 'sse' })).status).toBe(201);
    expect((await post({ name: 'X', url: URL_OK, server_type: 'sse' })).json).toEqual({ code: 'invalid_request', error: 'name: an MCP server named "X" exists already', field: 'name' });
    mcp.failWith = 'connect ECONNREFUSED';
    const down = await post({ name: 'down', url: URL_OK, server_type: 'sse' });
    mcp.failWith = undefined;
    expect(down.json).toMatchObject({ tools: [], tools_error: 'connect ECONNREFUSED' });

    const imported = await api.call('POST', '/workflows/v1/mcp-servers/import', { key, body: { mcpServers: { x: { type: 'sse', url: URL_OK, authorization_token: TOKEN }, y: { type: 'sse' } } } });
    expect(imported.json.results).toEqual([
      { server: 'x', success: true, id: expect.any(String), name: 'x_0', secrets: [{ field: 'variables.authorization_token', secret: 'MCP_X_0_AUTHORIZATION_TOKEN' }] },
      { server: 'y', success: false, error: { code: 'invalid_request', error: 'url: Missing required fields (type or url)', field: 'url' } },
    ]);
    expect(imported.text).not.toContain(TOKEN);
    expect(await storedText(tenant)).not.toContain(TOKEN);
  });
});

describe('native /workflows/v1/mcp-servers, a route group loaded on its first request', () => {
  it('answers as the app does: the key first, malformed JSON, a path it does not serve, a field it refuses', async () => {
    expect((await api.call('GET', '/workflows/v1/mcp-servers', { key: null })).json).toMatchObject({ code: 'unauthorized' });
    const key = await api.addKey(newTenant(), 'admin');
    expect((await api.call('POST', '/workflows/v1/mcp-servers', { key, raw: '{"name": ' })).json).toEqual({ code: 'invalid_request', error: 'the body is not valid JSON' });
    const unknown = await api.call('GET', '/workflows/v1/mcp-servers/a/b/c', { key });
    expect([unknown.status, unknown.json]).toEqual([404, { code: 'not_found', error: 'no such route' }]);
    const refused = await api.call('POST', '/workflows/v1/mcp-servers', { key, body: { name: 'docs', url: 'http://127.0.0.1:1/mcp', server_type: 'streamable-http' } });
    expect([refused.status, refused.json.code, refused.json.field]).toEqual([400, 'invalid_request', 'url']);
    // the parsed body reached the group whole: a valid one is created
    const created = await api.call('POST', '/workflows/v1/mcp-servers', { key, body: { name: 'lazy', url: URL_OK, server_type: 'streamable-http', headers: { Authorization: `Bearer ${TOKEN}` } } });
    expect(created.status, created.text).toBe(201);
    expect(created.json).toMatchObject({ name: 'lazy', url: URL_OK });
  });
});

describe('the OpenAPI document', () => {
  it('describes every native MCP server route', async () => {
    const base = '/workflows/v1/mcp-servers';
    const doc = await api.call('GET', '/openapi.json', { key: null });
    const paths = Object.entries(doc.json.paths as Record<string, Record<string, unknown>>)
      .filter(([path]) => path.startsWith(base))
      .flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method.toUpperCase()} ${path}`));
    expect(paths.sort()).toEqual([`DELETE ${base}/{id}`, `GET ${base}`, `GET ${base}/{id}`, `PATCH ${base}/{id}`, `POST ${base}`, `POST ${base}/import`, `POST ${base}/{id}/tools`].sort());
    expect(Object.keys(doc.json.components.schemas)).toEqual(expect.arrayContaining(['CreateMcpServer', 'UpdateMcpServer', 'McpServer', 'SavedMcpServer', 'ImportMcpServers']));
  });
});

describe('the app\u2019s log', () => {
  // last in the file: every request above has been answered by now
  it('holds no credential of any request above', () => {
    expect(mcp.opened.some((o) => Object.values(o.headers).some((v) => v.includes(TOKEN)))).toBe(true);
    expect(logged.join('\n')).not.toContain(TOKEN);
  });
});
