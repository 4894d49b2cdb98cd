import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TransientError } from '../../lib/canvas';
import { complete, createOpenAiProvider, LlmError, LlmTransientError } from '../../lib/llm';
import type { ChatEvent, ChatProvider } from '../../lib/llm';
import { OpenAiServer } from './openai-server';

const FAST_RETRY = { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 };
const KEY = 'sk-test-0123456789-secret';

let server: OpenAiServer;
let provider: ChatProvider;

beforeEach(async () => {
  server = await OpenAiServer.start();
  provider = createOpenAiProvider({ baseUrl: server.url, apiKey: KEY, timeoutMs: 2000, retry: FAST_RETRY });
});
afterEach(async () => {
  await server.close();
});

async function events(request: Parameters<ChatProvider['chat']>[0]): Promise<ChatEvent[]> {
  const out: ChatEvent[] = [];
  for await (const e of provider.chat(request)) out.push(e);
  return out;
}

const bound = (model = 'gpt-test') => ({ id: `openai:${model}`, chat: (o: Parameters<ChatProvider['chat']>[0]) => provider.chat({ ...o, model }) });

describe('OpenAI-compatible provider against a local server', () => {
  it('streams text deltas, then usage, sending the key and the request in the protocol', async () => {
    server.enqueue({ kind: 'text', text: 'Hello there, human.', chunks: 4 });
    const out = await events({ model: 'gpt-test', messages: [{ role: 'system', content: 'be kind' }, { role: 'user', content: 'hi' }], temperature: 0.2 });
    const texts = out.filter((e) => e.type === 'text');
    expect(texts.length).toBe(4);
    expect(texts.map((e) => (e.type === 'text' ? e.text : '')).join('')).toBe('Hello there, human.');
    expect(out.at(-1)).toEqual({ type: 'done', usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 }, finish_reason: 'stop' });
    const [req] = server.requests;
    expect(req?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req?.body).toMatchObject({ model: 'gpt-test', stream: true, temperature: 0.2, messages: [{ role: 'system', content: 'be kind' }, { role: 'user', content: 'hi' }] });
  });

  it('reads a whole JSON completion from a server that does not stream', async () => {
    server.enqueue({ kind: 'text', text: 'all at once', stream: false });
    const result = await complete(bound(), { messages: [{ role: 'user', content: 'x' }] });
    expect(result).toMatchObject({ text: 'all at once', finishReason: 'stop', usage: { total_tokens: 16 } });
  });

  it.each([true, false])('assembles tool calls from fragments (stream %s) and sends tools and tool results', async (stream) => {
    server.enqueue({ kind: 'tools', calls: [{ name: 'lookup_0', arguments: { user_prompt: 'find the weather in Oslo' } }, { name: 'lookup_0', arguments: { user_prompt: 'and Lima' } }], stream });
    const result = await complete(bound(), {
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'c0', name: 'lookup_0', arguments: '{}' }] },
        { role: 'tool', content: 'sunny', tool_call_id: 'c0' },
      ],
      tools: [{ name: 'lookup_0', description: 'looks things up', parameters: { type: 'object', properties: {} } }],
    });
    expect(result.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ['lookup_0', { user_prompt: 'find the weather in Oslo' }],
      ['lookup_0', { user_prompt: 'and Lima' }],
    ]);
    expect(result.finishReason).toBe('tool_calls');
    const body = server.requests[0]?.body;
    expect(body?.tools?.[0]).toEqual({ type: 'function', function: { name: 'lookup_0', description: 'looks things up', parameters: { type: 'object', properties: {} } } });
    expect(body?.messages[1]).toMatchObject({ role: 'assistant', tool_calls: [{ id: 'c0', type: 'function', function: { name: 'lookup_0', arguments: '{}' } }] });
    expect(body?.messages[2]).toEqual({ role: 'tool', content: 'sunny', tool_call_id: 'c0' });
  });

  it('retries a 429 with backoff and succeeds, calling twice', async () => {
    server.enqueue({ kind: 'status', status: 429, message: 'slow down', headers: { 'retry-after': '0' } }, { kind: 'text', text: 'finally' });
    const result = await complete(bound(), { messages: [{ role: 'user', content: 'x' }] });
    expect(result.text).toBe('finally');
    expect(server.calls).toBe(2);
  });

  it('gives up after the configured attempts with a transient error', async () => {
    server.respond = () => ({ kind: 'status', status: 503, message: 'overloaded' });
    const error = await complete(bound(), { messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmTransientError);
    expect(error).toBeInstanceOf(TransientError);
    expect((error as Error).message).toContain('503: overloaded');
    expect(server.calls).toBe(3);
  });

  it('does not retry a permanent refusal', async () => {
    server.enqueue({ kind: 'status', status: 400, message: 'bad request: unknown model' });
    const error = await complete(bound(), { messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmError);
    expect((error as LlmError).status).toBe(400);
    expect(server.calls).toBe(1);
  });

  it('times out a stalled answer as transient, within the deadline', async () => {
    server.respond = () => ({ kind: 'stall' });
    const fast = createOpenAiProvider({ baseUrl: server.url, apiKey: KEY, timeoutMs: 150, retry: { ...FAST_RETRY, attempts: 2 } });
    const error = await complete({ id: 'openai:x', chat: (o) => fast.chat({ ...o, model: 'x' }) }, { messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmTransientError);
    // the deadline ended each attempt (the message says so), not a hang ended by something else
    expect((error as Error).message).toMatch(/no answer within 150 ms/);
    expect(server.calls).toBe(2);
  });

  it('reports an unreachable endpoint as transient and never shows the key', async () => {
    const port = Number(new URL(server.url).port);
    await server.close();
    const gone = createOpenAiProvider({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: KEY, timeoutMs: 500, retry: { ...FAST_RETRY, attempts: 1 } });
    const error = await complete({ id: 'openai:x', chat: (o) => gone.chat({ ...o, model: 'x' }) }, { messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmTransientError);
    expect(JSON.stringify(error) + String(error) + (error as Error).stack).not.toContain(KEY);
    server = await OpenAiServer.start(); // for afterEach
  });
});
