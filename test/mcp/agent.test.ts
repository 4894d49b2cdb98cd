/**
 * An Agent whose DSL names MCP servers (`mcp: [{mcp_id, tools}]`, as RAGFlow writes it), run
 * against a local OpenAI-compatible model server and an MCP server built with the SDK, over
 * both transports: the tools offered and called, one session per server per invocation, the
 * headers' secrets sent and never shown, unknown servers, and a stalled call timing out on the
 * registry's timer the test fires.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CanvasEvent, compileWorkflow, DslValidationError, TransientError } from '../../lib/canvas';
import { builtinComponents, withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { createMcpConnector, createRunMcp } from '../../lib/mcp/client';
import type { McpServerConnection, McpServerType } from '../../lib/mcp/types';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { createToolRegistry, type ToolTimer } from '../../lib/tools';
import { canvasFor, last, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { McpTestServer } from '../helpers/mcp-server';
import { testServices } from '../helpers/services';
import { OpenAiServer } from '../llm/openai-server';
import { manualTimer, skippingTimer } from '../tools/support';

const TOKEN = 'mcp-agent-token-Zx81-never-shown';
const TYPES: McpServerType[] = ['streamable-http', 'sse'];

let mcp: McpTestServer;
let model: OpenAiServer;
beforeAll(async () => {
  [mcp, model] = await Promise.all([McpTestServer.start(), OpenAiServer.start()]);
});
afterAll(async () => {
  await Promise.all([mcp.close(), model.close()]);
});
beforeEach(() => {
  mcp.requests.length = 0;
  mcp.calls.length = 0;
  mcp.echoHeader = undefined;
  model.respond = () => ({ kind: 'text', text: 'ok' });
});

function agentDsl(params: Record<string, unknown>) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Agent:Cities']],
    'Agent:Cities': ['Agent', {
      llm_id: 'writer@Local',
      sys_prompt: 'You answer questions about cities.',
      prompts: [{ role: 'user', content: '{sys.query}' }],
      max_rounds: 2,
      ...params,
    }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Cities@content}'] }],
  });
}

/** A run whose tenant's registry holds `servers`, the registry's calls on `timer`. */
function run(params: Record<string, unknown>, servers: McpServerConnection[], timer: ToolTimer = skippingTimer().timer) {
  const tools = createToolRegistry([], { timer });
  const guard = new SsrfGuard({ allow: ['127.0.0.1'] });
  const secret = (name: string) => (name === 'MCP_TOKEN' ? TOKEN : undefined);
  const registry = createRunMcp({ lookup: async (id) => servers.find((s) => s.id === id), connector: createMcpConnector({ guard }), secret });
  const services = { ...testServices({ openaiUrl: model.url, secrets: { MCP_TOKEN: TOKEN } }), tools, mcp: registry };
  return canvasFor(agentDsl(params), { services }, withComponents(createAgent(tools)));
}

const finished = (events: CanvasEvent[]) => events.find((e) => e.event === 'node_finished' && e.data.component_id === 'Agent:Cities');

describe.each(TYPES)('an Agent with an MCP server over %s', (type) => {
  it('lists the server’s tools once, offers them as RAGFlow names them, calls both, and closes the session', async () => {
    const server = mcp.connection(type);
    model.enqueue(
      { kind: 'tools', calls: [{ name: 'add_0', arguments: { a: 19, b: 23 } }, { name: 'lookup_city_1', arguments: { city: 'Oslo' } }] },
      { kind: 'text', text: 'Oslo has 709,037 people; 19 + 23 = 42.' },
    );
    const before = { calls: model.calls, ended: mcp.sessionsEnded };
    const canvas = run({ mcp: [{ mcp_id: server.id, tools: {} }] }, [server]);
    const events = await turn(canvas, { query: 'How many people live in Oslo, and what is 19 + 23?' });

    expect(model.calls - before.calls).toBe(2);
    const [first, second] = model.requests.slice(-2).map((r) => r.body);
    expect(first?.tools?.map((t: { function: unknown }) => t.function)).toEqual([
      { name: 'add_0', description: 'Adds two numbers.', parameters: expect.objectContaining({ type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } }) },
      { name: 'lookup_city_1', description: 'Facts about a city: its country and population.', parameters: expect.objectContaining({ properties: { city: { type: 'string', description: 'The city name, e.g. Oslo' } } }) },
    ]);
    expect(second?.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => m.content)).toEqual(['42', 'Oslo, Norway: population 709,037; capital since 1814.']);
    expect(messages(events)).toEqual(['Oslo has 709,037 people; 19 + 23 = 42.']);
    expect(finished(events)).toMatchObject({
      data: {
        outputs: {
          use_tools: [
            { name: 'add_0', arguments: { a: 19, b: 23 }, result: '42' },
            { name: 'lookup_city_1', arguments: { city: 'Oslo' }, result: 'Oslo, Norway: population 709,037; capital since 1814.' },
          ],
        },
      },
    });
    expect(mcp.calls.map((c) => c.tool).sort()).toEqual(['add', 'lookup_city']);
    expect(mcp.rpcs.filter((m) => m === 'initialize')).toHaveLength(1);
    expect(mcp.rpcs.filter((m) => m === 'tools/list')).toHaveLength(1);
    // the calls are the turn's records, through the registry's call path
    expect(canvas.lastTurnCalls.records.filter((r) => r.kind === 'tool').map((r) => r.name)).toEqual(['add_0', 'lookup_city_1']);
    if (type === 'streamable-http') expect(mcp.sessionsEnded - before.ended).toBe(1);
  });

  it('uses the DSL’s tool metas without listing, indexed after the Agent’s other tools', async () => {
    const server = mcp.connection(type);
    const meta = { name: 'lookup_city', description: 'City facts (as the DSL saved them).', inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
    const helper = { component_name: 'Agent', name: 'Helper', params: { llm_id: 'writer@Local', sys_prompt: 'You help.', user_prompt: 'Help.' } };
    model.enqueue({ kind: 'tools', calls: [{ name: 'lookup_city_1', arguments: { city: 'Lima' } }] }, { kind: 'text', text: 'Lima has about ten million people.' });
    const events = await turn(run({ tools: [helper], mcp: [{ mcp_id: server.id, tools: { lookup_city: meta } }] }, [server]), { query: 'Lima?' });

    const first = model.requests.at(-2)?.body;
    expect(first?.tools?.map((t: { function: { name: string; description: string } }) => [t.function.name, t.function.description])).toEqual([
      ['Helper_0', expect.any(String)],
      ['lookup_city_1', 'City facts (as the DSL saved them).'],
    ]);
    expect(messages(events)).toEqual(['Lima has about ten million people.']);
    expect(mcp.rpcs).not.toContain('tools/list');
    expect(mcp.calls).toEqual([{ tool: 'lookup_city', arguments: { city: 'Lima' } }]);
  });

  it('sends the headers with the tenant’s secret and custom_header; no secret value in events, records, state or the model’s prompt', async () => {
    mcp.echoHeader = 'authorization';
    const server = mcp.connection(type, { headers: { Authorization: 'Bearer {secret.MCP_TOKEN}' } });
    model.enqueue({ kind: 'tools', calls: [{ name: 'lookup_city_1', arguments: { city: 'Oslo' } }] }, { kind: 'text', text: 'Done.' });
    const canvas = run({ mcp: [{ mcp_id: server.id, tools: {} }], custom_header: { 'X-Tenant-Trace': 'cities-${run}', run: 7 } }, [server]);
    const events = await turn(canvas, { query: 'Oslo?' });

    const sent = mcp.requests.filter((r) => r.method === 'POST');
    expect(sent.length).toBeGreaterThan(2);
    for (const r of sent) expect(r.headers).toMatchObject({ authorization: `Bearer ${TOKEN}`, 'x-tenant-trace': 'cities-7' });
    const toolMessage = model.requests.at(-1)?.body.messages.at(-1);
    expect(toolMessage).toMatchObject({ role: 'tool', content: expect.stringContaining('(authorization: Bearer [redacted])') });
    const everything = JSON.stringify({ events, records: canvas.lastTurnCalls, state: canvas.serialize(), prompts: model.requests.slice(-2) });
    expect(everything).not.toContain(TOKEN);
  });

  it('a stalled call times out on the registry’s timer, fails the turn as transient, and the session is closed', async () => {
    const server = mcp.connection(type);
    const { timer, armed } = manualTimer();
    const stall = mcp.stall();
    model.enqueue({ kind: 'tools', calls: [{ name: 'add_0', arguments: { a: 1, b: 2 } }] });
    const before = mcp.sessionsEnded;
    const pending = turn(run({ mcp: [{ mcp_id: server.id, tools: {} }] }, [server], timer), { query: 'add' }).catch((e: unknown) => e);
    await stall.arrived;
    const deadline = armed.filter((t) => !t.cancelled);
    expect(deadline.map((t) => t.ms)).toEqual([30_000]);
    deadline[0]?.fire();
    const error = await pending;
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ code: 'unavailable', message: 'tool "add": no answer within 30000 ms' });
    stall.release();
    if (type === 'streamable-http') expect(mcp.sessionsEnded - before).toBe(1);
  });
});

describe('an Agent’s mcp entries', () => {
  it('an mcp_id the tenant’s registry does not hold fails the Agent, naming it', async () => {
    const events = await turn(run({ mcp: [{ mcp_id: 'gone-0451', tools: {} }] }, [mcp.connection('sse')]), { query: 'hi' });
    // the Agent streams into the Message, which is where the failure surfaces
    expect(last(events)).toMatchObject({ event: 'workflow_failed', data: { error: { message: 'the MCP server "gone-0451" is not in this tenant\'s registry' } } });
    expect(mcp.requests).toEqual([]);
  });

  it('a run without MCP configured fails the Agent clearly; an Agent without entries needs none', async () => {
    const tools = createToolRegistry([]);
    const services = { ...testServices({ openaiUrl: model.url }), tools };
    const withEntry = canvasFor(agentDsl({ mcp: [{ mcp_id: 'x', tools: {} }] }), { services }, withComponents(createAgent(tools)));
    expect(last(await turn(withEntry, { query: 'hi' }))).toMatchObject({ event: 'workflow_failed', data: { error: { message: 'MCP servers are not configured for this run' } } });
    const without = canvasFor(agentDsl({ mcp: [] }), { services }, withComponents(createAgent(tools)));
    expect(messages(await turn(without, { query: 'hi' }))).toEqual(['ok']);
  });

  it('load as RAGFlow writes them (the stock template’s {mcp_id, tools: {}}), and a malformed one is refused naming the field', () => {
    compileWorkflow(agentDsl({ mcp: [{ mcp_id: '30d6ef8ea8d511f0828382e3548809fa', tools: {} }], custom_header: {} }), builtinComponents);
    const error = (() => {
      try {
        compileWorkflow(agentDsl({ mcp: [{ tools: {} }] }), builtinComponents);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(DslValidationError);
    expect((error as DslValidationError).problems).toContainEqual(expect.objectContaining({ component_id: 'Agent:Cities', field: 'obj.params.mcp.0.mcp_id' }));
  });
});
