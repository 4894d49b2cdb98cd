/**
 * A knowledge base's index: the serialized full-text (and vector) index of its chunks, in
 * content-addressed blobs of its partition (blobs.ts), and the pointer to the current one on the
 * knowledge base item. The pointer moves only if no chunk changed since the chunks it was built
 * from were read (`docs_version`), so a rebuild that raced a later parse can never leave its
 * older index in place; the index it replaces is deleted.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { MissingBlobsError, readBlobs, writeBlobs } from './blobs';
import { call, capacityParam, ConditionFailed, queryAll, reportCapacity, type StoreContext } from './dynamo';
import { NotFoundError } from './errors';
import { KNOWLEDGE_BASE_SK, keys } from './item-keys';
import type { IndexPointer } from './knowledge';
import { deleteKeys } from './partitions';

export type SwapResult = 'swapped' | 'stale';

/**
 * Stores the index text and points the knowledge base at it, if its chunks are still those of
 * `pointer.version`; 'stale' when they are not (a later change will bring its own index).
 * NotFoundError when the knowledge base went.
 */
export async function swapIndex(ctx: StoreContext, tenant: string, kbId: string, pointer: IndexPointer, text: string): Promise<SwapResult> {
  const pk = keys.knowledgeBase(tenant, kbId);
  await writeBlobs(ctx, pk, new Map([[pointer.hash, text]]));
  let previous: string | undefined;
  try {
    const out = await call('point at the new index', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: { pk, sk: KNOWLEDGE_BASE_SK },
        UpdateExpression: 'SET index_hash = :h, index_version = :v, index_bytes = :b, index_chunks = :c, index_at = :at',
        ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(deleting) AND docs_version = :v',
        ExpressionAttributeValues: { ':h': pointer.hash, ':v': pointer.version, ':b': pointer.bytes, ':c': pointer.chunks, ':at': pointer.builtAt },
        ReturnValues: 'UPDATED_OLD',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        ...capacityParam(ctx),
      })),
    );
    reportCapacity(ctx, 'point at the new index', 'write', out.ConsumedCapacity);
    previous = out.Attributes?.index_hash as string | undefined;
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    if (!error.item || error.item.deleting) throw new NotFoundError('knowledge base');
    return 'stale';
  }
  if (previous && previous !== pointer.hash) await dropIndex(ctx, tenant, kbId, previous);
  return 'swapped';
}

/** The index text, or undefined when its blob is gone (replaced since the pointer was read). */
export async function readIndex(ctx: StoreContext, tenant: string, kbId: string, hash: string): Promise<string | undefined> {
  try {
    return (await readBlobs(ctx, keys.knowledgeBase(tenant, kbId), [hash])).get(hash);
  } catch (error) {
    if (error instanceof MissingBlobsError) return undefined;
    throw error;
  }
}

/**
 * Deletes an index blob nothing points at: one replaced, or one whose swap was refused. A reader
 * that still follows an old pointer to it finds it gone and reads the pointer again.
 */
export async function dropIndex(ctx: StoreContext, tenant: string, kbId: string, hash: string): Promise<void> {
  const pk = keys.knowledgeBase(tenant, kbId);
  const items = await queryAll(ctx, 'delete the old index', {
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :b)',
    ExpressionAttributeValues: { ':pk': pk, ':b': keys.blob(hash) },
    ProjectionExpression: 'pk, sk',
  });
  await deleteKeys(ctx, items.map((i) => ({ pk, sk: i.sk as string })));
}
