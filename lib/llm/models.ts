/**
 * From a component's `llm_id` to a model. Models are named `openai:<model>`,
 * `bedrock:<model id>` or `echo`; the operator maps `llm_id`s to them (EASEL_LLM_MODELS) and
 * picks a default (EASEL_LLM_DEFAULT_MODEL). An empty or unmapped `llm_id` — RAGFlow templates
 * carry ids like `qwen-turbo@Tongyi-Qianwen` — uses the default. Providers are created on first
 * use, so a deployment that never calls Bedrock never loads its SDK.
 */
import { createEchoModel, ECHO_MODEL_ID } from './echo';
import { createOpenAiProvider } from './openai';
import type { RetryPolicy } from './retry';
import type { ChatEvent, ChatModel, ChatOptions, ChatProvider } from './types';

export interface LlmSettings {
  openai?: { baseUrl: string; apiKey?: string | (() => Promise<string | undefined>) };
  bedrock?: { region: string; endpoint?: string };
  /** A model spec. */
  defaultModel: string;
  /** `llm_id` -> model spec. */
  models: Readonly<Record<string, string>>;
  timeoutMs: number;
  retry: RetryPolicy;
}

export type ModelSpec = { provider: 'echo'; model: 'echo' } | { provider: 'openai' | 'bedrock'; model: string };

/** Parses `openai:gpt-4o-mini`, `bedrock:anthropic.claude-3-haiku-20240307-v1:0`, `echo`. */
export function parseModelSpec(spec: string): ModelSpec | undefined {
  const trimmed = spec.trim();
  if (trimmed === ECHO_MODEL_ID) return { provider: 'echo', model: 'echo' };
  const colon = trimmed.indexOf(':');
  if (colon <= 0) return undefined;
  const provider = trimmed.slice(0, colon);
  const model = trimmed.slice(colon + 1).trim();
  if (model === '' || (provider !== 'openai' && provider !== 'bedrock')) return undefined;
  return { provider, model };
}

/** Problems with the settings, as sentences naming the variable; empty when usable. */
export function checkLlmSettings(settings: LlmSettings): string[] {
  const problems: string[] = [];
  const check = (spec: string, where: string) => {
    const parsed = parseModelSpec(spec);
    if (!parsed) problems.push(`${where}: "${spec}" is not a model (use openai:<model>, bedrock:<model id> or echo)`);
    else if (parsed.provider === 'openai' && !settings.openai) {
      problems.push(`${where}: "${spec}" needs EASEL_LLM_BASE_URL`);
    }
  };
  check(settings.defaultModel, 'EASEL_LLM_DEFAULT_MODEL');
  for (const [id, spec] of Object.entries(settings.models)) check(spec, `EASEL_LLM_MODELS["${id}"]`);
  return problems;
}

export interface ModelResolver {
  resolve(llmId: string | null | undefined): ChatModel;
}

export function createModelResolver(
  settings: LlmSettings,
  overrides: { openai?: ChatProvider; bedrock?: ChatProvider } = {},
): ModelResolver {
  const providers = new Map<string, Promise<ChatProvider>>();
  const provider = (name: 'openai' | 'bedrock'): Promise<ChatProvider> => {
    let p = providers.get(name);
    if (!p) {
      p = overrides[name] ? Promise.resolve(overrides[name]) : createProvider(name, settings);
      providers.set(name, p);
    }
    return p;
  };
  const echo = createEchoModel();
  const bind = (spec: ModelSpec): ChatModel => {
    if (spec.provider === 'echo') return echo;
    const { provider: name, model } = spec;
    return {
      id: `${name}:${model}`,
      async *chat(options: ChatOptions): AsyncGenerator<ChatEvent, void, undefined> {
        yield* (await provider(name)).chat({ ...options, model });
      },
    };
  };
  const fallback = parseModelSpec(settings.defaultModel) ?? { provider: 'echo', model: 'echo' };
  return {
    resolve(llmId) {
      const mapped = llmId ? settings.models[llmId] : undefined;
      return bind((mapped && parseModelSpec(mapped)) || fallback);
    },
  };
}

async function createProvider(name: 'openai' | 'bedrock', settings: LlmSettings): Promise<ChatProvider> {
  if (name === 'openai') {
    if (!settings.openai) throw new Error('no OpenAI-compatible endpoint configured (EASEL_LLM_BASE_URL)');
    return createOpenAiProvider({ ...settings.openai, timeoutMs: settings.timeoutMs, retry: settings.retry });
  }
  const { createBedrockProvider } = await import('./bedrock');
  return createBedrockProvider({
    region: settings.bedrock?.region ?? 'us-east-1',
    ...(settings.bedrock?.endpoint ? { endpoint: settings.bedrock.endpoint } : {}),
    timeoutMs: settings.timeoutMs,
    retry: settings.retry,
  });
}
