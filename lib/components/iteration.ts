/**
 * Iteration: runs its body once per element of a list (`items_ref`). The body starts at its
 * IterationItem, which exposes `item` and `index`; each output with a `ref` collects that
 * body output from every round into a list, e.g. `{"evaluations": {"ref": "Agent:A@content"}}`.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { asReference } from '../canvas/references';
import { dict } from '../canvas/state';
import { checkStartNode, checkVariable } from './checks';

export const MAX_ITERATION_ITEMS = 1000;

export const iterationParams = z.lazy(() => z.looseObject({
  items_ref: z.string().min(1, 'names the list to iterate over'),
  outputs: z
    .record(z.string(), z.looseObject({ ref: z.string().nullish(), type: z.string().nullish() }))
    .nullish()
    .transform((o) => o ?? {}),
}));
export type IterationParams = z.output<typeof iterationParams>;

/** What an Iteration keeps between rounds: the list as it was at the start, and the cursor. */
export interface IterationMemo {
  items: unknown[];
  next: number;
}

export const iteration = defineComponent({
  name: 'Iteration',
  params: iterationParams,
  container: true,
  check(p, scope) {
    const problems = [
      ...checkVariable(p.items_ref, scope, 'obj.params.items_ref'),
      ...checkStartNode(scope, (name) => name === 'IterationItem', 'IterationItem'),
    ];
    for (const [name, spec] of Object.entries(p.outputs)) {
      if (!spec.ref) continue;
      const ref = asReference(spec.ref);
      if (ref?.kind !== 'component' || !scope.has(ref.componentId)) {
        problems.push({ field: `obj.params.outputs.${name}.ref`, message: `"${spec.ref}" is not an output of a component` });
      } else if (scope.parentOf(ref.componentId) !== scope.componentId) {
        problems.push({ field: `obj.params.outputs.${name}.ref`, message: `"${ref.componentId}" is not inside this Iteration` });
      }
    }
    return problems;
  },
  async invoke(p, ctx) {
    let items = await ctx.get(p.items_ref);
    if (typeof items === 'string') items = parseJsonList(items);
    if (!Array.isArray(items)) {
      throw new ComponentError(`${p.items_ref} must be a list, but it is ${items === null || items === undefined ? 'empty' : typeof items}`);
    }
    if (items.length > MAX_ITERATION_ITEMS) {
      throw new ComponentError(`${p.items_ref} has ${items.length} items; at most ${MAX_ITERATION_ITEMS} are iterated`);
    }
    ctx.setMemo({ items, next: 0 } satisfies IterationMemo);
    const outputs = dict();
    for (const [name, spec] of Object.entries(p.outputs)) if (spec.ref) outputs[name] = [];
    return { outputs, enterScope: true };
  },
});

function parseJsonList(text: string): unknown {
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed : text;
  } catch {
    return text;
  }
}
