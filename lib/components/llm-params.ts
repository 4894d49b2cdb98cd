/**
 * What LLM, Agent and Categorize share: RAGFlow's model params, the prompt assembly (system
 * prompt, a window of the conversation, the configured prompts with references rendered, the
 * files shown), structured output, and the call itself with its token usage counted.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { CheckScope, ComponentContext } from '../canvas/component';
import type { DslProblem } from '../canvas/errors';
import { ComponentError } from '../canvas/errors';
import { isRecord } from '../canvas/references';
import { type ChatMessage, type ChatModel, type ChatOptions, type ChatResult, complete, type MessageContent, ZERO_USAGE } from '../llm/types';
import { attachFiles } from './attachments';
import { checkVariable } from './checks';

const number = z.lazy(() => z.union([z.number(), z.string().regex(/^\s*-?\d*\.?\d+\s*$/).transform(Number)]));

export const llmParamsShape = () => ({
  llm_id: z.string().nullish(),
  sys_prompt: z.string().nullish().transform((s) => s ?? ''),
  prompts: z
    .union([
      z.string().transform((content) => [{ role: 'user' as const, content }]),
      z.array(z.looseObject({ role: z.enum(['user', 'assistant', 'system']), content: z.string() })),
    ])
    .nullish()
    .transform((p) => p ?? [{ role: 'user' as const, content: '{sys.query}' }]),
  temperature: number.nullish(),
  temperatureEnabled: z.boolean().nullish(),
  top_p: number.nullish(),
  topPEnabled: z.boolean().nullish(),
  max_tokens: number.nullish(),
  maxTokensEnabled: z.boolean().nullish(),
  presence_penalty: number.nullish(),
  presencePenaltyEnabled: z.boolean().nullish(),
  frequency_penalty: number.nullish(),
  frequencyPenaltyEnabled: z.boolean().nullish(),
  message_history_window_size: z.number().int().min(0).max(50).nullish(),
  max_retries: z.number().int().min(0).max(5).nullish(),
  output_structure: z.record(z.string(), z.unknown()).nullish(),
  /** Cite the pass's references (RAGFlow's default: on); see citations.ts. */
  cite: z.boolean().nullish(),
  /** The variable whose images the model is shown (RAGFlow's), e.g. `sys.files`. */
  visual_files_var: z.string().nullish(),
  outputs: z.record(z.string(), z.unknown()).nullish(),
});

export const llmParams = z.lazy(() => z.looseObject(llmParamsShape()));
export type LlmParams = z.output<typeof llmParams>;

export const DEFAULT_HISTORY_WINDOW = 13;

/** RAGFlow sends a sampling knob only when it is set above 0 and its `*Enabled` flag is on. */
export function samplingOptions(p: LlmParams): Pick<ChatOptions, 'temperature' | 'top_p' | 'max_tokens' | 'presence_penalty' | 'frequency_penalty'> {
  const out: Record<string, number> = {};
  const take = (key: string, value: number | null | undefined, enabled: boolean | null | undefined) => {
    if (enabled && value !== null && value !== undefined && value > 0) out[key] = value;
  };
  take('temperature', p.temperature, p.temperatureEnabled);
  take('top_p', p.top_p, p.topPEnabled);
  take('max_tokens', p.max_tokens, p.maxTokensEnabled);
  take('presence_penalty', p.presence_penalty, p.presencePenaltyEnabled);
  take('frequency_penalty', p.frequency_penalty, p.frequencyPenaltyEnabled);
  return out;
}

/** The JSON schema asked for, from `outputs.structured` (or the older `output_structure`). */
export function structuredSchema(p: LlmParams): Record<string, unknown> | undefined {
  const candidates = [p.outputs?.structured, p.output_structure];
  for (const c of candidates) {
    if (!isRecord(c)) continue;
    for (const schema of [c, c.schema, c.structured]) {
      if (isRecord(schema) && isRecord(schema.properties) && Object.keys(schema.properties).length > 0) return schema;
    }
  }
  return undefined;
}

export function schemaInstructions(schema: Record<string, unknown>): string {
  return [
    'Answer with one JSON object only, no prose and no code fences, matching this JSON schema.',
    'Numbers are JSON numbers; booleans are true or false.',
    JSON.stringify(schema, null, 2),
  ].join('\n');
}

/**
 * System prompt, then the last `window` exchanges of the conversation without the current
 * user turn (the prompts bring it), then the configured prompts, references rendered.
 */
export async function buildMessages(
  p: LlmParams,
  ctx: ComponentContext,
  extraSystem: string[] = [],
): Promise<ChatMessage[]> {
  const window = p.message_history_window_size ?? DEFAULT_HISTORY_WINDOW;
  const history = [...ctx.history(window * 2)];
  if (history.at(-1)?.role === 'user') history.pop();
  const system = [await ctx.render(p.sys_prompt), ...extraSystem].filter((s) => s.trim() !== '').join('\n\n');
  const messages: ChatMessage[] = system ? [{ role: 'system', content: system }] : [];
  messages.push(...history.map((h) => ({ role: h.role, content: h.content })));
  for (const prompt of p.prompts) {
    messages.push({ role: prompt.role, content: await ctx.render(prompt.content) });
  }
  return messages;
}

/** The prompt as `buildMessages` makes it, with the files the params show (lib/components/attachments). */
export async function promptMessages(p: LlmParams, ctx: ComponentContext, extraSystem: string[] = []): Promise<ChatMessage[]> {
  return attachFiles(p, ctx, await buildMessages(p, ctx, extraSystem));
}

/** `visual_files_var`, when set, must be a variable reference to something that exists. */
export function checkFilesVariable(p: LlmParams, scope: CheckScope): Omit<DslProblem, 'component_id'>[] {
  const name = p.visual_files_var?.trim();
  return name ? checkVariable(name, scope, 'obj.params.visual_files_var') : [];
}

/**
 * One model call to its end, its tokens counted towards the turn. A call the turn has a record
 * of (`ctx.recordedCall`: a resumed batch, a replay against another version) is answered from
 * it, its tokens counted as they were; a recorded failure is asked again.
 */
export async function completeCounted(model: ChatModel, options: ChatOptions, ctx: ComponentContext): Promise<ChatResult> {
  const recorded = recordedAnswer(ctx, model, options);
  if (recorded) {
    ctx.recordUsage(recorded.usage);
    recordModelCall(ctx, model, options, { result: recorded, replayed: true });
    return recorded;
  }
  let result: ChatResult;
  try {
    result = await complete(model, { ...options, signal: ctx.signal });
  } catch (error) {
    recordModelCall(ctx, model, options, { error });
    throw error;
  }
  ctx.recordUsage(result.usage);
  recordModelCall(ctx, model, options, { result });
  return result;
}

/** The answer a record of this model call holds, when the turn has one that succeeded. */
export function recordedAnswer(ctx: ComponentContext, model: ChatModel, options: ChatOptions): ChatResult | undefined {
  const call = ctx.recordedCall({ kind: 'model', name: model.id, request: modelCallRequest(model, options) });
  if (call?.record.status !== 'ok' || !isRecord(call.record.result)) return undefined;
  const result = call.record.result as { text?: unknown; tool_calls?: ChatResult['toolCalls']; usage?: ChatResult['usage'] };
  if (typeof result.text !== 'string') return undefined;
  const toolCalls = Array.isArray(result.tool_calls) ? result.tool_calls : [];
  return { text: result.text, toolCalls, usage: result.usage ?? ZERO_USAGE, finishReason: toolCalls.length > 0 ? 'tool_calls' : 'stop' };
}

/** A model call as the turn records it: the model, what was sent (no signal), what came back. */
export function recordModelCall(ctx: ComponentContext, model: ChatModel, options: ChatOptions, outcome: { result?: Pick<ChatResult, 'text' | 'toolCalls' | 'usage'>; error?: unknown; replayed?: boolean }): void {
  ctx.recordCall({
    kind: 'model',
    name: model.id,
    request: modelCallRequest(model, options),
    ...(outcome.replayed ? { replayed: true } : {}),
    ...(outcome.result
      ? { result: { text: outcome.result.text, ...(outcome.result.toolCalls.length > 0 ? { tool_calls: outcome.result.toolCalls } : {}), usage: outcome.result.usage } }
      : { error: outcome.error instanceof Error ? outcome.error.message : String(outcome.error) }),
  });
}

/** The request of a model call as its record hashes it: the model and what was sent, no signal, images by hash. */
export function modelCallRequest(model: ChatModel, options: ChatOptions): unknown {
  const { signal: _signal, messages, ...request } = options;
  return { model: model.id, ...request, messages: messages.map((m) => ({ ...m, content: recordedContent(m.content) })) };
}

const imageHashes = new WeakMap<Uint8Array, string>();

/** Content as a call record hashes it: an image by its type, size and sha256, never its bytes. */
function recordedContent(content: MessageContent): unknown {
  if (typeof content === 'string') return content;
  return content.map((part) => {
    if (part.type === 'text') return part;
    let sha = imageHashes.get(part.bytes);
    if (!sha) {
      sha = createHash('sha256').update(part.bytes).digest('hex');
      imageHashes.set(part.bytes, sha);
    }
    return { type: 'image', mime_type: part.mime_type, size: part.bytes.byteLength, sha256: sha };
  });
}

/** Reads a JSON object out of a model's answer: think blocks and code fences are dropped. */
export function parseJsonAnswer(text: string): Record<string, unknown> | undefined {
  let t = text;
  const think = t.lastIndexOf('</think>');
  if (think >= 0) t = t.slice(think + '</think>'.length);
  const fenced = /```(?:json)?\s*([\s\S]*?)```/i.exec(t);
  if (fenced?.[1] !== undefined) t = fenced[1];
  const start = t.indexOf('{');
  const end = t.lastIndexOf('}');
  if (start < 0 || end <= start) return undefined;
  try {
    const parsed: unknown = JSON.parse(t.slice(start, end + 1));
    return isRecord(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Asks for a structured answer, re-asking up to `max_retries` more times when the answer is
 * not a JSON object.
 */
export async function structuredAnswer(
  model: ChatModel,
  messages: ChatMessage[],
  p: LlmParams,
  ctx: ComponentContext,
): Promise<{ text: string; structured: Record<string, unknown> }> {
  const attempts = (p.max_retries ?? 0) + 1;
  const conversation = [...messages];
  for (let i = 0; i < attempts; i++) {
    const { text } = await completeCounted(model, { messages: conversation, json: true, ...samplingOptions(p) }, ctx);
    const structured = parseJsonAnswer(text);
    if (structured) return { text, structured };
    conversation.push({ role: 'assistant', content: text }, { role: 'user', content: 'That answer is not a JSON object. Answer again with the JSON object only.' });
  }
  throw new ComponentError(`the model did not answer with a JSON object after ${attempts} attempt(s)`);
}
