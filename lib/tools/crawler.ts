/**
 * RAGFlow's Crawler (agent/tools/crawler.py) as an Agent's tool: the function `web_crawler`
 * fetches the page at the URL the model writes (`query`; the entry's own `query` when the model
 * writes none and it is a URL) and hands back its content as `extract_type` says: `markdown`
 * (the default), `html` (cleaned of scripts, styles and attributes), or `content` (the text a
 * reader sees). RAGFlow drives a browser (crawl4ai); Easel reads the HTML the server sends, so
 * a page that draws itself with script shows what it sends before that.
 *
 * The URL is the tenant's or the model's, never the operator's: it goes through the run's SSRF
 * guard, which judges every redirect again before connecting, so a public page cannot send the
 * request into the VPC, the instance metadata or localhost. A run without a guard fetches
 * nothing. Only HTML and text are read, at most CRAWLER_MAX_PAGE_BYTES of them.
 *
 * @example
 *   const tools = createToolRegistry([crawlerTool()]);
 *   // DSL: {"component_name": "Crawler", "name": "Crawler", "params": {"extract_type": "markdown"}}
 */
import { z } from 'zod';
import { DocumentParseError } from '../knowledge/parse/errors';
import { OutboundError } from '../outbound/request';
import { SsrfBlockedError } from '../outbound/ssrf';
import { ToolError } from './errors';
import { functionShape, parseToolArgs, withDefault } from './params';
import type { ToolEntry, ToolKind } from './registry';
import type { Tool, ToolResult } from './types';
import { requestService } from './web-service';

export const CRAWLER_FUNCTION = 'web_crawler';
export const CRAWLER_DESCRIPTION =
  'This tool can be used to crawl a web page and return its content as HTML, Markdown, or the extracted main text.';
/** The whole call, redirects and retries included. RAGFlow allows a browser 10 minutes; a page read over HTTP needs far less. */
export const CRAWLER_TIMEOUT_MS = 30_000;
/** One attempt: the page's server may be slow, but it must not take the whole call. */
const ATTEMPT_TIMEOUT_MS = 15_000;
/** The largest page read (4 MiB): a web page's HTML is rarely past 1 MiB; anything larger is not meant for reading. */
export const CRAWLER_MAX_PAGE_BYTES = 4 * 1024 * 1024;
/** The most the model reads of one page (~25k tokens); the rest is cut with a note saying so. */
export const CRAWLER_MAX_CONTENT_CHARS = 100_000;

const EXTRACT_TYPES = ['html', 'markdown', 'content'] as const;
export type CrawlerExtractType = (typeof EXTRACT_TYPES)[number];

const CRAWLER_PARAMETERS = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      description: 'The absolute URL (including the http:// or https:// scheme) of the web page to crawl.',
    },
  },
  required: ['query'],
};

const crawlerParams = z.lazy(() =>
  z.looseObject({
    extract_type: withDefault(
      z.enum(EXTRACT_TYPES, { error: (issue) => `Type of content from the crawler ${JSON.stringify(issue.input)} is not supported, it should be in ['html', 'markdown', 'content']` }),
      'markdown',
    ),
    // RAGFlow's browser could go through a proxy; here every page is fetched directly, through the SSRF guard.
    proxy: z
      .string()
      .nullish()
      .refine((v) => !v?.trim(), { message: 'a proxy is not supported: pages are fetched directly, through the SSRF guard; leave proxy empty' }),
    /** RAGFlow's default is `{sys.query}`; a literal URL here is fetched when the model names none. */
    query: z.string().nullish(),
    ...functionShape(),
  }),
);
export type CrawlerParams = z.output<typeof crawlerParams>;

const crawlerArgs = z.lazy(() => z.object({ query: z.string().nullish() }));

/** Content types read as HTML; a page that names none is read as HTML too, as a browser would. */
const HTML_TYPES = new Set(['text/html', 'application/xhtml+xml', '']);

/** The Crawler kind. */
export function crawlerTool(): ToolKind<CrawlerParams> {
  return { name: 'Crawler', params: crawlerParams, create: (entry) => pageTool(entry) };
}

function pageTool(entry: ToolEntry<CrawlerParams>): Tool {
  const p = entry.params;
  const name = p.function_name || CRAWLER_FUNCTION;
  return {
    name,
    description: p.description || CRAWLER_DESCRIPTION,
    parameters: CRAWLER_PARAMETERS,
    timeoutMs: CRAWLER_TIMEOUT_MS,
    async invoke(args, ctx): Promise<ToolResult> {
      const a = parseToolArgs(name, crawlerArgs, args);
      const url = pageUrl(name, a.query?.trim() || fallbackUrl(p.query));
      const guard = ctx.services.guard;
      if (!guard) throw new ToolError(`tool "${name}": this run has no outbound guard, so it fetches no page`);
      let res;
      try {
        res = await requestService(name, ctx, {
          url: url.href,
          headers: { accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1' },
          guard,
          timeoutMs: ATTEMPT_TIMEOUT_MS,
          maxResponseBytes: CRAWLER_MAX_PAGE_BYTES,
        });
      } catch (error) {
        if (error instanceof SsrfBlockedError) throw new ToolError(`tool "${name}": ${error.message}`, { cause: error });
        if (error instanceof OutboundError && error.reason === 'response_too_large') {
          throw new ToolError(`tool "${name}": the page at ${url.origin} is larger than ${CRAWLER_MAX_PAGE_BYTES / 1024 / 1024} MiB, the most the crawler reads`, { cause: error });
        }
        throw error;
      }
      const type = (res.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      let content: string;
      if (HTML_TYPES.has(type)) {
        if (res.body.includes('\u0000')) throw new ToolError(`tool "${name}": the page at ${new URL(res.url).origin} is binary, not HTML`);
        content = await pageContent(name, res.body, p.extract_type, res.url);
      } else if (isText(type)) {
        content = res.body.trim();
      } else {
        throw new ToolError(`tool "${name}": the page at ${new URL(res.url).origin} is ${type}, not HTML or text; the crawler reads web pages only`);
      }
      if (content === '') return { kind: 'result', content: `The page at ${res.url} has no readable text.` };
      return { kind: 'result', content: bounded(content) };
    },
  };
}

/**
 * The page as `extract_type` asks; a page past the parser's limits is a permanent failure. The
 * parser is loaded on the first page, off the init path of functions that crawl nothing.
 */
async function pageContent(tool: string, html: string, extractType: CrawlerExtractType, baseUrl: string): Promise<string> {
  const [{ htmlToText }, { cleanHtml, htmlToMarkdown }] = await Promise.all([import('../knowledge/parse/html'), import('../knowledge/parse/html-views')]);
  try {
    if (extractType === 'html') return cleanHtml(html, { baseUrl });
    if (extractType === 'content') return htmlToText(html);
    return htmlToMarkdown(html, { baseUrl });
  } catch (error) {
    if (error instanceof DocumentParseError) throw new ToolError(`tool "${tool}": the page cannot be read: ${error.message}`, { cause: error });
    throw error;
  }
}

function pageUrl(tool: string, raw: string | undefined): URL {
  if (!raw) throw new ToolError(`tool "${tool}": the argument "query" must be the absolute URL of the page to crawl`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ToolError(`tool "${tool}": "query" must be an absolute URL with its http:// or https:// scheme`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ToolError(`tool "${tool}": "query" must be an http:// or https:// URL`);
  return url;
}

/** The entry's `query` when it is a URL rather than a variable (`{sys.query}`, as RAGFlow ships it). */
function fallbackUrl(query: string | null | undefined): string | undefined {
  const value = query?.trim();
  return value && /^https?:\/\//i.test(value) ? value : undefined;
}

function isText(type: string): boolean {
  return type.startsWith('text/') || type === 'application/json' || type === 'application/xml' || type.endsWith('+json') || type.endsWith('+xml');
}

function bounded(content: string): string {
  if (content.length <= CRAWLER_MAX_CONTENT_CHARS) return content;
  return `${content.slice(0, CRAWLER_MAX_CONTENT_CHARS)}\n\n[the page goes on; only its first ${CRAWLER_MAX_CONTENT_CHARS.toLocaleString('en-US')} characters are shown]`;
}
