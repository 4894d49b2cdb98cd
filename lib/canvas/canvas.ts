/**
 * The Canvas: one run of a compiled workflow. `run()` executes a turn — it starts a pass at
 * Begin or resumes the pending forms — and yields events until the workflow pauses for input
 * or ends; `serialize()` returns the whole state as JSON and `Canvas.restore()` continues it in
 * another process with the same result as if it had never stopped.
 *
 * This file is the public shell: options, the turn's entry points and the run's lifecycle.
 * The batches of a turn are scheduled in turn-loop.ts, forms in form-state.ts, and the ends
 * of a turn (pause, finish, failure, abort) in turn-ends.ts.
 *
 * @example
 *   const canvas = Canvas.create(compileWorkflow(dsl, builtinComponents));
 *   for await (const e of canvas.run({ query: 'hi' })) console.log(e.event);
 *   await store.save(canvas.serialize()); // after the run ended: paused or finished
 */
import { type CallRecord, CallLog, CallReplay, type ReplayDivergence } from './calls';
import { EaselError } from '../errors';
import { type BeginRules, type CanvasCore, elapsedInPass, emptyUsage, seconds, type TurnUsage } from './canvas-core';
import { appendHistory, nodeState, type RunScope } from './context';
import type { Workflow } from './dsl';
import { InvalidInputsError, NoTimerArmedError, NotWaitingForInputError, RunFinishedError } from './errors';
import { type CanvasEvent, event } from './events';
import { applySubmission, arrive, fields, formState, mergeValues, normalize, type Submission } from './form-state';
import type { FormField } from './forms';
import { isRecord } from './references';
import { NEVER_ABORTED, parseRunInput, type RunInput } from './run-input';
import { type CanvasState, dict, type PendingPrompt, readState, type RunStatus, STATE_VERSION, type TurnHistoryEntry } from './state';
import { pause } from './turn-ends';
import { callCompleted, drive, pausedCalls, type TurnCheckpoint, type TurnControl } from './turn-loop';

export type { BeginRules, TurnUsage } from './canvas-core';
export type { RunInput } from './run-input';
export type { BatchInfo, TurnCheckpoint, TurnControl } from './turn-loop';

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
  /** Whether Begin's form may hold the run (`native`) or never does (`ragflow`). @default 'native' */
  beginRules?: BeginRules;
}

export const DEFAULT_STEP_BUDGET_TURN = 1000;
export const DEFAULT_STEP_BUDGET_RUN = 10_000;
export const DEFAULT_HISTORY_LIMIT = 100;

export class Canvas {
  /** The state and the turn's bookkeeping, shared with the turn loop, forms and ends of a turn. */
  private readonly core: CanvasCore;
  private readonly historyLimit: number;
  private readonly seed: number | undefined;
  private readonly services: Readonly<Record<string, unknown>>;
  private active = false;
  /** Set when a turn did not reach its end (a transient error, an abandoned generator). */
  private broken = false;

  private constructor(
    readonly workflow: Workflow,
    state: CanvasState | undefined,
    options: CanvasOptions,
  ) {
    this.historyLimit = positive(options.historyLimit, DEFAULT_HISTORY_LIMIT);
    this.seed = options.seed;
    this.services = options.services ?? {};
    this.core = {
      workflow,
      beginRules: options.beginRules ?? 'native',
      state: state ?? this.freshState(),
      clock: options.clock ?? Date.now,
      budgetTurn: positive(options.stepBudgetTurn, DEFAULT_STEP_BUDGET_TURN),
      budgetRun: positive(options.stepBudgetRun, DEFAULT_STEP_BUDGET_RUN),
      usage: emptyUsage(),
      turnHistory: [],
      calls: new CallLog(),
      previousDue: undefined,
      deferred: [],
      suspended: false,
      batchStart: undefined,
      replay: undefined,
    };
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
    this.core.state = this.freshState();
    this.broken = false;
    this.core.deferred = [];
  }

  get status(): RunStatus {
    return this.core.state.status;
  }

  get frontier(): readonly string[] {
    return this.core.state.frontier;
  }

  /** What the run waits for while `waiting_for_input`: the fields still needed and the tips. */
  get prompt(): PendingPrompt | null {
    return this.core.state.prompt;
  }

  /** Model tokens spent by the last turn. */
  get lastTurnUsage(): TurnUsage {
    return { ...this.core.usage };
  }

  get mode(): 'conversational' | 'task' {
    const entry = this.workflow.node(this.workflow.entryId);
    return entry.definition.entry?.mode(entry.params) ?? 'conversational';
  }

  get prologue(): string {
    return entryPrologue(this.workflow);
  }

  /** The run accepts no further turn. */
  get isTerminal(): boolean {
    const s = this.core.state.status;
    if (s === 'cancelled' || s === 'aborted_looping_risk') return true;
    // RAGFlow runs every message from Begin again, whatever the mode: its task runs never finish
    return (s === 'completed' || s === 'failed') && this.mode === 'task' && this.core.beginRules === 'native';
  }

  /** The state as JSON-ready data. Valid between turns only. */
  serialize(): CanvasState {
    this.assertIdle();
    return this.core.state;
  }

  /**
   * Runs one turn. Validation errors (`InvalidRunInputError`, `InvalidInputsError`,
   * `RunFinishedError`, `NotWaitingForInputError`) are thrown before anything changes; a
   * `TransientError` thrown midway leaves this object unusable — reload the last saved state.
   */
  async *run(input: RunInput = {}, control: TurnControl = {}): AsyncGenerator<CanvasEvent, void, undefined> {
    const { request, resuming, targets, submission } = this.prepare(input);
    const core = this.core;
    this.active = true;
    this.broken = true;
    core.suspended = false;
    core.usage = emptyUsage();
    core.turnHistory = [];
    core.calls = new CallLog();
    core.replay = undefined;
    core.batchStart = undefined;
    core.previousDue = resuming && !request.timeout ? core.state.prompt?.due_at : undefined;
    try {
      const scope = this.scope(request.signal, control);
      const s = core.state;
      s.globals['sys.date'] = formatDate(core.clock());
      if (request.userId !== undefined) s.globals['sys.user_id'] = request.userId;
      if (request.files !== undefined) s.globals['sys.files'] = request.files;
      if (resuming && request.timeout) {
        for (const id of targets) {
          if (this.workflow.node(id).definition.form?.timeoutSeconds?.(this.workflow.node(id).params) !== undefined) {
            nodeState(core.state, id).form = { ...formState(core, id), timedOut: true };
          }
        }
      } else if (resuming) {
        this.recordQuery(scope, request.query);
        applySubmission(core, targets, submission, request.query !== undefined);
        // a component that paused mid-run runs again: the calls it had made are answered from their records
        const earlier = pausedCalls(core, targets);
        if (earlier.length > 0) core.replay = new CallReplay(earlier);
      } else {
        this.startPass(request.inputs ?? null);
        this.recordQuery(scope, request.query, true);
        yield event('workflow_started', { inputs: request.inputs ?? null, created_at: seconds(core) });
        if (submission) mergeValues(core, this.workflow.entryId, submission.get(this.workflow.entryId) ?? {});
        if (request.webhookPayload) mergeValues(core, this.workflow.entryId, request.webhookPayload);
      }
      s.status = 'running';
      s.prompt = null;
      yield* drive(core, scope, { steps: 0 }, control);
      this.broken = core.suspended;
    } finally {
      this.active = false;
    }
  }

  /**
   * Finishes a turn from a checkpoint taken by `afterBatch` or `afterCall` (the canvas
   * restored from `checkpoint.state`): the batches already run are not run again, and the
   * calls a checkpoint inside a batch kept are answered from their records.
   */
  async *continueTurn(checkpoint: TurnCheckpoint, control: TurnControl = {}, signal?: AbortSignal): AsyncGenerator<CanvasEvent, void, undefined> {
    this.assertIdle();
    const core = this.core;
    if (core.state.status !== 'running' || core.state.pass === null) {
      throw new EaselError('invalid_state', `a checkpoint must be taken mid-turn (status is ${core.state.status})`);
    }
    this.active = true;
    this.broken = true;
    core.suspended = false;
    core.usage = { ...checkpoint.usage };
    core.turnHistory = [...checkpoint.history];
    core.calls = new CallLog(checkpoint.calls ?? {});
    // a checkpoint inside a batch holds every call of the batch so far (those a paused component
    // had made and answered again among them); between batches, a paused component's calls are its own
    const replay = checkpoint.replay && checkpoint.replay.length > 0 ? checkpoint.replay : pausedCalls(core, core.state.frontier);
    core.replay = replay.length > 0 ? new CallReplay(replay) : undefined;
    core.batchStart = undefined;
    core.previousDue = undefined;
    try {
      yield* drive(core, this.scope(signal ?? NEVER_ABORTED, control), { steps: checkpoint.steps }, control);
      this.broken = core.suspended;
    } finally {
      this.active = false;
    }
  }

  /** The last turn stopped at a checkpoint because `afterBatch` said `suspend`. */
  get isSuspended(): boolean {
    return this.core.suspended;
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
    const state = this.core.state;
    const status = state.status;
    if (this.isTerminal) throw new RunFinishedError(status);
    const resuming = status === 'waiting_for_input';
    const hasInputs = request.inputs !== undefined && Object.keys(request.inputs).length > 0;
    // RAGFlow's Begin takes inputs on every pass; Easel's only on the first (later ones keep them)
    if (!resuming && hasInputs && status !== 'not_started' && this.core.beginRules !== 'ragflow') throw new NotWaitingForInputError(status);
    if (request.timeout && (!resuming || state.prompt?.due_at === undefined)) {
      throw new NoTimerArmedError(status);
    }
    const targets = resuming ? (state.prompt?.component_ids ?? []) : [this.workflow.entryId];
    let submission = request.inputs === undefined ? undefined : normalize(this.core, targets, request.inputs);
    if (!resuming && !hasInputs && request.query !== undefined) submission = this.queryFill(request.query) ?? submission;
    return { request, resuming, targets, submission };
  }

  /**
   * RAGFlow's rule for a new pass without inputs: the query fills a Begin that has exactly one
   * field. A query the field's type cannot take (or a file field) fills nothing.
   */
  private queryFill(query: string): Submission | undefined {
    const entry = this.workflow.entryId;
    const own = fields(this.core, entry);
    const field = own.length === 1 ? (own[0] as FormField) : undefined;
    // a file field takes uploads, never text
    if (!field || field.type === 'file') return undefined;
    try {
      return normalize(this.core, [entry], { [field.key]: query });
    } catch (error) {
      if (error instanceof InvalidInputsError) return undefined;
      throw error;
    }
  }

  /** The fields a turn's `inputs` would answer now: the waiting forms', or Begin's on a new pass. */
  inputFields(): { componentId: string; field: FormField }[] {
    const state = this.core.state;
    const targets = state.status === 'waiting_for_input' ? (state.prompt?.component_ids ?? []) : [this.workflow.entryId];
    return targets.flatMap((componentId) => fields(this.core, componentId).map((field) => ({ componentId, field })));
  }

  /**
   * Conversation entries the last turn added (its user query, the messages shown); an
   * assistant entry whose `message_end` carried references has them as its third element.
   */
  get lastTurnHistory(): readonly TurnHistoryEntry[] {
    return this.core.turnHistory;
  }

  /** The calls outside the run the last turn made, and how many past the bound went unrecorded. */
  get lastTurnCalls(): { records: readonly CallRecord[]; dropped: number } {
    return { records: this.core.calls.records, dropped: this.core.calls.dropped };
  }

  /**
   * Of the last turn, resumed inside a batch: how many calls were answered from their records,
   * and where a call differed from its record (from there it went live).
   */
  get lastTurnReplay(): { replayed: number; diverged: readonly ReplayDivergence[] } {
    return { replayed: this.core.replay?.replayed ?? 0, diverged: this.core.replay?.diverged ?? [] };
  }

  /**
   * Asks the pending forms again as this canvas's workflow has them, running nothing: for a run
   * moved onto another version of its workflow, whose fields and tips may differ. The values
   * answered so far stay, and so does the deadline of an armed timer (a timer the workflow no
   * longer has is disarmed; one it gained is armed from now). Ends with `user_inputs`.
   */
  async *reask(): AsyncGenerator<CanvasEvent, void, undefined> {
    this.assertIdle();
    const core = this.core;
    const s = core.state;
    if (s.status !== 'waiting_for_input' || !s.prompt) throw new NotWaitingForInputError(s.status);
    const holding = s.prompt.component_ids;
    this.active = true;
    this.broken = true;
    core.usage = emptyUsage();
    core.turnHistory = [];
    core.calls = new CallLog();
    core.replay = undefined;
    core.batchStart = undefined;
    core.previousDue = s.prompt.due_at;
    try {
      yield* pause(core, this.scope(NEVER_ABORTED, {}), holding);
      this.broken = false;
    } finally {
      this.active = false;
    }
  }

  /** A `stop` turn: the run ends as `cancelled`. */
  async *stop(): AsyncGenerator<CanvasEvent, void, undefined> {
    this.assertIdle();
    if (this.isTerminal) throw new RunFinishedError(this.core.state.status);
    const s = this.core.state;
    s.status = 'cancelled';
    s.frontier = [];
    s.prompt = null;
    yield event('workflow_cancelled', { elapsed_time: elapsedInPass(this.core), created_at: seconds(this.core) });
  }

  // ---- helpers -------------------------------------------------------------------------

  private startPass(inputs: Record<string, unknown> | null): void {
    const s = this.core.state;
    const nodes = dict<CanvasState['nodes'][string]>();
    for (const [id, ns] of Object.entries(s.nodes)) {
      const node = this.workflow.nodes.get(id);
      if (ns.form && node?.definition.form?.keepValues) nodes[id] = { form: ns.form };
    }
    s.nodes = nodes;
    // references are the pass's, as RAGFlow starts a new `retrieval` entry per run
    delete s.retrieval;
    s.pass = {
      number: (s.pass?.number ?? 0) + 1,
      inputs,
      started_at: this.core.clock(),
      steps: 0,
      last: null,
    };
    s.frontier = [this.workflow.entryId];
    arrive(this.core, this.workflow.entryId);
    this.core.deferred = [];
  }

  private recordQuery(scope: RunScope, query: string | undefined, newPass = false): void {
    const g = this.core.state.globals;
    if (query !== undefined) {
      g['sys.query'] = query;
      appendHistory(scope, 'user', query);
    }
    if (query !== undefined || newPass) {
      const turns = typeof g['sys.conversation_turns'] === 'number' ? g['sys.conversation_turns'] : 0;
      g['sys.conversation_turns'] = turns + 1;
    }
  }

  private scope(signal: AbortSignal, control: TurnControl): RunScope {
    const core = this.core;
    return {
      workflow: this.workflow,
      state: core.state,
      historyLimit: this.historyLimit,
      now: core.clock,
      random: () => this.random(),
      signal,
      services: this.services,
      onHistory: (entry) => core.turnHistory.push(entry),
      recordCall: (componentId, report) => core.calls.add(componentId, this.workflow.containersOf(componentId), report),
      replayCall: (componentId, call, accept) => {
        const path = this.workflow.containersOf(componentId);
        return core.replay?.take(componentId, path, call, accept) ?? control.recorded?.take(componentId, path, call, accept);
      },
      callCompleted: () => callCompleted(core, control),
      recordUsage: (u) => {
        core.usage.prompt_tokens += u.prompt_tokens;
        core.usage.completion_tokens += u.completion_tokens;
        core.usage.total_tokens += u.total_tokens;
        core.usage.calls += 1;
      },
    };
  }

  /** mulberry32: small, fast, and its whole state is one integer we can serialize. */
  private random(): number {
    let t = (this.core.state.rng = (this.core.state.rng + 0x6d2b79f5) | 0);
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

  private assertIdle(): void {
    if (this.active) throw new EaselError('turn_in_progress', 'this canvas is running a turn');
    if (this.broken) {
      throw new EaselError('invalid_state', 'a turn of this canvas did not complete; restore the saved state');
    }
  }
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

function positive(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? Math.floor(value) : fallback;
}

function formatDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

/** What a workflow's entry (Begin) says before the first turn; '' when it says nothing. */
export function entryPrologue(workflow: Workflow): string {
  const entry = workflow.node(workflow.entryId);
  return entry.definition.entry?.prologue(entry.params) ?? '';
}
