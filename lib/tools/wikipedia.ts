/**
 * Wikipedia search as an Agent's tool, as RAGFlow offers it (agent/tools/wikipedia.py): the
 * kind `Wikipedia` is the function `wikipedia_search`; the model writes `query`, the entry's
 * params set `top_n` (10) and `language` (en). RAGFlow asks the python `wikipedia` library for
 * the titles a search finds, then each page's summary; this asks the MediaWiki Action API the
 * same in two steps, `GET {base}/w/api.php`:
 *
 * 1. `action=query&list=search&srsearch=<query>&srlimit=<top_n>&srprop=` — the pages found, best first;
 * 2. `action=query&prop=extracts|info|pageprops&exintro&explaintext&inprop=url&ppprop=disambiguation&pageids=…`
 *    — each page's introduction as plain text (the library's `summary`) and its URL, 20 pages a
 *    request (the most TextExtracts returns at once). Disambiguation pages and pages gone since
 *    the search are left out, as RAGFlow leaves them out.
 *
 * The base is `https://{language}.wikipedia.org`; an operator's EASEL_TOOL_WIKIPEDIA_BASE_URL
 * may carry the `{language}` placeholder too, in the host or the path
 * (`https://wiki-proxy.internal/{language}`), which each call fills with the entry's language;
 * a base without it serves every language from one wiki. The host the filled-in base names is
 * the one the SSRF guard lets through.
 *
 * Found pages become knowledge blocks the model cites and the pass's references (title, URL,
 * summary); RAGFlow's Wikipedia has no `json` output, and neither has this.
 *
 * @example
 *   const tools = createToolRegistry([wikipediaTool({ baseUrl: 'https://wiki-proxy.internal/{language}' })]);
 */
import { z } from 'zod';
import { ToolError } from './errors';
import { functionShape, parseServiceAnswer, parseToolArgs, topNParam, withDefault } from './params';
import type { ToolEntry, ToolKind } from './registry';
import { webSearchResult } from './web-results';
import type { Tool, ToolContext, ToolResult } from './types';
import { requestService, type ServiceEndpoint, serviceEndpoint, serviceJson } from './web-service';

export const WIKIPEDIA_BASE_URL = 'https://{language}.wikipedia.org';
export const WIKIPEDIA_FUNCTION = 'wikipedia_search';
/** RAGFlow's limit on a Wikipedia search (COMPONENT_EXEC_TIMEOUT, 60 s). */
export const WIKIPEDIA_TIMEOUT_MS = 60_000;
/** One request's deadline: a search or a batch of summaries is quick, or the wiki is struggling. */
const REQUEST_TIMEOUT_MS = 12_000;
/** What the model reads when a search finds nothing. */
export const WIKIPEDIA_NOTHING_FOUND = 'Wikipedia found no articles for this query.';
/** The most pages a search lists for a client that is not a bot. */
const MAX_SEARCH_RESULTS = 500;
/** The most introductions TextExtracts returns in one request. */
const EXTRACTS_PER_REQUEST = 20;
/** Wikimedia asks every client to say who it is; generic agents are throttled first. */
const USER_AGENT = 'Easel-Wikipedia-Tool (RAGFlow-format agent workflows)';

/** The languages RAGFlow offers (WikipediaParam.check). */
export const WIKIPEDIA_LANGUAGES = [
  'af', 'pl', 'ar', 'ast', 'az', 'bg', 'nan', 'bn', 'be', 'ca', 'cs', 'cy', 'da', 'de', 'et', 'el', 'en', 'es', 'eo', 'eu',
  'fa', 'fr', 'gl', 'ko', 'hy', 'hi', 'hr', 'id', 'it', 'he', 'ka', 'lld', 'la', 'lv', 'lt', 'hu', 'mk', 'arz', 'ms', 'min',
  'my', 'nl', 'ja', 'nb', 'nn', 'ce', 'uz', 'pt', 'kk', 'ro', 'ru', 'ceb', 'sk', 'sl', 'sr', 'sh', 'fi', 'sv', 'ta', 'tt',
  'th', 'tg', 'azb', 'tr', 'uk', 'ur', 'vi', 'war', 'zh', 'yue',
] as const;
export type WikipediaLanguage = (typeof WIKIPEDIA_LANGUAGES)[number];

export const WIKIPEDIA_DESCRIPTION =
  "A wide range of how-to and information pages are made available in wikipedia. Since 2001, it has grown rapidly to become the world's largest reference website. From Wikipedia, the free encyclopedia.";

const PARAMETERS = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      description: 'The search keyword to execute with wikipedia. The keyword MUST be a specific subject that can match the title.',
    },
  },
  required: ['query'],
};

const params = z.lazy(() => z.looseObject({
  top_n: topNParam('Top N', 10),
  language: withDefault(z.enum(WIKIPEDIA_LANGUAGES, `Wikipedia languages should be one of ${WIKIPEDIA_LANGUAGES.join(', ')}`), 'en'),
  ...functionShape(),
}));
export type WikipediaParams = z.output<typeof params>;

const args = z.lazy(() => z.object({ query: z.string().trim().min(1, 'must be a non-empty string') }));

/** MediaWiki answers a refused request with 200 and `{error: {code, info}}`. */
const apiError = z.lazy(() => z.object({ error: z.looseObject({ code: z.string().nullish(), info: z.string().nullish() }) }));
const searchAnswer = z.lazy(() => z.object({
  query: z.object({ search: z.array(z.looseObject({ pageid: z.number().int(), title: z.string() })) }),
}));
const pagesAnswer = z.lazy(() => z.object({
  query: z.object({
    pages: z.array(
      z.looseObject({
        pageid: z.number().int().nullish(),
        title: z.string().nullish(),
        missing: z.boolean().nullish(),
        extract: z.string().nullish(),
        fullurl: z.string().nullish(),
        pageprops: z.looseObject({ disambiguation: z.string().nullish() }).nullish(),
      }),
    ),
  }).nullish(),
}));
type WikipediaPage = NonNullable<z.output<typeof pagesAnswer>['query']>['pages'][number];

export interface WikipediaOptions {
  /** The operator's wiki origin, `{language}` filled in per call. @default WIKIPEDIA_BASE_URL */
  baseUrl?: string;
}

export function wikipediaTool(options: WikipediaOptions = {}): ToolKind<WikipediaParams> {
  const endpointFor = wikipediaEndpoints(options.baseUrl ?? WIKIPEDIA_BASE_URL);
  return { name: 'Wikipedia', params, create: (entry) => searchTool(entry, endpointFor) };
}

const LANGUAGE_PLACEHOLDER = /\{language\}|%7Blanguage%7D/gi;

/** One endpoint per language, each guarded for its own host; a base that cannot be one fails here, at start-up. */
function wikipediaEndpoints(baseUrl: string): (language: WikipediaLanguage) => ServiceEndpoint {
  const byLanguage = new Map<string, ServiceEndpoint>();
  const endpointFor = (language: WikipediaLanguage) => {
    let endpoint = byLanguage.get(language);
    if (!endpoint) {
      endpoint = serviceEndpoint(baseUrl.replace(LANGUAGE_PLACEHOLDER, language));
      byLanguage.set(language, endpoint);
    }
    return endpoint;
  };
  endpointFor('en');
  return endpointFor;
}

function searchTool(entry: ToolEntry<WikipediaParams>, endpointFor: (language: WikipediaLanguage) => ServiceEndpoint): Tool {
  const p = entry.params;
  const name = p.function_name || WIKIPEDIA_FUNCTION;
  const endpoint = endpointFor(p.language);
  const get = async (query: Record<string, string>, ctx: ToolContext) => {
    const search = new URLSearchParams({ action: 'query', format: 'json', formatversion: '2', ...query });
    const res = await requestService(name, ctx, {
      url: `${endpoint.prefix}/w/api.php?${search}`,
      headers: { accept: 'application/json', 'user-agent': USER_AGENT },
      timeoutMs: REQUEST_TIMEOUT_MS,
      guard: endpoint.guard,
    });
    const body = serviceJson(name, 'Wikipedia', res);
    const refused = apiError.safeParse(body);
    if (refused.success) {
      throw new ToolError(`tool "${name}": Wikipedia refused the request: ${(refused.data.error.info ?? refused.data.error.code ?? 'no reason given').slice(0, 200)}`);
    }
    return body;
  };
  return {
    name,
    description: p.description || WIKIPEDIA_DESCRIPTION,
    parameters: PARAMETERS,
    timeoutMs: WIKIPEDIA_TIMEOUT_MS,
    async invoke(rawArgs, ctx): Promise<ToolResult> {
      const { query } = parseToolArgs(name, args, rawArgs);
      const limit = String(Math.min(p.top_n, MAX_SEARCH_RESULTS));
      const found = parseServiceAnswer(name, 'Wikipedia', searchAnswer, await get({ list: 'search', srsearch: query, srlimit: limit, srprop: '' }, ctx));
      const ids = [...new Set(found.query.search.map((s) => s.pageid))];
      const pages = new Map<number, WikipediaPage>();
      for (let i = 0; i < ids.length; i += EXTRACTS_PER_REQUEST) {
        const batch = ids.slice(i, i + EXTRACTS_PER_REQUEST);
        const answer = parseServiceAnswer(
          name,
          'Wikipedia',
          pagesAnswer,
          await get(
            {
              prop: 'extracts|info|pageprops',
              exintro: '1',
              explaintext: '1',
              exlimit: String(EXTRACTS_PER_REQUEST),
              inprop: 'url',
              ppprop: 'disambiguation',
              redirects: '1',
              pageids: batch.join('|'),
            },
            ctx,
          ),
        );
        for (const page of answer.query?.pages ?? []) if (typeof page.pageid === 'number') pages.set(page.pageid, page);
      }
      // in the search's order: the pages answer lists them by id
      const items = ids.flatMap((id) => {
        const page = pages.get(id);
        if (!page || page.missing || page.pageprops?.disambiguation !== undefined || !page.extract) return [];
        const title = page.title ?? '';
        return [{ title, url: page.fullurl || articleUrl(endpoint.prefix, title), content: page.extract.trim() }];
      });
      return webSearchResult(items, { nothingFound: WIKIPEDIA_NOTHING_FOUND });
    },
  };
}

/** Where a page is read when the wiki gave no URL: its canonical article path. */
function articleUrl(prefix: string, title: string): string {
  return `${prefix}/wiki/${encodeURIComponent(title.replace(/ /g, '_'))}`;
}
