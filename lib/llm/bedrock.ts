/**
 * Amazon Bedrock through the Converse API (`ConverseStream`), with the real AWS SDK.
 *
 * The SDK's own retries are off (`maxAttempts: 1`): attempts, backoff and Retry-After are ours
 * (`retrying()`), so every provider behaves the same. Each attempt has its own deadline
 * (`timeoutMs`), enforced through the SDK's `abortSignal` and, as a backstop, around every read
 * of the event stream, so a stalled response can never hang a turn.
 *
 * Errors carry the model id and the AWS error name and message only — never credentials, the
 * request body or raw SDK objects (no `cause`): known secrets and anything shaped like an AWS key
 * or token are redacted from the service's message as well.
 */
import {
  BedrockRuntimeClient,
  ConverseStreamCommand,
  type ContentBlock,
  type ConverseStreamCommandInput,
  type ImageFormat,
  type ConverseStreamOutput,
  type InferenceConfiguration,
  type Message,
  type SystemContentBlock,
  type Tool,
  type ToolUseBlock,
} from '@aws-sdk/client-bedrock-runtime';
import { LlmError, LlmTransientError, isTransientStatus } from './errors';
import { retrying, type RetryPolicy } from './retry';
import {
  ZERO_USAGE,
  type ChatEvent,
  type ChatMessage,
  type ChatProvider,
  type ChatRequest,
  contentText,
  type ImageMimeType,
  type MessageContent,
  type ToolCall,
  type Usage,
} from './types';
import { sdkErrorFacts } from './aws-errors';

/** Static AWS credentials (shape of the SDK's `AwsCredentialIdentity`). */
export interface BedrockCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface BedrockProviderOptions {
  region: string;
  /** Endpoint override (tests, VPC endpoints); the regional endpoint when absent. */
  endpoint?: string;
  /** Static credentials; the SDK's default chain (Lambda role, env, profile) when absent. */
  credentials?: BedrockCredentials;
  /** Deadline of one attempt, from the request to the end of the stream. */
  timeoutMs: number;
  retry: RetryPolicy;
}

/** Appended to the system prompt when the caller asks for a JSON answer (`json: true`). */
export const JSON_INSTRUCTION =
  'Answer with exactly one JSON object and nothing else: no prose, no explanations, no Markdown code fences.';

export function createBedrockProvider(options: BedrockProviderOptions): ChatProvider {
  const client = new BedrockRuntimeClient({
    region: options.region,
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    ...(options.credentials ? { credentials: { ...options.credentials } } : {}),
    maxAttempts: 1,
  });
  const secrets = options.credentials
    ? [options.credentials.secretAccessKey, options.credentials.sessionToken, options.credentials.accessKeyId]
    : [];
  const scrub = (text: string) => redact(text, secrets);

  return {
    name: 'bedrock',
    chat(request: ChatRequest): AsyncIterable<ChatEvent> {
      return chat(client, options, scrub, request);
    },
  };
}

async function* chat(
  client: BedrockRuntimeClient,
  options: BedrockProviderOptions,
  scrub: (text: string) => string,
  request: ChatRequest,
): AsyncGenerator<ChatEvent, void, undefined> {
  const input = toConverseInput(request);
  const model = request.model;
  yield* retrying(() => attempt(client, input, model, options.timeoutMs, scrub, request.signal), options.retry, request.signal);
}

async function* attempt(
  client: BedrockRuntimeClient,
  input: ConverseStreamCommandInput,
  model: string,
  timeoutMs: number,
  scrub: (text: string) => string,
  callerSignal: AbortSignal | undefined,
): AsyncGenerator<ChatEvent, void, undefined> {
  const deadline = new AbortController();
  // Aborted when this attempt ends for any reason, so an abandoned stream releases its connection.
  const local = new AbortController();
  const signals = [deadline.signal, local.signal];
  if (callerSignal) signals.push(callerSignal);
  const signal = AbortSignal.any(signals);
  const timer = setTimeout(() => deadline.abort(new Error('deadline')), timeoutMs);
  try {
    const output = await raceAbort(client.send(new ConverseStreamCommand(input), { abortSignal: signal }), signal);
    if (!output.stream) {
      throw new LlmTransientError(`bedrock model ${model}: the response carried no event stream`, output.$metadata.httpStatusCode);
    }
    yield* translate(abortable(output.stream, signal), model, scrub);
  } catch (error) {
    throw classify(error, {
      model,
      timeoutMs,
      timedOut: deadline.signal.aborted,
      cancelled: callerSignal?.aborted ?? false,
      scrub,
    });
  } finally {
    clearTimeout(timer);
    local.abort(new Error('attempt finished'));
  }
}

// ---- request mapping ----------------------------------------------------------------------------

/** Our chat request as a Converse request. Exported for tests and diagnostics. */
export function toConverseInput(request: ChatRequest): ConverseStreamCommandInput {
  const system: SystemContentBlock[] = [];
  const messages: Message[] = [];

  const append = (role: 'user' | 'assistant', blocks: ContentBlock[]) => {
    const last = messages[messages.length - 1];
    // Converse wants strictly alternating roles: consecutive turns of one role become one.
    if (last && last.role === role) last.content = [...(last.content ?? []), ...blocks];
    else messages.push({ role, content: blocks });
  };

  for (const message of request.messages) {
    switch (message.role) {
      case 'system': {
        const text = contentText(message.content);
        if (text.trim() !== '') system.push({ text });
        break;
      }
      case 'user':
        append('user', userBlocks(message.content, request.model));
        break;
      case 'assistant': {
        const blocks: ContentBlock[] = [];
        const calls = message.tool_calls ?? [];
        const text = contentText(message.content);
        // Converse rejects blank text blocks; a pure tool-call turn has none.
        if (text.trim() !== '' || calls.length === 0) blocks.push({ text });
        for (const call of calls) blocks.push({ toolUse: toToolUse(call, request.model) });
        append('assistant', blocks);
        break;
      }
      case 'tool':
        append('user', [toToolResult(message, request.model)]);
        break;
      default: {
        const role: never = message.role;
        throw new LlmError(`bedrock model ${request.model}: unsupported message role ${String(role)}`);
      }
    }
  }

  if (request.json) system.push({ text: JSON_INSTRUCTION });

  const input: ConverseStreamCommandInput = { modelId: request.model, messages };
  if (system.length > 0) input.system = system;

  const inference: InferenceConfiguration = {};
  if (request.max_tokens !== undefined) inference.maxTokens = request.max_tokens;
  if (request.temperature !== undefined) inference.temperature = request.temperature;
  if (request.top_p !== undefined) inference.topP = request.top_p;
  if (Object.keys(inference).length > 0) input.inferenceConfig = inference;

  if (request.tools && request.tools.length > 0) {
    input.toolConfig = {
      tools: request.tools.map(
        (tool): Tool => ({
          toolSpec: {
            name: tool.name,
            description: tool.description,
            inputSchema: { json: tool.parameters as NonNullable<ToolUseBlock['input']> },
          },
        }),
      ),
    };
  }
  return input;
}

const IMAGE_FORMATS: Record<ImageMimeType, ImageFormat> = {
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'image/gif': 'gif',
  'image/webp': 'webp',
};

/** A user message's blocks: its text, and each image as an `image` block holding its bytes. */
function userBlocks(content: MessageContent, model: string): ContentBlock[] {
  if (typeof content === 'string') return [{ text: content }];
  const blocks: ContentBlock[] = [];
  for (const part of content) {
    if (part.type === 'text') {
      // Converse rejects blank text blocks
      if (part.text.trim() !== '') blocks.push({ text: part.text });
      continue;
    }
    const format = IMAGE_FORMATS[part.mime_type];
    if (!format) throw new LlmError(`bedrock model ${model}: images of type ${String(part.mime_type)} are not supported (png, jpeg, gif, webp)`);
    blocks.push({ image: { format, source: { bytes: part.bytes } } });
  }
  return blocks.length > 0 ? blocks : [{ text: contentText(content) }];
}

function toToolUse(call: ToolCall, model: string): ToolUseBlock {
  return { toolUseId: call.id, name: call.name, input: parseArguments(call, model) };
}

function parseArguments(call: ToolCall, model: string): NonNullable<ToolUseBlock['input']> {
  if (call.arguments.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(call.arguments);
  } catch {
    parsed = undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    // The arguments themselves stay out of the message: they may hold user data.
    throw new LlmError(`bedrock model ${model}: the arguments of tool call ${call.id} (${call.name}) are not a JSON object`);
  }
  return parsed as NonNullable<ToolUseBlock['input']>;
}

function toToolResult(message: ChatMessage, model: string): ContentBlock {
  if (!message.tool_call_id) {
    throw new LlmError(`bedrock model ${model}: a tool message has no tool_call_id`);
  }
  return { toolResult: { toolUseId: message.tool_call_id, content: [{ text: contentText(message.content) }] } };
}

// ---- response mapping ---------------------------------------------------------------------------

interface OpenToolUse {
  id: string;
  name: string;
  input: string;
}

const FINISH_REASONS: Record<string, string> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  tool_use: 'tool_calls',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  guardrail_intervened: 'content_filter',
  content_filtered: 'content_filter',
};

export function finishReason(stopReason: string): string {
  return FINISH_REASONS[stopReason] ?? stopReason;
}

async function* translate(
  stream: AsyncIterable<ConverseStreamOutput>,
  model: string,
  scrub: (text: string) => string,
): AsyncGenerator<ChatEvent, void, undefined> {
  const open = new Map<number, OpenToolUse>();
  let stopReason: string | undefined;
  let usage: Usage = ZERO_USAGE;

  const close = (index: number): ChatEvent | undefined => {
    const block = open.get(index);
    if (!block) return undefined;
    open.delete(index);
    return { type: 'tool_call', call: { id: block.id, name: block.name, arguments: block.input === '' ? '{}' : block.input } };
  };

  for await (const event of stream) {
    if (event.contentBlockStart) {
      const start = event.contentBlockStart.start?.toolUse;
      if (start) {
        open.set(event.contentBlockStart.contentBlockIndex ?? 0, {
          id: start.toolUseId ?? '',
          name: start.name ?? '',
          input: '',
        });
      }
    } else if (event.contentBlockDelta) {
      const delta = event.contentBlockDelta.delta;
      const index = event.contentBlockDelta.contentBlockIndex ?? 0;
      if (typeof delta?.text === 'string') {
        if (delta.text !== '') yield { type: 'text', text: delta.text };
      } else if (delta?.toolUse) {
        const block = open.get(index);
        if (!block) {
          throw new LlmError(`bedrock model ${model}: a tool input fragment arrived for block ${index}, which was never started`);
        }
        block.input += delta.toolUse.input ?? '';
      }
      // Reasoning, citations and other deltas are not part of the answer text.
    } else if (event.contentBlockStop) {
      const call = close(event.contentBlockStop.contentBlockIndex ?? 0);
      if (call) yield call;
    } else if (event.messageStop) {
      stopReason = event.messageStop.stopReason ?? 'end_turn';
    } else if (event.metadata) {
      const u = event.metadata.usage;
      if (u) {
        const prompt = u.inputTokens ?? 0;
        const completion = u.outputTokens ?? 0;
        usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: u.totalTokens ?? prompt + completion };
      }
    } else {
      // The SDK throws modeled stream exceptions itself; this is a backstop for any it yields.
      const exception = streamException(event);
      if (exception) throw classifyNamed(exception.name, exception.message, undefined, undefined, model, scrub);
    }
  }

  for (const index of [...open.keys()]) {
    const call = close(index);
    if (call) yield call;
  }
  if (stopReason === undefined) {
    throw new LlmTransientError(`bedrock model ${model}: the event stream ended before messageStop`);
  }
  yield { type: 'done', usage, finish_reason: finishReason(stopReason) };
}

function streamException(event: ConverseStreamOutput): { name: string; message: string } | undefined {
  for (const [key, value] of Object.entries(event as unknown as Record<string, unknown>)) {
    if (!key.endsWith('Exception') || value === undefined) continue;
    const message = (value as { message?: unknown } | null)?.message;
    return { name: key[0]!.toUpperCase() + key.slice(1), message: typeof message === 'string' ? message : '' };
  }
  return undefined;
}

// ---- abort plumbing -----------------------------------------------------------------------------

function abortPromise(signal: AbortSignal): { promise: Promise<never>; dispose: () => void } {
  let onAbort = () => {};
  const promise = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason ?? new Error('aborted'));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  promise.catch(() => {});
  return { promise, dispose: () => signal.removeEventListener('abort', onAbort) };
}

async function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  const abort = abortPromise(signal);
  try {
    return await Promise.race([work, abort.promise]);
  } finally {
    abort.dispose();
  }
}

/** Every read of `source` races the signal: a stream that stops producing cannot outlive it. */
async function* abortable<T>(source: AsyncIterable<T>, signal: AbortSignal): AsyncGenerator<T, void, undefined> {
  const iterator = source[Symbol.asyncIterator]();
  const abort = abortPromise(signal);
  let finished = false;
  try {
    for (;;) {
      const result = await Promise.race([iterator.next(), abort.promise]);
      if (result.done) {
        finished = true;
        return;
      }
      yield result.value;
    }
  } finally {
    abort.dispose();
    if (!finished) {
      // Do not wait: a stalled iterator settles only once the SDK has torn the stream down.
      void Promise.resolve()
        .then(() => iterator.return?.())
        .catch(() => {});
    }
  }
}

// ---- error classification -----------------------------------------------------------------------

const TRANSIENT_NAMES = new Set([
  'ThrottlingException',
  'ServiceUnavailableException',
  'InternalServerException',
  'ModelNotReadyException',
  'ModelTimeoutException',
  'ModelStreamErrorException',
  'TooManyRequestsException',
  'RequestTimeout',
  'RequestTimeoutException',
  'TimeoutError',
]);

const PERMANENT_NAMES = new Set([
  'ValidationException',
  'AccessDeniedException',
  'ResourceNotFoundException',
  'ServiceQuotaExceededException',
  'ModelErrorException',
  'ConflictException',
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'IncompleteSignatureException',
  'ExpiredTokenException',
  'UnauthorizedException',
]);

export interface ClassifyContext {
  model: string;
  timeoutMs: number;
  timedOut: boolean;
  cancelled: boolean;
  scrub: (text: string) => string;
}

/** Any failure of a Bedrock Runtime call, as the turn needs it (the embedder's InvokeModel too). */
export function classify(error: unknown, context: ClassifyContext): LlmError | LlmTransientError {
  const { model } = context;
  if (error instanceof LlmError || error instanceof LlmTransientError) return error;
  if (context.timedOut && !context.cancelled) {
    return new LlmTransientError(`bedrock model ${model}: no complete answer within ${context.timeoutMs} ms (timeout)`);
  }
  if (context.cancelled) {
    // Not retried (the caller's signal is aborted) and commits nothing.
    return new LlmTransientError(`bedrock model ${model}: the request was cancelled`);
  }
  const { name, message, status, code, fault, retryAfterMs: retryAfter, network } = sdkErrorFacts(error);
  if (network && !TRANSIENT_NAMES.has(name) && !PERMANENT_NAMES.has(name)) {
    return new LlmTransientError(`bedrock model ${model}: network error: ${context.scrub(code ? `${code}: ${message}` : message)}`);
  }
  return classifyNamed(name, message, status, retryAfter, model, context.scrub, fault);
}

function classifyNamed(
  name: string,
  message: string,
  status: number | undefined,
  retryAfter: number | undefined,
  model: string,
  scrub: (text: string) => string,
  fault?: 'server' | 'client',
): LlmError | LlmTransientError {
  const text = `bedrock model ${model}: ${scrub(message ? `${name}: ${message}` : name)}`;
  let transient: boolean;
  if (TRANSIENT_NAMES.has(name)) transient = true;
  else if (PERMANENT_NAMES.has(name)) transient = false;
  else if (status !== undefined) transient = isTransientStatus(status);
  else transient = fault === 'server';
  return transient ? new LlmTransientError(text, status, retryAfter) : new LlmError(text, status);
}

const AWS_KEY_ID = /\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{12,}\b/g;
/** Long base64 runs: secret keys (40 chars), session tokens, signatures. */
const LONG_TOKEN = /[A-Za-z0-9/+=]{40,}/g;
const MAX_MESSAGE = 500;

/** Removes known secrets and anything shaped like an AWS credential; bounds the length. */
export function redact(text: string, secrets: readonly (string | undefined)[] = []): string {
  let out = text;
  for (const secret of secrets) {
    if (secret && secret.length >= 4) out = out.split(secret).join('[redacted]');
  }
  out = out.replace(AWS_KEY_ID, '[redacted]').replace(LONG_TOKEN, '[redacted]');
  return out.length > MAX_MESSAGE ? `${out.slice(0, MAX_MESSAGE)}…` : out;
}
