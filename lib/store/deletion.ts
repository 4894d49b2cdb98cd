/**
 * Deleting a session: at once for every reader, and closed to every writer still in flight.
 * Whole partitions and items by key are deleted by partitions.ts (also the expiry cleanup's).
 */
import { QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { call, capacityParam, ConditionFailed, queryAll, reportCapacity, type StoreContext } from './dynamo';
import { NotFoundError } from './errors';
import { keys, SESSION_HEAD_SK, turnFromSk } from './item-keys';
import { deleteKeys } from './partitions';
import { closeSlot, DELETED_SESSION_TTL_SECONDS, isRecordItem, isTombstone } from './turn-slot';

/**
 * Deletes a session. Readers must see it gone at once, and no turn still in flight may write
 * into it afterwards: a commit landing after a plain sweep would stay forever, with no head and
 * no TTL. So:
 *
 * 1. the head is marked deleted and taken out of the listing and timer indexes: every read
 *    answers 404 from now on (it keeps a TTL of DELETED_SESSION_TTL_SECONDS);
 * 2. the next turn's slot is closed by a tombstone with the same TTL (turn-slot.ts): every write
 *    of a turn in flight fails on it, and that turn answers 404;
 * 3. everything else in the partition is deleted now.
 *
 * When DynamoDB removes the head, the cleanup (cleanup.ts) deletes what is left: the tombstone,
 * and the blobs of a writer that died between writing them and being refused (a refused writer
 * that lives on sweeps them itself, `sweepDeletedSession`). A deletion cut short is finished
 * the same way. NotFoundError when the session has no live head.
 */
export async function deleteSession(ctx: StoreContext, tenant: string, id: string): Promise<void> {
  const pk = keys.session(tenant, id);
  const at = (ctx.now ?? Date.now)();
  const ttl = Math.floor(at / 1000) + DELETED_SESSION_TTL_SECONDS;
  try {
    await call('mark the session deleted', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: { pk, sk: SESSION_HEAD_SK },
        // the index keys are those sessions.ts gives a head: listing (gsi1), armed timer (gsi2)
        UpdateExpression: 'SET deleted_at = if_not_exists(deleted_at, :at), #ttl = :ttl REMOVE gsi1pk, gsi1sk, gsi2pk, gsi2sk, due_at',
        ConditionExpression: 'attribute_exists(pk) AND #ttl > :now',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':at': at, ':ttl': ttl, ':now': Math.floor(at / 1000) },
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'delete', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (error instanceof ConditionFailed) throw new NotFoundError('run');
    throw error;
  }
  await closeSlot(ctx, tenant, id, await nextSlot(ctx, pk), ttl);
  await sweepDeletedSession(ctx, pk);
}

/** The turn whose slot comes next: above the highest record, or that of the claim (or tombstone) on top. */
async function nextSlot(ctx: StoreContext, pk: string): Promise<number> {
  const { Items = [] } = await call('read the session', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :first AND :last',
      ExpressionAttributeValues: { ':pk': pk, ':first': keys.turn(0), ':last': keys.turn(99_999_999) },
      ProjectionExpression: 'sk, kind',
      ScanIndexForward: false,
      Limit: 1,
      ConsistentRead: true,
    })),
  );
  const top = Items[0];
  if (!top) return 1;
  const turn = turnFromSk(top.sk as string);
  return isRecordItem(top) ? turn + 1 : turn;
}

/**
 * Deletes every item of a deleted session but its marked head and its tombstone, which stay
 * until their TTL (see deleteSession). Also run by a writer refused by the tombstone, for the
 * blobs it wrote just before.
 */
export async function sweepDeletedSession(ctx: StoreContext, pk: string): Promise<number> {
  const items = await queryAll(ctx, 'list the session items', {
    KeyConditionExpression: 'pk = :pk',
    ExpressionAttributeValues: { ':pk': pk },
    ProjectionExpression: 'pk, sk, kind',
    ConsistentRead: true,
  });
  const doomed = items.filter((i) => i.sk !== SESSION_HEAD_SK && !isTombstone(i));
  await deleteKeys(ctx, doomed.map((i) => ({ pk: i.pk as string, sk: i.sk as string })));
  return doomed.length;
}
