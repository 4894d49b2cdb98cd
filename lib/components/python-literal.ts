/**
 * A parser of Python literals — what RAGFlow's `ast.literal_eval` reads — that evaluates
 * nothing: it only recognises literal syntax and builds JSON values from it.
 *
 * Accepted, as in Python: strings in single, double or triple quotes with `r`/`u` prefixes,
 * escapes (`\n`, `\x41`, `\u00e9`, `\U0001F600`, octal) and adjacent strings joined; integers
 * (decimal, `0x`, `0o`, `0b`, `_` separators) and floats (`1.5`, `.5`, `1e-3`), with one sign;
 * `True`, `False`, `None`; lists, tuples and sets (all become lists; a set keeps its first of
 * equal elements) and dicts (keys become text as `json.dumps` writes them: `1` -> "1",
 * `True` -> "true", `None` -> "null"); a bare top-level tuple (`'a', 'b'`); comments and
 * line breaks inside brackets.
 *
 * Refused (the caller keeps the text as it was), also as in Python: names other than the
 * three constants (so JSON's `true`/`null`), calls, operators, f-strings, decimal integers with
 * leading zeros. Refused here although Python reads them, because JSON cannot hold them:
 * bytes, complex numbers, `...`, `\N{name}` escapes, floats out of range, tuple keys.
 * Integers beyond 2^53 lose precision. Brackets nest at most 200 deep, Python's own limit.
 */
import { dict } from '../canvas/state';
import { hashKey, pythonNumber } from './python-values';

export const MAX_LITERAL_DEPTH = 200;

type Py = null | boolean | number | string | PySeq | PyDict | typeof ELLIPSIS;
/** `...`: a literal JSON cannot hold; refused only if it ends up in the value. */
const ELLIPSIS = { kind: 'ellipsis' } as const;
interface PySeq {
  kind: 'list' | 'tuple' | 'set';
  items: Py[];
}
interface PyDict {
  kind: 'dict';
  /** Keys remember whether they were written as floats: `1.0` is the key "1.0". */
  entries: [{ key: Py; float: boolean }, Py][];
}

class NotALiteral extends Error {}

/** The value of `text` read as one Python literal, or undefined when it is not one. */
export function parsePythonLiteral(text: string): { value: unknown } | undefined {
  if (text.includes('\0')) return undefined;
  try {
    return { value: toJson(new Parser(text).parse()) };
  } catch (error) {
    if (error instanceof NotALiteral) return undefined;
    throw error;
  }
}

function fail(): never {
  throw new NotALiteral();
}

/** Lists, sets and dicts cannot be set members (Python's TypeError); tuples of members can. */
function hashableMember(v: Py): boolean {
  return v === null || typeof v !== 'object' || (v.kind === 'tuple' && v.items.every(hashableMember));
}

function toJson(v: Py): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (v.kind === 'ellipsis') fail();
  if (v.kind === 'dict') {
    // Python's equal keys (`1`, `1.0`, `True`) are one key, written as the first of them;
    // the last value wins.
    const values = new Map<string, Py>();
    const names = new Map<string, string>();
    for (const [k, value] of v.entries) {
      // Lists and dicts are unhashable; tuples are not, but JSON keys are text.
      if (k.key !== null && typeof k.key === 'object') fail();
      const identity = typeof k.key === 'string' ? `s${k.key}` : hashKey(k.key);
      if (!names.has(identity)) names.set(identity, keyText(k.key, k.float));
      values.set(identity, value);
    }
    const out = dict();
    for (const [identity, name] of names) out[name] = toJson(values.get(identity) as Py);
    return out;
  }
  if (v.kind === 'set') {
    const seen = new Set<string>();
    const out: unknown[] = [];
    for (const item of v.items) {
      if (!hashableMember(item)) fail();
      const value = toJson(item);
      const key = hashKey(value);
      if (seen.has(key)) continue;
      seen.add(key);
      out.push(value);
    }
    return out;
  }
  return v.items.map(toJson);
}

function keyText(k: null | boolean | number | string, float: boolean): string {
  if (k === null) return 'null';
  if (typeof k === 'boolean') return k ? 'true' : 'false';
  if (typeof k === 'number') return float && Number.isInteger(k) && Math.abs(k) < 1e16 ? `${k}.0` : pythonNumber(k);
  return k;
}

const DIGITS = String.raw`\d(?:_?\d)*`;
const EXPONENT = String.raw`[eE][+-]?${DIGITS}`;
/** Python's number tokens; group 1 is a float (`1.5`, `.5`, `1.`, `1e3`), the rest integers. */
const NUMBER = new RegExp(
  [
    String.raw`0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+`,
    String.raw`((?:${DIGITS})?\.${DIGITS}(?:${EXPONENT})?|${DIGITS}\.(?:${EXPONENT})?|${DIGITS}${EXPONENT})`,
    String.raw`[1-9](?:_?\d)*|0(?:_?0)*`,
  ].join('|'),
  'y',
);
const WORD = /[\p{ID_Start}_][\p{ID_Continue}]*/uy;
const NAME_CHAR = /[\p{ID_Continue}]/u;

function isDigit(c: string): boolean {
  return c >= '0' && c <= '9';
}

/** A character that would continue a name or number token (`1j`, `1abc`, `007`). */
function continuesName(c: string): boolean {
  if (c === '') return false;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || isDigit(c) || c === '_') return true;
  return c.charCodeAt(0) > 0x7f && NAME_CHAR.test(c);
}
/** Prefixes of text strings; `b` (bytes) and `f` (f-strings) are not JSON-able or not literals. */
const STRING_PREFIX = /^[rRuU]$/;

const SIMPLE_ESCAPES: Record<string, string> = {
  '\\': '\\',
  "'": "'",
  '"': '"',
  a: '\x07',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
};

class Parser {
  private pos = 0;
  private depth = 0;
  /** The last value parsed carried a sign: Python allows one sign, on a number only. */
  private signed = false;
  /** The last value parsed was written as a float (`1.0`, `1e3`). */
  private float = false;

  constructor(private readonly src: string) {}

  parse(): Py {
    this.skipLeading();
    const first = this.value();
    this.skip();
    let result: Py = first;
    if (this.peek() === ',') {
      const items: Py[] = [first];
      while (this.peek() === ',') {
        this.pos++;
        this.skip();
        const at = this.pos;
        this.skipAll();
        if (this.pos >= this.src.length) break;
        this.pos = at;
        items.push(this.value());
        this.skip();
      }
      result = { kind: 'tuple', items };
    }
    this.skipAll();
    if (this.pos < this.src.length) fail();
    return result;
  }

  private peek(offset = 0): string {
    return this.src[this.pos + offset] ?? '';
  }

  /** Blanks, comments and backslash continuations; line breaks only inside brackets. */
  private skip(): void {
    for (;;) {
      const c = this.peek();
      if (c === ' ' || c === '\t' || c === '\f') this.pos++;
      else if ((c === '\n' || c === '\r') && this.depth > 0) this.pos++;
      else if (c === '\\' && (this.peek(1) === '\n' || this.peek(1) === '\r')) {
        this.pos += this.peek(1) === '\r' && this.peek(2) === '\n' ? 3 : 2;
      } else if (c === '#') {
        while (this.pos < this.src.length && this.peek() !== '\n' && this.peek() !== '\r') this.pos++;
      } else return;
    }
  }

  /**
   * Blank lines before the literal. `literal_eval` strips leading spaces and tabs, but a
   * line after a line break may not be indented (Python's "unexpected indent").
   */
  private skipLeading(): void {
    let broke = false;
    for (;;) {
      const lineStart = this.pos;
      this.skip();
      const c = this.peek();
      if (c === '\n' || c === '\r') {
        this.pos++;
        broke = true;
        continue;
      }
      if (broke && this.pos > lineStart && c !== '') fail();
      return;
    }
  }

  /** Like `skip`, line breaks included: after the whole literal. */
  private skipAll(): void {
    for (;;) {
      this.skip();
      const c = this.peek();
      if (c !== '\n' && c !== '\r') return;
      this.pos++;
    }
  }

  private value(): Py {
    this.skip();
    const c = this.peek();
    this.signed = false;
    this.float = false;
    if (c === '[') return this.sequence('list', ']');
    if (c === '(') return this.parenthesized();
    if (c === '{') return this.braced();
    if (c === "'" || c === '"') return this.strings('');
    if (c === '-' || c === '+') {
      this.pos++;
      const operand = this.value();
      if (this.signed || typeof operand !== 'number') fail();
      this.signed = true;
      return c === '-' ? -operand : operand;
    }
    if (isDigit(c) || (c === '.' && isDigit(this.peek(1)))) return this.number();
    if (this.src.startsWith('...', this.pos)) {
      this.pos += 3;
      return ELLIPSIS;
    }
    WORD.lastIndex = this.pos;
    const word = WORD.exec(this.src)?.[0];
    if (word === undefined) fail();
    this.pos += word.length;
    const quote = this.peek();
    if (quote === "'" || quote === '"') {
      if (!STRING_PREFIX.test(word)) fail();
      return this.strings(word);
    }
    if (word === 'True') return true;
    if (word === 'False') return false;
    if (word === 'None') return null;
    return fail();
  }

  private open(): void {
    if (++this.depth > MAX_LITERAL_DEPTH) fail();
    this.pos++;
  }

  private close(): void {
    this.depth--;
    this.pos++;
  }

  /** Items up to `end`, a trailing comma allowed; `first` when already read. */
  private items(end: string, first?: Py): Py[] {
    const items: Py[] = first === undefined ? [] : [first];
    this.skip();
    if (first !== undefined) {
      if (this.peek() === end) return items;
      if (this.peek() !== ',') fail();
      this.pos++;
      this.skip();
    }
    while (this.peek() !== end) {
      items.push(this.value());
      this.skip();
      if (this.peek() === ',') {
        this.pos++;
        this.skip();
      } else if (this.peek() !== end) fail();
    }
    return items;
  }

  private sequence(kind: 'list', end: string): Py {
    this.open();
    const items = this.items(end);
    this.close();
    return { kind, items };
  }

  /** `()` is an empty tuple, `(x)` is x, `(x,)` and `(x, y)` are tuples. */
  private parenthesized(): Py {
    this.open();
    this.skip();
    if (this.peek() === ')') {
      this.close();
      return { kind: 'tuple', items: [] };
    }
    const first = this.value();
    const { signed, float } = this;
    this.skip();
    if (this.peek() === ')') {
      this.close();
      this.signed = signed;
      this.float = float;
      return first;
    }
    const items = this.items(')', first);
    this.close();
    return { kind: 'tuple', items };
  }

  /** `{}` is a dict; `{k: v, ...}` a dict; `{a, b}` a set. */
  private braced(): Py {
    this.open();
    this.skip();
    if (this.peek() === '}') {
      this.close();
      return { kind: 'dict', entries: [] };
    }
    const first = this.value();
    this.skip();
    if (this.peek() !== ':') {
      const items = this.items('}', first);
      this.close();
      return { kind: 'set', items };
    }
    const entries: PyDict['entries'] = [];
    let key = { key: first, float: this.float };
    for (;;) {
      this.skip();
      if (this.peek() !== ':') fail();
      this.pos++;
      entries.push([key, this.value()]);
      this.skip();
      if (this.peek() === ',') {
        this.pos++;
        this.skip();
      } else if (this.peek() !== '}') fail();
      if (this.peek() === '}') break;
      key = { key: this.value(), float: this.float };
    }
    this.close();
    // Python keeps the last value of a repeated key, at the key's first place.
    return { kind: 'dict', entries };
  }

  private number(): number {
    NUMBER.lastIndex = this.pos;
    const match = NUMBER.exec(this.src);
    if (!match) fail();
    const text = match[0];
    this.float = match[1] !== undefined;
    this.pos += text.length;
    // `1j` (complex), `1abc`, `007`: not a number JSON can hold, or not one at all.
    if (continuesName(this.peek())) fail();
    const value = Number(text.replaceAll('_', ''));
    if (!Number.isFinite(value)) fail();
    return value;
  }

  /** One string literal or several adjacent ones, joined. */
  private strings(prefix: string): string {
    let text = this.string(prefix);
    for (;;) {
      const at = this.pos;
      this.skip();
      const c = this.peek();
      if (c === "'" || c === '"') {
        text += this.string('');
        continue;
      }
      WORD.lastIndex = this.pos;
      const word = WORD.exec(this.src)?.[0];
      const next = word === undefined ? '' : this.peek(word.length);
      if (word !== undefined && (next === "'" || next === '"')) {
        if (!STRING_PREFIX.test(word)) fail();
        this.pos += word.length;
        text += this.string(word);
        continue;
      }
      this.pos = at;
      return text;
    }
  }

  private string(prefix: string): string {
    const raw = /r/i.test(prefix);
    const quote = this.peek();
    const triple = this.src.startsWith(quote.repeat(3), this.pos);
    this.pos += triple ? 3 : 1;
    let out = '';
    for (;;) {
      if (this.pos >= this.src.length) fail();
      const c = this.peek();
      if (triple ? this.src.startsWith(quote.repeat(3), this.pos) : c === quote) {
        this.pos += triple ? 3 : 1;
        return out;
      }
      if (!triple && (c === '\n' || c === '\r')) fail();
      if (c !== '\\') {
        out += c;
        this.pos++;
        continue;
      }
      const e = this.peek(1);
      if (e === '') fail();
      if (raw) {
        out += c + e;
        this.pos += 2;
        continue;
      }
      out += this.escape(e);
    }
  }

  /** The escape at `\` + `e`; moves past it. */
  private escape(e: string): string {
    this.pos += 2;
    if (e === '\n') return '';
    if (e === '\r') {
      if (this.peek() === '\n') this.pos++;
      return '';
    }
    const simple = SIMPLE_ESCAPES[e];
    if (simple !== undefined) return simple;
    if (/[0-7]/.test(e)) {
      let digits = e;
      while (digits.length < 3 && /[0-7]/.test(this.peek())) digits += this.src[this.pos++];
      return String.fromCodePoint(Number.parseInt(digits, 8));
    }
    const width = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0;
    if (width > 0) {
      const hex = this.src.slice(this.pos, this.pos + width);
      if (hex.length !== width || !/^[0-9a-fA-F]+$/.test(hex)) fail();
      const code = Number.parseInt(hex, 16);
      if (code > 0x10ffff) fail();
      this.pos += width;
      return String.fromCodePoint(code);
    }
    // `\N{name}` needs Unicode's name table: refused. Other unknown escapes stay as written.
    if (e === 'N') fail();
    return `\\${e}`;
  }
}
