import { describe, expect, it } from 'vitest';
import { type CanvasEvent, compileWorkflow, DslValidationError } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { canvasFor, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';

const ST = 'StringTransform:T';

/** begin (task mode) -> StringTransform -> Message showing its result; `variables` become `{env.name}`. */
function dsl(params: Record<string, unknown>, variables: Record<string, unknown> = {}) {
  return graph(
    {
      begin: ['Begin', { mode: 'task' }, [ST]],
      [ST]: ['StringTransform', params, ['Message:Show']],
      'Message:Show': ['Message', { content: [`{${ST}@result}`] }],
    },
    { variables: Object.fromEntries(Object.entries(variables).map(([name, value]) => [name, { name, type: 'object', value }])) },
  );
}

async function run(definition: unknown, query?: string): Promise<CanvasEvent[]> {
  return turn(canvasFor(definition), query === undefined ? {} : { query });
}

/** The StringTransform's `result`, after checking that the run finished. */
async function result(definition: unknown, query?: string): Promise<unknown> {
  const events = await run(definition, query);
  expect(last(events).event).toBe('workflow_finished');
  const finished = events.find((e) => e.event === 'node_finished' && e.data.component_id === ST);
  if (finished?.event !== 'node_finished') throw new Error('the StringTransform did not finish');
  return finished.data.outputs.result;
}

function failure(events: readonly CanvasEvent[]) {
  const end = last(events);
  if (end.event !== 'workflow_failed') throw new Error(`expected workflow_failed, got ${end.event}`);
  return end.data.error;
}

function problems(definition: unknown) {
  try {
    compileWorkflow(definition, builtinComponents);
  } catch (error) {
    expect(error).toBeInstanceOf(DslValidationError);
    return (error as DslValidationError).problems;
  }
  throw new Error('the DSL was accepted');
}

describe('StringTransform split', () => {
  it.each([
    ['the default delimiter', { split_ref: 'sys.query' }, 'a,b,,c', ['a', 'b', '', 'c']],
    ['any of several delimiters', { split_ref: '{sys.query}', delimiters: [',', ';'] }, 'a,b;c', ['a', 'b', 'c']],
    ['delimiters that mean something in a regex', { split_ref: 'sys.query', delimiters: ['.', '|', '*'] }, 'a.b|c*d', ['a', 'b', 'c', 'd']],
    ['a longer delimiter before a shorter one', { split_ref: 'sys.query', delimiters: ['--', '-'] }, 'a--b-c', ['a', 'b', 'c']],
    ['line breaks', { split_ref: 'sys.query', delimiters: ['\n'] }, 'one\ntwo', ['one', 'two']],
    ['text without a delimiter', { split_ref: 'sys.query' }, 'whole', ['whole']],
  ])('cuts at %s', async (_label, params, query, expected) => {
    expect(await result(dsl({ method: 'split', ...params }), query)).toEqual(expected);
  });

  it('splits an empty value as "", as RAGFlow does for any value empty in Python', async () => {
    expect(await result(dsl({ method: 'split', split_ref: 'env.none' }, { none: [] }))).toEqual(['']);
    expect(await result(dsl({ split_ref: 'sys.query' }), '')).toEqual(['']);
  });

  it('shows its list to a Message as JSON', async () => {
    expect(messages(await run(dsl({ split_ref: 'sys.query' }), 'x,y'))).toEqual(['["x","y"]']);
  });

  it('fails, naming the variable, when the value is not a string', async () => {
    const error = failure(await run(dsl({ method: 'split', split_ref: 'env.tags' }, { tags: ['a', 'b'] })));
    expect(error).toMatchObject({ code: 'component_error', component_id: ST });
    expect(error.message).toBe('split_ref: env.tags is not a string (got a list)');
  });
});

describe('StringTransform merge', () => {
  it('fills in references, joining lists with the first delimiter', async () => {
    const params = { method: 'merge', script: 'Tags: {env.tags} for {sys.query} ({env.profile})', delimiters: [' / ', ','] };
    expect(await result(dsl(params, { tags: ['a', 'b'], profile: { n: 1 } }), 'Ann')).toBe('Tags: a / b for Ann ({"n":1})');
  });

  it('renders Jinja with values inside tags and joined text outside', async () => {
    const script = '{% for t in {env.tags} %}{{ t | upper }}{% if not loop.last %}+{% endif %}{% endfor %} = {env.tags}';
    expect(await result(dsl({ method: 'merge', script, delimiters: ['&'] }, { tags: ['a', 'b'] }))).toBe('A+B = a&b');
  });

  it('keeps an unresolved {item} as written outside an Iteration', async () => {
    expect(await result(dsl({ method: 'merge', script: 'x {item} y' }))).toBe('x {item} y');
  });

  it('is stopped by the Jinja caps, naming the cap', async () => {
    const error = failure(await run(dsl({ method: 'merge', script: '{% for i in range(10**9) %}{% endfor %}' })));
    expect(error).toMatchObject({ code: 'component_error', component_id: ST });
    expect(error.message).toMatch(/^Jinja range\(\) length cap exceeded \(limit 100000\)/);
    const doubled = "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}";
    expect(failure(await run(dsl({ method: 'merge', script: doubled }))).message).toMatch(/^Jinja string length cap exceeded \(limit 1000000\)/);
  });

  it('fails on a Jinja syntax error', async () => {
    const error = failure(await run(dsl({ method: 'merge', script: '{% if x %}open' })));
    expect(error).toMatchObject({ code: 'component_error', component_id: ST });
    expect(error.message).toMatch(/^invalid Jinja template: /);
  });
});

describe('StringTransform params', () => {
  it('is a built-in component', () => {
    expect(builtinComponents.has('StringTransform')).toBe(true);
  });

  it.each([
    ['an unknown method', { method: 'reverse', split_ref: 'sys.query' }, 'obj.params.method', /split, merge/],
    ['no delimiters', { split_ref: 'sys.query', delimiters: [] }, 'obj.params.delimiters', /at least one delimiter/],
    ['an empty delimiter', { split_ref: 'sys.query', delimiters: [''] }, 'obj.params.delimiters.0', /cannot be empty/],
    ['split without split_ref', { method: 'split' }, 'obj.params.split_ref', /not a variable reference/],
    ['split_ref to a missing component', { split_ref: 'Nope:X@text' }, 'obj.params.split_ref', /missing component "Nope:X"/],
  ])('refuses %s at load time', (_label, params, field, message) => {
    expect(problems(dsl(params))).toContainEqual(expect.objectContaining({ component_id: ST, field, message: expect.stringMatching(message) }));
  });

  it('needs no split_ref to merge', () => {
    expect(() => compileWorkflow(dsl({ method: 'merge', script: 'hi' }), builtinComponents)).not.toThrow();
  });
});
