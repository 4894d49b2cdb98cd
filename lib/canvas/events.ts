/**
 * Events of a run, named and shaped as RAGFlow's canvas yields them, plus real terminal events
 * for failure, cancellation, interruption and the loop-safety abort. Exactly one of
 * `workflow_finished`, `workflow_failed`, `workflow_cancelled`, `workflow_interrupted`,
 * `workflow_aborted` or `user_inputs` ends every run.
 * Times are epoch seconds (`created_at`) and seconds (`elapsed_time`).
 */
import type { Outputs } from './component';
import type { FormField } from './forms';

export interface FieldView {
  name: string;
  type: FormField['type'];
  optional: boolean;
  options?: string[];
  /** A decision field's choices, in button order (see FormField). */
  decisions?: { id: string; label: string }[];
  description?: string;
  /** An `object` field's JSON Schema, which a changed value must fit (see FormField). */
  schema?: Record<string, unknown>;
  value: unknown;
}

export interface NodeEventBase {
  component_id: string;
  /** The display name from the DSL's `graph`, or the id when there is none. */
  component_name: string;
  /** The `component_name` of the DSL, e.g. `Message`. */
  component_type: string;
  created_at: number;
}

export interface EventPayloads {
  workflow_started: { inputs: Record<string, unknown> | null; created_at: number };
  node_started: NodeEventBase & { inputs: null; thoughts: string };
  message: { content: string };
  message_end: Record<string, unknown>;
  node_finished: NodeEventBase & {
    inputs: null;
    outputs: Outputs;
    error: string | null;
    elapsed_time: number;
  };
  user_inputs: { inputs: Record<string, FieldView>; tips: string };
  workflow_finished: {
    inputs: Record<string, unknown> | null;
    outputs: Outputs;
    elapsed_time: number;
    created_at: number;
    /** Model tokens spent in this turn. */
    usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number; calls: number };
  };
  workflow_failed: {
    error: { code: string; message: string; component_id?: string };
    elapsed_time: number;
    created_at: number;
  };
  workflow_cancelled: { elapsed_time: number; created_at: number };
  /** The pass ended before its next batch: a newer input interrupted the turn (on_busy `interrupt`). */
  workflow_interrupted: { elapsed_time: number; created_at: number };
  workflow_aborted: {
    reason: 'step_budget_turn' | 'step_budget_run';
    budget: number;
    steps: number;
    elapsed_time: number;
    created_at: number;
  };
}

export type EventName = keyof EventPayloads;

export type CanvasEvent = { [K in EventName]: { event: K; data: EventPayloads[K] } }[EventName];

export type TerminalEventName =
  | 'workflow_finished'
  | 'workflow_failed'
  | 'workflow_cancelled'
  | 'workflow_interrupted'
  | 'workflow_aborted'
  | 'user_inputs';

export function event<K extends EventName>(name: K, data: EventPayloads[K]): CanvasEvent {
  return { event: name, data } as CanvasEvent;
}
