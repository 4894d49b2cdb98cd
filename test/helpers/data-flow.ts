/**
 * Workflows of one data component: Begin (task mode) -> the component, reading conversation
 * variables (`env.*`) that the DSL declares with their values.
 */
import { expect } from 'vitest';
import { compileWorkflow, type CanvasEvent, type DslProblem, DslValidationError } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { canvasFor, last, turn } from './canvas';

export function oneComponent(
  id: string,
  params: Record<string, unknown>,
  variables: Record<string, unknown> = {},
  downstream: Record<string, { obj: { component_name: string; params: Record<string, unknown> }; downstream: string[] }> = {},
): Record<string, unknown> {
  const name = id.split(':')[0] as string;
  const components: Record<string, unknown> = {
    begin: { obj: { component_name: 'Begin', params: { mode: 'task', inputs: {} } }, downstream: [id], upstream: [] },
    [id]: { obj: { component_name: name, params }, downstream: Object.keys(downstream), upstream: ['begin'] },
  };
  for (const [next, node] of Object.entries(downstream)) components[next] = { ...node, upstream: [id] };
  return {
    components,
    globals: {},
    variables: Object.fromEntries(Object.entries(variables).map(([k, value]) => [k, { name: k, type: 'object', value }])),
  };
}

export async function run(definition: unknown): Promise<CanvasEvent[]> {
  return turn(canvasFor(definition), {});
}

/** The outputs of `id` in a run that finished, as plain JSON. */
export async function outputsOf(definition: unknown, id: string): Promise<Record<string, unknown>> {
  const events = await run(definition);
  const end = last(events);
  if (end.event !== 'workflow_finished') throw new Error(`expected workflow_finished, got ${end.event}: ${JSON.stringify(end.data)}`);
  const finished = events.find((e) => e.event === 'node_finished' && e.data.component_id === id);
  if (finished?.event !== 'node_finished') throw new Error(`no node_finished for ${id}`);
  return JSON.parse(JSON.stringify(finished.data.outputs)) as Record<string, unknown>;
}

/** The error of a run that failed. */
export async function failureOf(definition: unknown): Promise<{ code: string; message: string; component_id?: string }> {
  const end = last(await run(definition));
  if (end.event !== 'workflow_failed') throw new Error(`expected workflow_failed, got ${end.event}`);
  return end.data.error;
}

/** The problems of a DSL that must be refused at load. */
export function problemsOf(definition: unknown): readonly DslProblem[] {
  let caught: unknown;
  try {
    compileWorkflow(definition, builtinComponents);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(DslValidationError);
  return (caught as DslValidationError).problems;
}
