/**
 * The contract between the engine and components. A component is a plain definition — a
 * params schema and an `invoke` — registered by name. It tells the engine what happened
 * through its result (outputs, chosen successors, entering or leaving a scope); the engine
 * acts on results and capabilities, never on component names.
 */
import type { CallReport, CompletedCall } from './calls';
import { z } from 'zod';
import type { DslProblem } from './errors';
import type { FieldType, FormField, PauseMail } from './forms';
import type { ReferenceChunk, ReferenceDocument, RunReference } from './run-references';
import type { TextStream } from './text-stream';

export type Outputs = Record<string, unknown>;

export interface ComponentResult {
  /** Outputs that replace the component's previous ones. */
  outputs?: Outputs;
  /** Successors chosen by the component (a branch), instead of its `downstream`. */
  next?: readonly string[];
  /** A container starts a round of its body: the engine schedules the body's entry node. */
  enterScope?: boolean;
  /** Leave the enclosing container: it finishes and its `downstream` runs next. */
  exitScope?: boolean;
}

/** What a component sees of the run. Small on purpose: no engine internals, no I/O. */
export interface ComponentContext {
  readonly componentId: string;
  /** The component's `parent_id` (its container), if any. */
  readonly parentId: string | undefined;
  readonly downstream: readonly string[];
  /** A downstream component shows streams live (a Message): producing a stream pays off. */
  readonly downstreamStreams: boolean;
  /** This component's `exception_method` handles its errors: fail here, not in a stream read later. */
  readonly handlesErrors: boolean;
  /** What the run was given by its host (model resolvers, HTTP clients); see lib/components/services. */
  readonly services: Readonly<Record<string, unknown>>;
  /**
   * Resolves a param value: a string that is exactly one reference yields the raw value, any
   * other string is rendered as text, arrays and objects are resolved element by element.
   */
  resolve(value: unknown): Promise<unknown>;
  /** The raw value of one reference (`cpn@out.path`, `sys.query`, `item`), streams settled. */
  get(reference: string): Promise<unknown>;
  /** Renders a template as text; references to streams wait for their whole text. */
  render(template: string): Promise<string>;
  /** Renders a template as deltas, passing streamed references through as they arrive. */
  renderStream(template: string): AsyncGenerator<string, void, undefined>;
  /** Shows text to the user: one `message` event per delta, then `message_end`. */
  message(delta: string): void;
  /** Ends the message; its `message_end` carries the pass's references when there are any. */
  messageEnd(data?: Record<string, unknown>): void;
  /**
   * Adds retrieved chunks (JSON, each with its `id`) and their documents to the pass's
   * references (lib/canvas/run-references.ts), which every later `message_end` of the pass sends.
   */
  addReference(chunks: readonly ReferenceChunk[], docs: readonly ReferenceDocument[]): void;
  /** The pass's references so far: chunks by citation id, documents by name (empty when none). */
  reference(): Readonly<RunReference>;
  /** Narrows the pass's references to these citation ids and document names (what an answer cited). */
  keepReferences(citationIds: readonly string[], docNames: readonly string[]): void;
  /** Writes a variable: a component output (`cpn@out`, with a dotted path) or `env.x`. */
  setVariable(reference: string, value: unknown): void;
  /** Counts model tokens towards the turn's `usage`. */
  recordUsage(usage: TokenUsage): void;
  /**
   * Records a call outside the run (a model, a tool, an HTTP request) in the turn, for replay
   * and audit: what was asked (before secrets are filled in) and what came back.
   */
  recordCall(report: CallReport): void;
  /**
   * The outcome of this call as the turn recorded it before it was interrupted: a resumed
   * batch runs again, and answers from here the calls it had completed (see calls.ts). The
   * component reports the call as usual (`recordCall`) with the recorded outcome. Undefined:
   * make the call; so too when the record is of a failure that may not be final. `accept` says
   * whether the component can answer from a record (see `CallSource.take`): one it cannot is
   * not counted as answered.
   */
  recordedCall(call: Pick<CallReport, 'kind' | 'name' | 'request'>, accept?: (call: CompletedCall) => boolean): CompletedCall | undefined;
  /**
   * Awaited after a call made and recorded mid-invocation (an Agent's model round or tool
   * call): an async turn keeps a checkpoint of it, so a crash repeats at most the call in
   * flight. Resolves at once where the turn keeps none (a synchronous turn).
   */
  callCompleted(): Promise<void>;
  /** The conversation so far, oldest first, at most `limit` entries. */
  history(limit: number): readonly { role: 'user' | 'assistant'; content: string }[];
  /** Private state of this component that survives pauses (counters, cursors). */
  memo<T>(): T | undefined;
  setMemo(value: unknown): void;
  /** The enclosing container, for components that drive its rounds. */
  parent(): ParentHandle | undefined;
  /** Values the user submitted to this component's form (form components only). */
  readonly formValues: Readonly<Record<string, unknown>>;
  /** The form's timer fired: it runs without an answer. */
  readonly timedOut: boolean;
  /**
   * This invocation answers a pause the component requested (PauseRequest): the `data` it
   * attached; the answer is in `formValues`. Undefined on any other invocation.
   */
  readonly resumed?: { readonly data: unknown };
  /** Deterministic across pauses: the generator's state is part of the run state. */
  random(): number;
  now(): number;
  readonly signal: AbortSignal;
}

export interface TokenUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ParentHandle {
  readonly id: string;
  readonly params: unknown;
  outputs(): Outputs;
  setOutputs(outputs: Outputs): void;
  memo<T>(): T | undefined;
  setMemo(value: unknown): void;
}

/** A component that asks the user for values (a form) before it can run. */
export interface FormCapability<P> {
  fields(params: P): FormField[];
  /**
   * When false (Begin), optional fields never hold the run; when true (UserFillUp), a field
   * without a value holds it until the form has been submitted once in this visit.
   */
  holdForOptional: boolean;
  /** Values persist from one visit to the next (Begin) instead of being asked anew. */
  keepValues: boolean;
  tips?(params: P, ctx: ComponentContext): Promise<string>;
  /** Seconds the form waits before its timer fires (then it runs with `ctx.timedOut`). */
  timeoutSeconds?(params: P): number | undefined;
  /** The mail that sends the form's link when the run pauses here, rendered against the run; undefined: none. */
  mail?(params: P, ctx: ComponentContext): Promise<Omit<PauseMail, 'component_id'> | undefined>;
}

/** The component that starts every pass of the workflow (Begin). */
export interface EntryCapability<P> {
  mode(params: P): 'conversational' | 'task';
  prologue(params: P): string;
}

/** What `check` can see of the whole DSL. */
export interface CheckScope {
  readonly componentId: string;
  has(componentId: string): boolean;
  componentName(componentId: string): string | undefined;
  parentOf(componentId: string): string | undefined;
  childrenOf(componentId: string): readonly string[];
}

export interface ComponentDefinition<P = unknown> {
  /** `component_name` in the DSL. */
  readonly name: string;
  /** Validates and normalises `obj.params`; unknown keys are tolerated as in RAGFlow. */
  readonly params: z.ZodType<P>;
  invoke(params: P, ctx: ComponentContext): Promise<ComponentResult> | ComponentResult;
  /** How many past exchanges of the conversation it reads (an LLM's history window). */
  historyWindow?(params: P): number;
  /** Ids the component may return in `next` besides its downstream (branch targets). */
  branchTargets?(params: P): readonly string[];
  /** Checks that need the rest of the DSL (branch targets exist, a child of the right kind). */
  check?(params: P, scope: CheckScope): Omit<DslProblem, 'component_id'>[];
  form?: FormCapability<P>;
  entry?: EntryCapability<P>;
  /** Has a body of child components (`parent_id` = this id), run in rounds. */
  container?: boolean;
  /** The first node of its container's body, run at the start of every round. */
  scopeEntry?: boolean;
  /** Shows upstream streams live (Message): producers upstream may hand it a stream. */
  streamsInput?: boolean;
  /**
   * Reaches outside the run (a model, an HTTP endpoint): its work costs time, money or side
   * effects, so a long turn keeps a checkpoint after it rather than do it again after a crash;
   * one that makes several calls (an Agent) also after each of them (`callCompleted`).
   */
  external?: boolean;
  /** The output set to `exception_default_value` when the `comment` method handles an error. */
  defaultOutput?: string;
  /**
   * Known but not offered: a DSL that uses it is refused at load, naming it, with this reason.
   * A registry can override it by name with a real definition.
   */
  refused?: string;
}

/** Registry of components by `component_name`; an explicit map, extended by spreading. */
export type ComponentRegistry = ReadonlyMap<string, ComponentDefinition<any>>;

export function defineComponent<S extends z.ZodType>(
  definition: Omit<ComponentDefinition<z.output<S>>, 'params'> & { params: S },
): ComponentDefinition<z.output<S>> {
  return definition as ComponentDefinition<z.output<S>>;
}

/**
 * A component that is refused when a DSL is loaded, with the reason why.
 *
 * @example
 *   refusedComponent('Browser', 'it drives a web browser, which Easel does not provide')
 */
export function refusedComponent(name: string, reason: string): ComponentDefinition<unknown> {
  return {
    name,
    refused: reason,
    params: z.unknown(),
    invoke() {
      throw new Error(`${name} is not supported: ${reason}`);
    },
  };
}

export function createRegistry(
  ...definitions: readonly ComponentDefinition<any>[]
): ComponentRegistry {
  return new Map(definitions.map((d) => [d.name, d]));
}

export type { FieldType, FormField, PauseMail, TextStream };
