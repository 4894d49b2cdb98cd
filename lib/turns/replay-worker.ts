/**
 * The queue worker's side of a replay (lib/turns/replay.ts): one message is one page of runs.
 * The worker replays the page's runs one after the other (replay-run.ts) and saves the page —
 * its progress and its results — after each, so that a delivery after a crash goes on after the
 * last run saved and a page done twice overwrites itself: nothing is counted twice. A page done
 * queues the next; near the end of its invocation (`stopBy`) the worker queues its own page
 * again instead of starting another run. Without a queue to continue on, one delivery does every
 * page in turn.
 *
 * Outcomes: `done` (the page is complete), `continued` (queued again to go on), `retry` (a
 * transient failure, or the worker is stopping: the message comes back, and the page goes on
 * from its last saved run), `failed` (an invalid message, a replay that is gone: dropped).
 */
import { EaselError } from '../errors';
import { NotFoundError } from '../store/errors';
import { getReplayJob, readPageResults, type ReplayJob, savePage } from '../store/replays';
import { compiledVersion } from './compiled';
import { tracked, turnSignal } from './lifecycle';
import { bounded } from './replay-compare';
import { ReplayPageMessage } from './replay-message';
import { pageMessage, pagesOf, summarize } from './replay';
import { replayRun, type RunReplayResult } from './replay-run';
import type { TurnEngine } from './turn-engine';

export type ReplayOutcome =
  | { kind: 'done'; replayId: string; page: number; runs: number }
  | { kind: 'continued'; replayId: string; page: number; runs: number }
  | { kind: 'retry'; reason: string }
  | { kind: 'failed'; code: string; reason: string };

export interface ReplayWorkerDeps {
  engine: TurnEngine;
  /** Queues a page (the next one, or this one again); absent: this delivery does every page. */
  requeue?: (message: ReplayPageMessage) => Promise<void>;
  log?: (message: string, fields: Record<string, unknown>) => void;
}

/** Largest JSON of one run's result in a page; a larger one keeps its counts and drops its details. */
const MAX_RESULT_BYTES = 32 * 1024;

/** One page message: replay its runs and report where it went. Never throws. */
export async function processReplayPage(deps: ReplayWorkerDeps, body: unknown, delivery: { stopBy?: number } = {}): Promise<ReplayOutcome> {
  const parsed = ReplayPageMessage.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return report(deps, { kind: 'failed', code: 'invalid_request', reason: `${issue?.path.join('.') || 'message'}: ${issue?.message}` });
  }
  const message = parsed.data;
  const signal = turnSignal(deps.engine.lifecycle, undefined);
  try {
    return report(deps, await tracked(deps.engine.lifecycle, runPages(deps, message, delivery, signal)));
  } catch (error) {
    if (error instanceof EaselError && error.code !== 'unavailable') return report(deps, { kind: 'failed', code: error.code, reason: error.message });
    return report(deps, { kind: 'retry', reason: error instanceof Error ? error.message : String(error) });
  }
}

async function runPages(deps: ReplayWorkerDeps, message: ReplayPageMessage, delivery: { stopBy?: number }, signal: AbortSignal | undefined): Promise<ReplayOutcome> {
  const { engine } = deps;
  const job = await getReplayJob(engine.store, message.tenant, message.workflow_id, message.replay.id);
  if (!job) throw new NotFoundError('replay');
  const workflow = await compiledVersion(engine, job.tenant, job.workflowId, job.version);
  const pages = pagesOf(job);
  let runs = 0;
  for (let page = message.replay.page; page < pages; page++) {
    const runIds = job.runs.slice(page * job.pageSize, (page + 1) * job.pageSize);
    const results = ((await readPageResults(engine.store, job, page)) ?? []) as RunReplayResult[];
    for (let i = results.length; i < runIds.length; i++) {
      if (signal?.aborted) throw new EaselError('unavailable', 'the worker is stopping; the page goes on from its last run');
      // every delivery replays at least one run, so that a page always moves on
      if (runs > 0 && deps.requeue && delivery.stopBy !== undefined && now(engine) >= delivery.stopBy) {
        await deps.requeue(pageMessage(job, page));
        return { kind: 'continued', replayId: job.id, page, runs };
      }
      const result = await replayRun(engine, { tenant: job.tenant, workflowId: job.workflowId, runId: runIds[i] as string, workflow, onDiffer: job.onDiffer, ...(signal ? { signal } : {}) });
      results.push(fitted(result));
      runs++;
      await save(engine, job, page, results, results.length === runIds.length);
    }
    if (page + 1 >= pages) return { kind: 'done', replayId: job.id, page, runs };
    if (deps.requeue) {
      await deps.requeue(pageMessage(job, page + 1));
      return { kind: 'done', replayId: job.id, page, runs };
    }
  }
  return { kind: 'done', replayId: job.id, page: message.replay.page, runs };
}

/** Saves a page; one whose results are too large to store keeps each run's outcome and counts only. */
async function save(engine: TurnEngine, job: ReplayJob, page: number, results: RunReplayResult[], complete: boolean): Promise<void> {
  try {
    await savePage(engine.store, job, page, { results, complete, summary: summarize(results) });
  } catch (error) {
    if (!(error instanceof EaselError) || error.code !== 'payload_too_large') throw error;
    const bare = results.map((r) => ({ ...r, first_divergence: r.first_divergence ? { ...r.first_divergence, recorded: null, replayed: null, outputs: null } : null, components: r.components.map((c) => ({ component_id: c.component_id, turn: c.turn, change: c.change })), live_calls: [] }));
    results.splice(0, results.length, ...bare);
    await savePage(engine.store, job, page, { results, complete, summary: summarize(results) });
  }
}

/** A run's result that fits a page: past MAX_RESULT_BYTES its details are cut down. */
function fitted(result: RunReplayResult): RunReplayResult {
  if (JSON.stringify(result).length <= MAX_RESULT_BYTES) return result;
  return {
    ...result,
    first_divergence: result.first_divergence ? { ...result.first_divergence, recorded: null, replayed: null, outputs: null } : null,
    components: result.components.map((c) => ({ component_id: c.component_id, turn: c.turn, change: c.change, ...(c.recorded !== undefined ? { recorded: bounded(c.recorded, 256) } : {}), ...(c.replayed !== undefined ? { replayed: bounded(c.replayed, 256) } : {}) })).slice(0, 50),
    live_calls: result.live_calls.slice(0, 20),
  };
}

function report(deps: ReplayWorkerDeps, outcome: ReplayOutcome): ReplayOutcome {
  deps.log?.(`replay page ${outcome.kind}`, { ...outcome });
  return outcome;
}

const now = (engine: TurnEngine) => (engine.clock ?? Date.now)();
