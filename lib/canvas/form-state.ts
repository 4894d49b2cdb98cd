/**
 * The forms of a run: which scheduled nodes wait for input, the values kept per form, and
 * how a turn's submitted inputs are checked and merged before anything runs.
 */
import type { CanvasCore } from './canvas-core';
import { nodeState } from './context';
import { InvalidInputsError, type InputProblem } from './errors';
import { fieldSatisfied, type FormField, isEmptyValue, normalizeFieldValue } from './forms';
import { dict, type FormState } from './state';

/** Normalised submission: per form node, the values of its own fields. */
export type Submission = Map<string, Record<string, unknown>>;

/** The fields a node asks: those of the pause it requested, else its form's. */
export function fields(core: CanvasCore, id: string): FormField[] {
  const pause = core.state.nodes[id]?.pause;
  if (pause) return pause.fields;
  const node = core.workflow.node(id);
  return node.definition.form?.fields(node.params) ?? [];
}

export function needsInput(core: CanvasCore, id: string): boolean {
  const node = core.workflow.node(id);
  const form = node.definition.form;
  const paused = core.state.nodes[id]?.pause !== undefined;
  if (!form && !paused) return false;
  if (!paused && core.beginRules === 'ragflow' && id === core.workflow.entryId) return false;
  const state = formState(core, id);
  if (state.timedOut) return false;
  // a pause asks its optional fields once, as a form that holds for them does
  const settled = paused ? state.submitted : !form?.holdForOptional || state.submitted;
  return fields(core, id).some((f) => !fieldSatisfied(f, state.values[f.key], settled));
}

export function formState(core: CanvasCore, id: string): FormState {
  const ns = nodeState(core.state, id);
  ns.form ??= { values: presets(core, id), submitted: false };
  return ns.form;
}

function presets(core: CanvasCore, id: string): Record<string, unknown> {
  const values = dict();
  for (const f of fields(core, id)) if (!isEmptyValue(f.value, f.type)) values[f.key] = f.value;
  return values;
}

/** A node was scheduled: a form that asks on every visit starts from its presets again. */
export function arrive(core: CanvasCore, id: string): void {
  const form = core.workflow.node(id).definition.form;
  if (form && !form.keepValues) nodeState(core.state, id).form = { values: presets(core, id), submitted: false };
}

/** Checks and converts submitted values for `targets` before anything changes. */
export function normalize(core: CanvasCore, targets: readonly string[], inputs: Record<string, unknown>): Submission {
  const problems: InputProblem[] = [];
  const submission: Submission = new Map();
  for (const id of targets) {
    const values = dict();
    for (const field of fields(core, id)) {
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
export function applySubmission(
  core: CanvasCore,
  targets: readonly string[],
  submission: Submission | undefined,
  hasQuery: boolean,
): void {
  const empty = submission === undefined
    ? !hasQuery
    : [...submission.values()].every((v) => Object.keys(v).length === 0);
  for (const id of targets) {
    if (submission === undefined && hasQuery) continue;
    if (empty) {
      nodeState(core.state, id).form = { values: dict(), submitted: false };
      continue;
    }
    mergeValues(core, id, submission?.get(id) ?? {});
  }
}

export function mergeValues(core: CanvasCore, id: string, values: Record<string, unknown>): void {
  const form = formState(core, id);
  const merged = dict();
  Object.assign(merged, form.values);
  for (const [k, v] of Object.entries(values)) {
    if (v === null) delete merged[k];
    else merged[k] = v;
  }
  nodeState(core.state, id).form = { values: merged, submitted: true };
}
