/**
 * The mark that makes a form link's e-mail go once per turn (lib/turns/form-link-mail.ts): one
 * small item per paused turn and form, in the run's partition (so deleting the run deletes it),
 * expiring a day after the link does. A sender takes it (`sending`, with a lease) before it
 * sends, and settles it: `sent`, `failed` (for good) or `retry` (a transient failure: the next
 * delivery of the turn may try again). A mark already `sent` or `failed`, or held by a live
 * sender, turns every other sender away; a `sending` mark whose lease ran out (its sender died)
 * may be taken over.
 */
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { call, capacityParam, ConditionFailed, isExpired, reportCapacity, type StoreContext } from './dynamo';
import { keys } from './item-keys';

export type PauseMailStatus = 'sending' | 'sent' | 'failed' | 'retry';

export interface PauseMailMark {
  status: PauseMailStatus;
  /** When it was settled or taken (ISO). */
  at: string;
  /** What went wrong, for `failed` and `retry`. */
  error?: string;
  /** The addresses the SMTP server accepted, for `sent`. */
  accepted?: string[];
}

export interface PauseMailKey {
  tenant: string;
  runId: string;
  turn: number;
  componentId: string;
}

const keyOf = (k: PauseMailKey) => ({ pk: keys.session(k.tenant, k.runId), sk: keys.pauseMail(k.turn, k.componentId) });
const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();

/**
 * Takes the mark for `owner` until `leaseMs` from now; false when another sender has it, or it
 * was sent or failed for good. `expiresAt` (epoch seconds) is the link's expiry.
 */
export async function takePauseMail(ctx: StoreContext, key: PauseMailKey, owner: string, leaseMs: number, expiresAt: number): Promise<boolean> {
  const at = now(ctx);
  try {
    const res = await call('take the form link mail', () =>
      ctx.doc.send(new PutCommand({
        TableName: ctx.table,
        Item: { ...keyOf(key), kind: 'pause_mail', status: 'sending', owner, lease_until: at + leaseMs, at: new Date(at).toISOString(), ttl: expiresAt + 86_400 },
        ConditionExpression: 'attribute_not_exists(pk) OR #status = :retry OR (#status = :sending AND lease_until < :now) OR #ttl <= :nowSeconds',
        ExpressionAttributeNames: { '#status': 'status', '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':retry': 'retry', ':sending': 'sending', ':now': at, ':nowSeconds': Math.floor(at / 1000) },
        ...capacityParam(ctx),
      })),
    );
    reportCapacity(ctx, 'pause_mail_take', 'write', res.ConsumedCapacity);
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}

/** Settles a mark `owner` holds; false when it no longer holds it (taken over after its lease). */
export async function settlePauseMail(ctx: StoreContext, key: PauseMailKey, owner: string, outcome: { status: Exclude<PauseMailStatus, 'sending'>; error?: string; accepted?: string[] }): Promise<boolean> {
  const sets = ['#status = :status', '#at = :at', ...(outcome.error !== undefined ? ['#error = :error'] : []), ...(outcome.accepted !== undefined ? ['accepted = :accepted'] : [])];
  const removes = ['lease_until', ...(outcome.error === undefined ? ['#error'] : []), ...(outcome.accepted === undefined ? ['accepted'] : [])];
  try {
    const res = await call('settle the form link mail', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: keyOf(key),
        UpdateExpression: `SET ${sets.join(', ')} REMOVE ${removes.join(', ')}`,
        ConditionExpression: '#status = :sending AND #owner = :owner',
        ExpressionAttributeNames: { '#status': 'status', '#at': 'at', '#owner': 'owner', '#error': 'error' },
        ExpressionAttributeValues: {
          ':status': outcome.status,
          ':at': new Date(now(ctx)).toISOString(),
          ':sending': 'sending',
          ':owner': owner,
          ...(outcome.error !== undefined ? { ':error': outcome.error.slice(0, 1000) } : {}),
          ...(outcome.accepted !== undefined ? { ':accepted': outcome.accepted } : {}),
        },
        ...capacityParam(ctx),
      })),
    );
    reportCapacity(ctx, 'pause_mail_settle', 'write', res.ConsumedCapacity);
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}

/** The mark of a turn's form, if any (an expired one is none). */
export async function getPauseMail(ctx: StoreContext, key: PauseMailKey): Promise<PauseMailMark | undefined> {
  const { Item } = await call('read the form link mail', () => ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: keyOf(key), ConsistentRead: true })));
  if (!Item || isExpired(Item, now(ctx))) return undefined;
  return {
    status: Item.status as PauseMailStatus,
    at: Item.at as string,
    ...(typeof Item.error === 'string' ? { error: Item.error } : {}),
    ...(Array.isArray(Item.accepted) ? { accepted: Item.accepted as string[] } : {}),
  };
}
