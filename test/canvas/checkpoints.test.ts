/**
 * Turns steered from outside between batches: checkpoints, a cancel flag, a suspension that
 * another Canvas finishes. The property test in exactness.test.ts covers generated workflows;
 * these pin the edges.
 */
import { describe, expect, it } from 'vitest';
import { type BatchInfo, Canvas, compileWorkflow, type TurnCheckpoint } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { canvasFor, collect, last, messages, names, steppingClock } from '../helpers/canvas';
import { graph, message } from '../helpers/dsl-builder';
import { testServices } from '../helpers/services';

const chain = graph({
  begin: ['Begin', {}, ['Message:A']],
  'Message:A': [...message('a'), ['Message:B']],
  'Message:B': [...message('b'), ['Message:C']],
  'Message:C': [...message('c')],
});

describe('turn control between batches', () => {
  it('takes a checkpoint between batches but not after the last one', async () => {
    const canvas = canvasFor(chain);
    const taken: TurnCheckpoint[] = [];
    const events = await collect(canvas.run({ query: 'go' }, { afterBatch: (cp) => (taken.push(structuredClone(cp)), 'continue') }));
    expect(messages(events)).toEqual(['a', 'b', 'c']);
    // batches: Begin, A, B, C; the turn ends after C, so no checkpoint follows it
    expect(taken.map((cp) => cp.state.frontier)).toEqual([['Message:A'], ['Message:B'], ['Message:C']]);
    expect(taken.map((cp) => cp.steps)).toEqual([1, 2, 3]);
    expect(taken.every((cp) => cp.state.status === 'running')).toBe(true);
    expect(taken[0]?.history).toEqual([['user', 'go']]);
  });

  it('tells which batches reached outside the run (a model call) and which only computed', async () => {
    const dsl = graph({
      begin: ['Begin', {}, ['LLM:Ask']],
      'LLM:Ask': ['LLM', { llm_id: 'echo', sys_prompt: 'Echo.', prompts: [{ role: 'user', content: '{sys.query}' }] }, ['Message:A']],
      'Message:A': [...message('{LLM:Ask@content}'), ['Message:B']],
      'Message:B': [...message('done')],
    });
    const canvas = canvasFor(dsl, { services: testServices() });
    const told: BatchInfo[] = [];
    await collect(canvas.run({ query: 'ping' }, { afterBatch: (_cp, batch) => (told.push(batch), 'continue') }));
    expect(told).toEqual([
      { ran: ['begin'], external: false },
      { ran: ['LLM:Ask'], external: true },
      { ran: ['Message:A'], external: false },
    ]);
  });

  it('ends the turn as cancelled before the next batch once the flag is up', async () => {
    const canvas = canvasFor(chain);
    let flag = false;
    const events = await collect(
      canvas.run({ query: 'go' }, {
        afterBatch: (cp) => {
          if (cp.state.frontier[0] === 'Message:B') flag = true;
          return 'continue';
        },
        cancelled: () => flag,
      }),
    );
    expect(messages(events)).toEqual(['a']);
    expect(last(events).event).toBe('workflow_cancelled');
    expect(canvas.status).toBe('cancelled');
    expect(canvas.isTerminal).toBe(true);
    expect(names(events).filter((n) => n === 'node_started')).toHaveLength(2);
  });

  it('suspends: the canvas refuses to serialize, and a fresh one finishes the turn from JSON', async () => {
    const clock = steppingClock();
    const workflow = compileWorkflow(chain, builtinComponents);
    const first = Canvas.create(workflow, { seed: 7, clock });
    let saved = '';
    const before = await collect(first.run({ query: 'go' }, {
      afterBatch: (cp) => {
        if (cp.steps < 2) return 'continue';
        saved = JSON.stringify(cp);
        return 'suspend';
      },
    }));
    expect(first.isSuspended).toBe(true);
    expect(messages(before)).toEqual(['a']);
    expect(() => first.serialize()).toThrow(/did not complete/);

    const checkpoint = JSON.parse(saved) as TurnCheckpoint;
    const second = Canvas.restore(workflow, checkpoint.state, { seed: 7, clock });
    const after = await collect(second.continueTurn(checkpoint));
    expect(messages(after)).toEqual(['b', 'c']);
    expect(last(after).event).toBe('workflow_finished');
    expect(second.isSuspended).toBe(false);
    expect(second.serialize().status).toBe('completed');
    expect(second.lastTurnHistory).toEqual([['user', 'go'], ['assistant', 'a'], ['assistant', 'b'], ['assistant', 'c']]);
  });

  it('carries the turn step budget across a suspension', async () => {
    const ping = graph({
      begin: ['Begin', {}, ['Message:Ping']],
      'Message:Ping': [...message('ping'), ['Message:Pong']],
      'Message:Pong': [...message('pong'), ['Message:Ping']],
    });
    const workflow = compileWorkflow(ping, builtinComponents);
    const options = { stepBudgetTurn: 10, seed: 1, clock: steppingClock() };
    let saved = '';
    const canvas = Canvas.create(workflow, options);
    await collect(canvas.run({}, { afterBatch: (cp) => (cp.steps === 6 ? ((saved = JSON.stringify(cp)), 'suspend') : 'continue') }));
    const checkpoint = JSON.parse(saved) as TurnCheckpoint;
    const events = await collect(Canvas.restore(workflow, checkpoint.state, options).continueTurn(checkpoint));
    expect(last(events)).toMatchObject({ event: 'workflow_aborted', data: { reason: 'step_budget_turn', steps: 10 } });
    expect(names(events).filter((n) => n === 'node_started')).toHaveLength(4);
  });

  it('refuses to continue a state that is not mid-turn', async () => {
    const canvas = canvasFor(chain);
    await collect(canvas.run({ query: 'go' }));
    const done = Canvas.restore(canvas.workflow, JSON.parse(JSON.stringify(canvas.serialize())));
    const checkpoint: TurnCheckpoint = { state: done.serialize(), steps: 0, usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, calls: 0 }, history: [] };
    await expect(collect(done.continueTurn(checkpoint))).rejects.toThrow(/mid-turn/);
  });
});
