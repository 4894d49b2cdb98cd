/**
 * API keys of a tenant, stored hashed: `T#<tenant>` / `KEY#<key id>`. The secret itself is
 * never stored; a presented key is found by its id and checked against the hash.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { call, ConditionFailed, type StoreContext } from './dynamo';
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

/** Secrets are 256-bit random strings, so a plain SHA-256 is a sound way to keep them. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

export async function putApiKey(ctx: StoreContext, key: Omit<ApiKey, 'revokedAt'> & { secretHash: string }): Promise<void> {
  await call('store the API key', () =>
    ctx.doc.send(new PutCommand({
      TableName: ctx.table,
      Item: {
        pk: keys.tenant(key.tenant),
        sk: keys.apiKey(key.id),
        kind: 'api_key',
        id: key.id,
        tenant: key.tenant,
        name: key.name,
        scope: key.scope,
        workflow_ids: key.workflowIds,
        secret_hash: key.secretHash,
        created_at: key.createdAt,
      },
      ConditionExpression: 'attribute_not_exists(pk)',
    })),
  );
}

/** The key if `secret` matches its hash and it is not revoked; otherwise null. */
export async function verifyApiKey(ctx: StoreContext, tenant: string, id: string, secret: string): Promise<ApiKey | null> {
  const { Item } = await call('read the API key', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.tenant(tenant), sk: keys.apiKey(id) }, ConsistentRead: true })),
  );
  if (!Item || Item.revoked_at) return null;
  const expected = Buffer.from(Item.secret_hash as string, 'hex');
  const actual = Buffer.from(hashSecret(secret), 'hex');
  if (expected.length !== actual.length || !timingSafeEqual(expected, actual)) return null;
  return toKey(Item);
}

export async function listApiKeys(ctx: StoreContext, tenant: string): Promise<ApiKey[]> {
  const out: ApiKey[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await call('list API keys', () =>
      ctx.doc.send(new QueryCommand({
        TableName: ctx.table,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :k)',
        ExpressionAttributeValues: { ':pk': keys.tenant(tenant), ':k': 'KEY#' },
        ExclusiveStartKey: start,
      })),
    );
    out.push(...(page.Items ?? []).map(toKey));
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
}

export async function revokeApiKey(ctx: StoreContext, tenant: string, id: string, at = new Date().toISOString()): Promise<void> {
  try {
    await call('revoke the API key', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: { pk: keys.tenant(tenant), sk: keys.apiKey(id) },
        UpdateExpression: 'SET revoked_at = if_not_exists(revoked_at, :at)',
        ConditionExpression: 'attribute_exists(pk)',
        ExpressionAttributeValues: { ':at': at },
      })),
    );
  } catch (error) {
    if (error instanceof ConditionFailed) throw new NotFoundError('API key');
    throw error;
  }
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
