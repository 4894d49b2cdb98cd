/**
 * Switch: routes to the targets of the first condition that holds, else to `end_cpn_ids`.
 * A condition joins its items with `and` (all hold) or anything else as `or` (one holds), as
 * RAGFlow does; each item compares a variable (`cpn_id`, a bare reference) with a value.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { checkVariable, idList } from './checks';
import { canonicalOperator, SWITCH_OPERATORS, switchCompare } from './conditions';

const ids = z.lazy(() => z.union([z.string(), z.array(z.string())]).nullish().transform(idList));

const params = z.lazy(() => z
  .looseObject({
    conditions: z
      .array(
        z.looseObject({
          logical_operator: z.string().nullish(),
          items: z
            .array(
              z.looseObject({
                cpn_id: z.string().nullish(),
                operator: z
                  .string()
                  .transform(canonicalOperator)
                  .pipe(z.enum(SWITCH_OPERATORS, { error: `must be one of: ${SWITCH_OPERATORS.join(', ')}` })),
                value: z.unknown().optional(),
              }),
            )
            .nullish()
            .transform((items) => items ?? []),
          to: ids.pipe(z.array(z.string()).min(1, 'a condition needs at least one target')),
        }),
      )
      .min(1, 'needs at least one condition'),
    end_cpn_ids: ids.optional(),
    end_cpn_id: z.string().nullish(),
  })
  .transform((p) => ({ ...p, else: idList(p.end_cpn_ids?.length ? p.end_cpn_ids : p.end_cpn_id) }))
  .refine((p) => p.else.length > 0, { path: ['end_cpn_ids'], message: 'the else branch needs at least one target' }));

export const switchComponent = defineComponent({
  name: 'Switch',
  params,
  branchTargets: (p) => [...p.conditions.flatMap((c) => c.to), ...p.else],
  check(p, scope) {
    return p.conditions.flatMap((c, i) =>
      c.items.flatMap((item, j) =>
        item.cpn_id ? checkVariable(item.cpn_id, scope, `obj.params.conditions.${i}.items.${j}.cpn_id`) : [],
      ),
    );
  },
  async invoke(p, ctx) {
    for (const condition of p.conditions) {
      const all = condition.logical_operator === 'and';
      let matched = all;
      for (const item of condition.items) {
        if (!item.cpn_id) continue;
        const holds = switchCompare(await ctx.get(item.cpn_id), item.operator, item.value);
        if (all && !holds) {
          matched = false;
          break;
        }
        if (!all && holds) {
          matched = true;
          break;
        }
      }
      // A condition without usable items holds, as in RAGFlow.
      if (!all && condition.items.every((item) => !item.cpn_id)) matched = true;
      if (matched) return { outputs: { _next: condition.to }, next: condition.to };
    }
    return { outputs: { _next: p.else }, next: p.else };
  },
});
