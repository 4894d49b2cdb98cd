import { describe, expect, it } from 'vitest';
import { RunFinishedError } from '../../lib/canvas';
import { canvasFor, fixture, last, turn } from '../helpers/canvas';
import { graph, message } from '../helpers/dsl-builder';

describe('loop safety', () => {
  it('aborts a cycle without an exit when the turn budget runs out', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['Message:Ping']],
      'Message:Ping': [...message('ping'), ['Message:Pong']],
      'Message:Pong': [...message('pong'), ['Message:Ping']],
    });
    const canvas = canvasFor(dsl, { stepBudgetTurn: 50 });
    const events = await turn(canvas, { query: 'go' });
    expect(last(events)).toMatchObject({
      event: 'workflow_aborted',
      data: { reason: 'step_budget_turn', budget: 50, steps: 50 },
    });
    expect(events.filter((e) => e.event === 'node_started')).toHaveLength(50);
    expect(canvas.status).toBe('aborted_looping_risk');
    expect(canvas.isTerminal).toBe(true);
    await expect(turn(canvas, { query: 'again' })).rejects.toBeInstanceOf(RunFinishedError);
  });

  it('aborts a pass that keeps pausing once the run budget is spent across turns', async () => {
    const dsl = fixture('loop-with-form') as { components: Record<string, { obj: { params: Record<string, unknown> } }> };
    const loop = dsl.components['Loop:AskThrice'];
    if (!loop) throw new Error('fixture changed');
    loop.obj.params.maximum_loop_count = 10_000;
    // each round costs 3 steps (VariableAssigner, LoopItem, UserFillUp) in one turn
    const canvas = canvasFor(dsl, { stepBudgetRun: 20, stepBudgetTurn: 1000 });
    let events = await turn(canvas, {});
    let turns = 1;
    while (last(events).event === 'user_inputs') {
      events = await turn(canvas, { inputs: { colour: `c${turns}` } });
      turns++;
      if (turns > 50) throw new Error('never aborted');
    }
    expect(last(events)).toMatchObject({ event: 'workflow_aborted', data: { reason: 'step_budget_run', budget: 20 } });
    expect(turns).toBe(7);
  });

  it('cancels between batches when the signal is aborted', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['Message:A']],
      'Message:A': [...message('a'), ['Message:B']],
      'Message:B': message('b'),
    });
    const controller = new AbortController();
    const canvas = canvasFor(dsl);
    const seen: string[] = [];
    for await (const e of canvas.run({ query: 'x', signal: controller.signal })) {
      seen.push(e.event);
      if (e.event === 'message_end') controller.abort();
    }
    expect(seen.at(-1)).toBe('workflow_cancelled');
    expect(seen.filter((e) => e === 'message_end')).toHaveLength(1);
    expect(canvas.status).toBe('cancelled');
  });
});
