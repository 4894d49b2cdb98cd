/**
 * A local stand-in for Tavily's REST API on 127.0.0.1 and an ephemeral port:
 *
 * - `POST /search` `{query, search_depth, topic, max_results, ...}` answers
 *   `{query, answer: null, images: [], results: [{title, url, content, score, raw_content}], response_time}`,
 *   the results those of `pages` whose title or content shares a word with the query, at most
 *   `max_results`, `include_domains` / `exclude_domains` applied to their host;
 * - `POST /extract` `{urls, extract_depth, format}` answers `{results: [{url, raw_content}],
 *   failed_results: [{url, error}], response_time}` from `pages` by URL;
 * - `Authorization: Bearer <key>` must carry `key`, else HTTP 401 `{"detail": {"error": "Unauthorized: missing or invalid API key."}}`;
 *   a body that is not a JSON object, or a search without a string `query` or an extraction
 *   without a list of `urls`, is HTTP 400 with Tavily's `detail`.
 *
 * Scriptable per request (a queue): a status with a body (401, 429, 500, ...), or a stall that
 * never answers. Every request is recorded with its headers and body.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface WebPage {
  url: string;
  title: string;
  content: string;
  /** What /extract answers for the page. @default content */
  raw_content?: string;
  score?: number;
}

export type TavilyScripted = { kind: 'status'; status: number; body: string; headers?: Record<string, string> } | { kind: 'stall' };

export interface TavilyRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

export const TAVILY_TEST_KEY = 'tvly-test-KEY-0123456789';

export class TavilyServer {
  readonly requests: TavilyRequest[] = [];
  readonly #queue: TavilyScripted[] = [];
  readonly #stalled: ServerResponse[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
    public pages: WebPage[],
    public key: string,
  ) {}

  static async start(options: { pages?: WebPage[]; key?: string } = {}): Promise<TavilyServer> {
    let self: TavilyServer | undefined;
    const server = createServer((req, res) => {
      void self?.handle(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    self = new TavilyServer(server, `http://127.0.0.1:${port}`, options.pages ?? [], options.key ?? TAVILY_TEST_KEY);
    return self;
  }

  /** Answers the next requests with these, in order, before answering normally again. */
  enqueue(...answers: TavilyScripted[]): void {
    this.#queue.push(...answers);
  }

  async close(): Promise<void> {
    for (const res of this.#stalled.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: any;
    try {
      body = JSON.parse(raw);
    } catch {
      body = undefined;
    }
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    this.requests.push({ method: req.method ?? '', path, headers: { ...req.headers }, body });

    const scripted = this.#queue.shift();
    if (scripted?.kind === 'stall') {
      this.#stalled.push(res);
      return;
    }
    if (scripted) return send(res, scripted.status, scripted.body, scripted.headers);

    if (req.headers.authorization !== `Bearer ${this.key}`) {
      return send(res, 401, JSON.stringify({ detail: { error: 'Unauthorized: missing or invalid API key.' } }));
    }
    if (req.method !== 'POST' || (path !== '/search' && path !== '/extract')) return send(res, 404, JSON.stringify({ detail: 'Not Found' }));
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return send(res, 400, JSON.stringify({ detail: { error: 'Invalid JSON body' } }));
    if (path === '/search') {
      if (typeof body.query !== 'string' || body.query === '') return send(res, 400, JSON.stringify({ detail: { error: 'Query is missing.' } }));
      return send(res, 200, JSON.stringify(this.search(body)));
    }
    if (!Array.isArray(body.urls) || body.urls.length === 0) return send(res, 400, JSON.stringify({ detail: { error: 'No URLs provided' } }));
    return send(res, 200, JSON.stringify(this.extract(body.urls as string[])));
  }

  private search(body: { query: string; max_results?: number; include_domains?: string[]; exclude_domains?: string[] }) {
    const words = new Set(wordsOf(body.query));
    const host = (url: string) => new URL(url).hostname;
    const results = this.pages
      .filter((p) => wordsOf(`${p.title} ${p.content}`).some((w) => words.has(w)))
      .filter((p) => !body.include_domains?.length || body.include_domains.includes(host(p.url)))
      .filter((p) => !body.exclude_domains?.includes(host(p.url)))
      .slice(0, body.max_results ?? 5)
      .map((p, i) => ({ title: p.title, url: p.url, content: p.content, score: p.score ?? 0.9 - i * 0.1, raw_content: null }));
    return { query: body.query, follow_up_questions: null, answer: null, images: [], results, response_time: 0.42 };
  }

  private extract(urls: string[]) {
    const found = urls.map((url) => this.pages.find((p) => p.url === url));
    return {
      results: found.filter((p): p is WebPage => p !== undefined).map((p) => ({ url: p.url, raw_content: p.raw_content ?? p.content, images: [] })),
      failed_results: urls.filter((_, i) => found[i] === undefined).map((url) => ({ url, error: 'Failed to fetch url' })),
      response_time: 0.2,
    };
  }
}

function wordsOf(text: string): string[] {
  return text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((w) => w.length > 2);
}

function send(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(body);
}
