/**
 * Tenant secrets, as ciphertext only, under the tenant's own partition:
 *
 *   T#<tenant>  SDK#<000001>     a data key of the tenant, wrapped by the master key
 *                                  {wrapped: "easel1.<master key id>.<…>", version, retired_at?}
 *                                  (in gsi1 under SECRET_DATA_KEYS, to re-wrap them all)
 *   T#<tenant>  SECRET#<name>    a value, sealed by one data key
 *                                  {ciphertext: "easel1.dk<version>.<…>", data_key_version,
 *                                   created_at, updated_at}
 *
 * Nothing here sees a plaintext or an unwrapped key: lib/secrets seals and opens. A value is
 * written only while its data key exists and is not retired (a condition on the key item in
 * the same transaction), so a data key rotation cannot strand a value sealed by a key it
 * deletes.
 */
import { DeleteCommand, GetCommand, PutCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { call, ConditionFailed, queryAll, type StoreContext } from './dynamo';
import { keys, SECRET_DATA_KEY_PREFIX, SECRET_PREFIX } from './item-keys';

export interface StoredDataKey {
  tenant: string;
  version: number;
  wrapped: string;
  createdAt: string;
  retiredAt: string | null;
}

export interface StoredSecret {
  name: string;
  ciphertext: string;
  dataKeyVersion: number;
  createdAt: string;
  updatedAt: string;
}

/** The data key a write named is gone or retired (a rotation ran): seal with the current one and retry. */
export class DataKeyRetiredError extends Error {
  constructor() {
    super('the data key was retired by a rotation');
  }
}

/** gsi1 key of every data key, for re-wrapping them all after a master key rotation. */
const ALL_DATA_KEYS = 'SECRET_DATA_KEYS';
const dataKeyKey = (tenant: string, version: number) => ({ pk: keys.tenant(tenant), sk: keys.secretDataKey(version) });
const secretKey = (tenant: string, name: string) => ({ pk: keys.tenant(tenant), sk: keys.secret(name) });

/** The tenant's data keys, oldest first. */
export async function listDataKeys(ctx: StoreContext, tenant: string): Promise<StoredDataKey[]> {
  return (await tenantItems(ctx, tenant, SECRET_DATA_KEY_PREFIX, 'list the data keys')).map(toDataKey);
}

/** The items of the tenant's own partition whose sort key starts with `prefix`, in order. */
function tenantItems(ctx: StoreContext, tenant: string, prefix: string, what: string): Promise<Record<string, unknown>[]> {
  return queryAll(ctx, what, {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)',
    ExpressionAttributeValues: { ':pk': keys.tenant(tenant), ':p': prefix },
    ConsistentRead: true,
  });
}

export async function getDataKey(ctx: StoreContext, tenant: string, version: number): Promise<StoredDataKey | null> {
  const { Item } = await call('read the data key', () => ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: dataKeyKey(tenant, version), ConsistentRead: true })));
  return Item ? toDataKey(Item) : null;
}

/** Adds a data key version; false when that version exists already (a concurrent writer made it). */
export async function putDataKey(ctx: StoreContext, key: Omit<StoredDataKey, 'retiredAt'>): Promise<boolean> {
  try {
    await call('store the data key', () =>
      ctx.doc.send(new PutCommand({
        TableName: ctx.table,
        Item: {
          ...dataKeyKey(key.tenant, key.version),
          kind: 'secret_data_key',
          tenant: key.tenant,
          version: key.version,
          wrapped: key.wrapped,
          created_at: key.createdAt,
          gsi1pk: ALL_DATA_KEYS,
          gsi1sk: `${key.tenant}#${String(key.version).padStart(6, '0')}`,
        },
        ConditionExpression: 'attribute_not_exists(pk)',
      })),
    );
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}

/** Replaces a data key's wrapping (master key rotation); false when someone else changed it first. */
export async function rewrapDataKey(ctx: StoreContext, tenant: string, version: number, from: string, to: string): Promise<boolean> {
  try {
    await call('re-wrap the data key', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: dataKeyKey(tenant, version),
        UpdateExpression: 'SET #wrapped = :to',
        ConditionExpression: '#wrapped = :from',
        ExpressionAttributeNames: { '#wrapped': 'wrapped' },
        ExpressionAttributeValues: { ':from': from, ':to': to },
      })),
    );
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}

/** Marks a data key retired: from now on no value is written with it. */
export async function retireDataKey(ctx: StoreContext, tenant: string, version: number, at: string): Promise<void> {
  await call('retire the data key', () =>
    ctx.doc.send(new UpdateCommand({
      TableName: ctx.table,
      Key: dataKeyKey(tenant, version),
      UpdateExpression: 'SET retired_at = if_not_exists(retired_at, :at)',
      ConditionExpression: 'attribute_exists(pk)',
      ExpressionAttributeValues: { ':at': at },
    })),
  ).catch((error: unknown) => {
    if (!(error instanceof ConditionFailed)) throw error;
  });
}

export async function deleteDataKey(ctx: StoreContext, tenant: string, version: number): Promise<void> {
  await call('delete the data key', () => ctx.doc.send(new DeleteCommand({ TableName: ctx.table, Key: dataKeyKey(tenant, version) })));
}

/**
 * Every data key of every tenant, oldest tenant first (an operator's task after a master key
 * rotation, not a request path): data keys are listed in gsi1 under one key, written once per
 * data key version.
 */
export async function listAllDataKeys(ctx: StoreContext): Promise<{ tenant: string; version: number }[]> {
  const items = await queryAll(ctx, 'list every data key', {
    IndexName: 'gsi1',
    KeyConditionExpression: 'gsi1pk = :all',
    ExpressionAttributeValues: { ':all': ALL_DATA_KEYS },
  });
  return items.map((item) => ({ tenant: (item.pk as string).slice(keys.tenant('').length), version: item.version as number }));
}

/**
 * Writes a value sealed by data key `dataKeyVersion`, on the condition that this key exists and
 * is not retired (else `DataKeyRetiredError`). `expect` makes it a re-encryption: it applies only
 * while the stored ciphertext is still `expect` (a concurrent write wins). Returns whether the
 * name was new, and when it was first made.
 */
export async function putSecret(
  ctx: StoreContext,
  tenant: string,
  secret: { name: string; ciphertext: string; dataKeyVersion: number; at: string; expect?: string },
): Promise<{ created: boolean; createdAt: string } | null> {
  const existing = await getSecret(ctx, tenant, secret.name);
  if (secret.expect !== undefined && existing?.ciphertext !== secret.expect) return null;
  const createdAt = existing?.createdAt ?? secret.at;
  try {
    await call('store the secret', () =>
      ctx.doc.send(new TransactWriteCommand({
        TransactItems: [
          {
            ConditionCheck: {
              TableName: ctx.table,
              Key: dataKeyKey(tenant, secret.dataKeyVersion),
              ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(retired_at)',
            },
          },
          {
            Put: {
              TableName: ctx.table,
              Item: {
                ...secretKey(tenant, secret.name),
                kind: 'secret',
                name: secret.name,
                ciphertext: secret.ciphertext,
                data_key_version: secret.dataKeyVersion,
                created_at: createdAt,
                updated_at: secret.expect !== undefined && existing ? existing.updatedAt : secret.at,
              },
              // the item is still the one read above (or still absent)
              ...(existing
                ? { ConditionExpression: 'ciphertext = :seen', ExpressionAttributeValues: { ':seen': existing.ciphertext } }
                : { ConditionExpression: 'attribute_not_exists(pk)' }),
            },
          },
        ],
      })),
    );
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    if (error.index === 0) throw new DataKeyRetiredError();
    // a concurrent write of the same name: a re-encryption yields; a put tries again on top of it
    if (secret.expect !== undefined) return null;
    return putSecret(ctx, tenant, secret);
  }
  return { created: !existing, createdAt };
}

export async function getSecret(ctx: StoreContext, tenant: string, name: string): Promise<StoredSecret | null> {
  const { Item } = await call('read the secret', () => ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: secretKey(tenant, name), ConsistentRead: true })));
  return Item ? toSecret(Item) : null;
}

/** The tenant's secrets by name (with their ciphertexts: callers that show them drop it). */
export async function listSecrets(ctx: StoreContext, tenant: string): Promise<StoredSecret[]> {
  return (await tenantItems(ctx, tenant, SECRET_PREFIX, 'list the secrets')).map(toSecret);
}

/** Deletes a secret; false when there was none by that name. */
export async function deleteSecret(ctx: StoreContext, tenant: string, name: string): Promise<boolean> {
  const { Attributes } = await call('delete the secret', () => ctx.doc.send(new DeleteCommand({ TableName: ctx.table, Key: secretKey(tenant, name), ReturnValues: 'ALL_OLD' })));
  return Attributes !== undefined;
}

function toDataKey(item: Record<string, unknown>): StoredDataKey {
  return {
    tenant: item.tenant as string,
    version: item.version as number,
    wrapped: item.wrapped as string,
    createdAt: item.created_at as string,
    retiredAt: (item.retired_at as string | undefined) ?? null,
  };
}

function toSecret(item: Record<string, unknown>): StoredSecret {
  return {
    name: item.name as string,
    ciphertext: item.ciphertext as string,
    dataKeyVersion: item.data_key_version as number,
    createdAt: item.created_at as string,
    updatedAt: item.updated_at as string,
  };
}
