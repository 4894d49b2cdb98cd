/**
 * Quota counters: small items with a TTL, in the same table (keys in item-keys.ts). The policy —
 * which counters a turn reads and writes, the limits, the windows — is lib/turns/quotas.ts; this
 * file only reads and writes counters.
 *
 * - Usage (`T#<tenant>#Q#<scope>` / `D#<day>`): one item per scope and UTC day holding the model
 *   tokens of that day (`tok`) and the turns of its latest minute (`n` turns in minute `m`, a
 *   fixed window that starts again when a turn lands in a later minute). A tenant's usage is
 *   spread over shards (scopes `~0`..`~N-1`) written at random and read together, so a busy
 *   tenant is not one hot key; an end user's or key's is one item.
 * - Run starts (`T#<tenant>#QR#<scope>` / `M#<minute>`): one item per key or client address and
 *   minute, taken by a conditional increment that refuses past the limit (exact under concurrency).
 *
 * Every item is about 100 bytes: each write is 1 WRU, each read 0.5 RRU (eventually consistent).
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { batchGetItems, call, capacityParam, ConditionFailed, isExpired, reportCapacity, type StoreContext } from './dynamo';
import { keys } from './item-keys';

export const QUOTA_KIND = 'quota';

/** One usage counter: a scope of a tenant on a UTC day (`yyyy-mm-dd`). */
export interface UsageKey {
  tenant: string;
  scope: string;
  day: string;
}

export interface Usage {
  /** The minute (epoch ms / 60000) `turns` counts; null when no turn was counted that day. */
  minute: number | null;
  turns: number;
  tokens: number;
}

const NAMES = { '#n': 'n', '#m': 'm', '#tok': 'tok', '#ttl': 'ttl', '#kind': 'kind' };
const BATCH_ATTEMPTS = 5;

function usageKey(k: UsageKey): { pk: string; sk: string } {
  return { pk: keys.quotaUsage(k.tenant, k.scope), sk: keys.quotaDay(k.day) };
}

/**
 * The counters of `wanted`, in order (zeros for those not written yet), in one BatchGetItem
 * (eventually consistent: a count written a moment ago may not be seen yet). At most 100 keys.
 */
export async function readUsage(ctx: StoreContext, wanted: readonly UsageKey[]): Promise<Usage[]> {
  const items = await batchGetItems(ctx, 'read the quota counters', wanted.map(usageKey), { consistent: false, operation: 'quota', attempts: BATCH_ATTEMPTS });
  const found = new Map(items.map((item) => [`${item.pk}\u0000${item.sk}`, item]));
  const at = (ctx.now ?? Date.now)();
  return wanted.map((k) => {
    const { pk, sk } = usageKey(k);
    const item = found.get(`${pk}\u0000${sk}`);
    if (!item || isExpired(item, at)) return { minute: null, turns: 0, tokens: 0 };
    return { minute: typeof item.m === 'number' ? item.m : null, turns: Number(item.n ?? 0), tokens: Number(item.tok ?? 0) };
  });
}

/**
 * Adds one turn in `minute` and its tokens to a counter. The turn count lives in the item's
 * latest minute: a turn of that same minute adds to it, a turn of a later minute starts it
 * again. `sameMinute` is the caller's guess (from what it read last); a wrong guess fails its
 * condition and the other update is made: two round trips at a minute's turn, one otherwise.
 */
export async function addUsage(
  ctx: StoreContext,
  key: UsageKey,
  add: { minute: number; tokens: number; ttlSeconds: number },
  sameMinute: boolean,
): Promise<void> {
  const values = { ':m': add.minute, ':one': 1, ':tok': add.tokens, ':ttl': add.ttlSeconds, ':kind': QUOTA_KIND };
  const same = { update: 'SET #ttl = :ttl, #kind = :kind ADD #n :one, #tok :tok', condition: '#m = :m' };
  const later = { update: 'SET #m = :m, #n = :one, #ttl = :ttl, #kind = :kind ADD #tok :tok', condition: 'attribute_not_exists(#m) OR #m <> :m' };
  for (const attempt of sameMinute ? [same, later] : [later, same]) {
    try {
      await call('count the turn', () =>
        ctx.doc.send(new UpdateCommand({
          TableName: ctx.table,
          Key: usageKey(key),
          UpdateExpression: attempt.update,
          ConditionExpression: attempt.condition,
          ExpressionAttributeNames: NAMES,
          ExpressionAttributeValues: values,
          ...capacityParam(ctx),
        })).then((out) => reportCapacity(ctx, 'quota', 'write', out.ConsumedCapacity)),
      );
      return;
    } catch (error) {
      if (!(error instanceof ConditionFailed)) throw error;
    }
  }
  // both conditions failed: other writers moved the minute back and forth meanwhile; this turn goes uncounted
}

/** One run-start counter: a key or a client address of a tenant, in one minute. */
export interface RunStartKey {
  tenant: string;
  scope: string;
  minute: number;
}

/**
 * Takes one of the `limit` run starts of a minute: true if taken, false when all are taken
 * (nothing written then). A conditional increment, so concurrent starts never exceed the limit.
 */
export async function takeRunStart(ctx: StoreContext, key: RunStartKey, limit: number, ttlSeconds: number): Promise<boolean> {
  try {
    await call('count the run start', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: { pk: keys.quotaRuns(key.tenant, key.scope), sk: keys.quotaMinute(key.minute) },
        UpdateExpression: 'SET #ttl = :ttl, #kind = :kind ADD #n :one',
        ConditionExpression: 'attribute_not_exists(#n) OR #n < :limit',
        ExpressionAttributeNames: { '#n': 'n', '#ttl': 'ttl', '#kind': 'kind' },
        ExpressionAttributeValues: { ':one': 1, ':limit': limit, ':ttl': ttlSeconds, ':kind': QUOTA_KIND },
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'quota', 'write', out.ConsumedCapacity)),
    );
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}
