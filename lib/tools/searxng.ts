/**
 * Web search on a SearXNG instance as an Agent's tool, as RAGFlow offers it
 * (agent/tools/searxng.py): the kind `SearXNG` is the function `searxng_search`; the model
 * writes `query` and, as RAGFlow's function lets it, `searxng_url` — used only when the
 * entry's own `searxng_url` is empty. `top_n` (10) caps the results.
 *
 * The instance is the tenant's, not the operator's: its URL goes through the run's SSRF guard
 * like any tenant URL (every redirect too), and a run without a guard has no outbound HTTP, so
 * the tool refuses to call. The call is SearXNG's JSON API with RAGFlow's query,
 * `GET {searxng_url}/search?q=...&format=json&categories=general&language=auto&safesearch=1&pageno=1`
 * (https://docs.searxng.org/dev/search_api.html); an instance must have `json` among its
 * `search.formats`, else it answers 403.
 *
 * Results become knowledge blocks the model cites and the pass's references (title, url,
 * content); `data` is the first `top_n` of SearXNG's `results`, RAGFlow's `json` output.
 *
 * @example
 *   const tools = createToolRegistry([searxngTool()]);
 *   // DSL entry: {component_name: 'SearXNG', name: 'web', params: {searxng_url: 'https://searx.example.org'}}
 */
import { z } from 'zod';
import type { OutboundResponse } from '../outbound/request';
import { SsrfBlockedError } from '../outbound/ssrf';
import { ToolError } from './errors';
import { functionShape, integerParam, parseServiceAnswer, parseToolArgs, withDefault } from './params';
import type { ToolEntry, ToolKind } from './registry';
import type { Tool, ToolResult } from './types';
import { webSearchResult } from './web-results';
import { requestService, serviceJson, type ServiceVerdict } from './web-service';

export const SEARXNG_FUNCTION = 'searxng_search';
/** RAGFlow's limit on a search (COMPONENT_EXEC_TIMEOUT, 12 s). */
export const SEARXNG_TIMEOUT_MS = 12_000;
/** RAGFlow's limit on one request to the instance. */
const REQUEST_TIMEOUT_MS = 10_000;
/** What the model reads when a search finds nothing. */
export const SEARXNG_NOTHING_FOUND = 'SearXNG found no web results for this query.';

export const SEARXNG_DESCRIPTION =
  'SearXNG is a privacy-focused metasearch engine that aggregates results from multiple search engines without tracking users. It provides comprehensive web search capabilities.';

const PARAMETERS = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      description: 'The search keywords to execute with SearXNG. The keywords should be the most important words/terms(includes synonyms) from the original request.',
    },
    searxng_url: {
      type: 'string',
      description: 'The base URL of your SearXNG instance (e.g., http://localhost:4000). This is required to connect to your SearXNG server.',
    },
  },
  required: ['query'],
};

/** An http(s) URL without a trailing slash, or empty. */
const instanceUrl = (message: string) =>
  z
    .string()
    .trim()
    .refine((v) => v === '' || isHttpUrl(v), { message })
    .transform((v) => v.replace(/\/+$/, ''));

const searxngParams = z.lazy(() => z.looseObject({
  top_n: withDefault(integerParam(1, 'Top N should be a positive integer'), 10),
  searxng_url: withDefault(instanceUrl('searxng_url must be the http(s) URL of a SearXNG instance, e.g. https://searx.example.org'), ''),
  ...functionShape(),
}));
export type SearxngParams = z.output<typeof searxngParams>;

/** What the model may write; anything else is ignored. */
const searxngArgs = z.lazy(() => z.object({
  query: z.string().trim().min(1, 'must be a non-empty string'),
  searxng_url: z.string().nullish(),
}));

const searxngAnswer = z.lazy(() => z.looseObject({
  results: z.array(
    z.looseObject({
      url: z.string().nullish(),
      title: z.string().nullish(),
      content: z.string().nullish(),
    }),
  ),
}));

/** The kind `SearXNG`; the instance is each entry's (or the model's) URL. */
export function searxngTool(): ToolKind<SearxngParams> {
  return { name: 'SearXNG', params: searxngParams, create: (entry) => searchTool(entry) };
}

function searchTool(entry: ToolEntry<SearxngParams>): Tool {
  const p = entry.params;
  const name = p.function_name || SEARXNG_FUNCTION;
  return {
    name,
    description: p.description || SEARXNG_DESCRIPTION,
    parameters: PARAMETERS,
    timeoutMs: SEARXNG_TIMEOUT_MS,
    async invoke(args, ctx): Promise<ToolResult> {
      const a = parseToolArgs(name, searxngArgs, args);
      const base = p.searxng_url || (a.searxng_url ?? '').trim().replace(/\/+$/, '');
      if (!base) throw new ToolError(`tool "${name}": SearXNG is not configured: set searxng_url to the URL of a SearXNG instance`);
      if (!isHttpUrl(base)) throw new ToolError(`tool "${name}": the argument "searxng_url" must be an http(s) URL`);
      const guard = ctx.services.guard;
      if (!guard) throw new ToolError(`tool "${name}": outbound HTTP is not configured for this run, so SearXNG cannot be reached`);

      const query = new URLSearchParams({ q: a.query, format: 'json', categories: 'general', language: 'auto', safesearch: '1', pageno: '1' });
      let res: OutboundResponse;
      try {
        res = await requestService(name, ctx, { url: `${base}/search?${query}`, headers: { accept: 'application/json' }, guard, timeoutMs: REQUEST_TIMEOUT_MS }, { classify: searxngVerdict });
      } catch (error) {
        if (error instanceof SsrfBlockedError) throw new ToolError(`tool "${name}": SearXNG cannot be reached: ${error.message}`, { cause: error });
        throw error;
      }
      const answer = parseServiceAnswer(name, 'SearXNG', searxngAnswer, serviceJson(name, 'SearXNG', res));
      const results = answer.results.slice(0, p.top_n);
      // SearXNG's `score` is not a similarity in [0, 1]: RAGFlow gives every result 1
      const found = results.map((r) => ({ title: r.title, url: r.url, content: r.content }));
      return webSearchResult(found, { nothingFound: SEARXNG_NOTHING_FOUND, data: results });
    },
  };
}

/** SearXNG answers 403 to `format=json` when the instance does not serve JSON. */
function searxngVerdict(res: OutboundResponse): ServiceVerdict | undefined {
  if (res.status === 403) return { kind: 'final', detail: 'the instance does not serve format=json (add json to search.formats in its settings.yml)' };
  return undefined;
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}
