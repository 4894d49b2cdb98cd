/**
 * Variable references inside params and templates, in RAGFlow's syntax:
 *
 *   {Agent:Clever@content}        output `content` of component `Agent:Clever`
 *   {Invoke:Api@result.items.0}   dotted path into objects, lists and JSON strings
 *   {sys.query} {env.tone}        globals and conversation variables
 *   {item} {index}                the current element inside an Iteration
 *
 * A param that is exactly one reference gets the raw value; any other text gets the values
 * interpolated as text (strings as they are, other values as JSON, missing ones as "").
 */

export type Reference =
  | { kind: 'component'; componentId: string; output: string; path: readonly string[]; raw: string }
  | { kind: 'global'; name: string; path: readonly string[]; raw: string }
  | { kind: 'scope'; name: 'item' | 'index'; raw: string };

const REF_BODY = String.raw`([A-Za-z0-9_:\-]+@[A-Za-z0-9_.\-]+|(?:sys|env)\.[A-Za-z0-9_.\-]+|item|index)`;
/** The inside of a reference's braces, as a regex source with one capturing group. */
export const REFERENCE_BODY_SOURCE = REF_BODY;
// One or two braces around the body, as RAGFlow's editor writes either.
const REF_SOURCE = String.raw`\{\{?\s*` + REF_BODY + String.raw`\s*\}\}?`;
const EXACT_REF = new RegExp(`^\\s*${REF_SOURCE}\\s*$`);

/** A fresh global regex each call: a shared one would carry `lastIndex` across callers. */
export function referencePattern(): RegExp {
  return new RegExp(REF_SOURCE, 'g');
}

/** Parses the inside of braces (`cpn@out.path`, `sys.query`, `item`). */
export function parseReference(body: string): Reference {
  const raw = body.trim();
  if (raw === 'item' || raw === 'index') return { kind: 'scope', name: raw, raw };
  const at = raw.indexOf('@');
  if (at > 0) {
    const [output = '', ...path] = raw.slice(at + 1).split('.');
    return { kind: 'component', componentId: raw.slice(0, at), output, path, raw };
  }
  const [scope = '', name = '', ...path] = raw.split('.');
  return { kind: 'global', name: `${scope}.${name}`, path, raw };
}

/** The reference when `text` is exactly one reference, else undefined. */
export function exactReference(text: string): Reference | undefined {
  const m = EXACT_REF.exec(text);
  return m?.[1] === undefined ? undefined : parseReference(m[1]);
}

/** Every reference in a text, in order of appearance. */
export function findReferences(text: string): Reference[] {
  const refs: Reference[] = [];
  for (const m of text.matchAll(referencePattern())) {
    if (m[1] !== undefined) refs.push(parseReference(m[1]));
  }
  return refs;
}

/** A piece of a template: literal text, or a reference with the exact text it replaces. */
export type TemplatePart = { text: string } | { ref: Reference; source: string };

export function splitTemplate(template: string): readonly TemplatePart[] {
  // templates are a workflow's params: the same few strings, rendered on every turn
  const cached = splitCache.get(template);
  if (cached) return cached;
  const parts = splitFresh(template);
  if (splitCache.size >= SPLIT_CACHE_SIZE) splitCache.clear();
  splitCache.set(template, parts);
  return parts;
}

const SPLIT_CACHE_SIZE = 2000;
const splitCache = new Map<string, readonly TemplatePart[]>();

function splitFresh(template: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let last = 0;
  for (const m of template.matchAll(referencePattern())) {
    const start = m.index ?? 0;
    if (start > last) parts.push({ text: template.slice(last, start) });
    if (m[1] !== undefined) parts.push({ ref: parseReference(m[1]), source: m[0] });
    last = start + m[0].length;
  }
  if (last < template.length) parts.push({ text: template.slice(last) });
  return parts;
}

/**
 * Walks a dotted path into a value. Strings that hold JSON objects or lists are parsed on the
 * way, so `{cpn@body.id}` works whether `body` is an object or its JSON text.
 */
export function getPath(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const segment of path) {
    if (typeof current === 'string') current = parseJsonContainer(current);
    if (Array.isArray(current)) {
      current = /^-?\d+$/.test(segment) ? current.at(Number(segment)) : undefined;
    } else if (isRecord(current) && Object.hasOwn(current, segment)) {
      current = current[segment];
    } else {
      return undefined;
    }
  }
  return current;
}

function parseJsonContainer(text: string): unknown {
  const t = text.trimStart();
  if (!t.startsWith('{') && !t.startsWith('[')) return text;
  try {
    return JSON.parse(t);
  } catch {
    return text;
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** How a value reads inside text: strings as they are, nothing as "", the rest as JSON. */
export function valueToText(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return String(value);
  }
  try {
    return JSON.stringify(value) ?? '';
  } catch {
    return String(value);
  }
}

const BARE_REF = new RegExp(`^\\s*${REF_BODY}\\s*$`);

/**
 * A reference written with or without braces: Switch conditions, VariableAssigner targets and
 * Iteration's `items_ref` name variables bare (`sys.query`, `Agent:A@content`).
 */
export function asReference(text: string): Reference | undefined {
  const exact = exactReference(text);
  if (exact) return exact;
  const m = BARE_REF.exec(text);
  return m?.[1] === undefined ? undefined : parseReference(m[1]);
}
