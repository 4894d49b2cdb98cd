import { describe, expect, it } from 'vitest';
import { canvasFor, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';

/** A VariableAssigner that appends to a number: a workflow error, whatever the run. */
function failing(exception: Record<string, unknown>) {
  return graph(
    {
      begin: ['Begin', {}, ['VariableAssigner:Bad']],
      'VariableAssigner:Bad': [
        'VariableAssigner',
        { variables: [{ variable: 'env.count', operator: 'append', parameter: 'sys.query' }], ...exception },
        ['Message:After'],
      ],
      'Message:After': ['Message', { content: ['after: {VariableAssigner:Bad@result}'] }],
      'Message:Handler': ['Message', { content: ['handled: {VariableAssigner:Bad@_ERROR}'] }],
    },
    { variables: { count: { name: 'count', type: 'number', value: 1 } } },
  );
}

describe('per-component error handling', () => {
  it('fails the run with workflow_failed naming the component when nothing handles the error', async () => {
    const canvas = canvasFor(failing({ exception_method: null }));
    const events = await turn(canvas, { query: 'x' });
    expect(last(events)).toEqual({
      event: 'workflow_failed',
      data: {
        error: { code: 'component_error', message: 'cannot append env.count: it is not a list', component_id: 'VariableAssigner:Bad' },
        elapsed_time: expect.any(Number),
        created_at: expect.any(Number),
      },
    });
    const finished = events.find((e) => e.event === 'node_finished' && e.data.component_id === 'VariableAssigner:Bad');
    expect(finished).toMatchObject({ data: { error: 'cannot append env.count: it is not a list' } });
    expect(messages(events)).toEqual([]);
    expect(canvas.status).toBe('failed');
    expect(canvas.isTerminal).toBe(false); // conversational: a new query starts a new pass
    expect(last(await turn(canvas, { query: 'y' })).event).toBe('workflow_failed');
  });

  it('goes to exception_goto instead of the downstream with the goto method', async () => {
    const events = await turn(canvasFor(failing({ exception_method: 'goto', exception_goto: ['Message:Handler'] })), {
      query: 'x',
    });
    expect(messages(events)).toEqual(['handled: cannot append env.count: it is not a list']);
    expect(last(events).event).toBe('workflow_finished');
  });

  it('continues downstream with the default value as the output with the comment method', async () => {
    const events = await turn(
      canvasFor(failing({ exception_method: 'comment', exception_default_value: 'plan B' })),
      { query: 'x' },
    );
    expect(messages(events)).toEqual(['after: plan B']);
    const finished = events.find((e) => e.event === 'node_finished' && e.data.component_id === 'VariableAssigner:Bad');
    expect(finished).toMatchObject({ data: { error: null, outputs: { result: 'plan B' } } });
  });

  it('fails when the comment method has no default value', async () => {
    const events = await turn(canvasFor(failing({ exception_method: 'comment', exception_default_value: '' })), {
      query: 'x',
    });
    expect(last(events).event).toBe('workflow_failed');
  });

  it('ends with workflow_failed, not an exception, when a component throws something odd', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['Iteration:I']],
      'Iteration:I': ['Iteration', { items_ref: 'sys.query', outputs: {} }],
      'IterationItem:S': ['IterationItem', {}, [], 'Iteration:I'],
    });
    const events = await turn(canvasFor(dsl), { query: 'not a list' });
    expect(last(events)).toMatchObject({
      event: 'workflow_failed',
      data: { error: { component_id: 'Iteration:I', message: 'sys.query must be a list, but it is string' } },
    });
  });
});
