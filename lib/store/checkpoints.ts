/**
 * Async turns in progress. Everything about one lives in the claim that holds its slot
 * (`T#<turn>`, see turn-slot.ts): the worker's lease (`claim_owner` + `lease_expires`), the
 * cancel flag a stop sets, the last checkpoint of the turn (`ck`, `cseq`) and the events of the
 * batches up to it (`ew<seq>`, one attribute per checkpoint). The head's turn and status do not
 * move until the commit, which replaces the claim with the turn record — so committing also
 * removes the checkpoint, at no extra write.
 *
 * Two clocks: the lease (short, renewed by the worker's heartbeat) says whether the worker is
 * alive, and decides when another worker may take the turn over; the claim's own expiry
 * (`claim_expires`, pushed `holdMs` ahead with every sign of life) keeps other requests — a
 * synchronous turn, a form timer — off the run until the turn's message comes back after a
 * crash, so the async turn is resumed rather than lost.
 *
 * Every write is one conditional update of the claim, fenced by the lease: a worker presumed
 * dead (its lease expired) and taken over can write nothing more, even if it was only slow.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { EaselError } from '../errors';
import { itemSize, readBlobs, writeBlobs } from './blobs';
import { decode, encode } from './codec';
import { sweepDeletedSession } from './deletion';
import { call, capacityParam, ConditionFailed, reportCapacity, type StoreContext } from './dynamo';
import { type CancelMode, LeaseLostError, TurnInProgressError } from './errors';
import { keys } from './item-keys';
import { CALL_RESULT_INLINE_BYTES, getHead, type SessionHead } from './sessions';
import { cancelModeOf, CLAIM_KIND, type Claim, claimTtl, isClaimItem, isTombstone, leaseRefusal, toClaim } from './turn-slot';

/** No claim item may come near DynamoDB's 400 KB. */
const MAX_CHECKPOINT_BYTES = 350 * 1024;

/** How long a lease lasts without renewal, and how long the claim is kept for the turn. */
export interface LeaseTimes {
  leaseMs: number;
  holdMs: number;
}

/** Which worker attempt holds which claimed turn. */
export interface Lease {
  tenant: string;
  id: string;
  turn: number;
  token: string;
  owner: string;
}

export interface SavedCheckpoint {
  /** The engine's checkpoint, as it was given. */
  checkpoint: unknown;
  /** The events of the turn so far, in order. */
  events: unknown[];
  /** Event batches written so far (the next batch's events get `seq + 1`). */
  seq: number;
  /** Blobs the checkpoint and its events refer to (already stored in the session). */
  blobs: Set<string>;
}

const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();
const slotKey = (lease: Pick<Lease, 'tenant' | 'id' | 'turn'>) => ({ pk: keys.session(lease.tenant, lease.id), sk: keys.turn(lease.turn) });
/**
 * Checkpoints and event batches are deflated with the record dictionary (`dict1`, codec.ts): the
 * checkpoint in `ck`, each batch in `ew<seq>`. Claims written before it hold brotli in `cs` and
 * `ev<seq>`: a worker that takes such a turn over reads them, and its first write drops `cs`.
 */
const eventsAttr = (seq: number) => `ew${String(seq).padStart(6, '0')}`;
const brotliEventsAttr = (seq: number) => `ev${String(seq).padStart(6, '0')}`;
/** Values the claim's fencing conditions use. */
const fence = (lease: Lease) => ({ ':claimKind': CLAIM_KIND, ':tok': lease.token, ':owner': lease.owner });

/**
 * Takes the lease of claimed turn `lease.turn` for `owner`: when no worker has it yet, when
 * `owner` already does, or when the holder's lease expired (it is presumed dead). Refusals:
 * TurnInProgressError while another worker's lease runs, LeaseLostError when the claim itself is
 * gone (the turn was committed or taken over by another request), NotFoundError when the run is.
 */
export async function acquireLease(ctx: StoreContext, lease: Lease, times: LeaseTimes): Promise<Claim> {
  const at = now(ctx);
  const hold = at + times.holdMs;
  try {
    const out = await call('take the lease', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: slotKey(lease),
        UpdateExpression: 'SET claim_owner = :owner, lease_expires = :lease, claim_expires = :hold, #ttl = :ttl',
        ConditionExpression:
          'kind = :claimKind AND claim_token = :tok AND (attribute_not_exists(claim_owner) OR claim_owner = :owner OR lease_expires < :now)',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: { ...fence(lease), ':lease': at + times.leaseMs, ':hold': hold, ':ttl': claimTtl(hold), ':now': at },
        ReturnValues: 'ALL_NEW',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        ...capacityParam(ctx),
      })),
    );
    reportCapacity(ctx, 'lease', 'write', out.ConsumedCapacity);
    return toClaim(out.Attributes as Record<string, unknown>);
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    const old = error.item;
    if (!old || !isClaimItem(old) || old.claim_token !== lease.token) {
      // the run may be gone altogether
      await getHead(ctx, lease.tenant, lease.id);
      throw new LeaseLostError();
    }
    const head = await getHead(ctx, lease.tenant, lease.id);
    throw new TurnInProgressError(head.turn, head.status);
  }
}

/**
 * Extends the lease (a heartbeat while a batch runs long). Returns whether a stop (or, with
 * `cancelAs`, a newer input's interrupt or rollback) is pending;
 * LeaseLostError when the lease is no longer this worker's.
 */
export async function renewLease(ctx: StoreContext, lease: Lease, times: LeaseTimes): Promise<{ cancelRequested: boolean; cancelAs?: Exclude<CancelMode, 'cancelled'> }> {
  const at = now(ctx);
  const hold = at + times.holdMs;
  try {
    const out = await call('renew the lease', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: slotKey(lease),
        UpdateExpression: 'SET lease_expires = :lease, claim_expires = :hold, #ttl = :ttl',
        ConditionExpression: 'kind = :claimKind AND claim_token = :tok AND claim_owner = :owner',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: { ...fence(lease), ':lease': at + times.leaseMs, ':hold': hold, ':ttl': claimTtl(hold) },
        ReturnValues: 'ALL_NEW',
        ...capacityParam(ctx),
      })),
    );
    reportCapacity(ctx, 'lease', 'write', out.ConsumedCapacity);
    const requested = typeof out.Attributes?.cancel_at === 'number';
    const mode = cancelModeOf(out.Attributes ?? {});
    // a newer input's interrupt or rollback, rather than a stop
    return { cancelRequested: requested, ...(requested && mode !== 'cancelled' ? { cancelAs: mode } : {}) };
  } catch (error) {
    if (error instanceof ConditionFailed) throw new LeaseLostError();
    throw error;
  }
}

/**
 * Lets go of the lease without giving up the claim: a suspended turn, to be continued by the
 * next worker (which may take it at once). The claim holds `holdMs` more for that worker.
 */
export async function releaseLease(ctx: StoreContext, lease: Lease, holdMs: number): Promise<void> {
  const hold = now(ctx) + holdMs;
  await call('release the lease', () =>
    ctx.doc.send(new UpdateCommand({
      TableName: ctx.table,
      Key: slotKey(lease),
      UpdateExpression: 'SET claim_expires = :exp, #ttl = :ttl REMOVE claim_owner, lease_expires',
      ConditionExpression: 'kind = :claimKind AND claim_token = :tok AND claim_owner = :owner',
      ExpressionAttributeNames: { '#ttl': 'ttl' },
      ExpressionAttributeValues: { ...fence(lease), ':exp': hold, ':ttl': claimTtl(hold) },
    })),
  ).catch((error: unknown) => {
    if (error instanceof ConditionFailed) throw new LeaseLostError();
    throw error;
  });
}

/**
 * Sets the cancel flag of a running async turn (a stop), over a newer input's interrupt or
 * rollback if one is pending: the turn ends cancelled. False when the claim is no longer the
 * one seen (the turn was committed meanwhile, or it is not an async turn).
 */
export async function requestCancel(ctx: StoreContext, head: SessionHead, token: string): Promise<boolean> {
  const turn = head.claim?.turn ?? head.turn + 1;
  try {
    await call('request the stop', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: slotKey({ tenant: head.tenant, id: head.id, turn }),
        UpdateExpression: 'SET cancel_at = if_not_exists(cancel_at, :at) REMOVE cancel_as',
        ConditionExpression: 'kind = :claimKind AND claim_token = :tok AND claim_async = :yes',
        ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':at': now(ctx), ':tok': token, ':yes': true },
      })),
    );
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}

/**
 * Writes a checkpoint and the events of the batches since the last one into the claim,
 * renewing the lease in the same update. Refused with LeaseLostError when the lease is not this
 * worker's, with CancelRequestedError when a stop is pending (nothing is written then), and
 * with NotFoundError when the run was deleted.
 */
export async function saveCheckpoint(
  ctx: StoreContext,
  lease: Lease,
  c: {
    checkpoint: unknown;
    /** The events since the last checkpoint, stored as batch `seq` (when there are any). */
    events: unknown[];
    seq: number;
    /** How many events of the turn came before these. */
    from: number;
    times: LeaseTimes;
    ttlSeconds: number;
    storedBlobs: Set<string>;
  },
): Promise<void> {
  const pk = slotKey(lease).pk;
  const at = now(ctx);
  const hold = at + c.times.holdMs;
  // long strings (model answers, tool results in the call records) by blob: each checkpoint
  // write stays about the same size however many rounds the turn has made
  const state = encode(c.checkpoint, CALL_RESULT_INLINE_BYTES, 'dict1');
  const events = encode({ from: c.from, events: c.events }, undefined, 'dict1');
  const fresh = new Map<string, string>();
  for (const part of [state, events]) for (const [hash, text] of part.blobs) if (!c.storedBlobs.has(hash)) fresh.set(hash, text);
  await writeBlobs(ctx, pk, fresh);
  for (const hash of fresh.keys()) c.storedBlobs.add(hash);

  const hashes = [...state.blobs.keys(), ...events.blobs.keys()];
  const withEvents = c.events.length > 0;
  const size = itemSize({ s: state.bytes, e: events.bytes });
  if (size > MAX_CHECKPOINT_BYTES) {
    throw new EaselError('payload_too_large', `the turn's checkpoint is too large to store (${Math.ceil(size / 1024)} KB after compression)`);
  }
  try {
    await call('write the checkpoint', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: slotKey(lease),
        UpdateExpression: [
          'SET lease_expires = :lease, claim_expires = :hold, #ttl = :ttl, ck = :ck, cseq = :seq',
          withEvents ? `${eventsAttr(c.seq)} = :ev` : '',
          hashes.length > 0 ? 'cb = list_append(if_not_exists(cb, :none), :hashes)' : '',
        ].filter(Boolean).join(', ') + ' REMOVE cs',
        ConditionExpression: 'kind = :claimKind AND claim_token = :tok AND claim_owner = :owner AND attribute_not_exists(cancel_at)',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: {
          ...fence(lease),
          ':lease': at + c.times.leaseMs,
          ':hold': hold,
          ':ttl': claimTtl(hold),
          ':ck': state.bytes,
          ':seq': c.seq,
          ...(withEvents ? { ':ev': events.bytes } : {}),
          ...(hashes.length > 0 ? { ':hashes': hashes, ':none': [] } : {}),
        },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'checkpoint', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    // the session was deleted meanwhile: the blobs just written must not outlive it
    if (error.item && isTombstone(error.item)) await sweepDeletedSession(ctx, pk);
    throw leaseRefusal(error.item, lease.token, lease.owner);
  }
}

/** The claim item of turn `turn`, if `token` still holds it. */
async function claimItem(ctx: StoreContext, tenant: string, id: string, turn: number, token: string): Promise<Record<string, unknown> | null> {
  const { Item } = await call('read the checkpoint', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: slotKey({ tenant, id, turn }), ConsistentRead: true, ...capacityParam(ctx) })),
  ).then((out) => {
    reportCapacity(ctx, 'checkpoint', 'read', out.ConsumedCapacity);
    return out;
  });
  if (!Item || !isClaimItem(Item) || Item.claim_token !== token) return null;
  return Item;
}

/** The event batches a claim holds after `afterSeq`, in order, stopping at a gap. */
function eventBatches(item: Record<string, unknown>, afterSeq: number, blobs: ReadonlyMap<string, string>): ProgressItem[] {
  const out: ProgressItem[] = [];
  const last = typeof item.cseq === 'number' ? item.cseq : 0;
  for (let seq = afterSeq + 1; seq <= last; seq++) {
    const raw = item[eventsAttr(seq)];
    const brotli = item[brotliEventsAttr(seq)];
    if (!(raw instanceof Uint8Array) && !(brotli instanceof Uint8Array)) break;
    const batch = (raw instanceof Uint8Array ? decode(raw, blobs, 'dict1') : decode(brotli as Uint8Array, blobs)) as { from: number; events: unknown[] };
    out.push({ seq, from: batch.from, events: batch.events });
  }
  return out;
}

/** The last checkpoint of claimed turn `turn` written under `token`, with its events; null if none. */
export async function loadCheckpoint(ctx: StoreContext, tenant: string, id: string, turn: number, token: string): Promise<SavedCheckpoint | null> {
  const item = await claimItem(ctx, tenant, id, turn, token);
  const state = item?.ck instanceof Uint8Array ? item.ck : item?.cs instanceof Uint8Array ? item.cs : undefined;
  if (!item || !state) return null;
  const hashes = (item.cb as string[] | undefined) ?? [];
  const blobs = await readBlobs(ctx, keys.session(tenant, id), hashes);
  return {
    checkpoint: decode(state, blobs, state === item.ck ? 'dict1' : 'brotli'),
    events: eventBatches(item, 0, blobs).flatMap((b) => b.events),
    seq: item.cseq as number,
    blobs: new Set(hashes),
  };
}

/** One batch of events of a turn in progress: those between two checkpoints. */
export interface ProgressItem {
  seq: number;
  /** How many events of the turn came before these. */
  from: number;
  events: unknown[];
}

/**
 * The event batches of a turn in progress after batch `afterSeq`, for readers following the
 * turn (the events of batches not yet checkpointed are not visible). Stops at a gap.
 */
export async function readProgress(ctx: StoreContext, tenant: string, id: string, turn: number, token: string, afterSeq: number): Promise<ProgressItem[]> {
  const item = await claimItem(ctx, tenant, id, turn, token);
  if (!item) return [];
  const blobs = await readBlobs(ctx, keys.session(tenant, id), (item.cb as string[] | undefined) ?? []);
  return eventBatches(item, afterSeq, blobs);
}
