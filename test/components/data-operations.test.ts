import { describe, expect, it } from 'vitest';
import { DATA_OPERATIONS, DATA_OPERATIONS_LIMITS } from '../../lib/components/data-operations';
import { messages } from '../helpers/canvas';
import { failureOf, oneComponent, outputsOf, problemsOf, run } from '../helpers/data-flow';

const ID = 'DataOperations:Shape';

/** `result` of DataOperations with `params` over the conversation variables `variables`. */
async function result(params: Record<string, unknown>, variables: Record<string, unknown> = {}): Promise<unknown> {
  return (await outputsOf(oneComponent(ID, params, variables), ID)).result;
}

const people = [
  { name: 'Ann', city: 'Oslo', age: 31 },
  { name: 'Bob', city: 'Bergen', age: 27 },
];

const tested = new Set<string>();
function operation(name: string): string {
  tested.add(name);
  return name;
}

describe('DataOperations', () => {
  describe('inputs', () => {
    it('takes an object, and the objects of a list, in the order of `query`', async () => {
      const rows = await result(
        { query: ['env.one', '{env.list}'], operations: operation('select_keys'), select_keys: ['name'] },
        { one: { name: 'Cy', city: 'Rome' }, list: people },
      );
      expect(rows).toEqual([{ name: 'Cy' }, { name: 'Ann' }, { name: 'Bob' }]);
    });

    it('skips list elements that are not objects, and variables that hold none', async () => {
      const rows = await result(
        { query: ['env.mixed', 'env.text', 'env.number', 'begin@nothing'], operations: 'select_keys', select_keys: ['k'] },
        { mixed: [{ k: 1 }, 'text', 3, null, [{ k: 2 }], { k: 4 }], text: '{"k": 9}', number: 5 },
      );
      // RAGFlow takes only dicts: JSON text is not parsed, nested lists are not flattened.
      expect(rows).toEqual([{ k: 1 }, { k: 4 }]);
    });

    it('accepts one variable as a string, and a repeated one as many times as it is named', async () => {
      expect(await result({ query: 'env.one', operations: 'select_keys', select_keys: ['a'] }, { one: { a: 1 } })).toEqual([{ a: 1 }]);
      expect(await result({ query: ['env.one', 'env.one'], operations: 'select_keys', select_keys: ['a'] }, { one: { a: 1 } })).toEqual([
        { a: 1 },
        { a: 1 },
      ]);
    });

    it('gives an empty result without a query, and reads a component output by reference', async () => {
      expect(await result({ operations: 'remove_keys' })).toEqual([]);
      const definition = oneComponent(ID, { query: ['env.people'], operations: 'select_keys', select_keys: ['name', 'age'] }, { people }, {
        'DataOperations:Again': {
          obj: { component_name: 'DataOperations', params: { query: [`${ID}@result`], operations: 'remove_keys', remove_keys: ['age'] } },
          downstream: [],
        },
      });
      expect((await outputsOf(definition, 'DataOperations:Again')).result).toEqual([{ name: 'Ann' }, { name: 'Bob' }]);
    });

    it('runs literal_eval when no operation is given (RAGFlow\'s default)', async () => {
      expect(await result({ query: ['env.one'] }, { one: { n: '42' } })).toEqual([{ n: 42 }]);
    });
  });

  describe('select_keys and remove_keys', () => {
    it('select_keys keeps only the listed keys that an object has', async () => {
      const rows = await result({ query: ['env.people'], operations: 'select_keys', select_keys: ['name', 'zip'] }, { people });
      expect(rows).toEqual([{ name: 'Ann' }, { name: 'Bob' }]);
    });

    it('select_keys without keys leaves empty objects; blank entries of the editor are ignored', async () => {
      expect(await result({ query: ['env.people'], operations: 'select_keys' }, { people })).toEqual([{}, {}]);
      expect(await result({ query: ['env.people'], operations: 'select_keys', select_keys: [null, 'age'] }, { people })).toEqual([
        { age: 31 },
        { age: 27 },
      ]);
    });

    it('remove_keys drops the listed keys; absent ones are no error', async () => {
      const rows = await result({ query: ['env.people'], operations: operation('remove_keys'), remove_keys: ['city', 'zip'] }, { people });
      expect(rows).toEqual([
        { name: 'Ann', age: 31 },
        { name: 'Bob', age: 27 },
      ]);
    });
  });

  describe('rename_keys', () => {
    it('renames the pairs in order, trimmed, and leaves objects without the old key alone', async () => {
      const rows = await result(
        {
          query: ['env.rows'],
          operations: operation('rename_keys'),
          rename_keys: [
            { old_key: ' name ', new_key: 'who' },
            { old_key: 'who', new_key: 'person' },
          ],
        },
        { rows: [{ name: 'Ann', age: 3 }, { age: 4 }] },
      );
      expect(rows).toEqual([{ age: 3, person: 'Ann' }, { age: 4 }]);
    });

    it('skips blank and identical pairs, and overwrites an existing new key', async () => {
      const rows = await result(
        {
          query: ['env.rows'],
          operations: 'rename_keys',
          rename_keys: [
            { old_key: '', new_key: 'x' },
            { old_key: 'a', new_key: '' },
            { old_key: 'a', new_key: 'a' },
            { old_key: 'b', new_key: 'a' },
          ],
        },
        { rows: [{ a: 1, b: 2 }] },
      );
      expect(rows).toEqual([{ a: 2 }]);
    });
  });

  describe('literal_eval', () => {
    it.each<[string, unknown]>([
      ['[1, 2]', [1, 2]],
      ["{'a': [1, None], \"b\": (True, False)}", { a: [1, null], b: [true, false] }],
      ['True', true],
      ['None', null],
      ['1.5', 1.5],
      [' 42 ', 42],
      ["'quoted'", 'quoted'],
      ["(1, 'a')", [1, 'a']],
      ['{1, 2, 1}', [1, 2]],
      ['{"k": 0x10, "m": 1_000, "n": -2.5e1}', { k: 16, m: 1000, n: -25 }],
      ["['a' 'b', '''c''', r'\\d', '\\u00e9']", ['ab', 'c', '\\d', 'é']],
      ['[1, # one\n 2]', [1, 2]],
    ])('reads %j as a Python literal', async (text, expected) => {
      expect(await result({ query: ['env.one'], operations: operation('literal_eval') }, { one: { v: text } })).toEqual([{ v: expected }]);
    });

    it.each([
      // Not gated: RAGFlow only tries text that starts with a bracket or quote, is True/False/None
      // in any case, or is digits and dots.
      ['hello'],
      ['-5'],
      ['1e3'],
      [''],
      // Gated but not Python literals.
      ['true'],
      ['TRUE'],
      ['none'],
      ['[true, null]'],
      ['007'],
      ['1.2.3'],
      ['[1,'],
      ["{'a': 1"],
      ['(1 + 2)'],
      ["(__import__('os').system('touch /tmp/x'))"],
      ["[open('/etc/passwd').read()]"],
      ["b'bytes'"],
      ['[1j]'],
      ['[...]'],
      ["f'{1}'"],
      ['{[1]: 2}'],
    ])('leaves %j as text', async (text) => {
      expect(await result({ query: ['env.one'], operations: 'literal_eval' }, { one: { v: text } })).toEqual([{ v: text }]);
    });

    it('reads values at any depth, but not the text inside what it read', async () => {
      const rows = await result(
        { query: ['env.rows'], operations: 'literal_eval' },
        { rows: [{ list: ['1', ['True', 'x']], obj: { deep: { n: '[3]' } }, nested: "['[1]']", number: 7, flag: false, none: null }] },
      );
      expect(rows).toEqual([{ list: [1, [true, 'x']], obj: { deep: { n: [3] } }, nested: ['[1]'], number: 7, flag: false, none: null }]);
    });

    it('leaves brackets nested deeper than Python reads (200) as text', async () => {
      const deep = `${'['.repeat(201)}${']'.repeat(201)}`;
      const ok = `${'['.repeat(200)}${']'.repeat(200)}`;
      const rows = (await result({ query: ['env.one'], operations: 'literal_eval' }, { one: { deep, ok } })) as { deep: unknown; ok: unknown }[];
      expect(rows[0]?.deep).toBe(deep);
      expect(Array.isArray(rows[0]?.ok)).toBe(true);
    });
  });

  describe('combine', () => {
    it('merges the objects into one; a repeated key gathers its values, lists spread', async () => {
      const merged = await result(
        { query: ['env.a', 'env.b', 'env.c'], operations: operation('combine') },
        { a: { id: 1, tags: ['x'], note: 'first' }, b: { id: 2, tags: ['y', 'z'] }, c: { id: [3, 4], tags: 'w', extra: true } },
      );
      expect(merged).toEqual({ id: [1, 2, 3, 4], tags: ['x', 'y', 'z', 'w'], note: 'first', extra: true });
    });

    it('gives one object (empty without inputs), and leaves the input lists as they were', async () => {
      expect(await result({ query: ['begin@nothing'], operations: 'combine' })).toEqual({});
      // RAGFlow extends the first object's list in place, changing the variable it came from.
      const definition = oneComponent(ID, { query: ['env.a', 'env.b'], operations: 'combine' }, { a: { tags: ['x'] }, b: { tags: ['y'] } }, {
        'Message:Show': { obj: { component_name: 'Message', params: { content: [`{${ID}@result} {env.a}`] } }, downstream: [] },
      });
      expect(messages(await run(definition))).toEqual(['{"tags":["x","y"]} {"tags":["x"]}']);
    });
  });

  describe('filter_values', () => {
    const rows = [
      { name: 'Ann', city: 'Oslo' },
      { name: 'Bob', city: 'Bergen' },
      { name: 'Bea', city: 'Oslo' },
      { city: 'Oslo' },
    ];

    it.each<[string, string, string[]]>([
      ['=', 'Bob', ['Bob']],
      ['≠', 'Bob', ['Ann', 'Bea']],
      ['contains', 'n', ['Ann']],
      ['start with', 'B', ['Bob', 'Bea']],
      ['end with', 'a', ['Bea']],
    ])('%s %j keeps the matching objects that have the key', async (operator, value, names) => {
      const kept = (await result(
        { query: ['env.rows'], operations: operation('filter_values'), filter_values: [{ key: 'name', operator, value }] },
        { rows },
      )) as { name: string }[];
      expect(kept.map((r) => r.name)).toEqual(names);
    });

    it('needs every rule to hold; without rules it keeps everything', async () => {
      const both = await result(
        {
          query: ['env.rows'],
          operations: 'filter_values',
          filter_values: [
            { key: 'city', operator: '=', value: 'Oslo' },
            { key: 'name', operator: 'start with', value: 'B' },
          ],
        },
        { rows },
      );
      expect(both).toEqual([{ name: 'Bea', city: 'Oslo' }]);
      expect(await result({ query: ['env.rows'], operations: 'filter_values' }, { rows })).toEqual(rows);
    });

    it('compares exactly, case included; operators in any case and ASCII spellings', async () => {
      const kept = await result(
        {
          query: ['env.rows'],
          operations: 'filter_values',
          filter_values: [
            { key: 'name', operator: 'Contains', value: 'b' },
            { key: 'city', operator: '!=', value: 'oslo' },
          ],
        },
        { rows },
      );
      expect(kept).toEqual([{ name: 'Bob', city: 'Bergen' }]);
    });

    it.each<[unknown, string]>([
      [true, 'True'],
      [null, ''],
      [3, '3'],
      [2.5, '2.5'],
      [['a', 1], "['a', 1]"],
      [{ k: null }, "{'k': None}"],
    ])('reads the value %j as Python text %j', async (value, text) => {
      const kept = await result(
        { query: ['env.rows'], operations: 'filter_values', filter_values: [{ key: 'v', operator: '=', value: text }] },
        { rows: [{ v: value }, { v: 'other' }] },
      );
      expect(kept).toEqual([{ v: value }]);
    });

    it('renders references in the value', async () => {
      const kept = await result(
        { query: ['env.rows'], operations: 'filter_values', filter_values: [{ key: 'city', operator: '=', value: '{env.wanted}' }] },
        { rows, wanted: 'Bergen' },
      );
      expect(kept).toEqual([{ name: 'Bob', city: 'Bergen' }]);
    });
  });

  describe('append_or_update', () => {
    it('sets every update on every object, overwriting existing keys; blank keys are skipped, keys trimmed', async () => {
      const rows = await result(
        {
          query: ['env.people'],
          operations: operation('append_or_update'),
          updates: [
            { key: ' city ', value: 'Paris' },
            { key: 'country', value: 'FR' },
            { key: '', value: 'ignored' },
            { value: 'ignored too' },
          ],
        },
        { people },
      );
      expect(rows).toEqual([
        { name: 'Ann', city: 'Paris', age: 31, country: 'FR' },
        { name: 'Bob', city: 'Paris', age: 27, country: 'FR' },
      ]);
    });

    it('takes the raw value of a single reference, renders other text, keeps other literals', async () => {
      const rows = await result(
        {
          query: ['env.one'],
          operations: 'append_or_update',
          updates: [
            { key: 'profile', value: '{env.profile}' },
            { key: 'line', value: 'name: {env.profile.name}' },
            { key: 'n', value: 3 },
            { key: 'missing', value: '{begin@nothing}' },
          ],
        },
        { one: { id: 1 }, profile: { name: 'Ann', tags: ['a'] } },
      );
      expect(rows).toEqual([{ id: 1, profile: { name: 'Ann', tags: ['a'] }, line: 'name: Ann', n: 3, missing: null }]);
    });

    it('fails when copying a value onto every object would pass the size limit', async () => {
      const big = 'x'.repeat(64 * 1024);
      const count = Math.ceil(DATA_OPERATIONS_LIMITS.maxResultChars / big.length) + 1;
      const error = await failureOf(
        oneComponent(
          ID,
          { query: ['env.rows'], operations: 'append_or_update', updates: [{ key: 'blob', value: '{env.big}' }] },
          { rows: Array.from({ length: count }, (_, i) => ({ i })), big },
        ),
      );
      expect(error).toMatchObject({ component_id: ID, message: expect.stringMatching(/result would be about 8\.\d MB of JSON, over the limit of 8\.0 MB/) });
    });
  });

  describe('limits and errors', () => {
    it('counts a variable named many times in `query` towards the size limit', async () => {
      const row = { blob: 'y'.repeat(256 * 1024) };
      const times = Math.ceil(DATA_OPERATIONS_LIMITS.maxResultChars / (256 * 1024)) + 1;
      const error = await failureOf(oneComponent(ID, { query: Array(times).fill('env.row'), operations: 'select_keys' }, { row }));
      expect(error.message).toMatch(/over the limit/);
    });

    it('refuses values nested deeper than it walks, as an error of the component', async () => {
      let deep: unknown = 'x';
      for (let i = 0; i < 300; i++) deep = [deep];
      const error = await failureOf(oneComponent(ID, { query: ['env.one'], operations: 'literal_eval' }, { one: { deep } }));
      expect(error).toMatchObject({ component_id: ID, message: expect.stringMatching(/nested deeper than 256 levels/) });
    });

    it("an error is handled by exception_method 'comment'", async () => {
      let deep: unknown = 'x';
      for (let i = 0; i < 300; i++) deep = [deep];
      const definition = oneComponent(
        ID,
        { query: ['env.one'], operations: 'literal_eval', exception_method: 'comment', exception_default_value: 'none' },
        { one: { deep } },
      );
      expect((await outputsOf(definition, ID)).result).toBe('none');
    });
  });

  describe('params are checked at load, naming the param', () => {
    it.each<[string, Record<string, unknown>, string, RegExp]>([
      ['an unknown operation', { operations: 'flatten' }, 'obj.params.operations', /must be one of: select_keys, literal_eval, combine/],
      ['a query that is not a reference', { query: ['just text'] }, 'obj.params.query.0', /not a variable reference/],
      ['a query of a missing component', { query: ['Nope:X@result'] }, 'obj.params.query.0', /missing component "Nope:X"/],
      ['a query that is not text', { query: [3] }, 'obj.params.query', /./],
      ['keys that are not a list of text', { select_keys: 'name' }, 'obj.params.select_keys', /./],
      ['a filter rule without an operator', { filter_values: [{ key: 'a', value: 'b' }] }, 'obj.params.filter_values.0.operator', /must be one of: =, ≠, contains, start with, end with/],
      ['a filter rule with an unknown operator', { filter_values: [{ key: 'a', operator: '>', value: 'b' }] }, 'obj.params.filter_values.0.operator', /must be one of/],
      ['a filter rule without a key', { filter_values: [{ key: '', operator: '=', value: 'b' }] }, 'obj.params.filter_values.0.key', /names the key to compare/],
      ['updates that are not objects', { updates: ['a'] }, 'obj.params.updates.0', /./],
      ['rename pairs that are not objects', { rename_keys: [['a', 'b']] }, 'obj.params.rename_keys.0', /./],
    ])('%s', (_label, params, field, message) => {
      const problems = problemsOf(oneComponent(ID, { query: ['env.one'], ...params }, { one: {} }));
      expect(problems).toContainEqual(expect.objectContaining({ component_id: ID, field, message: expect.stringMatching(message) }));
    });
  });

  it('the tests cover every operation', () => {
    expect(tested).toEqual(new Set(DATA_OPERATIONS));
  });
});
