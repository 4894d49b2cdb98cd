/**
 * Local servers speaking the two embedding protocols the embedder uses, for tests of the real
 * clients:
 * - `OpenAiEmbeddingServer`: HTTP/1.1, `POST /v1/embeddings` `{model, input: [...]}` answered
 *   `{object: 'list', data: [{object: 'embedding', index, embedding}], model, usage}`;
 * - `BedrockEmbeddingServer`: HTTP/2 over cleartext (the SDK's handler for Bedrock Runtime
 *   speaks it with prior knowledge, see test/llm/bedrock-server.ts), `POST /model/{id}/invoke`
 *   `{inputText}` answered `{embedding, inputTextTokenCount}`, errors as the service sends them
 *   (`x-amzn-errortype`, `{message}`).
 *
 * Both take scripted replies from a queue (one per request), else embed: the vector of a text
 * is `vectorOf(text)`. Every request is recorded. A Bedrock test can hold answers until a number
 * of requests are in flight at once (`holdUntilInFlight`), to see concurrency without timers.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

/** A text's vector: what the servers answer, so a test can check order. */
export function vectorOf(text: string, dimensions = 3): number[] {
  let sum = 0;
  for (const ch of text) sum += ch.codePointAt(0)!;
  const base = [text.length, sum % 97, 1];
  return Array.from({ length: dimensions }, (_, k) => base[k % 3]! + Math.floor(k / 3));
}

export type EmbeddingReply =
  | { kind: 'status'; status: number; message?: string; errorType?: string; headers?: Record<string, string> }
  /** A 200 with this body as it is. */
  | { kind: 'raw'; body: string }
  /** Vectors of this length instead of the default. */
  | { kind: 'dimensions'; dimensions: number }
  | { kind: 'stall' };

export interface RecordedEmbeddingRequest {
  path: string;
  headers: Record<string, string>;
  body: any;
}

export class OpenAiEmbeddingServer {
  readonly requests: RecordedEmbeddingRequest[] = [];
  private readonly queue: EmbeddingReply[] = [];
  private readonly stalled = new Set<ServerResponse>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<OpenAiEmbeddingServer> {
    let self: OpenAiEmbeddingServer | undefined;
    const server = createServer((req, res) => self!.handle(req, res));
    self = new OpenAiEmbeddingServer(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return self;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  enqueue(...replies: EmbeddingReply[]): this {
    this.queue.push(...replies);
    return this;
  }

  async close(): Promise<void> {
    for (const res of this.stalled) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null');
      this.requests.push({ path: req.url ?? '', headers: flatten(req.headers), body });
      if (req.method !== 'POST' || req.url !== '/v1/embeddings') return json(res, 404, { error: { message: `no route ${req.url}` } });
      const reply = this.queue.shift();
      if (reply?.kind === 'stall') {
        this.stalled.add(res);
        return;
      }
      if (reply?.kind === 'status') {
        return json(res, reply.status, { error: { message: reply.message ?? `status ${reply.status}`, type: 'test' } }, reply.headers);
      }
      if (reply?.kind === 'raw') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(reply.body);
        return;
      }
      const input: string[] = Array.isArray(body?.input) ? body.input : [body?.input];
      const dimensions = reply?.kind === 'dimensions' ? reply.dimensions : (body?.dimensions ?? 3);
      // answered out of order, as the protocol allows: the client must go by `index`
      const data = input.map((text, index) => ({ object: 'embedding', index, embedding: vectorOf(text, dimensions) })).reverse();
      json(res, 200, { object: 'list', data, model: body?.model, usage: { prompt_tokens: 1, total_tokens: 1 } });
    });
  }
}

const INVOKE = /^\/model\/([^/]+)\/invoke$/;

export class BedrockEmbeddingServer {
  readonly requests: (RecordedEmbeddingRequest & { modelId: string })[] = [];
  /** The most requests that were ever answered-pending at once. */
  maxInFlight = 0;
  private inFlight = 0;
  private readonly queue: EmbeddingReply[] = [];
  private hold: { count: number; waiting: (() => void)[] } | undefined;
  private readonly sessions = new Set<http2.ServerHttp2Session>();

  private constructor(private readonly server: http2.Http2Server) {
    server.on('session', (session) => {
      this.sessions.add(session);
      session.on('close', () => this.sessions.delete(session));
      session.on('error', () => {});
    });
    server.on('stream', (stream, headers) => this.handle(stream, headers));
  }

  static async start(): Promise<BedrockEmbeddingServer> {
    const self = new BedrockEmbeddingServer(http2.createServer());
    await new Promise<void>((resolve) => self.server.listen(0, '127.0.0.1', resolve));
    return self;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  enqueue(...replies: EmbeddingReply[]): this {
    this.queue.push(...replies);
    return this;
  }

  /** Answer nothing until `count` requests wait at once; then answer them all. */
  holdUntilInFlight(count: number): this {
    this.hold = { count, waiting: [] };
    return this;
  }

  reset(): void {
    this.requests.length = 0;
    this.queue.length = 0;
    this.hold = undefined;
    this.maxInFlight = 0;
  }

  async close(): Promise<void> {
    for (const session of this.sessions) session.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', () => {});
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      const path = String(headers[':path'] ?? '');
      const match = INVOKE.exec(path);
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      this.requests.push({ path, modelId: match ? decodeURIComponent(match[1]!) : '', headers: flatten(headers), body });
      const reply = this.queue.shift();
      const answer = () => this.answer(stream, match !== null, body, reply);
      this.inFlight++;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
      stream.on('close', () => this.inFlight--);
      if (reply?.kind === 'stall') return;
      const hold = this.hold;
      if (!hold) return answer();
      hold.waiting.push(answer);
      if (hold.waiting.length >= hold.count) {
        this.hold = undefined;
        for (const release of hold.waiting) release();
      }
    });
  }

  private answer(stream: http2.ServerHttp2Stream, routed: boolean, body: any, reply: EmbeddingReply | undefined): void {
    if (stream.destroyed) return;
    const send = (status: number, payload: unknown, extra: Record<string, string> = {}) => {
      stream.respond({ ':status': status, 'content-type': 'application/json', ...extra });
      stream.end(JSON.stringify(payload));
    };
    if (!routed) return send(404, { message: 'no route' }, { 'x-amzn-errortype': 'UnknownOperationException' });
    if (reply?.kind === 'status') {
      return send(reply.status, { message: reply.message ?? 'failed' }, { 'x-amzn-errortype': reply.errorType ?? 'InternalServerException', ...reply.headers });
    }
    if (reply?.kind === 'raw') {
      stream.respond({ ':status': 200, 'content-type': 'application/json' });
      stream.end(reply.body);
      return;
    }
    const text = String(body?.inputText ?? '');
    const dimensions = reply?.kind === 'dimensions' ? reply.dimensions : (body?.dimensions ?? 3);
    send(200, { embedding: vectorOf(text, dimensions), inputTextTokenCount: text.split(' ').length });
  }
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function flatten(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) if (value !== undefined) out[key] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}
