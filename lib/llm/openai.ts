/**
 * OpenAI-compatible chat completions (OpenAI, Azure-style gateways, vLLM, Ollama, ...):
 * POST {baseUrl}/chat/completions with `stream: true`, read as server-sent events. The key is
 * held in this closure only; errors name the status and the provider's message, never the
 * key or the prompt.
 */
import { LlmError, LlmTransientError, isTransientStatus, retryAfterMs } from './errors';
import { type RetryPolicy, retrying } from './retry';
import { sseData } from './sse';
import { type ChatEvent, type ChatMessage, type ChatProvider, type ChatRequest, contentText, type ToolCall, type Usage } from './types';

export interface OpenAiOptions {
  baseUrl: string;
  /** The key, or where to get it at run time (e.g. an SSM parameter, cached by the reader). */
  apiKey?: string | (() => Promise<string | undefined>);
  timeoutMs: number;
  retry: RetryPolicy;
  /** Extra headers, e.g. an organization id. Not for secrets other than the key. */
  headers?: Record<string, string>;
}

export function createOpenAiProvider(options: OpenAiOptions): ChatProvider {
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  const base: Record<string, string> = { 'content-type': 'application/json', accept: 'text/event-stream', ...options.headers };
  const headers = async (): Promise<Record<string, string>> => {
    const key = typeof options.apiKey === 'function' ? await options.apiKey() : options.apiKey;
    return key ? { ...base, authorization: `Bearer ${key}` } : base;
  };
  return {
    name: 'openai',
    chat: (request) => retrying(async function* () {
      yield* attempt(url, await headers(), request, options.timeoutMs);
    }, options.retry, request.signal),
  };
}

async function* attempt(
  url: string,
  headers: Record<string, string>,
  request: ChatRequest,
  timeoutMs: number,
): AsyncGenerator<ChatEvent, void, undefined> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
  const fail = (error: unknown): never => {
    if (error instanceof LlmError || error instanceof LlmTransientError) throw error;
    if (timeout.aborted) throw new LlmTransientError(`${request.model}: no answer within ${timeoutMs} ms`);
    if (request.signal?.aborted) throw new LlmTransientError(`${request.model}: the call was cancelled`);
    throw new LlmTransientError(`${request.model}: ${networkMessage(error)}`, undefined, undefined, { cause: error });
  };

  let response: Response;
  try {
    response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body(request)), signal });
  } catch (error) {
    return fail(error);
  }
  if (!response.ok) {
    const detail = await errorDetail(response);
    const message = `${request.model}: the provider answered ${response.status}${detail ? `: ${detail}` : ''}`;
    if (isTransientStatus(response.status)) {
      throw new LlmTransientError(message, response.status, retryAfterMs(response.headers.get('retry-after')));
    }
    throw new LlmError(message, response.status);
  }
  if (!response.body) throw new LlmError(`${request.model}: the provider sent an empty answer`);
  if ((response.headers.get('content-type') ?? '').includes('application/json')) {
    // a gateway that ignores `stream: true` answers with one whole completion
    let whole: string;
    try {
      whole = await response.text();
    } catch (error) {
      return fail(error);
    }
    yield* wholeCompletion(whole, request.model);
    return;
  }

  const calls = new Map<number, ToolCall>();
  let usage: Usage | undefined;
  let finish = 'stop';
  try {
    for await (const data of sseData(response.body)) {
      if (data.trim() === '[DONE]') break;
      const chunk = parseChunk(data, request.model);
      if (chunk.usage) usage = toUsage(chunk.usage);
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      const text = choice.delta?.content;
      if (typeof text === 'string' && text !== '') yield { type: 'text', text };
      for (const part of choice.delta?.tool_calls ?? []) {
        const index = part.index ?? 0;
        const call = calls.get(index) ?? { id: '', name: '', arguments: '' };
        if (part.id) call.id = part.id;
        if (part.function?.name) call.name += part.function.name;
        if (part.function?.arguments) call.arguments += part.function.arguments;
        calls.set(index, call);
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  } catch (error) {
    fail(error);
  }
  for (const [index, call] of [...calls.entries()].sort(([a], [b]) => a - b)) {
    yield { type: 'tool_call', call: { ...call, id: call.id || `call_${index}`, arguments: call.arguments || '{}' } };
  }
  yield { type: 'done', usage: usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 }, finish_reason: finish };
}

function* wholeCompletion(text: string, model: string): Generator<ChatEvent, void, undefined> {
  const parsed = parseChunk(text, model) as Chunk & {
    choices?: { message?: { content?: unknown; tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[] }; finish_reason?: string | null }[];
  };
  const choice = parsed.choices?.[0];
  if (!choice) throw new LlmError(`${model}: the provider sent no choices`);
  const content = choice.message?.content;
  if (typeof content === 'string' && content !== '') yield { type: 'text', text: content };
  for (const [i, call] of (choice.message?.tool_calls ?? []).entries()) {
    yield { type: 'tool_call', call: { id: call.id || `call_${i}`, name: call.function?.name ?? '', arguments: call.function?.arguments || '{}' } };
  }
  yield {
    type: 'done',
    usage: parsed.usage ? toUsage(parsed.usage) : { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    finish_reason: choice.finish_reason ?? 'stop',
  };
}

function body(request: ChatRequest): Record<string, unknown> {
  const out: Record<string, unknown> = {
    model: request.model,
    stream: true,
    stream_options: { include_usage: true },
    messages: request.messages.map((m) => ({
      role: m.role,
      content: wireContent(m),
      ...(m.tool_calls?.length
        ? { tool_calls: m.tool_calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) }
        : {}),
      ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
    })),
  };
  if (request.tools?.length) {
    out.tools = request.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } }));
  }
  for (const key of ['temperature', 'top_p', 'max_tokens', 'presence_penalty', 'frequency_penalty'] as const) {
    if (request[key] !== undefined) out[key] = request[key];
  }
  if (request.json) out.response_format = { type: 'json_object' };
  return out;
}

/**
 * A message's content on the wire: a string, as always, unless a user message carries images;
 * then the parts, each image as an `image_url` part holding a `data:` URL (the form every
 * OpenAI-compatible vision API accepts). Other roles take text only.
 */
function wireContent(m: ChatMessage): string | Record<string, unknown>[] {
  if (typeof m.content === 'string') return m.content;
  if (m.role !== 'user' || !m.content.some((p) => p.type === 'image')) return contentText(m.content);
  return m.content.flatMap((p): Record<string, unknown>[] => {
    if (p.type === 'text') return p.text === '' ? [] : [{ type: 'text', text: p.text }];
    return [{ type: 'image_url', image_url: { url: `data:${p.mime_type};base64,${Buffer.from(p.bytes.buffer, p.bytes.byteOffset, p.bytes.byteLength).toString('base64')}` } }];
  });
}

interface Chunk {
  choices?: { delta?: { content?: unknown; tool_calls?: { index?: number; id?: string; function?: { name?: string; arguments?: string } }[] }; finish_reason?: string | null }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
}

function parseChunk(data: string, model: string): Chunk {
  try {
    return JSON.parse(data) as Chunk;
  } catch {
    throw new LlmError(`${model}: the provider sent a malformed stream`);
  }
}

function toUsage(u: NonNullable<Chunk['usage']>): Usage {
  const prompt = u.prompt_tokens ?? 0;
  const completion = u.completion_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: u.total_tokens ?? prompt + completion };
}

/** The provider's own error message, short; bodies can echo the request, so only `error.message`. */
async function errorDetail(response: Response): Promise<string> {
  try {
    const text = await response.text();
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const message = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message);
    return typeof message === 'string' ? message.slice(0, 300) : '';
  } catch {
    return '';
  }
}

function networkMessage(error: unknown): string {
  const cause = (error as { cause?: { code?: string } })?.cause;
  if (cause?.code) return `network error (${cause.code})`;
  return 'network error';
}
