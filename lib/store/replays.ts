/**
 * Replays of recorded runs against a workflow version (lib/turns/replay.ts): a job, and per page
 * of runs its progress and its results. They live in a partition of their workflow's
 * (`keys.replays`), apart from the runs they read, which they never write; every item carries
 * the replay's TTL, reads ignore expired ones, and deleting the workflow deletes the partition.
 *
 *   R#<id>#A          the job: the target version, the runs (fixed when it starts), the options
 *   R#<id>#S#<page>   a page's progress: how many of its runs are done, its summary (small)
 *   R#<id>#X#<page>   a page's results, one per run done (compressed)
 *
 * A page is written whole after each of its runs, progress and results together: a page done
 * again (a worker crashed, a message came twice) overwrites itself, so nothing counts twice.
 * Reading also covers the recorded runs' turns (request, response, call records, and of their
 * state only the outputs asked for), a page of turns at a time.
 */
import { BatchWriteCommand, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { readBlobs } from './blobs';
import { blobHashes, decode, encode, revive } from './codec';
import { backoff, call, capacityParam, ConditionFailed, isExpired, queryAll, reportCapacity, type StoreContext } from './dynamo';
import { EaselError } from '../errors';
import { keys } from './item-keys';
import { listSessions } from './session-listing';
import { deleteKeys } from './partitions';
import { rawPartsOf, toTurn, turnRecordItems, type TurnRecord } from './sessions';

export interface ReplayJob {
  tenant: string;
  workflowId: string;
  id: string;
  /** The version the runs are replayed against. */
  version: number;
  /** What a call that differs from its record does: made (`live`) or ends the run's replay (`refuse`). */
  onDiffer: 'live' | 'refuse';
  /** Runs per page (per queue message). */
  pageSize: number;
  /** The runs, in the order they are replayed (fixed when the replay starts). */
  runs: string[];
  /** What was asked for: these runs, or a sample of the workflow's runs started since a time. */
  selection: { runs: string[] } | { sample: number; since: string | null };
  /** The normalized request, hashed: a retry with the same Idempotency-Key must match it. */
  fingerprint: string;
  createdAt: string;
  /** Epoch seconds after which the replay and its results are gone. */
  expiresAt: number;
}

/** A page's progress as its worker last wrote it. */
export interface ReplayPageProgress {
  page: number;
  /** Runs of the page done. */
  done: number;
  /** Every run of the page is done. */
  complete: boolean;
  /** What the turn layer keeps of its runs for the replay's overview (small). */
  summary: unknown;
}

/** Largest compressed results of one page; a page past it is refused (the worker shortens it). */
export const MAX_PAGE_RESULTS_BYTES = 300 * 1024;

const now = (ctx: StoreContext) => (ctx.now ?? Date.now)();

/**
 * Creates the job unless one has its id; returns null when created, else the job that has the
 * id (a retry with the same Idempotency-Key, which may have expired: then it is replaced).
 */
export async function createReplay(ctx: StoreContext, job: ReplayJob): Promise<ReplayJob | null> {
  try {
    await call('create the replay', () =>
      ctx.doc.send(new PutCommand({
        TableName: ctx.table,
        Item: jobItem(job),
        // an expired job of the same id (not yet removed by DynamoDB) is replaced
        ConditionExpression: 'attribute_not_exists(pk) OR #ttl <= :now',
        ExpressionAttributeNames: { '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':now': Math.floor(now(ctx) / 1000) },
        ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        ...capacityParam(ctx),
      })).then((out) => reportCapacity(ctx, 'replay', 'write', out.ConsumedCapacity)),
    );
    return null;
  } catch (error) {
    if (!(error instanceof ConditionFailed)) throw error;
    const existing = await getReplayJob(ctx, job.tenant, job.workflowId, job.id);
    if (!existing) throw new EaselError('unavailable', 'the replay was deleted while it was being created; retry');
    return existing;
  }
}

/** The job alone (what a worker needs); null when there is none, or it expired. */
export async function getReplayJob(ctx: StoreContext, tenant: string, workflowId: string, id: string): Promise<ReplayJob | null> {
  const { Item } = await call('read the replay', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.replays(tenant, workflowId), sk: keys.replayJob(id) }, ConsistentRead: true })),
  );
  if (!Item || isExpired(Item, now(ctx))) return null;
  return toJob(Item);
}

/**
 * The job and the progress of its pages (pages not started have none), in one Query: the job
 * and the progress items sort together, before the results.
 */
export async function getReplay(ctx: StoreContext, tenant: string, workflowId: string, id: string): Promise<{ job: ReplayJob; pages: ReplayPageProgress[] } | null> {
  const items = await queryAll(ctx, 'read the replay', {
    KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
    ExpressionAttributeValues: { ':pk': keys.replays(tenant, workflowId), ':from': keys.replayJob(id), ':to': `R#${id}#S#~` },
    ConsistentRead: true,
  }, 'replay');
  const at = now(ctx);
  const jobItem = items.find((i) => i.sk === keys.replayJob(id));
  if (!jobItem || isExpired(jobItem, at)) return null;
  const pages = items
    .filter((i) => i.sk !== keys.replayJob(id) && !isExpired(i, at))
    .map((i) => ({ page: i.page as number, done: i.done as number, complete: i.complete === true, summary: i.summary ?? null }));
  return { job: toJob(jobItem), pages };
}

/**
 * Writes a page's progress and results (both whole, replacing what an earlier attempt wrote), in
 * one round trip. Results whose compressed size is over MAX_PAGE_RESULTS_BYTES are refused
 * (`payload_too_large`) before anything is written.
 */
export async function savePage(ctx: StoreContext, job: ReplayJob, page: number, data: { results: unknown[]; complete: boolean; summary: unknown }): Promise<void> {
  const pk = keys.replays(job.tenant, job.workflowId);
  const results = Buffer.from(encode(data.results, Number.POSITIVE_INFINITY).bytes);
  if (results.length > MAX_PAGE_RESULTS_BYTES) throw new EaselError('payload_too_large', `the results of replay page ${page} are too large to store (${Math.ceil(results.length / 1024)} KB)`);
  const common = { pk, kind: 'replay_page', page, ttl: job.expiresAt };
  let requests = [
    { PutRequest: { Item: { ...common, sk: keys.replayResults(job.id, page), r: results } } },
    // written after the results in the same request: progress never counts a run whose result is missing
    { PutRequest: { Item: { ...common, sk: keys.replayProgress(job.id, page), done: data.results.length, complete: data.complete, summary: JSON.parse(JSON.stringify(data.summary ?? null)) as unknown } } },
  ];
  for (let attempt = 0; requests.length > 0; attempt++) {
    const out = await call('save the replay page', () => ctx.doc.send(new BatchWriteCommand({ RequestItems: { [ctx.table]: requests }, ...capacityParam(ctx) })));
    reportCapacity(ctx, 'replay', 'write', out.ConsumedCapacity);
    requests = (out.UnprocessedItems?.[ctx.table] ?? []) as typeof requests;
    if (requests.length > 0) await backoff(attempt);
  }
}

/** A page's results as last saved; null when the page has none (not started, or expired). */
export async function readPageResults(ctx: StoreContext, job: Pick<ReplayJob, 'tenant' | 'workflowId' | 'id'>, page: number): Promise<unknown[] | null> {
  const { Item } = await call('read the replay results', () =>
    ctx.doc.send(new GetCommand({ TableName: ctx.table, Key: { pk: keys.replays(job.tenant, job.workflowId), sk: keys.replayResults(job.id, page) }, ConsistentRead: true })),
  );
  if (!Item || isExpired(Item, now(ctx)) || !(Item.r instanceof Uint8Array)) return null;
  return decode(Item.r, new Map()) as unknown[];
}

/** Deletes every replay of a workflow (its jobs, progress and results); returns how many items went. */
export async function deleteReplays(ctx: StoreContext, tenant: string, workflowId: string): Promise<number> {
  const pk = keys.replays(tenant, workflowId);
  const items = await queryAll(ctx, 'list the replays', { KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': pk }, ProjectionExpression: 'pk, sk' });
  await deleteKeys(ctx, items.map((i) => ({ pk: i.pk as string, sk: i.sk as string })));
  return items.length;
}

/**
 * Runs of a workflow started at or after `since` (all when null) that committed a turn, newest
 * first, at most `max`, from the listing index (no session is read): what a sample is drawn from.
 */
export async function listRunsSince(ctx: StoreContext, tenant: string, workflowId: string, since: string | null, max: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: Record<string, unknown> | undefined;
  do {
    const page = await listSessions(ctx, tenant, workflowId, { limit: Math.min(100, max), ...(cursor ? { cursor } : {}), ...(since === null ? {} : { createdSince: since }) });
    for (const run of page.items) if (run.turn > 0 && ids.length < max) ids.push(run.id);
    cursor = page.cursor;
  } while (cursor && ids.length < max);
  return ids;
}

/** A committed turn as a replay reads it: what was asked, what was answered, the calls it made. */
export interface RecordedTurn extends TurnRecord {
  request: unknown;
  /** The response body as stored (JSON). */
  response: string;
  calls: { records: unknown[]; dropped: number };
  /** `sys.date` as the turn set it (the second it started), when its state says. */
  date?: string;
  /**
   * Outputs the turn's state held at its end, by component and output name: those `outputsOf`
   * named (absent ones are left out).
   */
  outputs: Record<string, Record<string, unknown>>;
}

/** One output of a component, as `readRecordedTurns` is asked for it. */
export interface OutputName {
  component: string;
  output: string;
}

/**
 * Committed turns of a run in order, after `after` (exclusive), at most `limit`: their request,
 * response and calls, and of their state `sys.date` and the outputs `outputsOf` names for each
 * (told the turn's calls as stored: a long string in them is still a blob reference), reading
 * only the blobs those need: one Query and one read of blobs.
 */
export async function readRecordedTurns(
  ctx: StoreContext,
  tenant: string,
  runId: string,
  after: number,
  limit: number,
  outputsOf: (calls: RecordedTurn['calls']) => readonly OutputName[] = () => [],
): Promise<{ turns: RecordedTurn[]; more: boolean }> {
  const { pk, items, more } = await turnRecordItems(ctx, tenant, runId, after, limit, 'replay');
  const raw = items.map((i) => {
    const parts = rawPartsOf(i, ['r', 'q', 'c', 's']);
    const calls = (parts.c as RecordedTurn['calls'] | undefined) ?? { records: [], dropped: 0 };
    return { item: i, parts, outputs: pickOutputs(parts.s, outputsOf(calls)) };
  });
  const wanted = new Set<string>();
  for (const { item, outputs } of raw) {
    for (const part of ['rb', 'qb', 'cb']) for (const hash of (item[part] as string[] | undefined) ?? []) wanted.add(hash);
    blobHashes(outputs, wanted);
  }
  const blobs = await readBlobs(ctx, pk, [...wanted]);
  return {
    turns: raw.map(({ item, parts, outputs }) => {
      const date = dateOf(parts.s);
      return {
        ...toTurn(item),
        request: revive(parts.q, blobs),
        response: 'R' in parts ? JSON.stringify(revive(parts.R, blobs)) : (revive(parts.r, blobs) as string),
        calls: (revive(parts.c, blobs) as RecordedTurn['calls'] | undefined) ?? { records: [], dropped: 0 },
        outputs: revive(outputs, blobs) as RecordedTurn['outputs'],
        ...(date !== undefined ? { date } : {}),
      };
    }),
    more,
  };
}

/** The named outputs of a state as stored (blob references still in them). */
function pickOutputs(state: unknown, names: readonly OutputName[]): RecordedTurn['outputs'] {
  // null prototypes: component ids are the tenant's, and any string is an ordinary key here
  const out = Object.create(null) as RecordedTurn['outputs'];
  const nodes = isObject(state) && isObject(state.nodes) ? state.nodes : {};
  for (const { component, output } of names) {
    const node = Object.hasOwn(nodes, component) ? nodes[component] : undefined;
    const outputs = isObject(node) && isObject(node.outputs) ? node.outputs : undefined;
    if (!outputs || !Object.hasOwn(outputs, output)) continue;
    (out[component] ??= Object.create(null) as Record<string, unknown>)[output] = outputs[output];
  }
  return out;
}

/** `sys.date` from a turn's state (a short string is never a blob). */
function dateOf(state: unknown): string | undefined {
  const globals = isObject(state) && isObject(state.globals) ? state.globals : undefined;
  const date = globals?.['sys.date'];
  return typeof date === 'string' ? date : undefined;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function jobItem(job: ReplayJob): Record<string, unknown> {
  return {
    pk: keys.replays(job.tenant, job.workflowId),
    sk: keys.replayJob(job.id),
    kind: 'replay',
    tenant: job.tenant,
    workflow_id: job.workflowId,
    id: job.id,
    version: job.version,
    on_differ: job.onDiffer,
    page_size: job.pageSize,
    runs: job.runs,
    selection: 'runs' in job.selection ? { runs: job.selection.runs } : { sample: job.selection.sample, since: job.selection.since },
    fingerprint: job.fingerprint,
    created_at: job.createdAt,
    ttl: job.expiresAt,
  };
}

function toJob(item: Record<string, unknown>): ReplayJob {
  const selection = item.selection as { runs?: string[]; sample?: number; since?: string | null };
  return {
    tenant: item.tenant as string,
    workflowId: item.workflow_id as string,
    id: item.id as string,
    version: item.version as number,
    onDiffer: item.on_differ === 'refuse' ? 'refuse' : 'live',
    pageSize: item.page_size as number,
    runs: (item.runs as string[] | undefined) ?? [],
    selection: Array.isArray(selection.runs) ? { runs: selection.runs } : { sample: selection.sample ?? 0, since: selection.since ?? null },
    fingerprint: item.fingerprint as string,
    createdAt: item.created_at as string,
    expiresAt: item.ttl as number,
  };
}
