import { describe, expect, it } from 'vitest';
import type { CanvasEvent } from '../../lib/canvas';
import { ASSIGN_OPERATORS } from '../../lib/components/variable-assigner';
import { canvasFor, last, messages, turn } from '../helpers/canvas';

const ASSIGNER = 'VariableAssigner:Set';
const SHOW = 'Message:Show';

interface Assignment {
  variable: string;
  operator: string;
  parameter?: unknown;
}

interface Variable {
  type: string;
  value: unknown;
}

/** begin (task mode, no inputs) -> VariableAssigner -> Message showing `template`. */
function dsl(
  assignments: Assignment[],
  template: string,
  variables: Record<string, Variable> = {},
  assignerParams: Record<string, unknown> = {},
) {
  return {
    components: {
      begin: {
        obj: { component_name: 'Begin', params: { mode: 'task', inputs: {} } },
        downstream: [ASSIGNER],
        upstream: [],
      },
      [ASSIGNER]: {
        obj: { component_name: 'VariableAssigner', params: { variables: assignments, ...assignerParams } },
        downstream: [SHOW],
        upstream: ['begin'],
      },
      [SHOW]: {
        obj: { component_name: 'Message', params: { content: [template] } },
        downstream: [],
        upstream: [ASSIGNER],
      },
    },
    globals: {},
    variables: Object.fromEntries(
      Object.entries(variables).map(([name, v]) => [name, { name, type: v.type, value: v.value }]),
    ),
  };
}

async function run(definition: unknown, query?: string): Promise<CanvasEvent[]> {
  return turn(canvasFor(definition), query === undefined ? {} : { query });
}

/** The one message shown, after checking that the run finished. */
async function shown(definition: unknown, query?: string): Promise<string> {
  const events = await run(definition, query);
  expect(last(events).event).toBe('workflow_finished');
  const texts = messages(events);
  expect(texts).toHaveLength(1);
  return texts[0] as string;
}

function failure(events: readonly CanvasEvent[]) {
  const end = last(events);
  if (end.event !== 'workflow_failed') throw new Error(`expected workflow_failed, got ${end.event}`);
  return end.data.error;
}

// [operator, variable type, initial value, parameter, shown]
type OperatorCase = [string, string, unknown, unknown, string];
const operatorCases: OperatorCase[] = [
  ['overwrite', 'string', 'calm', 'warm', 'warm'],
  ['clear', 'array<string>', ['a', 'b'], undefined, '[]'],
  ['set', 'number', 1, 7, '7'],
  ['append', 'array<string>', ['a'], 'b', '["a","b"]'],
  ['extend', 'array<string>', ['a'], ['b', 'c'], '["a","b","c"]'],
  ['remove_first', 'array<string>', ['a', 'b', 'c'], undefined, '["b","c"]'],
  ['remove_last', 'array<string>', ['a', 'b', 'c'], undefined, '["a","b"]'],
  ['+=', 'number', 10, 5, '15'],
  ['-=', 'number', 10, 4, '6'],
  ['*=', 'number', 10, 3, '30'],
  ['/=', 'number', 10, 4, '2.5'],
];

describe('VariableAssigner', () => {
  it('covers every operator', () => {
    expect(new Set(operatorCases.map(([op]) => op))).toEqual(new Set(ASSIGN_OPERATORS));
  });

  describe('on a conversation variable (env.*)', () => {
    it.each(operatorCases)('%s on a %s', async (operator, type, initial, parameter, expected) => {
      const assignment: Assignment = { variable: 'env.v', operator, ...(parameter === undefined ? {} : { parameter }) };
      expect(await shown(dsl([assignment], '<{env.v}>', { v: { type, value: initial } }))).toBe(`<${expected}>`);
    });

    it.each<[string, unknown, string]>([
      ['a list', ['a'], '[]'],
      ['text', 'abc', ''],
      ['a number', 5, '0'],
      ['a boolean', true, 'false'],
      ['an object', { a: 1 }, '{}'],
    ])('clear empties %s to its own type', async (_label, initial, expected) => {
      const definition = dsl([{ variable: 'env.v', operator: 'clear' }], '<{env.v}>', {
        v: { type: 'string', value: initial },
      });
      expect(await shown(definition)).toBe(`<${expected}>`);
    });

    it('accepts the hyphenated spellings of remove_first and remove_last', async () => {
      const definition = dsl(
        [
          { variable: 'env.v', operator: 'remove-first' },
          { variable: 'env.v', operator: 'remove-last' },
        ],
        '{env.v}',
        { v: { type: 'array<number>', value: [1, 2, 3, 4] } },
      );
      expect(await shown(definition)).toBe('[2,3]');
    });

    it('appends to a list variable declared without a value', async () => {
      const definition = dsl([{ variable: 'env.v', operator: 'append', parameter: 'x' }], '{env.v}', {
        v: { type: 'array<string>', value: null },
      });
      expect(await shown(definition)).toBe('["x"]');
    });

    it('applies the operations one after another', async () => {
      const definition = dsl(
        [
          { variable: 'env.n', operator: '+=', parameter: 2 },
          { variable: 'env.n', operator: '*=', parameter: 3 },
          { variable: 'env.log', operator: 'append', parameter: 'env.n' },
        ],
        '{env.n} {env.log}',
        { n: { type: 'number', value: 1 }, log: { type: 'array<number>', value: [] } },
      );
      expect(await shown(definition)).toBe('9 [9]');
    });
  });

  describe("on another component's output", () => {
    // The output is seeded by a first overwrite, then changed by the operator under test.
    it.each(operatorCases)('%s (seeded as %s)', async (operator, _type, initial, parameter, expected) => {
      const definition = dsl(
        [
          { variable: 'begin@v', operator: 'overwrite', parameter: initial },
          { variable: 'begin@v', operator, ...(parameter === undefined ? {} : { parameter }) },
        ],
        '<{begin@v}>',
      );
      expect(await shown(definition)).toBe(`<${expected}>`);
    });

    it('writes a dotted path into an output object', async () => {
      const definition = dsl(
        [
          { variable: 'begin@profile', operator: 'overwrite', parameter: { name: 'Ann' } },
          { variable: 'begin@profile.city', operator: 'overwrite', parameter: 'Oslo' },
        ],
        '{begin@profile.name} from {begin@profile.city}',
      );
      expect(await shown(definition)).toBe('Ann from Oslo');
    });
  });

  describe('overwrite', () => {
    it.each<[string, unknown, string]>([
      ['a bare reference takes its value', 'env.source', '["x","y"]'],
      ['a braced reference takes its value', '{env.source}', '["x","y"]'],
      ['a reference with a path takes the value there', 'env.source.1', 'y'],
      ['a literal string is taken as it is', 'just text', 'just text'],
      ['a literal list is taken as it is', ['p'], '["p"]'],
      ['a literal object is taken as it is', { k: 1 }, '{"k":1}'],
    ])('%s', async (_label, parameter, expected) => {
      const definition = dsl([{ variable: 'env.target', operator: 'overwrite', parameter }], '{env.target}', {
        source: { type: 'array<string>', value: ['x', 'y'] },
        target: { type: 'string', value: 'old' },
      });
      expect(await shown(definition)).toBe(expected);
    });

    it.each(['env.source', '{env.source}'])('keeps the raw value of %j (a later append works)', async (reference) => {
      const definition = dsl(
        [
          { variable: 'env.copy', operator: 'overwrite', parameter: reference },
          { variable: 'env.copy', operator: 'append', parameter: 'z' },
        ],
        '{env.copy} / {env.source}',
        { source: { type: 'array<string>', value: ['x', 'y'] }, copy: { type: 'string', value: '' } },
      );
      expect(await shown(definition)).toBe('["x","y","z"] / ["x","y"]');
    });

    it('reads sys.query through a reference', async () => {
      const definition = dsl([{ variable: 'env.last', operator: 'overwrite', parameter: 'sys.query' }], '{env.last}', {
        last: { type: 'string', value: 'none' },
      });
      expect(await shown(definition, 'what time is it?')).toBe('what time is it?');
    });

    it('does not render a literal template', async () => {
      const definition = dsl([{ variable: 'env.t', operator: 'overwrite', parameter: 'Hi {sys.query}' }], '{env.t}', {
        t: { type: 'string', value: '' },
      });
      expect(await shown(definition, 'Ann')).toBe('Hi {sys.query}');
    });

    it('takes 0 as a literal', async () => {
      const definition = dsl([{ variable: 'env.n', operator: 'overwrite', parameter: 0 }], '<{env.n}>', {
        n: { type: 'number', value: 9 },
      });
      expect(await shown(definition)).toBe('<0>');
    });
  });

  describe('set', () => {
    it('renders a template into a string variable', async () => {
      const definition = dsl(
        [{ variable: 'env.greeting', operator: 'set', parameter: 'Hello {sys.query}, tone {env.tone}!' }],
        '{env.greeting}',
        { greeting: { type: 'string', value: '' }, tone: { type: 'string', value: 'warm' } },
      );
      expect(await shown(definition, 'Ann')).toBe('Hello Ann, tone warm!');
    });

    it('renders a template into a variable that has no value yet', async () => {
      const definition = dsl([{ variable: 'begin@note', operator: 'set', parameter: 'asked: {sys.query}' }], '{begin@note}');
      expect(await shown(definition, 'why?')).toBe('asked: why?');
    });

    it('takes the parameter literally for a non-string variable', async () => {
      const definition = dsl([{ variable: 'env.n', operator: 'set', parameter: '{sys.query}' }], '<{env.n}>', {
        n: { type: 'number', value: 1 },
      });
      expect(await shown(definition, 'Ann')).toBe('<{sys.query}>');
    });
  });

  describe('impossible operations fail the component', () => {
    it.each<[string, Variable, Assignment, RegExp]>([
      ['append to text', { type: 'string', value: 'abc' }, { variable: 'env.v', operator: 'append', parameter: 'x' }, /not a list/],
      ['extend a number', { type: 'number', value: 3 }, { variable: 'env.v', operator: 'extend', parameter: ['x'] }, /not a list/],
      ['extend with a non-list', { type: 'array<string>', value: [] }, { variable: 'env.v', operator: 'extend', parameter: 'x' }, /parameter is not a list/],
      ['remove_first from text', { type: 'string', value: 'abc' }, { variable: 'env.v', operator: 'remove_first' }, /not a list/],
      ['remove_last from an object', { type: 'object', value: { a: 1 } }, { variable: 'env.v', operator: 'remove_last' }, /not a list/],
      ['add to text', { type: 'string', value: '1' }, { variable: 'env.v', operator: '+=', parameter: 1 }, /not a number/],
      ['add a string', { type: 'number', value: 1 }, { variable: 'env.v', operator: '+=', parameter: '1' }, /parameter is not a number/],
      ['divide by zero', { type: 'number', value: 10 }, { variable: 'env.v', operator: '/=', parameter: 0 }, /division by zero/],
    ])('%s ends the run with workflow_failed naming the component', async (_label, variable, assignment, message) => {
      const events = await run(dsl([assignment], 'after: {env.v}', { v: variable }));
      const error = failure(events);
      expect(error.component_id).toBe(ASSIGNER);
      expect(error.message).toMatch(message);
      expect(error.message).toContain('env.v');
      expect(messages(events)).toEqual([]);
      const finished = events.find((e) => e.event === 'node_finished' && e.data.component_id === ASSIGNER);
      expect(finished?.event === 'node_finished' && finished.data.error).toMatch(message);
    });

    it('fails on a list operation on a component output that is not a list', async () => {
      const events = await run(
        dsl(
          [
            { variable: 'begin@v', operator: 'overwrite', parameter: 'text' },
            { variable: 'begin@v', operator: 'append', parameter: 'x' },
          ],
          '{begin@v}',
        ),
      );
      expect(failure(events)).toMatchObject({ component_id: ASSIGNER, message: expect.stringMatching(/not a list/) });
    });

    it('continues with the default value under exception_method "comment"', async () => {
      const definition = dsl(
        [{ variable: 'env.v', operator: 'append', parameter: 'x' }],
        'v={env.v} result={VariableAssigner:Set@result}',
        { v: { type: 'string', value: 'abc' } },
        { exception_method: 'comment', exception_default_value: 'fallback' },
      );
      expect(await shown(definition)).toBe('v=abc result=fallback');
    });

    it('continues after a division by zero under exception_method "comment"', async () => {
      const definition = dsl(
        [{ variable: 'env.n', operator: '/=', parameter: 0 }],
        'n={env.n}',
        { n: { type: 'number', value: 10 } },
        { exception_method: 'comment', exception_default_value: 'n/a' },
      );
      expect(await shown(definition)).toBe('n=10');
    });

    it('still fails under exception_method "comment" without a default value', async () => {
      const events = await run(
        dsl([{ variable: 'env.v', operator: 'append', parameter: 'x' }], '{env.v}', { v: { type: 'string', value: 'abc' } }, {
          exception_method: 'comment',
        }),
      );
      expect(failure(events).component_id).toBe(ASSIGNER);
    });
  });
});
