/**
 * Jinja templating for components (Message, StringTransform), as RAGFlow renders `{% %}` and
 * `{{ }}` in their templates with jinja2's sandbox. The interpreter is @huggingface/jinja, pure
 * JavaScript: no worker, no I/O, no clock. It is loaded on the first template that needs it,
 * so workflows without Jinja never load it.
 *
 * Every render runs under caps (`JinjaCaps`) enforced inside the interpreter, each a
 * `JinjaCapError` (code `component_error`) naming the cap and its limit; jinja-interpreter.ts
 * says how they hook into the library. Syntax errors and failures while rendering are component
 * errors carrying the library's message. Undefined names render empty, as in jinja2.
 *
 * It lives beside the components, not in lib/canvas: only components render Jinja, and the
 * engine's own templates (`{cpn@var}` references) need no interpreter.
 *
 * @example
 *   await renderJinja('{% for x in xs %}{{ x }};{% endfor %}', { xs: [1, 2] }) // "1;2;"
 */
import { ComponentError } from '../canvas/errors';
import { splitTemplate } from '../canvas/references';

export interface JinjaCaps {
  /**
   * Loop iterations per render, over all loops: each loop counts its length when it starts,
   * so nested loops multiply; each macro call counts one.
   * @default 100_000
   */
  maxLoopIterations: number;
  /** Numbers one `range(...)` may produce, checked before the list is built. @default 100_000 */
  maxRangeLength: number;
  /** Characters in any string the template builds, the output included. @default 1_000_000 */
  maxStringLength: number;
  /** Items in any list the template builds. @default 100_000 */
  maxListLength: number;
}

export const DEFAULT_JINJA_CAPS: Readonly<JinjaCaps> = Object.freeze({
  maxLoopIterations: 100_000,
  maxRangeLength: 100_000,
  maxStringLength: 1_000_000,
  maxListLength: 100_000,
});

export type JinjaCap = keyof JinjaCaps;

const CAP_NAMES: Record<JinjaCap, string> = {
  maxLoopIterations: 'loop iterations',
  maxRangeLength: 'range() length',
  maxStringLength: 'string length',
  maxListLength: 'list length',
};

/** A render stopped by one of its caps. */
export class JinjaCapError extends ComponentError {
  constructor(
    readonly cap: JinjaCap,
    readonly limit: number,
    detail: string,
  ) {
    super(`Jinja ${CAP_NAMES[cap]} cap exceeded (limit ${limit}): ${detail}`);
  }
}

// A closed tag of either kind; `{% ... %}` or `{{ ... }}` that is not a `{cpn@var}` reference.
const JINJA_TAG = /\{%.*?%\}|\{\{.*?\}\}/s;

/**
 * Whether a template needs the interpreter: it has a `{% ... %}` or `{{ ... }}` tag once its
 * references (`{cpn@var}`, `{{sys.query}}`) are set aside. RAGFlow decides the same way.
 */
export function hasJinja(template: string): boolean {
  if (!template.includes('{%') && !template.includes('{{')) return false;
  const text = splitTemplate(template).map((part) => ('text' in part ? part.text : ' ')).join('');
  return JINJA_TAG.test(text);
}

type Interpreter = typeof import('./jinja-interpreter');
let interpreter: Promise<Interpreter> | undefined;

/** Renders `source` with `variables` (plain JSON-like values) under `caps`. */
export async function renderJinja(
  source: string,
  variables: Readonly<Record<string, unknown>>,
  caps: Partial<JinjaCaps> = {},
): Promise<string> {
  interpreter ??= import('./jinja-interpreter');
  const { renderCapped, CapExceeded, TemplateSyntaxError } = await interpreter;
  try {
    return renderCapped(source, variables, { ...DEFAULT_JINJA_CAPS, ...caps });
  } catch (error) {
    if (error instanceof CapExceeded) throw new JinjaCapError(error.cap, error.limit, error.message);
    const message = error instanceof Error ? error.message : String(error);
    if (error instanceof TemplateSyntaxError) throw new ComponentError(`invalid Jinja template: ${message}`, { cause: error });
    throw new ComponentError(`Jinja template failed: ${message}`, { cause: error });
  }
}

/** Whether the interpreter has been loaded in this process (for tests of the lazy load). */
export function jinjaLoaded(): boolean {
  return interpreter !== undefined;
}
