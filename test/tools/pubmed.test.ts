/**
 * The PubMed tool against a local server speaking NCBI's E-utilities: the search and the fetch
 * it sends (tool, email, the optional key), the articles it reads, NCBI's refusals, retries
 * and the timeout, and an Agent searching through a local OpenAI-compatible model server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { citationId, formatChunks } from '../../lib/knowledge/format';
import { callTool, createToolRegistry, NCBI_KEY_SECRET, type PubmedParams, pubmedTool, type Tool, ToolError, type ToolRegistry, ToolTimeoutError, ToolTransientError } from '../../lib/tools';
import { messages } from '../helpers/canvas';
import { NCBI_TEST_KEY, type PubmedRecord, PubmedServer } from '../helpers/pubmed-server';
import { OpenAiServer } from '../llm/openai-server';
import { agentDsl, agentTurn, context, loadProblems, referenceOf } from './search-support';
import { manualTimer, skippingTimer } from './support';

const RECORDS: PubmedRecord[] = [
  {
    pmid: '38000001',
    title: 'Vitamin D and fracture risk in <i>older</i> adults: a randomised trial.',
    authors: [{ fore: 'Maria', last: 'Rossi' }, { fore: 'Jan', last: 'de Vries' }, { collective: 'Bone Health Study Group' }],
    journal: 'The Journal of Bone Research',
    volume: '39',
    issue: '5',
    pages: '701-712',
    doi: '10.1000/jbr.2024.5',
    abstract: [
      { label: 'BACKGROUND', text: 'Vitamin D supplements are taken widely by older adults.' },
      { label: 'RESULTS', text: 'Fracture risk fell by 3.2% (95% CI 1.1-5.0) with 25(OH)D<sub>3</sub> at 2000 IU.' },
    ],
    citedDois: ['10.9999/cited.work'],
  },
  { pmid: '38000002', title: 'Vitamin D in winter.', authors: [], journal: 'Nutrition Letters', abstract: [], citedDois: ['10.9999/someone.else'] },
  { pmid: '38000003', title: 'Vitamin D: a Bookshelf chapter.', authors: [], journal: 'Bookshelf', abstract: [{ text: 'A chapter on vitamin D.' }], book: true },
];

let pubmed: PubmedServer;
let model: OpenAiServer;
beforeAll(async () => {
  [pubmed, model] = await Promise.all([PubmedServer.start(RECORDS), OpenAiServer.start()]);
});
afterAll(async () => {
  await Promise.all([pubmed.server.close(), model.close()]);
});
beforeEach(() => {
  pubmed.server.reset();
});

const kind = pubmedTool();

function tool(entry: Record<string, unknown> = {}): Tool {
  const k = pubmedTool({ baseUrl: `${pubmed.url}/entrez/eutils` });
  return k.create({ component_name: 'PubMed', name: 'PubMed', params: k.params.parse(entry) as PubmedParams });
}

const registry = (): ToolRegistry => createToolRegistry([]);

describe('PubMed', () => {
  it('searches with esearch, then fetches the articles with efetch, naming the tool and the entry’s email', async () => {
    const t = tool({ top_n: 5, email: 'research@clinic.example' });
    expect(t.name).toBe('pubmed_search');
    expect(t.description).toContain('PubMed is an openly accessible, free database');
    expect(t.parameters).toMatchObject({ required: ['query'], properties: { query: { type: 'string', description: expect.stringContaining('execute with PubMed') } } });
    const outcome = await callTool(t, { query: 'vitamin D fracture' }, context(), registry());
    expect(outcome.kind).toBe('result');
    expect(pubmed.requests.map((r) => [r.method, r.path])).toEqual([['GET', '/entrez/eutils/esearch.fcgi'], ['GET', '/entrez/eutils/efetch.fcgi']]);
    expect(pubmed.requests[0]?.query).toEqual({ db: 'pubmed', tool: 'easel', email: 'research@clinic.example', term: 'vitamin D fracture', retmax: '5' });
    expect(pubmed.requests[1]?.query).toEqual({ db: 'pubmed', tool: 'easel', email: 'research@clinic.example', id: '38000001,38000002,38000003', retmode: 'xml' });
  });

  it('hands the model RAGFlow’s text per article — title, authors, journal, volume, issue, pages, DOI, abstract — and the PubMed pages as references', async () => {
    const outcome = await callTool(tool(), { query: 'vitamin' }, context(), registry());
    if (outcome.kind !== 'result') throw new Error(`expected a result, got ${outcome.kind}`);
    const chunks = outcome.references?.chunks ?? [];
    // the Bookshelf record is not a PubmedArticle: left out, as RAGFlow leaves it out
    expect(chunks.map((c) => [c.document_name, c.url])).toEqual([
      ['Vitamin D and fracture risk in older adults: a randomised trial.', 'https://pubmed.ncbi.nlm.nih.gov/38000001'],
      ['Vitamin D in winter.', 'https://pubmed.ncbi.nlm.nih.gov/38000002'],
    ]);
    expect(chunks[0]?.content).toBe([
      'Title: Vitamin D and fracture risk in older adults: a randomised trial.',
      'Authors: Maria Rossi, Jan de Vries, Bone Health Study Group',
      'Journal: The Journal of Bone Research',
      'Volume: 39',
      'Issue: 5',
      'Pages: 701-712',
      'DOI: 10.1000/jbr.2024.5',
      'Abstract: BACKGROUND: Vitamin D supplements are taken widely by older adults.\nRESULTS: Fracture risk fell by 3.2% (95% CI 1.1-5.0) with 25(OH)D3 at 2000 IU.',
    ].join('\n'));
    // a record with little in it reads as RAGFlow's placeholders, never a cited work's DOI
    expect(chunks[1]?.content).toBe('Title: Vitamin D in winter.\nAuthors: Unknown Authors\nJournal: Nutrition Letters\nVolume: -\nIssue: -\nPages: -\nDOI: -\nAbstract: No abstract available');
    expect(outcome.references?.doc_aggs[0]).toEqual({ doc_name: chunks[0]?.document_name, doc_id: chunks[0]?.id, count: 1, url: 'https://pubmed.ncbi.nlm.nih.gov/38000001' });
    expect(outcome.content).toBe(formatChunks(chunks));
    expect(outcome.content).toContain(`\nID: ${citationId(chunks[0]?.id ?? '')}\n├── Title: Vitamin D and fracture risk in older adults: a randomised trial.\n├── URL: https://pubmed.ncbi.nlm.nih.gov/38000001\n└── Content:\nTitle: `);
  });

  it('tells the model when nothing is found, without a fetch, and refuses a call without a query', async () => {
    expect(await callTool(tool(), { query: 'zeppelin' }, context(), registry())).toEqual({ kind: 'result', content: 'PubMed found no articles for this query.' });
    expect(pubmed.requests).toHaveLength(1);
    const empty = await callTool(tool(), { query: '' }, context(), registry());
    expect(empty.kind === 'error' && empty.error.message).toBe('tool "pubmed_search": invalid arguments: query: must be a non-empty string');
    expect(pubmed.requests).toHaveLength(1);
  });

  it('params are checked at load: top_n as RAGFlow checks it, an email without spaces, RAGFlow’s defaults', () => {
    const problems = loadProblems(agentDsl([{ component_name: 'PubMed', name: 'PubMed', params: { top_n: 0, email: 'two words' } }]));
    expect(problems).toEqual([
      expect.objectContaining({ field: 'obj.params.tools.0.params.top_n', message: 'Top N should be a positive integer' }),
      expect.objectContaining({ field: 'obj.params.tools.0.params.email', message: 'email must have no spaces (NCBI asks for one address)' }),
    ]);
    expect(kind.params.parse({})).toMatchObject({ top_n: 12, email: 'A.N.Other@example.com', api_key: '' });
  });
});

describe('the NCBI API key', () => {
  it('is optional: without one nothing names a key; with the tenant secret NCBI_API_KEY it is sent as api_key', async () => {
    await callTool(tool(), { query: 'vitamin' }, context(), registry());
    expect(pubmed.requests.every((r) => r.query.api_key === undefined)).toBe(true);
    pubmed.server.reset();
    await callTool(tool(), { query: 'vitamin' }, context({ [NCBI_KEY_SECRET]: NCBI_TEST_KEY }), registry());
    expect(pubmed.requests.map((r) => r.query.api_key)).toEqual([NCBI_TEST_KEY, NCBI_TEST_KEY]);
    expect(kind.credentials).toEqual([{ param: 'api_key', secret: 'NCBI_API_KEY' }]);
  });

  it('named by api_key but not set, tells the model which secret to set, and sends nothing', async () => {
    const outcome = await callTool(tool({ api_key: '{secret.LAB_NCBI}' }), { query: 'vitamin' }, context({ [NCBI_KEY_SECRET]: NCBI_TEST_KEY }), registry());
    expect(outcome.kind === 'error' && outcome.error).toBeInstanceOf(ToolError);
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "pubmed_search": PubMed is not configured: the secret LAB_NCBI named by api_key is not set for this tenant');
    expect(pubmed.requests).toHaveLength(0);
  });

  it('rejected by NCBI (a 400 that echoes it), is told to the model without the key', async () => {
    const wrong = 'ncbi-wrong-KEY-000';
    const outcome = await callTool(tool(), { query: 'vitamin' }, context({ [NCBI_KEY_SECRET]: wrong }), registry());
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "pubmed_search": the service answered 400: API key invalid');
    expect(JSON.stringify(outcome)).not.toContain(wrong);
  });

  it('written into the DSL, is refused at load without repeating it', () => {
    const problems = loadProblems(agentDsl([{ component_name: 'PubMed', name: 'PubMed', params: { api_key: 'ncbi-literal-SECRET' } }]));
    expect(problems).toEqual([expect.objectContaining({ field: 'obj.params.tools.0.params.api_key', message: expect.stringContaining('must not hold the credential itself') })]);
    expect(JSON.stringify(problems)).not.toContain('ncbi-literal-SECRET');
  });
});

describe('PubMed failures', () => {
  it('an <ERROR> E-utilities answers with 200 is told to the model', async () => {
    pubmed.server.enqueue({ kind: 'status', status: 200, headers: { 'content-type': 'text/xml' }, body: '<?xml version="1.0" ?><eSearchResult><ERROR>Search Backend failed: read timeout</ERROR></eSearchResult>' });
    const outcome = await callTool(tool(), { query: 'vitamin' }, context(), registry());
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "pubmed_search": PubMed refused the search: Search Backend failed: read timeout');
  });

  it('a 429 (“API rate limit exceeded”) is retried on the backoff (timer fired by the test), then succeeds', async () => {
    pubmed.server.enqueue({ kind: 'status', status: 429, body: '{"error":"API rate limit exceeded","api-key":"","count":"4","limit":"3"}' });
    const { timer, armed } = manualTimer();
    const pending = callTool(tool(), { query: 'vitamin' }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 500).length).toBe(1);
    expect(pubmed.requests).toHaveLength(1);
    armed.find((t) => t.ms === 500)!.fire();
    const outcome = await pending;
    expect(outcome.kind === 'result' && outcome.references?.chunks).toHaveLength(2);
    expect(pubmed.requests.map((r) => r.path.split('/').at(-1))).toEqual(['esearch.fcgi', 'esearch.fcgi', 'efetch.fcgi']);
  });

  it('a fetch that stays busy fails the turn as transient; a body that is not XML is told to the model', async () => {
    const busy = { kind: 'status', status: 502, headers: { 'content-type': 'text/html' }, body: '<html>Bad Gateway</html>' } as const;
    // the search answers, then the fetch is busy every time
    pubmed.server.enqueue({ kind: 'status', status: 200, headers: { 'content-type': 'text/xml' }, body: '<eSearchResult><Count>1</Count><IdList><Id>38000001</Id></IdList></eSearchResult>' }, busy, busy, busy);
    const { timer, waits } = skippingTimer();
    await expect(callTool(tool(), { query: 'vitamin' }, context(), createToolRegistry([], { timer }))).rejects.toThrow(ToolTransientError);
    expect(waits).toEqual([500, 1_000]);
    pubmed.server.enqueue({ kind: 'status', status: 200, headers: { 'content-type': 'text/plain' }, body: 'Service temporarily unavailable' });
    const text = await callTool(tool(), { query: 'vitamin' }, context(), registry());
    expect(text.kind === 'error' && text.error.message).toBe('tool "pubmed_search": PubMed answered 200 with a body that is not XML');
  });

  it('E-utilities that do not answer time out at RAGFlow’s 12 s for both requests together (timer fired by the test)', async () => {
    pubmed.server.enqueue({ kind: 'stall' });
    const { timer, armed, fireAll } = manualTimer();
    const pending = callTool(tool(), { query: 'vitamin' }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => pubmed.requests.length).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([12_000]);
    fireAll();
    await expect(pending).rejects.toThrow(ToolTimeoutError);
  });
});

describe('an Agent with a PubMed tool', () => {
  it('searches, reads the articles and cites one; the cited article is the message’s reference', async () => {
    const entry = { component_name: 'PubMed', name: 'PubMed', params: { top_n: 2, email: 'research@clinic.example' } };
    expect(loadProblems(agentDsl([entry]))).toEqual([]);
    const run = await agentTurn(model, pubmedTool({ baseUrl: `${pubmed.url}/entrez/eutils` }), entry, { name: 'pubmed_search_0', arguments: { query: 'vitamin D fracture' } }, 'Does vitamin D prevent fractures?', { [NCBI_KEY_SECRET]: NCBI_TEST_KEY });
    expect(run.modelCalls).toBe(2);
    expect(run.firstRequest?.tools?.[0]?.function).toMatchObject({ name: 'pubmed_search_0' });
    expect(pubmed.requests[0]?.query).toMatchObject({ term: 'vitamin D fracture', retmax: '2', api_key: NCBI_TEST_KEY });
    expect(run.toolText).toContain('Fracture risk fell by 3.2%');
    expect(run.toolText).not.toContain(NCBI_TEST_KEY);
    expect(messages(run.events)).toEqual([`Found it [ID:${run.ids[0]}].`]);
    expect(referenceOf(run.events)?.chunks[run.ids[0] as string]).toMatchObject({ url: 'https://pubmed.ncbi.nlm.nih.gov/38000001' });
  });
});
