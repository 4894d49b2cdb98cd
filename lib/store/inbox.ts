/**
 * A run's inbox: inputs queued behind the turn in flight (double-texting, lib/turns/double-text.ts).
 * It lives in the claim that holds that turn's slot (turn-slot.ts) — `ibx` the entries in order
 * (each compressed), `ibt` their tokens, `ibs` their bytes — so it costs nothing while empty and
 * every change to it is ordered with the claim's own writes:
 *
 * - queuing is one conditional update of the claim (fenced by its token and the inbox's size,
 *   so the position each input gets is exact); a keyed input records its Idempotency-Key in the
 *   same transaction, so a retry never queues it twice;
 * - the commit of the turn in flight is refused while the inbox holds anything (`attribute_not_exists(ibt)`,
 *   free on every ordinary turn); it then commits in one transaction with the claim of the next
 *   slot for the first queued input (`promoted`: the input in `qin`, the rest of the inbox
 *   behind it), and the committer sends that turn to the worker (the drain signal);
 * - a claim given back without a commit hands its slot to its first queued input the same way;
 * - a claim with queued inputs never expires into a free slot (turn-slot.ts `FREE_SLOT`): a
 *   holder that died is taken over by its first queued input (`rescue`), as is a queued turn
 *   whose worker was never sent for.
 *
 * So each queued input becomes exactly one turn, in order, whatever crashes where.
 */
import { GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { compress, decompress } from './codec';
import { call, capacityParam, ConditionFailed, reportCapacity, type StoreContext } from './dynamo';
import { EaselError } from '../errors';
import { InboxFullError } from './errors';
import { idempotencyPut, type IdempotencyRecord } from './idempotency';
import { keys } from './item-keys';
import { CLAIM_KIND, type Claim, claimTtl, isClaimItem, isTombstone, toClaim } from './turn-slot';

/** One queued input, as the store keeps it: what a claim needs of it, and the rest (the turn layer's). */
export interface QueuedInput {
  /** The claim token its turn is claimed under once promoted (and the committer its record names). */
  token: string;
  keyHash?: string;
  fingerprint?: string;
  /** What the turn layer needs to run it (JSON). */
  input: unknown;
}

/** How much a run's inbox holds. */
export interface InboxLimits {
  /** @default 10 */
  entries: number;
  /** Compressed bytes of all its entries. @default 64 KiB */
  bytes: number;
}

export const DEFAULT_INBOX_LIMITS: InboxLimits = { entries: 10, bytes: 64 * 1024 };

/** The turn now claimed for a run's first queued input: to be sent to a worker. */
export interface Promoted {
  turn: number;
  token: string;
  entry: QueuedInput;
}

/** What queuing did: `queued` at a position (the input becomes turn `turn` if every turn ahead commits). */
export type Queued =
  | { queued: { turn: number; position: number } }
  /** The inbox moved meanwhile (another input was queued): try again on this claim. */
  | { again: Claim }
  /** The claim is gone (its turn committed or was given back) or ran out: act on the run as it is now. */
  | { moved: true }
  /** Another request holds the Idempotency-Key: resolve it. */
  | { keyTaken: true };

const encodeEntry = (entry: QueuedInput): Uint8Array => compress(JSON.stringify(entry));
export const decodeEntry = (bytes: Uint8Array): QueuedInput => JSON.parse(decompress(bytes)) as QueuedInput;
const slotKey = (tenant: string, id: string, turn: number) => ({ pk: keys.session(tenant, id), sk: keys.turn(turn) });
const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();

/**
 * Queues `entry` behind the turn `claim` holds (as seen: its token, its inbox). With `flag`, the
 * turn (an async one) is also asked to end as interrupted or rolled back, at its next
 * checkpoint; a rollback asked for already stays one. With `keyRecord`, the input's
 * Idempotency-Key is recorded in the same transaction. Refused: InboxFullError when the inbox
 * holds `limits`; `run_finished` while a stop is pending on the turn.
 */
export async function appendToInbox(
  ctx: StoreContext,
  args: {
    tenant: string;
    id: string;
    claim: Claim;
    entry: QueuedInput;
    limits: InboxLimits;
    flag?: 'interrupted' | 'rolled_back';
    keyRecord?: { record: Omit<IdempotencyRecord, 'turn' | 'queuedFrom'>; replacing: string | null };
    /** For InboxFullError: the run as seen. */
    seen: { turn: number; status: string };
  },
): Promise<Queued> {
  const { claim, limits } = args;
  const bytes = encodeEntry(args.entry);
  const size = claim.inbox?.length ?? 0;
  if (size >= limits.entries || bytes.length > limits.bytes) throw new InboxFullError(args.seen.turn, args.seen.status, limits);
  const at = now(ctx);
  const flag = args.flag === 'interrupted' && claim.cancelAs === 'rolled_back' ? 'rolled_back' : args.flag;
  const update = {
    TableName: ctx.table,
    Key: slotKey(args.tenant, args.id, claim.turn),
    UpdateExpression: [
      'SET ibx = list_append(if_not_exists(ibx, :none), :entry), ibt = list_append(if_not_exists(ibt, :none), :tokens), ibs = if_not_exists(ibs, :zero) + :size',
      ...(flag ? ['cancel_at = if_not_exists(cancel_at, :at), cancel_as = :as'] : []),
    ].join(', '),
    ConditionExpression: [
      'kind = :claimKind AND claim_token = :tok AND claim_expires > :at',
      // a stop pending on the turn: the run takes no more turns
      '(attribute_not_exists(cancel_at) OR attribute_exists(cancel_as))',
      size === 0 ? 'attribute_not_exists(ibt)' : 'size(ibt) = :seen',
      '(attribute_not_exists(ibs) OR ibs <= :room)',
      ...(flag ? ['claim_async = :yes'] : []),
    ].join(' AND '),
    ExpressionAttributeValues: {
      ':claimKind': CLAIM_KIND,
      ':tok': claim.token,
      ':at': at,
      ':none': [],
      ':entry': [bytes],
      ':tokens': [args.entry.token],
      ':zero': 0,
      ':size': bytes.length,
      ':room': limits.bytes - bytes.length,
      ...(size > 0 ? { ':seen': size } : {}),
      ...(flag ? { ':as': flag, ':yes': true } : {}),
    },
  };
  const predicted = claim.turn + size + 1;
  try {
    if (args.keyRecord) {
      const record: IdempotencyRecord = { ...args.keyRecord.record, turn: predicted, queuedFrom: claim.turn };
      await call('queue the input', () =>
        ctx.doc.send(new TransactWriteCommand({
          TransactItems: [
            { Put: idempotencyPut(ctx, args.tenant, record, args.keyRecord?.replacing ?? null) },
            { Update: { ...update, ReturnValuesOnConditionCheckFailure: 'ALL_OLD' } },
          ],
          ...capacityParam(ctx),
        })).then((out) => reportCapacity(ctx, 'inbox', 'write', out.ConsumedCapacity)),
      );
    } else {
      await call('queue the input', () =>
        ctx.doc.send(new UpdateCommand({ ...update, ReturnValuesOnConditionCheckFailure: 'ALL_OLD', ...capacityParam(ctx) }))
          .then((out) => reportCapacity(ctx, 'inbox', 'write', out.ConsumedCapacity)),
      );
    }
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    if (args.keyRecord && error.index === 0) return { keyTaken: true };
    const old = error.item;
    if (!old || !isClaimItem(old) || old.claim_token !== claim.token || (old.claim_expires as number) <= at) return { moved: true };
    if (typeof old.cancel_at === 'number' && old.cancel_as === undefined) {
      throw new EaselError('run_finished', 'a stop is pending on the turn in flight: the run takes no further turn');
    }
    const fresh = toClaim(old);
    if ((fresh.inbox?.length ?? 0) !== size) return { again: fresh };
    throw new InboxFullError(args.seen.turn, args.seen.status, limits);
  }
  return { queued: { turn: predicted, position: size } };
}

/** The queued inputs a claim item holds, in order. */
function entriesOf(item: Record<string, unknown>): Uint8Array[] {
  return Array.isArray(item.ibx) ? (item.ibx as Uint8Array[]) : [];
}

/**
 * The claim that runs a run's first queued input in slot `turn`, with the rest of the inbox
 * behind it: an async claim (a worker runs it), held `holdMs` for that worker.
 */
function promotedClaim(pk: string, turn: number, entries: Uint8Array[], tokens: string[], at: number, holdMs: number): { item: Record<string, unknown>; promoted: Promoted } {
  const [first, ...rest] = entries as [Uint8Array, ...Uint8Array[]];
  const entry = decodeEntry(first);
  const expires = at + holdMs;
  const item: Record<string, unknown> = {
    pk,
    sk: keys.turn(turn),
    kind: CLAIM_KIND,
    turn,
    claim_token: entry.token,
    claim_expires: expires,
    created_at: at,
    ttl: claimTtl(expires),
    claim_async: true,
    // the input it runs, and a marker the projections of the head read (turn-slot.ts toClaim)
    qin: first,
    qd: true,
    ...(entry.keyHash ? { ik: entry.keyHash } : {}),
    ...(entry.fingerprint ? { fp: entry.fingerprint } : {}),
    ...(rest.length > 0 ? { ibx: rest, ibt: tokens.slice(1), ibs: rest.reduce((n, b) => n + b.length, 0) } : {}),
  };
  return { item, promoted: { turn, token: entry.token, entry } };
}

/**
 * Commits the record of a turn whose claim (`old`, as the refused commit saw it) holds queued
 * inputs: the record, and the claim of the next slot for the first of them, in one transaction
 * (`condition` is the commit's own, on the claim). Null when the inbox changed meanwhile (the
 * caller commits again); a refusal of the commit itself is a ConditionFailed as for a Put.
 */
export async function commitPromoting(
  ctx: StoreContext,
  c: { record: Record<string, unknown>; condition: { ConditionExpression: string; ExpressionAttributeValues: Record<string, unknown> }; old: Record<string, unknown>; holdMs: number },
): Promise<Promoted | null> {
  const entries = entriesOf(c.old);
  const tokens = (c.old.ibt as string[]).map(String);
  const turn = c.record.turn as number;
  const { item, promoted } = promotedClaim(c.record.pk as string, turn + 1, entries, tokens, now(ctx), c.holdMs);
  try {
    await call('commit the turn', () =>
      ctx.doc.send(new TransactWriteCommand({
        TransactItems: [
          {
            Put: {
              TableName: ctx.table,
              Item: c.record,
              ConditionExpression: `${c.condition.ConditionExpression} AND size(ibt) = :queued`,
              ExpressionAttributeValues: { ...c.condition.ExpressionAttributeValues, ':queued': tokens.length },
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
          { Put: { TableName: ctx.table, Item: item, ConditionExpression: 'attribute_not_exists(pk)' } },
        ],
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'commit', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    const old = error.item;
    // the same claim with another inbox: commit again
    if (error.index === 0 && old && isClaimItem(old) && old.claim_token === c.old.claim_token && Array.isArray(old.ibt) && old.ibt.length !== tokens.length) return null;
    throw error;
  }
  return promoted;
}

/**
 * Gives back the claim `token` holds in slot `turn` when it has queued inputs: its first queued
 * input takes the slot (a claim of its own, for a worker). Null when the claim is no longer that
 * one, or holds no queued input (the caller deletes it as usual).
 */
export async function releasePromoting(ctx: StoreContext, tenant: string, id: string, turn: number, token: string, holdMs: number, options: { onlyExpired?: boolean } = {}): Promise<Promoted | null> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const old = await readSlot(ctx, tenant, id, turn);
    if (!old || !isClaimItem(old) || old.claim_token !== token || entriesOf(old).length === 0) return null;
    const at = now(ctx);
    if (options.onlyExpired && (old.claim_expires as number) >= at) return null;
    const tokens = (old.ibt as string[]).map(String);
    const { item, promoted } = promotedClaim(keys.session(tenant, id), turn, entriesOf(old), tokens, at, holdMs);
    try {
      await call('hand the turn to the next queued input', () =>
        ctx.doc.send(new PutCommand({
          TableName: ctx.table,
          Item: item,
          ConditionExpression: `kind = :claimKind AND claim_token = :tok AND size(ibt) = :queued${options.onlyExpired ? ' AND claim_expires < :at' : ''}`,
          ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':tok': token, ':queued': tokens.length, ...(options.onlyExpired ? { ':at': at } : {}) },
          ...capacityParam(ctx),
        })).then((out) => reportCapacity(ctx, 'release', 'write', out.ConsumedCapacity)),
      );
      return promoted;
    } catch (error) {
      if (!(error instanceof ConditionFailed)) throw error;
    }
  }
  return null;
}

/**
 * A claim with queued inputs that nobody works on any more (it expired): its holder died with
 * inputs queued behind it, or it holds a queued input whose worker was never sent for (the
 * committer died between its commit and the message). The first is taken over by its first
 * queued input; the second is held anew. Either way the turn to send to a worker comes back;
 * null when the claim is no longer stranded (someone got there first).
 */
export async function rescueStranded(ctx: StoreContext, tenant: string, id: string, claim: Claim, holdMs: number): Promise<Promoted | null> {
  if (!claim.queued) return releasePromoting(ctx, tenant, id, claim.turn, claim.token, holdMs, { onlyExpired: true });
  const at = now(ctx);
  try {
    const out = await call('send for the queued turn again', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: slotKey(tenant, id, claim.turn),
        UpdateExpression: 'SET claim_expires = :hold, #ttl = :ttl',
        ConditionExpression: 'kind = :claimKind AND claim_token = :tok AND claim_expires < :at AND attribute_exists(qin)',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':tok': claim.token, ':at': at, ':hold': at + holdMs, ':ttl': claimTtl(at + holdMs) },
        ReturnValues: 'ALL_NEW',
        ...capacityParam(ctx),
      })),
    );
    reportCapacity(ctx, 'release', 'write', out.ConsumedCapacity);
    return { turn: claim.turn, token: claim.token, entry: decodeEntry(out.Attributes?.qin as Uint8Array) };
  } catch (error) {
    if (error instanceof ConditionFailed) return null;
    throw error;
  }
}

/** Whether a claim is stranded (see rescueStranded) at `at`. */
export function isStranded(claim: Claim, at: number): boolean {
  return claim.expiresAt <= at && (claim.queued === true || (claim.inbox?.length ?? 0) > 0);
}

/** The queued input a claim runs (a promoted claim's), if it still holds `token`. */
export async function queuedInputOf(ctx: StoreContext, tenant: string, id: string, turn: number, token: string): Promise<QueuedInput | null> {
  const item = await readSlot(ctx, tenant, id, turn);
  if (!item || !isClaimItem(item) || item.claim_token !== token || !(item.qin instanceof Uint8Array)) return null;
  return decodeEntry(item.qin);
}

/**
 * The turn committed under `token` among turns `from`..`to`, if one was: where a queued input
 * ended up (it comes sooner than queued when a turn ahead of it was given back uncommitted).
 */
export async function turnCommittedBy(ctx: StoreContext, tenant: string, id: string, from: number, to: number, token: string): Promise<number | null> {
  const { Items = [] } = await call('find the queued turn', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
      FilterExpression: 'committed_by = :tok',
      ExpressionAttributeValues: { ':pk': keys.session(tenant, id), ':from': keys.turn(Math.max(1, from)), ':to': keys.turn(to), ':tok': token },
      ProjectionExpression: 'sk, #turn, kind',
      ExpressionAttributeNames: { '#turn': 'turn' },
      ConsistentRead: true,
    })),
  );
  const hit = Items.find((i) => !isClaimItem(i) && !isTombstone(i));
  return hit ? (hit.turn as number) : null;
}

async function readSlot(ctx: StoreContext, tenant: string, id: string, turn: number): Promise<Record<string, unknown> | undefined> {
  const { Item } = await call('read the turn slot', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: slotKey(tenant, id, turn), ConsistentRead: true })),
  );
  return Item;
}
