/**
 * A sub-Agent as a tool: an Agent entry of another Agent's `tools` (its own model, prompt and
 * tools) that the calling model asks with `user_prompt`, `reasoning` and `context`, as in
 * RAGFlow. The call renders the sub-Agent's system prompt against the same run, sends the
 * three arguments as one user message, and runs the calling Agent's tool loop with the
 * sub-Agent's params; its whole answer is the result. It is shown the files of its own
 * `visual_files_var` and of `sys.files`, as an Agent is.
 */
import type { ComponentContext } from '../canvas/component';
import type { AgentParams } from '../components/agent';
import { attachFiles } from '../components/attachments';
import { buildMessages } from '../components/llm-params';
import type { ChatMessage, ChatModel } from '../llm/types';
import { ToolError } from './errors';
import type { ToolEntry } from './registry';
import type { Tool, ToolContext } from './types';

/** A sub-Agent runs a whole tool loop of its own: it gets longer than a single call. */
export const SUB_AGENT_TIMEOUT_MS = 5 * 60_000;

/** What the calling Agent lends its sub-Agents. */
export interface SubAgentHost {
  /** The calling Agent's context: prompts render and history reads against the same run. */
  readonly component: ComponentContext;
  /** The Agent's tool loop with the sub-Agent's params, under this call's context; yields text. */
  rounds(model: ChatModel, messages: ChatMessage[], params: AgentParams, call: ToolContext): AsyncIterable<string>;
}

export function subAgentTool(entry: ToolEntry<AgentParams>, host: SubAgentHost): Tool {
  const sub = entry.params;
  return {
    name: entry.name,
    description: sub.description || `An assistant for a specific task: ${entry.name}.`,
    parameters: {
      type: 'object',
      properties: {
        user_prompt: { type: 'string', description: sub.user_prompt || 'The request to send to this assistant.' },
        reasoning: { type: 'string', description: 'Why this assistant is called and what is expected of it.' },
        context: { type: 'string', description: 'Everything it needs to know: background, facts found so far, decisions.' },
      },
      required: ['user_prompt'],
    },
    timeoutMs: SUB_AGENT_TIMEOUT_MS,
    nested: true,
    async invoke(args, ctx) {
      const blocks = [
        typeof args.reasoning === 'string' && args.reasoning ? `REASONING:\n${args.reasoning}` : '',
        typeof args.context === 'string' && args.context ? `CONTEXT:\n${args.context}` : '',
        `QUERY:\n${typeof args.user_prompt === 'string' ? args.user_prompt : ''}`,
      ].filter(Boolean);
      const models = ctx.services.models;
      if (!models) throw new ToolError('no language model is configured for this run');
      const model = models.resolve(sub.llm_id);
      const built = await buildMessages({ ...sub, prompts: [] }, host.component);
      built.push({ role: 'user', content: blocks.join('\n\n') });
      // shown the files as an Agent is (its own prompts are not rendered: the caller wrote this one)
      const messages = await attachFiles({ ...sub, prompts: [] }, host.component, built);
      let answer = '';
      for await (const delta of host.rounds(model, messages, sub, ctx)) answer += delta;
      return { kind: 'result', content: answer };
    },
  };
}
