/**
 * Tavily web search and page extraction as an Agent's tools, as RAGFlow offers them
 * (agent/tools/tavily.py): `TavilySearch` is the function `tavily_search` (the model writes
 * `query`, `topic`, `include_domains`, `exclude_domains`), `TavilyExtract` is `tavily_extract`
 * (`urls`, `extract_depth`, `format`); everything else comes from the entry's params, with
 * RAGFlow's defaults. Calls go to Tavily's REST API (`POST {base}/search`, `POST {base}/extract`,
 * `Authorization: Bearer <key>`), the base being the operator's (EASEL_TOOL_TAVILY_BASE_URL).
 *
 * The key is a tenant secret, never the DSL's text: `api_key: "{secret.NAME}"` names it, an empty
 * `api_key` (as stock templates ship) means the secret `TAVILY_API_KEY`, and a literal key is
 * refused when the workflow is loaded. No key at run time is a permanent error the model reads.
 *
 * Search results become knowledge blocks the model cites (RAGFlow's `kb_prompt`) and the pass's
 * references (RAGFlow's `_retrieve_chunks` + `add_reference`); extracted pages go back as
 * RAGFlow's `json` output, without references, as in RAGFlow.
 *
 * @example
 *   const tools = createToolRegistry([retrievalTool, ...tavilyTools({ baseUrl: 'https://api.tavily.com' })]);
 */
import { z } from 'zod';
import { ToolError } from './errors';
import { credentialParam, functionShape, parseServiceAnswer, parseToolArgs, resolveCredential, withDefault } from './params';
import type { ToolEntry, ToolKind } from './registry';
import type { Tool, ToolContext, ToolResult } from './types';
import { webSearchResult } from './web-results';
import { requestService, serviceEndpoint, serviceJson } from './web-service';

export const TAVILY_BASE_URL = 'https://api.tavily.com';
/** The tenant secret that holds the key when an entry's `api_key` is empty. */
export const TAVILY_KEY_SECRET = 'TAVILY_API_KEY';
export const TAVILY_SEARCH_FUNCTION = 'tavily_search';
export const TAVILY_EXTRACT_FUNCTION = 'tavily_extract';
/** RAGFlow's limit on a search (COMPONENT_EXEC_TIMEOUT, 12 s). */
export const TAVILY_SEARCH_TIMEOUT_MS = 12_000;
/** RAGFlow allows an extraction 10 minutes; a turn cannot wait that long, one minute is plenty for a few pages. */
export const TAVILY_EXTRACT_TIMEOUT_MS = 60_000;
/** What the model reads when a search finds nothing. */
export const TAVILY_NOTHING_FOUND = 'Tavily found no web results for this query.';

export const TAVILY_SEARCH_DESCRIPTION = `
Tavily is a search engine optimized for LLMs, aimed at efficient, quick and persistent search results.
When searching:
   - Start with specific query which should focus on just a single aspect.
   - Number of keywords in query should be less than 5.
   - Broaden search terms if needed
   - Cross-reference information from multiple sources
             `;
export const TAVILY_EXTRACT_DESCRIPTION = 'Extract web page content from one or more specified URLs using Tavily Extract.';

const SEARCH_PARAMETERS = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      description: 'The search keywords to execute with Tavily. The keywords should be the most important words/terms(includes synonyms) from the original request.',
    },
    topic: {
      type: 'string',
      description:
        'default:general. The category of the search.news is useful for retrieving real-time updates, particularly about politics, sports, and major current events covered by mainstream media sources. general is for broader, more general-purpose searches that may include a wide range of sources.',
      enum: ['general', 'news'],
    },
    include_domains: {
      type: 'array',
      description: 'default:[]. A list of domains only from which the search results can be included.',
      items: { type: 'string', description: 'Domain name that must be included, e.g. www.yahoo.com' },
    },
    exclude_domains: {
      type: 'array',
      description: 'default:[]. A list of domains from which the search results can not be included',
      items: { type: 'string', description: 'Domain name that must be excluded, e.g. www.yahoo.com' },
    },
  },
  required: ['query'],
};

const EXTRACT_PARAMETERS = {
  type: 'object',
  properties: {
    urls: {
      type: 'array',
      description: 'The URLs to extract content from.',
      items: { type: 'string', description: 'The URL to extract content from, e.g. www.yahoo.com' },
    },
    extract_depth: {
      type: 'string',
      description:
        'The depth of the extraction process. advanced extraction retrieves more data, including tables and embedded content, with higher success but may increase latency.basic extraction costs 1 credit per 5 successful URL extractions, while advanced extraction costs 2 credits per 5 successful URL extractions.',
      enum: ['basic', 'advanced'],
    },
    format: {
      type: 'string',
      description: 'The format of the extracted web page content. markdown returns content in markdown format. text returns plain text and may increase latency.',
      enum: ['markdown', 'text'],
    },
  },
  required: ['urls'],
};

const apiKey = credentialParam('api_key', TAVILY_KEY_SECRET);
const domains = () => withDefault(z.array(z.string()), []);

const searchParams = z.lazy(() => z.looseObject({
  api_key: apiKey,
  search_depth: withDefault(z.enum(['basic', 'advanced'], "Tavily search depth should be in 'basic/advanced'"), 'basic'),
  topic: withDefault(z.enum(['general', 'news'], "Tavily topic: should be in 'general/news'"), 'general'),
  max_results: withDefault(z.number().int().min(1, 'Tavily max result number should be within [1, 20]').max(20, 'Tavily max result number should be within [1, 20]'), 6),
  days: withDefault(z.number().int().min(1, 'Tavily days should be greater than 1'), 14),
  include_answer: withDefault(z.boolean(), false),
  include_raw_content: withDefault(z.boolean(), false),
  include_images: withDefault(z.boolean(), false),
  include_image_descriptions: withDefault(z.boolean(), false),
  include_domains: domains(),
  exclude_domains: domains(),
  ...functionShape(),
}));
export type TavilySearchParams = z.output<typeof searchParams>;

const urlList = z.lazy(() => z.union([z.array(z.string()), z.string()]).transform((v) => (typeof v === 'string' ? splitUrls(v) : v.map((u) => u.trim()).filter(Boolean))));

const extractParams = z.lazy(() => z.looseObject({
  api_key: apiKey,
  extract_depth: withDefault(z.enum(['basic', 'advanced'], "Tavily extract depth should be in 'basic/advanced'"), 'basic'),
  format: withDefault(z.enum(['markdown', 'text'], "Tavily extract format should be in 'markdown/text'"), 'markdown'),
  urls: urlList.nullish().transform((v) => v ?? []),
  ...functionShape(),
}));
export type TavilyExtractParams = z.output<typeof extractParams>;

/** What the model may write; anything else it writes is ignored, as the entry's params decide it. */
const searchArgs = z.lazy(() => z.object({
  query: z.string().trim().min(1, 'must be a non-empty string'),
  topic: z.enum(['general', 'news']).nullish(),
  include_domains: z.array(z.string()).nullish(),
  exclude_domains: z.array(z.string()).nullish(),
}));
const extractArgs = z.lazy(() => z.object({
  urls: urlList.nullish(),
  extract_depth: z.enum(['basic', 'advanced']).nullish(),
  format: z.enum(['markdown', 'text']).nullish(),
}));

const searchAnswer = z.lazy(() => z.object({
  results: z.array(
    z.looseObject({
      title: z.string().nullish(),
      url: z.string(),
      content: z.string().nullish(),
      raw_content: z.string().nullish(),
      score: z.number().nullish(),
    }),
  ),
}));
const extractAnswer = z.lazy(() => z.looseObject({
  results: z.array(z.looseObject({ url: z.string(), raw_content: z.string().nullish() })),
  failed_results: z.array(z.unknown()).nullish(),
}));

export interface TavilyOptions {
  /** The operator's Tavily endpoint, no trailing slash. @default TAVILY_BASE_URL */
  baseUrl?: string;
}

/** The two kinds, talking to `baseUrl`. */
export function tavilyTools(options: TavilyOptions = {}): [ToolKind<TavilySearchParams>, ToolKind<TavilyExtractParams>] {
  const endpoint = tavilyEndpoint(options.baseUrl ?? TAVILY_BASE_URL);
  return [
    {
      name: 'TavilySearch',
      params: searchParams,
      credentials: [{ param: 'api_key', secret: TAVILY_KEY_SECRET }],
      create: (entry) => searchTool(entry, endpoint),
    },
    {
      name: 'TavilyExtract',
      params: extractParams,
      credentials: [{ param: 'api_key', secret: TAVILY_KEY_SECRET }],
      // RAGFlow defaults `urls` to nothing: the entry's own `urls` are used
      canvasDefaults: {},
      create: (entry) => extractTool(entry, endpoint),
    },
  ];
}

interface TavilyEndpoint {
  post(tool: string, path: '/search' | '/extract', key: string, body: unknown, timeoutMs: number, ctx: ToolContext): Promise<unknown>;
}

function tavilyEndpoint(baseUrl: string): TavilyEndpoint {
  const { prefix, guard } = serviceEndpoint(baseUrl);
  return {
    async post(tool, path, key, body, timeoutMs, ctx) {
      const res = await requestService(tool, ctx, {
        url: `${prefix}${path}`,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(body),
        timeoutMs,
        guard,
      });
      return serviceJson(tool, 'Tavily', res);
    },
  };
}

function searchTool(entry: ToolEntry<TavilySearchParams>, endpoint: TavilyEndpoint): Tool {
  const p = entry.params;
  const name = p.function_name || TAVILY_SEARCH_FUNCTION;
  return {
    name,
    description: p.description || TAVILY_SEARCH_DESCRIPTION,
    parameters: SEARCH_PARAMETERS,
    timeoutMs: TAVILY_SEARCH_TIMEOUT_MS,
    async invoke(args, ctx): Promise<ToolResult> {
      const a = parseToolArgs(name, searchArgs, args);
      const key = await tavilyKey(name, p.api_key, ctx);
      const body = {
        query: a.query,
        search_depth: p.search_depth,
        topic: a.topic ?? p.topic,
        max_results: p.max_results,
        days: p.days,
        include_answer: p.include_answer,
        // RAGFlow always asks for neither: the snippets are what the model reads
        include_raw_content: false,
        include_images: false,
        include_image_descriptions: p.include_image_descriptions,
        include_domains: a.include_domains ?? p.include_domains,
        exclude_domains: a.exclude_domains ?? p.exclude_domains,
      };
      const answer = parseServiceAnswer(name, 'Tavily', searchAnswer, await endpoint.post(name, '/search', key, body, TAVILY_SEARCH_TIMEOUT_MS, ctx));
      const results = answer.results.map((r) => ({ title: r.title, url: r.url, content: r.raw_content || r.content, score: r.score }));
      return webSearchResult(results, { nothingFound: TAVILY_NOTHING_FOUND });
    },
  };
}

function extractTool(entry: ToolEntry<TavilyExtractParams>, endpoint: TavilyEndpoint): Tool {
  const p = entry.params;
  const name = p.function_name || TAVILY_EXTRACT_FUNCTION;
  return {
    name,
    description: p.description || TAVILY_EXTRACT_DESCRIPTION,
    parameters: EXTRACT_PARAMETERS,
    timeoutMs: TAVILY_EXTRACT_TIMEOUT_MS,
    async invoke(args, ctx): Promise<ToolResult> {
      const a = parseToolArgs(name, extractArgs, args);
      const urls = a.urls && a.urls.length > 0 ? a.urls : p.urls;
      if (urls.length === 0) throw new ToolError(`tool "${name}": the argument "urls" must name at least one URL`);
      const key = await tavilyKey(name, p.api_key, ctx);
      const body = { urls, extract_depth: a.extract_depth ?? p.extract_depth, format: a.format ?? p.format, include_images: false };
      const answer = parseServiceAnswer(name, 'Tavily', extractAnswer, await endpoint.post(name, '/extract', key, body, TAVILY_EXTRACT_TIMEOUT_MS, ctx));
      return { kind: 'result', content: JSON.stringify(answer.results) };
    },
  };
}

/** The key for one call: the secret `api_key` names, else the tenant's `TAVILY_API_KEY`. */
async function tavilyKey(tool: string, value: string, ctx: ToolContext): Promise<string> {
  return (await resolveCredential(tool, 'Tavily', { name: 'api_key', value, defaultSecret: TAVILY_KEY_SECRET }, ctx)) as string;
}

function splitUrls(text: string): string[] {
  return text.split(',').map((u) => u.trim()).filter(Boolean);
}
