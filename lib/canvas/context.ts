/**
 * Reading and writing run variables, and the `ComponentContext` handed to each invocation.
 * Outputs are replaced, never mutated in place, so serializing the state needs no copy and
 * a value handed to one component cannot be changed under another.
 */
import type { CallReport, CompletedCall } from './calls';
import type { ComponentContext, Outputs, ParentHandle, TokenUsage } from './component';
import type { Workflow } from './dsl';
import type { EventQueue } from './event-queue';
import { type CanvasEvent, event } from './events';
import {
  asReference,
  exactReference,
  getPath,
  isRecord,
  type Reference,
  splitTemplate,
  valueToText,
} from './references';
import { emptyReference, hasReference, narrowed, type ReferenceChunk, type ReferenceDocument, type RunReference, withAdded } from './run-references';
import { type CanvasState, dict, type HistoryEntry, type NodeState, type TurnHistoryEntry } from './state';
import { TextStream } from './text-stream';

/** The value of a reference that has no meaning where it is used (`{item}` outside an Iteration). */
export const UNRESOLVED: unique symbol = Symbol('unresolved');

/** The mutable side of a run shared by the engine and the contexts it creates. */
export interface RunScope {
  readonly workflow: Workflow;
  readonly state: CanvasState;
  readonly historyLimit: number;
  now(): number;
  random(): number;
  readonly signal: AbortSignal;
  readonly services: Readonly<Record<string, unknown>>;
  recordUsage(usage: TokenUsage): void;
  /** Records a call outside the run (see calls.ts). */
  recordCall?(componentId: string, report: CallReport): void;
  /** The recorded outcome of a call of the batch in flight (a resumed turn), if there is one. */
  replayCall?(componentId: string, call: Pick<CallReport, 'kind' | 'name' | 'request'>, accept?: (call: CompletedCall) => boolean): CompletedCall | undefined;
  /** Keeps a checkpoint of the calls completed so far, where the turn keeps checkpoints. */
  callCompleted?(): Promise<void>;
  /** Told of every history entry added (with the references its message sent), so a store can keep per-turn deltas. */
  onHistory?(entry: TurnHistoryEntry): void;
}

export function nodeState(state: CanvasState, id: string): NodeState {
  let node = state.nodes[id];
  if (!node) {
    node = {};
    state.nodes[id] = node;
  }
  return node;
}

export function appendHistory(scope: RunScope, role: 'user' | 'assistant', content: string, reference?: RunReference): void {
  const history = scope.state.history;
  const entry: HistoryEntry = [role, content];
  history.push(entry);
  scope.onHistory?.(role === 'assistant' && reference ? [role, content, reference] : entry);
  if (history.length > scope.historyLimit) history.splice(0, history.length - scope.historyLimit);
}

/** The raw value of a reference as seen from `fromId`; streams are returned as they are. */
export function lookup(scope: RunScope, ref: Reference, fromId: string): unknown {
  const { state, workflow } = scope;
  switch (ref.kind) {
    case 'component': {
      const outputs = state.nodes[ref.componentId]?.outputs;
      const value = outputs && Object.hasOwn(outputs, ref.output) ? outputs[ref.output] : undefined;
      return ref.path.length === 0 || value instanceof TextStream ? value : getPath(value, ref.path);
    }
    case 'global': {
      const value = ref.name === 'sys.history'
        ? state.history.map(([role, content]) => `${role}: ${content}`)
        : Object.hasOwn(state.globals, ref.name) ? state.globals[ref.name] : undefined;
      return getPath(value, ref.path);
    }
    case 'scope': {
      let container = workflow.nodes.get(fromId)?.parentId;
      while (container !== undefined) {
        const node = workflow.nodes.get(container);
        const entry = node?.scopeEntryId;
        const outputs = entry === undefined ? undefined : state.nodes[entry]?.outputs;
        if (outputs && Object.hasOwn(outputs, ref.name)) return outputs[ref.name];
        container = node?.parentId;
      }
      return UNRESOLVED;
    }
  }
}

/** Like `lookup`, but waits for streams and walks the rest of a path through their text. */
export async function settledLookup(scope: RunScope, ref: Reference, fromId: string): Promise<unknown> {
  const value = lookup(scope, ref, fromId);
  if (!(value instanceof TextStream)) return value;
  const text = await value.text();
  return ref.kind === 'component' ? getPath(text, ref.path) : text;
}

export function writeVariable(scope: RunScope, target: string, value: unknown): void {
  const ref = asReference(target);
  if (!ref) throw new Error(`"${target}" is not a variable reference`);
  if (ref.kind === 'scope') throw new Error(`cannot assign to {${ref.raw}}`);
  if (ref.kind === 'global') {
    const globals = scope.state.globals;
    globals[ref.name] = ref.path.length === 0 ? value : setPath(globals[ref.name], ref.path, value);
    return;
  }
  if (!scope.workflow.nodes.has(ref.componentId)) throw new Error(`unknown component "${ref.componentId}"`);
  const node = nodeState(scope.state, ref.componentId);
  const outputs = copyOutputs(node.outputs);
  outputs[ref.output] = ref.path.length === 0 ? value : setPath(outputs[ref.output], ref.path, value);
  node.outputs = outputs;
}

/** A copy of `base` with `value` at `path`, creating objects on the way; `base` is untouched. */
function setPath(base: unknown, path: readonly string[], value: unknown): unknown {
  const [head, ...rest] = path;
  if (head === undefined) return value;
  if (Array.isArray(base) && /^\d+$/.test(head)) {
    const copy = [...base];
    copy[Number(head)] = setPath(base[Number(head)], rest, value);
    return copy;
  }
  const copy = dict();
  if (isRecord(base)) Object.assign(copy, base);
  copy[head] = setPath(isRecord(base) ? base[head] : undefined, rest, value);
  return copy;
}

function copyOutputs(outputs: Outputs | undefined): Outputs {
  const copy = dict();
  if (outputs) for (const [k, v] of Object.entries(outputs)) copy[k] = v;
  return copy;
}

/** One invocation's view of the run. Events go to the node's own queue. */
export class NodeContext implements ComponentContext {
  readonly componentId: string;
  readonly parentId: string | undefined;
  readonly downstream: readonly string[];
  readonly downstreamStreams: boolean;
  readonly handlesErrors: boolean;
  private messageText = '';

  constructor(
    private readonly scope: RunScope,
    id: string,
    private readonly events: EventQueue<CanvasEvent>,
    readonly formValues: Readonly<Record<string, unknown>>,
    readonly timedOut = false,
    readonly resumed?: { readonly data: unknown },
  ) {
    const node = scope.workflow.node(id);
    this.componentId = id;
    this.parentId = node.parentId;
    this.downstream = node.downstream;
    this.downstreamStreams = node.downstream.some((d) => scope.workflow.nodes.get(d)?.definition.streamsInput === true);
    this.handlesErrors = node.exception.method !== null;
  }

  get signal(): AbortSignal {
    return this.scope.signal;
  }

  get services(): Readonly<Record<string, unknown>> {
    return this.scope.services;
  }

  recordUsage(usage: TokenUsage): void {
    this.scope.recordUsage(usage);
  }

  recordCall(report: CallReport): void {
    this.scope.recordCall?.(this.componentId, report);
  }

  recordedCall(call: Pick<CallReport, 'kind' | 'name' | 'request'>, accept?: (call: CompletedCall) => boolean): CompletedCall | undefined {
    return this.scope.replayCall?.(this.componentId, call, accept);
  }

  async callCompleted(): Promise<void> {
    await this.scope.callCompleted?.();
  }

  history(limit: number): readonly { role: 'user' | 'assistant'; content: string }[] {
    const entries = limit > 0 ? this.scope.state.history.slice(-limit) : [];
    return entries.map(([role, content]) => ({ role, content }));
  }

  async get(reference: string): Promise<unknown> {
    const ref = asReference(reference);
    if (!ref) return undefined;
    const value = await settledLookup(this.scope, ref, this.componentId);
    return value === UNRESOLVED ? undefined : value;
  }

  async resolve(value: unknown): Promise<unknown> {
    if (typeof value === 'string') {
      const ref = exactReference(value);
      if (ref) {
        const raw = await settledLookup(this.scope, ref, this.componentId);
        return raw === UNRESOLVED ? value : raw;
      }
      return value.includes('{') ? this.render(value) : value;
    }
    if (Array.isArray(value)) return Promise.all(value.map((v) => this.resolve(v)));
    if (isRecord(value)) {
      const out = dict();
      for (const [k, v] of Object.entries(value)) out[k] = await this.resolve(v);
      return out;
    }
    return value;
  }

  async render(template: string): Promise<string> {
    let text = '';
    for (const part of splitTemplate(template)) {
      if ('text' in part) {
        text += part.text;
        continue;
      }
      const value = await settledLookup(this.scope, part.ref, this.componentId);
      text += value === UNRESOLVED ? part.source : valueToText(value);
    }
    return text;
  }

  async *renderStream(template: string): AsyncGenerator<string, void, undefined> {
    for (const part of splitTemplate(template)) {
      if ('text' in part) {
        yield part.text;
        continue;
      }
      const value = lookup(this.scope, part.ref, this.componentId);
      if (value instanceof TextStream && part.ref.kind === 'component' && part.ref.path.length === 0) {
        yield* value.read();
      } else {
        const settled = await settledLookup(this.scope, part.ref, this.componentId);
        yield settled === UNRESOLVED ? part.source : valueToText(settled);
      }
    }
  }

  message(delta: string): void {
    if (delta === '') return;
    this.messageText += delta;
    this.events.push(event('message', { content: delta }));
  }

  /** As RAGFlow's `_build_message_end`: the pass's references go with the message, when there are any. */
  messageEnd(data: Record<string, unknown> = {}): void {
    const reference = this.scope.state.retrieval;
    const withReference = hasReference(reference);
    this.events.push(event('message_end', withReference && data.reference === undefined ? { ...data, reference } : data));
    if (this.messageText !== '') appendHistory(this.scope, 'assistant', this.messageText, withReference ? reference : undefined);
    this.messageText = '';
  }

  /** What this invocation added to the pass's references, in order (taken back if it pauses). */
  readonly addedReferences: { chunks: readonly ReferenceChunk[]; docs: readonly ReferenceDocument[] }[] = [];

  addReference(chunks: readonly ReferenceChunk[], docs: readonly ReferenceDocument[]): void {
    if (chunks.length === 0 && docs.length === 0) return;
    this.addedReferences.push({ chunks, docs });
    this.scope.state.retrieval = withAdded(this.scope.state.retrieval, chunks, docs);
  }

  reference(): Readonly<RunReference> {
    return this.scope.state.retrieval ?? emptyReference();
  }

  keepReferences(citationIds: readonly string[], docNames: readonly string[]): void {
    const current = this.scope.state.retrieval;
    if (!current) return;
    const next = narrowed(current, citationIds, docNames);
    if (hasReference(next)) this.scope.state.retrieval = next;
    else delete this.scope.state.retrieval;
  }

  setVariable(reference: string, value: unknown): void {
    writeVariable(this.scope, reference, value);
  }

  memo<T>(): T | undefined {
    return this.scope.state.nodes[this.componentId]?.memo as T | undefined;
  }

  setMemo(value: unknown): void {
    nodeState(this.scope.state, this.componentId).memo = value;
  }

  parent(): ParentHandle | undefined {
    const id = this.parentId;
    if (id === undefined) return undefined;
    const { state, workflow } = this.scope;
    return {
      id,
      params: workflow.node(id).params,
      outputs: () => state.nodes[id]?.outputs ?? dict(),
      setOutputs: (outputs) => {
        nodeState(state, id).outputs = copyOutputs(outputs);
      },
      memo: <T>() => state.nodes[id]?.memo as T | undefined,
      setMemo: (value) => {
        nodeState(state, id).memo = value;
      },
    };
  }

  random(): number {
    return this.scope.random();
  }

  now(): number {
    return this.scope.now();
  }
}
