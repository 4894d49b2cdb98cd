/**
 * Tool-call approvals: an Agent whose tools need approval pauses before each such call with the
 * tool, its arguments and what the model said; the next turn approves (the arguments may be
 * edited) or rejects it, and the Agent goes on from there. Its earlier model rounds and tool
 * calls are answered from the pause's records: the model server and the Tavily stand-in count
 * every request, and each is made once, whether the run is continued in the same Canvas or
 * serialized to JSON and restored in a fresh one at every pause. A sub-Agent's approval
 * surfaces to the run the same way.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Canvas, compileWorkflow, type CanvasEvent } from '../../lib/canvas';
import { createAgent } from '../../lib/components/agent';
import { approvalParam, needsApproval } from '../../lib/components/agent-approvals';
import { DslValidationError, InvalidInputsError } from '../../lib/canvas';
import { schemaProblems } from '../../lib/canvas/json-schema';
import { withComponents } from '../../lib/components';
import { createToolRegistry } from '../../lib/tools/registry';
import { tavilyTools } from '../../lib/tools/tavily';
import { messages, steppingClock, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { testServices } from '../helpers/services';
import { TAVILY_TEST_KEY, TavilyServer } from '../helpers/tavily-server';
import { OpenAiServer } from '../llm/openai-server';

const PAGES = [
  { url: 'https://history.example/bridge', title: 'Harbour bridge', content: 'The harbour bridge opened in 1932.' },
  { url: 'https://history.example/lighthouse', title: 'Old lighthouse', content: 'The old lighthouse was first lit in 1871.' },
];

let model: OpenAiServer;
let tavily: TavilyServer;

beforeAll(async () => {
  [model, tavily] = await Promise.all([OpenAiServer.start(), TavilyServer.start({ pages: PAGES })]);
  // decided by the conversation alone: two searches, one a round, then an answer naming what came back
  model.respond = (body) => {
    const isSub = String(body.messages[0]?.content).startsWith('You look things up');
    const results = body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
    if (!isSub && body.tools?.some((t) => t.function.name.startsWith('Researcher'))) {
      return results.length === 0 ? { kind: 'tools', calls: [{ name: 'Researcher_0', arguments: { user_prompt: 'the bridge' } }] } : { kind: 'text', text: `Report: ${results.join(' | ')}` };
    }
    if (results.length === 0) return { kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: { query: 'harbour bridge' } }], text: 'Searching the bridge first.' };
    if (results.length === 1 && !isSub) return { kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: { query: 'old lighthouse' } }], text: 'Now the lighthouse.' };
    return { kind: 'text', text: `Answer from ${results.length} results: ${results.map((r) => (/opened in \d+|lit in \d+/.exec(r)?.[0] ?? r.slice(0, 60))).join('; ')}` };
  };
});
afterAll(async () => {
  await Promise.all([model.close(), tavily.close()]);
});

const searchTool = { component_name: 'TavilySearch', name: 'TavilySearch', params: { max_results: 1 } };
const agentParams = (extra: Record<string, unknown>, sysPrompt = 'You research.') => ({ llm_id: 'writer@Local', sys_prompt: sysPrompt, prompts: [{ role: 'user', content: '{sys.query}' }], max_rounds: 5, ...extra });

const researcher = (approval: unknown = 'all') => graph({
  begin: ['Begin', { mode: 'task' }, ['Agent:Research']],
  'Agent:Research': ['Agent', agentParams({ tools: [searchTool], approval }), ['Message:Out']],
  'Message:Out': ['Message', { content: ['{Agent:Research@content}'] }],
});

const delegating = () => graph({
  begin: ['Begin', { mode: 'task' }, ['Agent:Main']],
  'Agent:Main': ['Agent', agentParams({ tools: [{ component_name: 'Agent', name: 'Researcher', params: { ...agentParams({ tools: [searchTool], approval: ['TavilySearch'] }, 'You look things up.'), user_prompt: '', description: 'Looks things up.' } }] }), ['Message:Out']],
  'Message:Out': ['Message', { content: ['{Agent:Main@content}'] }],
});

function setup() {
  const tools = createToolRegistry(tavilyTools({ baseUrl: `${tavily.url}/` }));
  const registry = withComponents(createAgent(tools));
  const services = { ...testServices({ openaiUrl: model.url, secrets: { TAVILY_API_KEY: TAVILY_TEST_KEY } }), tools };
  return { registry, services };
}

const mark = () => ({ model: model.calls, tavily: tavily.requests.length });
const since = (m: ReturnType<typeof mark>) => ({ model: model.calls - m.model, tavily: tavily.requests.length - m.tavily });
const pauseOf = (events: readonly CanvasEvent[]) => events.find((e) => e.event === 'user_inputs')?.data as { inputs: Record<string, { type: string; value: unknown; decisions?: unknown }>; tips: string } | undefined;
/** Events as two runs of the same conversation give them: tool call ids and times left out. */
const comparable = (events: readonly CanvasEvent[]) =>
  JSON.parse(JSON.stringify(events).replace(/call_\d+_\d+/g, 'id'), (key, value: unknown) => (key === 'created_at' || key === 'elapsed_time' ? 0 : value)) as unknown;

/** Runs the conversation: `answers` at each pause, continued in one Canvas or restored from JSON at every pause. */
async function conversation(dsl: unknown, answers: Record<string, unknown>[], restoreAtPauses: boolean) {
  const { registry, services } = setup();
  const workflow = compileWorkflow(dsl, registry);
  let canvas = Canvas.create(workflow, { seed: 3, clock: steppingClock(), services });
  const turns: CanvasEvent[][] = [await turn(canvas, { query: 'Tell me about the harbour.' })];
  for (const inputs of answers) {
    if (restoreAtPauses) canvas = Canvas.restore(workflow, JSON.parse(JSON.stringify(canvas.serialize())), { clock: steppingClock(Date.UTC(2026, 0, 1) + turns.length * 1000), services });
    turns.push(await turn(canvas, { inputs }));
  }
  return { turns, canvas };
}

describe('Agent tool-call approvals', () => {
  it('pause before the call with the tool, its arguments and what the model said, and make no call yet', async () => {
    const before = mark();
    const { turns } = await conversation(researcher(), [], false);
    const pause = pauseOf(turns[0]!);
    expect(pause?.tips).toBe('The agent wants to call tavily_search with {"query":"harbour bridge"}. Approve or reject this call.\n\nIt said: Searching the bridge first.');
    expect(Object.keys(pause!.inputs)).toEqual(['decision', 'arguments', 'reason']);
    expect(pause!.inputs.decision).toMatchObject({ type: 'options', decisions: [{ id: 'approve', label: 'Approve' }, { id: 'reject', label: 'Reject' }] });
    expect(pause!.inputs.arguments).toMatchObject({ type: 'object', value: { query: 'harbour bridge' } });
    expect(since(before)).toEqual({ model: 1, tavily: 0 });
  });

  it.each([false, true])('approve (arguments edited), then reject with a reason: each model round and search made once (restored from JSON at each pause: %s)', async (restore) => {
    const before = mark();
    const { turns, canvas } = await conversation(researcher(), [
      { decision: 'approve', arguments: { query: 'harbour bridge history' } },
      { decision: 'reject', reason: 'the lighthouse is off topic' },
    ], restore);
    // round 1, round 2 (after the approved search), round 3 (after the rejection): three model calls, one search
    expect(since(before)).toEqual({ model: 3, tavily: 1 });
    expect((tavily.requests.at(-1)?.body as { query?: string }).query).toBe('harbour bridge history');
    expect(pauseOf(turns[1]!)?.tips).toContain('{"query":"old lighthouse"}');
    const rejected = model.requests.at(-1)!.body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    expect(rejected[1]).toBe('The user rejected this tool call: the lighthouse is off topic Do not make it again; go on without it.');
    // the Agent's answer is the text of all its rounds, the ones answered from records included
    expect(messages(turns[2]!)).toEqual(['Searching the bridge first.Now the lighthouse.Answer from 2 results: opened in 1932; The user rejected this tool call: the lighthouse is off topi']);
    expect(canvas.serialize().status).toBe('completed');
    expect(canvas.serialize().nodes['Agent:Research']?.pause).toBeUndefined();
  });

  it('gives the same events whether the run is continued in one Canvas or restored from JSON at every pause', async () => {
    const answers = [{ decision: 'approve' }, { decision: 'approve' }];
    const continuous = await conversation(researcher(), answers, false);
    const restored = await conversation(researcher(), answers, true);
    expect(comparable(restored.turns[2]!)).toEqual(comparable(continuous.turns[2]!));
    expect(restored.canvas.serialize().nodes['Agent:Research']?.outputs).toEqual(continuous.canvas.serialize().nodes['Agent:Research']?.outputs);
  });

  it('ask for none of the tools not listed', async () => {
    const before = mark();
    const { turns } = await conversation(researcher(['some_other_tool']), [], false);
    expect(pauseOf(turns[0]!)).toBeUndefined();
    expect(since(before)).toEqual({ model: 3, tavily: 2 });
  });

  it('surface from a sub-Agent to the run, and the sub-Agent goes on where it paused', async () => {
    const before = mark();
    const { turns, canvas } = await conversation(delegating(), [{ decision: 'approve' }], true);
    expect(pauseOf(turns[0]!)?.tips).toContain('tavily_search with {"query":"harbour bridge"}');
    // main round 1, sub round 1 (paused) / then sub round 2 and main round 2: four model calls, one search
    expect(since(before)).toEqual({ model: 4, tavily: 1 });
    // a sub-Agent answers with the text of all its rounds
    expect(messages(turns[1]!)).toEqual(['Report: Searching the bridge first.Answer from 1 results: opened in 1932']);
    expect(canvas.serialize().status).toBe('completed');
  });

  it("refuse edited arguments that do not fit the tool's parameters, naming the field and what is wrong; the pause stays as it was", async () => {
    const { registry, services } = setup();
    const workflow = compileWorkflow(researcher(), registry);
    const canvas = Canvas.create(workflow, { seed: 3, clock: steppingClock(), services });
    const paused = await turn(canvas, { query: 'Tell me about the harbour.' });
    // the hint carries the schema an edit must fit
    expect(pauseOf(paused)!.inputs.arguments).toMatchObject({ schema: { type: 'object', required: ['query'] } });
    const saved = JSON.stringify(canvas.serialize());
    const before = mark();
    const refusals: [unknown, string][] = [
      [{ topic: 'news' }, 'does not fit its JSON Schema: "query" is required'],
      [{ query: 42 }, 'does not fit its JSON Schema: query: expected string, got number 42'],
      [{ query: 'bridge', topic: 'sports' }, 'does not fit its JSON Schema: topic: must be one of ["general","news"]'],
      [{ query: 'bridge', include_domains: ['a.example', 7] }, 'does not fit its JSON Schema: include_domains.1: expected string, got number 7'],
    ];
    for (const [edit, message] of refusals) {
      let caught: unknown;
      try {
        await turn(canvas, { inputs: { decision: 'approve', arguments: edit } });
      } catch (error) {
        caught = error;
      }
      expect(caught, JSON.stringify(edit)).toBeInstanceOf(InvalidInputsError);
      const problem = (caught as InvalidInputsError).fields[0]!;
      expect(problem).toMatchObject({ component_id: 'Agent:Research', field: 'arguments' });
      expect(problem.message.toLowerCase()).toContain(message.toLowerCase());
    }
    // nothing ran and nothing changed: the same pause, answered now with an edit that fits
    expect(since(before)).toEqual({ model: 0, tavily: 0 });
    expect(JSON.stringify(canvas.serialize())).toBe(saved);
    const events = await turn(canvas, { inputs: { decision: 'approve', arguments: { query: 'harbour bridge', topic: 'news', include_domains: ['history.example'] } } });
    expect(pauseOf(events)?.tips).toContain('{"query":"old lighthouse"}');
    expect(tavily.requests.at(-1)!.body).toMatchObject({ query: 'harbour bridge', topic: 'news', include_domains: ['history.example'] });
  });

  it('take the proposed arguments sent back unchanged, in any key order, without checking them again', async () => {
    const { registry, services } = setup();
    // the model proposes a call its own tool's schema refuses (a topic Tavily does not have)
    const odd = { query: 'harbour bridge', topic: 'gossip' };
    model.enqueue({ kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: odd }], text: '' });
    const canvas = Canvas.create(compileWorkflow(researcher(['tavily_search']), registry), { seed: 3, clock: steppingClock(), services });
    await turn(canvas, { query: 'Tell me about the harbour.' });
    // approving it as proposed (as a form sends its preset back) is no edit: the call is made as
    // the model wrote it, and the tool refuses it as it refuses any call of the model's
    const events = await turn(canvas, { inputs: { decision: 'approve', arguments: { topic: 'gossip', query: 'harbour bridge' } } });
    expect(events.at(-1)?.event).toBe('user_inputs');
    const told = model.requests.at(-1)!.body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
    expect(told[0]).toMatch(/^error: .*topic/);
  });

  it('leave no pause behind when the Agent fails after the answer', async () => {
    const { registry, services } = setup();
    const workflow = compileWorkflow(researcher(), registry);
    const canvas = Canvas.create(workflow, { seed: 3, clock: steppingClock(), services });
    await turn(canvas, { query: 'Tell me about the harbour.' });
    expect(canvas.serialize().nodes['Agent:Research']?.pause).toBeDefined();
    // the round after the approved search is refused for good by the provider
    model.enqueue({ kind: 'status', status: 400, message: 'bad request' });
    const events = await turn(canvas, { inputs: { decision: 'approve' } });
    expect(events.at(-1)?.event).toBe('workflow_failed');
    expect(canvas.serialize().nodes['Agent:Research']?.pause).toBeUndefined();
    expect(canvas.serialize().nodes['Agent:Research']?.form).toBeUndefined();
  });

  it.each([false, true])('of calls made in parallel, run the one that needs none at once, and never again when the other is answered (restored: %s)', async (restore) => {
    // one round asks for two searches: the lighthouse one waits for approval, the bridge one does not
    model.enqueue({ kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: { query: 'old lighthouse' } }, { name: 'tavily_search_0', arguments: { query: 'harbour bridge' } }], text: 'Both at once.' });
    const before = mark();
    const { turns, canvas } = await conversation(researcher({ tavily_search: { query: { matches: 'lighthouse' } } }), [{ decision: 'approve' }], restore);
    expect(pauseOf(turns[0]!)?.tips).toContain('{"query":"old lighthouse"}');
    // the first round, then the answer; the bridge search in turn 1, the lighthouse one once approved
    expect(since(before)).toEqual({ model: 2, tavily: 2 });
    expect(tavily.requests.slice(-2).map((r) => (r.body as { query: string }).query)).toEqual(['harbour bridge', 'old lighthouse']);
    expect(messages(turns[1]!)).toEqual(['Both at once.Answer from 2 results: lit in 1871; opened in 1932']);
    expect(canvas.serialize().status).toBe('completed');
  });

  it('with a condition on the arguments, ask only for the calls that meet it', async () => {
    const before = mark();
    const { turns, canvas } = await conversation(researcher({ tavily_search: { query: { matches: 'lighthouse' } } }), [{ decision: 'approve' }], true);
    // the bridge search ran without asking; the lighthouse search waited
    expect(pauseOf(turns[0]!)?.tips).toContain('{"query":"old lighthouse"}');
    expect(since(before)).toEqual({ model: 3, tavily: 2 });
    expect(canvas.serialize().status).toBe('completed');
  });
});

describe('tool parameter schemas', () => {
  it('check built-in and MCP-style schemas alike, naming where each problem is', () => {
    const mcpStyle = {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: { order: { type: 'object', properties: { id: { type: 'string', pattern: '^A-' }, lines: { type: 'array', minItems: 1, items: { type: 'integer' } } }, required: ['id'], additionalProperties: false } },
      required: ['order'],
    };
    expect(schemaProblems(mcpStyle, { order: { id: 'A-1', lines: [1, 2] } })).toEqual([]);
    expect(schemaProblems(mcpStyle, {})).toEqual(['"order" is required']);
    expect(schemaProblems(mcpStyle, { order: { lines: [] } })).toEqual(['"order.id" is required', 'order.lines: array has too few items (0 < 1)']);
    expect(schemaProblems(mcpStyle, { order: { id: 'B-1', lines: ['x'], note: 1 } })).toEqual([
      'order.id: does not match the pattern ^A-',
      'order.lines.0: expected integer, got text "x"',
      '"order.note" is not one of the parameters',
    ]);
    // a schema that cannot be used refuses every value, saying why
    expect(schemaProblems({ $ref: 'https://schemas.example/order.json' }, {})[0]).toMatch(/^the schema cannot be checked \(Unresolved \$ref/);
  });
});

describe('approval conditions', () => {
  const call = (args: Record<string, unknown>, name = 'refund_0') => ({ name, toolName: 'refund', entryName: 'Refund', args });
  const rule = (raw: unknown) => approvalParam.parse(raw);

  it('name the tool by its model name, own name or entry name, and test its arguments', () => {
    expect(needsApproval(rule(null), call({}))).toBe(false);
    expect(needsApproval(rule('all'), call({}))).toBe(true);
    for (const name of ['refund_0', 'refund', 'Refund']) expect(needsApproval(rule([name]), call({}))).toBe(true);
    expect(needsApproval(rule(['other']), call({}))).toBe(false);
    expect(needsApproval(rule({ Refund: true }), call({}))).toBe(true);
    const over100 = rule({ refund: { amount: { gt: 100 } } });
    expect([50, 100, 100.5, '250', 'many', undefined].map((amount) => needsApproval(over100, call({ amount })))).toEqual([false, false, true, true, false, false]);
    const both = rule({ refund: { amount: { gte: 10, lt: 20 }, currency: { in: ['EUR', 'GBP'] } } });
    expect(needsApproval(both, call({ amount: 10, currency: 'EUR' }))).toBe(true);
    expect(needsApproval(both, call({ amount: 10, currency: 'USD' }))).toBe(false);
    expect(needsApproval(rule({ refund: { to: { matches: '@example\\.com$' } } }), call({ to: 'ada@example.com' }))).toBe(true);
    expect(needsApproval(rule({ refund: { to: { equals: 'x' } } }), call({ to: 'y' }))).toBe(false);
  });

  it('refuse, at compile time, a test that is not one, an empty condition and a bad regular expression, naming the field', () => {
    for (const approval of [{ refund: { amount: { above: 100 } } }, { refund: { amount: {} } }, { refund: { to: { matches: '(' } } }, 'some']) {
      let caught: unknown;
      try {
        compileWorkflow(researcher(approval), setup().registry);
      } catch (error) {
        caught = error;
      }
      expect(caught, JSON.stringify(approval)).toBeInstanceOf(DslValidationError);
      expect(JSON.stringify((caught as DslValidationError).problems)).toContain('obj.params');
    }
  });
});
