/**
 * PubMed search as an Agent's tool, as RAGFlow offers it (agent/tools/pubmed.py): the kind
 * `PubMed` is the function `pubmed_search`; the model writes `query`, the entry's params set
 * `top_n` (12) and `email` (the contact NCBI asks every client for). RAGFlow calls Biopython's
 * `Entrez`; this calls NCBI's E-utilities directly, under `https://eutils.ncbi.nlm.nih.gov/entrez/eutils`
 * or the operator's EASEL_TOOL_PUBMED_BASE_URL:
 *
 * 1. `GET {base}/esearch.fcgi?db=pubmed&term=<query>&retmax=<top_n>&tool=easel&email=<email>` — the PMIDs found (XML);
 * 2. `GET {base}/efetch.fcgi?db=pubmed&id=<pmid,…>&retmode=xml&tool=easel&email=<email>` — the articles (PubmedArticleSet XML).
 *
 * NCBI answers 3 requests a second from one address without a key and 10 with one: an API key
 * is optional, the tenant secret `NCBI_API_KEY` (or the one `api_key: "{secret.NAME}"` names),
 * sent as `api_key`. A literal key in a DSL is refused at load, as for every credential.
 *
 * Articles become knowledge blocks the model cites and the pass's references: the title, the
 * PubMed page (`https://pubmed.ncbi.nlm.nih.gov/<PMID>`), and RAGFlow's text — title, authors,
 * journal, volume, issue, pages, DOI, abstract. The abstract is every section of it with its
 * label, markup such as `<i>` read as text (RAGFlow keeps the first section's leading text),
 * and the DOI the article's own (RAGFlow takes the first in the record, a cited work's when the
 * article has none).
 * RAGFlow's PubMed has no `json` output, and neither has this.
 *
 * @example
 *   const tools = createToolRegistry([pubmedTool({ baseUrl: 'https://eutils.ncbi.nlm.nih.gov/entrez/eutils' })]);
 */
import { z } from 'zod';
import { ToolError } from './errors';
import { credentialParam, functionShape, parseToolArgs, resolveCredential, topNParam, withDefault } from './params';
import type { ToolEntry, ToolKind } from './registry';
import { type WebResult, webSearchResult } from './web-results';
import type { Tool, ToolContext, ToolResult } from './types';
import { requestService, type ServiceEndpoint, serviceEndpoint } from './web-service';
import { childElements, collapsedText, firstElement, parseXml, XmlParseError, type XmlElement } from './xml';

export const PUBMED_BASE_URL = 'https://eutils.ncbi.nlm.nih.gov/entrez/eutils';
export const PUBMED_FUNCTION = 'pubmed_search';
/** The tenant secret holding an NCBI API key, when an entry's `api_key` is empty. */
export const NCBI_KEY_SECRET = 'NCBI_API_KEY';
/** RAGFlow's default contact, sent when an entry sets none. */
export const PUBMED_DEFAULT_EMAIL = 'A.N.Other@example.com';
/** RAGFlow's limit on a PubMed search (COMPONENT_EXEC_TIMEOUT, 12 s), both requests together. */
export const PUBMED_TIMEOUT_MS = 12_000;
export const PUBMED_NOTHING_FOUND = 'PubMed found no articles for this query.';
/** What this client calls itself to NCBI (`tool`, no spaces). */
const NCBI_TOOL = 'easel';
/** The most ids NCBI advises sending in one GET; past them it wants a POST. */
const MAX_ARTICLES = 200;
const ARTICLE_URL = 'https://pubmed.ncbi.nlm.nih.gov/';

export const PUBMED_DESCRIPTION = `
PubMed is an openly accessible, free database which includes primarily the MEDLINE database of references and abstracts on life sciences and biomedical topics.
In addition to MEDLINE, PubMed provides access to:
 - older references from the print version of Index Medicus, back to 1951 and earlier
 - references to some journals before they were indexed in Index Medicus and MEDLINE, for instance Science, BMJ, and Annals of Surgery
 - very recent entries to records for an article before it is indexed with Medical Subject Headings (MeSH) and added to MEDLINE
 - a collection of books available full-text and other subsets of NLM records[4]
 - PMC citations
 - NCBI Bookshelf
            `;

const PARAMETERS = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      description: 'The search keywords to execute with PubMed. The keywords should be the most important words/terms(includes synonyms) from the original request.',
    },
  },
  required: ['query'],
};

const params = z.lazy(() => z.looseObject({
  top_n: topNParam('Top N', 12),
  email: withDefault(z.string().trim().regex(/^\S*$/, 'email must have no spaces (NCBI asks for one address)'), PUBMED_DEFAULT_EMAIL),
  api_key: credentialParam('api_key', NCBI_KEY_SECRET),
  ...functionShape(),
}));
export type PubmedParams = z.output<typeof params>;

const args = z.lazy(() => z.object({ query: z.string().trim().min(1, 'must be a non-empty string') }));

export interface PubmedOptions {
  /** The operator's E-utilities base, no trailing slash. @default PUBMED_BASE_URL */
  baseUrl?: string;
}

export function pubmedTool(options: PubmedOptions = {}): ToolKind<PubmedParams> {
  const endpoint = serviceEndpoint(options.baseUrl ?? PUBMED_BASE_URL);
  return {
    name: 'PubMed',
    params,
    credentials: [{ param: 'api_key', secret: NCBI_KEY_SECRET }],
    create: (entry) => searchTool(entry, endpoint),
  };
}

function searchTool(entry: ToolEntry<PubmedParams>, endpoint: ServiceEndpoint): Tool {
  const p = entry.params;
  const name = p.function_name || PUBMED_FUNCTION;
  /** One E-utility's answer, parsed; `<ERROR>` at its top is NCBI refusing the request. */
  const eutility = async (utility: 'esearch' | 'efetch', query: Record<string, string>, ctx: ToolContext) => {
    const res = await requestService(name, ctx, {
      url: `${endpoint.prefix}/${utility}.fcgi?${new URLSearchParams(query)}`,
      headers: { accept: 'application/xml' },
      timeoutMs: PUBMED_TIMEOUT_MS,
      guard: endpoint.guard,
    });
    let document: XmlElement;
    try {
      document = await parseXml(res.body);
    } catch (cause) {
      if (cause instanceof XmlParseError) throw new ToolError(`tool "${name}": PubMed answered with XML that cannot be read (${cause.message})`, { cause });
      throw cause;
    }
    const root = childElements(document)[0];
    if (!root) throw new ToolError(`tool "${name}": PubMed answered ${res.status} with a body that is not XML`);
    const refusal = firstElement(root, 'ERROR');
    if (refusal) throw new ToolError(`tool "${name}": PubMed refused the ${utility === 'esearch' ? 'search' : 'fetch'}: ${collapsedText(refusal).slice(0, 200) || 'no reason given'}`);
    return root;
  };
  return {
    name,
    description: p.description || PUBMED_DESCRIPTION,
    parameters: PARAMETERS,
    timeoutMs: PUBMED_TIMEOUT_MS,
    async invoke(rawArgs, ctx): Promise<ToolResult> {
      const { query } = parseToolArgs(name, args, rawArgs);
      const key = await resolveCredential(name, 'PubMed', { name: 'api_key', value: p.api_key, defaultSecret: NCBI_KEY_SECRET }, ctx, { optional: true });
      const common = { db: 'pubmed', tool: NCBI_TOOL, ...(p.email ? { email: p.email } : {}), ...(key ? { api_key: key } : {}) };
      const found = await eutility('esearch', { ...common, term: query, retmax: String(Math.min(p.top_n, MAX_ARTICLES)) }, ctx);
      const ids = childElements(firstElement(found, 'IdList'), 'Id').map((id) => collapsedText(id)).filter(Boolean);
      if (ids.length === 0) return webSearchResult([], { nothingFound: PUBMED_NOTHING_FOUND });
      const articles = await eutility('efetch', { ...common, id: ids.join(','), retmode: 'xml' }, ctx);
      return webSearchResult(childElements(articles, 'PubmedArticle').map(article), { nothingFound: PUBMED_NOTHING_FOUND });
    },
  };
}

/** One `<PubmedArticle>` as RAGFlow reads it (`_format_pubmed_content`). */
function article(node: XmlElement): WebResult {
  const citation = firstElement(node, 'MedlineCitation');
  const pmid = collapsedText(firstElement(citation, 'PMID'));
  const data = firstElement(citation, 'Article');
  const journal = firstElement(data, 'Journal');
  const field = (element: XmlElement | undefined, fallback: string) => collapsedText(element) || fallback;
  const title = collapsedText(firstElement(data, 'ArticleTitle'));
  const authors = childElements(firstElement(data, 'AuthorList'), 'Author')
    .map((a) => `${collapsedText(firstElement(a, 'ForeName'))} ${collapsedText(firstElement(a, 'LastName'))}`.trim() || collapsedText(firstElement(a, 'CollectiveName')))
    .filter(Boolean);
  // the article's own DOI: the cited works' ids further down carry DOIs too
  const doi = childElements(firstElement(node, 'PubmedData', 'ArticleIdList'), 'ArticleId').find((id) => id.attributes.IdType === 'doi')
    ?? childElements(data, 'ELocationID').find((id) => id.attributes.EIdType === 'doi');
  const content = [
    `Title: ${title || 'No title'}`,
    `Authors: ${authors.length > 0 ? authors.join(', ') : 'Unknown Authors'}`,
    `Journal: ${field(firstElement(journal, 'Title'), 'Unknown Journal')}`,
    `Volume: ${field(firstElement(journal, 'JournalIssue', 'Volume'), '-')}`,
    `Issue: ${field(firstElement(journal, 'JournalIssue', 'Issue'), '-')}`,
    `Pages: ${field(firstElement(data, 'Pagination', 'MedlinePgn'), '-')}`,
    `DOI: ${field(doi, '-')}`,
    `Abstract: ${abstractOf(firstElement(data, 'Abstract')) || 'No abstract available'}`,
  ].join('\n');
  return { title: title || `PubMed ${pmid}`, url: `${ARTICLE_URL}${pmid}`, content };
}

/** A structured abstract's sections, each after its label (`BACKGROUND: ...`), one a line. */
function abstractOf(abstract: XmlElement | undefined): string {
  return childElements(abstract, 'AbstractText')
    .map((section) => {
      const text = collapsedText(section);
      const label = section.attributes.Label;
      return text && label ? `${label}: ${text}` : text;
    })
    .filter(Boolean)
    .join('\n');
}
