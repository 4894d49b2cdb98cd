import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileWorkflow, DslValidationError } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { builtinTools } from '../../lib/tools';
import { canvasFor, fixture, last, messages, turn } from '../helpers/canvas';
import { testServices } from '../helpers/services';
import { OpenAiServer } from '../llm/openai-server';

let server: OpenAiServer;
beforeAll(async () => {
  server = await OpenAiServer.start();
});
afterAll(async () => {
  await server.close();
});

describe('Agent with a sub-agent tool', () => {
  it('calls the sub-agent through a tool call and streams the final answer', async () => {
    const before = server.calls;
    server.enqueue(
      { kind: 'tools', calls: [{ name: 'Weather_Expert_0', arguments: { user_prompt: 'Weather in Oslo tomorrow?', reasoning: 'packing', context: 'trip to Oslo' } }] },
      { kind: 'text', text: 'Cold and sunny, -3°C.' },
      { kind: 'text', text: 'Pack a warm coat: it will be cold and sunny.', chunks: 4 },
    );
    const services = testServices({ openaiUrl: server.url, models: { 'gpt-4o@OpenAI': 'openai:planner', 'gpt-4o-mini@OpenAI': 'openai:weather' } });
    const canvas = canvasFor(fixture('agent-subagent'), { services });
    const events = await turn(canvas, { query: 'What should I pack for Oslo?' });

    expect(messages(events)).toEqual(['Pack a warm coat: it will be cold and sunny.']);
    expect(events.filter((e) => e.event === 'message').length).toBe(4);
    expect(server.calls - before).toBe(3);
    const [parent1, sub, parent2] = server.requests.slice(-3).map((r) => r.body);

    expect(parent1?.model).toBe('planner');
    expect(parent1?.tools?.[0]?.function).toMatchObject({
      name: 'Weather_Expert_0',
      description: 'Knows the weather anywhere.',
      parameters: { required: ['user_prompt'], properties: { user_prompt: { description: 'The place and date to report on.' } } },
    });
    expect(sub?.model).toBe('weather');
    expect(sub?.tools).toBeUndefined();
    expect(sub?.messages[0]).toEqual({ role: 'system', content: 'You answer questions about the weather, briefly.' });
    expect(sub?.messages.at(-1)?.content).toBe('REASONING:\npacking\n\nCONTEXT:\ntrip to Oslo\n\nQUERY:\nWeather in Oslo tomorrow?');
    expect(parent2?.messages.at(-2)).toMatchObject({ role: 'assistant', tool_calls: [{ function: { name: 'Weather_Expert_0' } }] });
    expect(parent2?.messages.at(-1)).toMatchObject({ role: 'tool', content: 'Cold and sunny, -3°C.' });

    const done = events.find((e) => e.event === 'node_finished' && e.data.component_id === 'Agent:Planner');
    expect(done).toMatchObject({
      data: { outputs: { use_tools: [{ name: 'Weather_Expert_0', result: 'Cold and sunny, -3°C.', arguments: { user_prompt: 'Weather in Oslo tomorrow?' } }] } },
    });
    expect(last(events)).toMatchObject({ event: 'workflow_finished', data: { usage: { calls: 3 } } });
  });

  it('stops calling tools after max_rounds and asks for an answer', async () => {
    const loop = { kind: 'tools' as const, calls: [{ name: 'Weather_Expert_0', arguments: { user_prompt: 'again' } }] };
    server.enqueue(loop, { kind: 'text', text: 'sub 1' }, loop, { kind: 'text', text: 'sub 2' }, { kind: 'text', text: 'Done with what I have.' });
    const services = testServices({ openaiUrl: server.url });
    const events = await turn(canvasFor(fixture('agent-subagent'), { services }), { query: 'loop please' });
    expect(messages(events)).toEqual(['Done with what I have.']);
    const final = server.requests.at(-1)?.body;
    expect(final?.tools).toBeUndefined();
    expect(final?.messages.at(-1)?.content).toMatch(/used all 2 rounds/);
  });

  it('refuses tool kinds other than sub-Agents and malformed MCP entries at load time, naming them', () => {
    const dsl = fixture('agent-subagent') as { components: Record<string, { obj: { params: Record<string, unknown> } }> };
    const params = dsl.components['Agent:Planner']?.obj.params as Record<string, unknown>;
    params.tools = [
      { component_name: 'Jin10', name: 'news', params: {} },
      { component_name: 'Retrieval', name: 'kb', params: {} },
      { component_name: 'TavilySearch', name: 'web', params: {} },
      { component_name: 'WenCai', name: 'stocks', params: {} },
      { component_name: 'Agent', name: 'helper', params: {} },
    ];
    params.mcp = [{ mcp_id: 'x', tools: {} }, { tools: {} }];
    const error = (() => {
      try {
        compileWorkflow(dsl, builtinComponents);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(DslValidationError);
    const problems = (error as DslValidationError).problems;
    expect(problems).toContainEqual(expect.objectContaining({
      component_id: 'Agent:Planner',
      field: 'obj.params.tools',
      message: `unsupported tool kinds: Jin10, WenCai (supported: Agent, ${builtinTools.kinds.join(', ')}). Jin10: it calls a regional market-data service Easel does not integrate. WenCai: it calls a regional market-data service Easel does not integrate. An import with drop_unsupported_tools leaves them out and reports what it dropped.`,
    }));
    expect(problems).toContainEqual(expect.objectContaining({ component_id: 'Agent:Planner', field: 'obj.params.mcp.1.mcp_id' }));
    expect(problems.filter((p) => p.field?.startsWith('obj.params.mcp'))).toHaveLength(1);
  });
});
