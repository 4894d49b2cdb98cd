/**
 * Sessions (runs) and their turns. A session is one partition: turn records `T#<n>` and the head
 * `T#~`, which sorts last, so one descending Query reads the head, the latest turn (with the
 * state) and the few turns before it (whose history deltas rebuild the conversation window).
 *
 * Writing a turn: `claim` (a conditional update of the small head: the next turn is ours for a
 * lease) -> the caller runs the turn -> `commit` (a conditional Put of the turn record: the
 * commit point; nobody else can write turn n) -> a best-effort update of the head's listing
 * attributes. A reader that finds the head behind the latest turn record trusts the record.
 */
import { BatchWriteCommand, GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { EaselError } from '../canvas/errors';
import { backoff, itemSize, readBlobs, writeBlobs } from './blobs';
import { decode, encode } from './codec';
import { call, capacityParam, ConditionFailed, isExpired, queryAll, reportCapacity, type StoreContext } from './dynamo';
import { CancelRequestedError, LeaseLostError, NotFoundError, TurnConflictError, TurnInProgressError } from './errors';
import { keys, SESSION_HEAD_SK, TURN_PREFIX, turnFromSk } from './item-keys';
import { LISTING_INDEX, TIMER_INDEX } from './table';

/** No item may come near DynamoDB's 400 KB. */
const MAX_RECORD_BYTES = 350 * 1024;

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
}

export interface SessionHead {
  tenant: string;
  id: string;
  workflowId: string;
  version: number;
  status: string;
  /** Last committed turn (0: none). */
  turn: number;
  userId: string | null;
  createdAt: string;
  updatedAt: string;
  /** Epoch seconds after which the session is gone. */
  expiresAt: number;
  claim: Claim | null;
  /** When its armed form timer fires (epoch ms); null when none. */
  dueAt?: number | null;
}

/** What one turn stored: the state after it and what it said. */
export interface TurnPayload {
  state: unknown;
  request: unknown;
  /** The turn's response body, exactly as first returned. */
  response: string;
  /** Conversation entries the turn added. */
  history: unknown[];
}

export interface TurnRecord {
  turn: number;
  status: string;
  createdAt: string;
  /** The claim token of the request that committed it. */
  committedBy: string;
  idempotencyKey: string | null;
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
  ttlSeconds: number;
  /** Create the session with the first turn already claimed (an execute without run_id). */
  claim?: Pick<Claim, 'token' | 'expiresAt' | 'async'>;
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
    status: s.claim ? 'running' : 'not_started',
    turn: 0,
    userId: s.userId,
    createdAt: iso(at),
    updatedAt: iso(at),
    expiresAt: Math.floor(at / 1000) + s.ttlSeconds,
    claim: s.claim ? { turn: 1, ...s.claim } : null,
  };
  await call('create the session', () =>
    ctx.doc.send(new PutCommand({ TableName: ctx.table, Item: headItem(head), ConditionExpression: 'attribute_not_exists(pk)', ...capacityParam(ctx) }))
      .then((out) => reportCapacity(ctx, 'create', 'write', out.ConsumedCapacity)),
  );
  return head;
}

/** The head, the latest turn's state and up to `historyTurns` turns of conversation. */
export async function loadSession(ctx: StoreContext, tenant: string, id: string, historyTurns: number): Promise<LoadedSession> {
  const pk = keys.session(tenant, id);
  const { Items = [] } = await call('read the session', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      KeyConditionExpression: 'pk = :pk AND begins_with(sk, :t)',
      ExpressionAttributeValues: { ':pk': pk, ':t': TURN_PREFIX },
      ScanIndexForward: false,
      Limit: 2 + Math.max(0, historyTurns),
      ConsistentRead: true,
      ...capacityParam(ctx),
    })).then((out) => {
      reportCapacity(ctx, 'load', 'read', out.ConsumedCapacity);
      return out;
    }),
  );
  const [headRaw, ...turns] = Items;
  if (!headRaw || headRaw.sk !== SESSION_HEAD_SK || isExpired(headRaw, now(ctx))) throw new NotFoundError('run');
  const head = toHead(headRaw);
  const latestRaw = turns[0];
  const blobHashes = new Set<string>();
  for (const t of turns) for (const h of (t.hb as string[] | undefined) ?? []) blobHashes.add(h);
  if (latestRaw) for (const h of (latestRaw.sb as string[] | undefined) ?? []) blobHashes.add(h);
  const blobs = await readBlobs(ctx, pk, [...blobHashes]);

  const history: unknown[] = [];
  for (const t of [...turns].reverse()) {
    if (t.h) history.push(...(decode(t.h as Uint8Array, blobs) as unknown[]));
  }
  const latest = latestRaw ? { ...toTurn(latestRaw), state: decode(latestRaw.s as Uint8Array, blobs) } : null;
  // a commit whose head update was lost: the record is the truth
  if (latest && latest.turn > head.turn) {
    head.turn = latest.turn;
    head.status = latest.status;
    if (head.claim && head.claim.turn <= latest.turn) head.claim = null;
  }
  const storedBlobs = new Set<string>();
  for (const t of turns) for (const h of [...((t.sb as string[]) ?? []), ...((t.hb as string[]) ?? []), ...((t.rb as string[]) ?? [])]) storedBlobs.add(h);
  return { head, latest, history, storedBlobs };
}

/** The head alone (listing attributes and the claim), without the state. */
export async function getHead(ctx: StoreContext, tenant: string, id: string): Promise<SessionHead> {
  const { Item } = await call('read the session', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.session(tenant, id), sk: SESSION_HEAD_SK }, ConsistentRead: true })),
  );
  if (!Item || isExpired(Item, now(ctx))) throw new NotFoundError('run');
  return toHead(Item);
}

/**
 * Claims turn `head.turn + 1` for `leaseMs`. Fails with TurnInProgressError while another
 * unexpired claim holds it, TurnConflictError when the head moved since it was read.
 */
export async function claimTurn(ctx: StoreContext, head: SessionHead, token: string, leaseMs: number, options: { async?: boolean } = {}): Promise<Claim> {
  const at = now(ctx);
  const claim: Claim = { turn: head.turn + 1, token, expiresAt: at + leaseMs, ...(options.async ? { async: true } : {}) };
  try {
    await call('claim the turn', () =>
      ctx.doc.send(new UpdateCommand({
        TableName: ctx.table,
        Key: { pk: keys.session(head.tenant, head.id), sk: SESSION_HEAD_SK },
        // the head may lag behind a committed record: bring it up to what was read; a new claim
        // starts without a worker holding its lease and without a stop pending
        UpdateExpression: `SET #turn = :turn, #status = :status, claim_turn = :ct, claim_token = :tok, claim_expires = :exp${options.async ? ', claim_async = :async' : ''} REMOVE claim_owner, lease_expires, cancel_at${options.async ? '' : ', claim_async'}`,
        ConditionExpression:
          'attribute_exists(pk) AND #turn <= :turn AND (attribute_not_exists(claim_turn) OR claim_turn <= :turn OR claim_expires < :now) AND (attribute_not_exists(#ttl) OR #ttl > :nowSec)',
        ExpressionAttributeNames: { '#turn': 'turn', '#status': 'status', '#ttl': 'ttl' },
        ExpressionAttributeValues: {
          ':turn': head.turn,
          ':status': head.status,
          ':ct': claim.turn,
          ':tok': token,
          ':exp': claim.expiresAt,
          ':now': at,
          ':nowSec': Math.floor(at / 1000),
          ...(options.async ? { ':async': true } : {}),
        },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'claim', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    throw refusal(error, head, at);
  }
  return claim;
}

export interface Commit {
  head: SessionHead;
  claim: Claim;
  status: string;
  payload: TurnPayload;
  idempotencyKey: string | null;
  ttlSeconds: number;
  /** The run's form timer after this turn (epoch ms), or null. */
  dueAt: number | null;
  /** Blobs the session already holds. */
  storedBlobs: ReadonlySet<string>;
  /**
   * An async turn's worker lease: the record and the head then move in one transaction that
   * only the lease holder can make, and that a pending stop refuses unless `allowCancel`
   * (the turn being committed is the cancellation).
   */
  lease?: { owner: string; allowCancel: boolean };
}

export interface CommitResult {
  /** Bytes written for the turn record and any new blobs. */
  bytes: number;
}

/**
 * Writes turn `claim.turn`. The conditional Put of the record is the commit point: exactly one
 * request can write turn n. Then the head's listing attributes follow (a failure there is
 * repaired by the next reader).
 */
export async function commitTurn(ctx: StoreContext, c: Commit): Promise<CommitResult> {
  const pk = keys.session(c.head.tenant, c.head.id);
  const at = now(ctx);
  const state = encode(c.payload.state);
  const history = encode(c.payload.history);
  const request = encode(c.payload.request);
  const response = encode(c.payload.response);
  const newBlobs = new Map<string, string>();
  for (const part of [state, history, request, response]) {
    for (const [hash, text] of part.blobs) if (!c.storedBlobs.has(hash)) newBlobs.set(hash, text);
  }
  let bytes = await writeBlobs(ctx, pk, newBlobs);

  const record: Record<string, unknown> = {
    pk,
    sk: keys.turn(c.claim.turn),
    kind: 'turn',
    turn: c.claim.turn,
    status: c.status,
    created_at: iso(at),
    committed_by: c.claim.token,
    s: state.bytes,
    h: history.bytes,
    q: request.bytes,
    r: response.bytes,
  };
  if (c.idempotencyKey) record.idem = c.idempotencyKey;
  for (const [attr, part] of [['sb', state], ['hb', history], ['qb', request], ['rb', response]] as const) {
    if (part.blobs.size > 0) record[attr] = [...part.blobs.keys()];
  }
  bytes += itemSize(record);
  if (itemSize(record) > MAX_RECORD_BYTES) {
    throw new EaselError('payload_too_large', `the turn is too large to store (${Math.ceil(itemSize(record) / 1024)} KB after compression)`);
  }
  const headUpdate: HeadUpdate = {
    TableName: ctx.table,
    Key: { pk, sk: SESSION_HEAD_SK },
    // an armed timer puts the head in the sparse timer index; none takes it out
    UpdateExpression: c.dueAt === null
      ? `SET #turn = :turn, #status = :status, updated_at = :at, #ttl = :ttl REMOVE ${CLAIM_ATTRIBUTES}, due_at, gsi2pk, gsi2sk`
      : `SET #turn = :turn, #status = :status, updated_at = :at, #ttl = :ttl, due_at = :due, gsi2pk = :dueKey, gsi2sk = :dueSort REMOVE ${CLAIM_ATTRIBUTES}`,
    ConditionExpression: '#turn < :turn AND claim_token = :tok',
    ExpressionAttributeNames: { '#turn': 'turn', '#status': 'status', '#ttl': 'ttl' },
    ExpressionAttributeValues: {
      ':turn': c.claim.turn,
      ':status': c.status,
      ':at': iso(at),
      ':ttl': Math.floor(at / 1000) + c.ttlSeconds,
      ':tok': c.claim.token,
      ...(c.dueAt === null ? {} : { ':due': c.dueAt, ':dueKey': 'DUE', ':dueSort': dueSortKey(c.dueAt, c.head.tenant, c.head.id) }),
    },
  };
  if (c.lease) {
    await commitLeased(ctx, c, record, headUpdate, c.lease);
    return { bytes };
  }
  try {
    await call('commit the turn', () =>
      ctx.doc.send(new PutCommand({ TableName: ctx.table, Item: record, ConditionExpression: 'attribute_not_exists(pk)', ...capacityParam(ctx) }))
        .then((out) => reportCapacity(ctx, 'commit', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    const head = await getHead(ctx, c.head.tenant, c.head.id).catch(() => c.head);
    throw new TurnConflictError(Math.max(head.turn, c.claim.turn), head.status);
  }

  await call('update the session head', () =>
    ctx.doc.send(new UpdateCommand({ ...headUpdate, ...capacityParam(ctx) }))
      .then((out) => reportCapacity(ctx, 'head', 'write', out.ConsumedCapacity)),
  ).catch((error: unknown) => {
    if (!(error instanceof ConditionFailed)) throw error;
  });
  return { bytes };
}

interface HeadUpdate {
  TableName: string;
  Key: Record<string, string>;
  UpdateExpression: string;
  ConditionExpression: string;
  ExpressionAttributeNames: Record<string, string>;
  ExpressionAttributeValues: Record<string, unknown>;
}

/**
 * The commit of an async turn: record and head in one transaction, fenced by the worker's
 * lease, so a worker that lost its lease (or met a stop) cannot commit.
 */
async function commitLeased(
  ctx: StoreContext,
  c: Commit,
  record: Record<string, unknown>,
  headUpdate: HeadUpdate,
  lease: { owner: string; allowCancel: boolean },
): Promise<void> {
  try {
    await call('commit the turn', () =>
      ctx.doc.send(new TransactWriteCommand({
        TransactItems: [
          { Put: { TableName: ctx.table, Item: record, ConditionExpression: 'attribute_not_exists(pk)' } },
          {
            Update: {
              ...headUpdate,
              ConditionExpression: `${headUpdate.ConditionExpression} AND claim_owner = :owner${lease.allowCancel ? '' : ' AND attribute_not_exists(cancel_at)'}`,
              ExpressionAttributeValues: { ...headUpdate.ExpressionAttributeValues, ':owner': lease.owner },
              ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
            },
          },
        ],
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'commit', 'write', out.ConsumedCapacity)),
    );
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    if (error.index === 0) {
      const head = await getHead(ctx, c.head.tenant, c.head.id).catch(() => c.head);
      throw new TurnConflictError(Math.max(head.turn, c.claim.turn), head.status);
    }
    throw leaseRefusal(error.item, c.claim.token, lease.owner);
  }
}

/** Why a lease-fenced write was refused: a stop is pending, or the lease is someone else's. */
export function leaseRefusal(old: Record<string, unknown> | undefined, token: string, owner: string): Error {
  if (old && old.claim_token === token && old.claim_owner === owner && typeof old.cancel_at === 'number') return new CancelRequestedError();
  return new LeaseLostError();
}

/** The head attributes that make up a claim and its lease. */
export const CLAIM_ATTRIBUTES = 'claim_turn, claim_token, claim_expires, claim_async, claim_owner, lease_expires, cancel_at';

/** Gives a claim back without committing (the turn was refused before running anything). */
export async function releaseClaim(ctx: StoreContext, head: SessionHead, claim: Claim): Promise<void> {
  await call('release the claim', () =>
    ctx.doc.send(new UpdateCommand({
      TableName: ctx.table,
      Key: { pk: keys.session(head.tenant, head.id), sk: SESSION_HEAD_SK },
      UpdateExpression: `REMOVE ${CLAIM_ATTRIBUTES}`,
      ConditionExpression: 'claim_token = :tok',
      ExpressionAttributeValues: { ':tok': claim.token },
    })),
  ).catch((error: unknown) => {
    if (!(error instanceof ConditionFailed)) throw error;
  });
}

/** One committed turn: its record and stored response (exactly as returned then). */
export async function getTurn(ctx: StoreContext, tenant: string, id: string, turn: number): Promise<(TurnRecord & { response: string; request: unknown }) | null> {
  const pk = keys.session(tenant, id);
  const { Item } = await call('read the turn', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk, sk: keys.turn(turn) }, ConsistentRead: true })),
  );
  if (!Item) return null;
  const blobs = await readBlobs(ctx, pk, [...((Item.rb as string[]) ?? []), ...((Item.qb as string[]) ?? [])]);
  return { ...toTurn(Item), response: decode(Item.r as Uint8Array, blobs) as string, request: decode(Item.q as Uint8Array, blobs) };
}

/** Committed turns in order, from `after` (exclusive), without their state. */
export async function listTurns(ctx: StoreContext, tenant: string, id: string, after: number, limit: number): Promise<{ turns: (TurnRecord & { response: string; request: unknown })[]; more: boolean }> {
  const pk = keys.session(tenant, id);
  const { Items = [], LastEvaluatedKey } = await call('list the turns', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
      ExpressionAttributeValues: { ':pk': pk, ':from': keys.turn(after + 1), ':to': keys.turn(99_999_999) },
      Limit: limit,
      ConsistentRead: true,
    })),
  );
  const blobs = await readBlobs(ctx, pk, Items.flatMap((i) => [...((i.rb as string[]) ?? []), ...((i.qb as string[]) ?? [])]));
  return {
    turns: Items.map((i) => ({ ...toTurn(i), response: decode(i.r as Uint8Array, blobs) as string, request: decode(i.q as Uint8Array, blobs) })),
    more: LastEvaluatedKey !== undefined,
  };
}

/** What the listing index holds of a session: its head without the state. */
export type SessionSummary = Pick<SessionHead, 'id' | 'workflowId' | 'version' | 'status' | 'turn' | 'userId' | 'createdAt' | 'updatedAt'>;

/**
 * Sessions of a workflow, newest first, from the listing index: no session state is read.
 * `userId` filters on the projected attribute.
 */
export async function listSessions(
  ctx: StoreContext,
  tenant: string,
  workflowId: string,
  options: { limit: number; cursor?: Record<string, unknown>; userId?: string; status?: string; oldestFirst?: boolean },
): Promise<{ items: SessionSummary[]; cursor: Record<string, unknown> | undefined }> {
  const nowSec = Math.floor(now(ctx) / 1000);
  const filters = ['(attribute_not_exists(#ttl) OR #ttl > :now)'];
  const values: Record<string, unknown> = { ':pk': keys.sessionList(tenant, workflowId), ':now': nowSec };
  if (options.userId !== undefined) {
    filters.push('user_id = :user');
    values[':user'] = options.userId;
  }
  if (options.status !== undefined) {
    filters.push('#status = :status');
    values[':status'] = options.status;
  }
  const items: SessionSummary[] = [];
  let cursor = options.cursor;
  // a filter can leave a page short: read on until the page is full or the index ends
  do {
    const page = await call('list sessions', () =>
      ctx.doc.send(new QueryCommand({
        TableName: ctx.table,
        IndexName: LISTING_INDEX,
        KeyConditionExpression: 'gsi1pk = :pk',
        FilterExpression: filters.join(' AND '),
        ExpressionAttributeNames: { '#ttl': 'ttl', ...(options.status !== undefined ? { '#status': 'status' } : {}) },
        ExpressionAttributeValues: values,
        ScanIndexForward: options.oldestFirst === true,
        Limit: options.limit - items.length,
        ExclusiveStartKey: cursor,
      })),
    );
    for (const i of page.Items ?? []) {
      const { id, workflowId, version, status, turn, userId, createdAt, updatedAt } = toHead(i);
      items.push({ id, workflowId, version, status, turn, userId, createdAt, updatedAt });
    }
    cursor = page.LastEvaluatedKey;
  } while (cursor && items.length < options.limit);
  return { items, cursor };
}

/** Deletes every item of the session: the head first, so readers see it gone at once. */
export async function deleteSession(ctx: StoreContext, tenant: string, id: string): Promise<void> {
  await deletePartition(ctx, keys.session(tenant, id), SESSION_HEAD_SK);
}

export async function deletePartition(ctx: StoreContext, pk: string, firstSk?: string): Promise<number> {
  let deleted = 0;
  if (firstSk) {
    await deleteKeys(ctx, [{ pk, sk: firstSk }]);
    deleted++;
  }
  const items = await queryAll(ctx, 'list the session items', { KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ProjectionExpression: 'pk, sk' });
  await deleteKeys(ctx, items.map((i) => ({ pk: i.pk as string, sk: i.sk as string })));
  return deleted + items.length;
}

/** Deletes items by key in batches of 25, retrying what DynamoDB leaves unprocessed. */
export async function deleteKeys(ctx: StoreContext, items: { pk: string; sk: string }[]): Promise<void> {
  for (let i = 0; i < items.length; i += 25) {
    let requests = items.slice(i, i + 25).map((Key) => ({ DeleteRequest: { Key } }));
    for (let attempt = 0; requests.length > 0; attempt++) {
      const out = await call('delete items', () => ctx.doc.send(new BatchWriteCommand({ RequestItems: { [ctx.table]: requests }, ...capacityParam(ctx) })));
      reportCapacity(ctx, 'delete', 'write', out.ConsumedCapacity);
      requests = (out.UnprocessedItems?.[ctx.table] ?? []) as typeof requests;
      if (requests.length > 0) await backoff(attempt);
    }
  }
}

// ---- mapping ------------------------------------------------------------------------------

function headItem(h: SessionHead): Record<string, unknown> {
  return {
    pk: keys.session(h.tenant, h.id),
    sk: SESSION_HEAD_SK,
    kind: 'session',
    id: h.id,
    tenant: h.tenant,
    workflow_id: h.workflowId,
    version: h.version,
    status: h.status,
    turn: h.turn,
    user_id: h.userId ?? undefined,
    created_at: h.createdAt,
    updated_at: h.updatedAt,
    ttl: h.expiresAt,
    gsi1pk: keys.sessionList(h.tenant, h.workflowId),
    gsi1sk: `${h.createdAt}#${h.id}`,
    ...(h.claim ? { claim_turn: h.claim.turn, claim_token: h.claim.token, claim_expires: h.claim.expiresAt } : {}),
    ...(h.claim?.async ? { claim_async: true } : {}),
  };
}

export function toHead(item: Record<string, unknown>): SessionHead {
  return {
    tenant: item.tenant as string,
    id: item.id as string,
    workflowId: item.workflow_id as string,
    version: item.version as number,
    status: item.status as string,
    turn: item.turn as number,
    userId: (item.user_id as string | undefined) ?? null,
    createdAt: item.created_at as string,
    updatedAt: item.updated_at as string,
    expiresAt: item.ttl as number,
    claim: typeof item.claim_turn === 'number'
      ? {
        turn: item.claim_turn,
        token: item.claim_token as string,
        expiresAt: item.claim_expires as number,
        ...(item.claim_async === true ? { async: true } : {}),
        ...(typeof item.claim_owner === 'string' ? { owner: item.claim_owner } : {}),
        ...(typeof item.cancel_at === 'number' ? { cancelRequested: true } : {}),
      }
      : null,
    dueAt: typeof item.due_at === 'number' ? item.due_at : null,
  };
}

function dueSortKey(dueAt: number, tenant: string, id: string): string {
  return `${String(dueAt).padStart(15, '0')}#${tenant}#${id}`;
}

/** Runs whose form timer is due at `nowMs`, oldest first, from the sparse timer index. */
export async function listDueRuns(ctx: StoreContext, nowMs: number, limit: number): Promise<{ tenant: string; id: string }[]> {
  const { Items = [] } = await call('list due timers', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      IndexName: TIMER_INDEX,
      KeyConditionExpression: 'gsi2pk = :due AND gsi2sk <= :now',
      ExpressionAttributeValues: { ':due': 'DUE', ':now': `${String(nowMs).padStart(15, '0')}#~` },
      Limit: limit,
    })),
  );
  return Items.map((i) => {
    const m = /^T#([^#]+)#S#([0-9a-f]{32})$/.exec(i.pk as string);
    return m ? { tenant: m[1] as string, id: m[2] as string } : undefined;
  }).filter((r): r is { tenant: string; id: string } => r !== undefined);
}

function toTurn(item: Record<string, unknown>): TurnRecord {
  return {
    turn: turnFromSk(item.sk as string),
    status: item.status as string,
    createdAt: item.created_at as string,
    committedBy: item.committed_by as string,
    idempotencyKey: (item.idem as string | undefined) ?? null,
  };
}

/** Why a claim was refused, from the head as it was. */
function refusal(error: unknown, seen: SessionHead, at: number): unknown {
  if (!(error instanceof ConditionFailed)) return error;
  const old = error.item;
  if (!old || isExpired(old, at)) return new NotFoundError('run');
  const head = toHead(old);
  if (head.turn > seen.turn) return new TurnConflictError(head.turn, head.status);
  return new TurnInProgressError(head.turn, head.status);
}
