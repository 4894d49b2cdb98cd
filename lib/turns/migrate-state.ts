/**
 * Moving a paused run's state from one version of its workflow to another, component by
 * component. Pure: the state in, the mapped state (or the reason it cannot move) out.
 *
 * - A component with the same id and the same kind in the new version keeps its state
 *   (outputs, form values, Loop/Iteration counters, a pause it asked).
 * - A component the new version removed, or whose kind it changed, drops its state: it is as if
 *   it had not run in this pass. (A changed kind is dropped rather than refused: its old outputs
 *   would not be the new kind's.)
 * - Where the run stands — the forms it waits at, the other components scheduled to run, and
 *   the Loop/Iteration frames around them — must exist in the new version: same ids, same
 *   kinds, inside the same containers. A waiting form keeps every field it had with the same
 *   type (an options field keeps its options); fields it gained are asked with the rest, the
 *   required ones too. A component that paused mid-run (an Agent's tool approval) must have
 *   the same params, or the calls it recorded before the pause would not be its calls.
 *   Anything else is refused, naming the component and the field.
 * - Conversation variables (`env.*`) the new version declares and the run lacks get their
 *   defaults; history, globals and references stay as they are.
 */
import { Canvas, type FormField, type Workflow } from '../canvas';
import type { CanvasState, NodeState } from '../canvas/state';
import { dict } from '../canvas/state';
import { EaselError } from '../errors';
import { canonicalJson } from '../store/codec';

/** Why a run cannot move: the component (and field) the new version does not fit. */
export class MigrationRefusedError extends EaselError {
  constructor(
    message: string,
    readonly componentId?: string,
    readonly field?: string,
  ) {
    super('migration_refused', message);
  }
}

export interface DroppedComponent {
  component_id: string;
  /** `removed`: not in the new version; `kind_changed`: there as another component. */
  reason: 'removed' | 'kind_changed';
  /** The kind it had (and, when changed, has now). */
  component_name: string;
  now?: string;
}

export interface AddedField {
  component_id: string;
  field: string;
  optional: boolean;
}

/** What a migration did to a run's state, as its turn record and the migrate answer list it. */
export interface StateMapping {
  /** Components whose state was kept (same id, same kind). */
  kept: string[];
  dropped: DroppedComponent[];
  /** Fields the waiting forms gained: asked with the rest. */
  fields_added: AddedField[];
  /** Conversation variables the new version declares, set to their defaults. */
  variables_added: string[];
}

export interface MappedState {
  state: CanvasState;
  mapping: StateMapping;
}

/**
 * Maps `state` (paused, on `from`) onto `to`. Throws MigrationRefusedError when the run's
 * pending point does not exist in `to` or its fields changed type.
 */
export function mapState(state: CanvasState, from: Workflow, to: Workflow, toVersion: number): MappedState {
  if (state.status !== 'waiting_for_input' || !state.prompt) {
    throw new MigrationRefusedError(`the run is not waiting for input (status ${state.status})`);
  }
  const waiting = state.prompt.component_ids;
  const pending = [...new Set([...waiting, ...state.frontier])];
  for (const id of pending) checkPendingPoint(state, from, to, id, toVersion, waiting.includes(id));
  const fieldsAdded = waiting.flatMap((id) => addedFields(state, from, to, id));

  const nodes = dict<NodeState>();
  const kept: string[] = [];
  const dropped: DroppedComponent[] = [];
  for (const [id, node] of Object.entries(state.nodes)) {
    const before = from.nodes.get(id)?.componentName ?? '';
    const after = to.nodes.get(id);
    if (after && after.componentName === before) {
      nodes[id] = node;
      kept.push(id);
    } else {
      dropped.push({ component_id: id, reason: after ? 'kind_changed' : 'removed', component_name: before, ...(after ? { now: after.componentName } : {}) });
    }
  }

  const globals = dict();
  Object.assign(globals, state.globals);
  const variablesAdded: string[] = [];
  for (const [key, value] of Object.entries(Canvas.create(to, { seed: 0 }).serialize().globals)) {
    if (key.startsWith('env.') && !Object.hasOwn(globals, key)) {
      globals[key] = value;
      variablesAdded.push(key);
    }
  }
  const pass = state.pass && state.pass.last !== null && !Object.hasOwn(nodes, state.pass.last) ? { ...state.pass, last: null } : state.pass;
  return {
    state: { ...state, nodes, globals, pass },
    mapping: { kept, dropped, fields_added: fieldsAdded, variables_added: variablesAdded },
  };
}

/** A component the run waits at or has scheduled: there in `to`, the same kind, in the same frames, its fields compatible. */
function checkPendingPoint(state: CanvasState, from: Workflow, to: Workflow, id: string, toVersion: number, waiting: boolean): void {
  const what = waiting ? 'where the run waits' : 'scheduled to run next';
  const before = from.nodes.get(id);
  const after = to.nodes.get(id);
  if (!before || !after) throw new MigrationRefusedError(`component "${id}", ${what}, does not exist in version ${toVersion}`, id);
  if (after.componentName !== before.componentName) {
    throw new MigrationRefusedError(`component "${id}", ${what}, is a ${before.componentName} but a ${after.componentName} in version ${toVersion}`, id);
  }
  const framesBefore = from.containersOf(id);
  const framesAfter = to.containersOf(id);
  const frameKinds = (wf: Workflow, frames: string[]) => frames.map((c) => `${wf.node(c).componentName} ${c}`).join(' > ') || 'no container';
  if (frameKinds(from, framesBefore) !== frameKinds(to, framesAfter)) {
    throw new MigrationRefusedError(
      `component "${id}", ${what}, is inside ${frameKinds(from, framesBefore)}, but inside ${frameKinds(to, framesAfter)} in version ${toVersion}`,
      id,
    );
  }
  if (state.nodes[id]?.pause) {
    // a pause asked mid-run: the component runs again from its recorded calls, which only its own params make
    if (canonicalJson(before.params) !== canonicalJson(after.params)) {
      throw new MigrationRefusedError(`component "${id}" paused mid-run (${before.componentName}) and its params changed in version ${toVersion}: the calls it made before the pause would not be its calls`, id);
    }
    return;
  }
  if (!waiting) return;
  const newFields = new Map(formFields(to, id).map((f) => [f.key, f]));
  for (const field of formFields(from, id)) {
    const now = newFields.get(field.key);
    if (!now) throw new MigrationRefusedError(`field "${field.key}" of the form "${id}" does not exist in version ${toVersion}`, id, field.key);
    if (now.type !== field.type) {
      throw new MigrationRefusedError(`field "${field.key}" of the form "${id}" is ${field.type} but ${now.type} in version ${toVersion}`, id, field.key);
    }
    const lost = (field.options ?? []).filter((o) => !(now.options ?? []).includes(o));
    if (field.type === 'options' && (now.options ?? []).length > 0 && lost.length > 0) {
      throw new MigrationRefusedError(`field "${field.key}" of the form "${id}" has no option ${lost.map((o) => `"${o}"`).join(', ')} in version ${toVersion}`, id, field.key);
    }
  }
}

function addedFields(state: CanvasState, from: Workflow, to: Workflow, id: string): AddedField[] {
  if (state.nodes[id]?.pause) return [];
  const had = new Set(formFields(from, id).map((f) => f.key));
  return formFields(to, id)
    .filter((f) => !had.has(f.key))
    .map((f) => ({ component_id: id, field: f.key, optional: f.optional }));
}

function formFields(workflow: Workflow, id: string): FormField[] {
  const node = workflow.node(id);
  return node.definition.form?.fields(node.params) ?? [];
}
