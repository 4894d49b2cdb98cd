/**
 * What the suites of the search tools (Wikipedia, ArXiv, PubMed) share: a call's context with
 * the tenant's secrets, an Agent workflow that offers one tool, a run of it through a local
 * OpenAI-compatible model server, and the load-time problems of a DSL.
 */
import { type CanvasEvent, compileWorkflow, DslValidationError } from '../../lib/canvas';
import { builtinComponents, withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { createToolRegistry, type ToolContext, type ToolKind } from '../../lib/tools';
import { canvasFor, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { testServices } from '../helpers/services';
import type { OpenAiServer } from '../llm/openai-server';
import { skippingTimer } from './support';

export function context(secrets: Record<string, string> = {}): ToolContext {
  return {
    signal: new AbortController().signal,
    services: { secret: (name) => secrets[name] },
    componentId: 'Agent:Researcher',
    ordinal: 0,
    path: [],
    recordUsage: () => undefined,
  };
}

export function agentDsl(tools: unknown[]) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Agent:Researcher']],
    'Agent:Researcher': ['Agent', {
      llm_id: 'writer@Local',
      sys_prompt: 'You research in reference works.',
      prompts: [{ role: 'user', content: '{sys.query}' }],
      max_rounds: 3,
      tools,
    }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Researcher@content}'] }],
  });
}

/** The problems the built-in components find when `dsl` is loaded (none: an empty list). */
export function loadProblems(dsl: unknown): DslValidationError['problems'] {
  try {
    compileWorkflow(dsl, builtinComponents);
    return [];
  } catch (error) {
    if (error instanceof DslValidationError) return error.problems;
    throw error;
  }
}

/**
 * One turn of an Agent offering the `entry` tool, built by `kind`; the model calls
 * `<function>_0` with `args`, then answers citing the first knowledge block it was given.
 */
export async function agentTurn(model: OpenAiServer, kind: ToolKind<any>, entry: Record<string, unknown>, call: { name: string; arguments: Record<string, unknown> }, query: string, secrets: Record<string, string> = {}) {
  const tools = createToolRegistry([kind], { timer: skippingTimer().timer });
  const services = { ...testServices({ openaiUrl: model.url, secrets }), tools };
  const canvas = canvasFor(agentDsl([entry]), { services }, withComponents(createAgent(tools)));
  let ids: string[] = [];
  let toolText = '';
  model.enqueue({ kind: 'tools', calls: [call] });
  model.respond = (body) => {
    toolText = body.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => m.content).join('\n');
    ids = [...toolText.matchAll(/\nID: (\d+)/g)].map((m) => m[1] as string);
    return { kind: 'text', text: `Found it [ID:${ids[0]}].` };
  };
  const before = model.calls;
  const events = await turn(canvas, { query });
  return { events, ids, toolText, modelCalls: model.calls - before, firstRequest: model.requests.at(-2)?.body };
}

/** The reference `message_end` carries. */
export function referenceOf(events: readonly CanvasEvent[]) {
  return (events.find((e) => e.event === 'message_end')?.data as { reference?: { chunks: Record<string, Record<string, unknown>>; doc_aggs: Record<string, unknown> } }).reference;
}
