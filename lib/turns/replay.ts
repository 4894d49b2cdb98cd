/**
 * Replaying recorded runs against a workflow version: an offline evaluation of a new version on
 * real conversations. Starting one fixes its runs (those named, or a sample of the workflow's
 * runs started since a time), stores the job (lib/store/replays.ts) and queues its first page;
 * the queue worker replays the runs page by page (replay-worker.ts, each run by replay-run.ts)
 * and writes each page's progress and results; reading one sums the pages up. Nothing is written
 * into the runs replayed; the replay and its results expire after the replay TTL and go with
 * their workflow.
 *
 * With an Idempotency-Key the replay's id is derived from the key: a retry answers the replay
 * it started (its runs as they were fixed then), a key used for another request is refused.
 */
import { randomBytes } from 'node:crypto';
import { EaselError } from '../errors';
import { canonicalJson, sha256 } from '../store/codec';
import { NotFoundError } from '../store/errors';
import { createReplay, getReplay, getReplayJob, listRunsSince, readPageResults, type ReplayJob, type ReplayPageProgress } from '../store/replays';
import { getHead } from '../store/sessions';
import { resolveWorkflow } from './compiled';
import type { ReplayPageMessage } from './replay-message';
import type { OnDiffer, RunReplayResult } from './replay-run';
import type { TurnEngine } from './turn-engine';

/** Runs one replay goes through at most. */
export const MAX_REPLAY_RUNS = 1000;
/** Runs a sample is drawn from at most (the newest). */
export const MAX_SAMPLE_POOL = 10_000;
export const DEFAULT_REPLAY_PAGE_SIZE = 5;
export const MAX_REPLAY_PAGE_SIZE = 25;
/** @default how long a replay and its results are kept (EASEL_REPLAY_TTL_DAYS) */
export const DEFAULT_REPLAY_TTL_SECONDS = 7 * 86_400;

export interface StartReplay {
  tenant: string;
  workflowId: string;
  version: number;
  /** The runs to replay, or a sample of `sample` runs started since `since` (ISO time; absent: any). */
  runs: string[] | { sample: number; since?: string };
  /** @default 'live' */
  onDiffer?: OnDiffer;
  /** @default DEFAULT_REPLAY_PAGE_SIZE */
  pageSize?: number;
  /** The principal-scoped hash of an Idempotency-Key. */
  keyHash?: string;
  /** Sends a page to the queue worker. */
  enqueue: (message: ReplayPageMessage) => Promise<void>;
}

/**
 * A replay asked for what the workflow does not have: a version (`field: version`), or runs
 * (`field: runs`, `unknownRunIds`: missing, or another tenant's or workflow's, alike).
 */
export class ReplayRequestError extends EaselError {
  constructor(
    readonly field: 'version' | 'runs',
    message: string,
    readonly unknownRunIds: readonly string[] = [],
  ) {
    super('invalid_request', `${field}: ${message}`);
  }
}

/** How a page's runs went, kept with its progress for the replay's overview. */
export interface PageSummary {
  outcomes: Record<RunReplayResult['outcome'], number>;
  calls: RunReplayResult['calls'];
  /** The runs that did not behave the same, with the components that behaved otherwise. */
  runs: { run_id: string; outcome: RunReplayResult['outcome']; components: string[] }[];
}

/** A replay as the API shows it: its request, its progress and what it found so far. */
export interface ReplayView {
  replay_id: string;
  workflow_id: string;
  version: number;
  on_differ: OnDiffer;
  /** `queued`: no page started yet; `running`; `done`: every run replayed. */
  status: 'queued' | 'running' | 'done';
  runs_total: number;
  runs_done: number;
  pages_total: number;
  pages_done: number;
  page_size: number;
  selection: { runs: string[] } | { sample: number; since: string | null };
  created_at: string;
  expires_at: string;
  summary: PageSummary;
}

export async function startReplay(engine: TurnEngine, request: StartReplay): Promise<{ view: ReplayView; existing: boolean }> {
  await resolveWorkflow(engine, request.tenant, request.workflowId, request.version).catch((error: unknown) => {
    if (error instanceof NotFoundError && error.what === 'workflow version') throw new ReplayRequestError('version', `the workflow has no version ${request.version}`);
    throw error;
  });
  const onDiffer = request.onDiffer ?? 'live';
  const pageSize = request.pageSize ?? DEFAULT_REPLAY_PAGE_SIZE;
  const selection: ReplayJob['selection'] = Array.isArray(request.runs)
    ? { runs: [...new Set(request.runs)] }
    : { sample: request.runs.sample, since: request.runs.since === undefined ? null : new Date(request.runs.since).toISOString() };
  const fingerprint = sha256(canonicalJson({ workflow_id: request.workflowId, version: request.version, selection, on_differ: onDiffer, page_size: pageSize }));
  const id = request.keyHash ? sha256(`easel-replay:${request.keyHash}`).slice(0, 32) : randomBytes(16).toString('hex');
  if (request.keyHash) {
    const known = await getReplayJob(engine.store, request.tenant, request.workflowId, id);
    if (known) return { view: await retried(engine, request, known, fingerprint), existing: true };
  }

  const runs = 'runs' in selection ? await checkedRuns(engine, request.tenant, request.workflowId, selection.runs) : await sampled(engine, request, selection);
  const at = now(engine);
  const job: ReplayJob = {
    tenant: request.tenant,
    workflowId: request.workflowId,
    id,
    version: request.version,
    onDiffer,
    pageSize,
    runs,
    selection,
    fingerprint,
    createdAt: new Date(at).toISOString(),
    expiresAt: Math.floor(at / 1000) + (engine.replayTtlSeconds ?? DEFAULT_REPLAY_TTL_SECONDS),
  };
  const raced = await createReplay(engine.store, job);
  if (raced) return { view: await retried(engine, request, raced, fingerprint), existing: true };
  if (runs.length > 0) await request.enqueue(pageMessage(job, 0));
  return { view: viewOf(job, []), existing: false };
}

/**
 * A retry with the key of a replay that exists: the same request gets it (and its first page is
 * queued again if no page has started: the first attempt may have failed before queuing it).
 */
async function retried(engine: TurnEngine, request: StartReplay, job: ReplayJob, fingerprint: string): Promise<ReplayView> {
  if (job.fingerprint !== fingerprint) throw new EaselError('idempotency_mismatch', 'this Idempotency-Key was used for another replay');
  const read = await getReplay(engine.store, job.tenant, job.workflowId, job.id);
  const pages = read?.pages ?? [];
  if (pages.length === 0 && job.runs.length > 0) await request.enqueue(pageMessage(job, 0));
  return viewOf(job, pages);
}

/** The replay `id` of a workflow with its progress; NotFoundError when there is none (or it expired). */
export async function readReplay(engine: TurnEngine, tenant: string, workflowId: string, id: string): Promise<ReplayView> {
  const read = await getReplay(engine.store, tenant, workflowId, id);
  if (!read) throw new NotFoundError('replay');
  return viewOf(read.job, read.pages);
}

/** The results of one page of a replay (the runs of it done so far), and the next page's number. */
export async function readReplayResults(engine: TurnEngine, tenant: string, workflowId: string, id: string, page: number): Promise<{ items: RunReplayResult[]; next: number | null }> {
  const job = await getReplayJob(engine.store, tenant, workflowId, id);
  if (!job) throw new NotFoundError('replay');
  const pages = pagesOf(job);
  if (page >= pages) return { items: [], next: null };
  const items = ((await readPageResults(engine.store, job, page)) ?? []) as RunReplayResult[];
  return { items, next: page + 1 < pages ? page + 1 : null };
}

export function pageMessage(job: Pick<ReplayJob, 'tenant' | 'workflowId' | 'id'>, page: number): ReplayPageMessage {
  return { tenant: job.tenant, workflow_id: job.workflowId, replay: { id: job.id, page } };
}

export function pagesOf(job: Pick<ReplayJob, 'runs' | 'pageSize'>): number {
  return Math.ceil(job.runs.length / job.pageSize);
}

/** A summary of no run yet. */
export function emptySummary(): PageSummary {
  return { outcomes: { same: 0, diverged: 0, refused: 0, skipped: 0, error: 0 }, calls: { recorded: 0, answered: 0, live: 0 }, runs: [] };
}

/** What a page's results add up to. */
export function summarize(results: readonly RunReplayResult[]): PageSummary {
  const summary = emptySummary();
  for (const r of results) {
    summary.outcomes[r.outcome]++;
    summary.calls.recorded += r.calls.recorded;
    summary.calls.answered += r.calls.answered;
    summary.calls.live += r.calls.live;
    if (r.outcome !== 'same') summary.runs.push({ run_id: r.run_id, outcome: r.outcome, components: [...new Set(r.components.map((c) => c.component_id))] });
  }
  return summary;
}

function viewOf(job: ReplayJob, pages: readonly ReplayPageProgress[]): ReplayView {
  const total = pagesOf(job);
  const summary = emptySummary();
  let done = 0;
  let complete = 0;
  for (const p of [...pages].sort((a, b) => a.page - b.page)) {
    done += p.done;
    if (p.complete) complete++;
    const s = p.summary as PageSummary | null;
    if (!s) continue;
    for (const [k, n] of Object.entries(s.outcomes)) summary.outcomes[k as RunReplayResult['outcome']] += n;
    summary.calls.recorded += s.calls.recorded;
    summary.calls.answered += s.calls.answered;
    summary.calls.live += s.calls.live;
    summary.runs.push(...s.runs);
  }
  return {
    replay_id: job.id,
    workflow_id: job.workflowId,
    version: job.version,
    on_differ: job.onDiffer,
    status: complete >= total ? 'done' : pages.length === 0 ? 'queued' : 'running',
    runs_total: job.runs.length,
    runs_done: done,
    pages_total: total,
    pages_done: complete,
    page_size: job.pageSize,
    selection: job.selection,
    created_at: job.createdAt,
    expires_at: new Date(job.expiresAt * 1000).toISOString(),
    summary,
  };
}

/** The runs named, each once, all of them runs of the workflow; ReplayRequestError naming those that are not. */
async function checkedRuns(engine: TurnEngine, tenant: string, workflowId: string, ids: readonly string[]): Promise<string[]> {
  const unknown: string[] = [];
  for (let i = 0; i < ids.length; i += 25) {
    await Promise.all(ids.slice(i, i + 25).map(async (id) => {
      try {
        const head = await getHead(engine.store, tenant, id);
        if (head.workflowId !== workflowId) unknown.push(id);
      } catch (error) {
        if (!(error instanceof NotFoundError)) throw error;
        unknown.push(id);
      }
    }));
  }
  if (unknown.length > 0) throw new ReplayRequestError('runs', `${unknown.length} of the runs named are not runs of this workflow`, ids.filter((id) => unknown.includes(id)));
  return [...ids];
}

/** `sample` runs drawn at random from those started since `since` (all of them when fewer). */
async function sampled(engine: TurnEngine, request: StartReplay, selection: { sample: number; since: string | null }): Promise<string[]> {
  const pool = await listRunsSince(engine.store, request.tenant, request.workflowId, selection.since, MAX_SAMPLE_POOL);
  // a partial Fisher-Yates shuffle: the first `sample` places are the sample
  for (let i = 0; i < Math.min(selection.sample, pool.length); i++) {
    const j = i + Math.floor(Math.random() * (pool.length - i));
    [pool[i], pool[j]] = [pool[j] as string, pool[i] as string];
  }
  return pool.slice(0, selection.sample);
}

const now = (engine: TurnEngine) => (engine.clock ?? Date.now)();
