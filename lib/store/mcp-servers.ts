/**
 * A tenant's MCP servers (lib/mcp/registry.ts), all in one partition of their own:
 *
 *   T#<tenant>#MCP   S#<id>      a server: its name, URL and type as attributes, its description,
 *                                headers and variables (with the cached tool list) as one
 *                                brotli-compressed JSON document (`doc`)
 *                    N#<name>    the server a name belongs to (lower case, NFC): names are unique
 *                    COUNT       how many servers the tenant has (the limit is checked on it)
 *
 * Create, rename and delete move the server, its name item and the count in one transaction,
 * so a name is never held by two servers and the count never drifts. Every write of a server
 * is conditional on the `version` it was read at: of two concurrent updates one fails
 * (`McpServerChangedError`) rather than silently undoing the other (the registry then applies
 * its patch again, on what the other wrote).
 *
 * Limits: MAX_MCP_SERVERS_PER_TENANT servers; one server's stored document at most
 * MAX_MCP_DOCUMENT_BYTES compressed (the tool list dominates it: a few hundred tools with
 * their schemas fit). Listing reads the whole partition: at most 100 items.
 */
import { GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { EaselError } from '../errors';
import type { McpServerRecord, McpServerType } from '../mcp/types';
import { compress, decompress } from './codec';
import { call, capacityParam, ConditionFailed, queryAll, reportCapacity, type StoreContext } from './dynamo';
import { NotFoundError } from './errors';
import { keys } from './item-keys';
import { nameKey } from './knowledge';

/** @default servers one tenant may register */
export const MAX_MCP_SERVERS_PER_TENANT = 100;
/** A server's compressed description, headers and variables (tools included); DynamoDB's item cap is 400 KB. */
export const MAX_MCP_DOCUMENT_BYTES = 300 * 1024;

const SERVER_PREFIX = 'S#';
const NAME_PREFIX = 'N#';
const COUNT_SK = 'COUNT';

/** A server as stored: the record, the secrets the registry made for it, and the version writes are conditional on. */
export interface StoredMcpServer {
  record: McpServerRecord;
  /** Tenant secrets the registry made from this server's literal credentials (deleted with it). */
  ownedSecrets: string[];
  version: number;
}

/** Another server of the tenant has this name (case and Unicode form do not tell names apart). */
export class McpServerNameTakenError extends EaselError {
  constructor(readonly taken: string) {
    super('invalid_request', `name: an MCP server named "${taken}" exists already`);
  }
}

/** The tenant has as many servers as it may. */
export class McpServerLimitError extends EaselError {
  constructor(readonly limit: number) {
    super('invalid_request', `a tenant has at most ${limit} MCP servers: delete one first`);
  }
}

/** The server's document is over MAX_MCP_DOCUMENT_BYTES compressed (too many or too large tools). */
export class McpServerTooLargeError extends EaselError {
  constructor(readonly bytes: number) {
    super('payload_too_large', `the MCP server's headers, variables and tool list take ${bytes} bytes compressed; at most ${MAX_MCP_DOCUMENT_BYTES}`);
  }
}

/** The server changed (or went) between the caller's read and its write. */
export class McpServerChangedError extends EaselError {
  constructor() {
    super('unavailable', 'the MCP server was changed by another request meanwhile; retry');
  }
}

const partition = keys.mcpServers;
const serverKey = (tenant: string, id: string) => ({ pk: partition(tenant), sk: `${SERVER_PREFIX}${id}` });
const nameItemKey = (tenant: string, name: string) => ({ pk: partition(tenant), sk: `${NAME_PREFIX}${nameKey(name)}` });

/**
 * Stores a new server with its name item, counting it against `maxServers`.
 * @throws McpServerNameTakenError, McpServerLimitError, McpServerTooLargeError
 */
export async function createMcpServer(ctx: StoreContext, server: Omit<StoredMcpServer, 'version'>, maxServers = MAX_MCP_SERVERS_PER_TENANT): Promise<StoredMcpServer> {
  const { record } = server;
  const stored = { ...server, version: 1 };
  const item = toItem(stored);
  try {
    const out = await call('create the MCP server', () =>
      ctx.doc.send(new TransactWriteCommand({
        TransactItems: [
          { Put: { TableName: ctx.table, Item: item, ConditionExpression: 'attribute_not_exists(pk)' } },
          { Put: { TableName: ctx.table, Item: nameItem(record.tenant_id, record.name, record.id), ConditionExpression: 'attribute_not_exists(pk)' } },
          {
            Update: {
              TableName: ctx.table,
              Key: { pk: partition(record.tenant_id), sk: COUNT_SK },
              UpdateExpression: 'SET #n = if_not_exists(#n, :zero) + :one, kind = :kind',
              ConditionExpression: 'attribute_not_exists(#n) OR #n < :max',
              ExpressionAttributeNames: { '#n': 'servers' },
              ExpressionAttributeValues: { ':zero': 0, ':one': 1, ':max': maxServers, ':kind': 'mcp_server_count' },
            },
          },
        ],
        ...capacityParam(ctx),
      })),
    );
    reportCapacity(ctx, 'create mcp server', 'write', out.ConsumedCapacity);
  } catch (error) {
    if (error instanceof ConditionFailed && error.index === 1) throw new McpServerNameTakenError(record.name);
    if (error instanceof ConditionFailed && error.index === 2) throw new McpServerLimitError(maxServers);
    if (error instanceof ConditionFailed) throw new McpServerChangedError();
    throw error;
  }
  return stored;
}

/** The server, or NotFoundError (also for another tenant's). */
export async function getMcpServer(ctx: StoreContext, tenant: string, id: string): Promise<StoredMcpServer> {
  const found = await findMcpServer(ctx, tenant, id);
  if (!found) throw new NotFoundError('MCP server');
  return found;
}

/** The server, or undefined. */
export async function findMcpServer(ctx: StoreContext, tenant: string, id: string): Promise<StoredMcpServer | undefined> {
  const out = await call('read the MCP server', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: serverKey(tenant, id), ConsistentRead: true, ...capacityParam(ctx) })),
  );
  reportCapacity(ctx, 'get mcp server', 'read', out.ConsumedCapacity);
  return out.Item ? fromItem(out.Item) : undefined;
}

/** The id of the server holding `name` (whatever its case), or undefined. */
export async function mcpServerNamed(ctx: StoreContext, tenant: string, name: string): Promise<string | undefined> {
  const out = await call('read the MCP server name', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: nameItemKey(tenant, name), ConsistentRead: true, ...capacityParam(ctx) })),
  );
  reportCapacity(ctx, 'get mcp server name', 'read', out.ConsumedCapacity);
  return out.Item?.server_id as string | undefined;
}

/** Every server of the tenant, in id order (the partition holds at most MAX_MCP_SERVERS_PER_TENANT). */
export async function listMcpServers(ctx: StoreContext, tenant: string): Promise<StoredMcpServer[]> {
  const items = await queryAll(ctx, 'list the MCP servers', {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :s)',
    ExpressionAttributeValues: { ':pk': partition(tenant), ':s': SERVER_PREFIX },
    ConsistentRead: true,
  }, 'list mcp servers');
  return items.map(fromItem);
}

/**
 * Replaces a server read at `expect.version` by `next`, moving its name item when the name
 * changes. @throws McpServerNameTakenError, McpServerChangedError, McpServerTooLargeError
 */
export async function replaceMcpServer(ctx: StoreContext, expect: StoredMcpServer, next: Omit<StoredMcpServer, 'version'>): Promise<StoredMcpServer> {
  const tenant = expect.record.tenant_id;
  const stored = { ...next, version: expect.version + 1 };
  const renamed = nameKey(next.record.name) !== nameKey(expect.record.name);
  const item = toItem(stored);
  const actions: Record<string, unknown>[] = [
    {
      Put: {
        TableName: ctx.table,
        Item: item,
        ConditionExpression: 'version = :v',
        ExpressionAttributeValues: { ':v': expect.version },
      },
    },
  ];
  if (renamed) {
    actions.push(
      { Put: { TableName: ctx.table, Item: nameItem(tenant, next.record.name, next.record.id), ConditionExpression: 'attribute_not_exists(pk)' } },
      { Delete: { TableName: ctx.table, Key: nameItemKey(tenant, expect.record.name), ConditionExpression: 'server_id = :id', ExpressionAttributeValues: { ':id': expect.record.id } } },
    );
  } else if (next.record.name !== expect.record.name) {
    // the same key (another case): the name item stays, with the server's new spelling
    actions.push({ Put: { TableName: ctx.table, Item: nameItem(tenant, next.record.name, next.record.id), ConditionExpression: 'server_id = :id', ExpressionAttributeValues: { ':id': expect.record.id } } });
  }
  try {
    const out = await call('update the MCP server', () => ctx.doc.send(new TransactWriteCommand({ TransactItems: actions as never, ...capacityParam(ctx) })));
    reportCapacity(ctx, 'update mcp server', 'write', out.ConsumedCapacity);
  } catch (error) {
    if (error instanceof ConditionFailed && renamed && error.index === 1) throw new McpServerNameTakenError(next.record.name);
    if (error instanceof ConditionFailed) throw new McpServerChangedError();
    throw error;
  }
  return stored;
}

/** Deletes a server with its name item (NotFoundError when there is none); answers what was deleted. */
export async function deleteMcpServer(ctx: StoreContext, tenant: string, id: string): Promise<StoredMcpServer> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const found = await getMcpServer(ctx, tenant, id);
    try {
      const out = await call('delete the MCP server', () =>
        ctx.doc.send(new TransactWriteCommand({
          TransactItems: [
            { Delete: { TableName: ctx.table, Key: serverKey(tenant, id), ConditionExpression: 'version = :v', ExpressionAttributeValues: { ':v': found.version } } },
            { Delete: { TableName: ctx.table, Key: nameItemKey(tenant, found.record.name), ConditionExpression: 'attribute_not_exists(pk) OR server_id = :id', ExpressionAttributeValues: { ':id': id } } },
            {
              Update: {
                TableName: ctx.table,
                Key: { pk: partition(tenant), sk: COUNT_SK },
                UpdateExpression: 'SET #n = #n - :one',
                ConditionExpression: '#n > :zero',
                ExpressionAttributeNames: { '#n': 'servers' },
                ExpressionAttributeValues: { ':one': 1, ':zero': 0 },
              },
            },
          ],
          ...capacityParam(ctx),
        })),
      );
      reportCapacity(ctx, 'delete mcp server', 'write', out.ConsumedCapacity);
      return found;
    } catch (error) {
      // changed between the read and the delete (or deleted by another): read it again
      if (!(error instanceof ConditionFailed)) throw error;
    }
  }
  throw new McpServerChangedError();
}

function nameItem(tenant: string, name: string, id: string): Record<string, unknown> {
  return { ...nameItemKey(tenant, name), kind: 'mcp_server_name', name, server_id: id };
}

/** What the compressed document holds: everything of a record that is not a plain attribute. */
interface ServerDocument {
  description: string;
  headers: Record<string, string>;
  variables: Record<string, unknown>;
}

function toItem(stored: StoredMcpServer): Record<string, unknown> {
  const { record } = stored;
  const doc: ServerDocument = { description: record.description, headers: record.headers, variables: record.variables };
  const bytes = compress(JSON.stringify(doc));
  if (bytes.byteLength > MAX_MCP_DOCUMENT_BYTES) throw new McpServerTooLargeError(bytes.byteLength);
  return {
    ...serverKey(record.tenant_id, record.id),
    kind: 'mcp_server',
    v: 1,
    id: record.id,
    tenant: record.tenant_id,
    name: record.name,
    url: record.url,
    server_type: record.server_type,
    create_time: record.create_time,
    update_time: record.update_time,
    doc: bytes,
    owned_secrets: stored.ownedSecrets,
    version: stored.version,
  };
}

function fromItem(item: Record<string, unknown>): StoredMcpServer {
  const doc = JSON.parse(decompress(item.doc as Uint8Array)) as ServerDocument;
  return {
    record: {
      id: item.id as string,
      tenant_id: item.tenant as string,
      name: item.name as string,
      url: item.url as string,
      server_type: item.server_type as McpServerType,
      description: doc.description,
      headers: doc.headers,
      variables: doc.variables,
      create_time: item.create_time as number,
      update_time: item.update_time as number,
    },
    ownedSecrets: (item.owned_secrets as string[] | undefined) ?? [],
    version: item.version as number,
  };
}
