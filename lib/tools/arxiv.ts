/**
 * arXiv search as an Agent's tool, as RAGFlow offers it (agent/tools/arxiv.py): the kind
 * `ArXiv` is the function `arxiv_search`; the model writes `query`, the entry's params set
 * `top_n` (12) and `sort_by` (submittedDate, lastUpdatedDate or relevance). RAGFlow calls the
 * python `arxiv` library, which asks the arXiv API; this asks it directly:
 * `GET {base}/query?search_query=<query>&id_list=&sortBy=<sort_by>&sortOrder=descending&start=0&max_results=<top_n>`,
 * the base being `https://export.arxiv.org/api` or the operator's EASEL_TOOL_ARXIV_BASE_URL.
 * The answer is an Atom feed, one `<entry>` per paper; a query arXiv cannot read comes back
 * (with a 400) as a feed whose one entry is titled "Error", its reason told to the model.
 *
 * Papers become knowledge blocks the model cites and the pass's references: the title, the
 * PDF's URL (RAGFlow's `pdf_url`), and as text the authors, the date, the categories and the
 * abstract (RAGFlow's text is the abstract alone; its documentation promises the rest).
 * RAGFlow's ArXiv has no `json` output, and neither has this.
 *
 * @example
 *   const tools = createToolRegistry([arxivTool({ baseUrl: 'https://export.arxiv.org/api' })]);
 */
import { z } from 'zod';
import { ToolError } from './errors';
import { functionShape, parseToolArgs, topNParam, withDefault } from './params';
import type { ToolEntry, ToolKind } from './registry';
import { type WebResult, webSearchResult } from './web-results';
import type { Tool, ToolResult } from './types';
import { requestService, type ServiceEndpoint, serviceEndpoint } from './web-service';
import { childElements, collapsedText, firstElement, parseXml, XmlParseError, type XmlElement } from './xml';

export const ARXIV_BASE_URL = 'https://export.arxiv.org/api';
export const ARXIV_FUNCTION = 'arxiv_search';
/** RAGFlow's limit on an arXiv search (COMPONENT_EXEC_TIMEOUT, 12 s). */
export const ARXIV_TIMEOUT_MS = 12_000;
export const ARXIV_NOTHING_FOUND = 'arXiv found no papers for this query.';
/** The most results arXiv returns for one request. */
const MAX_RESULTS = 2_000;

export const ARXIV_SORTS = ['submittedDate', 'lastUpdatedDate', 'relevance'] as const;

export const ARXIV_DESCRIPTION =
  'arXiv is a free distribution service and an open-access archive for nearly 2.4 million scholarly articles in the fields of physics, mathematics, computer science, quantitative biology, quantitative finance, statistics, electrical engineering and systems science, and economics. Materials on this site are not peer-reviewed by arXiv.';

const PARAMETERS = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      description: 'The search keywords to execute with arXiv. The keywords should be the most important words/terms(includes synonyms) from the original request.',
    },
  },
  required: ['query'],
};

const params = z.lazy(() => z.looseObject({
  top_n: topNParam('Top N', 12),
  sort_by: withDefault(z.enum(ARXIV_SORTS, `ArXiv Search Sort_by should be one of ${ARXIV_SORTS.join(', ')}`), 'submittedDate'),
  ...functionShape(),
}));
export type ArxivParams = z.output<typeof params>;

const args = z.lazy(() => z.object({ query: z.string().trim().min(1, 'must be a non-empty string') }));

export interface ArxivOptions {
  /** The operator's arXiv API base, no trailing slash. @default ARXIV_BASE_URL */
  baseUrl?: string;
}

export function arxivTool(options: ArxivOptions = {}): ToolKind<ArxivParams> {
  const endpoint = serviceEndpoint(options.baseUrl ?? ARXIV_BASE_URL);
  return { name: 'ArXiv', params, create: (entry) => searchTool(entry, endpoint) };
}

function searchTool(entry: ToolEntry<ArxivParams>, endpoint: ServiceEndpoint): Tool {
  const p = entry.params;
  const name = p.function_name || ARXIV_FUNCTION;
  return {
    name,
    description: p.description || ARXIV_DESCRIPTION,
    parameters: PARAMETERS,
    timeoutMs: ARXIV_TIMEOUT_MS,
    async invoke(rawArgs, ctx): Promise<ToolResult> {
      const { query } = parseToolArgs(name, args, rawArgs);
      const search = new URLSearchParams({
        search_query: query,
        id_list: '',
        sortBy: p.sort_by,
        sortOrder: 'descending',
        start: '0',
        max_results: String(Math.min(p.top_n, MAX_RESULTS)),
      });
      const res = await requestService(name, ctx, {
        url: `${endpoint.prefix}/query?${search}`,
        headers: { accept: 'application/atom+xml' },
        timeoutMs: ARXIV_TIMEOUT_MS,
        guard: endpoint.guard,
        errorDetail: arxivRefusal,
      });
      // arXiv has been seen to send its error feed with a 200 as well
      const refusal = arxivRefusal(res.body);
      if (refusal !== undefined) throw new ToolError(`tool "${name}": arXiv refused the query: ${refusal}`);
      const feed = firstElement(await parseFeed(name, res.body), 'feed');
      if (!feed) throw new ToolError(`tool "${name}": arXiv answered ${res.status} with a body that is not an Atom feed`);
      return webSearchResult(childElements(feed, 'entry').slice(0, p.top_n).map(paper), { nothingFound: ARXIV_NOTHING_FOUND });
    },
  };
}

async function parseFeed(tool: string, body: string): Promise<XmlElement> {
  try {
    return await parseXml(body);
  } catch (cause) {
    if (cause instanceof XmlParseError) throw new ToolError(`tool "${tool}": arXiv answered with a feed that cannot be read (${cause.message})`, { cause });
    throw cause;
  }
}

const ERROR_ENTRY = /<entry>\s*<id>[^<]*\/api\/errors[^<]*<\/id>[\s\S]*?<summary>([\s\S]*?)<\/summary>/;
const XML_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/**
 * The reason of arXiv's error feed — one entry `<id>http://arxiv.org/api/errors#...</id>
 * <title>Error</title><summary>reason</summary>` — at most 200 characters; undefined for any
 * other body. Read without the parser, as a refusal's detail is taken synchronously.
 */
export function arxivRefusal(body: string): string | undefined {
  const summary = ERROR_ENTRY.exec(body)?.[1];
  if (summary === undefined) return undefined;
  const reason = summary.replace(/&(amp|lt|gt|quot|apos);/g, (_, entity: string) => XML_ENTITIES[entity] ?? '').replace(/\s+/g, ' ').trim();
  return reason.slice(0, 200) || 'no reason given';
}

/** One entry as the `arxiv` library reads it, with the text the model reads. */
function paper(entry: XmlElement): WebResult {
  const links = childElements(entry, 'link');
  const pdf = links.find((l) => l.attributes.title === 'pdf')?.attributes.href;
  const page = links.find((l) => l.attributes.rel === 'alternate')?.attributes.href;
  const authors = childElements(entry, 'author').map((a) => collapsedText(firstElement(a, 'name'))).filter(Boolean);
  const categories = childElements(entry, 'category').map((c) => c.attributes.term).filter((t): t is string => Boolean(t));
  const published = collapsedText(firstElement(entry, 'published')).slice(0, 10);
  const abstract = collapsedText(firstElement(entry, 'summary'));
  const lines = [
    authors.length > 0 ? `Authors: ${authors.join(', ')}` : '',
    published ? `Published: ${published}` : '',
    categories.length > 0 ? `Categories: ${categories.join(', ')}` : '',
    abstract ? `Abstract: ${abstract}` : '',
  ].filter(Boolean);
  return {
    title: collapsedText(firstElement(entry, 'title')),
    url: pdf || page || collapsedText(firstElement(entry, 'id')),
    // a paper without an abstract has nothing to read: it is left out
    content: abstract ? lines.join('\n') : '',
  };
}
