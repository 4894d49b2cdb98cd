/**
 * A local server speaking the OpenAI chat-completions protocol, for tests of the real client:
 * SSE streams with `data:` chunks, tool-call deltas, usage, plain JSON answers, error statuses
 * and stalls. Replies come from a queue, else from `respond(body)`; every request is recorded.
 * A test can hold an answer until it says so (`until`), and wait until requests have arrived
 * (`arrived`): the order of events, not the time they take, is what tests go by. A message sent
 * as content parts is recorded with its text as `content` (the parts' texts joined), the parts
 * as sent in `contents`, and its images decoded from their `data:` URLs in `images`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Reply =
  | {
    kind: 'text';
    text: string;
    chunks?: number;
    stream?: boolean;
    delayMs?: number;
    /** A model the test holds: streamed, the first chunk comes, then the rest once this settles; not streamed, the answer waits for it. */
    until?: Promise<unknown>;
  }
  | { kind: 'tools'; calls: { name: string; arguments: Record<string, unknown> }[]; text?: string; stream?: boolean }
  | { kind: 'status'; status: number; message?: string; headers?: Record<string, string> }
  | { kind: 'stall' };

/** A content part as the protocol sends it. */
export type WirePart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string; detail?: string } };

/** An image a request carried, decoded from its `data:` URL. */
export interface ReceivedImage {
  /** The index of its message. */
  message: number;
  mime_type: string;
  bytes: Buffer;
}

export interface RecordedRequest {
  /** The whole answer was sent (a client that died mid-answer leaves it false). */
  completed?: boolean;
  path: string;
  headers: IncomingMessage['headers'];
  /** Each message's content as sent: a string, or its parts. */
  contents: (string | WirePart[])[];
  /** The images of the request's messages, in order. */
  images: ReceivedImage[];
  body: {
    model: string;
    stream?: boolean;
    /** `content`: the text (of a message sent as parts, its text parts joined by blank lines). */
    messages: { role: string; content: string; tool_calls?: unknown[]; tool_call_id?: string }[];
    tools?: { type: string; function: { name: string; description: string; parameters: unknown } }[];
    response_format?: unknown;
    temperature?: number;
  };
}

export class OpenAiServer {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: Reply[] = [];
  private readonly stalled = new Set<ServerResponse>();
  respond: (body: RecordedRequest['body']) => Reply = () => ({ kind: 'text', text: 'ok' });
  private readonly arrivals = new Set<{ count: number; resolve: () => void }>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<OpenAiServer> {
    let instance: OpenAiServer | undefined;
    const server = createServer((req, res) => void instance?.handle(req, res));
    instance = new OpenAiServer(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return instance;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  get calls(): number {
    return this.requests.length;
  }

  enqueue(...replies: Reply[]): void {
    this.queue.push(...replies);
  }

  /** Resolves once `count` requests have arrived in all (their bodies read and recorded). */
  arrived(count: number): Promise<void> {
    if (this.requests.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.arrivals.add({ count, resolve }));
  }

  async close(): Promise<void> {
    for (const res of this.stalled) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += String(chunk);
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    const sent = JSON.parse(raw) as Omit<RecordedRequest['body'], 'messages'> & { messages: { role: string; content: string | WirePart[] }[] };
    const contents = sent.messages.map((m) => m.content);
    const body = { ...sent, messages: sent.messages.map((m) => ({ ...m, content: textOf(m.content) })) } as RecordedRequest['body'];
    const recorded: RecordedRequest = { path: req.url, headers: req.headers, body, contents, images: imagesOf(contents) };
    this.requests.push(recorded);
    for (const waiter of this.arrivals) {
      if (this.requests.length < waiter.count) continue;
      this.arrivals.delete(waiter);
      waiter.resolve();
    }
    res.once('finish', () => {
      recorded.completed = true;
    });
    const reply = this.queue.shift() ?? this.respond(body);
    const usage = { prompt_tokens: 10 + body.messages.length, completion_tokens: 5, total_tokens: 15 + body.messages.length };
    switch (reply.kind) {
      case 'status':
        res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
        res.end(JSON.stringify({ error: { message: reply.message ?? `status ${reply.status}`, type: 'test' } }));
        return;
      case 'stall':
        this.stalled.add(res);
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': waiting\n\n');
        return;
      case 'text':
      case 'tools': {
        if (reply.kind === 'text' && reply.until && (reply.stream === false || body.stream === false)) await reply.until;
        const text = reply.kind === 'text' ? reply.text : (reply.text ?? '');
        const calls = reply.kind === 'tools' ? reply.calls.map((c, i) => ({ id: `call_${this.requests.length}_${i}`, name: c.name, arguments: JSON.stringify(c.arguments) })) : [];
        const finish = calls.length > 0 ? 'tool_calls' : 'stop';
        if (reply.stream === false || body.stream === false) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({
            id: 'cmpl-1', object: 'chat.completion', model: body.model,
            choices: [{ index: 0, finish_reason: finish, message: { role: 'assistant', content: text || null, ...(calls.length ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}) } }],
            usage,
          }));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        const send = (chunk: unknown) => res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        const base = { id: 'chunk', object: 'chat.completion.chunk', model: body.model };
        send({ ...base, choices: [{ index: 0, delta: { role: 'assistant' }, finish_reason: null }] });
        const pieces = split(text, reply.kind === 'text' ? (reply.chunks ?? 3) : 1);
        const delay = reply.kind === 'text' ? (reply.delayMs ?? 0) : 0;
        const until = reply.kind === 'text' ? reply.until : undefined;
        if (until) this.stalled.add(res);
        for (const [i, piece] of pieces.entries()) {
          send({ ...base, choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] });
          if (i === 0 && until) await until;
          await new Promise((resolve) => (delay > 0 ? setTimeout(resolve, delay) : setImmediate(resolve)));
        }
        this.stalled.delete(res);
        // the client may have gone meanwhile (an aborted turn)
        if (res.destroyed) return;
        calls.forEach((c, index) => {
          // arguments arrive in two fragments, as real providers send them
          const half = Math.floor(c.arguments.length / 2);
          send({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments.slice(0, half) } }] }, finish_reason: null }] });
          send({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: c.arguments.slice(half) } }] }, finish_reason: null }] });
        });
        send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] });
        send({ ...base, choices: [], usage });
        res.end('data: [DONE]\n\n');
      }
    }
  }
}

/** The text of a message as sent: its string, or its text parts joined by blank lines. */
export function textOf(content: string | WirePart[] | null | undefined): string {
  if (content === null || content === undefined) return '';
  return typeof content === 'string' ? content : content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n\n');
}

function imagesOf(contents: RecordedRequest['contents']): ReceivedImage[] {
  return contents.flatMap((content, message) => {
    if (typeof content === 'string') return [];
    return content.flatMap((p) => {
      if (p.type !== 'image_url') return [];
      const data = /^data:([^;,]+);base64,(.*)$/s.exec(p.image_url.url);
      return data ? [{ message, mime_type: data[1] as string, bytes: Buffer.from(data[2] as string, 'base64') }] : [];
    });
  });
}

function split(text: string, parts: number): string[] {
  if (text === '') return [];
  const size = Math.max(1, Math.ceil(text.length / parts));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}
