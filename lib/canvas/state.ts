/**
 * The complete runtime state of a run, as plain JSON. `Canvas.serialize()` returns it and
 * `Canvas.restore()` accepts it in a fresh process; the pair must give the same events as a
 * run that never stopped. It carries a schema version; older versions are upgraded on load.
 * The DSL is not part of it: a run is pinned to a workflow version stored elsewhere.
 */
import type { CompletedCall } from './calls';
import type { Outputs } from './component';
import type { FormField, PauseMail } from './forms';
import { StateVersionError } from './errors';
import type { FieldView } from './events';
import { readReference, type RunReference } from './run-references';

export const STATE_VERSION = 1;

export const RUN_STATUSES = [
  'not_started',
  'running',
  'waiting_for_input',
  'completed',
  'failed',
  'cancelled',
  'aborted_looping_risk',
  /** An async turn stopped at a checkpoint by a newer input (on_busy `interrupt`): the pass ended there; not terminal. */
  'interrupted',
] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export interface FormState {
  values: Record<string, unknown>;
  /** The form was submitted at least once during this visit. */
  submitted: boolean;
  /** Its timer fired: it runs without an answer and takes its timeout branch. */
  timedOut?: boolean;
}

export interface NodeState {
  outputs?: Outputs;
  memo?: unknown;
  form?: FormState;
  /** When a container started its current run (epoch ms), for its node_finished. */
  since?: number;
  /** The component asked a person mid-run (PauseRequest): what it asked, and the calls it had completed. */
  pause?: NodePause;
}

export interface NodePause {
  fields: FormField[];
  tips: string;
  /** The component's own, handed back as `ctx.resumed` with the answer. */
  data: unknown;
  /** The calls of the paused invocation, answered from here when it runs again. */
  calls: CompletedCall[];
}

export type HistoryEntry = [role: 'user' | 'assistant', content: string];

/**
 * A conversation entry as a turn records it: an assistant message also carries the references
 * its `message_end` sent (the state's history never does: it stays small).
 */
export type TurnHistoryEntry = HistoryEntry | [role: 'assistant', content: string, reference: RunReference];

export interface PassState {
  /** Counts passes of the workflow in this run, from 1. */
  number: number;
  inputs: Record<string, unknown> | null;
  started_at: number;
  steps: number;
  /** The node whose outputs `workflow_finished` reports (the last one run). */
  last: string | null;
}

export interface PendingPrompt {
  inputs: Record<string, FieldView>;
  tips: string;
  component_ids: string[];
  /** When a waiting form's timer fires (epoch ms); absent: no timer armed. */
  due_at?: number;
  /** The forms asked that want their link e-mailed, and what to send. */
  mail?: PauseMail[];
}

export interface CanvasState {
  v: typeof STATE_VERSION;
  status: RunStatus;
  /** Nodes scheduled to run next, in order; when waiting for input, the forms come first. */
  frontier: string[];
  nodes: Record<string, NodeState>;
  globals: Record<string, unknown>;
  history: HistoryEntry[];
  pass: PassState | null;
  /** What the run is waiting for, while `status` is `waiting_for_input`. */
  prompt: PendingPrompt | null;
  /** State of the deterministic random generator (a 32-bit integer). */
  rng: number;
  /**
   * The current pass's references (run-references.ts): absent until a retrieval adds some,
   * and again from the start of the next pass. States written before it have none.
   */
  retrieval?: RunReference;
}

/** Upgrades from older versions, keyed by the version they read. None yet: v1 is the first. */
const UPGRADES: Record<number, (old: Record<string, unknown>) => Record<string, unknown>> = {};

/**
 * Reads a serialized state, upgrading older versions. The shape is checked by hand rather than
 * with a schema: it runs on every turn, and records are copied into null-prototype objects so
 * that a stored `__proto__` key stays an ordinary key.
 */
export function readState(raw: unknown): CanvasState {
  if (!isPlainObject(raw)) throw new StateVersionError('state must be an object');
  let state = raw;
  let version = typeof state.v === 'number' ? state.v : Number.NaN;
  while (version !== STATE_VERSION) {
    const upgrade = UPGRADES[version];
    if (!upgrade) throw new StateVersionError(`unsupported state version ${String(state.v)}`);
    state = upgrade(state);
    version = state.v as number;
  }
  const bad = (field: string): never => {
    throw new StateVersionError(`malformed state: ${field}`);
  };
  if (!(RUN_STATUSES as readonly unknown[]).includes(state.status)) bad('status');
  if (!isStringArray(state.frontier)) bad('frontier');
  if (!isPlainObject(state.nodes)) bad('nodes');
  if (!isPlainObject(state.globals)) bad('globals');
  if (!Array.isArray(state.history)) bad('history');
  if (state.pass !== null && !isPlainObject(state.pass)) bad('pass');
  if (state.prompt !== null && !isPlainObject(state.prompt)) bad('prompt');
  if (!Number.isInteger(state.rng)) bad('rng');

  const nodes = dict<NodeState>();
  for (const [id, node] of Object.entries(state.nodes as Record<string, unknown>)) {
    if (!isPlainObject(node)) bad(`nodes.${id}`);
    const n = node as Record<string, unknown>;
    const restored: NodeState = {};
    if (n.outputs !== undefined) {
      if (!isPlainObject(n.outputs)) bad(`nodes.${id}.outputs`);
      restored.outputs = toDict(n.outputs as Record<string, unknown>);
    }
    if (n.memo !== undefined) restored.memo = n.memo;
    if (typeof n.since === 'number') restored.since = n.since;
    if (n.form !== undefined) {
      const f = n.form as Record<string, unknown>;
      if (!isPlainObject(f) || !isPlainObject(f.values) || typeof f.submitted !== 'boolean') {
        bad(`nodes.${id}.form`);
      }
      restored.form = { values: toDict(f.values as Record<string, unknown>), submitted: f.submitted as boolean, ...(f.timedOut === true ? { timedOut: true } : {}) };
    }
    if (n.pause !== undefined) {
      const p = n.pause as Record<string, unknown>;
      if (!isPlainObject(p) || !Array.isArray(p.fields) || typeof p.tips !== 'string' || !Array.isArray(p.calls)) bad(`nodes.${id}.pause`);
      restored.pause = { fields: p.fields as FormField[], tips: p.tips as string, data: p.data, calls: p.calls as CompletedCall[] };
    }
    nodes[id] = restored;
  }
  // a turn's entries may carry references: the state keeps role and content only
  const history = (state.history as unknown[])
    .filter((h): h is HistoryEntry => Array.isArray(h) && (h[0] === 'user' || h[0] === 'assistant') && typeof h[1] === 'string')
    .map((h): HistoryEntry => (h.length === 2 ? h : [h[0], h[1]]));
  let retrieval: RunReference | undefined;
  if (state.retrieval !== undefined) {
    retrieval = readReference(state.retrieval);
    if (!retrieval) bad('retrieval');
  }
  return {
    v: STATE_VERSION,
    status: state.status as RunStatus,
    frontier: [...(state.frontier as string[])],
    nodes,
    globals: toDict(state.globals as Record<string, unknown>),
    history,
    pass: (state.pass as PassState | null) ?? null,
    prompt: (state.prompt as PendingPrompt | null) ?? null,
    rng: state.rng as number,
    ...(retrieval ? { retrieval } : {}),
  };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/** A record without a prototype: any string is a safe key. */
export function dict<T = unknown>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}

export function toDict<T>(source: Record<string, T>): Record<string, T> {
  const out = dict<T>();
  for (const [k, v] of Object.entries(source)) out[k] = v;
  return out;
}
