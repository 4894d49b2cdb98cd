/**
 * The banner's line about the model runs answer with. `echo` (the default when no model is
 * configured) only repeats its prompt: a person trying a template must know that what answered
 * was a stand-in, and how to configure a real model, before reading its answers as a model's.
 */
import type { LlmSettings } from '../llm/models';

export function modelBanner(llm: Pick<LlmSettings, 'defaultModel' | 'models'>): string {
  const mapped = Object.keys(llm.models).length;
  const also = mapped > 0 ? `; ${mapped} llm_id${mapped === 1 ? '' : 's'} mapped by EASEL_LLM_MODELS` : '';
  if (llm.defaultModel !== 'echo') return `Model: ${llm.defaultModel} for every llm_id not mapped${also}`;
  return `Model: echo for every llm_id not mapped${also}. echo is a stand-in, not a language model: it repeats the prompt, so answers, Categorize branches and Agent tool calls are not a model's. For a real model set EASEL_LLM_BASE_URL and EASEL_LLM_DEFAULT_MODEL (e.g. openai:gpt-4o-mini), or EASEL_LLM_DEFAULT_MODEL=bedrock:<model id>.`;
}
