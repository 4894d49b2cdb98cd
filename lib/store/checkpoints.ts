/**
 * Async turns in progress. A worker holds the turn's claim under a lease of its own
 * (`claim_owner` + `lease_expires` on the head) and, between batches, writes a checkpoint of
 * the turn (`P#<turn>`) and the events of the batches since the last one (`P#<turn>#E#<seq>`).
 * The head's turn and status do not move until the commit, so for everyone else the run stays
 * at its previous turn until then.
 *
 * Two clocks: the lease (short, renewed by the worker's heartbeat) says whether the worker is
 * alive, and decides when another worker may take the turn over; the claim's own expiry
 * (`claim_expires`, pushed `holdMs` ahead with every sign of life) keeps other requests — a
 * synchronous turn, a form timer — off the run until the turn's message comes back after a
 * crash, so the async turn is resumed rather than lost.
 *
 * Every write is fenced by the lease: a checkpoint goes in one transaction with the renewal of
 * the lease, on condition that this worker still owns it. A worker presumed dead (its lease
 * expired) and taken over can therefore write nothing more, even if it was only slow.
 */
import { TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { EaselError } from '../canvas/errors';
import { itemSize, readBlobs, writeBlobs } from './blobs';
import { decode, encode } from './codec';
import { call, capacityParam, ConditionFailed, isExpired, queryAll, reportCapacity, type StoreContext } from './dynamo';
import { LeaseLostError, NotFoundError, TurnInProgressError } from './errors';
import { keys, SESSION_HEAD_SK } from './item-keys';
import { deleteKeys, leaseRefusal, type SessionHead, toHead } from './sessions';

/** No checkpoint item may come near DynamoDB's 400 KB. */
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
  /** Event items written so far (the next batch's events get `seq + 1`). */
  seq: number;
  /** Blobs the checkpoint and its events refer to (already stored in the session). */
  blobs: Set<string>;
}

const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();
const headKey = (lease: Pick<Lease, 'tenant' | 'id'>) => ({ pk: keys.session(lease.tenant, lease.id), sk: SESSION_HEAD_SK });

/**
 * Takes the lease of claimed turn for `owner`: when no worker has it yet, when `owner` already
 * does, or when the holder's lease expired (it is presumed dead). Refusals: TurnInProgressError
 * while another worker's lease runs, LeaseLostError when the claim itself is gone (the turn was
 * committed or taken over by another request), NotFoundError when the run is.
 */
export async function acquireLease(ctx: StoreContext, lease: Omit<Lease, 'turn'>, times: LeaseTimes): Promise<SessionHead> {
  const at = now(ctx);
  try {
    const out = await call('take the lease', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: headKey(lease),
        UpdateExpression: 'SET claim_owner = :owner, lease_expires = :lease, claim_expires = :hold',
        ConditionExpression:
          'attribute_exists(pk) AND claim_token = :tok AND (attribute_not_exists(claim_owner) OR claim_owner = :owner OR lease_expires < :now)',
        ExpressionAttributeValues: { ':owner': lease.owner, ':lease': at + times.leaseMs, ':hold': at + times.holdMs, ':tok': lease.token, ':now': at },
        ReturnValues: 'ALL_NEW',
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        ...capacityParam(ctx),
      })),
    );
    reportCapacity(ctx, 'lease', 'write', out.ConsumedCapacity);
    const head = out.Attributes;
    if (!head || isExpired(head, at)) throw new NotFoundError('run');
    return toHead(head);
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    const old = error.item;
    if (!old || isExpired(old, at)) throw new NotFoundError('run');
    if (old.claim_token !== lease.token) throw new LeaseLostError();
    const head = toHead(old);
    throw new TurnInProgressError(head.turn, head.status);
  }
}

/**
 * Extends the lease (a heartbeat while a batch runs long). Returns whether a stop is pending;
 * LeaseLostError when the lease is no longer this worker's.
 */
export async function renewLease(ctx: StoreContext, lease: Lease, times: LeaseTimes): Promise<{ cancelRequested: boolean }> {
  const at = now(ctx);
  try {
    const out = await call('renew the lease', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: headKey(lease),
        UpdateExpression: 'SET lease_expires = :lease, claim_expires = :hold',
        ConditionExpression: 'claim_token = :tok AND claim_owner = :owner',
        ExpressionAttributeValues: { ':lease': at + times.leaseMs, ':hold': at + times.holdMs, ':tok': lease.token, ':owner': lease.owner },
        ReturnValues: 'ALL_NEW',
        ...capacityParam(ctx),
      })),
    );
    reportCapacity(ctx, 'lease', 'write', out.ConsumedCapacity);
    return { cancelRequested: typeof out.Attributes?.cancel_at === 'number' };
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
  await call('release the lease', () =>
    ctx.doc.send(new UpdateCommand({
      TableName: ctx.table,
      Key: headKey(lease),
      UpdateExpression: 'SET claim_expires = :exp REMOVE claim_owner, lease_expires',
      ConditionExpression: 'claim_token = :tok AND claim_owner = :owner',
      ExpressionAttributeValues: { ':exp': now(ctx) + holdMs, ':tok': lease.token, ':owner': lease.owner },
    })),
  ).catch((error: unknown) => {
    if (error instanceof ConditionFailed) throw new LeaseLostError();
    throw error;
  });
}

/**
 * Sets the cancel flag of a running async turn (a stop). False when the claim is no longer
 * the one seen (the turn was committed meanwhile, or it is not an async turn).
 */
export async function requestCancel(ctx: StoreContext, head: SessionHead, token: string): Promise<boolean> {
  try {
    await call('request the stop', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: headKey(head),
        UpdateExpression: 'SET cancel_at = if_not_exists(cancel_at, :at)',
        ConditionExpression: 'claim_token = :tok AND claim_async = :yes',
        ExpressionAttributeValues: { ':at': now(ctx), ':tok': token, ':yes': true },
      })),
    );
    return true;
  } catch (error) {
    if (error instanceof ConditionFailed) return false;
    throw error;
  }
}

/**
 * Writes a checkpoint and the events of the batches since the last one, renewing the lease in
 * the same transaction. Refused with LeaseLostError when the lease is not this worker's, and
 * with CancelRequestedError when a stop is pending (nothing is written then).
 */
export async function saveCheckpoint(
  ctx: StoreContext,
  lease: Lease,
  c: {
    checkpoint: unknown;
    /** The events since the last checkpoint, stored as event item `seq` (when there are any). */
    events: unknown[];
    seq: number;
    /** How many events of the turn came before these. */
    from: number;
    times: LeaseTimes;
    ttlSeconds: number;
    storedBlobs: Set<string>;
  },
): Promise<void> {
  const pk = headKey(lease).pk;
  const at = now(ctx);
  const ttl = Math.floor(at / 1000) + c.ttlSeconds;
  const state = encode(c.checkpoint);
  const events = encode(c.events);
  const fresh = new Map<string, string>();
  for (const part of [state, events]) for (const [hash, text] of part.blobs) if (!c.storedBlobs.has(hash)) fresh.set(hash, text);
  await writeBlobs(ctx, pk, fresh);
  for (const hash of fresh.keys()) c.storedBlobs.add(hash);

  const checkpointItem: Record<string, unknown> = {
    pk,
    sk: keys.checkpoint(lease.turn),
    kind: 'checkpoint',
    token: lease.token,
    seq: c.seq,
    s: state.bytes,
    ttl,
    ...(state.blobs.size > 0 ? { sb: [...state.blobs.keys()] } : {}),
  };
  const eventsItem: Record<string, unknown> = {
    pk,
    sk: keys.checkpointEvents(lease.turn, c.seq),
    kind: 'checkpoint',
    token: lease.token,
    from: c.from,
    e: events.bytes,
    ttl,
    ...(events.blobs.size > 0 ? { eb: [...events.blobs.keys()] } : {}),
  };
  for (const item of [checkpointItem, eventsItem]) {
    if (itemSize(item) > MAX_CHECKPOINT_BYTES) {
      throw new EaselError('payload_too_large', `the turn's checkpoint is too large to store (${Math.ceil(itemSize(item) / 1024)} KB after compression)`);
    }
  }
  try {
    await call('write the checkpoint', () =>
      ctx.doc.send(new TransactWriteCommand({
        TransactItems: [
          {
            Update: {
              TableName: ctx.table,
              Key: headKey(lease),
              UpdateExpression: 'SET lease_expires = :lease, claim_expires = :hold',
              ConditionExpression: 'claim_token = :tok AND claim_owner = :owner AND attribute_not_exists(cancel_at)',
              ExpressionAttributeValues: { ':lease': at + c.times.leaseMs, ':hold': at + c.times.holdMs, ':tok': lease.token, ':owner': lease.owner },
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
          { Put: { TableName: ctx.table, Item: checkpointItem } },
          ...(c.events.length > 0 ? [{ Put: { TableName: ctx.table, Item: eventsItem } }] : []),
        ],
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'checkpoint', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    throw leaseRefusal(error.item, lease.token, lease.owner);
  }
}

/** The last checkpoint of claimed turn `turn` written under `token`, with its events; null if none. */
export async function loadCheckpoint(ctx: StoreContext, tenant: string, id: string, turn: number, token: string): Promise<SavedCheckpoint | null> {
  const items = await checkpointItems(ctx, tenant, id, turn);
  const [first, ...rest] = items;
  if (!first || first.sk !== keys.checkpoint(turn) || first.token !== token) return null;
  const seq = first.seq as number;
  // event items of this claim up to the checkpoint: later ones belong to a batch run again
  const eventItems = rest.filter((i) => i.token === token && seqOf(i.sk as string) <= seq);
  const hashes = [...((first.sb as string[]) ?? []), ...eventItems.flatMap((i) => (i.eb as string[]) ?? [])];
  const blobs = await readBlobs(ctx, headKey({ tenant, id }).pk, hashes);
  return {
    checkpoint: decode(first.s as Uint8Array, blobs),
    events: eventItems.flatMap((i) => decode(i.e as Uint8Array, blobs) as unknown[]),
    seq,
    blobs: new Set(hashes),
  };
}

/** One event item of a turn in progress: the events of the batches between two checkpoints. */
export interface ProgressItem {
  seq: number;
  /** How many events of the turn came before these. */
  from: number;
  events: unknown[];
}

/**
 * The event items of a turn in progress after item `afterSeq`, for readers following the turn
 * (the events of batches not yet checkpointed are not visible). Stops at a gap.
 */
export async function readProgress(ctx: StoreContext, tenant: string, id: string, turn: number, token: string, afterSeq: number): Promise<ProgressItem[]> {
  const items = (await checkpointItems(ctx, tenant, id, turn, afterSeq)).filter((i) => i.token === token);
  const blobs = await readBlobs(ctx, headKey({ tenant, id }).pk, items.flatMap((i) => (i.eb as string[]) ?? []));
  const out: ProgressItem[] = [];
  let expected = afterSeq + 1;
  for (const item of items) {
    const seq = seqOf(item.sk as string);
    if (seq !== expected) break;
    out.push({ seq, from: item.from as number, events: decode(item.e as Uint8Array, blobs) as unknown[] });
    expected++;
  }
  return out;
}

/** Removes a turn's checkpoint items (after its commit; a failure leaves them to expire). */
export async function deleteCheckpoint(ctx: StoreContext, tenant: string, id: string, turn: number): Promise<void> {
  const items = await checkpointItems(ctx, tenant, id, turn);
  await deleteKeys(ctx, items.map((i) => ({ pk: i.pk as string, sk: i.sk as string })));
}

function checkpointItems(ctx: StoreContext, tenant: string, id: string, turn: number, afterSeq?: number): Promise<Record<string, unknown>[]> {
  const pk = keys.session(tenant, id);
  return queryAll(ctx, 'read the checkpoint', {
    KeyConditionExpression: afterSeq === undefined ? 'pk = :pk AND begins_with(sk, :p)' : 'pk = :pk AND sk BETWEEN :from AND :to',
    ExpressionAttributeValues: afterSeq === undefined
      ? { ':pk': pk, ':p': keys.checkpoint(turn) }
      : { ':pk': pk, ':from': keys.checkpointEvents(turn, afterSeq + 1), ':to': keys.checkpointEvents(turn, 999_999) },
    ConsistentRead: true,
  }, 'checkpoint');
}

function seqOf(sk: string): number {
  return Number(sk.slice(sk.lastIndexOf('#') + 1));
}
