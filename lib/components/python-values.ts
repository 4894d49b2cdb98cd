/**
 * How RAGFlow's Python sees JSON values, where DataOperations and ListOperations depend on it:
 * `str()` (filters compare values as text), `<` (sorting) and `==`/hashing (dropping
 * duplicates). Numbers without a fraction count as integers, since JSON does not tell `3`
 * from `3.0`. Walks stop at `MAX_VALUE_DEPTH` levels with a workflow error, so a deeply
 * nested value cannot exhaust the stack.
 */
import { ComponentError } from '../canvas/errors';
import { isRecord } from '../canvas/references';

export const MAX_VALUE_DEPTH = 256;

function deeper(depth: number): number {
  if (depth >= MAX_VALUE_DEPTH) throw new ComponentError(`the value is nested deeper than ${MAX_VALUE_DEPTH} levels`);
  return depth + 1;
}

/** RAGFlow's `norm`: nothing reads as "", anything else as Python's `str()`. */
export function pythonText(value: unknown): string {
  if (value === null || value === undefined) return '';
  return typeof value === 'string' ? value : pythonRepr(value, 0);
}

/** Python's `repr()` of a JSON value: `True`, `None`, `['a', 1]`, `{'k': 1.5}`. */
export function pythonRepr(value: unknown, depth = 0): string {
  if (value === null || value === undefined) return 'None';
  if (value === true) return 'True';
  if (value === false) return 'False';
  if (typeof value === 'number') return pythonNumber(value);
  if (typeof value === 'string') return pythonQuote(value);
  const next = deeper(depth);
  if (Array.isArray(value)) return `[${value.map((v) => pythonRepr(v, next)).join(', ')}]`;
  if (isRecord(value)) {
    return `{${Object.entries(value).map(([k, v]) => `${pythonQuote(k)}: ${pythonRepr(v, next)}`).join(', ')}}`;
  }
  return String(value);
}

/** `str()` of a number: integers as integers, others as Python's shortest float repr. */
export function pythonNumber(n: number): string {
  if (Number.isSafeInteger(n)) return String(n);
  if (Number.isNaN(n)) return 'nan';
  if (!Number.isFinite(n)) return n > 0 ? 'inf' : '-inf';
  const [mantissa = '', exp = '0'] = n.toExponential().split('e');
  const e = Number(exp);
  if (e < -4 || e >= 16) {
    const sign = e < 0 ? '-' : '+';
    return `${mantissa}e${sign}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  const negative = mantissa.startsWith('-');
  const digits = mantissa.replace('-', '').replace('.', '');
  let text: string;
  if (e < 0) text = `0.${'0'.repeat(-e - 1)}${digits}`;
  else if (digits.length > e + 1) text = `${digits.slice(0, e + 1)}.${digits.slice(e + 1)}`;
  else text = `${digits}${'0'.repeat(e + 1 - digits.length)}.0`;
  return negative ? `-${text}` : text;
}

const UNPRINTABLE = /[\p{C}\p{Zl}\p{Zp}\p{Zs}]/u;

/** Python's `repr()` of a string: single quotes unless only double quotes avoid escaping. */
export function pythonQuote(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of text) {
    const code = ch.codePointAt(0) as number;
    if (ch === quote || ch === '\\') out += `\\${ch}`;
    else if (ch === '\t') out += '\\t';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch !== ' ' && UNPRINTABLE.test(ch)) {
      const hex = code.toString(16);
      out += code < 0x100 ? `\\x${hex.padStart(2, '0')}` : code < 0x10000 ? `\\u${hex.padStart(4, '0')}` : `\\U${hex.padStart(8, '0')}`;
    } else out += ch;
  }
  return out + quote;
}

/** Python's type names, for error messages. */
function typeName(value: unknown): string {
  if (value === null || value === undefined) return 'NoneType';
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'number') return Number.isSafeInteger(value) ? 'int' : 'float';
  if (typeof value === 'string') return 'str';
  if (Array.isArray(value)) return 'list';
  return 'dict';
}

function numeric(value: unknown): value is number | boolean {
  return typeof value === 'number' || typeof value === 'boolean';
}

/** Strings in code point order, as Python compares them (not UTF-16 code units). */
export function compareText(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a.charCodeAt(i) !== b.charCodeAt(i)) {
      return (a.codePointAt(i) as number) < (b.codePointAt(i) as number) ? -1 : 1;
    }
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

/** Python's `==` (`True == 1`, lists and dicts by content). */
export function pythonEqual(a: unknown, b: unknown, depth = 0): boolean {
  if (numeric(a) && numeric(b)) return Number(a) === Number(b);
  if (typeof a === 'string' || typeof b === 'string') return a === b;
  if ((a === null || a === undefined) && (b === null || b === undefined)) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    const next = deeper(depth);
    return a.length === b.length && a.every((v, i) => pythonEqual(v, b[i], next));
  }
  if (isRecord(a) && isRecord(b)) {
    const next = deeper(depth);
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && pythonEqual(a[k], b[k], next));
  }
  return false;
}

/**
 * Python's `a < b`: numbers with numbers, text with text, sequences element by element (the
 * first unequal pair decides, then length). Anything else raises, as in Python — also
 * `None < None` and dict against dict.
 */
export function pythonLess(a: unknown, b: unknown, depth = 0): boolean {
  if (numeric(a) && numeric(b)) return Number(a) < Number(b);
  if (typeof a === 'string' && typeof b === 'string') return compareText(a, b) < 0;
  if (Array.isArray(a) && Array.isArray(b)) {
    const next = deeper(depth);
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      if (!pythonEqual(a[i], b[i], next)) return pythonLess(a[i], b[i], next);
    }
    return a.length < b.length;
  }
  throw new ComponentError(`'<' not supported between instances of '${typeName(a)}' and '${typeName(b)}'`);
}

/** A comparator from Python's `<`, for a stable sort. */
export function pythonCompare(a: unknown, b: unknown): number {
  if (pythonLess(a, b)) return -1;
  return pythonLess(b, a) ? 1 : 0;
}

/**
 * RAGFlow's `_hashable`: an object becomes its (key, value) pairs sorted by key, lists stay
 * lists (Python's tuples), recursively — so equal objects compare equal whatever their key order.
 */
export function hashable(value: unknown, depth = 0): unknown {
  if (Array.isArray(value)) {
    const next = deeper(depth);
    return value.map((v) => hashable(v, next));
  }
  if (isRecord(value)) {
    const next = deeper(depth);
    return Object.keys(value)
      .sort(compareText)
      .map((k) => [k, hashable(value[k], next)]);
  }
  return value;
}

/**
 * A text equal for two values exactly when their `hashable` forms are equal in Python:
 * `1`, `1.0` and `True` are one key, `"1"` another; an object equals the list of its sorted pairs.
 */
export function hashKey(value: unknown, depth = 0): string {
  if (value === null || value === undefined) return 'N';
  if (typeof value === 'boolean') return value ? 'n1' : 'n0';
  if (typeof value === 'number') return `n${String(value)}`;
  if (typeof value === 'string') return JSON.stringify(value);
  const next = deeper(depth);
  if (Array.isArray(value)) return `[${value.map((v) => hashKey(v, next)).join(',')}]`;
  if (isRecord(value)) {
    const pairs = Object.keys(value)
      .sort(compareText)
      .map((k) => `[${JSON.stringify(k)},${hashKey(value[k], next)}]`);
    return `[${pairs.join(',')}]`;
  }
  return String(value);
}
