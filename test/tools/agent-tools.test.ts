import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type CanvasEvent, TransientError } from '../../lib/canvas';
import { withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import {
  createToolRegistry,
  type ToolCallInfo,
  type ToolContext,
  ToolError,
  toolHttpError,
  type ToolKind,
  type ToolOutcome,
  type ToolRegistryOptions,
  ToolTimeoutError,
} from '../../lib/tools';
import { canvasFor, last, turn } from '../helpers/canvas';
import { testServices } from '../helpers/services';
import { OpenAiServer } from '../llm/openai-server';
import { deferred, manualTimer } from './support';

let server: OpenAiServer;
beforeAll(async () => {
  server = await OpenAiServer.start();
});
afterAll(async () => {
  await server.close();
});

/** A custom kind: looks keys up in a table named by the DSL; each test sets how it answers. */
function lookupKind(answer: (key: string, ctx: ToolContext) => Promise<ToolOutcome>) {
  const calls: { args: Record<string, unknown>; ctx: ToolContext }[] = [];
  const kind: ToolKind<{ table: string }> = {
    name: 'Lookup',
    params: z.object({ table: z.string() }),
    create: (entry) => ({
      name: entry.name,
      description: `Looks a key up in the ${entry.params.table} table.`,
      parameters: { type: 'object', properties: { key: { type: 'string', description: 'What to look up.' } }, required: ['key'] },
      invoke: (args, ctx) => {
        calls.push({ args, ctx });
        return answer(String(args.key), ctx);
      },
    }),
  };
  return { kind, calls };
}

const capitals = { component_name: 'Lookup', name: 'capitals', params: { table: 'capitals' } };

function dsl(tools: unknown[]) {
  return {
    components: {
      begin: { obj: { component_name: 'Begin', params: {} }, downstream: ['Agent:A'], upstream: [] },
      'Agent:A': { obj: { component_name: 'Agent', params: { sys_prompt: 'You answer with facts.', max_rounds: 2, tools } }, downstream: [], upstream: ['begin'] },
    },
  };
}

/** A canvas whose Agent knows the kind at load time and finds it in the run's services. */
function run(kind: ToolKind<any>, tools: unknown[], options: ToolRegistryOptions = {}) {
  const registry = createToolRegistry([kind], options);
  const services = { ...testServices({ openaiUrl: server.url }), tools: registry };
  return canvasFor(dsl(tools), { services }, withComponents(createAgent(registry)));
}

const finished = (events: CanvasEvent[]) => events.find((e) => e.event === 'node_finished' && e.data.component_id === 'Agent:A');

describe('Agent with a tool from the registry, through an OpenAI-compatible server', () => {
  it('offers the tool to the model, calls it with a context, and hands its result back', async () => {
    const { kind, calls } = lookupKind(async (key) => ({ kind: 'result', content: key === 'Norway' ? 'Oslo' : 'unknown', data: { rows: 1 } }));
    server.enqueue({ kind: 'tools', calls: [{ name: 'capitals_0', arguments: { key: 'Norway' } }] }, { kind: 'text', text: 'The capital of Norway is Oslo.' });
    const before = server.calls;
    const events = await turn(run(kind, [capitals]), { query: 'Capital of Norway?' });

    expect(server.calls - before).toBe(2);
    const [first, second] = server.requests.slice(-2).map((r) => r.body);
    expect(first?.tools).toEqual([
      {
        type: 'function',
        function: {
          name: 'capitals_0',
          description: 'Looks a key up in the capitals table.',
          parameters: { type: 'object', properties: { key: { type: 'string', description: 'What to look up.' } }, required: ['key'] },
        },
      },
    ]);
    expect(second?.messages.at(-1)).toMatchObject({ role: 'tool', content: 'Oslo' });

    expect(calls).toHaveLength(1);
    const { args, ctx } = calls[0] as (typeof calls)[number];
    expect(args).toEqual({ key: 'Norway' });
    expect({ componentId: ctx.componentId, ordinal: ctx.ordinal, path: ctx.path }).toEqual({ componentId: 'Agent:A', ordinal: 0, path: [] });
    expect(ctx.services.models).toBeDefined();
    expect(ctx.services.guard).toBeDefined();
    expect(ctx.signal.aborted).toBe(false);

    expect(finished(events)).toMatchObject({
      data: { outputs: { content: 'The capital of Norway is Oslo.', use_tools: [{ name: 'capitals_0', arguments: { key: 'Norway' }, result: 'Oslo' }] } },
    });
    expect(last(events)).toMatchObject({ event: 'workflow_finished', data: { usage: { calls: 2 } } });
  });

  it('numbers the calls of a round in the order the model asked, and the hook sees each one', async () => {
    const seen: ToolCallInfo[] = [];
    const { kind } = lookupKind(async (key) => ({ kind: 'result', content: `capital of ${key}` }));
    server.enqueue(
      { kind: 'tools', calls: [{ name: 'capitals_0', arguments: { key: 'Norway' } }, { name: 'capitals_0', arguments: { key: 'Chile' } }] },
      { kind: 'text', text: 'Oslo and Santiago.' },
    );
    const hook = (call: ToolCallInfo, go: () => Promise<ToolOutcome>) => {
      seen.push(call);
      return go();
    };
    await turn(run(kind, [capitals], { hook }), { query: 'Two capitals?' });
    expect(seen.map((c) => [c.ordinal, c.tool, c.arguments])).toEqual([
      [0, 'capitals_0', { key: 'Norway' }],
      [1, 'capitals_0', { key: 'Chile' }],
    ]);
    const tools = server.requests.at(-1)?.body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    expect(tools).toEqual(['capital of Norway', 'capital of Chile']);
  });

  it('tells the model about a permanent failure and lets it answer', async () => {
    const { kind } = lookupKind(async () => {
      throw new ToolError('no capital is known for Atlantis');
    });
    server.enqueue({ kind: 'tools', calls: [{ name: 'capitals_0', arguments: { key: 'Atlantis' } }] }, { kind: 'text', text: 'Atlantis has no known capital.' });
    const events = await turn(run(kind, [capitals]), { query: 'Capital of Atlantis?' });
    expect(server.requests.at(-1)?.body.messages.at(-1)).toMatchObject({ role: 'tool', content: 'error: no capital is known for Atlantis' });
    expect(last(events)).toMatchObject({ event: 'workflow_finished' });
    expect(finished(events)).toMatchObject({ data: { outputs: { use_tools: [{ result: 'error: no capital is known for Atlantis' }] } } });
  });

  it('fails the turn as unavailable on a transient failure, as on a model 5xx', async () => {
    const { kind } = lookupKind(async () => ({ kind: 'error', error: toolHttpError('capitals', 503, 'overloaded') }));
    server.enqueue({ kind: 'tools', calls: [{ name: 'capitals_0', arguments: { key: 'Norway' } }] });
    const before = server.calls;
    const error = await turn(run(kind, [capitals]), { query: 'Capital of Norway?' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ code: 'unavailable', componentId: 'Agent:A', message: 'tool "capitals": the service answered 503: overloaded' });
    expect(server.calls - before).toBe(1);
  });

  it('fails the turn as unavailable when a call times out (timer fired by the test)', async () => {
    const { timer, armed, fireAll } = manualTimer();
    const started = deferred();
    const { kind } = lookupKind(() => {
      started.resolve();
      return new Promise(() => {});
    });
    server.enqueue({ kind: 'tools', calls: [{ name: 'capitals_0', arguments: { key: 'Norway' } }] });
    const result = turn(run(kind, [capitals], { timer, defaultTimeoutMs: 5000 }), { query: 'Capital of Norway?' }).catch((e: unknown) => e);
    await started.promise;
    expect(armed.map((t) => t.ms)).toEqual([5000]);
    fireAll();
    const error = await result;
    expect(error).toBeInstanceOf(ToolTimeoutError);
    expect(error).toMatchObject({ code: 'unavailable', message: 'tool "capitals": no answer within 5000 ms' });
  });

  it('fails the Agent with tool_suspended when a tool asks a person to decide', async () => {
    const { kind } = lookupKind(async () => ({ kind: 'suspend', state: { key: 'Norway' }, prompt: 'May I look up Norway?' }));
    server.enqueue({ kind: 'tools', calls: [{ name: 'capitals_0', arguments: { key: 'Norway' } }] });
    const before = server.calls;
    const events = await turn(run(kind, [capitals]), { query: 'Capital of Norway?' });
    expect(server.calls - before).toBe(1);
    const failed = last(events);
    expect(failed).toMatchObject({ event: 'workflow_failed', data: { error: { component_id: 'Agent:A' } } });
    expect((failed.data as { error: { message: string } }).error.message).toMatch(/^tool_suspended: the tool "capitals_0" asks a person to decide \("May I look up Norway\?"\)/);
  });

  it('gives a sub-Agent the registry too; its calls carry the path of the sub-Agent call', async () => {
    const { kind, calls } = lookupKind(async () => ({ kind: 'result', content: 'Oslo' }));
    const helper = { component_name: 'Agent', name: 'Geographer', params: { description: 'Knows places.', max_rounds: 1, tools: [capitals] } };
    server.enqueue(
      { kind: 'tools', calls: [{ name: 'Geographer_0', arguments: { user_prompt: 'Capital of Norway?' } }] },
      { kind: 'tools', calls: [{ name: 'capitals_0', arguments: { key: 'Norway' } }] },
      { kind: 'text', text: 'Oslo.' },
      { kind: 'text', text: 'It is Oslo.' },
    );
    const events = await turn(run(kind, [helper]), { query: 'Capital of Norway?' });
    expect(last(events)).toMatchObject({ event: 'workflow_finished', data: { outputs: { content: 'It is Oslo.' } } });
    expect(calls.map((c) => ({ componentId: c.ctx.componentId, ordinal: c.ctx.ordinal, path: c.ctx.path }))).toEqual([{ componentId: 'Agent:A', ordinal: 0, path: [0] }]);
  });

  it('fails with tool_unavailable when the run provides no tool of a kind the DSL names', async () => {
    const { kind } = lookupKind(async () => ({ kind: 'result', content: 'x' }));
    const services = { ...testServices({ openaiUrl: server.url }), tools: createToolRegistry([]) };
    const canvas = canvasFor(dsl([capitals]), { services }, withComponents(createAgent(createToolRegistry([kind]))));
    const before = server.calls;
    const events = await turn(canvas, { query: 'Capital of Norway?' });
    expect(server.calls - before).toBe(0);
    expect(last(events)).toMatchObject({ event: 'workflow_failed', data: { error: { message: 'tool_unavailable: this run provides no tool of kind "Lookup"' } } });
  });
});
