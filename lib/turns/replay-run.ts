/**
 * One recorded run replayed against another version, in memory: each recorded turn's input is
 * fed in order to a fresh Canvas of that version, restored from the state the replay reached
 * after the turn before (as a real turn restores it: the same history window, the seed of the
 * run's id, the clock at the recorded turn's time). The turn's calls are answered from the
 * recorded turn's call records where the new version makes the same call — same component,
 * container path, kind and request hash (lib/canvas/calls.ts) — and made live otherwise, or,
 * with `on_differ: "refuse"`, refused: the replay of the run stops there. Nothing is written:
 * the run's records are only read.
 *
 * The result says whether the run behaved the same, where it first diverged (the turn, the
 * event, the component, its outputs), every component that behaved otherwise, and which calls
 * went live and why: `differs` (the recorded turn has calls of that component, none with this
 * request), `unrecorded` (it has none of that component: a new path or component), or
 * `not_replayable` (a record with this request exists but does not keep what answering needs:
 * a tool's references kept by id, a retrieval whose chunks the turn's state no longer holds
 * as the record lists them, or a failure, which is tried again).
 *
 * A retrieval's record keeps its chunks' ids and scores, not their text: the chunks come from
 * the Retrieval's `json` output in the recorded turn's state, read with the turn, and answer
 * the call only when they are exactly the ones the record lists (lib/components/recorded-retrieval.ts).
 */
import { Canvas, CallReplay, type CallRecord, type CanvasEvent, type CompletedCall, type CanvasState, EaselError, type RunInput, TransientError, type Workflow } from '../canvas';
import { agentToolRegistry } from '../components/agent';
import { builtinTools } from '../tools/registry';
import { NotFoundError } from '../store/errors';
import type { RetrievalReplay } from '../components/recorded-retrieval';
import { type OutputName, readRecordedTurns, type RecordedTurn } from '../store/replays';
import { getHead } from '../store/sessions';
import { canvasOptions, withHistory } from './compiled';
import { bounded, compareTurn, type ComponentChange, type EventDifference } from './replay-compare';
import { ReplayRefusedError, refusingServices } from './replay-services';
import { mergeMessageDeltas, type TurnResponse } from './response';
import type { TurnEngine } from './turn-engine';

/** Recorded turns read per round trip. */
const TURNS_PER_READ = 20;
/** Turns of one run a replay goes through at most. */
export const MAX_REPLAY_TURNS = 1000;
/** Live calls a run's result lists at most (all are counted). */
const MAX_LISTED_CALLS = 50;

export type OnDiffer = 'live' | 'refuse';

export interface LiveCall {
  turn: number;
  component_id: string;
  kind: CallRecord['kind'];
  name?: string;
  ordinal: number;
  path: string[];
  reason: 'differs' | 'unrecorded' | 'not_replayable';
}

export interface RunReplayResult {
  run_id: string;
  /** The version the run was recorded on. */
  recorded_version: number | null;
  outcome: 'same' | 'diverged' | 'refused' | 'skipped' | 'error';
  /** Committed turns of the recorded run. */
  turns: number;
  /** Turns replayed to their end (not one stopped, refused or failed). */
  turns_replayed: number;
  /** The first turn and event that differ, and the first component that behaved otherwise there. */
  first_divergence: (EventDifference & { turn: number; component_id: string | null; outputs: { recorded: unknown; replayed: unknown } | null }) | null;
  /** Every component that behaved otherwise, by turn. */
  components: ComponentChange[];
  /** Calls made live (at most MAX_LISTED_CALLS listed; `calls.live` counts them all). */
  live_calls: LiveCall[];
  calls: {
    /** Calls the recorded turns made (not those they answered from records themselves). */
    recorded: number;
    /** Calls of the replay answered from the recorded turns' records. */
    answered: number;
    live: number;
  };
  /** `refuse`: the call that would have gone live, where the replay of the run stopped. */
  refused?: { turn: number; component_id: string | null; kind: string; name?: string };
  /**
   * Recorded turns passed over because their input never reached the run's state: a migration
   * onto another version, a double-text rolled back or rejected (docs/double-texting.md).
   */
  turns_passed_over?: number[];
  /** The new version refused a recorded turn's input (a form it no longer asks, a run it ends earlier). */
  stopped?: { turn: number; code: string; message: string };
  /** Why a run was skipped, or failed to replay. */
  reason?: { code: string; message: string };
}

export interface ReplayRunRequest {
  tenant: string;
  workflowId: string;
  runId: string;
  /** The version replayed against, compiled. */
  workflow: Workflow;
  onDiffer: OnDiffer;
  signal?: AbortSignal;
}

/** Replays one run. Errors of the store (reading the run) are thrown; everything else is in the result. */
export async function replayRun(engine: TurnEngine, request: ReplayRunRequest): Promise<RunReplayResult> {
  const result: RunReplayResult = {
    run_id: request.runId,
    recorded_version: null,
    outcome: 'same',
    turns: 0,
    turns_replayed: 0,
    first_divergence: null,
    components: [],
    live_calls: [],
    calls: { recorded: 0, answered: 0, live: 0 },
  };
  let head;
  try {
    head = await getHead(engine.store, request.tenant, request.runId);
  } catch (error) {
    if (error instanceof NotFoundError) return skipped(result, 'not_found', 'the run no longer exists');
    throw error;
  }
  if (head.workflowId !== request.workflowId) return skipped(result, 'not_found', 'the run no longer exists');
  result.recorded_version = head.version;
  result.turns = head.turn;
  if (head.forkedFrom) return skipped(result, 'forked_run', `a fork of run ${head.forkedFrom.runId}: its turns before ${head.forkedFrom.turn} are its parent's`);
  if (head.turn > MAX_REPLAY_TURNS) return skipped(result, 'too_long', `the run has ${head.turn} turns; a replay goes through at most ${MAX_REPLAY_TURNS}`);

  let state: CanvasState | null = null;
  let after = 0;
  for (;;) {
    const page = await readRecordedTurns(engine.store, request.tenant, request.runId, after, TURNS_PER_READ, retrievedChunks);
    for (const recorded of page.turns) {
      if (recorded.turn !== after + 1) return skipped(result, 'forked_run', `the run's records start at turn ${recorded.turn}`);
      after = recorded.turn;
      if (leftStateAsItWas(recorded)) {
        (result.turns_passed_over ??= []).push(recorded.turn);
        continue;
      }
      const step = await replayTurn(engine, request, head.dialect, recorded, state, result);
      if (step === 'stop') return result;
      state = step;
    }
    if (!page.more || page.turns.length === 0) break;
  }
  return result;
}

/** One turn: the state after it, or `stop` when the run's replay ends here. */
async function replayTurn(engine: TurnEngine, request: ReplayRunRequest, dialect: 'ragflow' | undefined, recorded: RecordedTurn, state: CanvasState | null, result: RunReplayResult): Promise<CanvasState | 'stop'> {
  const { workflow } = request;
  const refusals: ReplayRefusedError[] = [];
  const base = canvasOptions(engine, request.runId, request.tenant, dialect);
  const response = JSON.parse(recorded.response) as TurnResponse;
  const at = recordedTime(recorded, response);
  const options = {
    ...base,
    clock: () => at,
    ...(request.onDiffer === 'refuse' ? { services: refusingServices(base.services ?? {}, agentToolRegistry(engine.registry) ?? builtinTools, refusals) } : {}),
  };
  const records = recorded.calls.records as CallRecord[];
  result.calls.recorded += records.filter((r) => r.replayed !== true).length;

  const events: CanvasEvent[] = [];
  let canvas: Canvas;
  let failure: unknown;
  try {
    canvas = state ? Canvas.restore(workflow, withHistory(state, state.history, workflow), options) : Canvas.create(workflow, options);
  } catch (error) {
    // the state the replay reached does not fit the version (a version of an older state schema)
    result.reason = error instanceof EaselError ? { code: error.code, message: error.message } : { code: 'internal_error', message: 'internal error' };
    result.outcome = 'error';
    return 'stop';
  }
  const source = new CallReplay(records.map((record) => withChunks(record, recorded)));
  try {
    const { command, input } = inputOf(recorded.request, request.signal);
    const run = command === 'stop' ? canvas.stop() : canvas.run(input, { recorded: source });
    for await (const e of run) events.push(e);
  } catch (error) {
    failure = error;
  }
  // stopped from outside (the worker's invocation ends, the server stops): the run is done again later
  if (request.signal?.aborted) throw new TransientError('the replay was stopped before the run was done', { cause: request.signal.reason });
  const made = canvas.lastTurnCalls.records;
  result.calls.answered += source.replayed;
  // a refused call was not made: its record is the failure the refusal caused
  const refusedRecord = (r: CallRecord) => r.status === 'error' && refusals.some((x) => r.error?.includes(x.message) === true);
  const live = made.filter((r) => r.replayed !== true && !refusedRecord(r));
  result.calls.live += live.length;
  for (const call of live) {
    if (result.live_calls.length >= MAX_LISTED_CALLS) break;
    result.live_calls.push({
      turn: recorded.turn,
      component_id: call.component_id,
      kind: call.kind,
      ...(call.name !== undefined ? { name: call.name } : {}),
      ordinal: call.ordinal,
      path: call.path,
      reason: liveReason(call, records),
    });
  }

  const refusal = refusals[0] ?? (failure instanceof ReplayRefusedError ? failure : undefined);
  if (refusal) {
    const refusedCall = made.find((r) => r.status === 'error' && r.error?.includes(refusal.message) === true);
    result.refused = { turn: recorded.turn, component_id: refusedCall?.component_id ?? null, kind: refusal.kind, ...(refusal.callName ? { name: refusal.callName } : {}) };
    result.outcome = 'refused';
    return 'stop';
  }
  if (failure !== undefined) {
    if (failure instanceof TransientError || !(failure instanceof EaselError)) {
      // what is not ours is not described: a defect, not the run's
      result.reason = failure instanceof EaselError ? { code: failure.code, message: failure.message } : { code: 'internal_error', message: 'internal error' };
      result.outcome = 'error';
    } else {
      // the new version refuses what the run was asked here: it diverged before, or at its form
      result.stopped = { turn: recorded.turn, code: failure.code, message: failure.message };
      noteDivergence(result, recorded.turn, { event_index: 0, recorded: bounded(response.events[0] ?? null) as CanvasEvent | null, replayed: null }, []);
    }
    return 'stop';
  }

  result.turns_replayed++;
  const comparison = compareTurn(recorded.turn, response.events, mergeMessageDeltas(events), {
    recorded: response.next_input_hint ? [response.next_input_hint.component_id] : [],
    replayed: canvas.prompt ? [...canvas.prompt.component_ids] : [],
  });
  if (comparison.first) noteDivergence(result, recorded.turn, comparison.first, comparison.components);
  // JSON, as a stored state: the next turn's canvas must not share anything with this one
  return JSON.parse(JSON.stringify(canvas.serialize())) as CanvasState;
}

function noteDivergence(result: RunReplayResult, turn: number, first: EventDifference, components: ComponentChange[]): void {
  result.outcome = 'diverged';
  result.components.push(...components);
  if (result.first_divergence) return;
  const component = components[0];
  result.first_divergence = {
    turn,
    ...first,
    component_id: component?.component_id ?? null,
    outputs: component && component.change !== 'form' ? { recorded: component.recorded ?? null, replayed: component.replayed ?? null } : null,
  };
}

/** Of a recorded turn's state: the outputs that hold its retrievals' chunks. */
function retrievedChunks(calls: RecordedTurn['calls']): OutputName[] {
  const records = calls.records as CallRecord[];
  const components = new Set(records.filter((r) => r.kind === 'retrieval' && r.status === 'ok').map((r) => r.component_id));
  return [...components].map((component) => ({ component, output: 'json' }));
}

/**
 * A record as the replay answers from it: a retrieval's with the chunks its component's output
 * holds at the turn's end (the last of its calls' in a Loop; the component checks them against
 * the record's ids and scores).
 */
function withChunks(record: CallRecord, recorded: RecordedTurn): CompletedCall {
  if (record.kind !== 'retrieval' || record.status !== 'ok') return { record };
  const chunks = recorded.outputs[record.component_id]?.json;
  return Array.isArray(chunks) ? { record, replay: { chunks } satisfies RetrievalReplay } : { record };
}

/** Why a call went live, from the recorded turn's records. */
function liveReason(call: CallRecord, records: readonly CallRecord[]): LiveCall['reason'] {
  const same = records.filter((r) => r.component_id === call.component_id && r.path.join('/') === call.path.join('/'));
  if (same.length === 0) return 'unrecorded';
  return same.some((r) => r.kind === call.kind && r.name === call.name && r.request_hash === call.request_hash) ? 'not_replayable' : 'differs';
}

/**
 * A recorded turn that did not run the recorded input on the workflow: a migration (the state
 * moved onto another version, which a replay does not follow) or a double-text rolled back or
 * rejected (the state stayed as it was). The replay goes on from the state before it.
 */
function leftStateAsItWas(recorded: RecordedTurn): boolean {
  if (recorded.status === 'rolled_back' || recorded.status === 'rejected') return true;
  return (recorded.request as { command?: unknown } | null)?.command === 'migrate';
}

/** The recorded turn's request as the engine takes it. */
function inputOf(request: unknown, signal: AbortSignal | undefined): { command: string | null; input: RunInput } {
  const r = (request ?? {}) as { command?: string | null; run_input?: RunInput };
  const input: RunInput = { ...(r.run_input ?? {}), ...(r.command === 'timeout' ? { command: 'timeout' as const } : {}), ...(signal ? { signal } : {}) };
  return { command: r.command ?? null, input };
}

/**
 * When the recorded turn ran, in epoch ms: its first event's time (else its commit's), moved
 * into the second its `sys.date` names when they differ (the turn started just before a
 * second ended), so that a prompt showing the date asks what it asked.
 */
function recordedTime(recorded: RecordedTurn, response: TurnResponse): number {
  let at = Date.parse(recorded.createdAt);
  for (const e of response.events) {
    const created = (e.data as { created_at?: unknown }).created_at;
    if (typeof created === 'number' && Number.isFinite(created)) {
      at = Math.round(created * 1000);
      break;
    }
  }
  const started = recorded.date === undefined ? Number.NaN : Date.parse(`${recorded.date.replace(' ', 'T')}Z`);
  return Number.isNaN(started) || (at >= started && at < started + 1000) ? at : started;
}

function skipped(result: RunReplayResult, code: string, message: string): RunReplayResult {
  result.outcome = 'skipped';
  result.reason = { code, message };
  return result;
}

