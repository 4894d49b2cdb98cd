/**
 * The real Bedrock provider — the real AWS SDK client, SigV4 signing, HTTP/2 and the binary
 * event-stream decoder — against a local server that speaks ConverseStream.
 */
import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { JSON_INSTRUCTION, createBedrockProvider, redact, type BedrockProviderOptions } from '../../lib/llm/bedrock';
import { LlmError, LlmTransientError } from '../../lib/llm/errors';
import type { RetryPolicy } from '../../lib/llm/retry';
import type { ChatEvent, ChatRequest } from '../../lib/llm/types';
import { TransientError } from '../../lib/canvas/errors';
import {
  BedrockTestServer,
  stallMidStream,
  streamException,
  textAnswer,
  throttling,
  toolUseAnswer,
  validation,
} from './bedrock-server';

const MODEL = 'anthropic.claude-3-5-haiku-20241022-v1:0';
const ACCESS_KEY_ID = 'AKIAEASELTESTFAKE0001';
const SECRET = 'sEcReT/EaselFakeSecretAccessKey+0123456789';
const SESSION_TOKEN = 'FwoGZXIvYXdzEaselFakeSessionToken//////////wEaDNotARealTokenAtAll==';
const FAST: RetryPolicy = { attempts: 3, baseDelayMs: 5, maxDelayMs: 20 };

let server: BedrockTestServer;
/** Every error a provider threw in this file, checked for secrets at the end. */
const thrown: unknown[] = [];

beforeAll(async () => {
  server = await BedrockTestServer.start();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => server.reset());

function provider(overrides: Partial<BedrockProviderOptions> = {}) {
  return createBedrockProvider({
    region: 'us-east-1',
    endpoint: server.endpoint,
    credentials: { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET, sessionToken: SESSION_TOKEN },
    timeoutMs: 2_000,
    retry: FAST,
    ...overrides,
  });
}

function request(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return { model: MODEL, messages: [{ role: 'user', content: 'Hello?' }], ...overrides };
}

async function collect(events: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const out: ChatEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

async function failure(events: AsyncIterable<ChatEvent>, seen: ChatEvent[] = []): Promise<unknown> {
  try {
    for await (const event of events) seen.push(event);
  } catch (error) {
    thrown.push(error);
    return error;
  }
  throw new Error('expected the chat to fail');
}

describe('bedrock provider (real SDK against a local ConverseStream server)', () => {
  it('streams text deltas as several text events, then done with usage', async () => {
    server.enqueue(textAnswer('Hello from Bedrock, streamed in parts.', { deltas: 4, usage: { inputTokens: 12, outputTokens: 8 } }));
    const events = await collect(provider().chat(request()));

    const texts = events.filter((e) => e.type === 'text');
    expect(texts).toHaveLength(4);
    expect(texts.map((e) => (e.type === 'text' ? e.text : '')).join('')).toBe('Hello from Bedrock, streamed in parts.');
    expect(events.at(-1)).toEqual({
      type: 'done',
      usage: { prompt_tokens: 12, completion_tokens: 8, total_tokens: 20 },
      finish_reason: 'stop',
    });
    expect(events.filter((e) => e.type === 'done')).toHaveLength(1);

    expect(server.calls).toBe(1);
    const [recorded] = server.requests;
    expect(recorded!.method).toBe('POST');
    expect(recorded!.modelId).toBe(MODEL);
    expect(recorded!.path).toBe(`/model/${encodeURIComponent(MODEL)}/converse-stream`);
    // Really signed by the SDK (SigV4 with our fake key id), never carrying the secret itself.
    expect(recorded!.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAEASELTESTFAKE0001\/\d{8}\/us-east-1\/bedrock\/aws4_request/);
    expect(recorded!.headers['x-amz-security-token']).toBe(SESSION_TOKEN);
    expect(JSON.stringify(recorded!.headers)).not.toContain(SECRET);
    expect(recorded!.body).toEqual({ messages: [{ role: 'user', content: [{ text: 'Hello?' }] }] });
  });

  it('decodes frames split across arbitrary chunk boundaries and maps the stop reason', async () => {
    server.enqueue(textAnswer('ok, cut short', { deltas: 3, chunkBytes: 7, stopReason: 'max_tokens' }));
    const events = await collect(provider().chat(request()));
    expect(events.filter((e) => e.type === 'text').map((e) => (e.type === 'text' ? e.text : '')).join('')).toBe('ok, cut short');
    expect(events.at(-1)).toMatchObject({ type: 'done', finish_reason: 'length' });
  });

  it('maps system, user, assistant tool calls, tool results, tools and inference settings', async () => {
    server.enqueue(textAnswer('done'));
    await collect(
      provider().chat(
        request({
          messages: [
            { role: 'system', content: 'You are a weather bot.' },
            { role: 'user', content: 'Weather in Paris and Rome?' },
            {
              role: 'assistant',
              content: '',
              tool_calls: [
                { id: 'tu_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
                { id: 'tu_2', name: 'get_weather', arguments: '{"city":"Rome","unit":"C"}' },
              ],
            },
            { role: 'tool', tool_call_id: 'tu_1', content: '18C, cloudy' },
            { role: 'tool', tool_call_id: 'tu_2', content: '24C, sunny' },
            { role: 'assistant', content: 'Paris 18C, Rome 24C.' },
            { role: 'user', content: 'Thanks. As JSON please.' },
          ],
          tools: [
            {
              name: 'get_weather',
              description: 'Current weather of a city',
              parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
            },
          ],
          temperature: 0.25,
          top_p: 0.5,
          max_tokens: 256,
          json: true,
        }),
      ),
    );

    const body = server.requests[0]!.body;
    expect(body.system).toEqual([{ text: 'You are a weather bot.' }, { text: JSON_INSTRUCTION }]);
    expect(body.messages).toEqual([
      { role: 'user', content: [{ text: 'Weather in Paris and Rome?' }] },
      {
        role: 'assistant',
        content: [
          { toolUse: { toolUseId: 'tu_1', name: 'get_weather', input: { city: 'Paris' } } },
          { toolUse: { toolUseId: 'tu_2', name: 'get_weather', input: { city: 'Rome', unit: 'C' } } },
        ],
      },
      {
        // Consecutive tool results become one user message: Converse wants alternating roles.
        role: 'user',
        content: [
          { toolResult: { toolUseId: 'tu_1', content: [{ text: '18C, cloudy' }] } },
          { toolResult: { toolUseId: 'tu_2', content: [{ text: '24C, sunny' }] } },
        ],
      },
      { role: 'assistant', content: [{ text: 'Paris 18C, Rome 24C.' }] },
      { role: 'user', content: [{ text: 'Thanks. As JSON please.' }] },
    ]);
    expect(body.toolConfig).toEqual({
      tools: [
        {
          toolSpec: {
            name: 'get_weather',
            description: 'Current weather of a city',
            inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
          },
        },
      ],
    });
    expect(body.inferenceConfig).toEqual({ maxTokens: 256, temperature: 0.25, topP: 0.5 });
  });

  it('turns a streamed toolUse block into one tool_call with the full JSON arguments', async () => {
    const input = { city: 'Paris', days: 3, units: { temp: 'C' }, note: 'quotes " and \\ survive' };
    server.enqueue(
      toolUseAnswer([{ toolUseId: 'tooluse_abc123', name: 'get_forecast', input, fragments: 6 }], {
        text: 'Let me check.',
        usage: { inputTokens: 30, outputTokens: 15 },
      }),
    );
    const events = await collect(provider().chat(request()));

    expect(events.map((e) => e.type)).toEqual(['text', 'tool_call', 'done']);
    const calls = events.flatMap((e) => (e.type === 'tool_call' ? [e.call] : []));
    expect(calls).toHaveLength(1);
    expect(calls[0]!.id).toBe('tooluse_abc123');
    expect(calls[0]!.name).toBe('get_forecast');
    expect(JSON.parse(calls[0]!.arguments)).toEqual(input);
    expect(events.at(-1)).toEqual({
      type: 'done',
      usage: { prompt_tokens: 30, completion_tokens: 15, total_tokens: 45 },
      finish_reason: 'tool_calls',
    });
  });

  it('retries a 429 ThrottlingException once and delivers the answer', async () => {
    server.enqueue(throttling(), textAnswer('after the storm', { deltas: 2 }));
    const events = await collect(provider().chat(request()));
    expect(events.filter((e) => e.type === 'text').map((e) => (e.type === 'text' ? e.text : '')).join('')).toBe('after the storm');
    expect(events.at(-1)).toMatchObject({ type: 'done', finish_reason: 'stop' });
    expect(server.calls).toBe(2);
  });

  it('gives up on 429 forever with LlmTransientError after `attempts` calls, keeping Retry-After', async () => {
    server.always(throttling({ retryAfter: '0.01' }));
    const error = await failure(provider({ retry: { ...FAST, attempts: 4 } }).chat(request()));
    expect(error).toBeInstanceOf(LlmTransientError);
    expect(error).toBeInstanceOf(TransientError);
    const e = error as LlmTransientError;
    expect(e.status).toBe(429);
    expect(e.retryAfterMs).toBe(10);
    expect(e.message).toContain(MODEL);
    expect(e.message).toContain('ThrottlingException');
    expect(e.message).toContain('Too many requests');
    expect(server.calls).toBe(4);
  });

  it('fails a 400 ValidationException as a permanent LlmError after exactly one call', async () => {
    server.always(validation('Malformed input request: messages.0 is invalid.'));
    const error = await failure(provider().chat(request()));
    expect(error).toBeInstanceOf(LlmError);
    expect(error).not.toBeInstanceOf(TransientError);
    const e = error as LlmError;
    expect(e.status).toBe(400);
    expect(e.code).toBe('llm_error');
    expect(e.message).toContain(MODEL);
    expect(e.message).toContain('ValidationException');
    expect(e.message).toContain('messages.0 is invalid');
    expect(server.calls).toBe(1);
  });

  it('times out a response that stalls mid-stream with LlmTransientError, without hanging', async () => {
    server.always(stallMidStream());
    const timeoutMs = 250;
    const started = Date.now();
    const error = await failure(provider({ timeoutMs, retry: { ...FAST, attempts: 1 } }).chat(request()));
    const elapsed = Date.now() - started;
    expect(error).toBeInstanceOf(LlmTransientError);
    expect((error as Error).message).toContain('timeout');
    expect((error as Error).message).toContain(MODEL);
    // not before the deadline (after it, however loaded the machine: the message says why it ended)
    expect(elapsed).toBeGreaterThanOrEqual(timeoutMs - 20);
    expect(server.calls).toBe(1);
  });

  it('times out a request that never gets response headers, and retries it', async () => {
    server.enqueue({ kind: 'stall' }, textAnswer('second time lucky', { deltas: 2 }));
    const timeoutMs = 200;
    const events = await collect(provider({ timeoutMs }).chat(request()));
    expect(events.at(-1)).toMatchObject({ type: 'done', finish_reason: 'stop' });
    expect(server.calls).toBe(2);
  });

  it('does not retry a stall once text has reached the reader', async () => {
    server.always(stallMidStream(['partial ', 'answer']));
    const seen: ChatEvent[] = [];
    const error = await failure(provider({ timeoutMs: 200 }).chat(request()), seen);
    expect(error).toBeInstanceOf(LlmTransientError);
    expect(seen).toEqual([
      { type: 'text', text: 'partial ' },
      { type: 'text', text: 'answer' },
    ]);
    expect(server.calls).toBe(1);
  });

  it('retries an exception frame inside the event stream that comes before any text', async () => {
    server.enqueue(streamException('throttlingException', 'Rate exceeded mid-stream'), textAnswer('recovered'));
    const events = await collect(provider().chat(request()));
    expect(events.at(-1)).toMatchObject({ type: 'done' });
    expect(server.calls).toBe(2);

    server.reset();
    server.always(streamException('validationException', 'Bad tool schema'));
    const error = await failure(provider().chat(request()));
    expect(error).toBeInstanceOf(LlmError);
    expect((error as Error).message).toContain('ValidationException');
    expect(server.calls).toBe(1);
  });

  it('stops at once, without retrying, when the caller aborts', async () => {
    server.always(stallMidStream());
    const controller = new AbortController();
    void server.arrived(server.calls + 1).then(() => controller.abort());
    // a call that did not stop would end in its timeout, a minute later (the test's timeout first)
    const error = await failure(provider({ timeoutMs: 60_000 }).chat(request({ signal: controller.signal })));
    expect(error).toBeInstanceOf(LlmTransientError);
    expect((error as Error).message).toContain('cancelled');
    expect(server.calls).toBe(1);
  });

  it('releases a stalled stream promptly when the reader stops early', async () => {
    server.always(stallMidStream(['first']));
    const seen: ChatEvent[] = [];
    // a reader that waited for the stalled stream would wait for its ten-minute timeout (the test's first)
    for await (const event of provider({ timeoutMs: 600_000 }).chat(request())) {
      seen.push(event);
      break;
    }
    expect(seen).toEqual([{ type: 'text', text: 'first' }]);
  });

  it('rejects tool-call arguments that are not a JSON object before calling the service', async () => {
    const error = await failure(
      provider().chat(
        request({
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: '', tool_calls: [{ id: 't1', name: 'f', arguments: '[1,2' }] },
            { role: 'tool', tool_call_id: 't1', content: 'x' },
          ],
        }),
      ),
    );
    expect(error).toBeInstanceOf(LlmError);
    expect(server.calls).toBe(0);
  });

  it('redacts credentials even when the service echoes them back', async () => {
    server.always(validation(`The security token ${SESSION_TOKEN} for ${ACCESS_KEY_ID} / ${SECRET} is invalid`));
    const error = await failure(provider().chat(request()));
    expect(error).toBeInstanceOf(LlmError);
    expect((error as Error).message).toContain('[redacted]');
    expect(redact(`key ${SECRET} and AKIAIOSFODNN7EXAMPLE`, [SECRET])).toBe('key [redacted] and [redacted]');
  });

  it('treats a refused connection as a transient network error', async () => {
    const closed = await closedPort();
    const error = await failure(provider({ endpoint: `http://127.0.0.1:${closed}`, retry: { ...FAST, attempts: 2 } }).chat(request()));
    expect(error).toBeInstanceOf(LlmTransientError);
    expect((error as Error).message).toContain(MODEL);
    expect((error as Error).message).toMatch(/network error/);
  });

  it('never puts credentials in any thrown error (message, JSON, stack, string form)', async () => {
    // Its own failures of every kind, plus whatever the tests above collected.
    server.enqueue(throttling(), throttling(), validation(), { kind: 'stall' });
    const fast = provider({ timeoutMs: 150, retry: { ...FAST, attempts: 2 } });
    await failure(fast.chat(request()));
    await failure(fast.chat(request()));
    await failure(provider({ timeoutMs: 150, retry: { ...FAST, attempts: 1 } }).chat(request()));
    await failure(provider({ endpoint: `http://127.0.0.1:${await closedPort()}`, retry: { ...FAST, attempts: 1 } }).chat(request()));
    expect(thrown.length).toBeGreaterThanOrEqual(4);
    for (const error of thrown) {
      const e = error as Error;
      const forms = [e.message, JSON.stringify(e), String(e), e.stack ?? '', JSON.stringify(Object.entries(e))];
      for (const form of forms) {
        expect(form).not.toContain(SECRET);
        expect(form).not.toContain(SESSION_TOKEN);
        expect(form).not.toContain(ACCESS_KEY_ID);
      }
      expect(e.cause).toBeUndefined();
    }
  });
});
