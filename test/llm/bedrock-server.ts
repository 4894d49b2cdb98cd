/**
 * A local stand-in for the Bedrock Runtime service, speaking `ConverseStream` as the real AWS SDK
 * expects it: `POST /model/{modelId}/converse-stream`, answered with
 * `application/vnd.amazon.eventstream` binary frames encoded by the SDK's own codec, or with the
 * JSON error responses the service sends (`x-amzn-errortype` header, `{"message": ...}` body).
 *
 * It listens with HTTP/2 over cleartext (node:http2) on 127.0.0.1 and an ephemeral port because
 * the SDK's default request handler for this client is `NodeHttp2Handler`, which speaks HTTP/2
 * with prior knowledge to an `http://` endpoint; an HTTP/1.1 server would not be understood.
 *
 * Scriptable per test: a queue of responses (taken one per request) and an optional fallback
 * used once the queue is empty. Every request is recorded, its `image` blocks decoded
 * (`images`). SigV4 signatures are accepted as they come (never verified).
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { EventStreamCodec } from '@smithy/core/event-streams';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const codec = new EventStreamCodec(
  (bytes: Uint8Array) => decoder.decode(bytes),
  (text: string) => encoder.encode(text),
);

/** One frame of the response stream. */
export type StreamFrame =
  | { event: string; body: Record<string, unknown> }
  | { exception: string; body: Record<string, unknown> };

export type ScriptedResponse =
  | {
      kind: 'stream';
      frames: StreamFrame[];
      /** Pause between frames, ms. */
      delayMs?: number;
      /** Write the encoded stream in pieces of this many bytes instead of frame by frame. */
      chunkBytes?: number;
      /** After the frames, keep the stream open without sending anything more. */
      stallAfter?: boolean;
    }
  | { kind: 'error'; status: number; errorType: string; message: string; headers?: Record<string, string> }
  /** Never answers (not even headers). */
  | { kind: 'stall' };

export interface RecordedRequest {
  method: string;
  path: string;
  /** Decoded from the path. */
  modelId: string;
  headers: Record<string, string>;
  /** Parsed JSON body (undefined when the body was not JSON). */
  body: any;
  rawBody: string;
  /** The `image` blocks of the messages, in order, their bytes decoded from the JSON's base64. */
  images: ReceivedImage[];
}

export interface ReceivedImage {
  /** The index of its message. */
  message: number;
  format: string;
  bytes: Buffer;
}

function imagesOf(body: unknown): ReceivedImage[] {
  const messages = (body as { messages?: { content?: { image?: { format?: string; source?: { bytes?: string } } }[] }[] } | undefined)?.messages ?? [];
  return messages.flatMap((m, message) =>
    (m.content ?? []).flatMap((block) =>
      block.image ? [{ message, format: String(block.image.format), bytes: Buffer.from(block.image.source?.bytes ?? '', 'base64') }] : [],
    ),
  );
}

export interface UsageCounts {
  inputTokens: number;
  outputTokens: number;
  totalTokens?: number;
}

// ---- response builders --------------------------------------------------------------------------

/** Splits `text` into `parts` pieces of near-equal length (never empty pieces). */
export function split(text: string, parts: number): string[] {
  const n = Math.max(1, Math.min(parts, text.length));
  const size = Math.ceil(text.length / n);
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function metadata(usage: UsageCounts): StreamFrame {
  return {
    event: 'metadata',
    body: {
      usage: {
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        totalTokens: usage.totalTokens ?? usage.inputTokens + usage.outputTokens,
      },
      metrics: { latencyMs: 42 },
    },
  };
}

/** A plain text answer streamed as `deltas` text deltas. */
export function textAnswer(
  text: string,
  options: { deltas?: number; usage?: UsageCounts; stopReason?: string; delayMs?: number; chunkBytes?: number } = {},
): ScriptedResponse {
  const frames: StreamFrame[] = [{ event: 'messageStart', body: { role: 'assistant' } }];
  for (const piece of split(text, options.deltas ?? 3)) {
    frames.push({ event: 'contentBlockDelta', body: { delta: { text: piece }, contentBlockIndex: 0 } });
  }
  frames.push({ event: 'contentBlockStop', body: { contentBlockIndex: 0 } });
  frames.push({ event: 'messageStop', body: { stopReason: options.stopReason ?? 'end_turn' } });
  frames.push(metadata(options.usage ?? { inputTokens: 11, outputTokens: 7 }));
  return {
    kind: 'stream',
    frames,
    ...(options.delayMs !== undefined ? { delayMs: options.delayMs } : {}),
    ...(options.chunkBytes !== undefined ? { chunkBytes: options.chunkBytes } : {}),
  };
}

export interface ToolUseScript {
  toolUseId: string;
  name: string;
  /** The JSON input, split into fragments as the service streams it. */
  input: unknown;
  fragments?: number;
}

/** A tool-use answer: optional leading text, then one toolUse block per call. */
export function toolUseAnswer(
  calls: ToolUseScript[],
  options: { text?: string; usage?: UsageCounts } = {},
): ScriptedResponse {
  const frames: StreamFrame[] = [{ event: 'messageStart', body: { role: 'assistant' } }];
  let index = 0;
  if (options.text) {
    frames.push({ event: 'contentBlockDelta', body: { delta: { text: options.text }, contentBlockIndex: index } });
    frames.push({ event: 'contentBlockStop', body: { contentBlockIndex: index } });
    index++;
  }
  for (const call of calls) {
    frames.push({
      event: 'contentBlockStart',
      body: { start: { toolUse: { toolUseId: call.toolUseId, name: call.name } }, contentBlockIndex: index },
    });
    for (const fragment of split(JSON.stringify(call.input), call.fragments ?? 4)) {
      frames.push({ event: 'contentBlockDelta', body: { delta: { toolUse: { input: fragment } }, contentBlockIndex: index } });
    }
    frames.push({ event: 'contentBlockStop', body: { contentBlockIndex: index } });
    index++;
  }
  frames.push({ event: 'messageStop', body: { stopReason: 'tool_use' } });
  frames.push(metadata(options.usage ?? { inputTokens: 20, outputTokens: 9 }));
  return { kind: 'stream', frames };
}

/** The service's 429, as it sends it. */
export function throttling(options: { retryAfter?: string; message?: string } = {}): ScriptedResponse {
  return {
    kind: 'error',
    status: 429,
    errorType: 'ThrottlingException',
    message: options.message ?? 'Too many requests, please wait before trying again.',
    ...(options.retryAfter !== undefined ? { headers: { 'retry-after': options.retryAfter } } : {}),
  };
}

/** The service's 400 for a malformed request. */
export function validation(message = 'The provided model identifier is invalid.'): ScriptedResponse {
  return { kind: 'error', status: 400, errorType: 'ValidationException', message };
}

/** Headers, `messageStart` and `first` text deltas, then silence (the stream stays open). */
export function stallMidStream(first: string[] = []): ScriptedResponse {
  const frames: StreamFrame[] = [{ event: 'messageStart', body: { role: 'assistant' } }];
  for (const text of first) frames.push({ event: 'contentBlockDelta', body: { delta: { text }, contentBlockIndex: 0 } });
  return { kind: 'stream', frames, stallAfter: true };
}

/** An exception frame in the middle of a 200 event stream (e.g. `throttlingException`). */
export function streamException(exception: string, message: string, before: StreamFrame[] = []): ScriptedResponse {
  return {
    kind: 'stream',
    frames: [{ event: 'messageStart', body: { role: 'assistant' } }, ...before, { exception, body: { message } }],
  };
}

// ---- the server ---------------------------------------------------------------------------------

export function encodeFrame(frame: StreamFrame): Uint8Array {
  const body = encoder.encode(JSON.stringify(frame.body));
  if ('event' in frame) {
    return codec.encode({
      headers: {
        ':event-type': { type: 'string', value: frame.event },
        ':content-type': { type: 'string', value: 'application/json' },
        ':message-type': { type: 'string', value: 'event' },
      },
      body,
    });
  }
  return codec.encode({
    headers: {
      ':exception-type': { type: 'string', value: frame.exception },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'exception' },
    },
    body,
  });
}

const PATH = /^\/model\/([^/]+)\/converse-stream$/;

export class BedrockTestServer {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: ScriptedResponse[] = [];
  private fallback: ScriptedResponse | undefined;
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly server: http2.Http2Server;
  private port = 0;

  private constructor() {
    this.server = http2.createServer();
    this.server.on('session', (session) => {
      this.sessions.add(session);
      session.on('close', () => this.sessions.delete(session));
      session.on('error', () => {});
    });
    this.server.on('stream', (stream, headers) => this.handle(stream, headers));
  }

  static async start(): Promise<BedrockTestServer> {
    const server = new BedrockTestServer();
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.server.listen(0, '127.0.0.1', () => resolve());
    });
    server.port = (server.server.address() as AddressInfo).port;
    return server;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Requests received so far. */
  get calls(): number {
    return this.requests.length;
  }

  private readonly arrivals = new Set<{ count: number; resolve: () => void }>();

  /** Resolves once `count` requests have arrived in all: tests act on arrivals, not on timers. */
  arrived(count: number): Promise<void> {
    if (this.requests.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.arrivals.add({ count, resolve }));
  }

  /** Queue responses, one per request, in order. */
  enqueue(...responses: ScriptedResponse[]): this {
    this.queue.push(...responses);
    return this;
  }

  /** The response for every request once the queue is empty. */
  always(response: ScriptedResponse | undefined): this {
    this.fallback = response;
    return this;
  }

  /** Forget scripted responses and recorded requests (between tests). */
  reset(): void {
    this.queue.length = 0;
    this.fallback = undefined;
    this.requests.length = 0;
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const session of this.sessions) session.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => {});
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const path = String(headers[':path'] ?? '');
      const match = PATH.exec(path.split('?')[0] ?? '');
      let body: unknown;
      try {
        body = JSON.parse(rawBody);
      } catch {
        body = undefined;
      }
      const flat: Record<string, string> = {};
      for (const [key, value] of Object.entries(headers)) {
        if (value !== undefined) flat[key] = Array.isArray(value) ? value.join(', ') : String(value);
      }
      this.requests.push({
        method: String(headers[':method'] ?? ''),
        path,
        modelId: match ? decodeURIComponent(match[1]!) : '',
        headers: flat,
        body,
        rawBody,
        images: imagesOf(body),
      });
      for (const waiter of this.arrivals) {
        if (this.requests.length < waiter.count) continue;
        this.arrivals.delete(waiter);
        waiter.resolve();
      }
      if (headers[':method'] !== 'POST' || !match) {
        this.sendError(stream, { kind: 'error', status: 404, errorType: 'UnknownOperationException', message: `no route for ${path}` });
        return;
      }
      const script = this.queue.shift() ?? this.fallback;
      if (!script) {
        this.sendError(stream, {
          kind: 'error',
          status: 500,
          errorType: 'InternalServerException',
          message: 'bedrock test server: no scripted response left',
        });
        return;
      }
      if (script.kind === 'error') this.sendError(stream, script);
      else if (script.kind === 'stream') void this.sendStream(stream, script);
      // 'stall': never respond; the client has to give up on its own.
    });
  }

  private sendError(stream: http2.ServerHttp2Stream, script: Extract<ScriptedResponse, { kind: 'error' }>): void {
    if (stream.destroyed) return;
    stream.respond({
      ':status': script.status,
      'content-type': 'application/json',
      'x-amzn-requestid': `req-${this.requests.length}`,
      'x-amzn-errortype': `${script.errorType}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
      ...script.headers,
    });
    stream.end(JSON.stringify({ message: script.message }));
  }

  private async sendStream(stream: http2.ServerHttp2Stream, script: Extract<ScriptedResponse, { kind: 'stream' }>): Promise<void> {
    if (stream.destroyed) return;
    stream.respond({
      ':status': 200,
      'content-type': 'application/vnd.amazon.eventstream',
      'x-amzn-requestid': `req-${this.requests.length}`,
    });
    const frames = script.frames.map(encodeFrame);
    if (script.chunkBytes) {
      const all = Buffer.concat(frames);
      for (let i = 0; i < all.length; i += script.chunkBytes) {
        if (stream.destroyed) return;
        stream.write(all.subarray(i, i + script.chunkBytes));
        await this.pause(script.delayMs ?? 0);
      }
    } else {
      for (const frame of frames) {
        if (stream.destroyed) return;
        stream.write(frame);
        await this.pause(script.delayMs ?? 0);
      }
    }
    if (script.stallAfter || stream.destroyed) return;
    stream.end();
  }

  private pause(ms: number): Promise<void> {
    if (ms <= 0) return new Promise((resolve) => setImmediate(resolve));
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        resolve();
      }, ms);
      this.timers.add(timer);
    });
  }
}
