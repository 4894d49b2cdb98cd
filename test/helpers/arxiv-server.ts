/**
 * A local stand-in for the arXiv API: `GET /api/query?search_query=<q>&id_list=&start=<n>&max_results=<n>&sortBy=<s>&sortOrder=<o>`
 * answers an Atom 1.0 feed as arXiv writes it — the feed's own `<link>`, `<title>`, `<id>` and
 * OpenSearch counts, then one `<entry>` per paper: `<id>http://arxiv.org/abs/<id>v<n></id>`,
 * `<updated>`, `<published>`, a hard-wrapped `<title>` and `<summary>`, `<author><name>`,
 * `<arxiv:doi>`, the abstract page (`rel="alternate"`) and PDF (`title="pdf"`) links,
 * `<arxiv:primary_category>` and `<category>`s. The papers are those of `papers` sharing a word
 * with the query (field prefixes such as `all:` or `ti:` dropped), sorted as asked.
 *
 * A parameter arXiv cannot read (a `sortBy` or `sortOrder` it does not know, a negative
 * `max_results`, `max_results` over 2000) is HTTP 400 with the error feed: one entry titled
 * "Error" whose id is `http://arxiv.org/api/errors#...` and whose summary is the reason.
 */
import { type RecordedRequest, ScriptedServer, type ServiceAnswer, ServiceStandIn, wordsOf, xmlEscape } from './scripted-server';

export interface ArxivPaper {
  /** Without the version: `2401.01234`. */
  id: string;
  version?: number;
  title: string;
  abstract: string;
  authors: string[];
  /** ISO dates. */
  published: string;
  updated?: string;
  categories: string[];
  doi?: string;
  /** arXiv gives every paper a PDF link; some old feeds lack it. @default true */
  pdf?: boolean;
}

const SORTS = new Set(['relevance', 'lastUpdatedDate', 'submittedDate']);
const ORDERS = new Set(['ascending', 'descending']);

export class ArxivServer extends ServiceStandIn {
  private constructor(
    server: ScriptedServer,
    public papers: ArxivPaper[],
  ) {
    super(server);
  }

  static async start(papers: ArxivPaper[]): Promise<ArxivServer> {
    let self: ArxivServer | undefined;
    const server = await ScriptedServer.start((request) => self!.answer(request));
    self = new ArxivServer(server, papers);
    return self;
  }

  private answer(request: RecordedRequest): ServiceAnswer {
    if (request.path !== '/api/query') return { status: 404, headers: { 'content-type': 'text/html' }, body: '<html><body><h1>Not Found</h1></body></html>' };
    const q = request.query;
    const max = Number(q.max_results ?? 10);
    const start = Number(q.start ?? 0);
    if (q.sortBy !== undefined && !SORTS.has(q.sortBy)) return errorFeed(`unknown_sort_by_${q.sortBy}`, `unknown sortBy: ${q.sortBy}`);
    if (q.sortOrder !== undefined && !ORDERS.has(q.sortOrder)) return errorFeed(`unknown_sort_order_${q.sortOrder}`, `unknown sortOrder: ${q.sortOrder}`);
    if (!Number.isInteger(max) || max < 0) return errorFeed('max_results_must_be_non_negative', 'max_results must be non-negative');
    if (max > 2000) return errorFeed('max_results_too_large', 'max_results must be at most 2000');
    const words = new Set(wordsOf((q.search_query ?? '').replace(/\b[a-z]{2,4}:/g, ' ')));
    let found = this.papers.filter((p) => wordsOf(`${p.title} ${p.abstract}`).some((w) => words.has(w)));
    const key = q.sortBy === 'lastUpdatedDate' ? (p: ArxivPaper) => p.updated ?? p.published : q.sortBy === 'submittedDate' ? (p: ArxivPaper) => p.published : undefined;
    if (key) {
      found = [...found].sort((a, b) => key(a).localeCompare(key(b)));
      if (q.sortOrder !== 'ascending') found.reverse();
    }
    const page = found.slice(start, start + max);
    const query = new URLSearchParams(q).toString();
    const entries = page.map(entry).join('');
    const body = `<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <link href="http://arxiv.org/api/query?${xmlEscape(query)}" rel="self" type="application/atom+xml"/>
  <title type="html">ArXiv Query: ${xmlEscape(query)}</title>
  <id>http://arxiv.org/api/Q2hAbq3S6dC6d2x8rOS7pw</id>
  <updated>2026-01-05T00:00:00-05:00</updated>
  <opensearch:totalResults xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">${found.length}</opensearch:totalResults>
  <opensearch:startIndex xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">${start}</opensearch:startIndex>
  <opensearch:itemsPerPage xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">${max}</opensearch:itemsPerPage>${entries}
</feed>
`;
    return atom(200, body);
  }
}

function entry(p: ArxivPaper): string {
  const id = `${p.id}v${p.version ?? 1}`;
  const authors = p.authors.map((a) => `\n    <author>\n      <name>${xmlEscape(a)}</name>\n    </author>`).join('');
  const categories = p.categories.map((c) => `\n    <category term="${xmlEscape(c)}" scheme="http://arxiv.org/schemas/atom"/>`).join('');
  return `
  <entry>
    <id>http://arxiv.org/abs/${id}</id>
    <updated>${p.updated ?? p.published}T17:59:59Z</updated>
    <published>${p.published}T17:59:59Z</published>
    <title>${wrap(p.title)}</title>
    <summary>  ${wrap(p.abstract)}\n</summary>${authors}${p.doi ? `\n    <arxiv:doi xmlns:arxiv="http://arxiv.org/schemas/atom">${xmlEscape(p.doi)}</arxiv:doi>` : ''}
    <link href="http://arxiv.org/abs/${id}" rel="alternate" type="text/html"/>${p.pdf === false ? '' : `\n    <link title="pdf" href="http://arxiv.org/pdf/${id}" rel="related" type="application/pdf"/>`}
    <arxiv:primary_category xmlns:arxiv="http://arxiv.org/schemas/atom" term="${xmlEscape(p.categories[0] ?? '')}" scheme="http://arxiv.org/schemas/atom"/>${categories}
  </entry>`;
}

/** arXiv hard-wraps titles and abstracts near 80 columns. */
function wrap(text: string): string {
  const lines: string[] = [];
  let line = '';
  for (const word of xmlEscape(text).split(' ')) {
    if (line && line.length + word.length > 76) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push(line);
  return lines.join('\n  ');
}

function errorFeed(anchor: string, reason: string): ServiceAnswer {
  const id = `http://arxiv.org/api/errors#${anchor}`;
  return atom(400, `<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <link href="http://arxiv.org/api/query" rel="self" type="application/atom+xml"/>
  <title type="html">ArXiv Query: error</title>
  <id>http://arxiv.org/api/x1sWvQ4m2t1Rz6Fk0Wb1jA</id>
  <updated>2026-01-05T00:00:00-05:00</updated>
  <opensearch:totalResults xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">1</opensearch:totalResults>
  <opensearch:startIndex xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">0</opensearch:startIndex>
  <opensearch:itemsPerPage xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">1</opensearch:itemsPerPage>
  <entry>
    <id>${id}</id>
    <title>Error</title>
    <summary>${xmlEscape(reason)}</summary>
    <updated>2026-01-05T00:00:00-05:00</updated>
    <link href="${id}" rel="alternate" type="text/html"/>
    <author>
      <name>arXiv api core</name>
    </author>
  </entry>
</feed>
`);
}

function atom(status: number, body: string): ServiceAnswer {
  return { status, headers: { 'content-type': 'application/atom+xml; charset=utf-8' }, body };
}
