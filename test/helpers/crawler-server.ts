/**
 * A small web site on 127.0.0.1 and an ephemeral port, for the Crawler: each path answers the
 * page set for it (its content type and body, or a redirect), anything else is a 404 HTML page.
 *
 * Scriptable per request (a queue): a status with headers and a body (429 with `retry-after`,
 * 503, a redirect elsewhere), or a stall that never answers. Every request is recorded with its
 * method, path and headers.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SitePage {
  /** @default 200 */
  status?: number;
  /** `content-type`; null sends none. @default 'text/html; charset=utf-8' */
  type?: string | null;
  body?: string | Buffer;
  headers?: Record<string, string>;
}

export type SiteScripted = { kind: 'status'; status: number; body?: string; headers?: Record<string, string> } | { kind: 'stall' };

export interface SiteRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
}

export class CrawlerSite {
  readonly requests: SiteRequest[] = [];
  readonly #queue: SiteScripted[] = [];
  readonly #stalled: ServerResponse[] = [];

  private constructor(
    private readonly server: Server,
    /** `http://127.0.0.1:<port>` */
    readonly url: string,
    readonly port: number,
    public pages: Record<string, SitePage>,
  ) {}

  static async start(pages: Record<string, SitePage> = {}): Promise<CrawlerSite> {
    let self: CrawlerSite | undefined;
    const server = createServer((req, res) => self?.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    self = new CrawlerSite(server, `http://127.0.0.1:${port}`, port, pages);
    return self;
  }

  /** Answers the next requests with these, in order, before answering normally again. */
  enqueue(...answers: SiteScripted[]): void {
    this.#queue.push(...answers);
  }

  async close(): Promise<void> {
    for (const res of this.#stalled.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    const path = req.url ?? '/';
    this.requests.push({ method: req.method ?? '', path, headers: { ...req.headers } });
    const scripted = this.#queue.shift();
    if (scripted?.kind === 'stall') {
      this.#stalled.push(res);
      return;
    }
    if (scripted) {
      res.writeHead(scripted.status, { 'content-type': 'text/html', ...scripted.headers });
      res.end(scripted.body ?? '');
      return;
    }
    const page = this.pages[path];
    if (!page) {
      res.writeHead(404, { 'content-type': 'text/html' });
      res.end('<html><body><h1>Not Found</h1></body></html>');
      return;
    }
    const type = page.type === undefined ? 'text/html; charset=utf-8' : page.type;
    res.writeHead(page.status ?? 200, { ...(type !== null ? { 'content-type': type } : {}), ...page.headers });
    res.end(page.body ?? '');
  }
}
