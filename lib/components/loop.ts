/**
 * Loop: runs its body (from its LoopItem) until a termination condition holds, an ExitLoop is
 * reached, or `maximum_loop_count` rounds have run. Its loop variables are its outputs
 * (`{Loop:Id@count}`), initialised on entry and usually changed by a VariableAssigner.
 *
 * Unlike RAGFlow, an empty list of termination conditions means "no condition" rather than
 * "stop before the first round"; the round count and the counters survive pauses.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { dict } from '../canvas/state';
import { checkStartNode, checkVariable } from './checks';
import { canonicalOperator, LOOP_OPERATORS, parseFloatStrict } from './conditions';

export const DEFAULT_MAXIMUM_LOOP_COUNT = 10;
export const MAX_LOOP_COUNT = 10_000;

const inputMode = z.lazy(() => z
  .string()
  .nullish()
  .transform((m) => (m === 'variable' ? 'variable' : m === 'constant' || m === null || m === undefined || m === '' ? 'constant' : 'empty')));

export const loopParams = z.lazy(() => z.looseObject({
  loop_variables: z
    .array(
      z.looseObject({
        variable: z.string().regex(/^[A-Za-z0-9_\-]+$/, 'a loop variable name is letters, digits, "_" and "-"'),
        input_mode: inputMode,
        value: z.unknown().optional(),
        type: z.string().nullish(),
      }),
    )
    .nullish()
    .transform((v) => v ?? []),
  loop_termination_condition: z
    .array(
      z.looseObject({
        variable: z.string().min(1, 'names the variable to test'),
        operator: z
          .string()
          .transform(canonicalOperator)
          .pipe(z.enum(LOOP_OPERATORS, { error: `must be one of: ${LOOP_OPERATORS.join(', ')}` })),
        value: z.unknown().optional(),
        input_mode: inputMode,
      }),
    )
    .nullish()
    .transform((v) => v ?? []),
  logical_operator: z
    .enum(['and', 'or'], { error: 'must be "and" or "or"' })
    .nullish()
    .transform((v) => v ?? 'and'),
  maximum_loop_count: z
    .number()
    .int()
    .min(0)
    .max(MAX_LOOP_COUNT)
    .nullish()
    .transform((v) => v ?? DEFAULT_MAXIMUM_LOOP_COUNT),
}));
export type LoopParams = z.output<typeof loopParams>;

/** Rounds started so far in the current run of the Loop. */
export interface LoopMemo {
  rounds: number;
}

export const loop = defineComponent({
  name: 'Loop',
  params: loopParams,
  container: true,
  check(p, scope) {
    const problems = checkStartNode(scope, (name) => name === 'LoopItem', 'LoopItem');
    p.loop_variables.forEach((v, i) => {
      if (v.input_mode === 'variable') {
        problems.push(...checkVariable(String(v.value ?? ''), scope, `obj.params.loop_variables.${i}.value`));
      }
    });
    p.loop_termination_condition.forEach((c, i) => {
      problems.push(...checkVariable(c.variable, scope, `obj.params.loop_termination_condition.${i}.variable`));
      if (c.input_mode === 'variable') {
        problems.push(...checkVariable(String(c.value ?? ''), scope, `obj.params.loop_termination_condition.${i}.value`));
      }
    });
    return problems;
  },
  async invoke(p, ctx) {
    const outputs = dict();
    for (const v of p.loop_variables) {
      outputs[v.variable] =
        v.input_mode === 'variable'
          ? await ctx.get(String(v.value))
          : v.input_mode === 'constant'
            ? coerce(v.value, v.type)
            : emptyOfType(v.type);
    }
    ctx.setMemo({ rounds: 0 } satisfies LoopMemo);
    return { outputs, enterScope: true };
  },
});

function coerce(value: unknown, type: string | null | undefined): unknown {
  const t = (type ?? '').toLowerCase();
  if (t === 'number' && typeof value === 'string') {
    const n = parseFloatStrict(value);
    if (n === undefined) throw new ComponentError(`"${value}" is not a number`);
    return n;
  }
  if (t === 'boolean' && typeof value === 'string') return value.trim().toLowerCase() === 'true';
  if ((t.startsWith('object') || t.startsWith('array')) && typeof value === 'string') {
    try {
      return JSON.parse(value);
    } catch {
      throw new ComponentError(`"${value}" is not valid JSON for a ${t}`);
    }
  }
  return value ?? emptyOfType(type);
}

function emptyOfType(type: string | null | undefined): unknown {
  const t = (type ?? '').toLowerCase();
  if (t === 'number') return 0;
  if (t === 'boolean') return false;
  if (t.startsWith('object')) return {};
  if (t.startsWith('array')) return [];
  return '';
}
