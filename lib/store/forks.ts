/**
 * Forks: a new session that starts from another's turn k. Its first record, `T#<k>` of its own
 * partition, is the parent's turn k (state, request, response, call records) with the
 * conversation of the `historyTurns` turns up to k folded into its history, and its long
 * strings written again as blobs of its own partition: loading the fork reads its partition
 * only, and deleting the parent takes nothing of it. Writing it is the blobs and one
 * transaction (head + record), whatever the parent's length; reading the parent is one Query of
 * at most `historyTurns` + 1 records and their blobs.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { readBlobs } from './blobs';
import { call, capacityParam, reportCapacity, type StoreContext } from './dynamo';
import { NotFoundError } from './errors';
import { keys } from './item-keys';
import { commitTurn, getHead, partsOf, sessionExpiry, type SessionHead, toTurn, type TurnPayload, type TurnRecord } from './sessions';
import { isRecordItem } from './turn-slot';

export interface ForkSource {
  head: SessionHead;
  record: TurnRecord;
  payload: TurnPayload;
}

/** The parent's turn `turn` as a fork's first record holds it. NotFoundError for a missing run or turn. */
export async function readForkSource(ctx: StoreContext, tenant: string, runId: string, turn: number, historyTurns: number): Promise<ForkSource> {
  const head = await getHead(ctx, tenant, runId);
  const pk = keys.session(tenant, runId);
  const from = Math.max(1, turn - historyTurns);
  const { Items = [] } = await call('read the turns to fork', () =>
    ctx.doc.send(new QueryCommand({
      TableName: ctx.table,
      KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
      ExpressionAttributeValues: { ':pk': pk, ':from': keys.turn(from), ':to': keys.turn(turn) },
      ConsistentRead: true,
      ...capacityParam(ctx),
    })).then((out) => {
      reportCapacity(ctx, 'fork', 'read', out.ConsumedCapacity);
      return out;
    }),
  );
  const turns = Items.filter(isRecordItem);
  const last = turns.at(-1);
  if (!last || toTurn(last).turn !== turn) throw new NotFoundError('turn');
  const hashes = new Set<string>();
  for (const t of turns) for (const h of (t.hb as string[] | undefined) ?? []) hashes.add(h);
  for (const part of ['sb', 'qb', 'rb', 'cb']) for (const h of (last[part] as string[] | undefined) ?? []) hashes.add(h);
  const blobs = await readBlobs(ctx, pk, [...hashes]);
  const history = turns.flatMap((t) => (partsOf(t, ['h'], blobs).h as unknown[] | undefined) ?? []);
  const parts = partsOf(last, ['s', 'q', 'r', 'c'], blobs);
  return {
    head,
    record: toTurn(last),
    payload: {
      state: parts.s,
      history,
      request: parts.q,
      response: parts.r as string,
      ...(parts.c ? { calls: parts.c as NonNullable<TurnPayload['calls']> } : {}),
    },
  };
}

/**
 * Writes the fork `forkId` of `source`: its head at the forked turn, linked to its parent, and
 * its first record. RunExistsError when the id is taken (a retried fork of the same key).
 */
export async function writeFork(ctx: StoreContext, source: ForkSource, fork: { id: string; userId: string | null; ttlSeconds: number; dueAt: number | null; now: number }): Promise<SessionHead> {
  const at = new Date(fork.now).toISOString();
  const { head: parent, record } = source;
  const head: SessionHead = {
    tenant: parent.tenant,
    id: fork.id,
    workflowId: parent.workflowId,
    // the version turn k ran on: a run migrated since (lib/store/migrations.ts) is pinned to another now
    version: versionOf(source.payload.response) ?? parent.version,
    status: record.status,
    turn: record.turn - 1,
    userId: fork.userId,
    ...(parent.dialect ? { dialect: parent.dialect } : {}),
    ...(parent.source ? { source: parent.source } : {}),
    createdAt: at,
    updatedAt: at,
    expiresAt: sessionExpiry(fork.now, fork.ttlSeconds),
    claim: null,
    forkedFrom: { runId: parent.id, turn: record.turn },
  };
  await commitTurn(ctx, {
    head,
    turn: record.turn,
    token: `fork:${parent.id}:${record.turn}`,
    claim: null,
    status: record.status,
    payload: source.payload,
    keyHash: null,
    fingerprint: null,
    create: true,
    ttlSeconds: fork.ttlSeconds,
    dueAt: fork.dueAt,
    storedBlobs: new Set(),
  });
  return { ...head, turn: record.turn };
}

/** The version a turn ran on, as its response says. */
function versionOf(response: string): number | undefined {
  try {
    const version = (JSON.parse(response) as { version?: unknown }).version;
    return Number.isInteger(version) ? (version as number) : undefined;
  } catch {
    return undefined;
  }
}
