/**
 * The ArXiv tool against a local server speaking the arXiv API (Atom feeds): the query it
 * sends, the papers it reads, arXiv's error feed, retries and the timeout, and an Agent
 * searching through a local OpenAI-compatible model server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { citationId, formatChunks } from '../../lib/knowledge/format';
import { type ArxivParams, arxivTool, callTool, createToolRegistry, type Tool, ToolError, type ToolRegistry, ToolTimeoutError, ToolTransientError } from '../../lib/tools';
import { arxivRefusal } from '../../lib/tools/arxiv';
import { messages } from '../helpers/canvas';
import { type ArxivPaper, ArxivServer } from '../helpers/arxiv-server';
import { OpenAiServer } from '../llm/openai-server';
import { agentDsl, agentTurn, context, loadProblems, referenceOf } from './search-support';
import { manualTimer, skippingTimer } from './support';

const PAPERS: ArxivPaper[] = [
  {
    id: '2401.00101',
    title: 'Retrieval-Augmented Agents for Long-Horizon Planning',
    abstract: 'We study retrieval augmented agents that plan over long horizons & show that a simple memory of past plans improves success by 12 points on three benchmarks.',
    authors: ['Ada Lovelace', 'Alan Turing'],
    published: '2024-01-02',
    updated: '2024-03-01',
    categories: ['cs.AI', 'cs.CL'],
    doi: '10.1000/agents.2024',
  },
  {
    id: '2312.09999',
    version: 3,
    title: 'Agents That Plan With Language Models',
    abstract: 'Language model agents plan by writing programs.',
    authors: ['Grace Hopper'],
    published: '2023-12-20',
    updated: '2024-05-10',
    categories: ['cs.CL'],
  },
  { id: 'math/0601001', title: 'On Harbour Bridges', abstract: 'A topological note on bridges.', authors: ['Emmy Noether'], published: '2006-01-01', categories: ['math.GT'], pdf: false },
];

let arxiv: ArxivServer;
let model: OpenAiServer;
beforeAll(async () => {
  [arxiv, model] = await Promise.all([ArxivServer.start(PAPERS), OpenAiServer.start()]);
});
afterAll(async () => {
  await Promise.all([arxiv.server.close(), model.close()]);
});
beforeEach(() => {
  arxiv.server.reset();
});

const { params } = arxivTool();

function tool(entry: Record<string, unknown> = {}): Tool {
  const kind = arxivTool({ baseUrl: `${arxiv.url}/api/` });
  return kind.create({ component_name: 'ArXiv', name: 'ArXiv', params: kind.params.parse(entry) as ArxivParams });
}

const registry = (): ToolRegistry => createToolRegistry([]);

describe('ArXiv', () => {
  it('asks the arXiv API for the query, newest submissions first, at most top_n', async () => {
    const t = tool({ top_n: 5 });
    expect(t.name).toBe('arxiv_search');
    expect(t.description).toMatch(/^arXiv is a free distribution service/);
    expect(t.parameters).toMatchObject({ required: ['query'], properties: { query: { type: 'string', description: expect.stringContaining('The search keywords to execute with arXiv') } } });
    await callTool(t, { query: 'agents plan' }, context(), registry());
    expect(arxiv.requests).toHaveLength(1);
    expect(arxiv.requests[0]).toMatchObject({ method: 'GET', path: '/api/query', headers: { accept: 'application/atom+xml' } });
    expect(arxiv.requests[0]?.query).toEqual({ search_query: 'agents plan', id_list: '', sortBy: 'submittedDate', sortOrder: 'descending', start: '0', max_results: '5' });
    await callTool(tool({ sort_by: 'relevance' }), { query: 'agents' }, context(), registry());
    expect(arxiv.requests[1]?.query).toMatchObject({ sortBy: 'relevance', max_results: '12' });
  });

  it('hands the model each paper’s title, PDF link, authors, date, categories and abstract, as knowledge blocks and references', async () => {
    const outcome = await callTool(tool(), { query: 'agents plan' }, context(), registry());
    if (outcome.kind !== 'result') throw new Error(`expected a result, got ${outcome.kind}`);
    const chunks = outcome.references?.chunks ?? [];
    // newest submission first, titles and abstracts unwrapped
    expect(chunks.map((c) => [c.document_name, c.url])).toEqual([
      ['Retrieval-Augmented Agents for Long-Horizon Planning', 'http://arxiv.org/pdf/2401.00101v1'],
      ['Agents That Plan With Language Models', 'http://arxiv.org/pdf/2312.09999v3'],
    ]);
    expect(chunks[0]?.content).toBe(
      'Authors: Ada Lovelace, Alan Turing\nPublished: 2024-01-02\nCategories: cs.AI, cs.CL\nAbstract: We study retrieval augmented agents that plan over long horizons & show that a simple memory of past plans improves success by 12 points on three benchmarks.',
    );
    expect(outcome.references?.doc_aggs[1]).toEqual({ doc_name: 'Agents That Plan With Language Models', doc_id: chunks[1]?.id, count: 1, url: 'http://arxiv.org/pdf/2312.09999v3' });
    expect(outcome.content).toBe(formatChunks(chunks));
    expect(outcome.content).toContain(`\nID: ${citationId(chunks[0]?.id ?? '')}\n├── Title: Retrieval-Augmented Agents for Long-Horizon Planning\n├── URL: http://arxiv.org/pdf/2401.00101v1\n└── Content:\nAuthors: Ada Lovelace`);
  });

  it('sorts as the entry says, and links a paper without a PDF by its abstract page', async () => {
    const updated = await callTool(tool({ sort_by: 'lastUpdatedDate' }), { query: 'agents' }, context(), registry());
    expect(updated.kind === 'result' && updated.references?.chunks.map((c) => c.document_name)).toEqual(['Agents That Plan With Language Models', 'Retrieval-Augmented Agents for Long-Horizon Planning']);
    const old = await callTool(tool(), { query: 'harbour bridges' }, context(), registry());
    expect(old.kind === 'result' && old.references?.chunks[0]?.url).toBe('http://arxiv.org/abs/math/0601001v1');
  });

  it('tells the model when nothing is found, and refuses a call without a query', async () => {
    expect(await callTool(tool(), { query: 'zeppelin' }, context(), registry())).toEqual({ kind: 'result', content: 'arXiv found no papers for this query.' });
    const empty = await callTool(tool(), {}, context(), registry());
    expect(empty.kind === 'error' && empty.error.message).toMatch(/^tool "arxiv_search": invalid arguments: query: /);
    expect(arxiv.requests).toHaveLength(1);
  });

  it('top_n and sort_by are checked at load as RAGFlow checks them', () => {
    const problems = loadProblems(agentDsl([{ component_name: 'ArXiv', name: 'ArXiv', params: { top_n: -1, sort_by: 'citations' } }]));
    expect(problems).toEqual([
      expect.objectContaining({ component_id: 'Agent:Researcher', field: 'obj.params.tools.0.params.top_n', message: 'Top N should be a positive integer' }),
      expect.objectContaining({ field: 'obj.params.tools.0.params.sort_by', message: 'ArXiv Search Sort_by should be one of submittedDate, lastUpdatedDate, relevance' }),
    ]);
    expect(params.safeParse({ top_n: '12' }).success).toBe(false);
    expect(params.parse({})).toMatchObject({ top_n: 12, sort_by: 'submittedDate' });
  });
});

describe('ArXiv failures', () => {
  it('arXiv’s error feed (a 400) is told to the model with its reason, and so is one sent with a 200', async () => {
    const big = await callTool(tool({ top_n: 5000 }), { query: 'agents' }, context(), registry());
    // top_n past arXiv's 2000 a request is asked as 2000, which arXiv accepts
    expect(arxiv.requests[0]?.query.max_results).toBe('2000');
    expect(big.kind).toBe('result');

    arxiv.server.enqueue({ kind: 'status', status: 400, headers: { 'content-type': 'application/atom+xml' }, body: errorFeed('unknown field: foo') });
    const refused = await callTool(tool(), { query: 'foo:bar' }, context(), registry());
    expect(refused.kind === 'error' && refused.error).toBeInstanceOf(ToolError);
    expect(refused.kind === 'error' && refused.error.message).toBe('tool "arxiv_search": the service answered 400: unknown field: foo');

    arxiv.server.enqueue({ kind: 'status', status: 200, headers: { 'content-type': 'application/atom+xml' }, body: errorFeed('incorrect id format for 1234.5678 &amp; more') });
    const quiet = await callTool(tool(), { query: 'agents' }, context(), registry());
    expect(quiet.kind === 'error' && quiet.error.message).toBe('tool "arxiv_search": arXiv refused the query: incorrect id format for 1234.5678 & more');
    expect(arxivRefusal('<feed><entry><id>http://arxiv.org/abs/1</id><summary>fine</summary></entry></feed>')).toBeUndefined();
  });

  it('“Rate exceeded.” (a 503) is retried on the backoff (timer fired by the test), then succeeds', async () => {
    arxiv.server.enqueue({ kind: 'status', status: 503, headers: { 'content-type': 'text/plain' }, body: 'Rate exceeded.' });
    const { timer, armed } = manualTimer();
    const pending = callTool(tool(), { query: 'agents' }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 500).length).toBe(1);
    expect(arxiv.requests).toHaveLength(1);
    armed.find((t) => t.ms === 500)!.fire();
    const outcome = await pending;
    expect(outcome.kind === 'result' && outcome.references?.chunks).toHaveLength(2);
    expect(arxiv.requests[1]?.query).toEqual(arxiv.requests[0]?.query);
  });

  it('429s past the retries fail the turn as transient; a body that is not a feed is told to the model', async () => {
    const busy = { kind: 'status', status: 429, body: 'Too Many Requests', headers: { 'content-type': 'text/plain' } } as const;
    arxiv.server.enqueue(busy, busy, busy);
    const { timer, waits } = skippingTimer();
    await expect(callTool(tool(), { query: 'agents' }, context(), createToolRegistry([], { timer }))).rejects.toThrow(ToolTransientError);
    expect(waits).toEqual([500, 1_000]);
    arxiv.server.enqueue({ kind: 'status', status: 200, headers: { 'content-type': 'text/html' }, body: '<html><body>maintenance</body></html>' });
    const html = await callTool(tool(), { query: 'agents' }, context(), registry());
    expect(html.kind === 'error' && html.error.message).toBe('tool "arxiv_search": arXiv answered 200 with a body that is not an Atom feed');
  });

  it('an API that does not answer times out at RAGFlow’s 12 s (timer fired by the test), as transient', async () => {
    arxiv.server.enqueue({ kind: 'stall' });
    const { timer, armed, fireAll } = manualTimer();
    const pending = callTool(tool(), { query: 'agents' }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => arxiv.requests.length).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([12_000]);
    fireAll();
    await expect(pending).rejects.toThrow(ToolTimeoutError);
  });
});

describe('an Agent with an ArXiv tool', () => {
  it('searches, reads the abstracts and cites one; the cited paper is the message’s reference', async () => {
    const entry = { component_name: 'ArXiv', name: 'ArXiv', params: { top_n: 3, sort_by: 'relevance' } };
    expect(loadProblems(agentDsl([entry]))).toEqual([]);
    const run = await agentTurn(model, arxivTool({ baseUrl: `${arxiv.url}/api` }), entry, { name: 'arxiv_search_0', arguments: { query: 'retrieval augmented agents' } }, 'What helps agents plan?');
    expect(run.modelCalls).toBe(2);
    expect(run.firstRequest?.tools?.[0]?.function).toMatchObject({ name: 'arxiv_search_0', description: expect.stringContaining('open-access archive') });
    expect(arxiv.requests[0]?.query).toMatchObject({ search_query: 'retrieval augmented agents', sortBy: 'relevance', max_results: '3' });
    expect(run.toolText).toContain('improves success by 12 points');
    expect(messages(run.events)).toEqual([`Found it [ID:${run.ids[0]}].`]);
    const reference = referenceOf(run.events);
    expect(reference?.chunks[run.ids[0] as string]).toMatchObject({ document_name: PAPERS[0]?.title, url: 'http://arxiv.org/pdf/2401.00101v1' });
  });
});

function errorFeed(reason: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title type="html">ArXiv Query: search_query=foo</title>
  <opensearch:totalResults xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">1</opensearch:totalResults>
  <entry>
    <id>http://arxiv.org/api/errors#unknown</id>
    <title>Error</title>
    <summary>${reason}</summary>
    <author><name>arXiv api core</name></author>
  </entry>
</feed>`;
}
