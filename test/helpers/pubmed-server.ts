/**
 * A local stand-in for NCBI's E-utilities under `/entrez/eutils`, for `db=pubmed`:
 *
 * - `GET esearch.fcgi?db=pubmed&term=<q>&retmax=<n>` answers the eSearchResult XML —
 *   `<Count>`, `<RetMax>`, `<RetStart>`, `<IdList><Id>…</Id></IdList>`, `<QueryTranslation>` —
 *   the PMIDs of the records whose title or abstract shares a word with `q`;
 * - `GET efetch.fcgi?db=pubmed&id=<pmid,…>&retmode=xml` answers a `<PubmedArticleSet>` with its
 *   DOCTYPE: per known id a `<PubmedArticle>` (MedlineCitation with PMID, Article — Journal with
 *   JournalIssue, ArticleTitle, Pagination, ELocationID, Abstract of AbstractText sections,
 *   AuthorList — and PubmedData with its ArticleIdList and a ReferenceList whose cited works
 *   carry DOIs of their own), or a `<PubmedBookArticle>` for a book record;
 * - a request whose `db` is not pubmed, or without a `term` / `id`, is HTTP 200 with the
 *   utility's `<ERROR>` element; an `api_key` that is not `key` is HTTP 400
 *   `{"error":"API key invalid","api-key":"…","type":"invalid","status":"unknown"}`, as NCBI
 *   sends it (echoing the key).
 *
 * Titles and abstract sections are written into the XML as given, so a record may carry
 * PubMed's inline markup (`<i>`, `<sup>`); `tool` and `email` are recorded, not checked.
 */
import { type RecordedRequest, ScriptedServer, type ServiceAnswer, ServiceStandIn, wordsOf, xmlEscape } from './scripted-server';

export interface PubmedRecord {
  pmid: string;
  /** XML: PubMed's inline markup allowed. */
  title: string;
  authors: { fore?: string; last?: string; collective?: string }[];
  journal: string;
  volume?: string;
  issue?: string;
  pages?: string;
  doi?: string;
  /** XML sections, a label each in a structured abstract. */
  abstract: { label?: string; text: string }[];
  /** DOIs of the works the article cites, listed after its own ids. */
  citedDois?: string[];
  /** A Bookshelf record, fetched as a PubmedBookArticle. */
  book?: boolean;
}

export const NCBI_TEST_KEY = 'ncbi-test-KEY-5f3e2a9d';

export class PubmedServer extends ServiceStandIn {
  private constructor(
    server: ScriptedServer,
    public records: PubmedRecord[],
    readonly key: string,
  ) {
    super(server);
  }

  static async start(records: PubmedRecord[], key = NCBI_TEST_KEY): Promise<PubmedServer> {
    let self: PubmedServer | undefined;
    const server = await ScriptedServer.start((request) => self!.answer(request));
    self = new PubmedServer(server, records, key);
    return self;
  }

  private answer(request: RecordedRequest): ServiceAnswer {
    const q = request.query;
    if (q.api_key !== undefined && q.api_key !== this.key) {
      return { status: 400, body: JSON.stringify({ error: 'API key invalid', 'api-key': q.api_key, type: 'invalid', status: 'unknown' }) };
    }
    if (request.path === '/entrez/eutils/esearch.fcgi') {
      if (q.db !== 'pubmed') return xml(`<eSearchResult><ERROR>Invalid db name specified: ${xmlEscape(q.db ?? '')}</ERROR></eSearchResult>`, 'eSearchResult');
      if (!q.term) return xml('<eSearchResult><ERROR>Empty term and query_key - nothing todo</ERROR></eSearchResult>', 'eSearchResult');
      const words = new Set(wordsOf(q.term));
      const hits = this.records.filter((r) => wordsOf(`${r.title} ${r.abstract.map((s) => s.text).join(' ')}`).some((w) => words.has(w)));
      const retmax = Number(q.retmax ?? 20);
      const ids = hits.slice(0, retmax).map((r) => `<Id>${r.pmid}</Id>`).join('');
      return xml(
        `<eSearchResult><Count>${hits.length}</Count><RetMax>${Math.min(retmax, hits.length)}</RetMax><RetStart>0</RetStart><IdList>${ids}</IdList><TranslationSet/><QueryTranslation>${xmlEscape(q.term)}[All Fields]</QueryTranslation></eSearchResult>`,
        'eSearchResult',
      );
    }
    if (request.path === '/entrez/eutils/efetch.fcgi') {
      if (q.db !== 'pubmed') return xml(`<eFetchResult><ERROR>Invalid db name specified: ${xmlEscape(q.db ?? '')}</ERROR></eFetchResult>`, 'eFetchResult');
      const ids = (q.id ?? '').split(',').filter(Boolean);
      if (ids.length === 0) return xml('<eFetchResult><ERROR>Empty id list - nothing todo</ERROR></eFetchResult>', 'eFetchResult');
      const found = ids.map((id) => this.records.find((r) => r.pmid === id)).filter((r): r is PubmedRecord => r !== undefined);
      return xml(`<PubmedArticleSet>\n${found.map((r) => (r.book ? bookArticle(r) : article(r))).join('\n')}\n</PubmedArticleSet>`, 'PubmedArticleSet');
    }
    return { status: 404, headers: { 'content-type': 'text/html' }, body: '<html><body>Not Found</body></html>' };
  }
}

function article(r: PubmedRecord): string {
  const authors = r.authors
    .map((a) => (a.collective ? `<Author ValidYN="Y"><CollectiveName>${xmlEscape(a.collective)}</CollectiveName></Author>` : `<Author ValidYN="Y">${a.last ? `<LastName>${xmlEscape(a.last)}</LastName>` : ''}${a.fore ? `<ForeName>${xmlEscape(a.fore)}</ForeName><Initials>${a.fore[0]}</Initials>` : ''}<AffiliationInfo><Affiliation>Institute of Tests.</Affiliation></AffiliationInfo></Author>`))
    .join('');
  const abstract = r.abstract.length
    ? `<Abstract>${r.abstract.map((s) => `<AbstractText${s.label ? ` Label="${xmlEscape(s.label)}" NlmCategory="${xmlEscape(s.label)}"` : ''}>${s.text}</AbstractText>`).join('')}<CopyrightInformation>© 2024 The Authors.</CopyrightInformation></Abstract>`
    : '';
  const references = (r.citedDois ?? []).map((doi, i) => `<Reference><Citation>Cited work ${i + 1}.</Citation><ArticleIdList><ArticleId IdType="doi">${xmlEscape(doi)}</ArticleId></ArticleIdList></Reference>`).join('');
  return `<PubmedArticle><MedlineCitation Status="MEDLINE" Owner="NLM" IndexingMethod="Automated"><PMID Version="1">${r.pmid}</PMID><DateCompleted><Year>2024</Year><Month>05</Month><Day>02</Day></DateCompleted><Article PubModel="Print-Electronic"><Journal><ISSN IssnType="Electronic">1234-5678</ISSN><JournalIssue CitedMedium="Internet">${r.volume ? `<Volume>${r.volume}</Volume>` : ''}${r.issue ? `<Issue>${r.issue}</Issue>` : ''}<PubDate><Year>2024</Year><Month>May</Month></PubDate></JournalIssue><Title>${xmlEscape(r.journal)}</Title><ISOAbbreviation>J Test</ISOAbbreviation></Journal><ArticleTitle>${r.title}</ArticleTitle>${r.pages ? `<Pagination><StartPage>${r.pages.split('-')[0]}</StartPage><MedlinePgn>${r.pages}</MedlinePgn></Pagination>` : ''}${r.doi ? `<ELocationID EIdType="doi" ValidYN="Y">${xmlEscape(r.doi)}</ELocationID>` : ''}${abstract}${authors ? `<AuthorList CompleteYN="Y">${authors}</AuthorList>` : ''}<Language>eng</Language><PublicationTypeList><PublicationType UI="D016428">Journal Article</PublicationType></PublicationTypeList></Article><MedlineJournalInfo><Country>England</Country><MedlineTA>J Test</MedlineTA></MedlineJournalInfo><CitationSubset>IM</CitationSubset></MedlineCitation><PubmedData><History><PubMedPubDate PubStatus="pubmed"><Year>2024</Year><Month>5</Month><Day>1</Day></PubMedPubDate></History><PublicationStatus>ppublish</PublicationStatus><ArticleIdList><ArticleId IdType="pubmed">${r.pmid}</ArticleId>${r.doi ? `<ArticleId IdType="doi">${xmlEscape(r.doi)}</ArticleId>` : ''}</ArticleIdList>${references ? `<ReferenceList>${references}</ReferenceList>` : ''}</PubmedData></PubmedArticle>`;
}

function bookArticle(r: PubmedRecord): string {
  return `<PubmedBookArticle><BookDocument><PMID Version="1">${r.pmid}</PMID><ArticleTitle>${r.title}</ArticleTitle><Abstract><AbstractText>${r.abstract[0]?.text ?? ''}</AbstractText></Abstract></BookDocument><PubmedBookData><PublicationStatus>ppublish</PublicationStatus></PubmedBookData></PubmedBookArticle>`;
}

function xml(body: string, root: string): ServiceAnswer {
  const doctype = root === 'PubmedArticleSet'
    ? '<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" "https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">'
    : `<!DOCTYPE ${root} PUBLIC "-//NLM//DTD ${root}, 11 May 2002//EN" "https://eutils.ncbi.nlm.nih.gov/eutils/dtd/20060628/${root.toLowerCase()}.dtd">`;
  return { status: 200, headers: { 'content-type': 'text/xml; charset=UTF-8' }, body: `<?xml version="1.0" encoding="UTF-8" ?>\n${doctype}\n${body}\n` };
}
