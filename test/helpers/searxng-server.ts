/**
 * A local stand-in for a SearXNG instance's search API (https://docs.searxng.org/dev/search_api.html):
 *
 * - `GET /search?q=...&format=json` (also `categories`, `language`, `safesearch`, `pageno`)
 *   answers `{query, number_of_results, results: [{url, title, content, engine, engines,
 *   parsed_url, template, positions, score, category}], answers, corrections, infoboxes,
 *   suggestions, unresponsive_engines}`: the pages whose title or content shares a word with `q`;
 * - an instance without `json` in `search.formats` (`jsonEnabled: false`) answers HTTP 403
 *   with an HTML page, as SearXNG does; a missing `q` is HTTP 400 (HTML).
 *
 * Scriptable per request (status+headers, stall; a 302 with `location` for redirects); every
 * request is recorded.
 */
import { json, type RecordedRequest, ScriptedServer, ServiceStandIn, wordsOf } from './scripted-server';

export interface SearxPage {
  url: string;
  title: string;
  content: string;
}

export class SearxngServer extends ServiceStandIn {
  private constructor(
    server: ScriptedServer,
    public pages: SearxPage[],
    public jsonEnabled: boolean,
  ) {
    super(server);
  }

  static async start(options: { pages?: SearxPage[]; jsonEnabled?: boolean } = {}): Promise<SearxngServer> {
    let self: SearxngServer | undefined;
    const http = await ScriptedServer.start((request) => (self as SearxngServer).answer(request));
    self = new SearxngServer(http, options.pages ?? [], options.jsonEnabled ?? true);
    return self;
  }

  private answer(request: RecordedRequest) {
    const html = (status: number, text: string) => ({ status, body: `<!DOCTYPE html><html><body><h1>${text}</h1></body></html>`, headers: { 'content-type': 'text/html; charset=utf-8' } });
    if (request.path !== '/search') return html(404, 'Not Found');
    const q = request.query;
    if (q.format === 'json' && !this.jsonEnabled) return html(403, 'Forbidden');
    if (!q.q) return html(400, 'Bad Request');
    const words = new Set(wordsOf(q.q));
    const results = this.pages
      .filter((p) => wordsOf(`${p.title} ${p.content}`).some((w) => words.has(w)))
      .map((p, i) => {
        const parsed = new URL(p.url);
        return {
          url: p.url,
          title: p.title,
          content: p.content,
          engine: 'duckduckgo',
          engines: ['duckduckgo', 'brave'],
          parsed_url: [parsed.protocol.replace(':', ''), parsed.host, parsed.pathname, '', parsed.search.replace('?', ''), ''],
          template: 'default.html',
          positions: [i + 1],
          score: 2 / (i + 1),
          category: 'general',
        };
      });
    return json(200, { query: q.q, number_of_results: 0, results, answers: [], corrections: [], infoboxes: [], suggestions: [], unresponsive_engines: [] });
  }
}
