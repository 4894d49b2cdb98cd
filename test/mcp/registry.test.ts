import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { McpRegistry } from '../../lib/mcp/registry';
import { McpServerRefusedError } from '../../lib/mcp/validation';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { secretResolver } from '../../lib/secrets/resolver';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { decompress } from '../../lib/store/codec';
import { NotFoundError } from '../../lib/store/errors';
import { newTenant, testStore } from '../helpers/engine';
import { inMemoryMcp } from '../helpers/mcp-in-memory';

const TOKEN = 'ghp_registry_secret_token_0123456789';
const URL_OK = 'https://mcp.example.test/mcp';

function setup(options: { requireHeaders?: Record<string, string>; withSecrets?: boolean } = {}) {
  const store = testStore();
  const secrets = new TenantSecrets({ store, master: new MasterKeys(new StaticKeyRing()) });
  // mcp.example.test passes whatever it resolves to; every other name resolves to loopback (refused)
  const guard = new SsrfGuard({ allow: ['mcp.example.test'], resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
  const mcp = inMemoryMcp(options.requireHeaders ? { requireHeaders: options.requireHeaders } : {});
  let now = 1_700_000_000_000;
  const registry = new McpRegistry({
    store,
    guard,
    ...(options.withSecrets === false ? {} : { secrets }),
    secretsFor: secretResolver({ tenantSecrets: secrets }),
    connector: mcp.connector,
    now: () => (now += 1000),
  });
  return { store, secrets, registry, mcp, tenant: newTenant() };
}

/** Every item of the tenant's MCP partition and secrets, decoded, as one text. */
async function storedText(store: ReturnType<typeof testStore>, tenant: string): Promise<string> {
  const texts: string[] = [];
  for (const pk of [`T#${tenant}#MCP`, `T#${tenant}`]) {
    const { Items } = await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk } }));
    for (const item of Items ?? []) texts.push(JSON.stringify({ ...item, doc: item.doc ? decompress(item.doc as Uint8Array) : undefined }));
  }
  return texts.join('\n');
}

describe('McpRegistry', () => {
  it('creates a server with its tools listed, its literal credential moved into a tenant secret the connection resolves', async () => {
    const { registry, store, secrets, mcp, tenant } = setup({ requireHeaders: { Authorization: `Bearer ${TOKEN}` } });
    const made = await registry.create(tenant, { name: 'Git Hub', url: URL_OK, server_type: 'streamable-http', headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(made.toolsError).toBeUndefined();
    expect(made.secrets).toEqual([{ field: 'headers.Authorization', secret: 'MCP_GIT_HUB_AUTHORIZATION' }]);
    expect(made.server.headers).toEqual({ Authorization: '{secret.MCP_GIT_HUB_AUTHORIZATION}' });
    expect(Object.keys(made.server.variables.tools as object)).toEqual(['add', 'echo']);
    expect((made.server.variables.tools as Record<string, { enabled: boolean; inputSchema: object }>).add).toMatchObject({ enabled: true, description: 'Adds two numbers', inputSchema: { type: 'object' } });
    expect(await secrets.get(tenant, 'MCP_GIT_HUB_AUTHORIZATION')).toBe(`Bearer ${TOKEN}`);
    expect(mcp.opened.at(-1)?.headers).toEqual({ Authorization: `Bearer ${TOKEN}` });
    // nothing stored holds the value: neither the server nor any item of the tenant in plain text
    expect(await storedText(store, tenant)).not.toContain(TOKEN);
    expect(JSON.stringify(made)).not.toContain(TOKEN);

    // a run opens it by id, the secret resolved at open
    const run = registry.forTenant(tenant);
    const server = await run.server(made.server.id);
    expect(server).toMatchObject({ id: made.server.id, url: URL_OK, headers: made.server.headers });
    const session = await run.open(server!, {});
    expect((await session.callTool('add', { a: 2, b: 3 }, {})).text).toBe('5');
    await session.close();
    expect(await registry.forTenant(newTenant()).server(made.server.id)).toBeUndefined();
    expect(await run.server('not-an-id')).toBeUndefined();
  });

  it('moves authorization_token and the variables header templates take, keeps references as they are', async () => {
    const { registry, secrets, mcp, tenant } = setup({ requireHeaders: { Authorization: `Bearer ${TOKEN}`, 'X-Team': 'blue' } });
    await secrets.put(tenant, 'TEAM', 'blue');
    // the tenant's own secret of the first-choice name is never overwritten
    await secrets.put(tenant, 'MCP_LINEAR_AUTHORIZATION_TOKEN', 'theirs');
    const made = await registry.create(tenant, {
      name: 'linear',
      url: URL_OK,
      server_type: 'sse',
      headers: { Authorization: 'Bearer ${authorization_token}', 'X-Team': '{secret.TEAM}' },
      variables: { authorization_token: TOKEN, region: 'eu', tools: { injected: {} } },
    });
    expect(made.server.headers).toEqual({ Authorization: 'Bearer ${authorization_token}', 'X-Team': '{secret.TEAM}' });
    expect(made.server.variables).toMatchObject({ authorization_token: '{secret.MCP_LINEAR_AUTHORIZATION_TOKEN_2}', region: 'eu' });
    expect(Object.keys(made.server.variables.tools as object)).toEqual(['add', 'echo']);
    expect(await secrets.get(tenant, 'MCP_LINEAR_AUTHORIZATION_TOKEN')).toBe('theirs');
    expect(mcp.opened.at(-1)?.headers).toEqual({ Authorization: `Bearer ${TOKEN}`, 'X-Team': 'blue' });
  });

  it('refuses, naming the field: type, name, a taken name, a URL the guard refuses, bad headers; stores nothing for them', async () => {
    const { registry, store, secrets, tenant } = setup();
    const base = { name: 'x', url: URL_OK, server_type: 'streamable-http' };
    const refusal = async (input: Record<string, unknown>) => {
      const error = await registry.create(tenant, { ...base, ...input }).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(Error);
      return [(error as McpServerRefusedError).field ?? 'name', (error as Error).message];
    };
    expect(await refusal({ server_type: 'stdio' })).toEqual(['server_type', 'server_type: one of sse, streamable-http']);
    expect((await refusal({ name: 'é'.repeat(128) }))[0]).toBe('name');
    expect((await refusal({ name: '   ' }))[0]).toBe('name');
    expect(await refusal({ url: 'http://169.254.169.254/latest' })).toEqual(['url', 'url: outbound request refused: 169.254.169.254 is a link-local address']);
    expect(await refusal({ url: 'https://internal.example/mcp' })).toEqual(['url', 'url: outbound request refused: internal.example resolves to a loopback address']);
    expect(await refusal({ url: 'file:///etc/passwd' })).toEqual(['url', 'url: outbound request refused: scheme file: is not allowed (only http: and https:)']);
    expect(await refusal({ url: 'not a url' })).toEqual(['url', 'url: not a valid absolute URL']);
    expect((await refusal({ headers: { 'Bad Header': 'x' } }))[0]).toBe('headers.Bad Header');
    expect((await refusal({ headers: { A: 'line\r\nInjected: 1' } }))[0]).toBe('headers.A');
    expect((await refusal({ headers: { A: 1 } }))[0]).toBe('headers.A');
    expect((await refusal({ headers: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`H${i}`, 'v'])) }))[0]).toBe('headers');
    await registry.create(tenant, { ...base, name: 'Taken' });
    expect(await refusal({ name: 'TAKEN', headers: { Authorization: `Bearer ${TOKEN}` } })).toEqual(['name', 'name: an MCP server named "TAKEN" exists already']);
    expect((await registry.list(tenant)).total).toBe(1);
    // the refused create made no secret
    expect(await secrets.list(tenant)).toEqual([]);
    expect(await storedText(store, tenant)).not.toContain(TOKEN);
    // with no tenant secrets, a literal credential is refused, a reference is not
    const bare = setup({ withSecrets: false });
    await expect(bare.registry.create(bare.tenant, { ...base, headers: { Authorization: TOKEN } })).rejects.toMatchObject({ field: 'headers.Authorization', reason: 'secrets_unavailable' });
    await expect(bare.registry.create(bare.tenant, { ...base, headers: { Authorization: '{secret.TOKEN}' } })).resolves.toMatchObject({ secrets: [] });
  });

  it('stores a server whose tools cannot be listed, saying why without the credential', async () => {
    const { registry, mcp, tenant } = setup();
    mcp.failWith = `connect ECONNREFUSED while sending Bearer ${TOKEN}`;
    const made = await registry.create(tenant, { name: 'down', url: URL_OK, server_type: 'sse', headers: { Authorization: `Bearer ${TOKEN}` } });
    expect(made.server.variables.tools).toEqual({});
    expect(made.toolsError).toBe('connect ECONNREFUSED while sending [redacted]');
    mcp.failWith = undefined;
    const refreshed = await registry.refreshTools(tenant, made.server.id);
    expect(refreshed.toolsError).toBeUndefined();
    expect(Object.keys(refreshed.server.variables.tools as object)).toEqual(['add', 'echo']);
  });

  it('keeps each tool\u2019s enabled switch across listings; a rotated credential gets a new secret and the old one goes', async () => {
    const { registry, secrets, mcp, tenant } = setup();
    const made = await registry.create(tenant, { name: 'tools', url: URL_OK, server_type: 'sse', headers: { Authorization: 'Bearer one-0123456789' } });
    const id = made.server.id;
    // switch one off without a listing (no connection change)
    const opens = mcp.opened.length;
    const switched = await registry.update(tenant, id, { tools: { echo: false } }, { relist: 'on_change' });
    expect(mcp.opened.length).toBe(opens);
    expect(switched.server.variables.tools).toMatchObject({ add: { enabled: true }, echo: { enabled: false } });
    // the server offers a third tool: listed again, the switch stays off, the new one on
    mcp.extraTool = true;
    const relisted = await registry.refreshTools(tenant, id);
    expect(relisted.server.variables.tools).toMatchObject({ add: { enabled: true }, echo: { enabled: false }, shout: { enabled: true } });
    // a new literal credential: a new secret, the first deleted once the server no longer uses it
    const rotated = await registry.update(tenant, id, { headers: { Authorization: 'Bearer two-0123456789' } });
    expect(rotated.secrets).toEqual([{ field: 'headers.Authorization', secret: 'MCP_TOOLS_AUTHORIZATION_2' }]);
    expect((await secrets.list(tenant)).map((s) => s.name)).toEqual(['MCP_TOOLS_AUTHORIZATION_2']);
    expect(await secrets.get(tenant, 'MCP_TOOLS_AUTHORIZATION_2')).toBe('Bearer two-0123456789');
    expect(rotated.server.variables.tools).toMatchObject({ echo: { enabled: false } });
    expect(rotated.server.update_time).toBeGreaterThan(made.server.update_time);
    // sending the reference back keeps it; deleting the server deletes its secret
    await registry.update(tenant, id, { headers: rotated.server.headers, name: 'Tools' });
    expect((await secrets.list(tenant)).map((s) => s.name)).toEqual(['MCP_TOOLS_AUTHORIZATION_2']);
    await registry.delete(tenant, id);
    expect(await secrets.list(tenant)).toEqual([]);
    await expect(registry.get(tenant, id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('applies concurrent updates of one server each on top of the other, undoing none', async () => {
    const { registry, tenant } = setup();
    const made = await registry.create(tenant, { name: 'shared', url: URL_OK, server_type: 'sse' });
    const id = made.server.id;
    await Promise.all([
      registry.update(tenant, id, { description: 'described' }),
      registry.update(tenant, id, { name: 'renamed' }),
      registry.update(tenant, id, { tools: { echo: false } }),
    ]);
    const [after] = (await registry.list(tenant, {})).items;
    expect(after).toMatchObject({ id, description: 'described', name: 'renamed' });
    expect((after?.variables.tools as Record<string, { enabled: boolean }>).echo?.enabled).toBe(false);
  });

  it('lists with RAGFlow\u2019s filters, order and pages; exports references, never values', async () => {
    const { registry, tenant } = setup();
    const ids: string[] = [];
    for (const name of ['alpha', 'Beta', 'gamma', 'alphabet']) ids.push((await registry.create(tenant, { name, url: URL_OK, server_type: 'sse', variables: { authorization_token: TOKEN } })).server.id);
    expect((await registry.list(tenant)).items.map((s) => s.name)).toEqual(['alphabet', 'gamma', 'Beta', 'alpha']);
    expect((await registry.list(tenant, { desc: false, orderby: 'name' })).items.map((s) => s.name)).toEqual(['Beta', 'alpha', 'alphabet', 'gamma']);
    expect(await registry.list(tenant, { keywords: 'ALPHA', page: 2, pageSize: 1 })).toMatchObject({ total: 2, items: [{ name: 'alpha' }] });
    expect((await registry.list(tenant, { ids: [ids[1]!, 'f'.repeat(32)] })).items.map((s) => s.name)).toEqual(['Beta']);
    const exported = await registry.exportServers(tenant, [ids[0]!]);
    expect(exported).toEqual({ mcpServers: { alpha: { type: 'sse', url: URL_OK, name: 'alpha', authorization_token: '{secret.MCP_ALPHA_AUTHORIZATION_TOKEN}', tools: expect.any(Object) } } });
    expect(await registry.exportServers(newTenant(), [ids[0]!])).toBeNull();
  });

  it('imports an mcpServers document: renames taken names, refuses bad entries one by one, keeps exported switches', async () => {
    const { registry, secrets, mcp, tenant } = setup();
    await registry.create(tenant, { name: 'github', url: URL_OK, server_type: 'sse' });
    const outcomes = await registry.importServers(tenant, {
      github: { type: 'streamable-http', url: URL_OK, authorization_token: TOKEN, tools: { echo: { enabled: false } } },
      broken: { url: URL_OK },
      local: { type: 'stdio', url: URL_OK },
      internal: { type: 'sse', url: 'http://10.0.0.1/mcp' },
    });
    expect(outcomes.map((o) => (o.success ? [o.server, o.new_name, o.message] : [o.server, o.refusal.message]))).toEqual([
      ['github', 'github_0', "Renamed from 'github' to 'github_0' avoid duplication"],
      ['broken', 'type: Missing required fields (type or url)'],
      ['local', 'server_type: one of sse, streamable-http'],
      ['internal', 'url: outbound request refused: 10.0.0.1 is a private address'],
    ]);
    const made = outcomes[0]!;
    if (!made.success) throw new Error('the first import failed');
    const server = await registry.get(tenant, made.id);
    expect(server.headers).toEqual({ Authorization: 'Bearer ${authorization_token}' });
    expect(server.variables).toMatchObject({ authorization_token: '{secret.MCP_GITHUB_0_AUTHORIZATION_TOKEN}', tools: { add: { enabled: true }, echo: { enabled: false } } });
    expect(await secrets.get(tenant, 'MCP_GITHUB_0_AUTHORIZATION_TOKEN')).toBe(TOKEN);
    expect(mcp.opened.at(-1)?.headers).toEqual({ Authorization: `Bearer ${TOKEN}` });
  });

  it('tests a server: the tools each enabled, or the stored server\u2019s switches and cache when it is the one tested', async () => {
    const { registry, mcp, tenant } = setup({ requireHeaders: { Authorization: 'Bearer t-0123456789' } });
    const made = await registry.create(tenant, { name: 's', url: URL_OK, server_type: 'sse', headers: { Authorization: 'Bearer t-0123456789' } });
    await registry.update(tenant, made.server.id, { tools: { add: false } }, { relist: 'on_change' });
    // another id: nothing stored is read or written; the literal header is used once
    const fresh = await registry.test(tenant, 'f'.repeat(32), { url: URL_OK, server_type: 'sse', headers: { Authorization: 'Bearer t-0123456789' } });
    expect(fresh.map((t) => [t.name, t.enabled])).toEqual([['add', true], ['echo', true]]);
    // the stored server, its headers used when none are sent: its switch kept, the listing cached
    mcp.extraTool = true;
    const own = await registry.test(tenant, made.server.id, { url: URL_OK, server_type: 'sse' });
    expect(own.map((t) => [t.name, t.enabled])).toEqual([['add', false], ['echo', true], ['shout', true]]);
    expect(Object.keys((await registry.get(tenant, made.server.id)).variables.tools as object)).toEqual(['add', 'echo', 'shout']);
    // a refused credential is the listing's error
    await expect(registry.test(tenant, made.server.id, { url: URL_OK, server_type: 'sse', headers: { Authorization: 'Bearer wrong-0123456789' } })).rejects.toThrow('HTTP 401: the server refused the credentials (Authorization: [redacted])');
    await expect(registry.test(tenant, made.server.id, { url: 'http://127.0.0.1:9/', server_type: 'sse' })).rejects.toMatchObject({ field: 'url', reason: 'url_refused' });
  });
});
