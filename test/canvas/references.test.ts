import { describe, expect, it } from 'vitest';
import {
  asReference,
  exactReference,
  findReferences,
  getPath,
  parseReference,
  type Reference,
  splitTemplate,
  valueToText,
} from '../../lib/canvas/references';

const component = (componentId: string, output: string, path: string[], raw: string): Reference => ({
  kind: 'component',
  componentId,
  output,
  path,
  raw,
});
const global = (name: string, path: string[], raw: string): Reference => ({ kind: 'global', name, path, raw });
const scope = (name: 'item' | 'index'): Reference => ({ kind: 'scope', name, raw: name });

describe('references', () => {
  describe('parseReference', () => {
    it.each<[string, Reference]>([
      ['cpn@out', component('cpn', 'out', [], 'cpn@out')],
      ['Agent:Foo@content', component('Agent:Foo', 'content', [], 'Agent:Foo@content')],
      ['Agent:Foo@content.items.0', component('Agent:Foo', 'content', ['items', '0'], 'Agent:Foo@content.items.0')],
      ['Invoke:Api-2@result.data.-1', component('Invoke:Api-2', 'result', ['data', '-1'], 'Invoke:Api-2@result.data.-1')],
      ['sys.query', global('sys.query', [], 'sys.query')],
      ['env.tone', global('env.tone', [], 'env.tone')],
      ['env.profile.address.city', global('env.profile', ['address', 'city'], 'env.profile.address.city')],
      ['  sys.query  ', global('sys.query', [], 'sys.query')],
      ['item', scope('item')],
      ['index', scope('index')],
      [' item ', scope('item')],
    ])('parses %j', (body, expected) => {
      expect(parseReference(body)).toEqual(expected);
    });
  });

  describe('exactReference', () => {
    it.each<[string, Reference]>([
      ['{cpn@out}', component('cpn', 'out', [], 'cpn@out')],
      ['{Agent:Foo@content.items.0}', component('Agent:Foo', 'content', ['items', '0'], 'Agent:Foo@content.items.0')],
      ['{sys.query}', global('sys.query', [], 'sys.query')],
      ['{{sys.query}}', global('sys.query', [], 'sys.query')],
      ['{ env.tone }', global('env.tone', [], 'env.tone')],
      ['{{ env.tone }}', global('env.tone', [], 'env.tone')],
      ['  {sys.query}\n', global('sys.query', [], 'sys.query')],
      ['{item}', scope('item')],
      ['{index}', scope('index')],
    ])('%j is exactly one reference', (text, expected) => {
      expect(exactReference(text)).toEqual(expected);
    });

    it.each([
      ['bare component reference', 'begin@x'],
      ['bare global', 'sys.query'],
      ['text around a reference', 'Hello {sys.query}'],
      ['two references', '{sys.query}{env.tone}'],
      ['JSON object', '{"a": 1}'],
      ['empty braces', '{}'],
      ['words with a space', '{a b}'],
      ['a name that only starts like a scope variable', '{items}'],
      ['an output missing after @', '{Agent:Foo@}'],
      ['a component missing before @', '{@content}'],
      ['an unknown global scope', '{user.name}'],
      ['plain text', 'just words'],
      ['empty string', ''],
    ])('%s is not an exact reference', (_label, text) => {
      expect(exactReference(text)).toBeUndefined();
    });
  });

  describe('findReferences', () => {
    it('finds every reference in order of appearance', () => {
      const text = 'Hi {begin@name}, you asked {{sys.query}} in a { env.tone } tone (item {item}, #{index}).';
      expect(findReferences(text)).toEqual([
        component('begin', 'name', [], 'begin@name'),
        global('sys.query', [], 'sys.query'),
        global('env.tone', [], 'env.tone'),
        scope('item'),
        scope('index'),
      ]);
    });

    it('finds a reference inside JSON-looking text', () => {
      expect(findReferences('{"q": "{sys.query}", "n": {cpn@out.0}}')).toEqual([
        global('sys.query', [], 'sys.query'),
        component('cpn', 'out', ['0'], 'cpn@out.0'),
      ]);
    });

    it.each([
      ['JSON object', '{"a": 1}'],
      ['empty braces', '{}'],
      ['words with a space', '{a b}'],
      ['plain text', 'no references here'],
      ['bare references', 'sys.query and begin@x'],
    ])('finds nothing in %s', (_label, text) => {
      expect(findReferences(text)).toEqual([]);
    });

    it('gives the same answer when called again (no regex state carried over)', () => {
      const text = '{sys.query} {env.tone}';
      expect(findReferences(text)).toHaveLength(2);
      expect(findReferences(text)).toHaveLength(2);
    });
  });

  describe('splitTemplate', () => {
    it('splits text and references, keeping the exact source of each reference', () => {
      expect(splitTemplate('Dear {{ begin@name }}, re: {sys.query}!')).toEqual([
        { text: 'Dear ' },
        { ref: component('begin', 'name', [], 'begin@name'), source: '{{ begin@name }}' },
        { text: ', re: ' },
        { ref: global('sys.query', [], 'sys.query'), source: '{sys.query}' },
        { text: '!' },
      ]);
    });

    it('gives adjacent references without empty text between them', () => {
      expect(splitTemplate('{item}{index}')).toEqual([
        { ref: scope('item'), source: '{item}' },
        { ref: scope('index'), source: '{index}' },
      ]);
    });

    it.each([
      ['{"a": 1}'],
      ['{}'],
      ['{a b}'],
      ['plain text'],
    ])('keeps %j as one piece of text', (text) => {
      expect(splitTemplate(text)).toEqual([{ text }]);
    });

    it('gives nothing for an empty template', () => {
      expect(splitTemplate('')).toEqual([]);
    });

    it('gives the same parts for a template seen before, also once more templates than it keeps were split', () => {
      const first = splitTemplate('Hello {begin@name}');
      expect(splitTemplate('Hello {begin@name}')).toBe(first);
      // past the cache's size it starts again: every template still splits as it reads
      for (let i = 0; i < 2100; i++) expect(splitTemplate(`n${i} {sys.query}`)[0]).toEqual({ text: `n${i} ` });
      expect(splitTemplate('Hello {begin@name}')).toEqual(first);
    });

    it('reassembles to the original template', () => {
      const template = 'a {cpn@out} b {{sys.query}} c {"x": 1} {item}';
      const rebuilt = splitTemplate(template)
        .map((part) => ('text' in part ? part.text : part.source))
        .join('');
      expect(rebuilt).toBe(template);
    });
  });

  describe('asReference', () => {
    it.each<[string, Reference]>([
      ['sys.query', global('sys.query', [], 'sys.query')],
      ['env.tone', global('env.tone', [], 'env.tone')],
      ['begin@x', component('begin', 'x', [], 'begin@x')],
      ['Agent:A@content.items.0', component('Agent:A', 'content', ['items', '0'], 'Agent:A@content.items.0')],
      ['  begin@x ', component('begin', 'x', [], 'begin@x')],
      ['{begin@x}', component('begin', 'x', [], 'begin@x')],
      ['{{sys.query}}', global('sys.query', [], 'sys.query')],
      ['{ env.tone }', global('env.tone', [], 'env.tone')],
      ['item', scope('item')],
      ['{index}', scope('index')],
    ])('reads %j', (text, expected) => {
      expect(asReference(text)).toEqual(expected);
    });

    it.each([
      ['plain text', 'hello world'],
      ['JSON object', '{"a": 1}'],
      ['empty braces', '{}'],
      ['words with a space in braces', '{a b}'],
      ['a template', 'Hi {sys.query}'],
      ['a scope without a name', 'sys'],
      ['an unknown scope', 'user.name'],
      ['an empty string', ''],
    ])('rejects %s', (_label, text) => {
      expect(asReference(text)).toBeUndefined();
    });
  });

  describe('getPath', () => {
    const doc = {
      user: { name: 'Ann', tags: ['a', 'b'], empty: null, zero: 0 },
      list: [10, 20, 30],
      json: '{"id": 7, "items": [{"name": "x"}, {"name": "y"}]}',
      jsonList: '  ["p", "q"]',
      nested: { inner: '{"deep": "[1, 2, 3]"}' },
      text: 'not json',
      broken: '{"id": ',
    };

    it.each<[string, string[], unknown]>([
      ['the value itself for an empty path', [], doc],
      ['an object key', ['user', 'name'], 'Ann'],
      ['a list element in an object', ['user', 'tags', '1'], 'b'],
      ['null as null', ['user', 'empty'], null],
      ['0 as 0', ['user', 'zero'], 0],
      ['a key in a JSON string', ['json', 'id'], 7],
      ['into a list inside a JSON string', ['json', 'items', '1', 'name'], 'y'],
      ['an element of a JSON list string', ['jsonList', '1'], 'q'],
      ['through JSON strings nested in JSON strings', ['nested', 'inner', 'deep', '2'], 3],
    ])('reads %s', (_label, path, expected) => {
      expect(getPath(doc, path)).toEqual(expected);
    });

    it.each<[string, string[]]>([
      ['a missing key', ['user', 'age']],
      ['a key below a missing key', ['nope', 'deeper']],
      ['a key below null', ['user', 'empty', 'x']],
      ['a key below a number', ['user', 'zero', 'x']],
      ['a key in text that is not JSON', ['text', 'length']],
      ['a key in broken JSON', ['broken', 'id']],
      ['a key of a list', ['list', 'length']],
    ])('gives undefined for %s', (_label, path) => {
      expect(getPath(doc, path)).toBeUndefined();
    });

    it('gives a JSON string itself, unparsed, when the path ends on it', () => {
      expect(getPath(doc, ['json'])).toBe(doc.json);
    });

    it.each<[string, unknown]>([
      ['0', 10],
      ['2', 30],
      ['3', undefined],
      ['-1', 30],
      ['-3', 10],
      ['-4', undefined],
      ['1.5', undefined],
      ['first', undefined],
      ['', undefined],
      ['0x1', undefined],
      ['1e0', undefined],
    ])('indexes a list with %j', (segment, expected) => {
      expect(getPath([10, 20, 30], [segment])).toBe(expected);
    });

    it.each<[string, unknown, string[]]>([
      ['__proto__ of an object', {}, ['__proto__']],
      ['constructor of an object', { a: 1 }, ['constructor']],
      ['constructor.prototype of an object', {}, ['constructor', 'prototype']],
      ['an inherited method', {}, ['toString']],
      ['hasOwnProperty', { a: 1 }, ['hasOwnProperty']],
      ['__proto__ below a key', { a: { b: 1 } }, ['a', '__proto__', 'toString']],
      ['__proto__ of a list', [1, 2], ['__proto__']],
      ['constructor of a list', [1, 2], ['constructor']],
      ['__proto__ of a JSON string', '{"a": 1}', ['__proto__']],
      ['constructor of a JSON string', '{"a": 1}', ['constructor', 'name']],
    ])('does not reach the prototype through %s', (_label, value, path) => {
      expect(getPath(value, path)).toBeUndefined();
    });

    it('reads an own "__proto__" key (from JSON) as ordinary data', () => {
      const value: unknown = JSON.parse('{"__proto__": {"x": 1}}');
      const got = getPath(value, ['__proto__']);
      expect(got).toEqual({ x: 1 });
      expect(got).not.toBe(Object.prototype);
      expect(getPath(value, ['__proto__', 'x'])).toBe(1);
    });

    it.each<[string, unknown]>([
      ['null', null],
      ['undefined', undefined],
      ['a number', 42],
      ['a boolean', true],
    ])('gives undefined for any path into %s', (_label, value) => {
      expect(getPath(value, ['a'])).toBeUndefined();
    });
  });

  describe('valueToText', () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;

    it.each<[string, unknown, string]>([
      ['a string as it is', 'héllo {x}', 'héllo {x}'],
      ['an empty string', '', ''],
      ['an integer', 42, '42'],
      ['a float', 1.5, '1.5'],
      ['zero', 0, '0'],
      ['a negative number', -3, '-3'],
      ['true', true, 'true'],
      ['false', false, 'false'],
      ['null as nothing', null, ''],
      ['undefined as nothing', undefined, ''],
      ['a bigint', 10n, '10'],
      ['an object as JSON', { a: 1, b: 'x' }, '{"a":1,"b":"x"}'],
      ['an empty object', {}, '{}'],
      ['a list as JSON', [1, 'a', null], '[1,"a",null]'],
      ['an empty list', [], '[]'],
      ['nested values', { l: [{ k: true }] }, '{"l":[{"k":true}]}'],
    ])('renders %s', (_label, value, expected) => {
      expect(valueToText(value)).toBe(expected);
    });

    it('does not throw on a value JSON cannot encode', () => {
      expect(typeof valueToText(circular)).toBe('string');
    });
  });
});
