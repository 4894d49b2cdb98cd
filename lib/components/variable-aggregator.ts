/**
 * VariableAggregator: for each group, the first of its variables that holds a value (in
 * Python's sense: not empty, zero or false) becomes the output named after the group — the
 * usual way to merge the branches of a Switch or Categorize.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { dict } from '../canvas/state';
import { checkVariable } from './checks';
import { truthy } from './conditions';

const params = z.lazy(() => z.looseObject({
  groups: z
    .array(
      z.looseObject({
        group_name: z.string().regex(/^[A-Za-z0-9_\-]+$/, 'letters, digits, "_" and "-" only'),
        type: z.string().nullish(),
        variables: z
          .array(z.looseObject({ value: z.string().min(1) }))
          .min(1, 'a group needs at least one variable'),
      }),
    )
    .min(1, 'needs at least one group'),
}));

export const variableAggregator = defineComponent({
  name: 'VariableAggregator',
  params,
  check(p, scope) {
    return p.groups.flatMap((g, i) =>
      g.variables.flatMap((v, j) => checkVariable(v.value, scope, `obj.params.groups.${i}.variables.${j}.value`)),
    );
  },
  async invoke(p, ctx) {
    const outputs = dict();
    for (const group of p.groups) {
      outputs[group.group_name] = null;
      for (const v of group.variables) {
        const value = await ctx.get(v.value);
        if (truthy(value)) {
          outputs[group.group_name] = value;
          break;
        }
      }
    }
    return { outputs };
  },
});
