/**
 * Uploaded files, per tenant: a metadata item `T#<tenant>#F#<file id>` and the content,
 * content-addressed, in chunks under `T#<tenant>#FB#<sha256>` (the same bytes uploaded twice
 * are stored once). A file nobody uses expires with its TTL; using it in a run pushes its
 * expiry to the run's, so it never goes while a run may still read it.
 */
import { createHash } from 'node:crypto';
import { BatchWriteCommand, GetCommand, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { call, ConditionFailed, isExpired, queryAll, type StoreContext } from './dynamo';
import { NotFoundError } from './errors';
import { deletePartition } from './partitions';
import { LISTING_INDEX } from './table';

const CHUNK_BYTES = 300 * 1024;
export const UNUSED_FILE_TTL_SECONDS = 7 * 86_400;

export interface StoredFile {
  tenant: string;
  id: string;
  name: string;
  size: number;
  mimeType: string;
  sha256: string;
  createdAt: string;
  /**
   * Whose file it is: `run:<id>` (uploaded with that run's token, or bound to the run that first
   * named it) or `user:<id>` (uploaded with an end-user token); absent: the tenant's (an admin
   * key's upload, or a public key's not yet used).
   */
  owner?: string;
}

/** The listing of an end user's files (gsi1), for deleting what they uploaded. */
export const userFileList = (tenant: string, userId: string) => `T#${tenant}#U#${userId}#F`;

const fileKey = (tenant: string, id: string) => ({ pk: `T#${tenant}#F#${id}`, sk: 'F' });
const contentPk = (tenant: string, sha: string) => `T#${tenant}#FB#${sha}`;
const nowSec = (ctx: StoreContext) => Math.floor((ctx.now ?? Date.now)() / 1000);

export async function putFile(ctx: StoreContext, file: Omit<StoredFile, 'sha256'>, bytes: Uint8Array): Promise<StoredFile> {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const stored: StoredFile = { ...file, sha256 };
  const pk = contentPk(file.tenant, sha256);
  const existing = await call('read the file content', () => ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk, sk: 'C' }, ConsistentRead: true })));
  const ttl = nowSec(ctx) + UNUSED_FILE_TTL_SECONDS;
  if (!existing.Item) {
    const chunks = Math.max(1, Math.ceil(bytes.length / CHUNK_BYTES));
    const items: Record<string, unknown>[] = [];
    for (let i = 0; i < chunks; i++) {
      items.push({ pk, sk: `C#${String(i).padStart(4, '0')}`, kind: 'file_chunk', d: Buffer.from(bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES)) });
    }
    for (let i = 0; i < items.length; i += 25) {
      let requests = items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } }));
      while (requests.length > 0) {
        const out = await call('store the file', () => ctx.doc.send(new BatchWriteCommand({ RequestItems: { [ctx.table]: requests } })));
        requests = (out.UnprocessedItems?.[ctx.table] ?? []) as typeof requests;
      }
    }
    // the index item last: content is readable once it exists
    await call('store the file', () => ctx.doc.send(new PutCommand({ TableName: ctx.table, Item: { pk, sk: 'C', kind: 'file_content', chunks, size: bytes.length, ttl } })));
  } else {
    await extendTtl(ctx, { pk, sk: 'C' }, ttl);
  }
  await call('store the file', () =>
    ctx.doc.send(new PutCommand({
      TableName: ctx.table,
      Item: {
        ...fileKey(file.tenant, file.id),
        kind: 'file',
        id: file.id,
        tenant: file.tenant,
        name: file.name,
        size: file.size,
        mime_type: file.mimeType,
        sha256,
        created_at: file.createdAt,
        ttl,
        ...(file.owner ? { owner: file.owner } : {}),
        ...(file.owner?.startsWith('user:') ? { gsi1pk: userFileList(file.tenant, file.owner.slice(5)), gsi1sk: `${file.createdAt}#${file.id}` } : {}),
      },
    })),
  );
  return stored;
}

/** The file's metadata, or NotFoundError (also for another tenant's or an expired file). */
export async function getFile(ctx: StoreContext, tenant: string, id: string): Promise<StoredFile> {
  const { Item } = await call('read the file', () => ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: fileKey(tenant, id), ConsistentRead: true })));
  if (!Item || isExpired(Item, (ctx.now ?? Date.now)())) throw new NotFoundError('file');
  return toFile(tenant, Item);
}

function toFile(tenant: string, item: Record<string, unknown>): StoredFile {
  return {
    tenant,
    id: item.id as string,
    name: item.name as string,
    size: item.size as number,
    mimeType: item.mime_type as string,
    sha256: item.sha256 as string,
    createdAt: item.created_at as string,
    ...(typeof item.owner === 'string' ? { owner: item.owner } : {}),
  };
}

/**
 * Makes an unowned file `owner`'s (a no-op when it is already) and answers it as it is now;
 * `from` also takes it over from that owner. When someone else owns it, nothing changes and
 * `takenBy` names them. NotFoundError for a missing or expired file.
 */
export async function bindFile(ctx: StoreContext, tenant: string, id: string, owner: string, from?: string): Promise<{ file: StoredFile } | { takenBy: string }> {
  try {
    const { Attributes } = await call('bind the file', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: fileKey(tenant, id),
        UpdateExpression: 'SET #owner = :o',
        ConditionExpression: `attribute_exists(pk) AND #ttl > :now AND ${from === undefined ? '(attribute_not_exists(#owner) OR #owner = :o)' : '#owner = :from'}`,
        ExpressionAttributeNames: { '#owner': 'owner', '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':o': owner, ':now': nowSec(ctx), ...(from === undefined ? {} : { ':from': from }) },
        ReturnValues: 'ALL_NEW',
      })),
    );
    return { file: toFile(tenant, Attributes ?? {}) };
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    // missing or expired: NotFoundError; bound meanwhile by the same owner: that is ours too
    const now = await getFile(ctx, tenant, id);
    return now.owner === owner ? { file: now } : { takenBy: now.owner ?? '' };
  }
}

export async function readFileContent(ctx: StoreContext, file: StoredFile): Promise<Buffer> {
  const pk = contentPk(file.tenant, file.sha256);
  const items = await queryAll(ctx, 'read the file content', { KeyConditionExpression: 'pk = :pk AND begins_with(sk, :c)', ExpressionAttributeValues: { ':pk': pk, ':c': 'C#' }, ConsistentRead: true });
  return Buffer.concat(items.map((item) => Buffer.from(item.d as Uint8Array)));
}

/** A run uses the file: keep it (and its content) at least until `untilSec`. */
export async function keepFileUntil(ctx: StoreContext, file: StoredFile, untilSec: number): Promise<void> {
  await extendTtl(ctx, fileKey(file.tenant, file.id), untilSec);
  await extendTtl(ctx, { pk: contentPk(file.tenant, file.sha256), sk: 'C' }, untilSec);
}

/** The ids of files uploaded with an end user's token, a page at a time. */
export async function listUserFiles(ctx: StoreContext, tenant: string, userId: string, cursor?: Record<string, unknown>): Promise<{ ids: string[]; cursor?: Record<string, unknown> }> {
  const page = await call('list the user\'s files', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      IndexName: LISTING_INDEX,
      KeyConditionExpression: 'gsi1pk = :pk',
      ExpressionAttributeValues: { ':pk': userFileList(tenant, userId) },
      ...(cursor ? { ExclusiveStartKey: cursor } : {}),
    })),
  );
  return { ids: (page.Items ?? []).map((i) => i.id as string), ...(page.LastEvaluatedKey ? { cursor: page.LastEvaluatedKey } : {}) };
}

export async function deleteFile(ctx: StoreContext, tenant: string, id: string): Promise<void> {
  await getFile(ctx, tenant, id);
  // the content may be shared by another upload of the same bytes: it goes with its own TTL
  await deletePartition(ctx, fileKey(tenant, id).pk);
}

async function extendTtl(ctx: StoreContext, key: { pk: string; sk: string }, untilSec: number): Promise<void> {
  await call('keep the file', () =>
    ctx.doc.send(new UpdateCommand({
      TableName: ctx.table,
      Key: key,
      UpdateExpression: 'SET #ttl = :t',
      ConditionExpression: 'attribute_exists(pk) AND #ttl < :t',
      ExpressionAttributeNames: { '#ttl': 'ttl' },
      ExpressionAttributeValues: { ':t': untilSec },
    })),
  ).catch((error: unknown) => {
    if (!(error instanceof ConditionFailed)) throw error;
  });
}
