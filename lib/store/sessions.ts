/**
 * Sessions (runs) and their turns. A session is one partition: turn records `T#<n>` and the head
 * `T#~`, which sorts last, so one descending Query reads the head, the next turn's slot (a claim,
 * if one is held: see turn-slot.ts), the latest turn (with the state) and the few turns before
 * it (whose history deltas rebuild the conversation window).
 *
 * Writing a turn: [claim the slot `T#<n+1>`, only when the turn reaches outside the run] -> the
 * caller runs the turn -> commit (a conditional Put of the turn record into that slot: the
 * commit point; nobody else can write turn n+1). The head holds what listings show (status
 * `st`, turn `tn`, updated_at `ua`) and the session's TTL; it is updated after the commit only
 * when the listed status or timer changed, or the listing is older than `listingRefreshMs`. A
 * reader that finds the head behind the latest turn record trusts the record.
 *
 * The listing index (gsi1) finds a workflow's sessions; listings read the heads themselves for
 * what changes (session-listing.ts). So the names the index projects are written when a
 * session is created and not after — `status`, `turn` and `updated_at` are those of heads
 * written before this layout, read when `st`, `tn`, `ua` are absent — and a turn that changes
 * the status writes the head alone, not an index entry as well. Only the TTL, which the index
 * projects too (expired sessions are filtered there), moves the entry: once per refresh
 * interval at most.
 *
 * A deleted session (deletion.ts) keeps, for a while, a head marked `deleted_at` and a tombstone
 * in its next slot: reads answer 404, and the commit of a turn in flight fails on the tombstone.
 */
import { GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { EaselError } from '../errors';
import { itemSize, readBlobs, writeBlobs } from './blobs';
import { encodeParts } from './codec';
import { dueSortKey, expiryDue, HEAD_LISTING_ATTRIBUTES, HEAD_LISTING_NAMES, headItem, partsOf, responsePart, sessionExpiry, toHead, toTurn } from './session-items';
import { sweepDeletedSession } from './deletion';
import { call, capacityParam, ConditionFailed, isExpired, reportCapacity, type StoreContext } from './dynamo';
import { NotFoundError, RunExistsError } from './errors';
import { commitPromoting, DEFAULT_INBOX_LIMITS, type Promoted, releasePromoting } from './inbox';
import { keys, SESSION_HEAD_SK, TURN_PREFIX, turnFromSk } from './item-keys';
import {
  CLAIM_KIND,
  checkNotExpired,
  checkRead,
  type Claim,
  claimSlot,
  type ClaimRequest,
  FREE_SLOT,
  isClaimItem,
  isRecordItem,
  isTombstone,
  leaseRefusal,
  releaseSlot,
  runStatusOf,
  slotRefusal,
  toClaim,
} from './turn-slot';

export type { Claim } from './turn-slot';
export { leaseRefusal } from './turn-slot';

/** No item may come near DynamoDB's 400 KB. */
const MAX_RECORD_BYTES = 350 * 1024;

/** How often the listing index is refreshed when nothing listed changed. @default 60 s */
export const DEFAULT_LISTING_REFRESH_MS = 60_000;

export interface SessionHead {
  tenant: string;
  id: string;
  workflowId: string;
  version: number;
  status: string;
  /** Last committed turn (0: none). */
  turn: number;
  userId: string | null;
  /** The API that started the run, whose Begin rules it keeps (lib/canvas BeginRules); absent: native. */
  dialect?: 'ragflow';
  /**
   * RAGFlow's session source: `workflow` when a RAGFlow completion without a session started
   * the run (its completions forward every canvas event); absent: `agent` (a created session).
   */
  source?: 'workflow';
  /** The name it was given when created (RAGFlow's session name); absent when none. */
  name?: string;
  createdAt: string;
  updatedAt: string;
  /** Epoch seconds after which the session is gone. */
  expiresAt: number;
  /** The claim held on the next turn's slot, live or expired; null when the slot is empty. */
  claim: Claim | null;
  /** When its armed form timer fires (epoch ms); null when none. */
  dueAt?: number | null;
  /** The status as the head item (and so the listing index) holds it; `status` may be newer. */
  listedStatus?: string;
  /** A first turn's Idempotency-Key (hashed) and request fingerprint, when its run id came from the key. */
  keyHash?: string;
  fingerprint?: string;
  /** When this copy of the head was read or created (epoch ms): see turn-slot.ts `checkRead`. */
  readAt?: number;
  /** The run and turn this run was forked from (forks.ts). */
  forkedFrom?: { runId: string; turn: number };
}

/** What one turn stored: the state after it and what it said. */
export interface TurnPayload {
  state: unknown;
  request: unknown;
  /** The turn's response body, exactly as first returned. */
  response: string;
  /** Conversation entries the turn added. */
  history: unknown[];
  /** The turn's call records (lib/canvas/calls.ts) and how many went unrecorded past the bound. */
  calls?: { records: unknown[]; dropped: number };
}

/** Call results longer than this go to content-addressed blobs: records stay small. */
export const CALL_RESULT_INLINE_BYTES = 1024;

export interface TurnRecord {
  turn: number;
  /** The turn's status (`rolled_back` and `rejected` among them: see `runStatus`). */
  status: string;
  /** The run's status after it: the turn's, unless the turn left the state as it was. */
  runStatus: string;
  createdAt: string;
  /** The claim token of the request that committed it. */
  committedBy: string;
  /** The principal-scoped hash of the Idempotency-Key it was committed for, and its request fingerprint. */
  keyHash: string | null;
  fingerprint: string | null;
}

export interface LoadedSession {
  head: SessionHead;
  /** The latest committed turn with its state; null before the first turn. */
  latest: (TurnRecord & { state: unknown }) | null;
  /** Conversation entries of the turns read, oldest first. */
  history: unknown[];
  /** Blobs already stored in this session (need not be written again). */
  storedBlobs: Set<string>;
}

export interface CreateSession {
  tenant: string;
  id: string;
  workflowId: string;
  version: number;
  userId: string | null;
  dialect?: 'ragflow';
  source?: 'workflow';
  /** A name for listings (RAGFlow's session name). */
  name?: string;
  ttlSeconds: number;
  /** The first turn's key and fingerprint (its run id derived from the key). */
  keyHash?: string;
  fingerprint?: string;
}

const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();
const iso = (ms: number) => new Date(ms).toISOString();

export async function createSession(ctx: StoreContext, s: CreateSession): Promise<SessionHead> {
  const at = now(ctx);
  const head: SessionHead = {
    tenant: s.tenant,
    id: s.id,
    workflowId: s.workflowId,
    version: s.version,
    status: 'not_started',
    turn: 0,
    userId: s.userId,
    ...(s.dialect ? { dialect: s.dialect } : {}),
    ...(s.source ? { source: s.source } : {}),
    ...(s.name ? { name: s.name } : {}),
    createdAt: iso(at),
    updatedAt: iso(at),
    expiresAt: sessionExpiry(at, s.ttlSeconds),
    claim: null,
    listedStatus: 'not_started',
    ...(s.keyHash ? { keyHash: s.keyHash } : {}),
    ...(s.fingerprint ? { fingerprint: s.fingerprint } : {}),
    readAt: at,
  };
  try {
    await call('create the session', () =>
      ctx.doc.send(new PutCommand({ TableName: ctx.table, Item: headItem(head), ConditionExpression: 'attribute_not_exists(pk)', ...capacityParam(ctx) }))
        .then((out) => reportCapacity(ctx, 'create', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (error instanceof ConditionFailed) throw new RunExistsError(s.id);
    throw error;
  }
  return head;
}

/** The head, the latest turn's state and up to `historyTurns` turns of conversation. */
export async function loadSession(ctx: StoreContext, tenant: string, id: string, historyTurns: number): Promise<LoadedSession> {
  const pk = keys.session(tenant, id);
  const readAt = now(ctx);
  const { Items = [] } = await call('read the session', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :t)',
      ExpressionAttributeValues: { ':pk': pk, ':t': TURN_PREFIX },
      ScanIndexForward: false,
      // the head, the next turn's slot, the latest turn and the window before it
      Limit: 3 + Math.max(0, historyTurns),
      ConsistentRead: true,
      ...capacityParam(ctx),
    })).then((out) => {
      reportCapacity(ctx, 'load', 'read', out.ConsumedCapacity);
      return out;
    }),
  );
  const [headRaw, ...rest] = Items;
  const head = liveHead(headRaw, rest, readAt);
  const slot = rest[0] && isClaimItem(rest[0]) ? rest[0] : undefined;
  const turns = rest.filter(isRecordItem).slice(0, 1 + Math.max(0, historyTurns));
  const latestRaw = turns[0];
  const blobHashes = new Set<string>();
  for (const t of turns) for (const h of (t.hb as string[] | undefined) ?? []) blobHashes.add(h);
  if (latestRaw) for (const h of (latestRaw.sb as string[] | undefined) ?? []) blobHashes.add(h);
  const blobs = await readBlobs(ctx, pk, [...blobHashes]);

  const history: unknown[] = [];
  for (const t of [...turns].reverse()) history.push(...((partsOf(t, t === latestRaw ? ['h', 's'] : ['h'], blobs).h as unknown[] | undefined) ?? []));
  const latest = latestRaw ? { ...toTurn(latestRaw), state: partsOf(latestRaw, ['s'], blobs).s } : null;
  settleHead(head, latest, slot);
  const storedBlobs = new Set<string>();
  for (const t of turns) for (const h of [...((t.sb as string[]) ?? []), ...((t.hb as string[]) ?? []), ...((t.rb as string[]) ?? []), ...((t.cb as string[]) ?? [])]) storedBlobs.add(h);
  return { head, latest, history, storedBlobs };
}

/**
 * The head of a session that exists: present, not expired, not deleted (a deletion marks the
 * head, then closes the next slot: either one seen means the run is gone). NotFoundError if not.
 */
function liveHead(headRaw: Record<string, unknown> | undefined, below: Record<string, unknown>[], readAt: number): SessionHead {
  if (!headRaw || headRaw.sk !== SESSION_HEAD_SK || isExpired(headRaw, readAt) || headRaw.deleted_at !== undefined || below.some(isTombstone)) {
    throw new NotFoundError('run');
  }
  return { ...toHead(headRaw), readAt };
}

/**
 * The head with what the items below it say: the latest record's turn and status (a head may
 * lag behind its records: it is refreshed only when something listed changed), and the claim
 * held in the next turn's slot.
 */
function settleHead(head: SessionHead, latest: Pick<TurnRecord, 'turn' | 'runStatus'> | null, slot: Record<string, unknown> | undefined): void {
  if (latest && latest.turn > head.turn) {
    head.turn = latest.turn;
    head.status = latest.runStatus;
  }
  head.claim = slot && (slot.turn as number) === head.turn + 1 ? toClaim(slot) : null;
}

/** The head (listing attributes), its turn as the latest record says, and the claim; without the state. */
export async function getHead(ctx: StoreContext, tenant: string, id: string): Promise<SessionHead> {
  const readAt = now(ctx);
  const { Items = [] } = await call('read the session', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :t)',
      ExpressionAttributeValues: { ':pk': keys.session(tenant, id), ':t': TURN_PREFIX },
      ProjectionExpression: `pk, sk, kind, ${HEAD_LISTING_ATTRIBUTES}, ik, fp, ff, claim_token, claim_expires, claim_async, claim_owner, cancel_at, cancel_as, ibt, qd, rs, deleted_at`,
      ExpressionAttributeNames: HEAD_LISTING_NAMES,
      ScanIndexForward: false,
      Limit: 3,
      ConsistentRead: true,
    })),
  );
  const [headRaw, ...rest] = Items;
  const head = liveHead(headRaw, rest, readAt);
  const slot = rest[0] && isClaimItem(rest[0]) ? rest[0] : undefined;
  const latest = rest.find(isRecordItem);
  settleHead(head, latest ? { turn: turnFromSk(latest.sk as string), runStatus: runStatusOf(latest) } : null, slot);
  return head;
}

/**
 * Claims turn `head.turn + 1` for `leaseMs` (a placeholder in its slot). Fails with
 * TurnInProgressError while another unexpired claim holds it, TurnConflictError when the turn
 * was committed since the head was read.
 */
export async function claimTurn(
  ctx: StoreContext,
  head: SessionHead,
  token: string,
  leaseMs: number,
  options: Pick<ClaimRequest, 'async' | 'keyHash' | 'fingerprint'> = {},
): Promise<Claim> {
  return claimSlot(ctx, head.tenant, head.id, { turn: head.turn + 1, token, leaseMs, ...options }, head);
}

export interface Commit {
  head: SessionHead;
  /** The turn committed: `head.turn + 1`. */
  turn: number;
  /** The token recorded as the committer (the claim's, when there is one). */
  token: string;
  /**
   * The claim this turn holds in its slot; null for a turn that claimed nothing (it reached
   * nothing outside the run), which commits only into an empty slot or over an expired claim.
   */
  claim: Claim | null;
  status: string;
  /**
   * The run's status after the turn, when it is not `status`: a turn that left the state as it
   * was (`rolled_back`, `rejected`) keeps the run's. The head and listings show this one.
   */
  runStatus?: string;
  payload: TurnPayload;
  /** The principal-scoped key hash and request fingerprint, for retries to find the turn. */
  keyHash: string | null;
  fingerprint: string | null;
  /**
   * The run does not exist yet (a first turn that claimed nothing): the head is created with
   * the record, in one transaction.
   */
  create?: boolean;
  /** Refresh the listing when nothing listed changed after this long. @default 60 s */
  listingRefreshMs?: number;
  /**
   * Takes the head's listing update to run after the turn's response (see TurnEngine
   * `afterResponse`); absent, it runs before commitTurn returns. A change of the form timer is
   * always written before: a lost one would leave the form's timer unarmed.
   */
  deferListing?: (update: () => Promise<void>) => void;
  ttlSeconds: number;
  /** The run's form timer after this turn (epoch ms), or null. */
  dueAt: number | null;
  /** Blobs the session already holds. */
  storedBlobs: ReadonlySet<string>;
  /**
   * An async turn's worker lease: only the lease holder can commit, and a pending stop refuses
   * the commit unless `allowCancel` (the turn being committed is the cancellation); with
   * `cancelAs`, only a pending flag of that kind is allowed (the turn ends as a newer input asked).
   */
  lease?: { owner: string; allowCancel: boolean; cancelAs?: 'interrupted' | 'rolled_back' };
  /** How long the claim of a queued input promoted by this commit waits for its worker. @default 20 min */
  queueHoldMs?: number;
}

export interface CommitResult {
  /** Bytes written for the turn record and any new blobs. */
  bytes: number;
  /** The turn this commit claimed for the run's first queued input (lib/store/inbox.ts): send it to a worker. */
  promoted?: Promoted;
}

/** How long a promoted queued input's claim waits for its worker unless the caller says. */
const DEFAULT_QUEUE_HOLD_MS = 20 * 60_000;

/**
 * Writes turn `c.turn`. The conditional Put of the record into the turn's slot is the commit
 * point: exactly one request can write turn n (see turn-slot.ts for the conditions). Then the
 * head follows, when something it lists changed (a failure there is repaired by the next reader).
 */
export async function commitTurn(ctx: StoreContext, c: Commit): Promise<CommitResult> {
  const pk = keys.session(c.head.tenant, c.head.id);
  const at = now(ctx);
  // checked before anything, blobs included, is written: no commit into a session that expired
  // since it was read; and an empty slot lets a claimless commit through, so it must rest on a
  // read that a deletion's tombstone outlives
  if (!c.create) (c.claim === null ? checkRead : checkNotExpired)(c.head, at);
  const { record, bytes } = await writeTurnRecord(ctx, c, at);
  const ttl = sessionExpiry(at, c.ttlSeconds);
  if (c.create) {
    await createWithRecord(ctx, c, record, ttl, at);
    return { bytes };
  }
  const condition = commitCondition(c, at);
  let promoted: Promoted | undefined;
  for (let attempt = 0; ; attempt++) {
    try {
      await call('commit the turn', () =>
        ctx.doc.send(new PutCommand({ TableName: ctx.table, Item: record, ...condition, ReturnValuesOnConditionCheckFailure: 'ALL_OLD', ...capacityParam(ctx) }))
          .then((out) => reportCapacity(ctx, 'commit', 'write', out.ConsumedCapacity)),
      );
      break;
    } catch (error) {
      if (!(error instanceof ConditionFailed)) throw error;
      const old = error.item;
      // the session was deleted meanwhile: the blobs just written must not outlive it
      if (old && isTombstone(old)) await sweepDeletedSession(ctx, pk);
      if (c.lease && c.claim && old && isClaimItem(old)) {
        // refused only for its inbox, the record goes in with the claim of the first queued input;
        // refused for a lease that is someone else's, or a flag this commit does not answer, not
        const ours = old.claim_token === c.claim.token && old.claim_owner === c.lease.owner;
        const flagged = typeof old.cancel_at === 'number' && !(c.lease.allowCancel && (c.lease.cancelAs === undefined || old.cancel_as === c.lease.cancelAs));
        if (!ours || flagged) throw leaseRefusal(old, c.claim.token, c.lease.owner);
      }
      if (c.claim && old && isClaimItem(old) && old.claim_token === c.claim.token && Array.isArray(old.ibt) && attempt < 10) {
        const done = await commitPromoting(ctx, { record, condition: { ConditionExpression: condition.ConditionExpression.replace(INBOX_EMPTY, ''), ExpressionAttributeValues: condition.ExpressionAttributeValues }, old, holdMs: c.queueHoldMs ?? DEFAULT_QUEUE_HOLD_MS })
          .catch((refused: unknown) => {
            if (!(refused instanceof ConditionFailed)) throw refused;
            if (refused.item && isTombstone(refused.item)) return sweepDeletedSession(ctx, pk).then(() => Promise.reject(new NotFoundError('run')));
            if (c.lease && c.claim && refused.item && isClaimItem(refused.item)) throw leaseRefusal(refused.item, c.claim.token, c.lease.owner);
            throw slotRefusal(refused, c.head);
          });
        if (done) {
          promoted = done;
          break;
        }
        continue;
      }
      throw slotRefusal(error, c.head);
    }
  }

  if (listingChanged(c, at)) {
    const update = () =>
      call('update the session head', () =>
        ctx.doc.send(new UpdateCommand({ ...headUpdate(ctx, c, at, ttl), ...capacityParam(ctx) }))
          .then((out) => reportCapacity(ctx, 'head', 'write', out.ConsumedCapacity)),
      ).catch((error: unknown) => {
        // a later turn's update came first: the head is newer than this one
        if (!(error instanceof ConditionFailed)) throw error;
      });
    // nothing that reads a turn needs the listing (readers trust the records), so it may follow
    // the response; a lost update is repaired by the next turn, as a failed one is
    if (c.deferListing && (c.head.dueAt ?? null) === c.dueAt) c.deferListing(update);
    else await update();
  }
  return { bytes, ...(promoted ? { promoted } : {}) };
}

/** A claimed commit's clause that refuses it while queued inputs wait behind the turn (lib/store/inbox.ts). */
const INBOX_EMPTY = ' AND attribute_not_exists(ibt)';

/** The commit point's condition (see turn-slot.ts): a free slot, or the turn's own claim (and lease). */
function commitCondition(c: Commit, at: number): { ConditionExpression: string; ExpressionAttributeValues: Record<string, unknown> } {
  if (c.claim === null) return { ConditionExpression: FREE_SLOT, ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':now': at } };
  if (!c.lease) {
    return { ConditionExpression: `kind = :claimKind AND claim_token = :tok${INBOX_EMPTY}`, ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':tok': c.claim.token } };
  }
  const cancel = !c.lease.allowCancel ? ' AND attribute_not_exists(cancel_at)' : c.lease.cancelAs ? ' AND (attribute_not_exists(cancel_at) OR cancel_as = :cancelAs)' : '';
  return {
    ConditionExpression: `kind = :claimKind AND claim_token = :tok AND claim_owner = :owner${cancel}${INBOX_EMPTY}`,
    ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':tok': c.claim.token, ':owner': c.lease.owner, ...(c.lease.allowCancel && c.lease.cancelAs ? { ':cancelAs': c.lease.cancelAs } : {}) },
  };
}

/**
 * The record of turn `c.turn` as its commit writes it, after writing the blobs its long strings
 * went to (those the session does not hold yet). Shared by every kind of commit.
 */
export async function writeTurnRecord(ctx: StoreContext, c: Pick<Commit, 'head' | 'turn' | 'token' | 'status' | 'runStatus' | 'payload' | 'keyHash' | 'fingerprint' | 'storedBlobs'>, at: number): Promise<{ record: Record<string, unknown>; bytes: number }> {
  const pk = keys.session(c.head.tenant, c.head.id);
  const withCalls = c.payload.calls && (c.payload.calls.records.length > 0 || c.payload.calls.dropped > 0);
  // one compression stream for the whole turn (its parts share most of their words); each
  // part's long strings go to blobs of its own, so a reader fetches only the blobs it needs
  const payload = encodeParts(
    { s: c.payload.state, h: c.payload.history, q: c.payload.request, ...responsePart(c.payload.response), ...(withCalls ? { c: c.payload.calls } : {}) },
    { c: CALL_RESULT_INLINE_BYTES },
  );
  const newBlobs = new Map<string, string>();
  for (const part of Object.values(payload.blobs)) {
    for (const [hash, text] of part) if (!c.storedBlobs.has(hash)) newBlobs.set(hash, text);
  }
  let bytes = await writeBlobs(ctx, pk, newBlobs);

  const record: Record<string, unknown> = {
    pk,
    sk: keys.turn(c.turn),
    kind: 'turn',
    turn: c.turn,
    status: c.status,
    created_at: iso(at),
    committed_by: c.token,
    z: payload.bytes,
    ...(c.runStatus !== undefined && c.runStatus !== c.status ? { rs: c.runStatus } : {}),
  };
  if (c.keyHash) record.ik = c.keyHash;
  if (c.fingerprint) record.fp = c.fingerprint;
  for (const [part, hashes] of Object.entries(payload.blobs)) {
    if (hashes.size > 0) record[`${part}b`] = [...hashes.keys()];
  }
  bytes += itemSize(record);
  if (itemSize(record) > MAX_RECORD_BYTES) {
    throw new EaselError('payload_too_large', `the turn is too large to store (${Math.ceil(itemSize(record) / 1024)} KB after compression)`);
  }
  return { record, bytes };
}

/**
 * Whether the head must follow this commit: its listed status or timer changed, or the listing
 * (turn, updated_at, the session's TTL) is older than the refresh interval.
 */
function listingChanged(c: Commit, at: number): boolean {
  const listed = c.head.listedStatus ?? c.head.status;
  if (listed !== (c.runStatus ?? c.status)) return true;
  if ((c.head.dueAt ?? null) !== c.dueAt) return true;
  if (expiryDue(c.head.expiresAt, at, c.ttlSeconds)) return true;
  const refreshed = Date.parse(c.head.updatedAt);
  return !(at - refreshed < refreshMs(c));
}

const refreshMs = (c: Commit) => c.listingRefreshMs ?? DEFAULT_LISTING_REFRESH_MS;

function headUpdate(ctx: StoreContext, c: Commit, at: number, ttl: number) {
  // the TTL is projected into the listing index: moved only when due (sessionExpiry), so that a
  // status change alone writes no index entry
  const moveTtl = expiryDue(c.head.expiresAt, at, c.ttlSeconds);
  const sets = ['st = :status', 'tn = :turn', 'ua = :at', ...(moveTtl ? ['#ttl = :ttl'] : [])];
  return {
    TableName: ctx.table,
    Key: { pk: keys.session(c.head.tenant, c.head.id), sk: SESSION_HEAD_SK },
    // an armed timer puts the head in the sparse timer index; none takes it out
    UpdateExpression: c.dueAt === null
      ? `SET ${sets.join(', ')} REMOVE due_at, gsi2pk, gsi2sk`
      : `SET ${[...sets, 'due_at = :due', 'gsi2pk = :dueKey', 'gsi2sk = :dueSort'].join(', ')}`,
    // never into a deleted session's head: it would come back into the timer index, with a new
    // TTL; never back to an older turn (heads written before `tn` hold `turn`)
    ConditionExpression: 'attribute_exists(pk) AND (tn < :turn OR (attribute_not_exists(tn) AND #turn < :turn)) AND attribute_not_exists(deleted_at)',
    ExpressionAttributeNames: { '#turn': 'turn', ...(moveTtl ? { '#ttl': 'ttl' } : {}) },
    ExpressionAttributeValues: {
      ':turn': c.turn,
      ':status': c.runStatus ?? c.status,
      ':at': iso(at),
      ...(moveTtl ? { ':ttl': ttl } : {}),
      ...(c.dueAt === null ? {} : { ':due': c.dueAt, ':dueKey': 'DUE', ':dueSort': dueSortKey(c.dueAt, c.head.tenant, c.head.id) }),
    },
  };
}

/**
 * A first turn that claimed nothing: the head (as it is after the turn) and the record are
 * written together, so a crash leaves neither. RunExistsError when the id is taken (a retry of a
 * first turn whose run id comes from its Idempotency-Key).
 */
async function createWithRecord(ctx: StoreContext, c: Commit, record: Record<string, unknown>, ttl: number, at: number): Promise<void> {
  const head: SessionHead = {
    ...c.head,
    status: c.runStatus ?? c.status,
    turn: c.turn,
    updatedAt: iso(at),
    expiresAt: ttl,
    claim: null,
    dueAt: c.dueAt,
    ...(c.keyHash ? { keyHash: c.keyHash } : {}),
    ...(c.fingerprint ? { fingerprint: c.fingerprint } : {}),
  };
  try {
    await call('commit the turn', () =>
      ctx.doc.send(new TransactWriteCommand({
        TransactItems: [
          { Put: { TableName: ctx.table, Item: headItem(head), ConditionExpression: 'attribute_not_exists(pk)' } },
          { Put: { TableName: ctx.table, Item: record, ConditionExpression: 'attribute_not_exists(pk)' } },
        ],
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'commit', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (error instanceof ConditionFailed) throw new RunExistsError(c.head.id);
    throw error;
  }
}

/**
 * Gives a claim back without committing (the turn was refused before running anything). A
 * claim with inputs queued behind it hands its slot to the first of them instead: that turn is
 * returned, to be sent to a worker.
 */
export async function releaseClaim(ctx: StoreContext, head: SessionHead, claim: Claim, queueHoldMs = DEFAULT_QUEUE_HOLD_MS): Promise<Promoted | null> {
  if (await releaseSlot(ctx, head.tenant, head.id, claim)) return null;
  return releasePromoting(ctx, head.tenant, head.id, claim.turn, claim.token, queueHoldMs);
}

/** One committed turn: its record and stored response (exactly as returned then). */
export async function getTurn(ctx: StoreContext, tenant: string, id: string, turn: number): Promise<(TurnRecord & { response: string; request: unknown; calls: { records: unknown[]; dropped: number } }) | null> {
  const pk = keys.session(tenant, id);
  const { Item } = await call('read the turn', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk, sk: keys.turn(turn) }, ConsistentRead: true })),
  );
  if (!Item || !isRecordItem(Item)) return null;
  const blobs = await readBlobs(ctx, pk, [...((Item.rb as string[]) ?? []), ...((Item.qb as string[]) ?? []), ...((Item.cb as string[]) ?? [])]);
  const parts = partsOf(Item, ['r', 'q', 'c'], blobs);
  return {
    ...toTurn(Item),
    response: parts.r as string,
    request: parts.q,
    calls: (parts.c as { records: unknown[]; dropped: number } | undefined) ?? { records: [], dropped: 0 },
  };
}

/**
 * The record items of a run's committed turns in order, from `after` (exclusive), at most
 * `limit`; `more` when the run has more. `operation` names the reads for the capacity listener.
 */
export async function turnRecordItems(ctx: StoreContext, tenant: string, id: string, after: number, limit: number, operation = 'turns'): Promise<{ pk: string; items: Record<string, unknown>[]; more: boolean }> {
  const pk = keys.session(tenant, id);
  const { Items: read = [], LastEvaluatedKey } = await call('read the turns', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
      ExpressionAttributeValues: { ':pk': pk, ':from': keys.turn(after + 1), ':to': keys.turn(99_999_999) },
      Limit: limit,
      ConsistentRead: true,
      ...capacityParam(ctx),
    })).then((out) => {
      reportCapacity(ctx, operation, 'read', out.ConsumedCapacity);
      return out;
    }),
  );
  // the claim of a turn in flight (or a deleted session's tombstone) sorts after the last committed turn
  const items = read.filter(isRecordItem);
  return { pk, items, more: LastEvaluatedKey !== undefined && items.length === read.length };
}

/** Committed turns in order, from `after` (exclusive), without their state. */
export async function listTurns(ctx: StoreContext, tenant: string, id: string, after: number, limit: number): Promise<{ turns: (TurnRecord & { response: string; request: unknown })[]; more: boolean }> {
  const { pk, items: Items, more } = await turnRecordItems(ctx, tenant, id, after, limit);
  const blobs = await readBlobs(ctx, pk, Items.flatMap((i) => [...((i.rb as string[]) ?? []), ...((i.qb as string[]) ?? [])]));
  return {
    turns: Items.map((i) => {
      const parts = partsOf(i, ['r', 'q'], blobs);
      return { ...toTurn(i), response: parts.r as string, request: parts.q };
    }),
    more,
  };
}

export { dueSortKey, HEAD_LISTING_ATTRIBUTES, HEAD_LISTING_NAMES, partsOf, rawPartsOf, rawStateOf, sessionExpiry, toHead, toTurn } from './session-items';
