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
 *
 * Deleting a session *closes* its next slot: a tombstone (neither a claim nor a record) is put
 * there, so every write a turn in flight could still make fails on it — a claimless commit or a
 * claim (the slot is not free), a claimed commit and an async turn's lease, checkpoint and
 * cancel flag (the slot no longer holds their claim). Turns are written in order, so no turn
 * can commit above a closed slot. The tombstone carries a TTL; `checkRead` keeps the writes that
 * need a free slot from outliving it.
 */
import { DeleteCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { call, capacityParam, ConditionFailed, reportCapacity, type StoreContext } from './dynamo';
import { type CancelMode, CancelRequestedError, LeaseLostError, NotFoundError, StoreUnavailableError, TurnConflictError, TurnInProgressError } from './errors';
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
  /** A stop asked the async turn to end as cancelled (or, with `cancelAs`, a newer input to end it otherwise). */
  cancelRequested?: boolean;
  /** What a pending flag ends the turn as, when it is not a stop: a newer input's interrupt or rollback. */
  cancelAs?: Exclude<CancelMode, 'cancelled'>;
  /** The tokens of the inputs queued behind this turn, in order (lib/store/inbox.ts); absent: none. */
  inbox?: string[];
  /** The claim holds a queued input it runs (promoted from an inbox); its worker is sent for. */
  queued?: true;
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

export const TOMBSTONE_KIND = 'tombstone';
/**
 * How long a deleted session's marked head and the tombstone in its next slot stay (TTL): far
 * longer than any turn that read the session before the deletion can still be writing. When
 * DynamoDB removes the head, the cleanup (cleanup.ts) removes the tombstone and anything else
 * left in the partition.
 */
export const DELETED_SESSION_TTL_SECONDS = 86_400;
/**
 * The oldest read of a session a write into a free slot may rely on: well inside
 * DELETED_SESSION_TTL_SECONDS, so such a write never comes after a deletion's tombstone is gone.
 */
export const MAX_SLOT_READ_AGE_MS = 3_600_000;

export function isClaimItem(item: Record<string, unknown>): boolean {
  return item.kind === CLAIM_KIND;
}

/** The tombstone a deletion put into the session's next slot (see the top of this file). */
export function isTombstone(item: Record<string, unknown>): boolean {
  return item.kind === TOMBSTONE_KIND;
}

/** Whether a turn slot's item is a committed turn record (not a claim, not a tombstone). */
export function isRecordItem(item: Record<string, unknown>): boolean {
  return !isClaimItem(item) && !isTombstone(item);
}

/** The session as a write into its next slot saw it: the turn, and when the head was read and expires. */
export interface SeenSession {
  turn: number;
  status: string;
  /** Epoch s; 0: not known (a head not written yet). */
  expiresAt?: number;
  /** Epoch ms of the read (or creation) of the head. */
  readAt?: number;
}

/**
 * Before a commit: the session must not have expired since it was read — readers see it gone
 * already, and its cleanup may have run, so the record (and its blobs) would stay with no head.
 * NotFoundError.
 */
export function checkNotExpired(seen: SeenSession, at: number): void {
  if (seen.expiresAt !== undefined && seen.expiresAt > 0 && seen.expiresAt <= Math.floor(at / 1000)) throw new NotFoundError('run');
}

/**
 * Before a write into a free slot (a claim, a claimless commit), which an empty slot lets
 * through: the session must not have expired since it was read (`checkNotExpired`), and the
 * read must be recent (a deletion's tombstone outlives only so long). NotFoundError, or
 * StoreUnavailableError (nothing was written; a retry reads the run again).
 */
export function checkRead(seen: SeenSession, at: number): void {
  checkNotExpired(seen, at);
  if (seen.readAt !== undefined && at - seen.readAt > MAX_SLOT_READ_AGE_MS) {
    throw new StoreUnavailableError('the run was read too long ago for this turn to commit; nothing was committed');
  }
}

export function toClaim(item: Record<string, unknown>): Claim {
  return {
    turn: item.turn as number,
    token: item.claim_token as string,
    expiresAt: item.claim_expires as number,
    ...(item.claim_async === true ? { async: true } : {}),
    ...(typeof item.claim_owner === 'string' ? { owner: item.claim_owner } : {}),
    ...(typeof item.cancel_at === 'number' ? { cancelRequested: true } : {}),
    ...(item.cancel_as === 'interrupted' || item.cancel_as === 'rolled_back' ? { cancelAs: item.cancel_as } : {}),
    ...(Array.isArray(item.ibt) && item.ibt.length > 0 ? { inbox: item.ibt.map(String) } : {}),
    ...(item.qd === true || item.qin !== undefined ? { queued: true as const } : {}),
    ...(typeof item.ik === 'string' ? { keyHash: item.ik } : {}),
    ...(typeof item.fp === 'string' ? { fingerprint: item.fp } : {}),
  };
}

/**
 * Condition of a write into the slot that nobody holds: empty, or a claim that expired — unless
 * it carries queued inputs (lib/store/inbox.ts), which are never dropped: such a claim is taken
 * over by its first queued input instead.
 */
export const FREE_SLOT = 'attribute_not_exists(pk) OR (kind = :claimKind AND claim_expires < :now AND attribute_not_exists(ibt) AND attribute_not_exists(qin))';

/**
 * Claims turn `r.turn` of a session: the slot must be empty or hold an expired claim.
 * TurnConflictError when the turn is committed already, TurnInProgressError while another
 * claim holds it.
 */
export async function claimSlot(ctx: StoreContext, tenant: string, id: string, r: ClaimRequest, seen: SeenSession): Promise<Claim> {
  const at = now(ctx);
  checkRead(seen, at);
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

/**
 * Closes the session's next slot for good (a deletion; see the top of this file): a tombstone
 * goes into the first slot from turn `from` on that holds no committed record — over a claim,
 * whose holder then can commit nothing. A record found on the way was committed meanwhile (by a
 * turn that read the session before the deletion): the slot above it is tried. Returns the turn
 * whose slot was closed.
 */
export async function closeSlot(ctx: StoreContext, tenant: string, id: string, from: number, ttl: number): Promise<number> {
  const at = now(ctx);
  // terminates: a turn can be written only above one its writer read, and nobody reads the
  // session once its head is marked deleted
  for (let turn = Math.max(1, from); ; turn++) {
    try {
      await call('close the next turn', () =>
        ctx.doc.send(new PutCommand({
          TableName: ctx.table,
          Item: { pk: keys.session(tenant, id), sk: keys.turn(turn), kind: TOMBSTONE_KIND, turn, created_at: at, ttl },
          ConditionExpression: 'attribute_not_exists(pk) OR kind IN (:claimKind, :tombstone)',
          ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':tombstone': TOMBSTONE_KIND },
          ...capacityParam(ctx),
        })).then((out) => reportCapacity(ctx, 'delete', 'write', out.ConsumedCapacity)),
      );
      return turn;
    } catch (error) {
      if (!(error instanceof ConditionFailed)) throw error;
    }
  }
}

/**
 * Gives a claim back without committing (the turn was refused, or failed before it could
 * commit). False when the claim has inputs queued behind it (lib/store/inbox.ts): it is not
 * deleted then, and the caller hands the slot to the first of them.
 */
export async function releaseSlot(ctx: StoreContext, tenant: string, id: string, claim: Pick<Claim, 'turn' | 'token'>): Promise<boolean> {
  try {
    await call('release the claim', () =>
      ctx.doc.send(new DeleteCommand({
        TableName: ctx.table,
        Key: { pk: keys.session(tenant, id), sk: keys.turn(claim.turn) },
        ConditionExpression: 'kind = :claimKind AND claim_token = :tok AND attribute_not_exists(ibt)',
        ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':tok': claim.token },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'release', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    const old = error.item;
    return !(old && isClaimItem(old) && old.claim_token === claim.token && Array.isArray(old.ibt));
  }
  return true;
}

/**
 * Why a write into the slot was refused, from the item as it was: the session was deleted (a
 * tombstone), the turn is committed (conflict), or another live claim holds it (in progress).
 */
export function slotRefusal(error: unknown, seen: { turn: number; status: string }): unknown {
  if (!(error instanceof ConditionFailed)) return error;
  const old = error.item;
  if (old && isTombstone(old)) return new NotFoundError('run');
  if (old && !isClaimItem(old)) return new TurnConflictError(Math.max(seen.turn + 1, old.turn as number), runStatusOf(old));
  return new TurnInProgressError(seen.turn, seen.status, old ? toClaim(old) : undefined);
}

/** The run's status after a committed turn: its record's, unless the turn left the state as it was (`rs`). */
export function runStatusOf(record: Record<string, unknown>): string {
  return typeof record.rs === 'string' ? record.rs : (record.status as string);
}

/** Why a lease-fenced write was refused: the session was deleted, a stop is pending, or the lease is someone else's. */
export function leaseRefusal(old: Record<string, unknown> | undefined, token: string, owner: string): Error {
  if (old && isTombstone(old)) return new NotFoundError('run');
  if (old && isClaimItem(old) && old.claim_token === token && old.claim_owner === owner && typeof old.cancel_at === 'number') return new CancelRequestedError(cancelModeOf(old));
  return new LeaseLostError();
}

/** What a claim's pending flag ends its turn as. */
export function cancelModeOf(item: Record<string, unknown>): CancelMode {
  return item.cancel_as === 'interrupted' || item.cancel_as === 'rolled_back' ? item.cancel_as : 'cancelled';
}

const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();
