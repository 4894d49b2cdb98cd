/**
 * LoopItem: the start of every round of a Loop. Before each round it checks the Loop's round
 * limit and termination conditions (a while-loop); when one says stop, the Loop ends.
 * Exposes `index`, the number of the round starting (from 0).
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { checkInside } from './checks';
import { loopCompare } from './conditions';
import type { LoopMemo, LoopParams } from './loop';

export const loopItem = defineComponent({
  name: 'LoopItem',
  params: z.looseObject({}),
  scopeEntry: true,
  check: (_p, scope) => checkInside(scope, 'Loop', 'a LoopItem must be inside a Loop'),
  async invoke(_p, ctx) {
    const parent = ctx.parent();
    const memo = parent?.memo<LoopMemo>();
    if (!parent || !memo) throw new ComponentError('the Loop of this LoopItem has not started');
    const params = parent.params as LoopParams;
    if (memo.rounds >= params.maximum_loop_count) return { exitScope: true };
    const conditions = params.loop_termination_condition;
    if (conditions.length > 0) {
      const results: boolean[] = [];
      for (const c of conditions) {
        const value = c.input_mode === 'variable' ? await ctx.get(String(c.value ?? '')) : (c.value ?? '');
        results.push(loopCompare(await ctx.get(c.variable), c.operator, value));
      }
      const stop = params.logical_operator === 'and' ? results.every(Boolean) : results.some(Boolean);
      if (stop) return { exitScope: true };
    }
    parent.setMemo({ rounds: memo.rounds + 1 } satisfies LoopMemo);
    return { outputs: { index: memo.rounds } };
  },
});
