/**
 * VariableAssigner: writes variables — conversation variables (`env.x`), globals, or another
 * component's output such as a Loop's variables — one operation after another. Unlike
 * RAGFlow, which writes "ERROR:..." strings into the variable, an impossible operation (append
 * to a non-list, divide by zero) fails the component, so its exception handling applies.
 */
import { z } from 'zod';
import { type ComponentContext, defineComponent } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { asReference } from '../canvas/references';
import { checkVariable } from './checks';

export const ASSIGN_OPERATORS = [
  'overwrite',
  'clear',
  'set',
  'append',
  'extend',
  'remove_first',
  'remove_last',
  '+=',
  '-=',
  '*=',
  '/=',
] as const;
type AssignOperator = (typeof ASSIGN_OPERATORS)[number];
const NO_PARAMETER: readonly AssignOperator[] = ['clear', 'remove_first', 'remove_last'];

const params = z.lazy(() => z.looseObject({
  variables: z
    .array(
      z
        .looseObject({
          variable: z.string().min(1, 'names the variable to write'),
          operator: z
            .string()
            .transform((op) => op.trim().replace('remove-first', 'remove_first').replace('remove-last', 'remove_last'))
            .pipe(z.enum(ASSIGN_OPERATORS, { error: `must be one of: ${ASSIGN_OPERATORS.join(', ')}` })),
          parameter: z.unknown().optional(),
        })
        .refine((v) => NO_PARAMETER.includes(v.operator) || (v.parameter !== undefined && v.parameter !== null), {
          path: ['parameter'],
          message: 'this operator needs a parameter',
        }),
    )
    .nullish()
    .transform((v) => v ?? []),
}));

export const variableAssigner = defineComponent({
  name: 'VariableAssigner',
  params,
  check(p, scope) {
    return p.variables.flatMap((v, i) => {
      const problems = checkVariable(v.variable, scope, `obj.params.variables.${i}.variable`);
      if (problems.length === 0 && asReference(v.variable)?.kind === 'scope') {
        problems.push({ field: `obj.params.variables.${i}.variable`, message: 'item and index cannot be assigned' });
      }
      return problems;
    });
  },
  async invoke(p, ctx) {
    for (const v of p.variables) {
      const current = await ctx.get(v.variable);
      ctx.setVariable(v.variable, await apply(v.operator, current, v.parameter, v.variable, ctx));
    }
    return {};
  },
});

async function apply(
  op: AssignOperator,
  current: unknown,
  parameter: unknown,
  name: string,
  ctx: ComponentContext,
): Promise<unknown> {
  const fail = (why: string) => new ComponentError(`cannot ${op} ${name}: ${why}`);
  switch (op) {
    case 'overwrite':
      return valueOf(parameter, ctx);
    case 'clear':
      return emptyLike(current);
    case 'set':
      // Text targets take a template; other types take the literal parameter.
      return current === null || current === undefined || typeof current === 'string'
        ? typeof parameter === 'string' ? ctx.render(parameter) : parameter
        : parameter;
    case 'append': {
      const list = current ?? [];
      if (!Array.isArray(list)) throw fail('it is not a list');
      return [...list, await valueOf(parameter, ctx)];
    }
    case 'extend': {
      const list = current ?? [];
      if (!Array.isArray(list)) throw fail('it is not a list');
      const more = await valueOf(parameter, ctx);
      if (!Array.isArray(more)) throw fail('the parameter is not a list');
      return [...list, ...more];
    }
    case 'remove_first':
    case 'remove_last': {
      if (!Array.isArray(current)) throw fail('it is not a list');
      return op === 'remove_first' ? current.slice(1) : current.slice(0, -1);
    }
    case '+=':
    case '-=':
    case '*=':
    case '/=': {
      if (typeof current !== 'number') throw fail('it is not a number');
      const n = typeof parameter === 'number' ? parameter : Number.NaN;
      if (!Number.isFinite(n)) throw fail('the parameter is not a number');
      if (op === '+=') return current + n;
      if (op === '-=') return current - n;
      if (op === '*=') return current * n;
      if (n === 0) throw fail('division by zero');
      return current / n;
    }
  }
}

/** A parameter that names a variable gives its value; anything else is taken literally. */
async function valueOf(parameter: unknown, ctx: ComponentContext): Promise<unknown> {
  if (typeof parameter === 'string' && asReference(parameter)) return ctx.get(parameter);
  return parameter;
}

function emptyLike(value: unknown): unknown {
  if (Array.isArray(value)) return [];
  if (typeof value === 'string') return '';
  if (typeof value === 'boolean') return false;
  if (typeof value === 'number') return 0;
  if (typeof value === 'object' && value !== null) return {};
  return null;
}
