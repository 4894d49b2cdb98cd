import { describe, expect, it } from 'vitest';
import { compileWorkflow, DSL_LIMITS, type DslProblem, DslValidationError } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { fixture } from '../helpers/canvas';

type Components = Record<string, unknown>;

function node(name: string, params: Record<string, unknown> = {}, downstream: string[] = [], parentId?: string) {
  return {
    obj: { component_name: name, params },
    downstream,
    upstream: [],
    ...(parentId === undefined ? {} : { parent_id: parentId }),
  };
}

const begin = (downstream: string[] = ['Message:Out']) => node('Begin', { mode: 'task', inputs: {} }, downstream);
const say = (content: unknown = 'done', downstream: string[] = [], parentId?: string) =>
  node('Message', { content }, downstream, parentId);

/** A valid workflow (begin -> Message:Out) with `components` added or replaced. */
function dsl(components: Components): Record<string, unknown> {
  return { components: { begin: begin(), 'Message:Out': say(), ...components }, globals: {}, variables: {} };
}

function compile(definition: unknown) {
  return compileWorkflow(definition, builtinComponents);
}

/** The problems of a DSL that must be refused. */
function problemsOf(definition: unknown): readonly DslProblem[] {
  let caught: unknown;
  try {
    compile(definition);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(DslValidationError);
  const error = caught as DslValidationError;
  expect(error.code).toBe('invalid_dsl');
  expect(error.problems.length).toBeGreaterThan(0);
  return error.problems;
}

interface Expected {
  component_id?: string;
  field?: string;
  message: RegExp;
}

function expectProblem(problems: readonly DslProblem[], expected: Expected): void {
  expect(problems).toContainEqual(
    expect.objectContaining({
      ...(expected.component_id === undefined ? {} : { component_id: expected.component_id }),
      ...(expected.field === undefined ? {} : { field: expected.field }),
      message: expect.stringMatching(expected.message),
    }),
  );
}

/** `depth` objects nested in one another. */
function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < depth; i++) value = { deeper: value };
  return value;
}

/** `depth` lists nested in one another. */
function nestedLists(depth: number): unknown[] {
  let value: unknown[] = [];
  for (let i = 1; i < depth; i++) value = [value];
  return value;
}

const iterationBody = {
  'IterationItem:Start': node('IterationItem', {}, ['Message:Inner'], 'Iteration:Each'),
  'Message:Inner': say('{item}', [], 'Iteration:Each'),
};
const iteration = (downstream: string[] = []) => node('Iteration', { items_ref: 'sys.files' }, downstream);
const loopStart = { 'LoopItem:Start': node('LoopItem', {}, [], 'Loop:Again') };

describe('compileWorkflow validation', () => {
  describe('documents that are not a workflow', () => {
    it.each<[string, unknown]>([
      ['null', null],
      ['a string', '{"components": {}}'],
      ['a list', [begin()]],
      ['a number', 42],
    ])('refuses %s', (_label, definition) => {
      expect(problemsOf(definition)).toEqual([{ message: expect.stringMatching(/JSON object/) }]);
    });

    it.each<[string, unknown]>([
      ['no components key', {}],
      ['an empty components object', { components: {} }],
      ['components as a list', { components: [begin()] }],
      ['components as null', { components: null }],
    ])('refuses %s', (_label, definition) => {
      expect(problemsOf(definition)).toEqual([{ field: 'components', message: expect.stringMatching(/at least one/) }]);
    });
  });

  it('names every unsupported component, sorted, in the first problem', () => {
    const problems = problemsOf(
      dsl({
        'Tokenizer:A': node('Tokenizer', { fields: 'x' }),
        'Parser:B': node('Parser', { setups: {} }),
        'Tokenizer:C': node('Tokenizer'),
      }),
    );
    expect(problems[0]).toEqual({ field: 'components', message: 'unsupported components: Parser, Tokenizer' });
    for (const id of ['Tokenizer:A', 'Parser:B', 'Tokenizer:C']) {
      expectProblem(problems, { component_id: id, field: 'obj.component_name', message: /unsupported component/ });
    }
  });

  describe.each<[string, Components, Expected]>([
    [
      'a downstream to a missing component',
      { begin: begin(['Message:Out', 'Message:Ghost']) },
      { component_id: 'begin', field: 'downstream', message: /missing component "Message:Ghost"/ },
    ],
    [
      'a downstream into another scope',
      { begin: begin(['Message:Inner']), 'Iteration:Each': iteration(), ...iterationBody },
      { component_id: 'begin', field: 'downstream', message: /"Message:Inner" is in another scope/ },
    ],
    [
      'a downstream out of a scope',
      {
        'Iteration:Each': iteration(),
        'IterationItem:Start': node('IterationItem', {}, ['Message:Out'], 'Iteration:Each'),
      },
      { component_id: 'IterationItem:Start', field: 'downstream', message: /another scope/ },
    ],
    [
      'a Switch without end_cpn_ids',
      {
        'Switch:Route': node('Switch', {
          conditions: [{ logical_operator: 'and', items: [{ cpn_id: 'sys.query', operator: '=', value: 'x' }], to: ['Message:Out'] }],
        }),
      },
      { component_id: 'Switch:Route', field: 'obj.params.end_cpn_ids', message: /else/ },
    ],
    [
      'a Switch operator "approximately"',
      {
        'Switch:Route': node('Switch', {
          conditions: [{ items: [{ cpn_id: 'sys.query', operator: 'approximately', value: 'x' }], to: ['Message:Out'] }],
          end_cpn_ids: ['Message:Out'],
        }),
      },
      { component_id: 'Switch:Route', field: 'obj.params.conditions.0.items.0.operator', message: /must be one of/ },
    ],
    [
      'a Switch condition without a target',
      {
        'Switch:Route': node('Switch', {
          conditions: [{ items: [{ cpn_id: 'sys.query', operator: '=', value: 'x' }], to: [] }],
          end_cpn_ids: ['Message:Out'],
        }),
      },
      { component_id: 'Switch:Route', field: 'obj.params.conditions.0.to', message: /target/ },
    ],
    [
      'a Switch branch to a missing component',
      {
        'Switch:Route': node('Switch', {
          conditions: [{ items: [{ cpn_id: 'sys.query', operator: '=', value: 'x' }], to: ['Message:Nowhere'] }],
          end_cpn_ids: ['Message:Out'],
        }),
      },
      { component_id: 'Switch:Route', field: 'obj.params', message: /missing component "Message:Nowhere"/ },
    ],
    [
      'a Message with empty content',
      { 'Message:Out': say('') },
      { component_id: 'Message:Out', field: 'obj.params.content', message: /non-empty template/ },
    ],
    [
      'a Message whose templates are all blank',
      { 'Message:Out': say(['', '   ']) },
      { component_id: 'Message:Out', field: 'obj.params.content', message: /non-empty template/ },
    ],
    [
      'a UserFillUp field of type "kb"',
      {
        'UserFillUp:Ask': node('UserFillUp', {
          inputs: { doc: { name: 'Doc', type: 'kb', optional: false } },
        }),
      },
      { component_id: 'UserFillUp:Ask', field: 'obj.params.inputs.doc.type', message: /must be one of/ },
    ],
    [
      'a Loop with maximum_loop_count -1',
      { 'Loop:Again': node('Loop', { maximum_loop_count: -1 }), ...loopStart },
      { component_id: 'Loop:Again', field: 'obj.params.maximum_loop_count', message: /\S/ },
    ],
    [
      'a VariableAssigner with an unknown operator',
      {
        'VariableAssigner:Set': node('VariableAssigner', {
          variables: [{ variable: 'env.n', operator: 'multiply', parameter: 2 }],
        }),
      },
      { component_id: 'VariableAssigner:Set', field: 'obj.params.variables.0.operator', message: /must be one of/ },
    ],
    [
      'a VariableAssigner operator without its parameter',
      {
        'VariableAssigner:Set': node('VariableAssigner', { variables: [{ variable: 'env.n', operator: 'append' }] }),
      },
      { component_id: 'VariableAssigner:Set', field: 'obj.params.variables.0.parameter', message: /needs a parameter/ },
    ],
    [
      'an Iteration without an IterationItem child',
      { 'Iteration:Each': iteration(), 'Message:Inner': say('{item}', [], 'Iteration:Each') },
      { component_id: 'Iteration:Each', field: 'components', message: /IterationItem/ },
    ],
    [
      'an ExitLoop outside a Loop',
      { 'ExitLoop:Out': node('ExitLoop') },
      { component_id: 'ExitLoop:Out', field: 'parent_id', message: /inside a Loop/ },
    ],
    [
      'an ExitLoop inside an Iteration',
      { 'Iteration:Each': iteration(), ...iterationBody, 'ExitLoop:Out': node('ExitLoop', {}, [], 'Iteration:Each') },
      { component_id: 'ExitLoop:Out', field: 'parent_id', message: /inside a Loop/ },
    ],
    [
      'an IterationItem under a Loop',
      {
        'Loop:Again': node('Loop', { maximum_loop_count: 3 }),
        ...loopStart,
        'IterationItem:Stray': node('IterationItem', {}, [], 'Loop:Again'),
      },
      { component_id: 'IterationItem:Stray', field: 'parent_id', message: /inside an Iteration/ },
    ],
    [
      'an IterationItem outside any container',
      { 'IterationItem:Stray': node('IterationItem') },
      { component_id: 'IterationItem:Stray', field: 'parent_id', message: /inside its container/ },
    ],
    [
      'a parent_id that is not a container',
      { 'Message:Child': say('x', [], 'Message:Out') },
      { component_id: 'Message:Child', field: 'parent_id', message: /not a container/ },
    ],
    [
      'a Message template referencing a missing component',
      { 'Message:Out': say(['Answer: {Agent:Gone@content}']) },
      { component_id: 'Message:Out', field: 'obj.params.content.0', message: /missing component "Agent:Gone"/ },
    ],
    [
      'a Switch cpn_id referencing a missing component',
      {
        'Switch:Route': node('Switch', {
          conditions: [{ items: [{ cpn_id: 'Agent:Gone@content', operator: 'contains', value: 'x' }], to: ['Message:Out'] }],
          end_cpn_ids: ['Message:Out'],
        }),
      },
      { component_id: 'Switch:Route', field: 'obj.params.conditions.0.items.0.cpn_id', message: /missing component "Agent:Gone"/ },
    ],
    [
      'a Switch cpn_id that is not a reference',
      {
        'Switch:Route': node('Switch', {
          conditions: [{ items: [{ cpn_id: 'the query', operator: 'contains', value: 'x' }], to: ['Message:Out'] }],
          end_cpn_ids: ['Message:Out'],
        }),
      },
      { component_id: 'Switch:Route', field: 'obj.params.conditions.0.items.0.cpn_id', message: /not a variable reference/ },
    ],
    [
      'params nested 100 levels deep',
      { 'Message:Out': node('Message', { content: 'x', extra: nested(100) }) },
      { component_id: 'Message:Out', field: 'obj.params', message: new RegExp(`deeper than ${DSL_LIMITS.maxParamDepth}`) },
    ],
    [
      'params nested 100 levels deep in lists',
      { 'Message:Out': node('Message', { content: 'x', extra: nestedLists(100) }) },
      { component_id: 'Message:Out', field: 'obj.params', message: /deeper than/ },
    ],
    [
      'an exception_goto to a missing component',
      { 'Message:Out': node('Message', { content: 'x', exception_method: 'goto', exception_goto: ['Message:Nowhere'] }) },
      { component_id: 'Message:Out', field: 'obj.params.exception_goto', message: /missing component "Message:Nowhere"/ },
    ],
    [
      'exception_method "goto" without a target',
      { 'Message:Out': node('Message', { content: 'x', exception_method: 'goto' }) },
      { component_id: 'Message:Out', field: 'obj.params.exception_goto', message: /at least one target/ },
    ],
  ])('%s', (_label, components, expected) => {
    it('is refused with a problem naming the component and field', () => {
      expectProblem(problemsOf(dsl(components)), expected);
    });
  });

  it('refuses a workflow without Begin', () => {
    const problems = problemsOf({ components: { 'Message:Out': say() } });
    expectProblem(problems, { message: /no Begin/ });
  });

  it('refuses two Begins, naming both', () => {
    const problems = problemsOf(dsl({ begin2: begin() }));
    expectProblem(problems, { message: /only one Begin.*begin, begin2/ });
  });

  it('refuses a Begin inside a container', () => {
    const problems = problemsOf({
      components: { 'Iteration:Each': iteration(), ...iterationBody, begin: node('Begin', {}, [], 'Iteration:Each') },
    });
    expectProblem(problems, { component_id: 'begin', field: 'parent_id', message: /inside a container/ });
  });

  describe.each<[string, string]>([
    ['__proto__', '__proto__'],
    ['constructor', 'constructor'],
    ['a space and "!"', 'bad id!'],
    ['a dot', 'Message.Out'],
    ['an at sign', 'Message@Out'],
    ['too many characters', 'x'.repeat(129)],
  ])('a component id with %s', (_label, id) => {
    it('is refused naming the id', () => {
      // JSON.parse makes "__proto__" an own key, as a DSL read from text would have it.
      const definition: unknown = JSON.parse(JSON.stringify(dsl({})).replace('"Message:Out":', `${JSON.stringify(id)}:`));
      const components = (definition as { components: Record<string, unknown> }).components;
      expect(Object.keys(components)).toContain(id);
      expectProblem(problemsOf(definition), { component_id: id.slice(0, 128), message: /component ids/ });
    });
  });

  describe('size limits', () => {
    it(`refuses more than ${DSL_LIMITS.maxComponents} components`, () => {
      const components: Components = { begin: begin([]) };
      for (let i = 0; i < DSL_LIMITS.maxComponents; i++) components[`Message:M${i}`] = say();
      expect(Object.keys(components)).toHaveLength(DSL_LIMITS.maxComponents + 1);
      expect(problemsOf({ components })).toEqual([
        { field: 'components', message: expect.stringMatching(`at most ${DSL_LIMITS.maxComponents}`) },
      ]);
    });

    it(`accepts exactly ${DSL_LIMITS.maxComponents} components`, () => {
      const components: Components = { begin: begin([]) };
      for (let i = 1; i < DSL_LIMITS.maxComponents; i++) components[`Message:M${i}`] = say();
      expect(compile({ components }).nodes.size).toBe(DSL_LIMITS.maxComponents);
    });

    it('accepts params exactly at the depth limit and refuses one level more', () => {
      // The params object itself is the first level.
      const at = { content: 'x', extra: nested(DSL_LIMITS.maxParamDepth - 1) };
      const over = { content: 'x', extra: nested(DSL_LIMITS.maxParamDepth) };
      expect(compile(dsl({ 'Message:Out': node('Message', at) })).nodes.has('Message:Out')).toBe(true);
      expectProblem(problemsOf(dsl({ 'Message:Out': node('Message', over) })), {
        component_id: 'Message:Out',
        field: 'obj.params',
        message: /deeper than/,
      });
    });
  });

  it('reports several problems of one DSL together', () => {
    const problems = problemsOf(
      dsl({
        begin: begin(['Message:Out', 'Message:Ghost']),
        'Message:Out': say(['Hi {Agent:Gone@content}']),
        'Message:Empty': say(''),
        'Switch:Route': node('Switch', {
          conditions: [{ items: [{ cpn_id: 'sys.query', operator: 'approximately' }], to: ['Message:Out'] }],
          end_cpn_ids: ['Message:Out'],
        }),
        'Parser:R': node('Parser'),
      }),
    );
    expectProblem(problems, { field: 'components', message: /unsupported components: Parser/ });
    expectProblem(problems, { component_id: 'begin', field: 'downstream', message: /Message:Ghost/ });
    expectProblem(problems, { component_id: 'Message:Out', field: 'obj.params.content.0', message: /Agent:Gone/ });
    expectProblem(problems, { component_id: 'Message:Empty', field: 'obj.params.content', message: /non-empty/ });
    expectProblem(problems, {
      component_id: 'Switch:Route',
      field: 'obj.params.conditions.0.items.0.operator',
      message: /must be one of/,
    });
    expect(problems.length).toBeGreaterThanOrEqual(5);
  });

  it('puts every problem in the error message', () => {
    let message = '';
    try {
      compile(dsl({ begin: begin(['Message:Ghost']), 'Message:Out': say('') }));
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('begin.downstream');
    expect(message).toContain('Message:Out.obj.params.content');
  });

  describe('valid workflows', () => {
    it('compiles the form-intake fixture', () => {
      const workflow = compile(fixture('form-intake'));
      expect(workflow.entryId).toBe('begin');
      expect([...workflow.nodes.keys()]).toEqual(['begin', 'UserFillUp:PlumDesksWave', 'Message:BraveOwlsSing']);
      expect(workflow.node('UserFillUp:PlumDesksWave').displayName).toBe('Intake form');
      expect(workflow.reaches('begin', 'Message:BraveOwlsSing')).toBe(true);
    });

    it.each(['begin-required', 'form-intake', 'iteration', 'loop-exit', 'loop-with-form', 'switch-and-or'])(
      'compiles the %s fixture',
      (name) => {
        const workflow = compile(fixture(name));
        expect(workflow.node(workflow.entryId).componentName).toBe('Begin');
      },
    );

    it('compiles the minimal workflow used by these tests', () => {
      const workflow = compile(dsl({}));
      expect(workflow.node('begin').downstream).toEqual(['Message:Out']);
    });

    it('compiles a containers workflow with a valid Iteration and Loop', () => {
      const workflow = compile(
        dsl({
          begin: begin(['Iteration:Each']),
          'Iteration:Each': iteration(['Loop:Again']),
          ...iterationBody,
          'Loop:Again': node('Loop', { maximum_loop_count: 2 }, ['Message:Out']),
          'LoopItem:Start': node('LoopItem', {}, ['ExitLoop:Out'], 'Loop:Again'),
          'ExitLoop:Out': node('ExitLoop', {}, [], 'Loop:Again'),
        }),
      );
      expect(workflow.node('Iteration:Each').scopeEntryId).toBe('IterationItem:Start');
      expect(workflow.node('Loop:Again').scopeEntryId).toBe('LoopItem:Start');
      expect(workflow.isInside('ExitLoop:Out', 'Loop:Again')).toBe(true);
    });
  });
});
