/**
 * UserFillUp decisions: the pause shows one decision field with the decisions' ids and labels;
 * the answer names one and the run goes down that decision's branch only, with or without
 * other fields, through a save and restore; a wrong or missing decision is refused before
 * anything changes; a timeout takes `timeout_goto`; a DSL with a bad decision is refused at
 * compile time, naming the field.
 */
import { describe, expect, it } from 'vitest';
import { Canvas, compileWorkflow, DslValidationError, type CanvasEvent } from '../../lib/canvas';
import { InvalidInputsError } from '../../lib/canvas/errors';
import { builtinComponents } from '../../lib/components';
import { canvasFor, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';

const DECISIONS = [
  { id: 'approve', label: 'Approve the refund', to: 'Message:Approved' },
  { id: 'reject', label: 'Reject', to: ['Message:Rejected'] },
];

function dsl(params: Record<string, unknown> = {}) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['UserFillUp:Review']],
    'UserFillUp:Review': ['UserFillUp', { tips: 'Refund £40?', decisions: DECISIONS, ...params }, ['Message:Approved', 'Message:Rejected', 'Message:Anyway']],
    'Message:Approved': ['Message', { content: ['approved: {UserFillUp:Review@decision_label} ({UserFillUp:Review@note})'] }],
    'Message:Rejected': ['Message', { content: ['rejected: {UserFillUp:Review@decision}'] }],
    'Message:Anyway': ['Message', { content: ['no decision'] }],
  });
}

const pauseOf = (events: readonly CanvasEvent[]) => events.find((e) => e.event === 'user_inputs')?.data as { inputs: Record<string, unknown> } | undefined;

describe('UserFillUp decisions', () => {
  it('pause with a decision field that lists each decision with its label, after the other fields', async () => {
    const canvas = canvasFor(dsl({ inputs: { note: { name: 'Note', type: 'line', optional: true } } }));
    const pause = pauseOf(await turn(canvas, { query: 'refund please' }));
    expect(Object.keys(pause!.inputs)).toEqual(['note', 'decision']);
    expect(pause!.inputs.decision).toEqual({
      name: 'Decision',
      type: 'options',
      optional: false,
      options: ['approve', 'reject'],
      decisions: [
        { id: 'approve', label: 'Approve the refund' },
        { id: 'reject', label: 'Reject' },
      ],
      value: null,
    });
  });

  it.each([
    ['approve', 'approved: Approve the refund (checked)'],
    ['reject', 'rejected: reject'],
  ])('go down the branch of the decision answered (%s) only, across a save and restore', async (decision, shown) => {
    const workflow = compileWorkflow(dsl({ inputs: { note: { name: 'Note', type: 'line', optional: true } } }), builtinComponents);
    const first = Canvas.create(workflow, { seed: 1 });
    await turn(first, { query: 'refund please' });
    const restored = Canvas.restore(workflow, JSON.parse(JSON.stringify(first.serialize())));
    const events = await turn(restored, { inputs: { decision, note: 'checked' } });
    expect(messages(events)).toEqual([shown]);
    const finished = events.filter((e) => e.event === 'node_finished').map((e) => (e.data as { component_id: string }).component_id);
    expect(finished).not.toContain('Message:Anyway');
  });

  it('refuses a decision that is not declared before anything changes, and asks again when none is given', async () => {
    const canvas = canvasFor(dsl());
    await turn(canvas, { query: 'refund please' });
    const before = JSON.stringify(canvas.serialize());
    let caught: unknown;
    try {
      await turn(canvas, { inputs: { decision: 'maybe' } });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidInputsError);
    expect((caught as InvalidInputsError).fields).toEqual([{ component_id: 'UserFillUp:Review', field: 'decision', message: 'expected one of: approve, reject' }]);
    expect(JSON.stringify(canvas.serialize())).toBe(before);

    const unanswered = await turn(canvas, { inputs: {} });
    expect(messages(unanswered)).toEqual([]);
    expect(Object.keys(pauseOf(unanswered)!.inputs)).toEqual(['decision']);
    expect(messages(await turn(canvas, { inputs: { decision: 'approve' } }))).toEqual(['approved: Approve the refund ()']);
  });

  it('takes timeout_goto when the timer fires, and otherwise the edges no decision names', async () => {
    for (const [params, shown] of [
      [{ timeout_seconds: 60, timeout_goto: 'Message:Anyway' }, 'no decision'],
      [{ timeout_seconds: 60 }, 'no decision'],
    ] as const) {
      const canvas = canvasFor(dsl(params));
      await turn(canvas, { query: 'refund please' });
      const events = await turn(canvas, { command: 'timeout' });
      expect(messages(events)).toEqual([shown]);
    }
  });

  it('refuses, at compile time, a decision without a target, one declared twice, a missing target and an input named "decision"', () => {
    const problems = (params: Record<string, unknown>) => {
      try {
        compileWorkflow(dsl(params), builtinComponents);
      } catch (error) {
        expect(error).toBeInstanceOf(DslValidationError);
        return (error as DslValidationError).problems.map((p) => `${p.field}: ${p.message}`);
      }
      throw new Error('compiled');
    };
    expect(problems({ decisions: [{ id: 'go', to: [] }] }).join('\n')).toContain('a decision needs a target');
    expect(problems({ decisions: [DECISIONS[0], { ...DECISIONS[0] }] })).toEqual(['obj.params.decisions.1.id: the decision "approve" is declared twice']);
    expect(problems({ decisions: [{ id: 'go', to: 'Message:Nowhere' }] })).toEqual(['obj.params: branches to a missing component "Message:Nowhere"']);
    expect(problems({ inputs: { decision: { name: 'Decision', type: 'line' } } })).toEqual([
      'obj.params.inputs.decision: "decision" is where the decision is answered: give this input another name',
    ]);
  });
});
