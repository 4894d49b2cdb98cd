/**
 * The Canvas: one run of a compiled workflow. `run()` executes a turn — it starts a pass at
 * Begin or resumes the pending forms — and yields events until the workflow pauses for input
 * or ends; `serialize()` returns the whole state as JSON and `Canvas.restore()` continues it in
 * another process with the same result as if it had never stopped.
 *
 * Scheduling: the frontier (scheduled nodes) runs in batches. A node waits while another
 * scheduled node can still reach it, so a join runs once, after all its live branches. The
 * components of a batch run concurrently; their events are emitted in frontier order.
 *
 * @example
 *   const canvas = Canvas.create(compileWorkflow(dsl, builtinComponents));
 *   for await (const e of canvas.run({ query: 'hi' })) console.log(e.event);
 *   await store.save(canvas.serialize()); // after the run ended: paused or finished
 */
import type { Outputs } from './component';
import { appendHistory, NodeContext, nodeState, type RunScope } from './context';
import type { Workflow } from './dsl';
import {
  EaselError,
  InvalidInputsError,
  type InputProblem,
  InvalidRunInputError,
  NotWaitingForInputError,
  RunFinishedError,
  TransientError,
} from './errors';
import { EventQueue } from './event-queue';
import { type CanvasEvent, event, type FieldView } from './events';
import { fieldSatisfied, type FormField, isEmptyValue, normalizeFieldValue } from './forms';
import { isRecord } from './references';
import {
  type CanvasState,
  dict,
  type FormState,
  type HistoryEntry,
  type PendingPrompt,
  readState,
  type RunStatus,
  STATE_VERSION,
} from './state';
import { TextStream } from './text-stream';

export interface CanvasOptions {
  /** Epoch milliseconds. @default Date.now */
  clock?: () => number;
  /** Seed of the run's random generator, taken at `reset()`. @default a random one */
  seed?: number;
  /** Component invocations allowed in one turn. @default 1000 */
  stepBudgetTurn?: number;
  /** Component invocations allowed in one pass of the workflow, across its turns. @default 10000 */
  stepBudgetRun?: number;
  /** History entries kept in the state (older ones live in turn records). @default 100 */
  historyLimit?: number;
  /** Handed to components as `ctx.services` (model resolver, outbound HTTP). Never serialized. */
  services?: Readonly<Record<string, unknown>>;
}

export const DEFAULT_STEP_BUDGET_TURN = 1000;
export const DEFAULT_STEP_BUDGET_RUN = 10_000;
export const DEFAULT_HISTORY_LIMIT = 100;

/** One turn's request to the engine. Every field is optional. */
export interface RunInput {
  query?: string | null;
  /** Values for the pending form (or Begin's fields on the first turn), raw or `{type, value}`. */
  inputs?: Record<string, unknown> | null;
  files?: unknown[] | null;
  user_id?: string | null;
  /** Aborting cancels the run between batches (status `cancelled`). */
  signal?: AbortSignal;
  /** `timeout`: the waiting forms' timer fired; they take their timeout branch. */
  command?: 'timeout' | null;
}

interface ParsedInput {
  timeout: boolean;
  query: string | undefined;
  inputs: Record<string, unknown> | undefined;
  files: unknown[] | undefined;
  userId: string | undefined;
  signal: AbortSignal;
}

/** Normalised submission: per form node, the values of its own fields. */
type Submission = Map<string, Record<string, unknown>>;

type NodeOutcome =
  | { kind: 'ok'; outputs?: Outputs; next?: readonly string[]; enterScope?: boolean; exitScope?: boolean }
  | { kind: 'error'; message: string }
  | { kind: 'transient'; error: TransientError };

interface Failure {
  componentId: string;
  message: string;
}

interface TurnCounters {
  steps: number;
}

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
  history: HistoryEntry[];
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
   * Awaited before each batch runs, told whether it reaches outside the run: where the turn
   * layer claims the turn before the first side effect. A throw ends the turn (nothing is saved).
   */
  beforeBatch?(batch: BatchInfo): Promise<void> | void;
}

const NEVER_ABORTED = new AbortController().signal;
const NO_VALUES: Readonly<Record<string, unknown>> = Object.freeze({});

export class Canvas {
  private state: CanvasState;
  private readonly clock: () => number;
  private readonly budgetTurn: number;
  private readonly budgetRun: number;
  private readonly historyLimit: number;
  private readonly seed: number | undefined;
  private readonly services: Readonly<Record<string, unknown>>;
  private active = false;
  private usage: TurnUsage = emptyUsage();
  private turnHistory: HistoryEntry[] = [];
  /** A re-asked form keeps the deadline it was first asked with (until anything runs). */
  private previousDue: number | undefined;
  /** Set when a turn did not reach its end (a transient error, an abandoned generator). */
  private broken = false;
  /** Nodes whose `node_finished` waits for their streamed outputs to be read. */
  private deferred: { id: string; startedAt: number }[] = [];
  /** The last turn ended at a checkpoint, unfinished. */
  private suspended = false;

  private constructor(
    readonly workflow: Workflow,
    state: CanvasState | undefined,
    options: CanvasOptions,
  ) {
    this.clock = options.clock ?? Date.now;
    this.budgetTurn = positive(options.stepBudgetTurn, DEFAULT_STEP_BUDGET_TURN);
    this.budgetRun = positive(options.stepBudgetRun, DEFAULT_STEP_BUDGET_RUN);
    this.historyLimit = positive(options.historyLimit, DEFAULT_HISTORY_LIMIT);
    this.seed = options.seed;
    this.services = options.services ?? {};
    this.state = state ?? this.freshState();
  }

  /** A new run of `workflow`, reset and `not_started`. */
  static create(workflow: Workflow, options: CanvasOptions = {}): Canvas {
    return new Canvas(workflow, undefined, options);
  }

  /** Continues a run from `serialize()`'s output (after JSON, in any process). */
  static restore(workflow: Workflow, serialized: unknown, options: CanvasOptions = {}): Canvas {
    const state = readState(serialized);
    for (const id of [...state.frontier, ...(state.prompt?.component_ids ?? [])]) {
      if (!workflow.nodes.has(id)) {
        throw new EaselError('invalid_state', `the state refers to component "${id}", absent from the workflow`);
      }
    }
    return new Canvas(workflow, state, options);
  }

  /** Back to `not_started`: no history, no outputs, globals and variables at their defaults. */
  reset(): void {
    this.assertIdle();
    this.state = this.freshState();
    this.broken = false;
    this.deferred = [];
  }

  get status(): RunStatus {
    return this.state.status;
  }

  get frontier(): readonly string[] {
    return this.state.frontier;
  }

  /** What the run waits for while `waiting_for_input`: the fields still needed and the tips. */
  get prompt(): PendingPrompt | null {
    return this.state.prompt;
  }

  /** Model tokens spent by the last turn. */
  get lastTurnUsage(): TurnUsage {
    return { ...this.usage };
  }

  get mode(): 'conversational' | 'task' {
    const entry = this.workflow.node(this.workflow.entryId);
    return entry.definition.entry?.mode(entry.params) ?? 'conversational';
  }

  get prologue(): string {
    const entry = this.workflow.node(this.workflow.entryId);
    return entry.definition.entry?.prologue(entry.params) ?? '';
  }

  /** The run accepts no further turn. */
  get isTerminal(): boolean {
    const s = this.state.status;
    if (s === 'cancelled' || s === 'aborted_looping_risk') return true;
    return (s === 'completed' || s === 'failed') && this.mode === 'task';
  }

  /** The state as JSON-ready data. Valid between turns only. */
  serialize(): CanvasState {
    this.assertIdle();
    return this.state;
  }

  /**
   * Runs one turn. Validation errors (`InvalidRunInputError`, `InvalidInputsError`,
   * `RunFinishedError`, `NotWaitingForInputError`) are thrown before anything changes; a
   * `TransientError` thrown midway leaves this object unusable — reload the last saved state.
   */
  async *run(input: RunInput = {}, control: TurnControl = {}): AsyncGenerator<CanvasEvent, void, undefined> {
    const { request, resuming, targets, submission } = this.prepare(input);
    this.active = true;
    this.broken = true;
    this.suspended = false;
    this.usage = emptyUsage();
    this.turnHistory = [];
    this.previousDue = resuming && !request.timeout ? this.state.prompt?.due_at : undefined;
    try {
      const scope = this.scope(request.signal);
      const s = this.state;
      s.globals['sys.date'] = formatDate(this.clock());
      if (request.userId !== undefined) s.globals['sys.user_id'] = request.userId;
      if (request.files !== undefined) s.globals['sys.files'] = request.files;
      if (resuming && request.timeout) {
        for (const id of targets) {
          if (this.workflow.node(id).definition.form?.timeoutSeconds?.(this.workflow.node(id).params) !== undefined) {
            nodeState(this.state, id).form = { ...this.formState(id), timedOut: true };
          }
        }
      } else if (resuming) {
        this.recordQuery(scope, request.query);
        this.applySubmission(targets, submission, request.query !== undefined);
      } else {
        this.startPass(request.inputs ?? null);
        this.recordQuery(scope, request.query, true);
        yield event('workflow_started', { inputs: request.inputs ?? null, created_at: this.seconds() });
        if (submission) this.mergeValues(this.workflow.entryId, submission.get(this.workflow.entryId) ?? {});
      }
      s.status = 'running';
      s.prompt = null;
      yield* this.drive(scope, { steps: 0 }, control);
      this.broken = this.suspended;
    } finally {
      this.active = false;
    }
  }

  /**
   * Finishes a turn from a checkpoint taken by `afterBatch` (the canvas restored from
   * `checkpoint.state`): the batches already run are not run again.
   */
  async *continueTurn(checkpoint: TurnCheckpoint, control: TurnControl = {}, signal?: AbortSignal): AsyncGenerator<CanvasEvent, void, undefined> {
    this.assertIdle();
    if (this.state.status !== 'running' || this.state.pass === null) {
      throw new EaselError('invalid_state', `a checkpoint must be taken mid-turn (status is ${this.state.status})`);
    }
    this.active = true;
    this.broken = true;
    this.suspended = false;
    this.usage = { ...checkpoint.usage };
    this.turnHistory = [...checkpoint.history];
    this.previousDue = undefined;
    try {
      yield* this.drive(this.scope(signal ?? NEVER_ABORTED), { steps: checkpoint.steps }, control);
      this.broken = this.suspended;
    } finally {
      this.active = false;
    }
  }

  /** The last turn stopped at a checkpoint because `afterBatch` said `suspend`. */
  get isSuspended(): boolean {
    return this.suspended;
  }

  /**
   * Checks a turn's input without running anything: the same errors `run()` would throw
   * before changing state (malformed input, finished run, inputs not expected, wrong types).
   */
  check(input: RunInput = {}): void {
    this.prepare(input);
  }

  private prepare(input: RunInput) {
    const request = parseRunInput(input);
    this.assertIdle();
    const status = this.state.status;
    if (this.isTerminal) throw new RunFinishedError(status);
    const resuming = status === 'waiting_for_input';
    const hasInputs = request.inputs !== undefined && Object.keys(request.inputs).length > 0;
    if (!resuming && hasInputs && status !== 'not_started') throw new NotWaitingForInputError(status);
    if (request.timeout && (!resuming || this.state.prompt?.due_at === undefined)) {
      throw new NotWaitingForInputError(`${status} with no timer armed`);
    }
    const targets = resuming ? (this.state.prompt?.component_ids ?? []) : [this.workflow.entryId];
    const submission = request.inputs === undefined ? undefined : this.normalize(targets, request.inputs);
    return { request, resuming, targets, submission };
  }

  /** The fields a turn's `inputs` would answer now: the waiting forms', or Begin's on a new pass. */
  inputFields(): { componentId: string; field: FormField }[] {
    const targets = this.state.status === 'waiting_for_input' ? (this.state.prompt?.component_ids ?? []) : [this.workflow.entryId];
    return targets.flatMap((componentId) => this.fields(componentId).map((field) => ({ componentId, field })));
  }

  /** Conversation entries the last turn added (its user query, the messages shown). */
  get lastTurnHistory(): readonly HistoryEntry[] {
    return this.turnHistory;
  }

  /** A `stop` turn: the run ends as `cancelled`. */
  async *stop(): AsyncGenerator<CanvasEvent, void, undefined> {
    this.assertIdle();
    if (this.isTerminal) throw new RunFinishedError(this.state.status);
    const s = this.state;
    s.status = 'cancelled';
    s.frontier = [];
    s.prompt = null;
    yield event('workflow_cancelled', { elapsed_time: this.elapsedInPass(), created_at: this.seconds() });
  }

  // ---- the turn loop -------------------------------------------------------------------

  private async *drive(scope: RunScope, turn: TurnCounters, control: TurnControl): AsyncGenerator<CanvasEvent, void, undefined> {
    const s = this.state;
    let lastBatch: readonly string[] = [];
    for (let batches = 0; ; batches++) {
      if (scope.signal.aborted || control.cancelled?.()) {
        yield* this.settle(scope);
        s.status = 'cancelled';
        s.frontier = [];
        yield event('workflow_cancelled', { elapsed_time: this.elapsedInPass(), created_at: this.seconds() });
        return;
      }
      const runnable = this.runnable(s.frontier);
      const holding = runnable.filter((id) => this.needsInput(id));
      // a checkpoint between batches, unless this turn ends now anyway
      if (batches > 0 && control.afterBatch && holding.length === 0 && runnable.length > 0) {
        const failure = yield* this.settle(scope);
        if (failure) {
          yield* this.fail(scope, failure);
          return;
        }
        const decision = await control.afterBatch(
          { state: s, steps: turn.steps, usage: { ...this.usage }, history: [...this.turnHistory] },
          { ran: lastBatch, external: this.reachesOutside(lastBatch) },
        );
        if (decision === 'suspend') {
          this.suspended = true;
          return;
        }
        if (control.cancelled?.()) continue;
      }
      if (holding.length > 0) {
        yield* this.pause(scope, holding);
        return;
      }
      if (runnable.length === 0) {
        yield* this.finish(scope);
        return;
      }
      const pass = s.pass as NonNullable<CanvasState['pass']>;
      if (turn.steps + runnable.length > this.budgetTurn) {
        yield* this.abort(scope, 'step_budget_turn', this.budgetTurn, turn.steps);
        return;
      }
      if (pass.steps + runnable.length > this.budgetRun) {
        yield* this.abort(scope, 'step_budget_run', this.budgetRun, pass.steps);
        return;
      }
      turn.steps += runnable.length;
      pass.steps += runnable.length;

      const waiting = s.frontier.filter((id) => !runnable.includes(id));
      await control.beforeBatch?.({ ran: runnable, external: this.reachesOutside(runnable) });
      const result = yield* this.runBatch(scope, runnable);
      lastBatch = runnable;
      this.previousDue = undefined;
      const scheduled = unique([...waiting, ...result.next]).filter(
        (id) => !result.exited.some((container) => this.workflow.isInside(id, container)),
      );
      for (const id of scheduled) if (!waiting.includes(id)) this.arrive(id);
      s.frontier = scheduled;
      yield* this.flushDeferred(false);
      if (result.failure) {
        yield* this.fail(scope, result.failure);
        return;
      }
    }
  }

  /**
   * The scheduled nodes that may run now: those no other scheduled node can still reach.
   * Two nodes on one cycle do not hold each other.
   */
  private runnable(frontier: readonly string[]): string[] {
    const wf = this.workflow;
    return frontier.filter(
      (id) => !frontier.some((other) => other !== id && wf.reaches(other, id) && !wf.reaches(id, other)),
    );
  }

  private async *runBatch(
    scope: RunScope,
    ids: readonly string[],
  ): AsyncGenerator<CanvasEvent, { next: string[]; exited: string[]; failure?: Failure }, undefined> {
    const startedAt = this.clock();
    for (const id of ids) {
      yield event('node_started', { ...this.nodeInfo(id, startedAt), inputs: null, thoughts: '' });
    }
    const queues = ids.map(() => new EventQueue<CanvasEvent>());
    const outcomes = ids.map((id, i) => this.invoke(scope, id, queues[i] as EventQueue<CanvasEvent>));

    const next: string[] = [];
    const exited: string[] = [];
    let failure: Failure | undefined;
    let transient: TransientError | undefined;
    for (const [i, id] of ids.entries()) {
      yield* (queues[i] as EventQueue<CanvasEvent>).drain();
      const outcome = await (outcomes[i] as Promise<NodeOutcome>);
      if (outcome.kind === 'transient') {
        transient ??= outcome.error;
        continue;
      }
      const node = this.workflow.node(id);
      const pass = this.state.pass as NonNullable<CanvasState['pass']>;
      if (outcome.kind === 'error') {
        const policy = node.exception;
        if (policy.method === 'goto' && policy.goto.length > 0) {
          this.setOutputs(id, { _ERROR: outcome.message });
          yield this.finished(id, startedAt, outcome.message);
          next.push(...policy.goto);
        } else if (policy.method !== null && policy.defaultValue !== null) {
          this.setOutputs(id, { [node.definition.defaultOutput ?? 'result']: policy.defaultValue });
          yield this.finished(id, startedAt, null);
          next.push(...this.successors(id, undefined));
        } else {
          this.setOutputs(id, { _ERROR: outcome.message });
          yield this.finished(id, startedAt, outcome.message);
          failure ??= { componentId: id, message: outcome.message };
        }
        pass.last = id;
        continue;
      }
      if (outcome.outputs) this.setOutputs(id, outcome.outputs);
      if (outcome.exitScope && node.parentId !== undefined) {
        const container = node.parentId;
        yield* this.finishedOrDeferred(id, startedAt);
        yield* this.finishedOrDeferred(container, this.state.nodes[container]?.since ?? startedAt);
        exited.push(container);
        next.push(...this.successors(container, undefined));
        pass.last = container;
      } else if (outcome.enterScope && node.scopeEntryId !== undefined) {
        next.push(node.scopeEntryId);
      } else {
        yield* this.finishedOrDeferred(id, startedAt);
        next.push(...this.successors(id, outcome.next));
        pass.last = id;
      }
    }
    if (transient) throw transient;
    return { next, exited, ...(failure ? { failure } : {}) };
  }

  /** Where control goes after `id`: its choice or downstream; a body's end goes back to its round start. */
  private successors(id: string, chosen: readonly string[] | undefined): readonly string[] {
    const node = this.workflow.node(id);
    const next = chosen ?? node.downstream;
    if (next.length > 0 || node.parentId === undefined) return next;
    const start = this.workflow.node(node.parentId).scopeEntryId;
    return start === undefined ? [] : [start];
  }

  private async invoke(scope: RunScope, id: string, queue: EventQueue<CanvasEvent>): Promise<NodeOutcome> {
    const node = this.workflow.node(id);
    const form = this.state.nodes[id]?.form;
    const values = form?.values ?? NO_VALUES;
    try {
      // A container's node_finished comes when its body ends; keep when it began.
      if (node.definition.container) nodeState(this.state, id).since = this.clock();
      const ctx = new NodeContext(scope, id, queue, values, form?.timedOut === true);
      const result = await node.definition.invoke(node.params, ctx);
      return { kind: 'ok', ...(result ?? {}) };
    } catch (error) {
      if (error instanceof TransientError) {
        error.componentId ??= id;
        return { kind: 'transient', error };
      }
      return { kind: 'error', message: errorMessage(error) };
    } finally {
      queue.close();
    }
  }

  // ---- forms ---------------------------------------------------------------------------

  private fields(id: string): FormField[] {
    const node = this.workflow.node(id);
    return node.definition.form?.fields(node.params) ?? [];
  }

  private needsInput(id: string): boolean {
    const node = this.workflow.node(id);
    const form = node.definition.form;
    if (!form) return false;
    const state = this.formState(id);
    if (state.timedOut) return false;
    const settled = !form.holdForOptional || state.submitted;
    return this.fields(id).some((f) => !fieldSatisfied(f, state.values[f.key], settled));
  }

  private formState(id: string): FormState {
    const ns = nodeState(this.state, id);
    ns.form ??= { values: this.presets(id), submitted: false };
    return ns.form;
  }

  private presets(id: string): Record<string, unknown> {
    const values = dict();
    for (const f of this.fields(id)) if (!isEmptyValue(f.value, f.type)) values[f.key] = f.value;
    return values;
  }

  /** A node was scheduled: a form that asks on every visit starts from its presets again. */
  private arrive(id: string): void {
    const form = this.workflow.node(id).definition.form;
    if (form && !form.keepValues) nodeState(this.state, id).form = { values: this.presets(id), submitted: false };
  }

  /** Checks and converts submitted values for `targets` before anything changes. */
  private normalize(targets: readonly string[], inputs: Record<string, unknown>): Submission {
    const problems: InputProblem[] = [];
    const submission: Submission = new Map();
    for (const id of targets) {
      const values = dict();
      for (const field of this.fields(id)) {
        if (!Object.hasOwn(inputs, field.key)) continue;
        const result = normalizeFieldValue(field, inputs[field.key]);
        if (result.ok) values[field.key] = result.value;
        else problems.push({ component_id: id, field: field.key, message: result.message });
      }
      submission.set(id, values);
    }
    if (problems.length > 0) throw new InvalidInputsError(problems);
    return submission;
  }

  /**
   * Resume rules: values are merged and the form counts as submitted; an empty submission (or
   * an empty turn) clears stale values so the form asks again; a query alone keeps them.
   */
  private applySubmission(targets: readonly string[], submission: Submission | undefined, hasQuery: boolean): void {
    const empty = submission === undefined
      ? !hasQuery
      : [...submission.values()].every((v) => Object.keys(v).length === 0);
    for (const id of targets) {
      if (submission === undefined && hasQuery) continue;
      if (empty) {
        nodeState(this.state, id).form = { values: dict(), submitted: false };
        continue;
      }
      this.mergeValues(id, submission?.get(id) ?? {});
    }
  }

  private mergeValues(id: string, values: Record<string, unknown>): void {
    const form = this.formState(id);
    const merged = dict();
    Object.assign(merged, form.values);
    for (const [k, v] of Object.entries(values)) {
      if (v === null) delete merged[k];
      else merged[k] = v;
    }
    nodeState(this.state, id).form = { values: merged, submitted: true };
  }

  // ---- ends of a turn --------------------------------------------------------------------

  private async *pause(scope: RunScope, holding: readonly string[]): AsyncGenerator<CanvasEvent, void, undefined> {
    const s = this.state;
    const failure = yield* this.settle(scope);
    if (failure) {
      yield* this.fail(scope, failure);
      return;
    }
    s.frontier = [...holding, ...s.frontier.filter((id) => !holding.includes(id))];
    const inputs = dict<FieldView>();
    const tips: string[] = [];
    for (const id of holding) {
      const node = this.workflow.node(id);
      const form = this.formState(id);
      const settled = !node.definition.form?.holdForOptional || form.submitted;
      for (const f of this.fields(id)) {
        if (fieldSatisfied(f, form.values[f.key], settled)) continue;
        inputs[f.key] = fieldView(f, form.values[f.key]);
      }
      const tipsOf = node.definition.form?.tips;
      if (tipsOf) {
        const ctx = new NodeContext(scope, id, new EventQueue(), form.values);
        const text = await tipsOf(node.params, ctx);
        if (text) tips.push(text);
      }
    }
    s.status = 'waiting_for_input';
    const timeouts = holding
      .map((id) => this.workflow.node(id).definition.form?.timeoutSeconds?.(this.workflow.node(id).params))
      .filter((t): t is number => t !== undefined);
    // the earliest timer of the forms asked; a re-ask keeps the deadline set when first asked
    const previousDue = this.previousDue;
    const due = timeouts.length === 0 ? undefined : (previousDue ?? this.clock() + Math.min(...timeouts) * 1000);
    s.prompt = { inputs, tips: tips.join('\n\n'), component_ids: [...holding], ...(due !== undefined ? { due_at: due } : {}) };
    yield event('user_inputs', { inputs, tips: s.prompt.tips });
  }

  private async *finish(scope: RunScope): AsyncGenerator<CanvasEvent, void, undefined> {
    const failure = yield* this.settle(scope);
    if (failure) {
      yield* this.fail(scope, failure);
      return;
    }
    const s = this.state;
    const last = s.pass?.last;
    s.status = 'completed';
    s.frontier = [];
    yield event('workflow_finished', {
      inputs: s.pass?.inputs ?? null,
      outputs: last ? { ...(s.nodes[last]?.outputs ?? {}) } : {},
      elapsed_time: this.elapsedInPass(),
      created_at: this.seconds(),
      usage: { ...this.usage },
    });
  }

  private async *fail(scope: RunScope, failure: Failure): AsyncGenerator<CanvasEvent, void, undefined> {
    yield* this.settle(scope);
    const s = this.state;
    s.status = 'failed';
    s.frontier = [];
    s.prompt = null;
    yield event('workflow_failed', {
      error: { code: 'component_error', message: failure.message, component_id: failure.componentId },
      elapsed_time: this.elapsedInPass(),
      created_at: this.seconds(),
    });
  }

  private async *abort(
    scope: RunScope,
    reason: 'step_budget_turn' | 'step_budget_run',
    budget: number,
    steps: number,
  ): AsyncGenerator<CanvasEvent, void, undefined> {
    yield* this.settle(scope);
    const s = this.state;
    s.status = 'aborted_looping_risk';
    s.frontier = [];
    yield event('workflow_aborted', {
      reason,
      budget,
      steps,
      elapsed_time: this.elapsedInPass(),
      created_at: this.seconds(),
    });
  }

  /**
   * Reads every stream still open (an answer nobody showed live) to its end, so the state
   * holds only plain values, then emits the node_finished events that waited for them.
   */
  private async *settle(scope: RunScope): AsyncGenerator<CanvasEvent, Failure | undefined, undefined> {
    void scope;
    let failure: Failure | undefined;
    const settleRecord = async (record: Record<string, unknown>, owner: string | undefined) => {
      for (const [k, v] of Object.entries(record)) {
        if (!(v instanceof TextStream)) continue;
        try {
          record[k] = await v.text();
        } catch (error) {
          if (error instanceof TransientError) throw error;
          record[k] = v.partialText();
          failure ??= { componentId: owner ?? '', message: errorMessage(error) };
        }
      }
    };
    for (const [id, ns] of Object.entries(this.state.nodes)) {
      if (ns.outputs && hasStream(ns.outputs)) {
        const copy = dict();
        Object.assign(copy, ns.outputs);
        await settleRecord(copy, id);
        ns.outputs = copy;
      }
    }
    await settleRecord(this.state.globals, undefined);
    yield* this.flushDeferred(true);
    return failure;
  }

  private *flushDeferred(all: boolean): Generator<CanvasEvent, void, undefined> {
    while (this.deferred.length > 0) {
      const head = this.deferred[0] as { id: string; startedAt: number };
      const outputs = this.state.nodes[head.id]?.outputs ?? {};
      const open = Object.values(outputs).some((v) => v instanceof TextStream && !v.done);
      if (open && !all) return;
      this.deferred.shift();
      yield this.finished(head.id, head.startedAt, streamError(outputs));
    }
  }

  // ---- helpers -------------------------------------------------------------------------

  /** One of these components calls a model, a tool or a URL: work worth claiming and keeping. */
  private reachesOutside(ids: readonly string[]): boolean {
    return ids.some((id) => this.workflow.node(id).definition.external === true);
  }

  private *finishedOrDeferred(id: string, startedAt: number): Generator<CanvasEvent, void, undefined> {
    const outputs = this.state.nodes[id]?.outputs;
    if (outputs && Object.values(outputs).some((v) => v instanceof TextStream && !v.done)) {
      this.deferred.push({ id, startedAt });
      return;
    }
    if (this.deferred.length > 0) {
      // keep node_finished in order behind the ones still waiting
      this.deferred.push({ id, startedAt });
      return;
    }
    yield this.finished(id, startedAt, null);
  }

  private finished(id: string, startedAt: number, error: string | null): CanvasEvent {
    const outputs = dict();
    for (const [k, v] of Object.entries(this.state.nodes[id]?.outputs ?? {})) {
      outputs[k] = v instanceof TextStream ? v.partialText() : v;
    }
    return event('node_finished', {
      ...this.nodeInfo(id, startedAt),
      inputs: null,
      outputs,
      error,
      elapsed_time: (this.clock() - startedAt) / 1000,
    });
  }

  private nodeInfo(id: string, startedAt: number) {
    const node = this.workflow.node(id);
    return {
      component_id: id,
      component_name: node.displayName,
      component_type: node.componentName,
      created_at: startedAt / 1000,
    };
  }

  private setOutputs(id: string, outputs: Outputs): void {
    const copy = dict();
    Object.assign(copy, outputs);
    nodeState(this.state, id).outputs = copy;
  }

  private startPass(inputs: Record<string, unknown> | null): void {
    const s = this.state;
    const nodes = dict<CanvasState['nodes'][string]>();
    for (const [id, ns] of Object.entries(s.nodes)) {
      const node = this.workflow.nodes.get(id);
      if (ns.form && node?.definition.form?.keepValues) nodes[id] = { form: ns.form };
    }
    s.nodes = nodes;
    s.pass = {
      number: (s.pass?.number ?? 0) + 1,
      inputs,
      started_at: this.clock(),
      steps: 0,
      last: null,
    };
    s.frontier = [this.workflow.entryId];
    this.arrive(this.workflow.entryId);
    this.deferred = [];
  }

  private recordQuery(scope: RunScope, query: string | undefined, newPass = false): void {
    const g = this.state.globals;
    if (query !== undefined) {
      g['sys.query'] = query;
      appendHistory(scope, 'user', query);
    }
    if (query !== undefined || newPass) {
      const turns = typeof g['sys.conversation_turns'] === 'number' ? g['sys.conversation_turns'] : 0;
      g['sys.conversation_turns'] = turns + 1;
    }
  }

  private scope(signal: AbortSignal): RunScope {
    return {
      workflow: this.workflow,
      state: this.state,
      historyLimit: this.historyLimit,
      now: this.clock,
      random: () => this.random(),
      signal,
      services: this.services,
      onHistory: (entry) => this.turnHistory.push(entry),
      recordUsage: (u) => {
        this.usage.prompt_tokens += u.prompt_tokens;
        this.usage.completion_tokens += u.completion_tokens;
        this.usage.total_tokens += u.total_tokens;
        this.usage.calls += 1;
      },
    };
  }

  /** mulberry32: small, fast, and its whole state is one integer we can serialize. */
  private random(): number {
    let t = (this.state.rng = (this.state.rng + 0x6d2b79f5) | 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  private freshState(): CanvasState {
    return {
      v: STATE_VERSION,
      status: 'not_started',
      frontier: [],
      nodes: dict(),
      globals: initialGlobals(this.workflow),
      history: [],
      pass: null,
      prompt: null,
      rng: (this.seed ?? Math.floor(Math.random() * 2 ** 32)) | 0,
    };
  }

  private elapsedInPass(): number {
    const start = this.state.pass?.started_at;
    return start === undefined ? 0 : (this.clock() - start) / 1000;
  }

  private seconds(): number {
    return this.clock() / 1000;
  }

  private assertIdle(): void {
    if (this.active) throw new EaselError('turn_in_progress', 'this canvas is running a turn');
    if (this.broken) {
      throw new EaselError('invalid_state', 'a turn of this canvas did not complete; restore the saved state');
    }
  }
}

export interface TurnUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Model calls made. */
  calls: number;
}

function emptyUsage(): TurnUsage {
  return { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, calls: 0 };
}

function initialGlobals(workflow: Workflow): Record<string, unknown> {
  const globals = dict();
  globals['sys.query'] = '';
  globals['sys.user_id'] = '';
  globals['sys.conversation_turns'] = 0;
  globals['sys.files'] = [];
  globals['sys.date'] = '';
  for (const [key, value] of Object.entries(workflow.globals)) {
    if (key.startsWith('sys.') && key !== 'sys.history') globals[key] = emptyLike(value);
    else if (key.startsWith('env.')) globals[key] = value;
  }
  for (const [name, variable] of Object.entries(workflow.variables)) {
    if (!isRecord(variable)) continue;
    const value = variable.value;
    globals[`env.${name}`] = value === undefined || value === null ? emptyOfType(variable.type) : value;
  }
  return globals;
}

function emptyLike(value: unknown): unknown {
  if (typeof value === 'string') return '';
  if (typeof value === 'number') return 0;
  if (typeof value === 'boolean') return false;
  if (Array.isArray(value)) return [];
  if (isRecord(value)) return {};
  return null;
}

function emptyOfType(type: unknown): unknown {
  const t = typeof type === 'string' ? type.toLowerCase() : '';
  if (t.startsWith('array')) return [];
  if (t.startsWith('object')) return {};
  if (t === 'number' || t === 'integer' || t === 'float') return 0;
  if (t === 'boolean') return false;
  return '';
}

function parseRunInput(input: RunInput): ParsedInput {
  if (!isRecord(input as unknown)) throw new InvalidRunInputError('run_input', 'must be an object');
  const { query, inputs, files, user_id: userId, signal, command } = input;
  if (command !== undefined && command !== null && command !== 'timeout') {
    throw new InvalidRunInputError('command', 'must be "timeout" (stop has its own method)');
  }
  if (query !== undefined && query !== null && typeof query !== 'string') {
    throw new InvalidRunInputError('query', 'must be a string');
  }
  if (inputs !== undefined && inputs !== null && !isRecord(inputs)) {
    throw new InvalidRunInputError('inputs', 'must be an object of field values');
  }
  if (files !== undefined && files !== null && !Array.isArray(files)) {
    throw new InvalidRunInputError('files', 'must be a list');
  }
  if (userId !== undefined && userId !== null && typeof userId !== 'string') {
    throw new InvalidRunInputError('user_id', 'must be a string');
  }
  return {
    timeout: command === 'timeout',
    query: query === null || query === undefined || query === '' ? undefined : query,
    inputs: inputs ?? undefined,
    files: files ?? undefined,
    userId: userId || undefined,
    signal: signal ?? NEVER_ABORTED,
  };
}

function fieldView(field: FormField, value: unknown): FieldView {
  return {
    name: field.name,
    type: field.type,
    optional: field.optional,
    ...(field.options ? { options: field.options } : {}),
    ...(field.description ? { description: field.description } : {}),
    value: value ?? null,
  };
}

function hasStream(outputs: Outputs): boolean {
  return Object.values(outputs).some((v) => v instanceof TextStream);
}

function streamError(outputs: Outputs): string | null {
  for (const v of Object.values(outputs)) {
    if (v instanceof TextStream && v.error !== undefined) return errorMessage(v.error);
  }
  return null;
}

function unique(ids: readonly string[]): string[] {
  return [...new Set(ids)];
}

function positive(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? Math.floor(value) : fallback;
}

function formatDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return typeof error === 'string' ? error : 'component failed';
}
