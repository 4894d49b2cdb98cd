/**
 * Migrating paused runs onto another version of their workflow
 * (`POST /workflows/v1/workflows/{id}/versions/{n}/migrate`).
 *
 * The migration of one run is a turn, turn n + 1 of the run: it reads the run, maps its state
 * onto version n (migrate-state.ts), asks its pending form again as version n has it (running
 * nothing), and commits through the run's next slot like a turn that claimed nothing — so an
 * answer arriving at the same moment and the migration race for one slot and exactly one wins,
 * and a migration never lands on a run that moved on. The same commit re-pins the run
 * (lib/store/migrations.ts). The run stays `waiting_for_input` at the same form; its turn record
 * says what moved it (request `command: "migrate"`, `migration: {from_version, to_version}`,
 * the actor) and its response what was kept and dropped (`migration`). Per run, all or nothing.
 *
 * A request names its runs or asks for every paused run of the workflow, a page at a time (the
 * route bounds a page: 25 runs, then a cursor): each run is its own decision (migrated, refused
 * with the reason, skipped). It runs within the request rather than on the queue: a run costs
 * one read and one transaction, a page of them fits well inside one invocation, and a dry run
 * has to answer with its plan anyway. A dry run reads only.
 *
 * With an Idempotency-Key the answer is kept a day and a retry gets it again. A run whose commit
 * the store failed is refused `unavailable` (nothing of it committed) and the answer is not kept;
 * a retry after such a failure, or after one that failed the whole request (503), recognises the
 * runs it had moved by the key their migration turn carries, and reports them as migrated.
 */
import { randomBytes } from 'node:crypto';
import { Canvas, type CanvasEvent, TransientError, type Workflow } from '../canvas';
import { readState } from '../canvas/state';
import { EaselError, type ErrorCode } from '../errors';
import { canonicalJson, sha256 } from '../store/codec';
import { NotFoundError, TurnConflictError, TurnInProgressError } from '../store/errors';
import { commitMigration, getMigrationAnswer, putMigrationAnswer } from '../store/migrations';
import { listSessions } from '../store/session-listing';
import { getTurn, loadSession } from '../store/sessions';
import type { Actor } from './actors';
import { canvasOptions, compiled, resolveWorkflow } from './compiled';
import { mapState, MigrationRefusedError, type StateMapping } from './migrate-state';
import { buildResponse, type NextInputHint, type TurnResponse } from './response';
import { ttlOf, type TurnEngine } from './turn-engine';

/** Runs migrated at once within a request. */
const CONCURRENCY = 4;

export interface MigrateRequest {
  tenant: string;
  workflowId: string;
  /** The version the runs move onto. */
  toVersion: number;
  /** The runs named, or a page of the workflow's paused runs from `cursor`. */
  target: { runs: string[] } | { allPaused: { limit: number; cursor?: Record<string, unknown> } };
  dryRun: boolean;
  actor?: Actor;
  /** The principal-scoped hash of an Idempotency-Key. */
  keyHash?: string;
}

/** What a migration did, or would do, to a run. */
export interface MigrationReport {
  from_version: number;
  to_version: number;
  kept: string[];
  dropped: StateMapping['dropped'];
  fields_added: StateMapping['fields_added'];
  variables_added: string[];
}

export type RunOutcome =
  | {
    run_id: string;
    /** `would_migrate`: a dry run's plan. */
    outcome: 'migrated' | 'would_migrate';
    /** The migration's turn (for a dry run: the turn it would be). */
    turn_number: number;
    migration: MigrationReport;
    next_input_hint: NextInputHint | null;
  }
  | { run_id: string; outcome: 'refused'; code: ErrorCode; reason: string; from_version: number | null; component_id?: string; field?: string }
  | { run_id: string; outcome: 'skipped'; reason: string; from_version: number };

export interface MigrateResult {
  workflow_id: string;
  version: number;
  dry_run: boolean;
  items: RunOutcome[];
  /** Where the next page of paused runs starts (all_paused); absent at the end. */
  next: Record<string, unknown> | undefined;
}

export interface MigrateAnswer {
  /** The response body, byte for byte what a retry with the same key gets. */
  body: string;
  replayed: boolean;
}

/**
 * Migrates the runs a request names (or a page of the paused ones) onto `toVersion`.
 * `render` makes the response body from the result (the HTTP layer's shape and cursor).
 */
export async function migrateRuns(engine: TurnEngine, request: MigrateRequest, render: (result: MigrateResult) => string): Promise<MigrateAnswer> {
  const fingerprint = sha256(canonicalJson({
    workflow_id: request.workflowId,
    version: request.toVersion,
    target: request.target,
    dry_run: request.dryRun,
  }));
  if (request.keyHash) {
    const known = await getMigrationAnswer(engine.store, request.tenant, request.keyHash);
    if (known) return replayOf(known, fingerprint);
  }
  const { workflow: to } = await resolveWorkflow(engine, request.tenant, request.workflowId, request.toVersion);
  let runs: { id: string; version?: number }[];
  let next: Record<string, unknown> | undefined;
  if ('runs' in request.target) runs = request.target.runs.map((id) => ({ id }));
  else {
    const page = await listSessions(engine.store, request.tenant, request.workflowId, { ...request.target.allPaused, status: 'waiting_for_input' });
    runs = page.items.map((s) => ({ id: s.id, version: s.version }));
    next = page.cursor;
  }
  const items = await inPool(runs, CONCURRENCY, (run) =>
    // the listing knows a run is there already; a keyed request still reads it, to recognise its own earlier move
    run.version === request.toVersion && !request.keyHash
      ? Promise.resolve<RunOutcome>({ run_id: run.id, outcome: 'skipped', reason: `already on version ${request.toVersion}`, from_version: request.toVersion })
      : migrateOne(engine, request, run.id, to),
  );
  const body = render({ workflow_id: request.workflowId, version: request.toVersion, dry_run: request.dryRun, items, next });
  // an answer with a run the store failed for is not kept: a retry with the key moves that run
  if (!request.keyHash || request.dryRun || items.some((i) => i.outcome === 'refused' && i.code === 'unavailable')) return { body, replayed: false };
  const kept = await putMigrationAnswer(engine.store, request.tenant, request.keyHash, { fingerprint, body });
  return kept.body === body ? { body, replayed: false } : replayOf(kept, fingerprint);
}

function replayOf(known: { fingerprint: string; body: string }, fingerprint: string): MigrateAnswer {
  if (known.fingerprint !== fingerprint) throw new EaselError('idempotency_mismatch', 'this Idempotency-Key was used with a different request');
  return { body: known.body, replayed: true };
}

/** The key a run's migration turn carries: a retry of the same request recognises it. */
function runKeyOf(keyHash: string, runId: string): string {
  return sha256(`easel-migrate:${keyHash}:${runId}`).slice(0, 40);
}

/** One run: refused, skipped, planned (dry run) or migrated — all or nothing. */
async function migrateOne(engine: TurnEngine, request: MigrateRequest, runId: string, to: Workflow): Promise<RunOutcome> {
  const refused = (code: ErrorCode, reason: string, fromVersion: number | null, extra: { component_id?: string; field?: string } = {}): RunOutcome => ({ run_id: runId, outcome: 'refused', code, reason, from_version: fromVersion, ...extra });
  const n = request.toVersion;
  let loaded;
  try {
    loaded = await loadSession(engine.store, request.tenant, runId, 0);
  } catch (error) {
    if (error instanceof NotFoundError) return refused('not_found', 'no such run of this workflow', null);
    throw error;
  }
  const { head } = loaded;
  // another workflow's run reads exactly like a missing one
  if (head.workflowId !== request.workflowId) return refused('not_found', 'no such run of this workflow', null);
  const runKey = request.keyHash ? runKeyOf(request.keyHash, runId) : null;
  if (head.version === n) {
    if (runKey && loaded.latest?.keyHash === runKey) return recovered(engine, request.tenant, runId, loaded.latest.turn);
    return { run_id: runId, outcome: 'skipped', reason: `already on version ${n}`, from_version: n };
  }
  const at = (engine.clock ?? Date.now)();
  if (head.claim && head.claim.expiresAt > at) return refused('turn_in_progress', `turn ${head.turn + 1} of the run is in progress; nothing was migrated`, head.version);
  if (!loaded.latest || head.status !== 'waiting_for_input') return refused('not_waiting_for_input', `the run is ${head.status}, not waiting for input`, head.version);

  const from = await compiled(engine, request.tenant, head.workflowId, head.version);
  let mapped;
  try {
    mapped = mapState(readState(loaded.latest.state), from, to, n);
  } catch (error) {
    if (!(error instanceof MigrationRefusedError)) throw error;
    return refused('migration_refused', error.message, head.version, { ...(error.componentId ? { component_id: error.componentId } : {}), ...(error.field ? { field: error.field } : {}) });
  }
  const canvas = Canvas.restore(to, { ...mapped.state, history: [] }, canvasOptions(engine, head.id, head.tenant, head.dialect));
  const events: CanvasEvent[] = [];
  for await (const event of canvas.reask()) events.push(event);
  const state = canvas.serialize();
  const turn = head.turn + 1;
  const migration: MigrationReport = { from_version: head.version, to_version: n, ...mapped.mapping };
  const response: TurnResponse & { migration: MigrationReport } = {
    ...buildResponse({
      runId: head.id,
      workflowId: head.workflowId,
      version: n,
      status: state.status,
      turn,
      terminal: false,
      waitingFor: state.prompt?.component_ids ?? [],
      timerArmed: state.prompt?.due_at !== undefined,
      events,
      usage: canvas.lastTurnUsage,
      createdAt: new Date(at).toISOString(),
    }),
    migration,
  };
  const planned = { run_id: runId, turn_number: turn, migration, next_input_hint: response.next_input_hint };
  if (request.dryRun) return { ...planned, outcome: 'would_migrate' };
  try {
    await commitMigration(engine.store, {
      head,
      turn,
      token: randomBytes(16).toString('hex'),
      toVersion: n,
      status: state.status,
      payload: {
        state: { ...state, history: [] },
        request: {
          workflow_id: head.workflowId,
          run_id: head.id,
          turn_number: head.turn,
          version: n,
          command: 'migrate',
          run_input: {},
          migration: { from_version: head.version, to_version: n },
          ...(request.actor ? { actor: request.actor } : {}),
        },
        response: JSON.stringify(response),
        history: [],
      },
      keyHash: runKey,
      fingerprint: null,
      ttlSeconds: ttlOf(engine),
      dueAt: state.prompt?.due_at ?? null,
      storedBlobs: loaded.storedBlobs,
    });
  } catch (error) {
    // nothing of this run was committed; the others' decisions stand (a retry moves this one)
    if (error instanceof TransientError) return refused('unavailable', `the store failed (${error.message}); nothing was migrated: retry`, head.version);
    if (error instanceof TurnConflictError) return refused('turn_conflict', `the run moved on (turn ${error.currentTurn} was committed meanwhile); nothing was migrated`, head.version);
    if (error instanceof TurnInProgressError) return refused('turn_in_progress', `turn ${turn} of the run is in progress; nothing was migrated`, head.version);
    if (error instanceof NotFoundError) return refused('not_found', 'no such run of this workflow', null);
    throw error;
  }
  return { ...planned, outcome: 'migrated' };
}

/** A run this request's key had moved already (an earlier attempt): its migration as the turn record says. */
async function recovered(engine: TurnEngine, tenant: string, runId: string, turn: number): Promise<RunOutcome> {
  const record = await getTurn(engine.store, tenant, runId, turn);
  const response = JSON.parse(record?.response ?? '{}') as Partial<TurnResponse> & { migration?: MigrationReport };
  if (!response.migration) throw new EaselError('invalid_state', `turn ${turn} of run ${runId} carries this request's key but is no migration`);
  return { run_id: runId, outcome: 'migrated', turn_number: turn, migration: response.migration, next_input_hint: response.next_input_hint ?? null };
}

/** Maps `items` through `work`, `width` at a time, answers in the order of `items`. */
async function inPool<T, R>(items: readonly T[], width: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}
