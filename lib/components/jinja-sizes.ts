/**
 * How long a Jinja runtime value's text will be, computed without building it, so that the
 * capped interpreter (jinja-interpreter.ts) can refuse a string before it is allocated. Each
 * function mirrors one way @huggingface/jinja turns values into text:
 *
 *   printedLength  `value.toString()`: how a block prints a value (`{{ x }}`), lists as JSON
 *   joinedLength   `String(value.value)`: what `~` and `+` concatenate
 *   joinLength     the `join` filter: its items' `String(item.value)` between separators
 *   jsonLength     its `toJSON` (the `tojson` and `string` filters), with indent and separators
 *
 * Counting stops as soon as the total passes `budget` (the result is then some number above
 * it), so measuring costs no more than the text it guards against.
 *
 * @example
 *   printedLength(list, 1_000_000) > 1_000_000   // printing `list` would break the cap
 */

/** The interpreter's runtime values, seen structurally (the library does not export their classes). */
export interface JinjaValue {
  readonly type: string;
  readonly value: unknown;
  toString(): string;
}

export interface JsonLayout {
  /** Spaces per level; 0 prints on one line. */
  indent: number;
  itemSeparator: string;
  keySeparator: string;
  ensureAscii: boolean;
  /** `tojson` writes `undefined` as `null`; printing and `string` write `undefined`. */
  undefinedAsNull: boolean;
}

/** The layout of a printed list or mapping (`{{ [1, 2] }}` -> `[1, 2]`). */
export const PRINTED: JsonLayout = { indent: 0, itemSeparator: ', ', keySeparator: ': ', ensureAscii: false, undefinedAsNull: false };

export function isList(v: JinjaValue): v is JinjaValue & { value: JinjaValue[] } {
  return v.type === 'ArrayValue' || v.type === 'TupleValue';
}

function isMapping(v: JinjaValue): v is JinjaValue & { value: Map<string, JinjaValue> } {
  return v.type === 'ObjectValue' || v.type === 'NamespaceValue' || v.type === 'KeywordArgumentsValue';
}

export function printedLength(v: JinjaValue, budget: number): number {
  if (v.type === 'StringValue') return (v.value as string).length;
  if (isList(v) || isMapping(v)) return jsonLength(v, PRINTED, 0, budget);
  return v.toString().length; // numbers, booleans, none, functions: short
}

export function joinedLength(v: JinjaValue, budget: number): number {
  if (v.type === 'StringValue') return (v.value as string).length;
  if (v.type === 'NullValue' || v.type === 'UndefinedValue') return 0; // Array#join writes nothing for them
  if (isMapping(v)) return '[object Map]'.length;
  if (isList(v)) {
    // Array#toString: the elements' own toString, comma-separated
    let n = Math.max(0, v.value.length - 1);
    for (const item of v.value) {
      if (n > budget) return n;
      n += printedLength(item, budget - n);
    }
    return n;
  }
  return String(v.value).length;
}

export function joinLength(items: readonly JinjaValue[], separator: number, budget: number): number {
  let n = Math.max(0, items.length - 1) * separator;
  for (const item of items) {
    if (n > budget) return n;
    n += joinedLength(item, budget - n);
  }
  return n;
}

export function jsonLength(v: JinjaValue, layout: JsonLayout, depth: number, budget: number): number {
  switch (v.type) {
    case 'NullValue':
      return 4;
    case 'UndefinedValue':
      return layout.undefinedAsNull ? 4 : 9;
    case 'IntegerValue':
    case 'FloatValue':
    case 'BooleanValue':
      return JSON.stringify(v.value).length;
    case 'StringValue':
      return jsonStringLength(v.value as string, layout.ensureAscii, budget);
  }
  if (!isList(v) && !(isMapping(v) && v.type !== 'KeywordArgumentsValue')) return 0; // the library refuses these
  const size = isList(v) ? v.value.length : v.value.size;
  if (size === 0) return 2;
  // "\n" + indent per level before each item and before the closing bracket
  const child = layout.indent > 0 ? 1 + layout.indent * (depth + 1) : 0;
  const base = layout.indent > 0 ? 1 + layout.indent * depth : 0;
  let n = 2 + base + size * child + (size - 1) * layout.itemSeparator.length;
  if (isList(v)) {
    for (const item of v.value) {
      if (n > budget) return n;
      n += jsonLength(item, layout, depth + 1, budget - n);
    }
    return n;
  }
  for (const [key, item] of v.value) {
    if (n > budget) return n;
    n += jsonStringLength(key, layout.ensureAscii, budget - n) + layout.keySeparator.length;
    n += jsonLength(item, layout, depth + 1, budget - n);
  }
  return n;
}

/** `JSON.stringify(s).length`, with non-ASCII escaped as `\uXXXX` when `ensureAscii`. */
export function jsonStringLength(s: string, ensureAscii: boolean, budget: number): number {
  if (s.length + 2 > budget) return s.length + 2;
  let n = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22 || c === 0x5c || c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d) n += 2;
    else if (c < 0x20) n += 6;
    else if (c >= 0xd800 && c <= 0xdfff) n += pairedSurrogate(s, i, c) && !ensureAscii ? 1 : 6;
    else n += ensureAscii && c >= 0x7f ? 6 : 1;
  }
  return n;
}

function pairedSurrogate(s: string, i: number, c: number): boolean {
  if (c <= 0xdbff) {
    const next = s.charCodeAt(i + 1);
    return next >= 0xdc00 && next <= 0xdfff;
  }
  const previous = s.charCodeAt(i - 1);
  return previous >= 0xd800 && previous <= 0xdbff;
}

/** Python's `s.replace(old, new, count)`; `count` null or negative replaces every occurrence. */
export function replacedLength(s: string, old: string, replacement: string, count: number | null): number {
  const limit = count === null || count < 0 ? Infinity : count;
  if (limit === 0 || replacement.length <= old.length) return s.length;
  let occurrences = 0;
  if (old === '') {
    occurrences = Math.min(limit, s.length + 1); // one per position: an upper bound with astral characters
  } else {
    for (let at = s.indexOf(old); at >= 0 && occurrences < limit; at = s.indexOf(old, at + old.length)) occurrences++;
  }
  return s.length + occurrences * (replacement.length - old.length);
}

/** The `indent` filter: `width` spaces before each line but the first (unless `first`) and blank ones (unless `blank`). */
export function indentedLength(s: string, width: number, first: boolean, blank: boolean): number {
  let indented = 0;
  let start = 0;
  for (let line = 0; ; line++) {
    const end = s.indexOf('\n', start);
    const length = (end < 0 ? s.length : end) - start;
    if (!(line === 0 && !first) && !(length === 0 && !blank)) indented++;
    if (end < 0) break;
    start = end + 1;
  }
  return s.length + indented * width;
}
