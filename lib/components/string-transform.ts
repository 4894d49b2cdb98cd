/**
 * StringTransform, RAGFlow's two ways with text:
 *
 * - `split`: the text in `split_ref` cut at any of `delimiters` (the delimiters dropped);
 *   output `result`, a list of strings. A value that is empty in Python's sense splits as "".
 * - `merge`: `script` with its references filled in, lists joined with the first delimiter;
 *   output `result`, a string. A script with Jinja tags is rendered by the interpreter with
 *   Message's rules and caps (jinja.ts, template-references.ts).
 *
 * @example
 *   { method: 'split', split_ref: '{Begin@tags}', delimiters: [',', ';'] }   // "a,b;c" -> ["a","b","c"]
 *   { method: 'merge', script: 'Tags: {Begin@list}', delimiters: [', '] }    // "Tags: a, b"
 */
import { z } from 'zod';
import { defineComponent } from '../canvas/component';
import { ComponentError } from '../canvas/errors';
import { checkVariable } from './checks';
import { truthy } from './conditions';
import { hasJinja, renderJinja } from './jinja';
import { bindReferences, interpolate } from './template-references';

const params = z.lazy(() => z.looseObject({
  method: z.enum(['split', 'merge'], { error: 'must be one of: split, merge' }).nullish().transform((m) => m ?? 'split'),
  script: z.string().nullish().transform((s) => s ?? ''),
  split_ref: z.string().nullish().transform((s) => s ?? ''),
  delimiters: z
    .union([z.string(), z.array(z.string())])
    .nullish()
    .transform((d) => (d === null || d === undefined ? [','] : Array.isArray(d) ? d : [d]))
    .pipe(z.array(z.string().min(1, 'a delimiter cannot be empty')).min(1, 'needs at least one delimiter')),
}));

export const stringTransform = defineComponent({
  name: 'StringTransform',
  params,
  defaultOutput: 'result',
  check(p, scope) {
    return p.method === 'split' ? checkVariable(p.split_ref, scope, 'obj.params.split_ref') : [];
  },
  async invoke(p, ctx) {
    if (p.method === 'split') {
      const value = await ctx.get(p.split_ref);
      const text = truthy(value) ? value : '';
      if (typeof text !== 'string') {
        throw new ComponentError(`split_ref: ${p.split_ref} is not a string (got ${Array.isArray(text) ? 'a list' : typeof text})`);
      }
      const at = new RegExp(p.delimiters.map(escapeRegExp).join('|'), 's');
      return { outputs: { result: text.split(at) } };
    }
    const options = { listDelimiter: p.delimiters[0] };
    if (!hasJinja(p.script)) return { outputs: { result: await interpolate(p.script, ctx, options) } };
    const { source, variables } = await bindReferences(p.script, ctx, options);
    return { outputs: { result: await renderJinja(source, variables) } };
  },
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
