/**
 * Idempotency records: `T#<tenant>#I#<key>` -> the run and turn a request claimed, its claim
 * token and the fingerprint of the normalized request. Written before the claim, so a second
 * request with the same key finds it and waits for that turn instead of running its own; the
 * stored turn record (committed by that token) holds the response to return.
 */
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { call, capacityParam, ConditionFailed, isExpired, reportCapacity, type StoreContext } from './dynamo';
import { keys } from './item-keys';

export const IDEMPOTENCY_TTL_SECONDS = 24 * 3600;

export interface IdempotencyRecord {
  key: string;
  fingerprint: string;
  sessionId: string;
  /** The turn the request claimed; for a queued input, the turn it was queued to become. */
  turn: number;
  token: string;
  createdAt: number;
  /**
   * A queued input (lib/store/inbox.ts): the lowest turn it can become (the slot of the turn it
   * was queued behind). Such a key is never taken over: its input becomes a turn whatever happens.
   */
  queuedFrom?: number;
}

export async function getIdempotency(ctx: StoreContext, tenant: string, key: string): Promise<IdempotencyRecord | null> {
  const { Item } = await call('read the idempotency record', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.idempotency(tenant, key), sk: 'I' }, ConsistentRead: true })),
  );
  if (!Item || isExpired(Item, (ctx.now ?? Date.now)())) return null;
  return {
    key,
    fingerprint: Item.fingerprint as string,
    sessionId: Item.session_id as string,
    turn: Item.turn as number,
    token: Item.token as string,
    createdAt: Item.created_at as number,
    ...(typeof Item.queued_from === 'number' ? { queuedFrom: Item.queued_from } : {}),
  };
}

/**
 * Records `record` for its key if the key is free, expired, or still held by `replacing` (the
 * token of an attempt that never committed). Returns false when another request got the key.
 */
export async function putIdempotency(
  ctx: StoreContext,
  tenant: string,
  record: IdempotencyRecord,
  replacing: string | null,
  ttlSeconds = IDEMPOTENCY_TTL_SECONDS,
): Promise<boolean> {
  try {
    await call('record the idempotency key', () =>
      ctx.doc.send(new PutCommand({ ...idempotencyPut(ctx, tenant, record, replacing, ttlSeconds), ...capacityParam(ctx) }))
        .then((out) => reportCapacity(ctx, 'idempotency', 'write', out.ConsumedCapacity)),
    );
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}

/**
 * The conditional Put that records `record` for its key (see putIdempotency), as a request or
 * a transaction item (a queued input's key is recorded with the input: lib/store/inbox.ts).
 */
export function idempotencyPut(ctx: StoreContext, tenant: string, record: IdempotencyRecord, replacing: string | null, ttlSeconds = IDEMPOTENCY_TTL_SECONDS) {
  const at = (ctx.now ?? Date.now)();
  return {
    TableName: ctx.table,
    Item: {
      pk: keys.idempotency(tenant, record.key),
      sk: 'I',
      kind: 'idempotency',
      fingerprint: record.fingerprint,
      session_id: record.sessionId,
      turn: record.turn,
      token: record.token,
      created_at: record.createdAt,
      ...(record.queuedFrom !== undefined ? { queued_from: record.queuedFrom } : {}),
      ttl: Math.floor(at / 1000) + ttlSeconds,
    },
    ConditionExpression: replacing
      ? '#token = :old OR #ttl <= :now'
      : 'attribute_not_exists(pk) OR #ttl <= :now',
    ExpressionAttributeNames: { '#ttl': 'ttl', ...(replacing ? { '#token': 'token' } : {}) },
    ExpressionAttributeValues: { ':now': Math.floor(at / 1000), ...(replacing ? { ':old': replacing } : {}) },
  };
}

/**
 * Marks the attempt `token` recorded for its key as over (its claim was given back without a
 * commit): a request with the key takes the turn over at once rather than waiting for the
 * attempt to run out. Nothing happens when the record names another attempt by now.
 */
export async function abandonIdempotency(ctx: StoreContext, tenant: string, key: string, token: string): Promise<void> {
  await call('let go of the idempotency key', () =>
    ctx.doc.send(new UpdateCommand({
      TableName: ctx.table,
      Key: { pk: keys.idempotency(tenant, key), sk: 'I' },
      UpdateExpression: 'SET created_at = :over',
      ConditionExpression: '#token = :tok',
      ExpressionAttributeNames: { '#token': 'token' },
      ExpressionAttributeValues: { ':over': 0, ':tok': token },
      ...capacityParam(ctx),
    })).then((out) => reportCapacity(ctx, 'idempotency', 'write', out.ConsumedCapacity)),
  ).catch((error: unknown) => {
    if (!(error instanceof ConditionFailed)) throw error;
  });
}
