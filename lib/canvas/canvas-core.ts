/**
 * The mutable inside of a Canvas, shared by the modules that run a turn (turn-loop.ts,
 * form-state.ts, turn-ends.ts). Internal to the engine: `Canvas` owns one and is the only
 * thing other modules see.
 */
import { CallLog, type CallReplay } from './calls';
import type { Outputs } from './component';
import { nodeState } from './context';
import type { Workflow } from './dsl';
import { dict, type CanvasState, type TurnHistoryEntry } from './state';

export interface TurnUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Model calls made. */
  calls: number;
}

/** A node whose `node_finished` waits for its streamed outputs to be read. */
export interface DeferredFinish {
  id: string;
  startedAt: number;
}

/**
 * Whose rules Begin follows. `native`: a required field without a value holds the run (Begin's
 * form). `ragflow`: Begin never holds it (RAGFlow pauses only at UserFillUp), fields without a
 * value stay empty.
 */
export type BeginRules = 'native' | 'ragflow';

export interface CanvasCore {
  readonly workflow: Workflow;
  readonly beginRules: BeginRules;
  state: CanvasState;
  /** Epoch milliseconds. */
  readonly clock: () => number;
  /** Component invocations allowed in one turn. */
  readonly budgetTurn: number;
  /** Component invocations allowed in one pass of the workflow, across its turns. */
  readonly budgetRun: number;
  /** Model tokens spent by the current (or last) turn. */
  usage: TurnUsage;
  /** Conversation entries the current (or last) turn added, assistant ones with their references. */
  turnHistory: TurnHistoryEntry[];
  /** Calls outside the run the current (or last) turn made (lib/canvas/calls.ts). */
  calls: CallLog;
  /** A re-asked form keeps the deadline it was first asked with (until anything runs). */
  previousDue: number | undefined;
  /** Nodes whose `node_finished` waits for their streamed outputs to be read. */
  deferred: DeferredFinish[];
  /** The last turn ended at a checkpoint, unfinished. */
  suspended: boolean;
  /**
   * Where the batch in flight starts again, kept while a batch that reaches outside the run
   * runs under a control that checkpoints its calls (`TurnControl.afterCall`).
   */
  batchStart: BatchStart | undefined;
  /** The calls of the batch a resumed turn runs again, answered from their records. */
  replay: CallReplay | undefined;
}

/** The turn as it was when the batch in flight started: what a checkpoint taken mid-batch restores. */
export interface BatchStart {
  /** A copy: the batch changes the live state. */
  state: CanvasState;
  steps: number;
  usage: TurnUsage;
  history: TurnHistoryEntry[];
  /** Call records made before the batch, and calls dropped past the bound. */
  calls: number;
  dropped: number;
}

/** A component failure that fails the run (no exception policy took it). */
export interface Failure {
  componentId: string;
  message: string;
}

export function emptyUsage(): TurnUsage {
  return { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, calls: 0 };
}

export function setOutputs(core: CanvasCore, id: string, outputs: Outputs): void {
  const copy = dict();
  Object.assign(copy, outputs);
  nodeState(core.state, id).outputs = copy;
}

export function elapsedInPass(core: CanvasCore): number {
  const start = core.state.pass?.started_at;
  return start === undefined ? 0 : (core.clock() - start) / 1000;
}

export function seconds(core: CanvasCore): number {
  return core.clock() / 1000;
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return typeof error === 'string' ? error : 'component failed';
}
