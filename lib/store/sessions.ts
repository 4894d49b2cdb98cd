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
import { BLOB_THRESHOLD, decode, decodeParts, decompress, encodeParts, rawParts } from './codec';
import { sweepDeletedSession } from './deletion';
import { call, capacityParam, ConditionFailed, isExpired, reportCapacity, type StoreContext } from './dynamo';
import { NotFoundError, RunExistsError } from './errors';
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
  status: string;
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
    expiresAt: Math.floor(at / 1000) + s.ttlSeconds,
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
function settleHead(head: SessionHead, latest: Pick<TurnRecord, 'turn' | 'status'> | null, slot: Record<string, unknown> | undefined): void {
  if (latest && latest.turn > head.turn) {
    head.turn = latest.turn;
    head.status = latest.status;
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
      ProjectionExpression: `pk, sk, kind, ${HEAD_LISTING_ATTRIBUTES}, ik, fp, ff, claim_token, claim_expires, claim_async, claim_owner, cancel_at, deleted_at`,
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
  settleHead(head, latest ? { turn: turnFromSk(latest.sk as string), status: latest.status as string } : null, slot);
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
   * the commit unless `allowCancel` (the turn being committed is the cancellation).
   */
  lease?: { owner: string; allowCancel: boolean };
}

export interface CommitResult {
  /** Bytes written for the turn record and any new blobs. */
  bytes: number;
}

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
  const ttl = Math.floor(at / 1000) + c.ttlSeconds;
  if (c.create) {
    await createWithRecord(ctx, c, record, ttl, at);
    return { bytes };
  }
  const condition = c.claim === null
    ? { ConditionExpression: FREE_SLOT, ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':now': at } }
    : c.lease
      ? {
        ConditionExpression: `kind = :claimKind AND claim_token = :tok AND claim_owner = :owner${c.lease.allowCancel ? '' : ' AND attribute_not_exists(cancel_at)'}`,
        ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':tok': c.claim.token, ':owner': c.lease.owner },
      }
      : { ConditionExpression: 'kind = :claimKind AND claim_token = :tok', ExpressionAttributeValues: { ':claimKind': CLAIM_KIND, ':tok': c.claim.token } };
  try {
    await call('commit the turn', () =>
      ctx.doc.send(new PutCommand({ TableName: ctx.table, Item: record, ...condition, ReturnValuesOnConditionCheckFailure: 'ALL_OLD', ...capacityParam(ctx) }))
        .then((out) => reportCapacity(ctx, 'commit', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    const old = error.item;
    // the session was deleted meanwhile: the blobs just written must not outlive it
    if (old && isTombstone(old)) await sweepDeletedSession(ctx, pk);
    if (c.lease && c.claim && old && isClaimItem(old)) throw leaseRefusal(old, c.claim.token, c.lease.owner);
    throw slotRefusal(error, c.head);
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
  return { bytes };
}

/**
 * Whether the head must follow this commit: its listed status or timer changed, or the listing
 * (turn, updated_at, the session's TTL) is older than the refresh interval.
 */
function listingChanged(c: Commit, at: number): boolean {
  const listed = c.head.listedStatus ?? c.head.status;
  if (listed !== c.status) return true;
  if ((c.head.dueAt ?? null) !== c.dueAt) return true;
  const refreshed = Date.parse(c.head.updatedAt);
  return !(at - refreshed < refreshMs(c));
}

const refreshMs = (c: Commit) => c.listingRefreshMs ?? DEFAULT_LISTING_REFRESH_MS;

function headUpdate(ctx: StoreContext, c: Commit, at: number, ttl: number) {
  // the TTL is projected into the listing index: moved only when it has fallen a refresh
  // interval behind, so that a status change alone writes no index entry
  const moveTtl = Math.abs(ttl - c.head.expiresAt) >= refreshMs(c) / 1000;
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
      ':status': c.status,
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
    status: c.status,
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

/** Gives a claim back without committing (the turn was refused before running anything). */
export async function releaseClaim(ctx: StoreContext, head: SessionHead, claim: Claim): Promise<void> {
  await releaseSlot(ctx, head.tenant, head.id, claim);
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

/** Committed turns in order, from `after` (exclusive), without their state. */
export async function listTurns(ctx: StoreContext, tenant: string, id: string, after: number, limit: number): Promise<{ turns: (TurnRecord & { response: string; request: unknown })[]; more: boolean }> {
  const pk = keys.session(tenant, id);
  const { Items: read = [], LastEvaluatedKey } = await call('list the turns', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
      ExpressionAttributeValues: { ':pk': pk, ':from': keys.turn(after + 1), ':to': keys.turn(99_999_999) },
      Limit: limit,
      ConsistentRead: true,
    })),
  );
  // the claim of a turn in flight (or a deleted session's tombstone) sorts after the last committed turn
  const Items = read.filter(isRecordItem);
  const more = LastEvaluatedKey !== undefined && Items.length === read.length;
  const blobs = await readBlobs(ctx, pk, Items.flatMap((i) => [...((i.rb as string[]) ?? []), ...((i.qb as string[]) ?? [])]));
  return {
    turns: Items.map((i) => {
      const parts = partsOf(i, ['r', 'q'], blobs);
      return { ...toTurn(i), response: parts.r as string, request: parts.q };
    }),
    more,
  };
}

// ---- mapping ------------------------------------------------------------------------------

/**
 * The parts of a turn record: one stream `z` (state `s`, history `h`, request `q`, response
 * `r` — or `R`, see responsePart —, calls `c`; deflate with the record dictionary), or, in
 * records written before it, the same parts as one brotli stream `p`, or before that an
 * attribute each. `blobs` must hold the wanted parts' blobs (`<part>b`).
 */
export function partsOf(item: Record<string, unknown>, wanted: readonly string[], blobs: ReadonlyMap<string, string>): Record<string, unknown> {
  if (item.z instanceof Uint8Array) {
    const parts = decodeParts(item.z, wanted.includes('r') ? [...wanted, 'R'] : wanted, blobs, 'dict1');
    if ('R' in parts) {
      parts.r = JSON.stringify(parts.R);
      delete parts.R;
    }
    return parts;
  }
  if (item.p instanceof Uint8Array) return decodeParts(item.p, wanted, blobs, 'brotli');
  const out: Record<string, unknown> = {};
  for (const part of wanted) if (item[part] instanceof Uint8Array) out[part] = decode(item[part] as Uint8Array, blobs);
  return out;
}

/**
 * Every part of a turn record, parsed, blob references left in place (codec `revive` fills
 * them in): a reader that wants a piece of a part reads only the blobs that piece needs.
 * Records that keep an attribute per part are read for the parts `wanted`.
 */
export function rawPartsOf(item: Record<string, unknown>, wanted: readonly string[]): Record<string, unknown> {
  if (item.z instanceof Uint8Array) return rawParts(item.z, 'dict1');
  if (item.p instanceof Uint8Array) return rawParts(item.p, 'brotli');
  const out: Record<string, unknown> = {};
  for (const part of wanted) if (item[part] instanceof Uint8Array) out[part] = JSON.parse(decompress(item[part] as Uint8Array));
  return out;
}

/**
 * The stored response body: kept as the parsed JSON (`R`) when that gives back the same bytes
 * — as JSON text inside JSON every quote would be escaped, a tenth more to compress — and it
 * is small enough to stay inline; else as the text (`r`), which a long body moves to a blob.
 */
function responsePart(body: string): { R: unknown } | { r: string } {
  if (body.length > BLOB_THRESHOLD) return { r: body };
  try {
    const parsed: unknown = JSON.parse(body);
    if (JSON.stringify(parsed) === body) return { R: parsed };
  } catch {
    // not JSON: kept as it is
  }
  return { r: body };
}

function headItem(h: SessionHead): Record<string, unknown> {
  return {
    pk: keys.session(h.tenant, h.id),
    sk: SESSION_HEAD_SK,
    kind: 'session',
    id: h.id,
    tenant: h.tenant,
    workflow_id: h.workflowId,
    version: h.version,
    st: h.status,
    tn: h.turn,
    user_id: h.userId ?? undefined,
    ...(h.dialect ? { dl: h.dialect } : {}),
    ...(h.source ? { src: h.source } : {}),
    ...(h.name ? { name: h.name } : {}),
    created_at: h.createdAt,
    ua: h.updatedAt,
    ttl: h.expiresAt,
    gsi1pk: keys.sessionList(h.tenant, h.workflowId),
    gsi1sk: `${h.createdAt}#${h.id}`,
    ...(h.dueAt != null ? { due_at: h.dueAt, gsi2pk: 'DUE', gsi2sk: dueSortKey(h.dueAt, h.tenant, h.id) } : {}),
    ...(h.keyHash ? { ik: h.keyHash } : {}),
    ...(h.fingerprint ? { fp: h.fingerprint } : {}),
    ...(h.forkedFrom ? { ff: { r: h.forkedFrom.runId, n: h.forkedFrom.turn } } : {}),
  };
}

/** What a head item lists, in either layout (see the top of this file). */
function listedOf(item: Record<string, unknown>): { status: string; turn: number; updatedAt: string } {
  return {
    status: (item.st ?? item.status) as string,
    turn: (item.tn ?? item.turn) as number,
    updatedAt: (item.ua ?? item.updated_at) as string,
  };
}

/** The head's attributes a reader of a session's listing and identity needs (a ProjectionExpression; `#status`, `#turn`, `#ttl` named). */
export const HEAD_LISTING_ATTRIBUTES = 'tenant, id, workflow_id, version, st, tn, ua, #status, #turn, updated_at, user_id, dl, src, #name, created_at, #ttl, due_at';
export const HEAD_LISTING_NAMES = { '#status': 'status', '#turn': 'turn', '#ttl': 'ttl', '#name': 'name' } as const;

export function toHead(item: Record<string, unknown>): SessionHead {
  const listed = listedOf(item);
  return {
    tenant: item.tenant as string,
    id: item.id as string,
    workflowId: item.workflow_id as string,
    version: item.version as number,
    status: listed.status,
    turn: listed.turn,
    userId: (item.user_id as string | undefined) ?? null,
    ...(item.dl === 'ragflow' ? { dialect: 'ragflow' as const } : {}),
    ...(item.src === 'workflow' ? { source: 'workflow' as const } : {}),
    ...(typeof item.name === 'string' ? { name: item.name } : {}),
    createdAt: item.created_at as string,
    updatedAt: listed.updatedAt,
    expiresAt: item.ttl as number,
    claim: null,
    dueAt: typeof item.due_at === 'number' ? item.due_at : null,
    listedStatus: listed.status,
    ...(typeof item.ik === 'string' ? { keyHash: item.ik } : {}),
    ...(typeof item.fp === 'string' ? { fingerprint: item.fp } : {}),
    ...(isForkLink(item.ff) ? { forkedFrom: { runId: item.ff.r, turn: item.ff.n } } : {}),
  };
}

function isForkLink(v: unknown): v is { r: string; n: number } {
  return typeof v === 'object' && v !== null && typeof (v as { r?: unknown }).r === 'string' && typeof (v as { n?: unknown }).n === 'number';
}

export function dueSortKey(dueAt: number, tenant: string, id: string): string {
  return `${String(dueAt).padStart(15, '0')}#${tenant}#${id}`;
}

export function toTurn(item: Record<string, unknown>): TurnRecord {
  return {
    turn: turnFromSk(item.sk as string),
    status: item.status as string,
    createdAt: item.created_at as string,
    committedBy: item.committed_by as string,
    keyHash: (item.ik as string | undefined) ?? null,
    fingerprint: (item.fp as string | undefined) ?? null,
  };
}
