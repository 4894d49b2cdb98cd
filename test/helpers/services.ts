import { services } from '../../lib/components/services';
import type { RunKnowledge } from '../../lib/knowledge/types';
import { createModelResolver, DEFAULT_RETRY, type LlmSettings } from '../../lib/llm';
import { type Resolver, SsrfGuard } from '../../lib/outbound/ssrf';

export const TEST_API_KEY = 'sk-easel-test-KEY-never-shown-0451';

/** Services for a run: models from a local OpenAI-compatible server (or echo), loopback allowed, knowledge when given. */
export function testServices(options: { openaiUrl?: string; defaultModel?: string; models?: Record<string, string>; allow?: string[]; resolve?: Resolver; secrets?: Record<string, string>; timeoutMs?: number; knowledge?: RunKnowledge } = {}) {
  const settings: LlmSettings = {
    ...(options.openaiUrl ? { openai: { baseUrl: options.openaiUrl, apiKey: TEST_API_KEY } } : {}),
    defaultModel: options.defaultModel ?? (options.openaiUrl ? 'openai:test-default' : 'echo'),
    models: options.models ?? {},
    // a slow answer on a loaded machine is not a lost one: tests of timeouts set their own
    timeoutMs: options.timeoutMs ?? 60_000,
    retry: { ...DEFAULT_RETRY, baseDelayMs: 5, maxDelayMs: 20 },
  };
  return services({
    models: createModelResolver(settings),
    guard: new SsrfGuard({ allow: options.allow ?? [], ...(options.resolve ? { resolve: options.resolve } : {}) }),
    secret: (name) => options.secrets?.[name],
    ...(options.knowledge ? { knowledge: options.knowledge } : {}),
  });
}
