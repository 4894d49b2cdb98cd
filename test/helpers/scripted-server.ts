/**
 * What the local stand-ins for web services share: a server on 127.0.0.1 and an ephemeral port
 * that records every request (method, path, query, headers, body) and answers it with the
 * service's own logic, unless the test scripted the next answers (a queue): a status with a
 * body and headers (429 with Retry-After, 503, ...), or a stall that never answers.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ScriptedAnswer = { kind: 'status'; status: number; body: string; headers?: Record<string, string> } | { kind: 'stall' };

export interface RecordedRequest {
  method: string;
  path: string;
  /** The query string's parameters, a repeated one by its last value. */
  query: Record<string, string>;
  /** The raw query string, without `?`. */
  search: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface ServiceAnswer {
  status: number;
  body: string;
  /** @default content-type application/json */
  headers?: Record<string, string>;
}

export class ScriptedServer {
  readonly requests: RecordedRequest[] = [];
  readonly #queue: ScriptedAnswer[] = [];
  readonly #stalled: ServerResponse[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /** Listens; `answer` speaks the service's protocol for requests nothing was scripted for. */
  static async start(answer: (request: RecordedRequest) => ServiceAnswer): Promise<ScriptedServer> {
    let self: ScriptedServer | undefined;
    const server = createServer((req, res) => {
      void self?.handle(req, res, answer);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    self = new ScriptedServer(server, `http://127.0.0.1:${port}`);
    return self;
  }

  /** Answers the next requests with these, in order, before answering normally again. */
  enqueue(...answers: ScriptedAnswer[]): void {
    this.#queue.push(...answers);
  }

  /** Forgets the requests so far and anything still scripted. */
  reset(): void {
    this.requests.length = 0;
    this.#queue.length = 0;
  }

  async close(): Promise<void> {
    for (const res of this.#stalled.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse, answer: (request: RecordedRequest) => ServiceAnswer): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const request: RecordedRequest = {
      method: req.method ?? '',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      search: url.search.replace(/^\?/, ''),
      headers: { ...req.headers },
      body: Buffer.concat(chunks).toString('utf8'),
    };
    this.requests.push(request);
    const scripted = this.#queue.shift();
    if (scripted?.kind === 'stall') {
      this.#stalled.push(res);
      return;
    }
    const reply = scripted ?? answer(request);
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
    res.end(reply.body);
  }
}

/** Text as XML character data. */
export function xmlEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** The words of a text that a stand-in's search matches on. */
export function wordsOf(text: string): string[] {
  return text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w.length > 2);
}

/** Whether `text` shares a word with `query`. */
export function matches(query: string, text: string): boolean {
  const words = new Set(wordsOf(query));
  return wordsOf(text).some((w) => words.has(w));
}

/** A JSON answer. */
export const json = (status: number, value: unknown, headers?: Record<string, string>): ServiceAnswer => ({ status, body: JSON.stringify(value), ...(headers ? { headers } : {}) });

/**
 * What every stand-in built on a ScriptedServer shows a test: its URL, the requests it got, the
 * answers scripted ahead and closing it. A stand-in extends it and speaks its service.
 */
export abstract class ServiceStandIn {
  protected constructor(readonly server: ScriptedServer) {}

  get url(): string {
    return this.server.url;
  }

  get requests(): RecordedRequest[] {
    return this.server.requests;
  }

  enqueue(...answers: ScriptedAnswer[]): void {
    this.server.enqueue(...answers);
  }

  close(): Promise<void> {
    return this.server.close();
  }
}
