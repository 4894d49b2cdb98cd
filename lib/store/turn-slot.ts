/**
 * The next turn's slot. Turn n+1 of a session has exactly one place to be written: the item
 * `T#<n+1>`. Before the turn commits, that item may hold a *claim* (a small placeholder: who
 * holds the turn, until when, and — for an async turn — its worker's lease, cancel flag and
 * checkpoint); the commit replaces it with the turn record. Because claimed and claimless
 * writers all condition on this one item, no second mechanism is needed to order them:
 *
 * - a claim is a Put that succeeds on an empty slot or an expired claim;
 * - a claimed commit is a Put on condition that the slot still holds *its* claim;
 * - a claimless commit (a turn that reached nothing outside the run) is a Put on condition that
 *   the slot is empty or holds an expired claim — so it loses against a live claim, whose
 *   holder may already have called a model.
 *
 * Every claim carries a TTL a day past its own expiry, so a placeholder that is never committed
 * (a crash, a refused turn) disappears by itself; a committed turn overwrites it whole.
 */
import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { call, capacityParam, ConditionFailed, reportCapacity, type StoreContext } from './dynamo';
import { CancelRequestedError, LeaseLostError, TurnConflictError, TurnInProgressError } from './errors';
import { keys } from './item-keys';

export const CLAIM_KIND = 'claim';
/** How long an abandoned claim outlives its expiry before DynamoDB's TTL removes it. */
export const CLAIM_TTL_GRACE_SECONDS = 86_400;

export interface Claim {
  turn: number;
  token: string;
  /** Epoch ms. */
  expiresAt: number;
  /** Claimed for a worker (an async turn): a stop sets a cancel flag rather than being refused. */
  async?: boolean;
  /** The worker attempt holding the lease of an async turn; absent until a worker takes it. */
  owner?: string;
  /** A stop asked the async turn to end as cancelled. */
  cancelRequested?: boolean;
  /** The idempotency key (its principal-scoped hash) and request fingerprint the claim was made for. */
  keyHash?: string;
  fingerprint?: string;
}

/** What a claim is made for: the key and fingerprint travel in the placeholder. */
export interface ClaimRequest {
  turn: number;
  token: string;
  leaseMs: number;
  async?: boolean;
  keyHash?: string;
  fingerprint?: string;
}

export const claimTtl = (expiresAtMs: number) => Math.ceil(expiresAtMs / 1000) + CLAIM_TTL_GRACE_SECONDS;

export function isClaimItem(item: Record<string, unknown>): boolean {
  return item.kind === CLAIM_KIND;
}

export function toClaim(item: Record<string, unknown>): Claim {
  return {
    turn: item.turn as number,
    token: item.claim_token as string,
    expiresAt: item.claim_expires as number,
    ...(item.claim_async === true ? { async: true } : {}),
    ...(typeof item.claim_owner === 'string' ? { owner: item.claim_owner } : {}),
    ...(typeof item.cancel_at === 'number' ? { cancelRequested: true } : {}),
    ...(typeof item.ik === 'string' ? { keyHash: item.ik } : {}),
    ...(typeof item.fp === 'string' ? { fingerprint: item.fp } : {}),
  };
}

/** Condition of a write into the slot that nobody holds: empty, or a claim that expired. */
export const FREE_SLOT = 'attribute_not_exists(pk) OR (kind = :claimKind AND claim_expires < :now)';

/**
 * Claims turn `r.turn` of a session: the slot must be empty or hold an expired claim.
 * TurnConflictError when the turn is committed already, TurnInProgressError while another
 * claim holds it.
 */
export async function claimSlot(ctx: StoreContext, tenant: string, id: string, r: ClaimRequest, seen: { turn: number; status: string }): Promise<Claim> {
  const at = now(ctx);
  const claim: Claim = {
    turn: r.turn,
    token: r.token,
    expiresAt: at + r.leaseMs,
    ...(r.async ? { async: true } : {}),
    ...(r.keyHash ? { keyHash: r.keyHash } : {}),
    ...(r.fingerprint ? { fingerprint: r.fingerprint } : {}),
  };
  const item: Record<string, unknown> = {
    pk: keys.session(tenant, id),
    sk: keys.turn(r.turn),
    kind: CLAIM_KIND,
    turn: r.turn,
    claim_token: r.token,
    claim_expires: claim.expiresAt,
    created_at: at,
    ttl: claimTtl(claim.expiresAt),
    ...(r.async ? { claim_async: true } : {}),
    ...(r.keyHash ? { ik: r.keyHash } : {}),
    ...(r.fingerprint ? { fp: r.fingerprint } : {}),
  };
  try {
    await call('claim the turn', () =>
      ctx.doc.send(new PutCommand({
        TableName: ctx.table,
        Item: item,
        ConditionExpression: FREE_SLOT,
        ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':now': at },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'claim', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    throw slotRefusal(error, seen);
  }
  return claim;
}

/** Gives a claim back without committing (the turn was refused, or failed before it could commit). */
export async function releaseSlot(ctx: StoreContext, tenant: string, id: string, claim: Pick<Claim, 'turn' | 'token'>): Promise<void> {
  await call('release the claim', () =>
    ctx.doc.send(new DeleteCommand({
      TableName: ctx.table,
      Key: { pk: keys.session(tenant, id), sk: keys.turn(claim.turn) },
      ConditionExpression: 'kind = :claimKind AND claim_token = :tok',
      ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':tok': claim.token },
      ...capacityParam(ctx),
    })).then((out) => reportCapacity(ctx, 'release', 'write', out.ConsumedCapacity)),
  ).catch((error: unknown) => {
    if (!(error instanceof ConditionFailed)) throw error;
  });
}

/**
 * Why a write into the slot was refused, from the item as it was: the turn is committed
 * (conflict), or another live claim holds it (in progress).
 */
export function slotRefusal(error: unknown, seen: { turn: number; status: string }): unknown {
  if (!(error instanceof ConditionFailed)) return error;
  const old = error.item;
  if (old && !isClaimItem(old)) return new TurnConflictError(Math.max(seen.turn + 1, old.turn as number), old.status as string);
  return new TurnInProgressError(seen.turn, seen.status);
}

/** Why a lease-fenced write was refused: a stop is pending, or the lease is someone else's. */
export function leaseRefusal(old: Record<string, unknown> | undefined, token: string, owner: string): Error {
  if (old && isClaimItem(old) && old.claim_token === token && old.claim_owner === owner && typeof old.cancel_at === 'number') return new CancelRequestedError();
  return new LeaseLostError();
}

const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();
