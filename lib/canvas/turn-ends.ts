/**
 * How a turn ends — paused for input, finished, failed, aborted for looping risk — and the
 * `node_finished` events, which wait while a node's streamed outputs are still being read.
 */
import { type CanvasCore, elapsedInPass, errorMessage, type Failure, seconds } from './canvas-core';
import type { Outputs } from './component';
import { NodeContext, type RunScope } from './context';
import { TransientError } from './errors';
import { EventQueue } from './event-queue';
import { type CanvasEvent, event, type FieldView } from './events';
import { fields, formState } from './form-state';
import { fieldSatisfied, type FormField, type PauseMail } from './forms';
import { dict } from './state';
import { TextStream } from './text-stream';

export async function* pause(core: CanvasCore, scope: RunScope, holding: readonly string[]): AsyncGenerator<CanvasEvent, void, undefined> {
  const s = core.state;
  const failure = yield* settle(core, scope);
  if (failure) {
    yield* fail(core, scope, failure);
    return;
  }
  s.frontier = [...holding, ...s.frontier.filter((id) => !holding.includes(id))];
  const inputs = dict<FieldView>();
  const tips: string[] = [];
  const mail: PauseMail[] = [];
  for (const id of holding) {
    const node = core.workflow.node(id);
    const form = formState(core, id);
    const paused = core.state.nodes[id]?.pause;
    const settled = paused ? form.submitted : !node.definition.form?.holdForOptional || form.submitted;
    for (const f of fields(core, id)) {
      // a pause shows every field it asks, those with a value to keep or change too
      if (!paused && fieldSatisfied(f, form.values[f.key], settled)) continue;
      inputs[f.key] = fieldView(f, form.values[f.key]);
    }
    const tipsOf = node.definition.form?.tips;
    const mailOf = node.definition.form?.mail;
    if (paused) {
      if (paused.tips) tips.push(paused.tips);
    } else if (tipsOf || mailOf) {
      const ctx = new NodeContext(scope, id, new EventQueue(), form.values);
      const text = tipsOf ? await tipsOf(node.params, ctx) : '';
      if (text) tips.push(text);
      const asked = mailOf ? await mailOf(node.params, ctx) : undefined;
      if (asked) mail.push({ component_id: id, ...asked });
    }
  }
  s.status = 'waiting_for_input';
  const timeouts = holding
    .map((id) => core.workflow.node(id).definition.form?.timeoutSeconds?.(core.workflow.node(id).params))
    .filter((t): t is number => t !== undefined);
  // the earliest timer of the forms asked; a re-ask keeps the deadline set when first asked
  const previousDue = core.previousDue;
  const due = timeouts.length === 0 ? undefined : (previousDue ?? core.clock() + Math.min(...timeouts) * 1000);
  s.prompt = { inputs, tips: tips.join('\n\n'), component_ids: [...holding], ...(due !== undefined ? { due_at: due } : {}), ...(mail.length > 0 ? { mail } : {}) };
  yield event('user_inputs', { inputs, tips: s.prompt.tips });
}

export async function* finish(core: CanvasCore, scope: RunScope): AsyncGenerator<CanvasEvent, void, undefined> {
  const failure = yield* settle(core, scope);
  if (failure) {
    yield* fail(core, scope, failure);
    return;
  }
  const s = core.state;
  const last = s.pass?.last;
  s.status = 'completed';
  s.frontier = [];
  yield event('workflow_finished', {
    inputs: s.pass?.inputs ?? null,
    outputs: last ? { ...(s.nodes[last]?.outputs ?? {}) } : {},
    elapsed_time: elapsedInPass(core),
    created_at: seconds(core),
    usage: { ...core.usage },
  });
}

export async function* fail(core: CanvasCore, scope: RunScope, failure: Failure): AsyncGenerator<CanvasEvent, void, undefined> {
  yield* settle(core, scope);
  const s = core.state;
  s.status = 'failed';
  s.frontier = [];
  s.prompt = null;
  yield event('workflow_failed', {
    error: { code: 'component_error', message: failure.message, component_id: failure.componentId },
    elapsed_time: elapsedInPass(core),
    created_at: seconds(core),
  });
}

export async function* abort(
  core: CanvasCore,
  scope: RunScope,
  reason: 'step_budget_turn' | 'step_budget_run',
  budget: number,
  steps: number,
): AsyncGenerator<CanvasEvent, void, undefined> {
  yield* settle(core, scope);
  const s = core.state;
  s.status = 'aborted_looping_risk';
  s.frontier = [];
  yield event('workflow_aborted', {
    reason,
    budget,
    steps,
    elapsed_time: elapsedInPass(core),
    created_at: seconds(core),
  });
}

/**
 * Reads every stream still open (an answer nobody showed live) to its end, so the state
 * holds only plain values, then emits the node_finished events that waited for them.
 */
export async function* settle(core: CanvasCore, scope: RunScope): AsyncGenerator<CanvasEvent, Failure | undefined, undefined> {
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
  for (const [id, ns] of Object.entries(core.state.nodes)) {
    if (ns.outputs && hasStream(ns.outputs)) {
      const copy = dict();
      Object.assign(copy, ns.outputs);
      await settleRecord(copy, id);
      ns.outputs = copy;
    }
  }
  await settleRecord(core.state.globals, undefined);
  yield* flushDeferred(core, true);
  return failure;
}

export function* flushDeferred(core: CanvasCore, all: boolean): Generator<CanvasEvent, void, undefined> {
  while (core.deferred.length > 0) {
    const head = core.deferred[0] as { id: string; startedAt: number };
    const outputs = core.state.nodes[head.id]?.outputs ?? {};
    const open = Object.values(outputs).some((v) => v instanceof TextStream && !v.done);
    if (open && !all) return;
    core.deferred.shift();
    yield finished(core, head.id, head.startedAt, streamError(outputs));
  }
}

export function* finishedOrDeferred(core: CanvasCore, id: string, startedAt: number): Generator<CanvasEvent, void, undefined> {
  const outputs = core.state.nodes[id]?.outputs;
  if (outputs && Object.values(outputs).some((v) => v instanceof TextStream && !v.done)) {
    core.deferred.push({ id, startedAt });
    return;
  }
  if (core.deferred.length > 0) {
    // keep node_finished in order behind the ones still waiting
    core.deferred.push({ id, startedAt });
    return;
  }
  yield finished(core, id, startedAt, null);
}

export function finished(core: CanvasCore, id: string, startedAt: number, error: string | null): CanvasEvent {
  // own properties whatever the names (`__proto__` included), and a fast object to serialize
  const outputs = Object.fromEntries(Object.entries(core.state.nodes[id]?.outputs ?? {}).map(([k, v]) => [k, v instanceof TextStream ? v.partialText() : v]));
  const node = core.workflow.node(id);
  // written out, not spread from a shared object: `{ ...info, more }` takes V8's slow path (~3 µs)
  return event('node_finished', {
    component_id: id,
    component_name: node.displayName,
    component_type: node.componentName,
    created_at: startedAt / 1000,
    inputs: null,
    outputs,
    error,
    elapsed_time: (core.clock() - startedAt) / 1000,
  });
}

export function nodeStarted(core: CanvasCore, id: string, startedAt: number): CanvasEvent {
  const node = core.workflow.node(id);
  return event('node_started', {
    component_id: id,
    component_name: node.displayName,
    component_type: node.componentName,
    created_at: startedAt / 1000,
    inputs: null,
    thoughts: '',
  });
}

function fieldView(field: FormField, value: unknown): FieldView {
  return {
    name: field.name,
    type: field.type,
    optional: field.optional,
    ...(field.options ? { options: field.options } : {}),
    ...(field.decisions ? { decisions: field.decisions.map((d) => ({ id: d.id, label: d.label })) } : {}),
    ...(field.description ? { description: field.description } : {}),
    ...(field.schema ? { schema: field.schema } : {}),
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
