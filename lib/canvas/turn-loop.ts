/**
 * The turn loop: runs the frontier in batches until the turn pauses, ends or is stopped.
 * A node waits while another scheduled node can still reach it, so a join runs once, after
 * all its live branches. The components of a batch run concurrently; their events are
 * emitted in frontier order.
 *
 * Checkpoints come in two forms, both a `TurnCheckpoint` that `continueTurn` goes on from:
 * between batches (`afterBatch`: the state as it is), and inside a batch after each call a
 * component completes (`afterCall`: the state at the batch's start, and the calls completed
 * since as `replay`). A turn resumed from the second runs the batch again, its completed calls
 * answered from their records, and emits its events anew: the events kept with such a
 * checkpoint are those before the batch.
 */
import type { CallRecord, CallSource, CompletedCall } from './calls';
import { type BatchStart, type CanvasCore, elapsedInPass, errorMessage, type Failure, seconds, setOutputs, type TurnUsage } from './canvas-core';
import type { Outputs } from './component';
import { NodeContext, nodeState, type RunScope } from './context';
import { PauseRequest, TransientError, TurnInterruptedError } from './errors';
import { EventQueue } from './event-queue';
import { type CanvasEvent, event } from './events';
import { arrive, needsInput } from './form-state';
import { isEmptyValue } from './forms';
import { hasReference, withAdded } from './run-references';
import { type CanvasState, dict, type TurnHistoryEntry } from './state';
import { abort, fail, finish, finished, finishedOrDeferred, flushDeferred, nodeStarted, pause, settle } from './turn-ends';

/**
 * A turn stopped between two batches, complete enough for another process to finish it:
 * `Canvas.restore(workflow, checkpoint.state)` then `continueTurn(checkpoint)`. Streams are
 * read to their end first, so it is plain JSON.
 */
export interface TurnCheckpoint {
  state: CanvasState;
  /** Component invocations this turn has made so far (the turn's step budget goes on). */
  steps: number;
  usage: TurnUsage;
  /** Conversation entries the turn has added so far. */
  history: TurnHistoryEntry[];
  /** The calls outside the run it has made so far (absent in checkpoints of older versions). */
  calls?: { records: CallRecord[]; dropped: number };
  /**
   * Taken inside a batch: the calls the batch in flight completed, which it answers from here
   * when it runs again (`state` is the batch's start, `calls` the records before it).
   */
  replay?: CompletedCall[];
}

/** The batch that just ran, as `afterBatch` is told of it. */
export interface BatchInfo {
  /** The components it ran. */
  ran: readonly string[];
  /** One of them reaches outside the run (a model, an HTTP call): its work is worth keeping. */
  external: boolean;
}

/** How a long turn is steered from outside: checkpoints, a cancel flag, a deadline. */
export interface TurnControl {
  /**
   * Called between batches while the turn goes on; the engine waits for it, so the checkpoint
   * may be written as it is. `suspend` ends the turn here, unfinished (see `isSuspended`).
   */
  afterBatch?(checkpoint: TurnCheckpoint, batch: BatchInfo): Promise<'continue' | 'suspend'> | 'continue' | 'suspend';
  /** Checked before every batch: true ends the turn as `cancelled` (a stop flag). */
  cancelled?(): boolean;
  /**
   * Checked before every batch, after `cancelled`: true ends the pass as `interrupted` (a newer
   * input asked for it); the next turn starts a new pass.
   */
  interrupted?(): boolean;
  /**
   * Awaited before each batch runs, told whether it reaches outside the run: where the turn
   * layer claims the turn before the first side effect. A throw ends the turn (nothing is saved).
   */
  beforeBatch?(batch: BatchInfo): Promise<void> | void;
  /**
   * Told each time a component has completed a call inside a batch (an Agent's model round or
   * tool call); the component waits for it. The checkpoint restarts the batch in flight (see
   * `TurnCheckpoint.replay`). A throw stops the batch as a transient failure would
   * (`TurnInterruptedError`, its cause the thrown error). Absent: no checkpoints inside batches,
   * and nothing is copied for them.
   */
  afterCall?(checkpoint: TurnCheckpoint): Promise<void>;
  /**
   * Answers the turn's calls from records made elsewhere (a run replayed against another
   * version: lib/turns/replay-run.ts), after the calls the run holds itself (those a paused
   * component had made). A call it answers is not made; one it does not is.
   */
  recorded?: CallSource;
}

/** One of these components calls a model, a tool or a URL: work worth claiming and keeping. */
function reachesOutside(core: CanvasCore, ids: readonly string[]): boolean {
  return ids.some((id) => core.workflow.node(id).definition.external === true);
}

export interface TurnCounters {
  steps: number;
}

type NodeOutcome =
  | { kind: 'ok'; outputs?: Outputs; next?: readonly string[]; enterScope?: boolean; exitScope?: boolean }
  | { kind: 'error'; message: string }
  | { kind: 'transient'; error: TransientError }
  /** The component asked a person (PauseRequest); `callsFrom` is where the turn's call log stood when it started. */
  | { kind: 'pause'; request: PauseRequest; callsFrom: number };

/** An outcome with what its invocation added to the pass's references. */
type Invoked = NodeOutcome & { added: NodeContext['addedReferences'] };

const NO_VALUES: Readonly<Record<string, unknown>> = Object.freeze({});

export async function* drive(
  core: CanvasCore,
  scope: RunScope,
  turn: TurnCounters,
  control: TurnControl,
): AsyncGenerator<CanvasEvent, void, undefined> {
  const s = core.state;
  let lastBatch: readonly string[] = [];
  for (let batches = 0; ; batches++) {
    if (scope.signal.aborted || control.cancelled?.()) {
      yield* settle(core, scope);
      s.status = 'cancelled';
      s.frontier = [];
      yield event('workflow_cancelled', { elapsed_time: elapsedInPass(core), created_at: seconds(core) });
      return;
    }
    if (control.interrupted?.()) {
      yield* settle(core, scope);
      s.status = 'interrupted';
      s.frontier = [];
      s.prompt = null;
      yield event('workflow_interrupted', { elapsed_time: elapsedInPass(core), created_at: seconds(core) });
      return;
    }
    const ready = runnable(core, s.frontier);
    const holding = ready.filter((id) => needsInput(core, id));
    // a checkpoint between batches, unless this turn ends now anyway
    if (batches > 0 && control.afterBatch && holding.length === 0 && ready.length > 0) {
      const failure = yield* settle(core, scope);
      if (failure) {
        yield* fail(core, scope, failure);
        return;
      }
      const decision = await control.afterBatch(
        { state: s, steps: turn.steps, usage: { ...core.usage }, history: [...core.turnHistory], calls: { records: [...core.calls.records], dropped: core.calls.dropped } },
        { ran: lastBatch, external: reachesOutside(core, lastBatch) },
      );
      if (decision === 'suspend') {
        core.suspended = true;
        return;
      }
      if (control.cancelled?.() || control.interrupted?.()) continue;
    }
    if (holding.length > 0) {
      yield* pause(core, scope, holding);
      return;
    }
    if (ready.length === 0) {
      yield* finish(core, scope);
      return;
    }
    const pass = s.pass as NonNullable<CanvasState['pass']>;
    if (turn.steps + ready.length > core.budgetTurn) {
      yield* abort(core, scope, 'step_budget_turn', core.budgetTurn, turn.steps);
      return;
    }
    if (pass.steps + ready.length > core.budgetRun) {
      yield* abort(core, scope, 'step_budget_run', core.budgetRun, pass.steps);
      return;
    }
    const external = reachesOutside(core, ready);
    core.batchStart = control.afterCall && external ? batchStart(core, turn) : undefined;
    turn.steps += ready.length;
    pass.steps += ready.length;

    const waiting = s.frontier.filter((id) => !ready.includes(id));
    await control.beforeBatch?.({ ran: ready, external });
    const result = yield* runBatch(core, scope, ready);
    lastBatch = ready;
    core.previousDue = undefined;
    const scheduled = unique([...waiting, ...result.next]).filter(
      (id) => !result.exited.some((container) => core.workflow.isInside(id, container)),
    );
    for (const id of scheduled) if (!waiting.includes(id)) arrive(core, id);
    s.frontier = scheduled;
    yield* flushDeferred(core, false);
    if (result.failure) {
      yield* fail(core, scope, result.failure);
      return;
    }
  }
}

/** The turn before the batch about to run: what a checkpoint inside the batch starts it again from. */
function batchStart(core: CanvasCore, turn: TurnCounters): BatchStart {
  return {
    // streams were settled before the batch (afterBatch), so the state is plain JSON here
    state: structuredClone(core.state),
    steps: turn.steps,
    usage: { ...core.usage },
    history: [...core.turnHistory],
    calls: core.calls.records.length,
    dropped: core.calls.dropped,
  };
}

/**
 * A component completed a call inside the batch in flight: hands the control a checkpoint that
 * runs the batch again from its start with the calls completed so far answered from their
 * records. Nothing to do where the control keeps no such checkpoints.
 */
export async function callCompleted(core: CanvasCore, control: TurnControl): Promise<void> {
  const start = core.batchStart;
  if (!control.afterCall || !start) return;
  const checkpoint: TurnCheckpoint = {
    state: start.state,
    steps: start.steps,
    usage: { ...start.usage },
    history: [...start.history],
    calls: { records: core.calls.records.slice(0, start.calls), dropped: start.dropped },
    replay: core.calls.completedSince(start.calls),
  };
  try {
    await control.afterCall(checkpoint);
  } catch (error) {
    throw new TurnInterruptedError(error);
  }
}

/**
 * The scheduled nodes that may run now: those no other scheduled node can still reach.
 * Two nodes on one cycle do not hold each other.
 */
function runnable(core: CanvasCore, frontier: readonly string[]): string[] {
  const wf = core.workflow;
  return frontier.filter(
    (id) => !frontier.some((other) => other !== id && wf.reaches(other, id) && !wf.reaches(id, other)),
  );
}

async function* runBatch(
  core: CanvasCore,
  scope: RunScope,
  ids: readonly string[],
): AsyncGenerator<CanvasEvent, { next: string[]; exited: string[]; failure?: Failure }, undefined> {
  const startedAt = core.clock();
  for (const id of ids) {
    yield nodeStarted(core, id, startedAt);
  }
  const queues = ids.map(() => new EventQueue<CanvasEvent>());
  // a component that pauses runs again from the references as they were (its own additions come
  // back with its replayed calls); references are replaced, never changed in place: no copy needed
  const referencesAtStart = core.state.retrieval;
  const outcomes = ids.map((id, i) => invoke(core, scope, id, queues[i] as EventQueue<CanvasEvent>));
  const paused: string[] = [];

  const next: string[] = [];
  const exited: string[] = [];
  let failure: Failure | undefined;
  let transient: TransientError | undefined;
  for (const [i, id] of ids.entries()) {
    yield* (queues[i] as EventQueue<CanvasEvent>).drain();
    const outcome = await (outcomes[i] as Promise<Invoked>);
    if (outcome.kind === 'transient') {
      transient ??= outcome.error;
      continue;
    }
    if (outcome.kind === 'pause') {
      // it stays scheduled, unfinished: the turn pauses at it once the batch is done
      holdForAnswer(core, id, outcome.request, outcome.callsFrom);
      paused.push(id);
      next.push(id);
      continue;
    }
    const node = core.workflow.node(id);
    const pass = core.state.pass as NonNullable<CanvasState['pass']>;
    // ran to its end, well or not: a pause it had asked is spent
    answered(core, id);
    if (outcome.kind === 'error') {
      const policy = node.exception;
      if (policy.method === 'goto' && policy.goto.length > 0) {
        setOutputs(core, id, { _ERROR: outcome.message });
        yield finished(core, id, startedAt, outcome.message);
        next.push(...policy.goto);
      } else if (policy.method !== null && policy.defaultValue !== null) {
        setOutputs(core, id, { [node.definition.defaultOutput ?? 'result']: policy.defaultValue });
        yield finished(core, id, startedAt, null);
        next.push(...successors(core, id, undefined));
      } else {
        setOutputs(core, id, { _ERROR: outcome.message });
        yield finished(core, id, startedAt, outcome.message);
        failure ??= { componentId: id, message: outcome.message };
      }
      pass.last = id;
      continue;
    }
    if (outcome.outputs) setOutputs(core, id, outcome.outputs);
    if (outcome.exitScope && node.parentId !== undefined) {
      const container = node.parentId;
      yield* finishedOrDeferred(core, id, startedAt);
      yield* finishedOrDeferred(core, container, core.state.nodes[container]?.since ?? startedAt);
      exited.push(container);
      next.push(...successors(core, container, undefined));
      pass.last = container;
    } else if (outcome.enterScope && node.scopeEntryId !== undefined) {
      next.push(node.scopeEntryId);
    } else {
      yield* finishedOrDeferred(core, id, startedAt);
      next.push(...successors(core, id, outcome.next));
      pass.last = id;
    }
  }
  if (transient) throw transient;
  if (paused.length > 0) {
    const others = await Promise.all(outcomes.filter((_, i) => !paused.includes(ids[i] as string)));
    let references = referencesAtStart;
    for (const { added } of others) for (const { chunks, docs } of added) references = withAdded(references, chunks, docs);
    if (references && hasReference(references)) core.state.retrieval = references;
    else delete core.state.retrieval;
  }
  return { next, exited, ...(failure ? { failure } : {}) };
}

/** Where control goes after `id`: its choice or downstream; a body's end goes back to its round start. */
function successors(core: CanvasCore, id: string, chosen: readonly string[] | undefined): readonly string[] {
  const node = core.workflow.node(id);
  const next = chosen ?? node.downstream;
  if (next.length > 0 || node.parentId === undefined) return next;
  const start = core.workflow.node(node.parentId).scopeEntryId;
  return start === undefined ? [] : [start];
}

async function invoke(core: CanvasCore, scope: RunScope, id: string, queue: EventQueue<CanvasEvent>): Promise<Invoked> {
  const node = core.workflow.node(id);
  const form = core.state.nodes[id]?.form;
  const values = form?.values ?? NO_VALUES;
  const callsFrom = core.calls.records.length;
  const pause = core.state.nodes[id]?.pause;
  // A container's node_finished comes when its body ends; keep when it began.
  if (node.definition.container) nodeState(core.state, id).since = core.clock();
  const ctx = new NodeContext(scope, id, queue, values, form?.timedOut === true, pause && form?.submitted ? { data: pause.data } : undefined);
  const added = ctx.addedReferences;
  try {
    const result = await node.definition.invoke(node.params, ctx);
    // the spread last: properties added after a spread take V8's slow path
    return { kind: 'ok', added, ...result };
  } catch (error) {
    if (error instanceof PauseRequest) return { kind: 'pause', request: error, callsFrom, added };
    if (error instanceof TransientError) {
      error.componentId ??= id;
      return { kind: 'transient', error, added };
    }
    return { kind: 'error', message: errorMessage(error), added };
  } finally {
    queue.close();
  }
}

/**
 * A component paused for a person: what it asks becomes its fields (presets shown), and the
 * calls its invocation completed are kept for it to be answered from when it runs again.
 */
function holdForAnswer(core: CanvasCore, id: string, request: PauseRequest, callsFrom: number): void {
  const path = core.workflow.containersOf(id);
  const calls = core.calls.completedSince(callsFrom).filter((c) => c.record.component_id === id && c.record.path.join('/') === path.join('/'));
  const ns = nodeState(core.state, id);
  ns.pause = { fields: [...request.fields], tips: request.tips, data: request.data, calls };
  const values = dict();
  for (const f of request.fields) if (!isEmptyValue(f.value, f.type)) values[f.key] = f.value;
  ns.form = { values, submitted: false };
}

/** A component that had paused ran to its end (or failed): its pause and answer are spent. */
function answered(core: CanvasCore, id: string): void {
  const ns = core.state.nodes[id];
  if (!ns?.pause) return;
  delete ns.pause;
  delete ns.form;
}

/** The calls of the paused nodes among `ids`, for their invocations to be answered from when they run again. */
export function pausedCalls(core: CanvasCore, ids: readonly string[]): CompletedCall[] {
  return ids.flatMap((id) => core.state.nodes[id]?.pause?.calls ?? []);
}

function unique(ids: readonly string[]): string[] {
  return [...new Set(ids)];
}
