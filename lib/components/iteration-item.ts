/**
 * IterationItem: the start of every round of an Iteration. It first collects the outputs of
 * the round that just ended into the Iteration's lists, then either exposes the next element
 * (`item`, `index`, and `result` as RAGFlow's alias) or ends the Iteration.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { checkInside } from './checks';
import { dict } from '../canvas/state';
import type { IterationMemo, IterationParams } from './iteration';

export const iterationItem = defineComponent({
  name: 'IterationItem',
  params: z.looseObject({}),
  scopeEntry: true,
  check: (_p, scope) => checkInside(scope, 'Iteration', 'an IterationItem must be inside an Iteration'),
  async invoke(_p, ctx) {
    const parent = ctx.parent();
    const memo = parent?.memo<IterationMemo>();
    if (!parent || !memo) throw new ComponentError('the Iteration of this IterationItem has not started');
    const params = parent.params as IterationParams;
    if (memo.next > 0) {
      const collected = dict();
      Object.assign(collected, parent.outputs());
      for (const [name, spec] of Object.entries(params.outputs)) {
        if (!spec.ref) continue;
        const list = Array.isArray(collected[name]) ? (collected[name] as unknown[]) : [];
        collected[name] = [...list, await ctx.get(spec.ref)];
      }
      parent.setOutputs(collected);
    }
    if (memo.next >= memo.items.length) return { exitScope: true };
    const index = memo.next;
    const item = memo.items[index];
    parent.setMemo({ items: memo.items, next: index + 1 } satisfies IterationMemo);
    return { outputs: { item, index, result: item } };
  },
});
