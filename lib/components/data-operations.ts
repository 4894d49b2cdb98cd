/**
 * DataOperations: reshapes the objects held by the `query` variables — each an object or a
 * list (whose object elements are taken; anything else is skipped, as in RAGFlow) — with one
 * of `operations`, into the output `result`: a list of objects, or one object for `combine`.
 *
 *   select_keys       keep only the keys in `select_keys`
 *   literal_eval      turn text that holds a Python literal (`"[1, 2]"`, `"True"`, `"{'a': 1}"`)
 *                     into its value, in every value at any depth (see python-literal.ts)
 *   combine           merge the objects: a key seen again gathers its values into a list
 *   filter_values     keep the objects that match every rule `{key, operator, value}`
 *   append_or_update  set `updates` `{key, value}` on every object
 *   remove_keys       drop the keys in `remove_keys`
 *   rename_keys       rename `{old_key, new_key}` pairs
 *
 * Values are resolved as params are everywhere in Easel: a value that is exactly one
 * reference gives the raw value; other text is rendered. The result is bounded (see
 * `DATA_OPERATIONS_LIMITS`) because `append_or_update` and repeated `query` references can
 * copy one large value many times.
 */
import { z } from 'zod';
import { type ComponentContext, defineComponent } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { isRecord } from '../canvas/references';
import { dict } from '../canvas/state';
import { checkVariable } from './checks';
import { textFilterOperator, textMatches } from './conditions';
import { parsePythonLiteral } from './python-literal';
import { MAX_VALUE_DEPTH, pythonText } from './python-values';

export const DATA_OPERATIONS = [
  'select_keys',
  'literal_eval',
  'combine',
  'filter_values',
  'append_or_update',
  'remove_keys',
  'rename_keys',
] as const;
type Operation = (typeof DATA_OPERATIONS)[number];

export const DATA_OPERATIONS_LIMITS = {
  /**
   * The objects taken from `query` (a variable counts each time it is named), and what
   * `append_or_update` makes of them, measured as JSON text, at most (characters). The other
   * operations give no more than they take. @default 8 MiB
   */
  maxResultChars: 8 * 1024 * 1024,
} as const;

/** A list param whose entries may be left blank by RAGFlow's editor (null): those are dropped. */
const keyList = z.lazy(() => z
  .array(z.string().nullable())
  .nullish()
  .transform((keys) => (keys ?? []).filter((k): k is string => k !== null)));

const text = z.lazy(() => z.union([z.string(), z.number(), z.boolean()]).nullish());

const params = z.lazy(() => z.looseObject({
  // One variable or a list of them; entries the editor left blank (null) are skipped.
  query: z
    .union([z.string().min(1, 'names a variable'), z.array(z.string().min(1, 'names a variable').nullable())])
    .nullish()
    .transform((q): (string | null)[] => (q === null || q === undefined ? [] : typeof q === 'string' ? [q] : q)),
  operations: z
    .enum(DATA_OPERATIONS, { error: `must be one of: ${DATA_OPERATIONS.join(', ')}` })
    .nullish()
    .transform((op): Operation => op ?? 'literal_eval'),
  select_keys: keyList,
  remove_keys: keyList,
  filter_values: z
    .array(
      z.looseObject({
        key: z.string().min(1, 'names the key to compare'),
        operator: textFilterOperator,
        value: text,
      }),
    )
    .nullish()
    .transform((rules) => rules ?? []),
  updates: z
    .array(z.looseObject({ key: z.string().nullish(), value: z.unknown().optional() }))
    .nullish()
    .transform((updates) =>
      (updates ?? []).flatMap((u) => {
        const key = (u.key ?? '').trim();
        return key === '' ? [] : [{ key, value: u.value }];
      }),
    ),
  rename_keys: z
    .array(z.looseObject({ old_key: z.string().nullish(), new_key: z.string().nullish() }))
    .nullish()
    .transform((pairs) =>
      (pairs ?? []).flatMap((p) => {
        const from = (p.old_key ?? '').trim();
        const to = (p.new_key ?? '').trim();
        return from === '' || to === '' || from === to ? [] : [{ from, to }];
      }),
    ),
}));
type Params = z.output<typeof params>;
type Obj = Record<string, unknown>;

export const dataOperations = defineComponent({
  name: 'DataOperations',
  params,
  check(p, scope) {
    return p.query.flatMap((q, i) => (q === null ? [] : checkVariable(q, scope, `obj.params.query.${i}`)));
  },
  async invoke(p, ctx) {
    const { objects, size } = await inputObjects(p.query, ctx);
    const result = await apply(p, objects, ctx, size);
    return { outputs: { result } };
  },
});

/** The objects of every `query` variable, in order, and the size of their JSON text. */
async function inputObjects(query: readonly (string | null)[], ctx: ComponentContext): Promise<{ objects: Obj[]; size: number }> {
  const objects: Obj[] = [];
  const sizes = new Map<string, number>();
  let size = 0;
  for (const ref of query) {
    if (ref === null) continue;
    const value = await ctx.get(ref);
    let taken: Obj[];
    if (isRecord(value)) taken = [value];
    else if (Array.isArray(value)) taken = value.filter(isRecord);
    else continue;
    let refSize = sizes.get(ref);
    if (refSize === undefined) {
      refSize = taken.reduce((n, o) => n + jsonChars(o), 0);
      sizes.set(ref, refSize);
    }
    size += refSize;
    if (size > DATA_OPERATIONS_LIMITS.maxResultChars) throw tooLarge(size);
    objects.push(...taken);
  }
  return { objects, size };
}

async function apply(p: Params, objects: Obj[], ctx: ComponentContext, inputSize: number): Promise<unknown> {
  switch (p.operations) {
    case 'select_keys': {
      const keep = new Set(p.select_keys);
      return objects.map((o) => pick(o, (k) => keep.has(k)));
    }
    case 'remove_keys': {
      const drop = new Set(p.remove_keys);
      return objects.map((o) => pick(o, (k) => !drop.has(k)));
    }
    case 'rename_keys':
      return objects.map((o) => {
        const out = copy(o);
        for (const { from, to } of p.rename_keys) {
          if (!Object.hasOwn(out, from)) continue;
          const value = out[from];
          delete out[from];
          out[to] = value;
        }
        return out;
      });
    case 'literal_eval':
      return objects.map((o) => evalStrings(o, 0));
    case 'combine':
      return combine(objects);
    case 'filter_values': {
      const rules = await Promise.all(
        p.filter_values.map(async (r) => ({ ...r, target: await ctx.render(pythonText(r.value)) })),
      );
      return objects.filter((o) => rules.every((r) => Object.hasOwn(o, r.key) && textMatches(pythonText(o[r.key]), r.operator, r.target)));
    }
    case 'append_or_update': {
      const updates = await Promise.all(p.updates.map(async (u) => ({ key: u.key, value: (await ctx.resolve(u.value)) ?? null })));
      const perObject = updates.reduce((n, u) => n + jsonChars(u.value), 0);
      const size = inputSize + objects.length * perObject;
      if (size > DATA_OPERATIONS_LIMITS.maxResultChars) throw tooLarge(size);
      return objects.map((o) => {
        const out = copy(o);
        for (const u of updates) out[u.key] = u.value;
        return out;
      });
    }
  }
}

/**
 * RAGFlow's combine: the first value of a key is kept as it is; a later one turns it into a
 * list (or extends a list), lists being spread. Unlike RAGFlow, the inputs' lists are copied,
 * not extended in place.
 */
function combine(objects: readonly Obj[]): Obj {
  const out = dict();
  const gathered = new Set<string>();
  for (const o of objects) {
    for (const [key, value] of Object.entries(o)) {
      if (!Object.hasOwn(out, key)) {
        out[key] = value;
        continue;
      }
      const current = out[key];
      const list = Array.isArray(current) ? (gathered.has(key) ? current : [...current]) : [current];
      if (Array.isArray(value)) list.push(...value);
      else list.push(value);
      out[key] = list;
      gathered.add(key);
    }
  }
  return out;
}

/**
 * RAGFlow's `_recursive_eval`: text that looks like a literal (starts with a bracket or quote,
 * is True/False/None in any case, or digits and dots) is read as one; text that does not parse
 * stays as it was, as does everything else.
 */
function evalStrings(value: unknown, depth: number): unknown {
  if (depth > MAX_VALUE_DEPTH) throw new ComponentError(`the value is nested deeper than ${MAX_VALUE_DEPTH} levels`);
  if (typeof value === 'string') {
    const t = value.trim();
    const looksLiteral = /^[{[('"]/.test(t) || ['true', 'false', 'none'].includes(t.toLowerCase()) || /^[0-9]+$/.test(t.replaceAll('.', ''));
    if (!looksLiteral) return value;
    const parsed = parsePythonLiteral(value);
    return parsed === undefined ? value : parsed.value;
  }
  if (Array.isArray(value)) return value.map((v) => evalStrings(v, depth + 1));
  if (isRecord(value)) {
    const out = dict();
    for (const [k, v] of Object.entries(value)) out[k] = evalStrings(v, depth + 1);
    return out;
  }
  return value;
}

function pick(o: Obj, keep: (key: string) => boolean): Obj {
  const out = dict();
  for (const [k, v] of Object.entries(o)) if (keep(k)) out[k] = v;
  return out;
}

function copy(o: Obj): Obj {
  return pick(o, () => true);
}

function jsonChars(value: unknown): number {
  try {
    return JSON.stringify(value)?.length ?? 0;
  } catch {
    throw new ComponentError('a value cannot be written as JSON (nested too deeply)');
  }
}

function tooLarge(size: number): ComponentError {
  const mb = (n: number) => `${(n / (1024 * 1024)).toFixed(1)} MB`;
  return new ComponentError(
    `the result would be about ${mb(size)} of JSON, over the limit of ${mb(DATA_OPERATIONS_LIMITS.maxResultChars)}`,
  );
}
