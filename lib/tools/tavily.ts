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
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { chunkReference, formatChunks } from '../knowledge/format';
import { outboundRequest } from '../outbound/request';
import { SsrfGuard } from '../outbound/ssrf';
import { ToolError, toolHttpError } from './errors';
import type { ToolEntry, ToolKind } from './registry';
import type { Tool, ToolContext, ToolResult } from './types';

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
/** RAGFlow's cap on one result's text (`content[:10000]`). */
const MAX_RESULT_CHARS = 10_000;
const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

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

const SECRET_REFERENCE = /^\{secret\.([A-Za-z_][A-Za-z0-9_]{0,63})\}$/;

/** Empty, or a `{secret.NAME}` reference; the issue never repeats the value (it may be a key). */
const apiKey = z
  .string()
  .nullish()
  .transform((v) => v?.trim() ?? '')
  .refine((v) => v === '' || SECRET_REFERENCE.test(v), {
    message: `api_key must not hold the key itself: store the key as a tenant secret and write {secret.NAME} (left empty, the secret ${TAVILY_KEY_SECRET} is used)`,
  });

/** A DSL value or, when absent or null, RAGFlow's default. */
const withDefault = <T extends z.ZodType>(schema: T, fallback: z.output<T>) => schema.nullish().transform((v) => v ?? fallback);
const domains = () => withDefault(z.array(z.string()), []);
const functionShape = {
  /** Shown to the model; RAGFlow's when empty. */
  description: z.string().nullish(),
  function_name: z.string().regex(/^[A-Za-z0-9_-]{1,56}$/, 'must be 1-56 letters, digits, _ or -').nullish(),
};

const searchParams = z.looseObject({
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
  ...functionShape,
});
export type TavilySearchParams = z.output<typeof searchParams>;

const urlList = z.union([z.array(z.string()), z.string()]).transform((v) => (typeof v === 'string' ? splitUrls(v) : v.map((u) => u.trim()).filter(Boolean)));

const extractParams = z.looseObject({
  api_key: apiKey,
  extract_depth: withDefault(z.enum(['basic', 'advanced'], "Tavily extract depth should be in 'basic/advanced'"), 'basic'),
  format: withDefault(z.enum(['markdown', 'text'], "Tavily extract format should be in 'markdown/text'"), 'markdown'),
  urls: urlList.nullish().transform((v) => v ?? []),
  ...functionShape,
});
export type TavilyExtractParams = z.output<typeof extractParams>;

/** What the model may write; anything else it writes is ignored, as the entry's params decide it. */
const searchArgs = z.object({
  query: z.string().trim().min(1, 'must be a non-empty string'),
  topic: z.enum(['general', 'news']).nullish(),
  include_domains: z.array(z.string()).nullish(),
  exclude_domains: z.array(z.string()).nullish(),
});
const extractArgs = z.object({
  urls: urlList.nullish(),
  extract_depth: z.enum(['basic', 'advanced']).nullish(),
  format: z.enum(['markdown', 'text']).nullish(),
});

const searchAnswer = z.object({
  results: z.array(
    z.looseObject({
      title: z.string().nullish(),
      url: z.string(),
      content: z.string().nullish(),
      raw_content: z.string().nullish(),
      score: z.number().nullish(),
    }),
  ),
});
const extractAnswer = z.looseObject({
  results: z.array(z.looseObject({ url: z.string(), raw_content: z.string().nullish() })),
  failed_results: z.array(z.unknown()).nullish(),
});

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
      create: (entry) => searchTool(entry, endpoint),
    },
    {
      name: 'TavilyExtract',
      params: extractParams,
      create: (entry) => extractTool(entry, endpoint),
    },
  ];
}

interface TavilyEndpoint {
  post(tool: string, path: '/search' | '/extract', key: string, body: unknown, timeoutMs: number, signal: AbortSignal): Promise<unknown>;
}

/**
 * The operator chose the base URL, so its host is let through the SSRF guard whatever it
 * resolves to (a proxy in a VPC, a local stand-in); the connection still goes to the address
 * the guard resolved, and a redirect elsewhere is judged like any tenant URL.
 */
function tavilyEndpoint(baseUrl: string): TavilyEndpoint {
  const base = new URL(baseUrl.replace(/\/+$/, ''));
  const host = base.hostname.startsWith('[') ? base.hostname.slice(1, -1) : base.hostname;
  const guard = new SsrfGuard({ allow: [host] });
  const prefix = base.href.replace(/\/+$/, '');
  return {
    async post(tool, path, key, body, timeoutMs, signal) {
      const res = await outboundRequest({
        url: `${prefix}${path}`,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(body),
        timeoutMs,
        maxResponseBytes: MAX_RESPONSE_BYTES,
        guard,
        signal,
      });
      if (res.status < 200 || res.status > 299) throw toolHttpError(tool, res.status, errorDetail(res.body));
      try {
        return JSON.parse(res.body) as unknown;
      } catch (cause) {
        throw new ToolError(`tool "${tool}": Tavily answered ${res.status} with a body that is not JSON`, { cause });
      }
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
      const a = parseArgs(name, searchArgs, args);
      const key = await resolveKey(name, p.api_key, ctx);
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
      const answer = parseAnswer(name, searchAnswer, await endpoint.post(name, '/search', key, body, TAVILY_SEARCH_TIMEOUT_MS, ctx.signal));
      const { chunks, docs } = webChunks(answer.results);
      if (chunks.length === 0) return { kind: 'result', content: TAVILY_NOTHING_FOUND };
      return { kind: 'result', content: formatChunks(chunks), references: { chunks: chunks.map(chunkReference), doc_aggs: docs } };
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
      const a = parseArgs(name, extractArgs, args);
      const urls = a.urls && a.urls.length > 0 ? a.urls : p.urls;
      if (urls.length === 0) throw new ToolError(`tool "${name}": the argument "urls" must name at least one URL`);
      const key = await resolveKey(name, p.api_key, ctx);
      const body = { urls, extract_depth: a.extract_depth ?? p.extract_depth, format: a.format ?? p.format, include_images: false };
      const answer = parseAnswer(name, extractAnswer, await endpoint.post(name, '/extract', key, body, TAVILY_EXTRACT_TIMEOUT_MS, ctx.signal));
      return { kind: 'result', content: JSON.stringify(answer.results) };
    },
  };
}

/**
 * The key for one call: the secret the entry names, else the tenant's `TAVILY_API_KEY`. A
 * missing secret is permanent: the model is told, and the message says which secret to set.
 */
async function resolveKey(tool: string, apiKeyParam: string, ctx: ToolContext): Promise<string> {
  const named = SECRET_REFERENCE.exec(apiKeyParam)?.[1];
  const secretName = named ?? TAVILY_KEY_SECRET;
  const value = (await ctx.services.secret?.(secretName))?.trim();
  if (value) return value;
  throw new ToolError(
    named
      ? `tool "${tool}": Tavily is not configured: the secret ${secretName} named by api_key is not set for this tenant`
      : `tool "${tool}": Tavily is not configured: set the tenant secret ${TAVILY_KEY_SECRET} to a Tavily API key, or write {secret.NAME} in api_key`,
  );
}

function parseArgs<T extends z.ZodType>(tool: string, schema: T, args: Record<string, unknown>): z.output<T> {
  const parsed = schema.safeParse(args);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'arguments'}: ${i.message}`);
  throw new ToolError(`tool "${tool}": invalid arguments: ${problems.join('; ')}`);
}

function parseAnswer<T extends z.ZodType>(tool: string, schema: T, body: unknown): z.output<T> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  throw new ToolError(`tool "${tool}": Tavily answered with an unexpected body (${parsed.error.issues[0]?.message ?? 'invalid'})`);
}

/** RAGFlow's `_retrieve_chunks`: one chunk and one document per result with text, its id from the URL. */
function webChunks(results: z.output<typeof searchAnswer>['results']) {
  const chunks: Record<string, unknown>[] = [];
  const docs: { doc_name: string; doc_id: string; count: number; url: string }[] = [];
  const seen = new Set<string>();
  for (const r of results) {
    const content = (r.raw_content || r.content || '').replace(/!?\[[a-z]+\]\(data:image\/png;base64,[ 0-9A-Za-z/_=+-]+\)/g, '').slice(0, MAX_RESULT_CHARS);
    if (!content || seen.has(r.url)) continue;
    seen.add(r.url);
    const id = hashStr2Int(r.url);
    const title = r.title || r.url;
    chunks.push({ chunk_id: id, content, doc_id: id, docnm_kwd: title, similarity: r.score ?? 1, url: r.url });
    docs.push({ doc_name: title, doc_id: id, count: 1, url: r.url });
  }
  return { chunks, docs };
}

/** RAGFlow's `hash_str2int(line)`: `int(sha1(line).hexdigest(), 16) % 10**8`, as text. */
function hashStr2Int(line: string): string {
  const hex = createHash('sha1').update(line, 'utf8').digest('hex');
  return String(BigInt(`0x${hex}`) % 100_000_000n);
}

function splitUrls(text: string): string[] {
  return text.split(',').map((u) => u.trim()).filter(Boolean);
}

/** Tavily's error text (`{"detail": {"error": "..."}}`), short; never the request. */
function errorDetail(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { detail?: { error?: unknown } | string };
    const detail = typeof parsed.detail === 'string' ? parsed.detail : parsed.detail?.error;
    return typeof detail === 'string' ? detail.slice(0, 200) : undefined;
  } catch {
    return undefined;
  }
}
