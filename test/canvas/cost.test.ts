/**
 * The engine's cost per step does not grow with the size of the run's state: nothing copies
 * the whole state per step. A loop of small steps runs beside 4 MB of unrelated variables,
 * and its CPU time per step is compared with the same loop over an empty state.
 */
import { describe, expect, it } from 'vitest';
import { canvasFor, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';

const ROUNDS = 600;

function loopDsl(ballastBytes: number) {
  const chunk = 'x'.repeat(1024);
  return graph(
    {
      begin: ['Begin', { mode: 'task' }, ['Loop:L']],
      'Loop:L': [
        'Loop',
        { loop_variables: [{ variable: 'i', input_mode: 'constant', value: 0, type: 'number' }], maximum_loop_count: ROUNDS },
        ['Message:Done'],
      ],
      'LoopItem:S': ['LoopItem', {}, ['VariableAssigner:Inc'], 'Loop:L'],
      'VariableAssigner:Inc': ['VariableAssigner', { variables: [{ variable: 'Loop:L@i', operator: '+=', parameter: 1 }] }, [], 'Loop:L'],
      'Message:Done': ['Message', { content: ['{Loop:L@i}'] }],
    },
    {
      variables: {
        ballast: { name: 'ballast', type: 'array<string>', value: Array.from({ length: ballastBytes / 1024 }, () => chunk) },
      },
    },
  );
}

async function cpuPerStep(ballastBytes: number): Promise<number> {
  const canvas = canvasFor(loopDsl(ballastBytes), { stepBudgetTurn: 10_000 });
  const start = process.cpuUsage();
  const events = await turn(canvas, {});
  const used = process.cpuUsage(start);
  const steps = events.filter((e) => e.event === 'node_started').length;
  expect(steps).toBeGreaterThan(2 * ROUNDS);
  return (used.user + used.system) / steps;
}

describe('engine cost per step', () => {
  it('does not grow with the size of the state', async () => {
    await cpuPerStep(0); // warm-up: JIT and module loading
    const small: number[] = [];
    const large: number[] = [];
    for (let i = 0; i < 5; i++) {
      small.push(await cpuPerStep(0));
      large.push(await cpuPerStep(4 * 1024 * 1024));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
    const ratio = median(large) / median(small);
    console.log(
      `engine CPU per step: ${median(small).toFixed(1)} µs with an empty state, ` +
        `${median(large).toFixed(1)} µs beside 4 MB of variables (ratio ${ratio.toFixed(2)})`,
    );
    // copying 4 MB per step would cost milliseconds, hundreds of times the small case
    expect(ratio).toBeLessThan(3);
  });
});
