/**
 * Deleting whole partitions (a session's rest, a file) and items by key, in batches: what a
 * user's delete and the expiry cleanup both do. Only Query and BatchWriteItem: the cleanup
 * function's role allows no more.
 */
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import { backoff, call, capacityParam, queryAll, reportCapacity, type StoreContext } from './dynamo';

export async function deletePartition(ctx: StoreContext, pk: string): Promise<number> {
  const items = await queryAll(ctx, 'list the session items', { KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ProjectionExpression: 'pk, sk' });
  await deleteKeys(ctx, items.map((i) => ({ pk: i.pk as string, sk: i.sk as string })));
  return items.length;
}

/** Deletes items by key in batches of 25, retrying what DynamoDB leaves unprocessed. */
export async function deleteKeys(ctx: StoreContext, items: { pk: string; sk: string }[]): Promise<void> {
  for (let i = 0; i < items.length; i += 25) {
    let requests = items.slice(i, i + 25).map((Key) => ({ DeleteRequest: { Key } }));
    for (let attempt = 0; requests.length > 0; attempt++) {
      const out = await call('delete items', () => ctx.doc.send(new BatchWriteCommand({ RequestItems: { [ctx.table]: requests }, ...capacityParam(ctx) })));
      reportCapacity(ctx, 'delete', 'write', out.ConsumedCapacity);
      requests = (out.UnprocessedItems?.[ctx.table] ?? []) as typeof requests;
      if (requests.length > 0) await backoff(attempt);
    }
  }
}
