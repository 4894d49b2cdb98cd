/**
 * Strict request bodies that say what was meant: a field the body does not take is refused
 * naming it and, when one is plausible, the field the client likely meant — a field of a
 * nested object sent one level too high (`inputs` -> `run_input.inputs`), the same name in
 * another case or spelling (`runId` -> `run_id`, `querry` -> `query`), or an entry of a small
 * table of names other APIs use (`session_id` -> `run_id`). The known names are read from the
 * schema the issue comes from, so a field added to it is known at once.
 *
 * @example
 *   const Body = z.strictObject({ run_id: z.string().optional() }, { error: unknownFieldError({ session_id: 'run_id' }) });
 *   // {"runId": "x"} -> issue on `runId`: "unknown field; did you mean run_id? The body takes run_id"
 */
import { z } from '@hono/zod-openapi';

/** An issue as zod hands it to a schema's `error` option (the fields read here). */
interface RawIssue {
  code?: string;
  keys?: readonly string[];
  path?: readonly PropertyKey[];
  inst?: unknown;
}

/**
 * The `error` option of a `z.strictObject`: its unknown keys get a message naming the likely
 * intended field; other issues keep zod's message. `likely`: names another API uses for a
 * field of this body (key: the name sent; value: the field as a path from this body).
 */
export function unknownFieldError(likely: Readonly<Record<string, string>> = {}): (issue: RawIssue) => string | undefined {
  return (issue) => {
    if (issue.code !== 'unrecognized_keys' || !(issue.inst instanceof z.ZodObject)) return undefined;
    const shape = issue.inst.shape as Record<string, z.ZodType>;
    const [key = '', ...others] = issue.keys ?? [];
    const at = (issue.path ?? []).map(String);
    const owner = at.length > 0 ? at.join('.') : 'the body';
    const known = Object.keys(shape);
    const meant = intendedField(key, shape, likely);
    const fullPath = (field: string) => [...at, field].join('.');
    const hint = meant ? `; did you mean ${fullPath(meant)}${nestedExample(at, meant)}?` : '.';
    const more = others.length > 0 ? `; also unknown: ${others.join(', ')}` : '';
    return `unknown field${hint} ${owner === 'the body' ? 'The body' : owner} takes ${known.join(', ')}${more}`;
  };
}

/** The field `key` most likely stands for, as a path from the object it was sent in. */
export function intendedField(key: string, shape: Readonly<Record<string, z.ZodType>>, likely: Readonly<Record<string, string>> = {}): string | undefined {
  const known = Object.keys(shape);
  // a field of a nested object, sent one level too high
  for (const [name, schema] of Object.entries(shape)) {
    const nested = objectShape(schema);
    if (nested && Object.hasOwn(nested, key)) return `${name}.${key}`;
  }
  const table = Object.hasOwn(likely, key) ? likely[key] : undefined;
  if (table !== undefined) return table;
  return closestName(key, known);
}

/**
 * The known name that `key` is a misspelling of: the same once case, `_` and `-` are set
 * aside (`runId`, `Run-ID`), else the nearest by edit distance when it is at most a quarter
 * of the name (at least 1) and no other name is as near.
 */
export function closestName(key: string, known: readonly string[]): string | undefined {
  const plain = (s: string) => s.toLowerCase().replace(/[_-]/g, '');
  const same = known.find((name) => plain(name) === plain(key));
  if (same !== undefined) return same;
  let best: string | undefined;
  let bestDistance = Infinity;
  let tied = false;
  for (const name of known) {
    const d = editDistance(plain(key), plain(name));
    if (d < bestDistance) [best, bestDistance, tied] = [name, d, false];
    else if (d === bestDistance) tied = true;
  }
  if (best === undefined || tied) return undefined;
  return bestDistance <= Math.max(1, Math.floor(plain(best).length / 4)) ? best : undefined;
}

/** Levenshtein distance (insertions, deletions, substitutions), on UTF-16 units. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min((previous[j] as number) + 1, (row[j - 1] as number) + 1, (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[b.length] as number;
}

/** The shape of an object schema, through `.optional()` / `.nullable()`; undefined for anything else. */
function objectShape(schema: z.ZodType): Record<string, z.ZodType> | undefined {
  let inner: unknown = schema;
  while (inner instanceof z.ZodOptional || inner instanceof z.ZodNullable) inner = inner.unwrap();
  return inner instanceof z.ZodObject ? (inner.shape as Record<string, z.ZodType>) : undefined;
}

/** For a field that goes one level down: where it goes, as JSON (`{"run_input": {"inputs": ...}}`). */
function nestedExample(at: readonly string[], meant: string): string {
  const parts = meant.split('.');
  if (parts.length < 2 || at.length > 0) return '';
  const json = parts.reduceRight((inner, part) => `{"${part}": ${inner}}`, '...');
  return ` (${json})`;
}
