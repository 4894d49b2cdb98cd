/**
 * API keys, stored hashed. Two items per key, written together:
 *
 *   KEYHASH#<sha256 of the secret>  K          what authentication reads: tenant, scope, workflows
 *   T#<tenant>                      KEY#<id>   the tenant's list of keys (with the hash, to revoke)
 *
 * The hash item is the one key item not under its tenant: a presented key is all a request
 * has before it knows its tenant. Neither item holds the secret.
 */
import { createHash } from 'node:crypto';
import { GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { call, ConditionFailed, queryAll, type StoreContext } from './dynamo';
import { NotFoundError } from './errors';
import { keys } from './item-keys';

export type Scope = 'admin' | 'execute';

export interface ApiKey {
  tenant: string;
  id: string;
  name: string;
  scope: Scope;
  /** For `execute` keys: the workflows the key may use. */
  workflowIds: string[];
  createdAt: string;
  revokedAt: string | null;
}

/** Secrets are long random strings (or an operator's chosen key), kept as SHA-256 only. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

const hashKey = (hash: string) => ({ pk: `KEYHASH#${hash}`, sk: 'K' });

/** Stores a key. Returns false when a key with this secret already exists (nothing written). */
export async function putApiKey(ctx: StoreContext, key: Omit<ApiKey, 'revokedAt'> & { secretHash: string }): Promise<boolean> {
  const attributes = {
    kind: 'api_key',
    id: key.id,
    tenant: key.tenant,
    name: key.name,
    scope: key.scope,
    workflow_ids: key.workflowIds,
    created_at: key.createdAt,
  };
  try {
    await call('store the API key', () =>
      ctx.doc.send(new TransactWriteCommand({
        TransactItems: [
          { Put: { TableName: ctx.table, Item: { ...hashKey(key.secretHash), ...attributes }, ConditionExpression: 'attribute_not_exists(pk)' } },
          {
            Put: {
              TableName: ctx.table,
              Item: { pk: keys.tenant(key.tenant), sk: keys.apiKey(key.id), ...attributes, secret_hash: key.secretHash },
              ConditionExpression: 'attribute_not_exists(pk)',
            },
          },
        ],
      })),
    );
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}

/** The key a presented secret stands for, unless unknown or revoked. */
export async function findApiKey(ctx: StoreContext, secret: string): Promise<ApiKey | null> {
  const { Item } = await call('read the API key', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: hashKey(hashSecret(secret)), ConsistentRead: true })),
  );
  if (!Item || Item.revoked_at) return null;
  return toKey(Item);
}

export async function getApiKey(ctx: StoreContext, tenant: string, id: string): Promise<ApiKey> {
  const { Item } = await call('read the API key', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.tenant(tenant), sk: keys.apiKey(id) }, ConsistentRead: true })),
  );
  if (!Item) throw new NotFoundError('API key');
  return toKey(Item);
}

export async function listApiKeys(ctx: StoreContext, tenant: string): Promise<ApiKey[]> {
  const items = await queryAll(ctx, 'list API keys', {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :k)',
    ExpressionAttributeValues: { ':pk': keys.tenant(tenant), ':k': 'KEY#' },
  });
  return items.map(toKey);
}

export async function revokeApiKey(ctx: StoreContext, tenant: string, id: string, at = new Date().toISOString()): Promise<void> {
  const { Item } = await call('read the API key', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.tenant(tenant), sk: keys.apiKey(id) }, ConsistentRead: true })),
  );
  if (!Item) throw new NotFoundError('API key');
  const update = {
    UpdateExpression: 'SET revoked_at = if_not_exists(revoked_at, :at)',
    ExpressionAttributeValues: { ':at': at },
  };
  await call('revoke the API key', () =>
    ctx.doc.send(new TransactWriteCommand({
      TransactItems: [
        { Update: { TableName: ctx.table, Key: hashKey(Item.secret_hash as string), ...update } },
        { Update: { TableName: ctx.table, Key: { pk: keys.tenant(tenant), sk: keys.apiKey(id) }, ...update } },
      ],
    })),
  );
}

function toKey(item: Record<string, unknown>): ApiKey {
  return {
    tenant: item.tenant as string,
    id: item.id as string,
    name: (item.name as string) ?? '',
    scope: item.scope as Scope,
    workflowIds: (item.workflow_ids as string[]) ?? [],
    createdAt: item.created_at as string,
    revokedAt: (item.revoked_at as string | undefined) ?? null,
  };
}
