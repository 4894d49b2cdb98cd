import { describe, expect, it } from 'vitest';
import type { CanvasEvent } from '../../lib/canvas';
import { ComponentError } from '../../lib/canvas/errors';
import { withComponents } from '../../lib/components';
import { hasJinja, JinjaCapError, jinjaLoaded, renderJinja } from '../../lib/components/jinja';
import { canvasFor, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { streamer } from '../helpers/streamer';

const registry = withComponents(streamer);

/** begin (task mode) -> Message showing `template`; `variables` become `{env.name}`. */
function show(template: string, variables: Record<string, unknown> = {}, messageParams: Record<string, unknown> = {}) {
  return graph(
    {
      begin: ['Begin', { mode: 'task' }, ['Message:Show']],
      'Message:Show': ['Message', { content: [template], ...messageParams }],
    },
    {
      globals: {},
      variables: Object.fromEntries(Object.entries(variables).map(([name, value]) => [name, { name, type: 'object', value }])),
    },
  );
}

async function run(dsl: unknown, query?: string): Promise<CanvasEvent[]> {
  return turn(canvasFor(dsl, {}, registry), query === undefined ? {} : { query });
}

async function shown(dsl: unknown, query?: string): Promise<string[]> {
  const events = await run(dsl, query);
  expect(last(events).event).toBe('workflow_finished');
  return messages(events);
}

function failure(events: readonly CanvasEvent[]) {
  const end = last(events);
  if (end.event !== 'workflow_failed') throw new Error(`expected workflow_failed, got ${end.event}`);
  return end.data.error;
}

/** The error a render throws, checked to be a component error. */
async function renderError(source: string, variables: Record<string, unknown> = {}, caps = {}): Promise<ComponentError> {
  const error = await renderJinja(source, variables, caps).then(
    (text) => {
      throw new Error(`rendered ${text.length} characters instead of failing`);
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ComponentError);
  expect((error as ComponentError).code).toBe('component_error');
  return error as ComponentError;
}

// First in the file: nothing above has rendered Jinja in this module registry.
describe('loading the interpreter', () => {
  it('is not loaded by a workflow without Jinja, and is by the first Jinja template', async () => {
    expect(await shown(show('Hi {sys.query}, {{sys.query}} again'), 'Ann')).toEqual(['Hi Ann, Ann again']);
    expect(jinjaLoaded()).toBe(false);
    expect(await shown(show('{% if true %}yes{% endif %}'))).toEqual(['yes']);
    expect(jinjaLoaded()).toBe(true);
  });
});

describe('hasJinja', () => {
  it.each([
    ['{% if x %}a{% endif %}', true],
    ['{{ name }}', true],
    ['{{ {sys.query} | upper }}', true],
    ['{% for x in {Agent:A@list} %}{% endfor %}', true],
    ['plain {sys.query} and {{sys.query}} and {{ Agent:A@content }}', false],
    ['a JSON sample {"a": {"b": 1}} and a lone }}', false],
    ['an unclosed {% tag', false],
    ['', false],
  ])('%j -> %s', (template, expected) => {
    expect(hasJinja(template)).toBe(expected);
  });
});

describe('renderJinja', () => {
  it.each([
    ['loops with loop variables', '{% for x in xs %}{{ loop.index }}:{{ x }}{% if not loop.last %}, {% endif %}{% endfor %}', { xs: ['a', 'b', 'c'] }, '1:a, 2:b, 3:c'],
    ['a loop with a filter and an else', '{% for x in xs if x > 5 %}{{ x }}{% else %}none{% endfor %}', { xs: [1, 2] }, 'none'],
    ['loops over a mapping and its items', '{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}', { d: { a: 1, b: 2 } }, 'a=1;b=2;ab'],
    ['loops over the characters of a string', '{% for c in s %}[{{ c }}]{% endfor %}', { s: 'hé' }, '[h][é]'],
    ['conditionals', '{% if n > 10 %}big{% elif n > 5 %}medium{% else %}small{% endif %}', { n: 7 }, 'medium'],
    ['filters', '{{ s | trim | upper }} {{ xs | join(", ") }} {{ xs | length }} {{ s | replace("a", "o") }} {{ d | tojson }}', { s: ' banana ', xs: [1, 2], d: { k: [true, null] } }, 'BANANA 1, 2 2  bonono  {"k": [true, null]}'],
    ['sets, namespaces and macros', '{% set ns = namespace(total=0) %}{% for x in xs %}{% set ns.total = ns.total + x %}{% endfor %}{% macro twice(v) %}{{ v * 2 }}{% endmacro %}{{ twice(ns.total) }}', { xs: [1, 2, 3] }, '12'],
    ['attributes and indexes of values', '{{ user.name }} {{ user.tags[1] }} {{ user["age"] }}', { user: { name: 'Ann', tags: ['x', 'y'], age: 40 } }, 'Ann y 40'],
    ['whitespace control and comments', 'a  {%- if true -%}  b  {%- endif -%}  c{# note #}', {}, 'abc'],
    ['no trimming of block lines, as jinja2 by default', '{% if true %}\nx\n{% endif %}\n', {}, '\nx\n'],
    ['printed lists and mappings', '{{ xs }} {{ d }}', { xs: [1, 'a'], d: { k: 1.5 } }, '[1, "a"] {"k": 1.5}'],
    ['range', '{{ range(3) | join(",") }} {{ range(1, 10, 4) | join(",") }} {{ range(3, 0, -1) | join(",") }}', {}, '0,1,2 1,5,9 3,2,1'],
  ])('renders %s', async (_label, source, variables, expected) => {
    expect(await renderJinja(source, variables)).toBe(expected);
  });

  it.each([
    ['printed', '[{{ missing }}]', '[]'],
    ['as an attribute of an undefined name', '[{{ missing.attr }}]', '[]'],
    ['as a test', '{% if missing is defined %}yes{% else %}no{% endif %}', 'no'],
    ['as a condition', '{% if missing %}yes{% else %}no{% endif %}', 'no'],
    ['as a loop', '[{% for x in missing %}{{ x }}{% endfor %}]', '[]'],
    ['concatenated', '{{ missing ~ "b" ~ missing }}', 'b'],
    ['through a filter', '[{{ missing | upper }}][{{ missing | default("d") }}]', '[][d]'],
  ])('renders an undefined name %s as jinja2 does', async (_label, source, expected) => {
    expect(await renderJinja(source, {})).toBe(expected);
  });

  it('offers no clock: strftime_now is not defined', async () => {
    const error = await renderError('{{ strftime_now("%Y") }}');
    expect(error.message).toMatch(/^Jinja template failed: /);
  });

  it.each([
    ['an unclosed expression', '{{ x ', /^invalid Jinja template: Unexpected end of input$/],
    ['an unexpected token', '{{ foo( }}', /^invalid Jinja template: Unexpected token: CloseExpression$/],
    ['an unknown statement', '{% bogus %}', /^invalid Jinja template: Unknown statement type: bogus$/],
    ['a block never closed', '{% if x %}yes', /^invalid Jinja template: a block is not closed before the end of the template: /],
  ])('reports %s as a component error with the library message', async (_label, source, message) => {
    const error = await renderError(source);
    expect(error).not.toBeInstanceOf(JinjaCapError);
    expect(error.message).toMatch(message);
  });

  it('reports failures while rendering as component errors', async () => {
    expect((await renderError('{{ raise_exception("no way") }}')).message).toBe('Jinja template failed: no way');
    expect((await renderError('{{ 1 + none }}')).message).toMatch(/^Jinja template failed: .*null/);
    expect((await renderError('{{ range(1.5) }}')).message).toMatch(/range\(\) takes one to three integers/);
  });
});

describe('caps', () => {
  async function capError(source: string, variables: Record<string, unknown> = {}, caps = {}): Promise<JinjaCapError> {
    const error = await renderError(source, variables, caps);
    expect(error).toBeInstanceOf(JinjaCapError);
    return error as JinjaCapError;
  }

  it('stops range(10**9) before building it, naming the range() length cap', async () => {
    const error = await capError('{% for i in range(10**9) %}{{ i }}{% endfor %}');
    expect(error).toMatchObject({ cap: 'maxRangeLength', limit: 100_000 });
    expect(error.message).toMatch(/^Jinja range\(\) length cap exceeded \(limit 100000\): range\(\) would make 1000000000 numbers/);
  });

  it('stops two nested loops of 4·10^4 each by the loop iterations cap, counted across both', async () => {
    const error = await capError('{% for i in range(40000) %}{% for j in range(40000) %}{% endfor %}{% endfor %}');
    expect(error).toMatchObject({ cap: 'maxLoopIterations', limit: 100_000 });
    expect(error.message).toMatch(/^Jinja loop iterations cap exceeded \(limit 100000\)/);
  });

  it('stops a string doubled in a loop by the string length cap', async () => {
    const error = await capError("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}");
    expect(error).toMatchObject({ cap: 'maxStringLength', limit: 1_000_000 });
    expect(error.message).toMatch(/^Jinja string length cap exceeded \(limit 1000000\)/);
    // the loop's own scope carries a plain `set` from one round to the next, so this doubles too
    const plain = await capError("{% set s = 'x' %}{% for i in range(100) %}{% set s = s ~ s %}{% endfor %}");
    expect(plain.cap).toBe('maxStringLength');
  });

  it('lets a loop run right up to the cap', async () => {
    expect(await renderJinja('{% for i in range(5) %}{% for j in range(2) %}.{% endfor %}{% endfor %}', {}, { maxLoopIterations: 15 })).toBe('.'.repeat(10));
    expect((await capError('{% for i in range(5) %}{% for j in range(2) %}.{% endfor %}{% endfor %}', {}, { maxLoopIterations: 14 })).cap).toBe('maxLoopIterations');
  });

  it('counts loops over variables and filtered loops by their length', async () => {
    const error = await capError('{% for x in xs if x %}{% endfor %}', { xs: Array.from({ length: 20 }, (_, i) => i) }, { maxLoopIterations: 10 });
    expect(error.limit).toBe(10);
  });

  it('counts macro calls, so recursion that fans out stops', async () => {
    const error = await capError('{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}', {}, { maxLoopIterations: 1000 });
    expect(error.cap).toBe('maxLoopIterations');
    expect(error.message).toMatch(/macro call/);
  });

  // Built first and checked after, most of these would pass V8's longest string (~5·10^8
  // characters) or take gigabytes: only a check before building gives the cap error. `~` and
  // `+` join two values already checked, so they can at most double one.
  const S = 'y'.repeat(400_000);
  const BLOCKS = '{{ s }}'.repeat(2000);
  it.each([
    ['concatenation with ~', '{{ s ~ s ~ s }}'],
    ['concatenation with +', '{{ s + s + s }}'],
    ['join with a long separator', '{{ range(3000) | join(s) }}'],
    ['join of a long list', '{{ xs | join }}'],
    ['replace of "" in the filter', "{{ s | replace('', s) }}"],
    ['replace of "" in the method', "{{ s.replace('', s) }}"],
    ['replace through a computed method name', "{{ s['replace']('', s) }}"],
    ['a huge indent width', "{{ 'a' | indent(10**9) }}"],
    ['indented lines', '{{ lines | indent(300000) }}'],
    ['a huge tojson indent', '{{ [1] | tojson(indent=10**9) }}'],
    ['tojson of a long list', '{{ xs | tojson }}'],
    ['printing a long list', '{{ xs }}'],
    ['a list concatenated as text', '{{ xs ~ "" }}'],
    ['a block printing a long value many times', BLOCKS],
    ['a loop printing a long value each round', '{% for i in range(2000) %}{{ s }}{% endfor %}'],
    ['a filter block', "{% filter replace('', s) %}{{ s }}{% endfilter %}"],
    ['a set block', `{% set b %}${BLOCKS}{% endset %}`],
  ])('stops %s by the string length cap', async (_label, source) => {
    const variables = { s: S, xs: Array.from({ length: 4096 }, () => S), lines: 'a\n'.repeat(2000) };
    const error = await capError(source, variables);
    expect(error).toMatchObject({ cap: 'maxStringLength', limit: 1_000_000 });
  });

  it('measures what a string will be, not a bound on it', async () => {
    // one replacement of "" by 400 000 characters: 800 000, under the cap; a second passes it
    expect(await renderJinja("{{ s.replace('', s, 1) | length }}", { s: S })).toBe('800000');
    expect((await renderError("{{ s.replace('', s, 2) }}", { s: S })).message).toMatch(/string length cap/);
    expect(await renderJinja("{{ 'abc'.replace('', '-', 2) }} {{ 'abc' | replace('b', 'BB') }}", {})).toBe('-a-bc aBBc');
    expect((await renderJinja('{{ s ~ s }}', { s: 'y'.repeat(500_000) })).length).toBe(1_000_000);
  });

  it('has no string repetition to cap: the library refuses `*` on strings and lists', async () => {
    expect((await renderError("{{ 'x' * 3 }}")).message).toMatch(/^Jinja template failed: Unknown operator "\*"/);
    expect((await renderError('{{ [1] * 3 }}')).message).toMatch(/^Jinja template failed: Unknown operator "\*"/);
  });

  it('stops a list doubled in a loop by the list length cap', async () => {
    const error = await capError('{% set ns = namespace(a=[1]) %}{% for i in range(40) %}{% set ns.a = ns.a + ns.a %}{% endfor %}');
    expect(error).toMatchObject({ cap: 'maxListLength', limit: 100_000 });
    expect(error.message).toMatch(/^Jinja list length cap exceeded \(limit 100000\)/);
  });

  it('takes its caps from the caller', async () => {
    expect((await capError('{{ range(11) | length }}', {}, { maxRangeLength: 10 })).limit).toBe(10);
    expect(await renderJinja('{{ range(10) | length }}', {}, { maxRangeLength: 10 })).toBe('10');
    expect((await capError("{{ 'abc' ~ 'def' }}", {}, { maxStringLength: 5 })).cap).toBe('maxStringLength');
  });

  it('relies on the library internals it hooks into', async () => {
    const { Interpreter } = await import('@huggingface/jinja');
    const prototype = Interpreter.prototype as unknown as Record<string, unknown>;
    expect(typeof prototype.evaluateBlock).toBe('function');
    expect(typeof prototype.evaluateArguments).toBe('function');
  });
});

describe('Message with Jinja', () => {
  it('mixes references with Jinja: values inside tags, text outside', async () => {
    const template = '{% if {sys.query} == "hi" %}Hello {sys.query}!{% else %}Bye {sys.query}.{% endif %}';
    expect(await shown(show(template), 'hi')).toEqual(['Hello hi!']);
    expect(await shown(show(template), 'ho')).toEqual(['Bye ho.']);
  });

  it('loops over a list and reads attributes of an object referenced inside tags', async () => {
    const template = '{{ {env.profile}.name }} likes:{% for t in {env.tags} %} {{ loop.index }}.{{ t | upper }}{% endfor %} (all: {env.tags})';
    const dsl = show(template, { profile: { name: 'Ann' }, tags: ['tea', 'jazz'] });
    expect(await shown(dsl)).toEqual(['Ann likes: 1.TEA 2.JAZZ (all: ["tea","jazz"])']);
  });

  it('never renders a value as a template', async () => {
    expect(await shown(show('{% if true %}You said: {sys.query}{% endif %}'), '{{ 7 * 7 }} {% if %}')).toEqual(['You said: {{ 7 * 7 }} {% if %}']);
  });

  it('keeps braces inside string literals as text', async () => {
    expect(await shown(show("{{ '{sys.query}' ~ '!' }}"), 'q')).toEqual(['{sys.query}!']);
  });

  it('waits for a streamed reference and sends the message whole', async () => {
    const dsl = graph({
      begin: ['Begin', { mode: 'task' }, ['Streamer:S']],
      'Streamer:S': ['Streamer', { text: 'streamed answer', chunk: 4 }, ['Message:Show']],
      'Message:Show': ['Message', { content: ['{% if {Streamer:S@content} %}[{Streamer:S@content}]{% endif %} {{ {Streamer:S@content} | upper }}'] }],
    });
    const events = await run(dsl);
    expect(last(events).event).toBe('workflow_finished');
    expect(events.filter((e) => e.event === 'message')).toHaveLength(1);
    expect(messages(events)).toEqual(['[streamed answer] STREAMED ANSWER']);
    const plain = graph({
      begin: ['Begin', { mode: 'task' }, ['Streamer:S']],
      'Streamer:S': ['Streamer', { text: 'streamed answer', chunk: 4 }, ['Message:Show']],
      'Message:Show': ['Message', { content: ['{Streamer:S@content}'] }],
    });
    // without Jinja the same reference still streams delta by delta
    expect((await run(plain)).filter((e) => e.event === 'message').length).toBeGreaterThan(1);
  });

  it('takes {item} and {index} from an Iteration when written tight, and leaves {{ item }} to Jinja', async () => {
    const dsl = graph(
      {
        begin: ['Begin', { mode: 'task' }, ['Iteration:I']],
        'Iteration:I': ['Iteration', { items_ref: 'env.groups', outputs: {} }],
        'IterationItem:S': ['IterationItem', {}, ['Message:Each'], 'Iteration:I'],
        'Message:Each': ['Message', { content: ['#{index}:{% for item in {item} %} {{ item }}{% endfor %}'] }, [], 'Iteration:I'],
      },
      { variables: { groups: { name: 'groups', type: 'object', value: [['a', 'b'], ['c']] } } },
    );
    expect(await shown(dsl)).toEqual(['#0: a b', '#1: c']);
    // outside an Iteration, {item} is plain text and {{item}} an undefined name
    expect(await shown(show('{% if true %}{item}|{{item}}|{index}{% endif %}'))).toEqual(['{item}||{index}']);
  });

  it('fails the Message on a syntax error, naming the component', async () => {
    const error = failure(await run(show('{% if {sys.query} %}unclosed'), 'x'));
    expect(error).toMatchObject({ code: 'component_error', component_id: 'Message:Show' });
    expect(error.message).toMatch(/^invalid Jinja template: /);
  });

  it('fails the Message on a cap, naming the cap, or goes on under exception_method "comment"', async () => {
    const template = '{% for i in range(10**9) %}{% endfor %}';
    const error = failure(await run(show(template)));
    expect(error).toMatchObject({ code: 'component_error', component_id: 'Message:Show' });
    expect(error.message).toMatch(/range\(\) length cap exceeded \(limit 100000\)/);
    const handled = graph({
      begin: ['Begin', { mode: 'task' }, ['Message:Show']],
      'Message:Show': ['Message', { content: [template], exception_method: 'comment', exception_default_value: 'too big' }, ['Message:After']],
      'Message:After': ['Message', { content: ['after: {Message:Show@content}'] }],
    });
    expect(await shown(handled)).toEqual(['after: too big']);
  });
});
