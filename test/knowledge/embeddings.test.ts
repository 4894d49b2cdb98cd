import { createServer } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EaselError } from '../../lib/errors';
import { createEmbedder } from '../../lib/knowledge/local/embeddings';
import { LlmError, LlmTransientError } from '../../lib/llm/errors';
import type { LlmSettings } from '../../lib/llm/models';
import type { RetryPolicy } from '../../lib/llm/retry';
import { BedrockEmbeddingServer, OpenAiEmbeddingServer, vectorOf } from './embedding-servers';

const KEY = 'sk-embed-test-0123456789-secret';
const CREDENTIALS = { accessKeyId: 'AKIAEMBEDTESTKEY0001', secretAccessKey: 'embed/test/secret/key/0123456789abcdefghij' };

/** Retries without waiting: the delays asked for are recorded instead of slept. */
function fastRetry(): RetryPolicy & { delays: number[] } {
  const delays: number[] = [];
  return { attempts: 3, baseDelayMs: 100, maxDelayMs: 1000, random: () => 1, delays, sleep: async (ms) => void delays.push(ms) };
}

/** A call that is answered never nears the timeout, however loaded the machine; the timeout tests set their own. */
function settings(overrides: Partial<LlmSettings> = {}): LlmSettings {
  return { defaultModel: 'echo', models: {}, timeoutMs: 20_000, retry: fastRetry(), ...overrides };
}

const signal = () => new AbortController().signal;

/** A loopback port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

async function failure(work: Promise<unknown>): Promise<Error> {
  try {
    await work;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a failure');
}

describe('createEmbedder', () => {
  it('refuses specs that name no embedding model it can call', () => {
    expect(() => createEmbedder('echo', settings())).toThrow(EaselError);
    expect(() => createEmbedder('nonsense', settings())).toThrow(/not an embedding model/);
    expect(() => createEmbedder('openai:text-embedding-3-small', settings())).toThrow(/EASEL_LLM_BASE_URL/);
    expect(() => createEmbedder('bedrock:anthropic.claude-3-haiku-20240307-v1:0', settings())).toThrow(/titan-embed-text/);
    expect(() => createEmbedder('bedrock:amazon.titan-embed-text-v1', settings(), { dimensions: 256 })).toThrow(/fixed length/);
    expect(() => createEmbedder('bedrock:amazon.titan-embed-text-v2:0', settings(), { dimensions: 0 })).toThrow(/positive/);
  });
});

describe('OpenAI-compatible embeddings', () => {
  let server: OpenAiEmbeddingServer;
  beforeEach(async () => {
    server = await OpenAiEmbeddingServer.start();
    return () => server.close();
  });
  const llm = (overrides: Partial<LlmSettings> = {}) => settings({ openai: { baseUrl: server.url, apiKey: KEY }, ...overrides });

  it('posts {model, input} with the key and answers one vector per text, in order, in bounded batches', async () => {
    const embedder = createEmbedder('openai:text-embedding-3-small', llm(), { batchSize: 2, concurrency: 1 });
    expect(embedder.id).toBe('openai:text-embedding-3-small');
    expect(embedder.dimensions).toBeUndefined();
    const texts = ['alpha', 'beta', 'gamma', 'delta', 'epsilon'];
    expect(await embedder.embed(texts, signal())).toEqual(texts.map((t) => vectorOf(t)));
    expect(embedder.dimensions).toBe(3);
    expect(server.requests.map((r) => r.body)).toEqual([
      { model: 'text-embedding-3-small', input: ['alpha', 'beta'] },
      { model: 'text-embedding-3-small', input: ['gamma', 'delta'] },
      { model: 'text-embedding-3-small', input: ['epsilon'] },
    ]);
    expect(server.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it('sends batches in parallel, at most `concurrency` at a time, and still answers in order', async () => {
    const texts = Array.from({ length: 23 }, (_, n) => `text ${n} ${'x'.repeat(n)}`);
    const embedder = createEmbedder('openai:m', llm(), { batchSize: 3, concurrency: 3 });
    expect(await embedder.embed(texts, signal())).toEqual(texts.map((t) => vectorOf(t)));
    expect(server.requests).toHaveLength(8);
    expect(server.requests.flatMap((r) => r.body.input as string[]).sort()).toEqual([...texts].sort());
    expect(server.maxInFlight).toBeLessThanOrEqual(3);
  });

  it('reads the key at call time when it is a function, and asks for the dimensions given', async () => {
    const embedder = createEmbedder('openai:text-embedding-3-large', settings({ openai: { baseUrl: `${server.url}/`, apiKey: async () => 'sk-late' } }), { dimensions: 5 });
    expect(embedder.dimensions).toBe(5);
    expect(await embedder.embed(['x'], signal())).toEqual([vectorOf('x', 5)]);
    expect(server.requests[0]!.body).toEqual({ model: 'text-embedding-3-large', input: ['x'], dimensions: 5 });
    expect(server.requests[0]!.headers.authorization).toBe('Bearer sk-late');
  });

  it('answers nothing for no texts, without a request', async () => {
    expect(await createEmbedder('openai:m', llm()).embed([], signal())).toEqual([]);
    expect(server.requests).toHaveLength(0);
  });

  it('retries 429 and 5xx, honouring Retry-After, then answers', async () => {
    const retry = fastRetry();
    server.enqueue({ kind: 'status', status: 429, headers: { 'retry-after': '0.5' } }, { kind: 'status', status: 503 });
    const embedder = createEmbedder('openai:m', llm({ retry }));
    expect(await embedder.embed(['a'], signal())).toEqual([vectorOf('a')]);
    expect(server.requests).toHaveLength(3);
    expect(retry.delays).toEqual([500, 200]);
  });

  it('fails transient once the attempts are spent, and permanent at once for a refusal', async () => {
    server.enqueue({ kind: 'status', status: 500 }, { kind: 'status', status: 502 }, { kind: 'status', status: 500, message: 'still down' });
    const transient = await failure(createEmbedder('openai:m', llm()).embed(['a'], signal()));
    expect(transient).toBeInstanceOf(LlmTransientError);
    expect(transient.message).toBe('openai:m: the provider answered 500: still down');
    expect(server.requests).toHaveLength(3);

    server.enqueue({ kind: 'status', status: 400, message: 'input too long' });
    const permanent = await failure(createEmbedder('openai:m', llm()).embed(['a'], signal()));
    expect(permanent).toBeInstanceOf(LlmError);
    expect(permanent.message).toBe('openai:m: the provider answered 400: input too long');
    expect(server.requests).toHaveLength(4);
    for (const error of [transient, permanent]) expect(JSON.stringify({ m: error.message, s: String(error) })).not.toContain(KEY);
  });

  it('times out a request that gets no answer, as a transient failure', async () => {
    server.enqueue({ kind: 'stall' }, { kind: 'stall' }, { kind: 'stall' });
    const error = await failure(createEmbedder('openai:m', llm({ timeoutMs: 50 })).embed(['a'], signal()));
    expect(error).toBeInstanceOf(LlmTransientError);
    expect(error.message).toBe('openai:m: no answer within 50 ms');
  });

  it('fails transient when nothing listens, and for a cancelled call without retrying', async () => {
    const port = await closedPort();
    const refused = await failure(createEmbedder('openai:m', settings({ openai: { baseUrl: `http://127.0.0.1:${port}/v1` } })).embed(['a'], signal()));
    expect(refused).toBeInstanceOf(LlmTransientError);
    expect(refused.message).toMatch(/network error \(ECONNREFUSED\)/);

    const controller = new AbortController();
    controller.abort();
    const cancelled = await failure(createEmbedder('openai:m', llm()).embed(['a'], controller.signal));
    expect(cancelled).toBeInstanceOf(LlmTransientError);
    expect(cancelled.message).toBe('openai:m: the call was cancelled');
  });

  it.each([
    ['no data', '{"object":"list"}', /no list of embeddings/],
    ['not JSON', 'not json', /not JSON/],
    ['too few', JSON.stringify({ data: [{ index: 0, embedding: [1, 2, 3] }] }), /no embedding for text 1 of 2/],
    ['an index out of range', JSON.stringify({ data: [{ index: 0, embedding: [1] }, { index: 5, embedding: [1] }] }), /embedding 5 for 2 texts/],
    ['an empty vector', JSON.stringify({ data: [{ index: 0, embedding: [] }, { index: 1, embedding: [] }] }), /empty embedding/],
  ])('refuses an answer with %s, without retrying', async (_name, body, message) => {
    server.enqueue({ kind: 'raw', body });
    const error = await failure(createEmbedder('openai:m', llm()).embed(['a', 'b'], signal()));
    expect(error).toBeInstanceOf(LlmError);
    expect(error.message).toMatch(message);
    expect(server.requests).toHaveLength(1);
  });

  it('refuses vectors whose length changes between answers', async () => {
    const embedder = createEmbedder('openai:m', llm(), { batchSize: 1 });
    server.enqueue({ kind: 'dimensions', dimensions: 3 }, { kind: 'dimensions', dimensions: 4 });
    const error = await failure(embedder.embed(['a', 'b'], signal()));
    expect(error).toBeInstanceOf(LlmError);
    expect(error.message).toBe('openai:m: the provider answered 4 dimensions, expected 3');
  });
});

describe('Bedrock Titan embeddings', () => {
  let server: BedrockEmbeddingServer;
  beforeAll(async () => {
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    server = await BedrockEmbeddingServer.start();
  });
  afterAll(() => server.close());
  beforeEach(() => server.reset());
  const llm = (overrides: Partial<LlmSettings> = {}) => settings({ bedrock: { region: 'us-east-1', endpoint: server.endpoint }, ...overrides });

  it('invokes Titan v2 once per text with {inputText, dimensions} and answers in order', async () => {
    const embedder = createEmbedder('bedrock:amazon.titan-embed-text-v2:0', llm(), { dimensions: 4, bedrockCredentials: CREDENTIALS });
    const texts = ['one', 'two two', 'three'];
    expect(await embedder.embed(texts, signal())).toEqual(texts.map((t) => vectorOf(t, 4)));
    expect(server.requests.map((r) => r.modelId)).toEqual(Array(3).fill('amazon.titan-embed-text-v2:0'));
    expect(server.requests.map((r) => r.body).sort((a, b) => a.inputText.localeCompare(b.inputText))).toEqual([
      { inputText: 'one', dimensions: 4 },
      { inputText: 'three', dimensions: 4 },
      { inputText: 'two two', dimensions: 4 },
    ]);
    expect(server.requests[0]!.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIAEMBEDTESTKEY0001\//);
  });

  it('sends Titan v1 the input text alone', async () => {
    const embedder = createEmbedder('bedrock:amazon.titan-embed-text-v1', llm(), { bedrockCredentials: CREDENTIALS });
    expect(await embedder.embed(['hello'], signal())).toEqual([vectorOf('hello')]);
    expect(server.requests[0]!.body).toEqual({ inputText: 'hello' });
  });

  it('keeps at most `concurrency` calls in flight', async () => {
    server.holdUntilInFlight(2);
    const embedder = createEmbedder('bedrock:amazon.titan-embed-text-v2:0', llm(), { concurrency: 2, bedrockCredentials: CREDENTIALS });
    const texts = ['a', 'bb', 'ccc', 'dddd', 'eeeee'];
    expect(await embedder.embed(texts, signal())).toEqual(texts.map((t) => vectorOf(t)));
    expect(server.maxInFlight).toBe(2);
  });

  it('retries throttling, then answers; refuses a validation error at once', async () => {
    const retry = fastRetry();
    server.enqueue({ kind: 'status', status: 429, errorType: 'ThrottlingException', message: 'slow down' });
    const embedder = createEmbedder('bedrock:amazon.titan-embed-text-v2:0', llm({ retry }), { bedrockCredentials: CREDENTIALS });
    expect(await embedder.embed(['a'], signal())).toEqual([vectorOf('a')]);
    expect(server.requests).toHaveLength(2);
    expect(retry.delays).toHaveLength(1);

    server.enqueue({ kind: 'status', status: 400, errorType: 'ValidationException', message: `bad input for ${CREDENTIALS.accessKeyId}` });
    const error = await failure(embedder.embed(['b'], signal()));
    expect(error).toBeInstanceOf(LlmError);
    expect(error.message).toMatch(/^bedrock model amazon\.titan-embed-text-v2:0: ValidationException: bad input for \[redacted\]/);
    expect(server.requests).toHaveLength(3);
  });

  it('fails transient after the attempts, and stops the other calls at the first failure', async () => {
    server.enqueue(...Array(3).fill({ kind: 'status', status: 503, errorType: 'ServiceUnavailableException', message: 'down' }));
    const embedder = createEmbedder('bedrock:amazon.titan-embed-text-v2:0', llm(), { concurrency: 1, bedrockCredentials: CREDENTIALS });
    const error = await failure(embedder.embed(['a', 'b', 'c'], signal()));
    expect(error).toBeInstanceOf(LlmTransientError);
    expect(error.message).toMatch(/ServiceUnavailableException: down/);
    // three attempts at the first text, none at the others
    expect(server.requests.map((r) => r.body.inputText)).toEqual(['a', 'a', 'a']);
  });

  it('times out a call that gets no answer', async () => {
    server.enqueue({ kind: 'stall' }, { kind: 'stall' }, { kind: 'stall' });
    const embedder = createEmbedder('bedrock:amazon.titan-embed-text-v2:0', llm({ timeoutMs: 50 }), { bedrockCredentials: CREDENTIALS });
    const error = await failure(embedder.embed(['a'], signal()));
    expect(error).toBeInstanceOf(LlmTransientError);
    expect(error.message).toMatch(/within 50 ms \(timeout\)/);
  });

  it('refuses an answer without an embedding', async () => {
    server.enqueue({ kind: 'raw', body: '{"inputTextTokenCount":1}' });
    const embedder = createEmbedder('bedrock:amazon.titan-embed-text-v2:0', llm(), { bedrockCredentials: CREDENTIALS });
    const error = await failure(embedder.embed(['a'], signal()));
    expect(error).toBeInstanceOf(LlmError);
    expect(error.message).toBe('bedrock model amazon.titan-embed-text-v2:0: the answer has no embedding');
  });
});
