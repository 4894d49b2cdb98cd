/**
 * A local stand-in for SerpApi's Google Search API (https://serpapi.com/search-api):
 *
 * - `GET /search.json?engine=google&q=...&api_key=...` with optional `gl`, `hl`,
 *   `google_domain`, `start`, `num` answers `{search_metadata: {status: "Success"},
 *   search_parameters, search_information, organic_results: [{position, title, link,
 *   displayed_link, snippet, source, about_this_result?}]}`: the pages whose title or snippet
 *   shares a word with `q`, from offset `start`, at most `num` (10 by default);
 * - nothing found is still a 200, with `search_information.organic_results_state: "Fully empty"`
 *   and `error: "Google hasn't returned any results for this query."` and no `organic_results`;
 * - a wrong or missing `api_key` is HTTP 401 `{"error": "Invalid API key. ..."}`; a missing
 *   `q` is HTTP 400 `{"error": "Missing query \`q\` parameter."}`; an engine other than google
 *   is HTTP 400.
 *
 * Scriptable per request (status+headers, stall); every request is recorded.
 */
import { json, type RecordedRequest, ScriptedServer, ServiceStandIn, wordsOf } from './scripted-server';

export interface GooglePage {
  link: string;
  title: string;
  snippet: string;
  /** SerpApi's `about_this_result.source.description` (what RAGFlow prefers over the snippet). */
  sourceDescription?: string;
}

export const SERPAPI_TEST_KEY = 'serp-test-KEY-5f3a9c0d1e';

export class SerpApiServer extends ServiceStandIn {
  private constructor(
    server: ScriptedServer,
    public pages: GooglePage[],
    public key: string,
  ) {
    super(server);
  }

  static async start(options: { pages?: GooglePage[]; key?: string } = {}): Promise<SerpApiServer> {
    let self: SerpApiServer | undefined;
    const http = await ScriptedServer.start((request) => (self as SerpApiServer).answer(request));
    self = new SerpApiServer(http, options.pages ?? [], options.key ?? SERPAPI_TEST_KEY);
    return self;
  }

  private answer(request: RecordedRequest) {
    const q = request.query;
    if (request.method !== 'GET' || request.path !== '/search.json') return json(404, { error: 'Not found' });
    if (q.api_key !== this.key) return json(401, { error: 'Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key' });
    if ((q.engine ?? 'google') !== 'google') return json(400, { error: 'Unsupported `engine` parameter.' });
    if (!q.q) return json(400, { error: 'Missing query `q` parameter.' });

    const start = Number(q.start ?? 0);
    const num = Number(q.num ?? 10);
    const words = new Set(wordsOf(q.q));
    const found = this.pages.filter((p) => wordsOf(`${p.title} ${p.snippet}`).some((w) => words.has(w))).slice(start, start + num);
    const common = {
      search_metadata: { id: '6650c0ffee', status: 'Success', json_endpoint: 'https://serpapi.com/searches/6650c0ffee.json', total_time_taken: 1.2 },
      search_parameters: { engine: 'google', q: q.q, google_domain: q.google_domain ?? 'google.com', hl: q.hl, gl: q.gl, device: 'desktop' },
    };
    if (found.length === 0) {
      return json(200, { ...common, search_information: { organic_results_state: 'Fully empty' }, error: "Google hasn't returned any results for this query." });
    }
    return json(200, {
      ...common,
      search_information: { organic_results_state: 'Results for exact spelling', total_results: found.length },
      organic_results: found.map((p, i) => ({
        position: start + i + 1,
        title: p.title,
        link: p.link,
        displayed_link: new URL(p.link).hostname,
        snippet: p.snippet,
        source: new URL(p.link).hostname,
        ...(p.sourceDescription ? { about_this_result: { source: { description: p.sourceDescription } } } : {}),
      })),
    });
  }
}
