/** Model providers behind one interface. */
export * from './types';
export { LlmError, LlmTransientError } from './errors';
export { DEFAULT_RETRY, type RetryPolicy } from './retry';
export { createEchoModel, ECHO_MODEL_ID } from './echo';
export { createOpenAiProvider, type OpenAiOptions } from './openai';
export { checkLlmSettings, createModelResolver, type LlmSettings, type ModelResolver, parseModelSpec } from './models';
