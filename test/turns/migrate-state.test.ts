/**
 * The mapping of a paused run's state onto another version (lib/turns/migrate-state.ts): what
 * is kept, what is dropped, and every refusal, naming the component and the field.
 */
import { describe, expect, it } from 'vitest';
import { Canvas, compileWorkflow, type Workflow } from '../../lib/canvas';
import type { CanvasState } from '../../lib/canvas/state';
import { builtinComponents } from '../../lib/components';
import { mapState, MigrationRefusedError } from '../../lib/turns/migrate-state';
import { graph } from '../helpers/dsl-builder';

const compile = (dsl: unknown): Workflow => compileWorkflow(dsl, builtinComponents);
type Nodes = Parameters<typeof graph>[0];

const ASK = (inputs: Record<string, unknown>, downstream = ['Message:After']): Nodes[string] => ['UserFillUp', { tips: 'Tell me', inputs }, downstream];
const NAME = { name: { name: 'Name', type: 'line', optional: false } };
const PLAN = { plan: { name: 'Plan', type: 'options', optional: false, options: ['free', 'pro'] } };
const base = (ask: Nodes[string] = ASK({ ...NAME, ...PLAN }), extra: Nodes = {}, pre: Nodes[string] = ['Message', { content: ['hi'] }, ['UserFillUp:Ask']]): Nodes => ({
  begin: ['Begin', { mode: 'task' }, ['Message:Pre']],
  'Message:Pre': pre,
  'UserFillUp:Ask': ask,
  'Message:After': ['Message', { content: ['bye {UserFillUp:Ask@name}'] }],
  ...extra,
});

/** The state of a run of `nodes` paused at its form, after `answers` (a partial answer keeps its values). */
async function pausedAt(nodes: Nodes, extra: Record<string, unknown> = {}, answers?: Record<string, unknown>): Promise<{ workflow: Workflow; state: CanvasState }> {
  const workflow = compile(graph(nodes, extra));
  const canvas = Canvas.create(workflow, { seed: 1, clock: () => 1000 });
  for await (const _ of canvas.run({})) void _;
  if (answers) for await (const _ of canvas.run({ inputs: answers })) void _;
  const state = structuredClone(canvas.serialize());
  expect(state.status).toBe('waiting_for_input');
  return { workflow, state };
}

function refusal(run: () => unknown): MigrationRefusedError {
  try {
    run();
  } catch (error) {
    if (error instanceof MigrationRefusedError) return error;
    throw error;
  }
  throw new Error('not refused');
}

describe('mapState', () => {
  it('keeps same-id same-kind state and the pending answer; drops removed and re-kinded components', async () => {
    const { workflow, state } = await pausedAt(base(), {}, { name: 'Ada' });
    const to = compile(graph({ ...base(ASK({ ...NAME, ...PLAN }), {}, ['UserFillUp', { inputs: {} }, ['UserFillUp:Ask']]) }));
    const { state: mapped, mapping } = mapState(state, workflow, to, 2);
    expect(mapping.kept).toEqual(['begin', 'UserFillUp:Ask']);
    expect(mapping.dropped).toEqual([{ component_id: 'Message:Pre', reason: 'kind_changed', component_name: 'Message', now: 'UserFillUp' }]);
    expect(mapped.nodes['UserFillUp:Ask']?.form?.values).toEqual({ name: 'Ada' });
    expect(mapped.nodes['Message:Pre']).toBeUndefined();

    const without = compile(graph({ begin: ['Begin', { mode: 'task' }, ['UserFillUp:Ask']], 'UserFillUp:Ask': ASK({ ...NAME, ...PLAN }), 'Message:After': ['Message', { content: ['x'] }] }));
    expect(mapState(state, workflow, without, 2).mapping.dropped).toEqual([{ component_id: 'Message:Pre', reason: 'removed', component_name: 'Message' }]);
    // the input state is not changed
    expect(state.nodes['Message:Pre']).toBeDefined();
  });

  it('refuses a pending form that is gone or another kind now', async () => {
    const { workflow, state } = await pausedAt(base());
    const gone = compile(graph({ begin: ['Begin', { mode: 'task' }, ['Message:After']], 'Message:After': ['Message', { content: ['x'] }] }));
    expect(refusal(() => mapState(state, workflow, gone, 2))).toMatchObject({ componentId: 'UserFillUp:Ask', message: 'component "UserFillUp:Ask", where the run waits, does not exist in version 2' });
    const rekinded = compile(graph(base(['Message', { content: ['no form'] }, ['Message:After']])));
    expect(refusal(() => mapState(state, workflow, rekinded, 3)).message).toBe('component "UserFillUp:Ask", where the run waits, is a UserFillUp but a Message in version 3');
  });

  it('refuses a field removed, retyped, or an options field that lost an option; allows added fields and options', async () => {
    const { workflow, state } = await pausedAt(base());
    const cases: [Record<string, unknown>, string, string][] = [
      [PLAN, 'name', 'field "name" of the form "UserFillUp:Ask" does not exist in version 2'],
      [{ name: { name: 'Name', type: 'paragraph', optional: false }, ...PLAN }, 'name', 'field "name" of the form "UserFillUp:Ask" is line but paragraph in version 2'],
      [{ ...NAME, plan: { name: 'Plan', type: 'options', optional: false, options: ['pro', 'team'] } }, 'plan', 'field "plan" of the form "UserFillUp:Ask" has no option "free" in version 2'],
    ];
    for (const [inputs, field, message] of cases) {
      expect(refusal(() => mapState(state, workflow, compile(graph(base(ASK(inputs)))), 2))).toMatchObject({ componentId: 'UserFillUp:Ask', field, message });
    }
    const wider = compile(graph(base(ASK({ ...NAME, plan: { ...PLAN.plan, options: ['free', 'pro', 'team'] }, note: { name: 'Note', type: 'line', optional: true } }))));
    expect(mapState(state, workflow, wider, 2).mapping.fields_added).toEqual([{ component_id: 'UserFillUp:Ask', field: 'note', optional: true }]);
  });

  it('keeps Loop counters when the frame is there; refuses a form moved into or out of a container', async () => {
    const loopNodes = (ask: Nodes[string]): Nodes => ({
      begin: ['Begin', { mode: 'task' }, ['Loop:L']],
      'Loop:L': ['Loop', { loop_variables: [], loop_termination_condition: [], maximum_loop_count: 3 }, ['Message:After']],
      'LoopItem:I': ['LoopItem', {}, ['UserFillUp:Ask'], 'Loop:L'],
      'UserFillUp:Ask': [ask[0], ask[1], [], 'Loop:L'],
      'Message:After': ['Message', { content: ['done'] }],
    });
    const { workflow, state } = await pausedAt(loopNodes(ASK(NAME)), {}, { name: 'one' });
    expect(state.nodes['Loop:L']?.memo).toEqual({ rounds: 2 });
    const { state: mapped } = mapState(state, workflow, compile(graph({ ...loopNodes(ASK(NAME)), 'Message:Extra': ['Message', { content: ['x'] }] })), 2);
    expect(mapped.nodes['Loop:L']?.memo).toEqual({ rounds: 2 });
    const flat = compile(graph(base(ASK(NAME))));
    expect(refusal(() => mapState(state, workflow, flat, 2)).message).toMatch(/^component "UserFillUp:Ask", where the run waits, is inside Loop Loop:L, but inside no container in version 2$/);
  });

  it('refuses a component paused mid-run whose params changed; keeps it when they did not', async () => {
    const agent = (prompt: string): Nodes => ({
      begin: ['Begin', { mode: 'task' }, ['Agent:A']],
      'Agent:A': ['Agent', { llm_id: 'm', sys_prompt: prompt, prompts: [{ role: 'user', content: '{sys.query}' }], approval: 'all', tools: [] }, []],
    });
    const from = compile(graph(agent('You help.')));
    const fields = [{ key: 'decision', name: 'Decision', type: 'options' as const, optional: false, options: ['approve', 'reject'], value: null }];
    const state: CanvasState = {
      ...structuredClone(Canvas.create(from, { seed: 1 }).serialize()),
      status: 'waiting_for_input',
      frontier: ['Agent:A'],
      prompt: { inputs: {}, tips: 'approve?', component_ids: ['Agent:A'] },
      nodes: Object.assign(Object.create(null), { 'Agent:A': { pause: { fields, tips: 'approve?', data: { tool: 't' }, calls: [] }, form: { values: {}, submitted: false } } }),
    };
    expect(mapState(state, from, compile(graph(agent('You help.'))), 2).mapping.kept).toEqual(['Agent:A']);
    expect(refusal(() => mapState(state, from, compile(graph(agent('You help more.'))), 2))).toMatchObject({ componentId: 'Agent:A' });
  });

  it('gives conversation variables the new version declares their defaults, and refuses a run that is not paused', async () => {
    const { workflow, state } = await pausedAt(base());
    const to = compile(graph(base(), { variables: { mood: { type: 'string', value: 'calm' } } }));
    const { state: mapped, mapping } = mapState(state, workflow, to, 2);
    expect(mapping.variables_added).toEqual(['env.mood']);
    expect(mapped.globals['env.mood']).toBe('calm');
    expect(refusal(() => mapState({ ...state, status: 'completed', prompt: null }, workflow, to, 2)).message).toBe('the run is not waiting for input (status completed)');
  });
});
