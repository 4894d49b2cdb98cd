/**
 * Text embeddings for the local index, from a model of the model configuration (`LlmSettings`):
 * - `openai:<model>`: `POST {baseUrl}/embeddings` `{model, input: [...]}` with the configured
 *   key (OpenAI, or any compatible server: vLLM, Ollama, LiteLLM, ...), up to `batchSize` texts
 *   a request;
 * - `bedrock:amazon.titan-embed-text-v2:0` (or `-v1`): Bedrock's `InvokeModel`, one text a call
 *   (all Titan takes), a few calls at a time. The SDK is loaded on first use.
 *
 * Failures are classified as the chat providers classify theirs (lib/llm/errors):
 * `LlmTransientError` for 408/429/5xx, timeouts and the network — retried with the configured
 * policy, then failing the turn as `unavailable` — and `LlmError` for the rest. Every attempt has
 * its own deadline (`timeoutMs`); messages never carry the key or the texts.
 *
 * @example
 * const embedder = createEmbedder('openai:text-embedding-3-small', settings);
 * const [question] = await embedder.embed(['refund policy'], signal);
 */
import { z } from 'zod';
import { EaselError } from '../../errors';
import type { BedrockCredentials } from '../../llm/bedrock';
import { LlmError, LlmTransientError, isTransientStatus, retryAfterMs } from '../../llm/errors';
import { type LlmSettings, parseModelSpec } from '../../llm/models';
import { type RetryPolicy, retrying } from '../../llm/retry';

export interface Embedder {
  /** The model spec, e.g. `openai:text-embedding-3-small`: vectors of one embedder compare only with its own. */
  readonly id: string;
  /** The vectors' length: as asked in the options, else once a call has answered. */
  readonly dimensions?: number;
  /** One vector per text, in order. Throws LlmTransientError / LlmError. */
  embed(texts: readonly string[], signal: AbortSignal): Promise<number[][]>;
}

export interface EmbedderOptions {
  /** Texts per OpenAI-compatible request (OpenAI takes up to 2048). @default 64 */
  batchSize?: number;
  /** Requests in flight at once (batches for OpenAI-compatible servers, texts for Bedrock). @default 4 */
  concurrency?: number;
  /** Vectors of this length, for models that can shorten theirs (text-embedding-3-*, Titan v2: 256, 512, 1024). */
  dimensions?: number;
  /** Static AWS credentials; the SDK's default chain (the Lambda role) when absent. */
  bedrockCredentials?: BedrockCredentials;
}

const DEFAULT_BATCH = 64;
const MAX_BATCH = 2048;
const DEFAULT_CONCURRENCY = 4;

/** Throws EaselError('invalid_config') for a spec that names no embedding model this runtime can call. */
export function createEmbedder(spec: string, llm: LlmSettings, options: EmbedderOptions = {}): Embedder {
  const parsed = parseModelSpec(spec);
  if (!parsed || parsed.provider === 'echo') {
    throw new EaselError('invalid_config', `embedding_model: "${spec}" is not an embedding model (use openai:<model> or bedrock:amazon.titan-embed-text-v2:0)`);
  }
  if (options.dimensions !== undefined && (!Number.isInteger(options.dimensions) || options.dimensions <= 0)) {
    throw new EaselError('invalid_config', `embedding dimensions: ${options.dimensions} is not a positive whole number`);
  }
  const id = `${parsed.provider}:${parsed.model}`;
  if (parsed.provider === 'openai') {
    if (!llm.openai) throw new EaselError('invalid_config', `embedding_model: "${spec}" needs EASEL_LLM_BASE_URL`);
    return openAiEmbedder(id, parsed.model, llm.openai, llm, options);
  }
  const titan = titanVersion(parsed.model);
  if (!titan) {
    throw new EaselError('invalid_config', `embedding_model: "${spec}" is not a Bedrock embedding model this runtime speaks (amazon.titan-embed-text-v1, amazon.titan-embed-text-v2:0)`);
  }
  if (titan === 1 && options.dimensions !== undefined) {
    throw new EaselError('invalid_config', `embedding_model: "${spec}" has a fixed length; dimensions are for Titan v2`);
  }
  return bedrockEmbedder(id, parsed.model, titan, llm, options);
}

// ---- OpenAI-compatible --------------------------------------------------------------------------

const OpenAiAnswer = z.lazy(() => z.object({
  data: z.array(z.object({ index: z.number().int().nonnegative(), embedding: z.array(z.number()) })),
}));

function openAiEmbedder(
  id: string,
  model: string,
  endpoint: NonNullable<LlmSettings['openai']>,
  llm: LlmSettings,
  options: EmbedderOptions,
): Embedder {
  const url = `${endpoint.baseUrl.replace(/\/+$/, '')}/embeddings`;
  const concurrency = Math.max(1, options.concurrency ?? DEFAULT_CONCURRENCY);
  const batchSize = Math.min(MAX_BATCH, Math.max(1, options.batchSize ?? DEFAULT_BATCH));
  const headers = async (): Promise<Record<string, string>> => {
    const key = typeof endpoint.apiKey === 'function' ? await endpoint.apiKey() : endpoint.apiKey;
    const base = { 'content-type': 'application/json', accept: 'application/json' };
    return key ? { ...base, authorization: `Bearer ${key}` } : base;
  };
  const dims = new Dimensions(id, options.dimensions);

  const batch = async (texts: readonly string[], signal: AbortSignal): Promise<number[][]> => {
    const body = JSON.stringify({ model, input: texts, ...(options.dimensions ? { dimensions: options.dimensions } : {}) });
    const answer = await withRetry(llm.retry, signal, async () => {
      const timeout = AbortSignal.timeout(llm.timeoutMs);
      const both = AbortSignal.any([signal, timeout]);
      try {
        const response = await fetch(url, { method: 'POST', headers: await headers(), body, signal: both });
        if (!response.ok) {
          const detail = await errorDetail(response);
          const message = `${id}: the provider answered ${response.status}${detail ? `: ${detail}` : ''}`;
          if (isTransientStatus(response.status)) {
            throw new LlmTransientError(message, response.status, retryAfterMs(response.headers.get('retry-after')));
          }
          throw new LlmError(message, response.status);
        }
        return await response.json();
      } catch (error) {
        if (error instanceof LlmError || error instanceof LlmTransientError) throw error;
        if (error instanceof SyntaxError) throw new LlmError(`${id}: the provider's answer is not JSON`);
        if (signal.aborted) throw new LlmTransientError(`${id}: the call was cancelled`);
        if (timeout.aborted) throw new LlmTransientError(`${id}: no answer within ${llm.timeoutMs} ms`);
        throw new LlmTransientError(`${id}: ${networkMessage(error)}`, undefined, undefined, { cause: error });
      }
    });
    const checked = OpenAiAnswer.safeParse(answer);
    if (!checked.success) throw new LlmError(`${id}: the provider's answer has no list of embeddings`);
    const vectors: (number[] | undefined)[] = Array.from({ length: texts.length }, () => undefined);
    for (const item of checked.data.data) {
      if (item.index >= texts.length || vectors[item.index]) throw new LlmError(`${id}: the provider answered embedding ${item.index} for ${texts.length} texts`);
      vectors[item.index] = item.embedding;
    }
    return vectors.map((vector, i) => {
      if (!vector) throw new LlmError(`${id}: the provider answered no embedding for text ${i} of ${texts.length}`);
      return dims.check(vector);
    });
  };

  return {
    id,
    get dimensions() {
      return dims.known;
    },
    async embed(texts, signal) {
      const batches: (readonly string[])[] = [];
      for (let start = 0; start < texts.length; start += batchSize) batches.push(texts.slice(start, start + batchSize));
      return (await inParallel(batches, concurrency, signal, batch, id)).flat();
    },
  };
}

/** The provider's own error message, short; bodies can echo the request, so only `error.message`. */
async function errorDetail(response: Response): Promise<string> {
  try {
    const parsed = JSON.parse(await response.text()) as { error?: { message?: unknown } | string; message?: unknown };
    const message = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message);
    return typeof message === 'string' ? message.slice(0, 300) : '';
  } catch {
    return '';
  }
}

function networkMessage(error: unknown): string {
  const code = (error as { cause?: { code?: string } })?.cause?.code;
  return code ? `network error (${code})` : 'network error';
}

// ---- Bedrock Titan ------------------------------------------------------------------------------

type BedrockRuntime = typeof import('@aws-sdk/client-bedrock-runtime');
type BedrockModule = typeof import('../../llm/bedrock');

function titanVersion(model: string): 1 | 2 | undefined {
  if (/titan-embed-text-v2/.test(model)) return 2;
  if (/titan-embed-text-v1/.test(model)) return 1;
  return undefined;
}

const TitanAnswer = z.lazy(() => z.object({ embedding: z.array(z.number()) }));

function bedrockEmbedder(id: string, model: string, titan: 1 | 2, llm: LlmSettings, options: EmbedderOptions): Embedder {
  const concurrency = Math.max(1, options.concurrency ?? DEFAULT_CONCURRENCY);
  const dims = new Dimensions(id, options.dimensions);
  const credentials = options.bedrockCredentials;
  const secrets = credentials ? [credentials.secretAccessKey, credentials.sessionToken, credentials.accessKeyId] : [];
  let loaded: Promise<{ sdk: BedrockRuntime; llm: BedrockModule; client: InstanceType<BedrockRuntime['BedrockRuntimeClient']> }> | undefined;
  const load = () => {
    loaded ??= (async () => {
      const [sdk, bedrock] = await Promise.all([import('@aws-sdk/client-bedrock-runtime'), import('../../llm/bedrock')]);
      const client = new sdk.BedrockRuntimeClient({
        region: llm.bedrock?.region ?? 'us-east-1',
        ...(llm.bedrock?.endpoint ? { endpoint: llm.bedrock.endpoint } : {}),
        ...(credentials ? { credentials: { ...credentials } } : {}),
        // attempts and backoff are ours, as for the chat providers
        maxAttempts: 1,
      });
      return { sdk, llm: bedrock, client };
    })();
    return loaded;
  };

  const one = async (text: string, signal: AbortSignal): Promise<number[]> => {
    const { sdk, llm: bedrock, client } = await load();
    const body = JSON.stringify(titan === 2 ? { inputText: text, ...(options.dimensions ? { dimensions: options.dimensions } : {}) } : { inputText: text });
    const scrub = (message: string) => bedrock.redact(message, secrets);
    const answer = await withRetry(llm.retry, signal, async () => {
      const timeout = AbortSignal.timeout(llm.timeoutMs);
      try {
        const output = await client.send(
          new sdk.InvokeModelCommand({ modelId: model, contentType: 'application/json', accept: 'application/json', body }),
          { abortSignal: AbortSignal.any([signal, timeout]) },
        );
        return new TextDecoder().decode(output.body);
      } catch (error) {
        throw bedrock.classify(error, { model, timeoutMs: llm.timeoutMs, timedOut: timeout.aborted, cancelled: signal.aborted, scrub });
      }
    });
    let parsed: unknown;
    try {
      parsed = JSON.parse(answer);
    } catch {
      throw new LlmError(`bedrock model ${model}: the answer is not JSON`);
    }
    const checked = TitanAnswer.safeParse(parsed);
    if (!checked.success) throw new LlmError(`bedrock model ${model}: the answer has no embedding`);
    return dims.check(checked.data.embedding);
  };

  return {
    id,
    get dimensions() {
      return dims.known;
    },
    embed: (texts, signal) => inParallel(texts, concurrency, signal, one, id),
  };
}

// ---- shared -------------------------------------------------------------------------------------

/** The vectors' length, fixed by the options or by the first answer; a change is the provider's fault. */
class Dimensions {
  constructor(
    private readonly id: string,
    public known: number | undefined,
  ) {}

  check(vector: number[]): number[] {
    if (vector.length === 0) throw new LlmError(`${this.id}: the provider answered an empty embedding`);
    if (this.known === undefined) this.known = vector.length;
    else if (vector.length !== this.known) {
      throw new LlmError(`${this.id}: the provider answered ${vector.length} dimensions, expected ${this.known}`);
    }
    return vector;
  }
}

/**
 * `work` over every item, at most `concurrency` at a time, results in the items' order. The
 * first failure stops the rest (the whole call fails anyway) and is what is thrown.
 */
async function inParallel<T, R>(
  items: readonly T[],
  concurrency: number,
  signal: AbortSignal,
  work: (item: T, signal: AbortSignal) => Promise<R>,
  id: string,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  const failed = new AbortController();
  const stop = AbortSignal.any([signal, failed.signal]);
  let next = 0;
  const worker = async () => {
    while (next < items.length && !stop.aborted) {
      const i = next++;
      out[i] = await work(items[i]!, stop);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  } catch (error) {
    failed.abort();
    throw error;
  }
  if (signal.aborted) throw new LlmTransientError(`${id}: the call was cancelled`);
  return out;
}

/** One call, retried as the chat streams are: transient failures only, with backoff. */
async function withRetry<T>(policy: RetryPolicy, signal: AbortSignal, call: () => Promise<T>): Promise<T> {
  for await (const value of retrying(async function* () {
    yield await call();
  }, policy, signal)) {
    return value;
  }
  throw new LlmError('the call answered nothing');
}
