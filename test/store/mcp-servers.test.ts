import { randomBytes } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import type { McpServerRecord } from '../../lib/mcp/types';
import {
  createMcpServer,
  deleteMcpServer,
  getMcpServer,
  listMcpServers,
  MAX_MCP_DOCUMENT_BYTES,
  McpServerChangedError,
  McpServerLimitError,
  McpServerNameTakenError,
  mcpServerNamed,
  McpServerTooLargeError,
  replaceMcpServer,
} from '../../lib/store/mcp-servers';
import { itemSize } from '../../lib/store/blobs';
import { NotFoundError } from '../../lib/store/errors';
import { newTenant, testStore } from '../helpers/engine';

const record = (tenant: string, name: string, extra: Partial<McpServerRecord> = {}): McpServerRecord => ({
  id: randomBytes(16).toString('hex'),
  tenant_id: tenant,
  name,
  url: 'https://mcp.example.com/mcp',
  server_type: 'streamable-http',
  description: '',
  headers: { Authorization: '{secret.MCP_X_AUTHORIZATION}' },
  variables: { tools: { add: { name: 'add', inputSchema: { type: 'object' }, enabled: true } } },
  create_time: 1_000,
  update_time: 1_000,
  ...extra,
});

describe('store: MCP servers', () => {
  it('creates, reads, lists, renames and deletes, names unique whatever their case', async () => {
    const store = testStore();
    const tenant = newTenant();
    const a = await createMcpServer(store, { record: record(tenant, 'GitHub'), ownedSecrets: ['MCP_X_AUTHORIZATION'] });
    expect(a.version).toBe(1);
    expect((await getMcpServer(store, tenant, a.record.id)).record).toEqual(a.record);
    expect(await mcpServerNamed(store, tenant, 'github')).toBe(a.record.id);
    await expect(createMcpServer(store, { record: record(tenant, 'GITHUB'), ownedSecrets: [] })).rejects.toBeInstanceOf(McpServerNameTakenError);
    const b = await createMcpServer(store, { record: record(tenant, 'Linear'), ownedSecrets: [] });
    expect((await listMcpServers(store, tenant)).map((s) => s.record.name).sort()).toEqual(['GitHub', 'Linear']);
    // another tenant sees none of them
    expect(await listMcpServers(store, newTenant())).toEqual([]);
    await expect(getMcpServer(store, newTenant(), a.record.id)).rejects.toBeInstanceOf(NotFoundError);

    await expect(replaceMcpServer(store, a, { record: { ...a.record, name: 'linear' }, ownedSecrets: [] })).rejects.toBeInstanceOf(McpServerNameTakenError);
    const renamed = await replaceMcpServer(store, a, { record: { ...a.record, name: 'Hub' }, ownedSecrets: a.ownedSecrets });
    expect(renamed.version).toBe(2);
    expect(await mcpServerNamed(store, tenant, 'github')).toBeUndefined();
    expect(await mcpServerNamed(store, tenant, 'HUB')).toBe(a.record.id);
    // a write on the version read before loses
    await expect(replaceMcpServer(store, a, { record: { ...a.record, description: 'late' }, ownedSecrets: [] })).rejects.toBeInstanceOf(McpServerChangedError);
    // the old name is free again
    await createMcpServer(store, { record: record(tenant, 'github'), ownedSecrets: [] });

    expect((await deleteMcpServer(store, tenant, a.record.id)).ownedSecrets).toEqual(['MCP_X_AUTHORIZATION']);
    await expect(deleteMcpServer(store, tenant, a.record.id)).rejects.toBeInstanceOf(NotFoundError);
    expect(await mcpServerNamed(store, tenant, 'Hub')).toBeUndefined();
    await deleteMcpServer(store, tenant, b.record.id);
    expect((await listMcpServers(store, tenant)).map((s) => s.record.name)).toEqual(['github']);
  });

  it('counts servers against the limit, the count going down with each delete', async () => {
    const store = testStore();
    const tenant = newTenant();
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await createMcpServer(store, { record: record(tenant, `s${i}`), ownedSecrets: [] }, 3));
    await expect(createMcpServer(store, { record: record(tenant, 's3'), ownedSecrets: [] }, 3)).rejects.toBeInstanceOf(McpServerLimitError);
    // the refused create left no name behind
    expect(await mcpServerNamed(store, tenant, 's3')).toBeUndefined();
    await deleteMcpServer(store, tenant, made[0]!.record.id);
    await createMcpServer(store, { record: record(tenant, 's3'), ownedSecrets: [] }, 3);
    const { doc, table } = store;
    const items = await doc.send(new QueryCommand({ TableName: table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': `T#${tenant}#MCP` } }));
    expect(items.Items?.find((i) => i.sk === 'COUNT')?.servers).toBe(3);
    expect(items.Items?.filter((i) => String(i.sk).startsWith('N#')).length).toBe(3);
  });

  it('refuses a document over its cap before writing, and reports the capacity of each write', async () => {
    const units: Record<string, number> = {};
    const store = { ...testStore(), onCapacity: (op: string, u: { read: number; write: number }) => void (units[op] = (units[op] ?? 0) + u.read + u.write) };
    const tenant = newTenant();
    // random text does not compress
    const huge = { tools: { big: { name: 'big', inputSchema: { description: randomBytes(MAX_MCP_DOCUMENT_BYTES).toString('base64') } } } };
    await expect(createMcpServer(store, { record: record(tenant, 'big', { variables: huge }), ownedSecrets: [] })).rejects.toBeInstanceOf(McpServerTooLargeError);
    expect(await listMcpServers(store, tenant)).toEqual([]);
    const made = await createMcpServer(store, { record: record(tenant, 'small'), ownedSecrets: [] });
    await replaceMcpServer(store, made, { record: { ...made.record, description: 'changed' }, ownedSecrets: [] });
    await deleteMcpServer(store, tenant, made.record.id);
    // AWS charges 2 WRU per KB of each item a transaction writes: the server item is under 1 KB
    // (its two tools compressed), so create and delete cost 3 items x 2 = 6 WRU and an update
    // without a rename 2. DynamoDB Local's own figures for transactions differ; they are
    // reported, not relied on.
    const { Items } = await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': `T#${tenant}#MCP` } }));
    expect(Items?.map((i) => i.sk)).toEqual(['COUNT']);
    const probe = await createMcpServer(store, { record: record(tenant, 'probe'), ownedSecrets: ['MCP_X_AUTHORIZATION'] });
    const { Items: after } = await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': `T#${tenant}#MCP` } }));
    const sizes = (after ?? []).map((i) => itemSize(i));
    expect(Math.max(...sizes)).toBeLessThan(1024);
    expect(probe.version).toBe(1);
    expect(units['create mcp server']).toBeGreaterThan(0);
    expect(units['update mcp server']).toBeGreaterThan(0);
  });
});
