/**
 * References (`{cpn@var}`, `{sys.query}`, `{item}`) in the templates of Message and
 * StringTransform, as RAGFlow resolves them before and around its jinja2 sandbox.
 *
 * `bindReferences` turns a Jinja template's references into template variables. Outside tags a
 * reference prints its value as text, as everywhere else (`Hi {sys.user_id}` -> `Hi {{ v }}`);
 * inside a tag it is the value itself, so lists loop and objects have attributes
 * (`{% for d in {Agent:A@docs} %}`). RAGFlow hands jinja2 every value as its text instead.
 * Values never become template source: `{{` in an answer prints as it is.
 *
 * `{item}` / `{index}` are taken as references only when written tight (`{item}`, `{{item}}`,
 * as RAGFlow matches them) and inside an Iteration; otherwise `{{ item }}` is Jinja's own name,
 * e.g. a loop variable.
 *
 * @example
 *   await bindReferences('{% if {sys.query} %}You said: {sys.query}{% endif %}', ctx)
 *   // { source: '{% if _easel_ref_0 %}You said: {{ _easel_text_0 }}{% endif %}', variables: {...} }
 */
import type { ComponentContext } from '../canvas/component';
import { parseReference, type Reference, REFERENCE_BODY_SOURCE, referencePattern, splitTemplate, valueToText } from '../canvas/references';

export interface ReferenceOptions {
  /** Lists read as text are joined with this instead of written as JSON (StringTransform's merge). */
  listDelimiter?: string;
}

export interface BoundTemplate {
  source: string;
  variables: Record<string, unknown>;
}

type Reader = Pick<ComponentContext, 'get'>;

const OUTSIDE = new RegExp(referencePattern().source, 'y');
const INSIDE = new RegExp(String.raw`\{\s*${REFERENCE_BODY_SOURCE}\s*\}`, 'y');
const CLOSERS: Record<string, string> = { '{{': '}}', '{%': '%}', '{#': '#}' };

/** How a value reads as text: strings as they are, nothing as "", lists joined if asked, the rest as JSON. */
export function referenceText(value: unknown, options: ReferenceOptions = {}): string {
  if (Array.isArray(value) && options.listDelimiter !== undefined) {
    return value.map((v) => valueToText(v)).join(options.listDelimiter);
  }
  return valueToText(value);
}

/** Renders references as text, without Jinja; an unresolved `{item}` stays as written. */
export async function interpolate(template: string, ctx: Reader, options: ReferenceOptions = {}): Promise<string> {
  let text = '';
  for (const part of splitTemplate(template)) {
    if ('text' in part) {
      text += part.text;
      continue;
    }
    const value = await ctx.get(part.ref.raw);
    text += part.ref.kind === 'scope' && value === undefined ? part.source : referenceText(value, options);
  }
  return text;
}

export async function bindReferences(template: string, ctx: Reader, options: ReferenceOptions = {}): Promise<BoundTemplate> {
  const variables: Record<string, unknown> = {};
  const names = new Map<string, string>();
  /** The variable holding `ref` as text (outside tags) or as it is (inside). */
  const bind = async (ref: Reference, source: string, asText: boolean): Promise<string | undefined> => {
    if (ref.kind === 'scope' && /\s/.test(source)) return undefined;
    const key = `${asText ? 'text' : 'ref'}:${ref.raw}`;
    const known = names.get(key);
    if (known) return known;
    const value = await ctx.get(ref.raw);
    if (ref.kind === 'scope' && value === undefined) return undefined;
    const name = `_easel_${asText ? 'text' : 'ref'}_${names.size}`;
    names.set(key, name);
    variables[name] = asText ? referenceText(value, options) : value;
    return name;
  };

  let source = '';
  let closer: string | undefined; // the end of the tag being read
  let i = 0;
  while (i < template.length) {
    if (closer === undefined) {
      const ref = matchAt(OUTSIDE, template, i);
      if (ref) {
        const name = await bind(parseReference(ref[1]), ref[0], true);
        source += name === undefined ? ref[0] : `{{ ${name} }}`;
        i += ref[0].length;
        continue;
      }
      const opener = template.slice(i, i + 2);
      closer = CLOSERS[opener];
      const step = closer === undefined ? 1 : 2;
      source += template.slice(i, i + step);
      i += step;
      continue;
    }
    if (template.startsWith(closer, i)) {
      source += closer;
      i += closer.length;
      closer = undefined;
      continue;
    }
    if (closer !== '#}') {
      const quote = template[i];
      if (quote === '"' || quote === "'") {
        // a string literal is copied whole: braces in it are text
        const end = stringEnd(template, i, quote);
        source += template.slice(i, end);
        i = end;
        continue;
      }
      const ref = matchAt(INSIDE, template, i);
      if (ref) {
        const name = await bind(parseReference(ref[1]), ref[0], false);
        source += name ?? ref[0];
        i += ref[0].length;
        continue;
      }
    }
    source += template[i];
    i++;
  }
  return { source, variables };
}

function matchAt(pattern: RegExp, text: string, at: number): (RegExpExecArray & { 1: string }) | undefined {
  pattern.lastIndex = at;
  const m = pattern.exec(text);
  return m?.[1] === undefined ? undefined : (m as RegExpExecArray & { 1: string });
}

/** The index after the string literal opened at `start`, honouring backslash escapes. */
function stringEnd(text: string, start: number, quote: string): number {
  for (let i = start + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === quote) return i + 1;
  }
  return text.length;
}
