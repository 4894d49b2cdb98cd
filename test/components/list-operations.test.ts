import { describe, expect, it } from 'vitest';
import { LIST_OPERATIONS } from '../../lib/components/list-operations';
import { failureOf, oneComponent, outputsOf, problemsOf } from '../helpers/data-flow';

const ID = 'ListOperations:Pick';

async function outputs(params: Record<string, unknown>, list: unknown): Promise<Record<string, unknown>> {
  return outputsOf(oneComponent(ID, { query: 'env.list', ...params }, { list }), ID);
}

async function result(params: Record<string, unknown>, list: unknown): Promise<unknown> {
  return (await outputs(params, list)).result;
}

async function failure(params: Record<string, unknown>, list: unknown) {
  return failureOf(oneComponent(ID, { query: 'env.list', ...params }, { list }));
}

const tested = new Set<string>();
function operation(name: string): string {
  tested.add(name);
  return name;
}

const letters = ['a', 'b', 'c', 'd'];

describe('ListOperations', () => {
  describe('outputs', () => {
    it('sets result, first and last', async () => {
      expect(await outputs({ operations: 'head', n: 3 }, letters)).toEqual({ result: ['a', 'b', 'c'], first: 'a', last: 'c' });
    });

    it('first and last are null for an empty result, also from an empty list', async () => {
      expect(await outputs({ operations: 'head', n: 0 }, letters)).toEqual({ result: [], first: null, last: null });
      for (const op of LIST_OPERATIONS) {
        expect(await outputs({ operations: op, n: 1 }, [])).toEqual({ result: [], first: null, last: null });
      }
    });

    it('reads the list from a component output, and feeds another component', async () => {
      const definition = oneComponent(ID, { query: 'env.list', operations: 'sort', sort_method: 'desc' }, { list: [2, 3, 1] }, {
        'ListOperations:Top': { obj: { component_name: 'ListOperations', params: { query: `{${ID}@result}`, operations: 'nth', n: 1 } }, downstream: [] },
      });
      expect(await outputsOf(definition, 'ListOperations:Top')).toEqual({ result: [3], first: 3, last: 3 });
    });
  });

  describe('nth', () => {
    it.each<[number, unknown[]]>([
      [1, ['a']],
      [4, ['d']],
      [-1, ['d']],
      [-4, ['a']],
      [0, []],
      [5, []],
      [-5, []],
    ])('n = %d counts from 1 (negative from the end): %j', async (n, expected) => {
      expect(await result({ operations: operation('nth'), n }, letters)).toEqual(expected);
    });

    it.each([0, 5, -5])('n = %d fails in strict mode, with RAGFlow\'s message', async (n) => {
      const error = await failure({ operations: 'nth', n, strict: true }, letters);
      expect(error).toMatchObject({ component_id: ID, message: `nth requires n to be within the valid range in strict mode, got ${n}.` });
    });

    it('is the operation when none is given, with n = 0 (an empty result)', async () => {
      expect(await outputs({}, letters)).toEqual({ result: [], first: null, last: null });
      expect(await result({ operations: '', n: 2 }, letters)).toEqual(['b']);
    });
  });

  describe('head and tail', () => {
    it.each<[string, number, unknown[]]>([
      ['head', 2, ['a', 'b']],
      ['head', 9, letters],
      ['head', 0, []],
      ['head', -2, []],
      ['tail', 2, ['c', 'd']],
      ['tail', 9, letters],
      ['tail', 0, []],
      ['tail', -1, []],
      ['topN', 1, ['a']],
      ['TOPN', 2, ['a', 'b']],
    ])('%s with n = %d', async (op, n, expected) => {
      expect(await result({ operations: operation(op.toLowerCase() === 'topn' ? 'head' : op), n }, letters)).toEqual(expected);
    });

    it.each<[string, number]>([
      ['head', 0],
      ['head', 5],
      ['tail', -1],
      ['tail', 5],
    ])('%s with n = %d fails in strict mode', async (op, n) => {
      const error = await failure({ operations: op, n, strict: 'yes' }, letters);
      expect(error.message).toBe(`${op} requires n to be within the valid range in strict mode, got ${n}.`);
    });

    it('takes n as Python int() does: numbers truncated, integer text', async () => {
      expect(await result({ operations: 'head', n: 2.9 }, letters)).toEqual(['a', 'b']);
      expect(await result({ operations: 'head', n: ' 3 ' }, letters)).toEqual(['a', 'b', 'c']);
      expect(await result({ operations: 'tail', n: '-1' }, letters)).toEqual([]);
      expect(await result({ operations: 'head', n: null }, letters)).toEqual([]);
    });

    it.each<[unknown, boolean]>([
      [true, true],
      ['True', true],
      [' on ', true],
      ['1', true],
      [1, true],
      ['false', false],
      ['no', false],
      [0, false],
      [null, false],
    ])('strict %j is %s', async (strict, on) => {
      const events = oneComponent(ID, { query: 'env.list', operations: 'head', n: 9, strict }, { list: letters });
      if (on) expect((await failureOf(events)).message).toMatch(/strict mode/);
      else expect((await outputsOf(events, ID)).result).toEqual(letters);
    });
  });

  describe('filter', () => {
    const words = ['apple', 'banana', 'Apple pie', 'grape', ''];

    it.each<[string, string, string[]]>([
      ['=', 'apple', ['apple']],
      ['≠', 'apple', ['banana', 'Apple pie', 'grape', '']],
      ['contains', 'an', ['banana']],
      ['start with', 'Apple', ['Apple pie']],
      ['end with', 'e', ['apple', 'Apple pie', 'grape']],
      ['!=', 'grape', ['apple', 'banana', 'Apple pie', '']],
      ['Contains', 'p', ['apple', 'Apple pie', 'grape']],
    ])('%s %j (case-sensitive)', async (operator, value, expected) => {
      expect(await result({ operations: operation('filter'), filter: { operator, value } }, words)).toEqual(expected);
    });

    it("compares each element as Python's str(): True, None as '', lists and dicts in Python's spelling", async () => {
      const list = [true, null, 1, 2.5, ['a', 1], { k: null }, 'True'];
      expect(await result({ operations: 'filter', filter: { operator: '=', value: 'True' } }, list)).toEqual([true, 'True']);
      expect(await result({ operations: 'filter', filter: { operator: '=', value: '' } }, list)).toEqual([null]);
      expect(await result({ operations: 'filter', filter: { operator: 'start with', value: "['a'" } }, list)).toEqual([['a', 1]]);
      expect(await result({ operations: 'filter', filter: { operator: '=', value: "{'k': None}" } }, list)).toEqual([{ k: null }]);
      expect(await result({ operations: 'filter', filter: { operator: '=', value: 2.5 } }, list)).toEqual([2.5]);
    });

    it('defaults to = "" (keeps empty and missing elements)', async () => {
      expect(await result({ operations: 'filter' }, ['a', '', null])).toEqual(['', null]);
      expect(await result({ operations: 'filter', filter: { value: 'a' } }, ['a', 'ab'])).toEqual(['a']);
    });
  });

  describe('sort', () => {
    it.each<[string, unknown[], unknown[]]>([
      ['asc', [3, 1.5, 2, -1], [-1, 1.5, 2, 3]],
      ['desc', [3, 1.5, 2, -1], [3, 2, 1.5, -1]],
      ['asc', ['b', 'B', 'a', 'é', ''], ['', 'B', 'a', 'b', 'é']],
      ['asc', [[2], [1, 5], [1], []], [[], [1], [1, 5], [2]]],
      ['asc', [true, 0, 2, false], [0, false, true, 2]],
    ])('%s %j', async (sort_method, list, expected) => {
      expect(await result({ operations: operation('sort'), sort_method }, list)).toEqual(expected);
    });

    it('orders text by code point, as Python does', async () => {
      expect(await result({ operations: 'sort' }, ['\u{1F600}', '\uFFFF', 'z'])).toEqual(['z', '\uFFFF', '\u{1F600}']);
    });

    it('sorts objects by the keys of sort_by, primary first, stable in both directions', async () => {
      const rows = [
        { id: 1, team: 'b', score: 5 },
        { id: 2, team: 'a', score: 7 },
        { id: 3, team: 'b', score: 7 },
        { id: 4, team: 'a', score: 7 },
      ];
      const ids = async (params: Record<string, unknown>) => ((await result({ operations: 'sort', ...params }, rows)) as { id: number }[]).map((r) => r.id);
      expect(await ids({ sort_by: 'score' })).toEqual([1, 2, 3, 4]);
      expect(await ids({ sort_by: 'score', sort_method: 'desc' })).toEqual([2, 3, 4, 1]);
      expect(await ids({ sort_by: 'score, team' })).toEqual([1, 2, 4, 3]);
      expect(await ids({ sort_by: ['team', 'score'], sort_method: 'desc' })).toEqual([3, 1, 2, 4]);
    });

    it('sorts objects without sort_by by their sorted (key, value) pairs', async () => {
      const rows = [{ b: 1, a: 2 }, { a: 1, z: 0 }, { a: 2, b: 0 }];
      expect(await result({ operations: 'sort' }, rows)).toEqual([{ a: 1, z: 0 }, { a: 2, b: 0 }, { b: 1, a: 2 }]);
    });

    it.each<[string, Record<string, unknown>, unknown[], RegExp]>([
      ['text and numbers', {}, ['a', 1], /'<' not supported between instances of '(int|str)' and '(str|int)'/],
      ['two nulls', {}, [null, null], /'NoneType' and 'NoneType'/],
      ['plain objects after a list', {}, [[1], { a: 1 }], /not supported/],
      ['a sort_by key missing in some objects', { sort_by: 'k' }, [{ k: 1 }, { j: 2 }], /'NoneType'/],
      ['an element that is not an object', { sort_by: 'k' }, [{ k: 1 }, 'x'], /cannot sort by k: element 2 is not an object/],
    ])('fails on %s, as Python raises', async (_label, params, list, message) => {
      const error = await failure({ operations: 'sort', ...params }, list);
      expect(error).toMatchObject({ component_id: ID, message: expect.stringMatching(message) });
    });

    it('sorts a single element of any kind', async () => {
      expect(await result({ operations: 'sort' }, [null])).toEqual([null]);
    });
  });

  describe('drop_duplicates', () => {
    it('keeps the first of equal elements, in order', async () => {
      expect(await result({ operations: operation('drop_duplicates') }, ['b', 'a', 'b', 'c', 'a'])).toEqual(['b', 'a', 'c']);
    });

    it('treats objects as equal whatever their key order, and 1, 1.0 and True as one (Python hashing)', async () => {
      const list = [{ a: 1, b: [1, 2] }, { b: [1, 2], a: 1 }, 1, true, '1', null, null, [1, { x: 0 }], [1, { x: false }]];
      expect(await result({ operations: 'drop_duplicates' }, list)).toEqual([{ a: 1, b: [1, 2] }, 1, '1', null, [1, { x: 0 }]]);
    });
  });

  describe('input', () => {
    it.each<[string, unknown]>([
      ['text', 'a,b'],
      ['JSON text', '[1, 2]'],
      ['an object', { a: 1 }],
      ['a number', 3],
    ])('fails on %s, with RAGFlow\'s message', async (_label, value) => {
      const error = await failure({ operations: 'head', n: 1 }, value);
      expect(error).toMatchObject({ component_id: ID, message: 'The input of List Operations should be an array.' });
    });

    it('fails on a variable without a value', async () => {
      const error = await failureOf(oneComponent(ID, { query: 'begin@nothing', operations: 'head', n: 1 }));
      expect(error.message).toBe('The input of List Operations should be an array.');
    });

    it("continues with exception_default_value under exception_method 'comment'", async () => {
      const out = await outputs({ operations: 'head', n: 1, exception_method: 'comment', exception_default_value: 'n/a' }, 'text');
      expect(out.result).toBe('n/a');
    });
  });

  describe('params are checked at load, naming the param', () => {
    it.each<[string, Record<string, unknown>, string, RegExp]>([
      ['a missing query', { query: undefined }, 'obj.params.query', /names the list variable/],
      ['an empty query', { query: '' }, 'obj.params.query', /names the list variable/],
      ['a query that is not a reference', { query: 'a list' }, 'obj.params.query', /not a variable reference/],
      ['a query of a missing component', { query: 'Gone:X@result' }, 'obj.params.query', /missing component "Gone:X"/],
      ['an unknown operation', { operations: 'shuffle' }, 'obj.params.operations', /must be one of: nth, head, tail, filter, sort, drop_duplicates/],
      ['an n that is not an integer', { n: 'two' }, 'obj.params.n', /must be an integer/],
      ['an n of decimal text', { n: '2.5' }, 'obj.params.n', /must be an integer/],
      ['an n of another type', { n: [1] }, 'obj.params.n', /must be an integer/],
      ['an unknown sort method', { sort_method: 'random' }, 'obj.params.sort_method', /must be "asc" or "desc"/],
      ['sort keys that are not text', { sort_by: 3 }, 'obj.params.sort_by', /keys separated by commas/],
      ['an unknown filter operator', { filter: { operator: 'like', value: 'a' } }, 'obj.params.filter.operator', /must be one of: =, ≠, contains/],
      ['a strict flag of another type', { strict: {} }, 'obj.params.strict', /must be true or false/],
    ])('%s', (_label, params, field, message) => {
      const problems = problemsOf(oneComponent(ID, { query: 'env.list', ...params }, { list: [] }));
      expect(problems).toContainEqual(expect.objectContaining({ component_id: ID, field, message: expect.stringMatching(message) }));
    });
  });

  it('the tests cover every operation', () => {
    expect(tested).toEqual(new Set(LIST_OPERATIONS));
  });
});
