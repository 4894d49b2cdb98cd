/**
 * The part every stand-in for a web service shares: a server on 127.0.0.1 and an ephemeral
 * port that records each request (method, path, query, headers, body) and answers it from a
 * queue of scripted answers first (a status with headers and a body, or a stall that never
 * answers), then from the service's own handler.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HttpAnswer {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

export type Scripted = ({ kind: 'status' } & HttpAnswer) | { kind: 'stall' };

export interface RecordedRequest {
  method: string;
  path: string;
  /** The query string's parameters, the last of each name. */
  query: Record<string, string>;
  /** The raw query string, without `?`. */
  search: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export class ScriptedHttpServer {
  readonly requests: RecordedRequest[] = [];
  readonly #queue: Scripted[] = [];
  readonly #stalled: ServerResponse[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /** `answer` is the service's behaviour for a request nothing scripted answers. */
  static async start(answer: (request: RecordedRequest) => HttpAnswer): Promise<ScriptedHttpServer> {
    let self: ScriptedHttpServer | undefined;
    const server = createServer((req, res) => {
      void self?.handle(req, res, answer);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    self = new ScriptedHttpServer(server, `http://127.0.0.1:${port}`);
    return self;
  }

  /** Answers the next requests with these, in order, before answering normally again. */
  enqueue(...answers: Scripted[]): void {
    this.#queue.push(...answers);
  }

  async close(): Promise<void> {
    for (const res of this.#stalled.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse, answer: (request: RecordedRequest) => HttpAnswer): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const target = new URL(req.url ?? '/', 'http://stand-in');
    const request: RecordedRequest = {
      method: req.method ?? '',
      path: target.pathname,
      query: Object.fromEntries(target.searchParams),
      search: target.search.replace(/^\?/, ''),
      headers: { ...req.headers },
      body: Buffer.concat(chunks).toString('utf8'),
    };
    this.requests.push(request);

    const scripted = this.#queue.shift();
    if (scripted?.kind === 'stall') {
      this.#stalled.push(res);
      return;
    }
    const { status, body, headers } = scripted ?? answer(request);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
    res.end(body);
  }
}

/** Lower-case words of three letters or more: how the stand-ins match a query to their pages. */
export function wordsOf(text: string): string[] {
  return text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w.length > 2);
}

export const json = (status: number, value: unknown, headers?: Record<string, string>): HttpAnswer => ({ status, body: JSON.stringify(value), ...(headers ? { headers } : {}) });
