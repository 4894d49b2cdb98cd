import { describe, expect, it } from 'vitest';
import { MAX_LITERAL_DEPTH, parsePythonLiteral } from '../../lib/components/python-literal';
import { hashKey, pythonCompare, pythonRepr, pythonText } from '../../lib/components/python-values';

// What CPython 3.11's ast.literal_eval gives for each text, as JSON (tuples and sets as lists,
// dict keys as json.dumps writes them); undefined where it raises.
const PYTHON: [string, unknown][] = [
  ['[1, 2]', [1, 2]],
  ['{\'a\': 1, "b": [True, None]}', { a: 1, b: [true, null] }],
  ['(1,)', [1]],
  ['(1)', 1],
  ['()', []],
  ["'a' 'b'", 'ab'],
  ["'a',\n'b'", undefined],
  ["'a', 'b'", ['a', 'b']],
  ['1,', [1]],
  ['{1, 1, True, 2}', [1, 2]],
  ['{}', {}],
  ["{'a':1,}", { a: 1 }],
  ['[1,,2]', undefined],
  ['- 5', -5],
  ['--5', undefined],
  ['-(1)', -1],
  ['-(-1)', undefined],
  ['-True', undefined],
  ['0x1F', 31],
  ['0o17', 15],
  ['0b101', 5],
  ['1_000', 1000],
  ['1__0', undefined],
  ['007', undefined],
  ['00', 0],
  ['007.5', 7.5],
  ['1.', 1],
  ['.5', 0.5],
  ['1e3', 1000],
  ['1.e2', 100],
  ['1j', undefined],
  ['1.5.3', undefined],
  ["r'\\n'", '\\n'],
  ["'\\n\\t\\x41\\u00e9\\U0001F600\\101'", '\n\tAé😀A'],
  ["'\\d'", '\\d'],
  ["'\\x4'", undefined],
  ["b'x'", undefined],
  ["f'x'", undefined],
  ["u'x'", 'x'],
  ["ur'x'", undefined],
  ["'''a\nb'''", 'a\nb'],
  ["'a\nb'", undefined],
  ["'a\\\nb'", 'ab'],
  ['[1, # c\n 2]', [1, 2]],
  ['[true]', undefined],
  ['None', null],
  ['True', true],
  ['TRUE', undefined],
  ['{[1]: 2}', undefined],
  ["{1: 'a', True: 'b', 1.0: 'c'}", { 1: 'c' }],
  ["{1.0: 'x', None: 'y', False: 'z'}", { '1.0': 'x', null: 'y', false: 'z' }],
  ['{(1, [2])}', undefined],
  ['  [1]  ', [1]],
  ['\n[1]\n', [1]],
  ['\n [1]', undefined],
  ['[1]\n[2]', undefined],
  ["'a' # x", 'a'],
  ["{'a': 1 'b': 2}", undefined],
  ["{'a': ..., 'a': 1}", { a: 1 }],
  ["{'a': 1, 'a': 2, 'b': 3}", { a: 2, b: 3 }],
  ['1 + 2j', undefined],
  ['x', undefined],
  ['[1, 2', undefined],
  ["'unterminated", undefined],
  ['(1, 2) + (3,)', undefined],
  ["__import__('os')", undefined],
  ['[-0x10, +1.5e-3]', [-16, 0.0015]],
  ["{'nested': {'list': [(), [], {}]}}", { nested: { list: [[], [], {}] } }],
];

// Python reads these, but JSON cannot hold the value (or the name table is not shipped).
const REFUSED = ['1e400', '...', '[...]', "{(1, 2): 3}", "'\\N{EM DASH}'", "b'x' b'y'", '[1j]'];

describe('parsePythonLiteral', () => {
  it.each(PYTHON)('%j reads as Python reads it', (text, expected) => {
    const parsed = parsePythonLiteral(text);
    if (expected === undefined) expect(parsed).toBeUndefined();
    else expect(parsed?.value).toEqual(expected);
  });

  it.each(REFUSED)('%j is refused although Python reads it', (text) => {
    expect(parsePythonLiteral(text)).toBeUndefined();
  });

  it(`reads brackets nested ${MAX_LITERAL_DEPTH} deep, not one more (Python's limit)`, () => {
    const nest = (n: number) => `${'('.repeat(n)}1,${')'.repeat(n)}`;
    expect(parsePythonLiteral(nest(MAX_LITERAL_DEPTH))).toBeDefined();
    expect(parsePythonLiteral(nest(MAX_LITERAL_DEPTH + 1))).toBeUndefined();
  });

  it('keeps "__proto__" an ordinary key', () => {
    const parsed = parsePythonLiteral("{'__proto__': 1}")?.value as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(['__proto__']);
    expect(parsed.__proto__).toBe(1);
  });

  it('reads a long list (50 000 strings)', () => {
    const text = `[${Array.from({ length: 50_000 }, (_, i) => `'item ${i}'`).join(', ')}]`;
    expect((parsePythonLiteral(text)?.value as unknown[]).length).toBe(50_000);
  });
});

describe('Python values', () => {
  // str() in CPython 3.11.
  it.each<[unknown, string]>([
    [true, 'True'],
    [false, 'False'],
    [3, '3'],
    [-7, '-7'],
    [1.5, '1.5'],
    [1e16, '1e+16'],
    [1.5e16, '1.5e+16'],
    [1e-5, '1e-05'],
    [0.0001, '0.0001'],
    [123.456, '123.456'],
    [2.5e-7, '2.5e-07'],
    [1e22, '1e+22'],
    [-0.5, '-0.5'],
    [['a', 1, null, true], "['a', 1, None, True]"],
    [{ k: "it's", q: 'say "hi"', both: 'it\'s "x"' }, `{'k': "it's", 'q': 'say "hi"', 'both': 'it\\'s "x"'}`],
    [['\x07\n\t\\', 'é', '\u200b', '\u{1F600}', '\x7f', '\x85'], "['\\x07\\n\\t\\\\', 'é', '\\u200b', '\u{1F600}', '\\x7f', '\\x85']"],
    [{ nested: [{ a: [] }, {}] }, "{'nested': [{'a': []}, {}]}"],
  ])('str(%j) is %j', (value, text) => {
    expect(pythonRepr(value)).toBe(text);
    expect(pythonText(value)).toBe(text);
  });

  it("text is itself, and nothing is '' (RAGFlow's norm)", () => {
    expect(pythonText('plain')).toBe('plain');
    expect(pythonText(null)).toBe('');
    expect(pythonText(undefined)).toBe('');
  });

  it('orders as Python does, and raises where Python raises', () => {
    expect(pythonCompare(true, 2)).toBe(-1);
    expect(pythonCompare([1, 'a'], [1, 'b'])).toBe(-1);
    expect(pythonCompare([1], [1, 0])).toBe(-1);
    expect(pythonCompare([null], [null])).toBe(0);
    expect(() => pythonCompare(null, null)).toThrow("'<' not supported between instances of 'NoneType' and 'NoneType'");
    expect(() => pythonCompare({}, {})).toThrow(/'dict' and 'dict'/);
    expect(() => pythonCompare([1, 'a'], [1, 2])).toThrow(/'(str|int)' and '(int|str)'/);
  });

  it('hashes as Python does: 1, 1.0 and True alike; key order does not matter', () => {
    expect(hashKey(1)).toBe(hashKey(true));
    expect(hashKey(0)).toBe(hashKey(false));
    expect(hashKey('1')).not.toBe(hashKey(1));
    expect(hashKey({ a: 1, b: 2 })).toBe(hashKey({ b: 2, a: 1 }));
    expect(hashKey({ a: 1 })).toBe(hashKey([['a', 1]]));
    expect(hashKey([1, 2])).not.toBe(hashKey([2, 1]));
  });
});
