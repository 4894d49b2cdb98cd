/** What the web search tool suites share: a call's context, an Agent workflow around tool entries, and its references. */
import type { Canvas } from '../../lib/canvas';
import { withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { createToolRegistry, type ToolContext, type ToolKind, type ToolServices, type ToolTimer } from '../../lib/tools';
import { canvasFor, type turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { testServices } from '../helpers/services';
import { skippingTimer } from './support';

export function toolContext(services: ToolServices = {}): ToolContext {
  return {
    signal: new AbortController().signal,
    services,
    componentId: 'Agent:Researcher',
    ordinal: 0,
    path: [],
    recordUsage: () => undefined,
  };
}

/** Secrets by name, as a run's `secret` service. */
export const secretsOf = (secrets: Record<string, string>): ToolServices => ({ secret: (name) => secrets[name] });

export function agentDsl(tools: unknown[]) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Agent:Researcher']],
    'Agent:Researcher': ['Agent', {
      llm_id: 'writer@Local',
      sys_prompt: 'You research on the web.',
      prompts: [{ role: 'user', content: '{sys.query}' }],
      max_rounds: 3,
      tools,
    }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Researcher@content}'] }],
  });
}

/** A canvas whose Agent calls `kinds` (talking to local servers) through the model at `modelUrl`. */
export function agentRun(tools: unknown[], kinds: ToolKind<any>[], options: { modelUrl: string; secrets?: Record<string, string>; allow?: string[]; timer?: ToolTimer }): Canvas {
  const registry = createToolRegistry(kinds, { timer: options.timer ?? skippingTimer().timer });
  const services = { ...testServices({ openaiUrl: options.modelUrl, secrets: options.secrets ?? {}, allow: options.allow ?? [] }), tools: registry };
  return canvasFor(agentDsl(tools), { services }, withComponents(createAgent(registry)));
}

type Reference = { chunks: Record<string, Record<string, unknown>>; doc_aggs: Record<string, unknown> };

export const referenceOf = (events: Awaited<ReturnType<typeof turn>>) =>
  (events.find((e) => e.event === 'message_end')?.data as { reference?: Reference }).reference;

/** The citation ids of the knowledge blocks the model was handed as tool results. */
export function blockIds(body: { messages: { role: string; content: string }[] }): string[] {
  const text = body.messages.filter((m) => m.role === 'tool').map((m) => m.content).join('\n');
  return [...text.matchAll(/\nID: (\d+)/g)].map((m) => m[1] as string);
}

/** The error a function throws (DslValidationError at load), or undefined. */
export function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (e) {
    return e;
  }
  return undefined;
}
