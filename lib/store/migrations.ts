/**
 * Migrations of paused runs onto another version of their workflow (lib/turns/migrate.ts).
 *
 * A run's migration is a turn: its record goes into the run's next slot `T#<n+1>` on the same
 * condition as any turn that claimed nothing (the slot is empty or holds an expired claim), so
 * it loses against an answer that claimed or committed that turn first, and an answer loses
 * against it. Unlike other turns it also changes the head — the version the run is pinned to —
 * and that cannot lag behind the record the way the listing may: the record and the head
 * update are one transaction (both or neither), the head's on condition that the run is still
 * on the version the migration read and not deleted.
 *
 * A migrate request sent with an Idempotency-Key keeps its answer in an item of its own beside
 * the turn keys' records (`T#<tenant>#I#<key>`, sort key `M`) for a day.
 */
import { GetCommand, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { compress, decompress } from './codec';
import { sweepDeletedSession } from './deletion';
import { call, capacityParam, ConditionFailed, isExpired, reportCapacity, type StoreContext } from './dynamo';
import { NotFoundError } from './errors';
import { IDEMPOTENCY_TTL_SECONDS } from './idempotency';
import { keys, SESSION_HEAD_SK } from './item-keys';
import { dueSortKey, sessionExpiry, type SessionHead, type TurnPayload, writeTurnRecord } from './sessions';
import { CLAIM_KIND, checkRead, FREE_SLOT, isTombstone, slotRefusal } from './turn-slot';

export interface MigrationCommit {
  /** The run as the migration read it (on `fromVersion`). */
  head: SessionHead;
  /** `head.turn + 1`. */
  turn: number;
  token: string;
  toVersion: number;
  status: string;
  payload: TurnPayload;
  /** The principal-scoped key hash of the migrate request, so a retry recognises its own turn. */
  keyHash: string | null;
  fingerprint: string | null;
  ttlSeconds: number;
  dueAt: number | null;
  storedBlobs: ReadonlySet<string>;
}

/**
 * Commits a migration turn and re-pins the run, together. TurnConflictError when the turn was
 * committed since the read (the run moved on), TurnInProgressError while another request holds
 * it, NotFoundError when the run was deleted or expired.
 */
export async function commitMigration(ctx: StoreContext, c: MigrationCommit): Promise<void> {
  const pk = keys.session(c.head.tenant, c.head.id);
  const at = (ctx.now ?? Date.now)();
  checkRead(c.head, at);
  const { record } = await writeTurnRecord(ctx, { ...c }, at);
  const ttl = sessionExpiry(at, c.ttlSeconds);
  try {
    await call('commit the migration', () =>
      ctx.doc.send(new TransactWriteCommand({
        TransactItems: [
          {
            Put: {
              TableName: ctx.table,
              Item: record,
              ConditionExpression: FREE_SLOT,
              ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':now': at },
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
          {
            Update: {
              TableName: ctx.table,
              Key: { pk, sk: SESSION_HEAD_SK },
              // what listings read (sessions.ts): the version is projected into the listing index
              // too, so its entry is written anyway, and the TTL moves with it
              UpdateExpression: c.dueAt === null
                ? 'SET version = :to, st = :status, tn = :turn, ua = :at, #ttl = :ttl REMOVE due_at, gsi2pk, gsi2sk'
                : 'SET version = :to, st = :status, tn = :turn, ua = :at, #ttl = :ttl, due_at = :due, gsi2pk = :dueKey, gsi2sk = :dueSort',
              ConditionExpression: 'attribute_exists(pk) AND version = :from AND attribute_not_exists(deleted_at)',
              ExpressionAttributeNames: { '#ttl': 'ttl' },
              ExpressionAttributeValues: {
                ':to': c.toVersion,
                ':from': c.head.version,
                ':turn': c.turn,
                ':status': c.status,
                ':at': new Date(at).toISOString(),
                ':ttl': ttl,
                ...(c.dueAt === null ? {} : { ':due': c.dueAt, ':dueKey': 'DUE', ':dueSort': dueSortKey(c.dueAt, c.head.tenant, c.head.id) }),
              },
            },
          },
        ],
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'migrate', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    const old = error.item;
    if (error.index === 0) {
      // the session was deleted meanwhile: the blobs just written must not outlive it
      if (old && isTombstone(old)) await sweepDeletedSession(ctx, pk);
      throw slotRefusal(error, c.head);
    }
    // the head alone refused: the run was deleted (or moved by a migration whose turn we would have met)
    throw new NotFoundError('run');
  }
}

/** A migrate request's answer kept under its Idempotency-Key. */
export interface MigrationAnswer {
  fingerprint: string;
  /** The response body, as first answered. */
  body: string;
}

export async function getMigrationAnswer(ctx: StoreContext, tenant: string, keyHash: string): Promise<MigrationAnswer | null> {
  const { Item } = await call('read the migration answer', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.idempotency(tenant, keyHash), sk: 'M' }, ConsistentRead: true })),
  );
  if (!Item || isExpired(Item, (ctx.now ?? Date.now)())) return null;
  return { fingerprint: Item.fingerprint as string, body: decompress(Item.body as Uint8Array) };
}

/**
 * Keeps a migrate request's answer under its key, unless a request with the same key kept one
 * first: that one is returned, to be answered instead.
 */
export async function putMigrationAnswer(ctx: StoreContext, tenant: string, keyHash: string, answer: MigrationAnswer): Promise<MigrationAnswer> {
  const at = (ctx.now ?? Date.now)();
  try {
    await call('keep the migration answer', () =>
      ctx.doc.send(new PutCommand({
        TableName: ctx.table,
        Item: {
          pk: keys.idempotency(tenant, keyHash),
          sk: 'M',
          kind: 'migration_answer',
          fingerprint: answer.fingerprint,
          body: compress(answer.body),
          ttl: Math.floor(at / 1000) + IDEMPOTENCY_TTL_SECONDS,
        },
        ConditionExpression: 'attribute_not_exists(pk) OR #ttl <= :now',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':now': Math.floor(at / 1000) },
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'idempotency', 'write', out.ConsumedCapacity)),
    );
    return answer;
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    return (await getMigrationAnswer(ctx, tenant, keyHash)) ?? answer;
  }
}
