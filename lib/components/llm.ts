/**
 * LLM: one model call over the system prompt, a window of the conversation and the prompts,
 * shown the files of `visual_files_var` and `sys.files` (lib/components/attachments).
 * When a Message downstream shows it live, the answer is a stream the Message reads (the model
 * is called then, once); otherwise, or when asked for structured output, it is called here.
 */
import { defineComponent } from '../canvas/component';
import { TextStream } from '../canvas/text-stream';
import type { ChatModel, ChatOptions } from '../llm/types';
import type { ComponentContext } from '../canvas/component';
import {
  DEFAULT_HISTORY_WINDOW,
  checkFilesVariable,
  completeCounted,
  promptMessages,
  recordedAnswer,
  recordModelCall,
  llmParams,
  samplingOptions,
  schemaInstructions,
  structuredAnswer,
  structuredSchema,
} from './llm-params';
import { citationInstructions, keepCited, wantsCitations } from './citations';
import { modelsOf } from './services';

export const llm = defineComponent({
  name: 'LLM',
  external: true,
  params: llmParams,
  historyWindow: (p) => p.message_history_window_size ?? DEFAULT_HISTORY_WINDOW,
  defaultOutput: 'content',
  check: (p, scope) => checkFilesVariable(p, scope),
  async invoke(p, ctx) {
    const model = modelsOf(ctx).resolve(p.llm_id);
    const schema = structuredSchema(p);
    const citing = wantsCitations(p, ctx);
    const cite = citationInstructions(citing);
    if (schema) {
      const messages = await promptMessages(p, ctx, [...cite, schemaInstructions(schema)]);
      const { text, structured } = await structuredAnswer(model, messages, p, ctx);
      if (citing) keepCited(ctx, text);
      return { outputs: { content: text, structured } };
    }
    const messages = await promptMessages(p, ctx, cite);
    const options: ChatOptions = { messages, ...samplingOptions(p) };
    if (ctx.downstreamStreams && !ctx.handlesErrors) {
      return { outputs: { content: new TextStream(streamAnswer(model, options, ctx, citing)) } };
    }
    const { text } = await completeCounted(model, options, ctx);
    if (citing) keepCited(ctx, text);
    return { outputs: { content: text } };
  },
});

/**
 * The answer as deltas; the usage is counted when the stream ends, and an answer that cites
 * narrows the references then, before the Message showing it sends its `message_end`.
 */
export async function* streamAnswer(model: ChatModel, options: ChatOptions, ctx: ComponentContext, citing = false): AsyncGenerator<string, void, undefined> {
  // a call the turn has a record of comes out as it was recorded, in one piece
  const recorded = recordedAnswer(ctx, model, options);
  if (recorded) {
    ctx.recordUsage(recorded.usage);
    recordModelCall(ctx, model, options, { result: recorded, replayed: true });
    if (recorded.text !== '') yield recorded.text;
    if (citing) keepCited(ctx, recorded.text);
    return;
  }
  let text = '';
  try {
    for await (const event of model.chat({ ...options, signal: ctx.signal })) {
      if (event.type === 'text') {
        text += event.text;
        yield event.text;
      } else if (event.type === 'done') {
        ctx.recordUsage(event.usage);
        recordModelCall(ctx, model, options, { result: { text, toolCalls: [], usage: event.usage } });
      }
    }
  } catch (error) {
    recordModelCall(ctx, model, options, { error });
    throw error;
  }
  if (citing) keepCited(ctx, text);
}
