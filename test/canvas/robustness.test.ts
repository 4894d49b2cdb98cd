/**
 * Nothing untyped escapes: arbitrary DSL documents either compile or throw DslValidationError,
 * and arbitrary run inputs either run or throw an EaselError before changing anything.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileWorkflow, DslValidationError, EaselError } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { canvasFor, collect, fixture } from '../helpers/canvas';

const NAMES = ['Begin', 'Message', 'UserFillUp', 'Switch', 'Loop', 'LoopItem', 'ExitLoop', 'Iteration', 'IterationItem', 'VariableAssigner', 'VariableAggregator', 'Retrieval'];

const componentArb = fc.record(
  {
    obj: fc.record({ component_name: fc.constantFrom(...NAMES), params: fc.oneof(fc.object(), fc.constant({})) }, { requiredKeys: ['component_name'] }),
    downstream: fc.array(fc.constantFrom('begin', 'a', 'b', 'c', 'missing')),
    upstream: fc.array(fc.string()),
    parent_id: fc.constantFrom('a', 'b', 'nope', undefined),
  },
  { requiredKeys: ['obj'] },
);

describe('robustness', () => {
  it('compiles or refuses arbitrary DSLs with a DslValidationError', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.anything(),
          fc.record({ components: fc.dictionary(fc.constantFrom('begin', 'a', 'b', 'c', '__proto__', 'constructor', 'x y'), componentArb) }),
        ),
        (dsl) => {
          try {
            compileWorkflow(dsl, builtinComponents);
          } catch (error) {
            expect(error).toBeInstanceOf(DslValidationError);
            expect((error as DslValidationError).problems.length).toBeGreaterThan(0);
          }
        },
      ),
      { seed: 11, numRuns: 1500 },
    );
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('runs or refuses arbitrary run inputs with a typed error, leaving the state unchanged', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          query: fc.oneof(fc.string(), fc.anything()),
          inputs: fc.oneof(
            fc.dictionary(fc.constantFrom('name', 'age', 'plan', 'newsletter', 'profile', 'avatar', '__proto__'), fc.jsonValue()),
            fc.anything(),
          ),
          files: fc.anything(),
          user_id: fc.anything(),
        }, { requiredKeys: [] }),
        async (input) => {
          const canvas = canvasFor(fixture('form-intake'));
          await collect(canvas.run({ query: 'start' }));
          const before = JSON.stringify(canvas.serialize());
          try {
            const events = await collect(canvas.run(input as never));
            expect(['user_inputs', 'workflow_finished']).toContain(events.at(-1)?.event);
          } catch (error) {
            expect(error).toBeInstanceOf(EaselError);
            expect(JSON.stringify(canvas.serialize())).toBe(before);
          }
        },
      ),
      { seed: 12, numRuns: 400 },
    );
  });
});
