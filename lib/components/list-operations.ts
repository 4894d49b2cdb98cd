/**
 * ListOperations: one operation on the list held by `query`, with outputs `result` (a list),
 * `first` and `last` (its ends, null when it is empty) — RAGFlow's semantics throughout:
 *
 *   nth              the `n`th element, counted from 1 (negative `n` from the end)
 *   head / tail      the first / last `n` elements (`topN` is head)
 *   filter           elements whose text matches `filter` `{operator, value}`
 *   sort             `sort_method` asc or desc; objects by the keys in `sort_by`, else whole
 *   drop_duplicates  the first of equal elements (objects equal whatever their key order)
 *
 * Out of range `n` gives an empty list, or an error in `strict` mode. Sorting compares as
 * Python does, so a list that mixes text and numbers, or lacks a `sort_by` key in some
 * objects, is an error. The outputs hold only elements of the input list (at most the list
 * and its two ends), so they need no bound of their own.
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { isRecord } from '../canvas/references';
import { checkVariable } from './checks';
import { textFilterOperator, textMatches } from './conditions';
import { hashable, hashKey, pythonCompare, pythonText } from './python-values';

export const LIST_OPERATIONS = ['nth', 'head', 'tail', 'filter', 'sort', 'drop_duplicates'] as const;
type Operation = (typeof LIST_OPERATIONS)[number];

/** Python's `int()` of a param: integers, numbers truncated, integer text (`" 3"`, `"1_000"`). */
const integer = z.lazy(() => z
  .union([z.number(), z.string()], { error: 'must be an integer' })
  .nullish()
  .transform((v, issue) => {
    if (v === null || v === undefined) return 0;
    if (typeof v === 'number' && Number.isFinite(v)) return Math.trunc(v);
    if (typeof v === 'string' && /^\s*[-+]?\d+(?:_\d+)*\s*$/.test(v)) return Number(v.replaceAll('_', ''));
    issue.addIssue({ code: 'custom', message: 'must be an integer' });
    return z.NEVER;
  }));

/** RAGFlow's strict flag: a boolean, or text such as "true", "yes", "on", "1". */
const flag = z.lazy(() => z
  .union([z.boolean(), z.string(), z.number()], { error: 'must be true or false' })
  .nullish()
  .transform((v) => (typeof v === 'string' ? ['1', 'true', 'yes', 'on'].includes(v.trim().toLowerCase()) : Boolean(v))));

const params = z.lazy(() => z.looseObject({
  query: z.string({ error: 'names the list variable' }).min(1, 'names the list variable'),
  operations: z
    .string({ error: `must be one of: ${LIST_OPERATIONS.join(', ')}` })
    .nullish()
    .transform((op) => {
      const name = (op ?? '').trim();
      return name.toLowerCase() === 'topn' ? 'head' : name || 'nth';
    })
    .pipe(z.enum(LIST_OPERATIONS, { error: `must be one of: ${LIST_OPERATIONS.join(', ')}` })),
  n: integer,
  strict: flag,
  sort_method: z
    .string()
    .nullish()
    .transform((m) => m || 'asc')
    .pipe(z.enum(['asc', 'desc'], { error: 'must be "asc" or "desc"' })),
  // Comma-separated keys (primary first), or a list of them.
  sort_by: z
    .union([z.string(), z.array(z.string())], { error: 'must be keys separated by commas' })
    .nullish()
    .transform((keys) =>
      (typeof keys === 'string' ? keys.split(',') : (keys ?? [])).map((k) => k.trim()).filter((k) => k !== ''),
    ),
  filter: z
    .looseObject({
      operator: textFilterOperator.optional().transform((op) => op ?? '='),
      value: z.union([z.string(), z.number(), z.boolean()]).nullish(),
    })
    .nullish()
    .transform((f) => ({ operator: f?.operator ?? '=', value: pythonText(f?.value) })),
}));
type Params = z.output<typeof params>;

export const listOperations = defineComponent({
  name: 'ListOperations',
  params,
  check(p, scope) {
    return checkVariable(p.query, scope, 'obj.params.query');
  },
  async invoke(p, ctx) {
    const items = await ctx.get(p.query);
    if (!Array.isArray(items)) throw new ComponentError('The input of List Operations should be an array.');
    const result = apply(p, items);
    return {
      outputs: {
        result,
        first: result.length > 0 ? result[0] : null,
        last: result.length > 0 ? result[result.length - 1] : null,
      },
    };
  },
});

function apply(p: Params, items: readonly unknown[]): unknown[] {
  const { n, strict } = p;
  const outOfRange = (op: Operation) =>
    new ComponentError(`${op} requires n to be within the valid range in strict mode, got ${n}.`);
  switch (p.operations) {
    case 'nth': {
      const inRange = n !== 0 && Math.abs(n) <= items.length;
      if (!inRange && strict) throw outOfRange('nth');
      return inRange ? [items[n > 0 ? n - 1 : items.length + n]] : [];
    }
    case 'head':
    case 'tail': {
      if (strict && !(n >= 1 && n <= items.length)) throw outOfRange(p.operations);
      if (n < 1) return [];
      return p.operations === 'head' ? items.slice(0, n) : items.slice(-n);
    }
    case 'filter':
      return items.filter((item) => textMatches(pythonText(item), p.filter.operator, p.filter.value));
    case 'sort':
      return sort(items, p.sort_method, p.sort_by);
    case 'drop_duplicates': {
      const seen = new Set<string>();
      return items.filter((item) => {
        const key = hashKey(item);
        if (seen.has(key)) return false;
        seen.add(key);
        return true;
      });
    }
  }
}

/**
 * RAGFlow's sort: when the first element is an object, elements are ordered by their
 * `sort_by` values (missing ones are None) or, without keys, by their sorted (key, value)
 * pairs; otherwise by themselves. Stable in both directions, as Python's `sorted`.
 */
function sort(items: readonly unknown[], method: 'asc' | 'desc', sortBy: readonly string[]): unknown[] {
  if (items.length === 0) return [];
  let keys: unknown[];
  if (isRecord(items[0])) {
    keys = items.map((item, i) => {
      if (sortBy.length === 0) return hashable(item);
      if (!isRecord(item)) throw new ComponentError(`cannot sort by ${sortBy.join(', ')}: element ${i + 1} is not an object`);
      return sortBy.map((k) => (Object.hasOwn(item, k) ? item[k] : null));
    });
  } else {
    keys = [...items];
  }
  const sign = method === 'desc' ? -1 : 1;
  const order = items.map((_, i) => i);
  try {
    order.sort((a, b) => sign * pythonCompare(keys[a], keys[b]));
  } catch (error) {
    if (error instanceof ComponentError) throw new ComponentError(`cannot sort the list: ${error.message}`);
    throw error;
  }
  return order.map((i) => items[i]);
}
