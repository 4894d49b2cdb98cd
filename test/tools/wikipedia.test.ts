/**
 * The Wikipedia tool against a local server speaking the MediaWiki Action API: the search and
 * the summaries it asks for, the language and the operator's base, how failures are
 * classified, and an Agent searching through a local OpenAI-compatible model server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { citationId, formatChunks } from '../../lib/knowledge/format';
import { readConfig } from '../../lib/config';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { buildEngine } from '../../lib/runtime';
import type { StoreContext } from '../../lib/store/dynamo';
import { callTool, createToolRegistry, type Tool, type ToolContext, ToolError, type ToolRegistry, ToolTimeoutError, ToolTransientError, type WikipediaParams, wikipediaTool } from '../../lib/tools';
import { messages } from '../helpers/canvas';
import { testServices } from '../helpers/services';
import { type WikiPage, WikipediaServer } from '../helpers/wikipedia-server';
import { OpenAiServer } from '../llm/openai-server';
import { agentDsl, agentTurn, context, loadProblems, referenceOf } from './search-support';
import { manualTimer, skippingTimer } from './support';

const EN: WikiPage[] = [
  { pageid: 900, title: 'Harbour Bridge', intro: 'The Harbour Bridge is a steel arch bridge. It opened in 1932.', body: 'History\nConstruction began in 1923.' },
  { pageid: 120, title: 'Bridge (disambiguation)', intro: 'Bridge may refer to: a structure, a card game.', disambiguation: true },
  { pageid: 450, title: 'Bridge climbing', intro: 'Bridge climbing is a tourist activity on a harbour bridge.' },
  { pageid: 700, title: 'Oslo', intro: 'Oslo is the capital of Norway.' },
];
const DE: WikiPage[] = [{ pageid: 31, title: 'Hafenbrücke', intro: 'Die Hafenbrücke ist eine Stahlbogenbrücke.' }];

let wiki: WikipediaServer;
let model: OpenAiServer;
beforeAll(async () => {
  [wiki, model] = await Promise.all([WikipediaServer.start({ en: EN, de: DE }), OpenAiServer.start()]);
});
afterAll(async () => {
  await Promise.all([wiki.server.close(), model.close()]);
});
beforeEach(() => {
  wiki.server.reset();
});

const { params } = wikipediaTool();

function tool(entry: Record<string, unknown> = {}, baseUrl = wiki.url): Tool {
  const kind = wikipediaTool({ baseUrl });
  return kind.create({ component_name: 'Wikipedia', name: 'Wikipedia', params: kind.params.parse(entry) as WikipediaParams });
}

const registry = (): ToolRegistry => createToolRegistry([]);

describe('Wikipedia', () => {
  it('searches, then asks for the pages’ plain-text introductions and URLs, as RAGFlow’s wikipedia library does', async () => {
    const t = tool({ top_n: 3 });
    expect(t.name).toBe('wikipedia_search');
    expect(t.description).toContain("the world's largest reference website");
    expect(t.parameters).toEqual({
      type: 'object',
      properties: { query: { type: 'string', description: 'The search keyword to execute with wikipedia. The keyword MUST be a specific subject that can match the title.' } },
      required: ['query'],
    });
    const outcome = await callTool(t, { query: 'harbour bridge' }, context(), registry());
    expect(outcome.kind).toBe('result');

    expect(wiki.requests.map((r) => [r.method, r.path])).toEqual([['GET', '/w/api.php'], ['GET', '/w/api.php']]);
    const [search, pages] = wiki.requests;
    expect(search?.query).toEqual({ action: 'query', format: 'json', formatversion: '2', list: 'search', srsearch: 'harbour bridge', srlimit: '3', srprop: '' });
    expect(search?.headers['user-agent']).toMatch(/^Easel-Wikipedia-Tool \(/);
    expect(pages?.query).toEqual({
      action: 'query', format: 'json', formatversion: '2', prop: 'extracts|info|pageprops', exintro: '1', explaintext: '1', exlimit: '20', inprop: 'url', ppprop: 'disambiguation', redirects: '1', pageids: '900|120|450',
    });
  });

  it('hands the model each article’s title, URL and introduction, in the search’s order, disambiguation pages left out', async () => {
    const outcome = await callTool(tool(), { query: 'harbour bridge' }, context(), registry());
    if (outcome.kind !== 'result') throw new Error(`expected a result, got ${outcome.kind}`);
    const chunks = outcome.references?.chunks ?? [];
    expect(chunks.map((c) => c.document_name)).toEqual(['Harbour Bridge', 'Bridge climbing']);
    expect(chunks[0]).toMatchObject({ url: 'https://en.wikipedia.org/wiki/Harbour_Bridge', content: EN[0]?.intro, similarity: 1, document_id: chunks[0]?.id });
    expect(outcome.references?.doc_aggs).toEqual([
      { doc_name: 'Harbour Bridge', doc_id: chunks[0]?.id, count: 1, url: 'https://en.wikipedia.org/wiki/Harbour_Bridge' },
      { doc_name: 'Bridge climbing', doc_id: chunks[1]?.id, count: 1, url: 'https://en.wikipedia.org/wiki/Bridge_climbing' },
    ]);
    expect(outcome.content).toBe(formatChunks(chunks));
    expect(outcome.content).toContain(`\nID: ${citationId(chunks[0]?.id ?? '')}\n├── Title: Harbour Bridge\n├── URL: https://en.wikipedia.org/wiki/Harbour_Bridge\n└── Content:\nThe Harbour Bridge is a steel arch bridge. It opened in 1932.`);
    // the introduction only, as the library's summary
    expect(outcome.content).not.toContain('Construction began');
    expect(outcome.data).toBeUndefined();
  });

  it('asks for the summaries 20 pages at a time, the most one answer holds', async () => {
    const many: WikiPage[] = Array.from({ length: 45 }, (_, i) => ({ pageid: 1000 + i, title: `Lighthouse ${i}`, intro: `Lighthouse number ${i} stands on a cape.` }));
    const big = await WikipediaServer.start({ en: many });
    try {
      const outcome = await callTool(tool({ top_n: 45 }, big.url), { query: 'lighthouse' }, context(), registry());
      expect(big.requests.map((r) => r.query.pageids?.split('|').length ?? r.query.list)).toEqual(['search', 20, 20, 5]);
      expect(outcome.kind === 'result' && outcome.references?.chunks.map((c) => c.document_name)).toEqual(many.map((p) => p.title));
    } finally {
      await big.server.close();
    }
  });

  it('tells the model when nothing is found, without asking for summaries, and refuses a call without a query', async () => {
    const none = await callTool(tool(), { query: 'zeppelin hangar' }, context(), registry());
    expect(none).toEqual({ kind: 'result', content: 'Wikipedia found no articles for this query.' });
    expect(wiki.requests).toHaveLength(1);
    const empty = await callTool(tool(), { query: ' ' }, context(), registry());
    expect(empty.kind === 'error' && empty.error.message).toBe('tool "wikipedia_search": invalid arguments: query: must be a non-empty string');
    expect(wiki.requests).toHaveLength(1);
  });
});

describe('the wiki’s language', () => {
  it('fills the {language} of the base, in its path as the configuration keeps it', async () => {
    const outcome = await callTool(tool({ language: 'de' }, `${wiki.url}/{language}`), { query: 'Hafenbrücke' }, context(), registry());
    expect(wiki.requests.map((r) => r.path)).toEqual(['/de/w/api.php', '/de/w/api.php']);
    expect(outcome.kind === 'result' && outcome.references?.chunks[0]).toMatchObject({ document_name: 'Hafenbrücke', url: 'https://de.wikipedia.org/wiki/Hafenbr%C3%BCcke' });
    wiki.server.reset();
    await callTool(tool({ language: 'de' }, `${wiki.url}/%7Blanguage%7D`), { query: 'Hafenbrücke' }, context(), registry());
    expect(wiki.requests[0]?.path).toBe('/de/w/api.php');
  });

  it('is one of RAGFlow’s, checked at load like top_n; the public default names the language in the host', () => {
    const problems = loadProblems(agentDsl([{ component_name: 'Wikipedia', name: 'Wikipedia', params: { language: 'xx', top_n: 0 } }]));
    expect(problems).toEqual([
      expect.objectContaining({ component_id: 'Agent:Researcher', field: 'obj.params.tools.0.params.top_n', message: 'Top N should be a positive integer' }),
      expect.objectContaining({ component_id: 'Agent:Researcher', field: 'obj.params.tools.0.params.language', message: expect.stringMatching(/^Wikipedia languages should be one of af, pl, .*, yue$/) }),
    ]);
    expect(params.safeParse({ top_n: 2.5 }).success).toBe(false);
    expect(params.parse({ top_n: null, language: null })).toMatchObject({ top_n: 10, language: 'en' });
    expect(loadProblems(agentDsl([{ component_name: 'Wikipedia', name: 'Wikipedia', params: { language: 'ja', top_n: 3 } }]))).toEqual([]);
    expect(() => wikipediaTool({ baseUrl: 'not a url/{language}' })).toThrow();
    expect(() => wikipediaTool({ baseUrl: 'https://{language}.wiki.example' })).not.toThrow();
  });
});

describe('Wikipedia failures', () => {
  it('a refusal MediaWiki answers with 200 is told to the model', async () => {
    wiki.server.enqueue({ kind: 'status', status: 200, body: JSON.stringify({ error: { code: 'internal_api_error_DBQueryError', info: 'A database query error has occurred.' } }) });
    const outcome = await callTool(tool(), { query: 'bridge' }, context(), registry());
    expect(outcome.kind === 'error' && outcome.error).toBeInstanceOf(ToolError);
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "wikipedia_search": Wikipedia refused the request: A database query error has occurred.');
  });

  it('a 429 is retried after the wait the wiki asks for (timer fired by the test), then succeeds', async () => {
    wiki.server.enqueue({ kind: 'status', status: 429, body: 'Too many requests', headers: { 'content-type': 'text/plain', 'retry-after': '1' } });
    const { timer, armed } = manualTimer();
    const pending = callTool(tool(), { query: 'oslo' }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 1_000).length).toBe(1);
    expect(wiki.requests).toHaveLength(1);
    armed.find((t) => t.ms === 1_000)!.fire();
    const outcome = await pending;
    expect(outcome.kind === 'result' && outcome.references?.chunks.map((c) => c.document_name)).toEqual(['Oslo']);
    expect(wiki.requests.map((r) => r.query.list ?? r.query.prop)).toEqual(['search', 'search', 'extracts|info|pageprops']);
  });

  it('a 503 past the retries fails the turn as transient; a 403 is told to the model at once', async () => {
    const busy = { kind: 'status', status: 503, body: 'upstream connect error' } as const;
    wiki.server.enqueue(busy, busy, busy);
    const { timer, waits } = skippingTimer();
    await expect(callTool(tool(), { query: 'bridge' }, context(), createToolRegistry([], { timer }))).rejects.toThrow(ToolTransientError);
    expect(waits).toEqual([500, 1_000]);
    wiki.server.enqueue({ kind: 'status', status: 403, body: 'Forbidden' });
    const refused = await callTool(tool(), { query: 'bridge' }, context(), registry());
    expect(refused.kind === 'error' && refused.error.message).toBe('tool "wikipedia_search": the service answered 403');
    expect(wiki.requests).toHaveLength(4);
  });

  it('a wiki that does not answer times out at RAGFlow’s 60 s (timer fired by the test), as transient', async () => {
    wiki.server.enqueue({ kind: 'stall' });
    const { timer, armed, fireAll } = manualTimer();
    const pending = callTool(tool(), { query: 'bridge' }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => wiki.requests.length).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([60_000]);
    fireAll();
    await expect(pending).rejects.toThrow(ToolTimeoutError);
  });
});

/** The Wikipedia entry of the stock template web_search_assistant.json. */
const STOCK_ENTRY = { component_name: 'Wikipedia', name: 'Wikipedia', params: { language: 'en', top_n: 10 }, id: 'Wikipedia:SharpFoxesSing' };

describe('an Agent with a stock template’s Wikipedia', () => {
  it('searches, reads the introductions and cites one; the cited article is the message’s reference', async () => {
    expect(loadProblems(agentDsl([STOCK_ENTRY]))).toEqual([]);
    const run = await agentTurn(model, wikipediaTool({ baseUrl: wiki.url }), STOCK_ENTRY, { name: 'wikipedia_search_0', arguments: { query: 'Harbour Bridge' } }, 'When did the Harbour Bridge open?');
    expect(run.modelCalls).toBe(2);
    expect(run.firstRequest?.tools?.[0]?.function).toMatchObject({ name: 'wikipedia_search_0', parameters: { required: ['query'] } });
    expect(wiki.requests[0]?.query).toMatchObject({ srsearch: 'Harbour Bridge', srlimit: '10' });
    expect(run.toolText).toContain('It opened in 1932.');
    expect(messages(run.events)).toEqual([`Found it [ID:${run.ids[0]}].`]);
    const reference = referenceOf(run.events);
    expect(Object.keys(reference?.chunks ?? {})).toEqual([run.ids[0]]);
    expect(reference?.chunks[run.ids[0] as string]).toMatchObject({ document_name: 'Harbour Bridge', url: 'https://en.wikipedia.org/wiki/Harbour_Bridge' });
  });
});

describe('the runtime', () => {
  it('sends each call to EASEL_TOOL_WIKIPEDIA_BASE_URL with the entry’s language filled in', async () => {
    const config = readConfig({ EASEL_TOOL_WIKIPEDIA_BASE_URL: `${wiki.url}/{language}` });
    const engine = buildEngine(config, {
      store: {} as StoreContext,
      models: testServices().models as never,
      guard: new SsrfGuard(),
      secretsFor: () => async () => undefined,
    });
    const services = engine.servicesFor?.('acme') as { tools?: ToolRegistry; secret?: ToolContext['services']['secret'] };
    const kind = services.tools?.kind('Wikipedia');
    if (!kind || !services.tools) throw new Error('the runtime offers no Wikipedia');
    const built = kind.create({ component_name: 'Wikipedia', name: 'Wikipedia', params: kind.params.parse({ language: 'de' }) });
    const outcome = await callTool(built, { query: 'Hafenbrücke' }, context(), services.tools);
    expect(outcome.kind === 'result' && outcome.references?.chunks.map((c) => c.document_name)).toEqual(['Hafenbrücke']);
    expect(wiki.requests[0]?.path).toBe('/de/w/api.php');
  });
});
