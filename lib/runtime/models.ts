/**
 * The model resolver from the LLM settings. An OpenAI-compatible key held in SSM
 * (EASEL_LLM_API_KEY_PARAMETER) is read when a request needs it, not before; Bedrock's SDK is
 * loaded by lib/llm on the first Bedrock call.
 */
import type { EaselConfig } from '../config';
import { createModelResolver, type LlmSettings, type ModelResolver } from '../llm/models';
import { type ParameterReader, ssmParameter } from './parameters';

export function buildModels(config: Pick<EaselConfig, 'llm' | 'secrets'>, read: ParameterReader = ssmParameter): ModelResolver {
  return createModelResolver(llmSettings(config, read));
}

/** The LLM settings with the OpenAI-compatible key read from SSM when one is configured there (chat and embeddings alike). */
export function llmSettings(config: Pick<EaselConfig, 'llm' | 'secrets'>, read: ParameterReader = ssmParameter): LlmSettings {
  const keyParameter = config.secrets.llmApiKeyParameter;
  return config.llm.openai && keyParameter
    ? { ...config.llm, openai: { ...config.llm.openai, apiKey: () => read(keyParameter) } }
    : config.llm;
}
