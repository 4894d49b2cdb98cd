/**
 * Agent: an LLM that may call tools, for up to `max_rounds` rounds of tool calls, then
 * answers. Tools are sub-Agents (each its own model, prompt and tools), called natively
 * through the provider's function calling with `user_prompt`, `reasoning` and `context`
 * arguments. Other RAGFlow tool kinds and MCP servers are refused when the DSL is loaded.
 *
 * Every round's text reaches a downstream Message live; `use_tools` records each call made.
 */
import { z } from 'zod';
import { type ComponentContext, defineComponent } from '../canvas/component';
import { TransientError } from '../canvas/errors';
import { isRecord } from '../canvas/references';
import { TextStream } from '../canvas/text-stream';
import type { ChatMessage, ChatModel, ToolCall, ToolSpec } from '../llm/types';
import {
  DEFAULT_HISTORY_WINDOW,
  buildMessages,
  llmParamsShape,
  samplingOptions,
  schemaInstructions,
  structuredAnswer,
  structuredSchema,
} from './llm-params';
import { modelsOf } from './services';

export const DEFAULT_MAX_ROUNDS = 5;
/** Sub-agents within sub-agents, at most this deep. */
export const MAX_AGENT_DEPTH = 3;
export const SUPPORTED_TOOLS = ['Agent'] as const;

interface AgentParams extends z.output<typeof baseAgentShape> {
  tools: ToolEntry[];
}

interface ToolEntry {
  component_name: string;
  name: string;
  id?: string | null;
  params: AgentParams;
}

const baseAgentShape = z.looseObject({
  ...llmParamsShape,
  max_rounds: z.number().int().min(0).max(20).nullish().transform((r) => r ?? DEFAULT_MAX_ROUNDS),
  description: z.string().nullish(),
  user_prompt: z.string().nullish(),
  mcp: z
    .array(z.unknown())
    .nullish()
    .refine((m) => !m || m.length === 0, 'MCP servers are not supported'),
});

const agentParams: z.ZodType<AgentParams> = baseAgentShape.extend({
  tools: z
    .array(
      z.looseObject({
        component_name: z.string(),
        name: z.string().min(1).max(64),
        id: z.string().nullish(),
        params: z.preprocess((v) => v ?? {}, z.lazy(() => agentParams)),
      }),
    )
    .nullish()
    .transform((t) => t ?? [])
    .superRefine((tools, issue) => {
      const unsupported = [...new Set(tools.map((t) => t.component_name).filter((n) => !(SUPPORTED_TOOLS as readonly string[]).includes(n)))];
      if (unsupported.length > 0) {
        issue.addIssue({
          code: 'custom',
          message: `unsupported tool kinds: ${unsupported.join(', ')} (only sub-Agents are supported as tools)`,
        });
      }
    }),
}) as unknown as z.ZodType<AgentParams>;

export const agent = defineComponent({
  name: 'Agent',
  external: true,
  params: agentParams,
  defaultOutput: 'content',
  historyWindow: (p) => agentWindow(p),
  check(p) {
    const depth = toolDepth(p);
    return depth > MAX_AGENT_DEPTH
      ? [{ field: 'obj.params.tools', message: `sub-agents nest ${depth} deep; at most ${MAX_AGENT_DEPTH} levels are allowed` }]
      : [];
  },
  async invoke(p, ctx) {
    const model = modelsOf(ctx).resolve(p.llm_id);
    const schema = structuredSchema(p);
    if (schema && p.tools.length === 0) {
      const { text, structured } = await structuredAnswer(model, await buildMessages(p, ctx, [schemaInstructions(schema)]), p, ctx);
      return { outputs: { content: text, structured } };
    }
    const messages = await buildMessages(p, ctx);
    const trace: ToolTrace[] = [];
    if (!schema && ctx.downstreamStreams && !ctx.handlesErrors) {
      const stream = new TextStream(runRounds(model, messages, p, ctx, 0, trace));
      return { outputs: { content: stream, use_tools: trace } };
    }
    let content = '';
    for await (const delta of runRounds(model, messages, p, ctx, 0, trace)) content += delta;
    if (!schema) return { outputs: { content, use_tools: trace } };
    const { text, structured } = await structuredAnswer(
      model,
      [...messages, { role: 'assistant', content }, { role: 'user', content: schemaInstructions(schema) }],
      p,
      ctx,
    );
    return { outputs: { content: text, structured, use_tools: trace } };
  },
});

interface ToolTrace {
  name: string;
  arguments: unknown;
  result: string;
}

/** The tool loop; yields the text of every round as it arrives. */
async function* runRounds(
  model: ChatModel,
  start: ChatMessage[],
  p: AgentParams,
  ctx: ComponentContext,
  depth: number,
  trace: ToolTrace[],
): AsyncGenerator<string, void, undefined> {
  const tools = toolSpecs(p.tools);
  const messages = [...start];
  for (let round = 0; ; round++) {
    const last = round >= p.max_rounds || tools.length === 0;
    if (round >= p.max_rounds && tools.length > 0) {
      messages.push({ role: 'user', content: `You have used all ${p.max_rounds} rounds of tool calls. Answer now with what you have.` });
    }
    let text = '';
    const calls: ToolCall[] = [];
    for await (const event of model.chat({ messages, ...(last ? {} : { tools: tools.map((t) => t.spec) }), ...samplingOptions(p), signal: ctx.signal })) {
      if (event.type === 'text') {
        text += event.text;
        yield event.text;
      } else if (event.type === 'tool_call') {
        calls.push(event.call);
      } else {
        ctx.recordUsage(event.usage);
      }
    }
    if (last || calls.length === 0) return;
    messages.push({ role: 'assistant', content: text, tool_calls: calls });
    const results = await Promise.all(calls.map((call) => callTool(call, tools, ctx, depth)));
    calls.forEach((call, i) => {
      const result = results[i] as string;
      trace.push({ name: call.name, arguments: parseArguments(call.arguments) ?? call.arguments, result });
      messages.push({ role: 'tool', content: result, tool_call_id: call.id });
    });
  }
}

interface BoundTool {
  spec: ToolSpec;
  entry: ToolEntry;
}

function toolSpecs(tools: readonly ToolEntry[]): BoundTool[] {
  return tools.map((entry, i) => ({
    entry,
    spec: {
      name: `${entry.name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 56)}_${i}`,
      description: entry.params.description || `An assistant for a specific task: ${entry.name}.`,
      parameters: {
        type: 'object',
        properties: {
          user_prompt: { type: 'string', description: entry.params.user_prompt || 'The request to send to this assistant.' },
          reasoning: { type: 'string', description: 'Why this assistant is called and what is expected of it.' },
          context: { type: 'string', description: 'Everything it needs to know: background, facts found so far, decisions.' },
        },
        required: ['user_prompt'],
      },
    },
  }));
}

/** Runs one sub-agent. Its workflow errors go back to the calling model as the result. */
async function callTool(call: ToolCall, tools: readonly BoundTool[], ctx: ComponentContext, depth: number): Promise<string> {
  const tool = tools.find((t) => t.spec.name === call.name);
  if (!tool) return `error: there is no tool named ${call.name}`;
  const args = parseArguments(call.arguments);
  if (!args) return 'error: the arguments are not a JSON object';
  const sub = tool.entry.params;
  const blocks = [
    typeof args.reasoning === 'string' && args.reasoning ? `REASONING:\n${args.reasoning}` : '',
    typeof args.context === 'string' && args.context ? `CONTEXT:\n${args.context}` : '',
    `QUERY:\n${typeof args.user_prompt === 'string' ? args.user_prompt : ''}`,
  ].filter(Boolean);
  try {
    const model = modelsOf(ctx).resolve(sub.llm_id);
    const messages = await buildMessages({ ...sub, prompts: [] }, ctx);
    messages.push({ role: 'user', content: blocks.join('\n\n') });
    let answer = '';
    for await (const delta of runRounds(model, messages, sub, ctx, depth + 1, [])) answer += delta;
    return answer;
  } catch (error) {
    if (error instanceof TransientError) throw error;
    return `error: ${error instanceof Error ? error.message : 'the tool failed'}`;
  }
}

function parseArguments(text: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(text || '{}');
    return isRecord(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function agentWindow(p: AgentParams): number {
  return Math.max(p.message_history_window_size ?? DEFAULT_HISTORY_WINDOW, ...p.tools.map((t) => agentWindow(t.params)));
}

function toolDepth(p: AgentParams): number {
  return p.tools.length === 0 ? 0 : 1 + Math.max(...p.tools.map((t) => toolDepth(t.params)));
}
