/**
 * TavilySearch and TavilyExtract against a local server speaking Tavily's REST API: what is
 * sent, where the key comes from, how failures are classified, and an Agent calling the search
 * through a local OpenAI-compatible model server, its results becoming the pass's references.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { compileWorkflow, DslValidationError, TransientError } from '../../lib/canvas';
import { builtinComponents, withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { citationId, formatChunks } from '../../lib/knowledge/format';
import {
  callTool,
  createToolRegistry,
  TAVILY_KEY_SECRET,
  type TavilyExtractParams,
  type TavilySearchParams,
  tavilyTools,
  type Tool,
  type ToolContext,
  ToolError,
  type ToolRegistry,
  ToolTimeoutError,
  ToolTransientError,
} from '../../lib/tools';
import { readConfig } from '../../lib/config';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { buildEngine } from '../../lib/runtime';
import type { StoreContext } from '../../lib/store/dynamo';
import { canvasFor, messages, turn } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { testServices } from '../helpers/services';
import { TAVILY_TEST_KEY, TavilyServer, type WebPage } from '../helpers/tavily-server';
import { OpenAiServer } from '../llm/openai-server';
import { manualTimer, skippingTimer } from './support';

const PAGES: WebPage[] = [
  { url: 'https://bridges.example.org/harbour-bridge', title: 'Harbour Bridge history', content: 'The harbour bridge opened in 1932 and carries eight lanes.', score: 0.93 },
  { url: 'https://news.example.com/bridge-repairs', title: 'Bridge repairs begin', content: 'Repairs on the harbour bridge begin in May. ![img](data:image/png;base64,AAAA) Two lanes stay open.' },
  { url: 'https://weather.example.net/oslo', title: 'Oslo weather', content: 'Cold and sunny in Oslo.', raw_content: '# Oslo\n\nCold and sunny, -3 °C.' },
];

let tavily: TavilyServer;
let model: OpenAiServer;
beforeAll(async () => {
  [tavily, model] = await Promise.all([TavilyServer.start({ pages: PAGES }), OpenAiServer.start()]);
});
afterAll(async () => {
  await Promise.all([tavily.close(), model.close()]);
});
beforeEach(() => {
  tavily.requests.length = 0;
});

/** The params schemas, which do not depend on the endpoint. */
const [searchKind, extractKind] = tavilyTools();

function kinds() {
  return tavilyTools({ baseUrl: `${tavily.url}/` });
}

function searchTool(params: Record<string, unknown> = {}): Tool {
  const [search] = kinds();
  return search.create({ component_name: 'TavilySearch', name: 'TavilySearch', params: search.params.parse(params) as TavilySearchParams });
}

function extractTool(params: Record<string, unknown> = {}): Tool {
  const [, extract] = kinds();
  return extract.create({ component_name: 'TavilyExtract', name: 'TavilyExtract', params: extract.params.parse(params) as TavilyExtractParams });
}

function context(secrets: Record<string, string> = { [TAVILY_KEY_SECRET]: TAVILY_TEST_KEY }): ToolContext {
  return {
    signal: new AbortController().signal,
    services: { secret: (name) => secrets[name] },
    componentId: 'Agent:Researcher',
    ordinal: 0,
    path: [],
    recordUsage: () => undefined,
  };
}

const registry = (): ToolRegistry => createToolRegistry([]);

describe('TavilySearch', () => {
  it('posts RAGFlow’s search to /search with the Bearer key, the model’s arguments over the entry’s params', async () => {
    const tool = searchTool({ api_key: '', max_results: 5, days: 7, include_raw_content: true, include_domains: ['ignored.example'], query: 'sys.query' });
    expect(tool.name).toBe('tavily_search');
    expect(tool.parameters).toMatchObject({ required: ['query'], properties: { query: { type: 'string' }, topic: { enum: ['general', 'news'] } } });
    const outcome = await callTool(tool, { query: 'harbour bridge', topic: 'news', include_domains: [] }, context(), registry());

    expect(tavily.requests).toHaveLength(1);
    const [request] = tavily.requests;
    expect(request?.method).toBe('POST');
    expect(request?.path).toBe('/search');
    expect(request?.headers.authorization).toBe(`Bearer ${TAVILY_TEST_KEY}`);
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.body).toEqual({
      query: 'harbour bridge',
      search_depth: 'basic',
      topic: 'news',
      max_results: 5,
      days: 7,
      include_answer: false,
      include_raw_content: false,
      include_images: false,
      include_image_descriptions: false,
      include_domains: [],
      exclude_domains: [],
    });
    expect(outcome.kind).toBe('result');
  });

  it('uses RAGFlow’s defaults for params the entry leaves out', async () => {
    await callTool(searchTool({}), { query: 'bridge' }, context(), registry());
    expect(tavily.requests[0]?.body).toMatchObject({ search_depth: 'basic', topic: 'general', max_results: 6, days: 14, include_answer: false });
  });

  it('hands the model knowledge blocks (title, URL, content) and the results as references, ids from the URL', async () => {
    const outcome = await callTool(searchTool(), { query: 'harbour bridge' }, context(), registry());
    if (outcome.kind !== 'result') throw new Error(`expected a result, got ${outcome.kind}`);
    const chunks = outcome.references?.chunks ?? [];
    expect(chunks.map((c) => c.url)).toEqual([PAGES[0]?.url, PAGES[1]?.url]);
    expect(chunks[0]).toMatchObject({ document_name: 'Harbour Bridge history', content: PAGES[0]?.content, similarity: 0.93, document_id: chunks[0]?.id });
    // the inline base64 image is dropped, as RAGFlow drops it
    expect(chunks[1]?.content).toBe('Repairs on the harbour bridge begin in May.  Two lanes stay open.');
    expect(outcome.references?.doc_aggs).toEqual([
      { doc_name: 'Harbour Bridge history', doc_id: chunks[0]?.id, count: 1, url: PAGES[0]?.url },
      { doc_name: 'Bridge repairs begin', doc_id: chunks[1]?.id, count: 1, url: PAGES[1]?.url },
    ]);
    expect(outcome.content).toBe(formatChunks(chunks));
    expect(outcome.content).toContain(`\nID: ${citationId(chunks[0]?.id ?? '')}\n├── Title: Harbour Bridge history\n├── URL: ${PAGES[0]?.url}\n└── Content:\nThe harbour bridge opened in 1932`);

    // the same page searched again has the same id: a citation of it stays valid
    const again = await callTool(searchTool(), { query: 'harbour' }, context(), registry());
    expect(again.kind === 'result' && again.references?.chunks[0]?.id).toBe(chunks[0]?.id);
  });

  it('tells the model when nothing is found, and refuses a call without a query', async () => {
    const none = await callTool(searchTool(), { query: 'zeppelin hangar' }, context(), registry());
    expect(none).toEqual({ kind: 'result', content: 'Tavily found no web results for this query.' });
    const empty = await callTool(searchTool(), { query: '  ' }, context(), registry());
    expect(empty.kind === 'error' && empty.error.message).toMatch(/invalid arguments: query: must be a non-empty string/);
    expect(tavily.requests).toHaveLength(1);
  });
});

describe('the Tavily key', () => {
  it('is the secret api_key names, resolved at call time', async () => {
    await callTool(searchTool({ api_key: '{secret.RESEARCH_TAVILY}' }), { query: 'bridge' }, context({ RESEARCH_TAVILY: TAVILY_TEST_KEY, [TAVILY_KEY_SECRET]: 'tvly-not-this-one' }), registry());
    expect(tavily.requests[0]?.headers.authorization).toBe(`Bearer ${TAVILY_TEST_KEY}`);
  });

  it('is the tenant secret TAVILY_API_KEY when api_key is empty, as stock templates ship it', async () => {
    const outcome = await callTool(searchTool({ api_key: '' }), { query: 'bridge' }, context({ TAVILY_API_KEY: TAVILY_TEST_KEY }), registry());
    expect(outcome.kind).toBe('result');
    expect(tavily.requests[0]?.headers.authorization).toBe(`Bearer ${TAVILY_TEST_KEY}`);
  });

  it('missing, tells the model that Tavily is not configured and which secret to set, and sends nothing', async () => {
    const fallback = await callTool(searchTool(), { query: 'bridge' }, context({}), registry());
    expect(fallback.kind).toBe('error');
    expect(fallback.kind === 'error' && fallback.error).toBeInstanceOf(ToolError);
    expect(fallback.kind === 'error' && fallback.error.message).toBe(
      'tool "tavily_search": Tavily is not configured: set the tenant secret TAVILY_API_KEY, or write {secret.NAME} in api_key',
    );
    const named = await callTool(extractTool({ api_key: '{secret.MY_KEY}' }), { urls: [PAGES[2]?.url] }, context({ TAVILY_API_KEY: TAVILY_TEST_KEY }), registry());
    expect(named.kind === 'error' && named.error.message).toBe('tool "tavily_extract": Tavily is not configured: the secret MY_KEY named by api_key is not set for this tenant');
    expect(tavily.requests).toHaveLength(0);
  });

  it('written into the DSL, is refused at load without repeating it', () => {
    const dsl = agentDsl([{ component_name: 'TavilySearch', name: 'TavilySearch', params: { api_key: 'tvly-literal-SECRET-value' } }]);
    const error = (() => {
      try {
        compileWorkflow(dsl, builtinComponents);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(DslValidationError);
    expect((error as DslValidationError).problems).toEqual([
      expect.objectContaining({
        component_id: 'Agent:Researcher',
        field: 'obj.params.tools.0.params.api_key',
        message: expect.stringContaining('must not hold the credential itself: store it as a tenant secret and write {secret.NAME}'),
      }),
    ]);
    expect(JSON.stringify((error as DslValidationError).problems)).not.toContain('tvly-literal-SECRET-value');
    expect((error as Error).message).not.toContain('tvly-literal-SECRET-value');
  });

  it('params are checked at load as RAGFlow checks them', () => {
    expect(searchKind.params.safeParse({ topic: 'sports' }).success).toBe(false);
    expect(searchKind.params.safeParse({ max_results: 0 }).success).toBe(false);
    expect(extractKind.params.safeParse({ format: 'html' }).success).toBe(false);
    expect(searchKind.params.parse({ api_key: ' {secret.K} ', include_domains: null })).toMatchObject({ api_key: '{secret.K}', include_domains: [] });
  });
});

describe('Tavily failures', () => {
  it('a rejected key (401) is told to the model with Tavily’s reason', async () => {
    const outcome = await callTool(searchTool(), { query: 'bridge' }, context({ TAVILY_API_KEY: 'tvly-wrong' }), registry());
    expect(outcome.kind === 'error' && outcome.error).toBeInstanceOf(ToolError);
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "tavily_search": the service answered 401: Unauthorized: missing or invalid API key.');
  });

  it('a 429 is retried after the wait Tavily asks for (timer fired by the test), then succeeds', async () => {
    tavily.enqueue({ kind: 'status', status: 429, body: '{"detail": {"error": "rate limit"}}', headers: { 'retry-after': '2' } });
    const { timer, armed } = manualTimer();
    const pending = callTool(searchTool(), { query: 'bridge' }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 2_000).length).toBe(1);
    expect(tavily.requests).toHaveLength(1);
    armed.find((t) => t.ms === 2_000)!.fire();
    const outcome = await pending;
    expect(outcome.kind).toBe('result');
    expect(tavily.requests).toHaveLength(2);
    expect(tavily.requests[1]!.body).toEqual(tavily.requests[0]!.body);
  });

  it('429 and 5xx that go on past the retries fail the turn as transient; a 400 is not retried', async () => {
    const busy = { kind: 'status', status: 503, body: '<html>busy</html>' } as const;
    tavily.enqueue(busy, busy, busy);
    const { timer, waits } = skippingTimer();
    await expect(callTool(searchTool(), { query: 'bridge' }, context(), createToolRegistry([], { timer }))).rejects.toThrow(ToolTransientError);
    expect(tavily.requests).toHaveLength(3);
    expect(waits).toEqual([500, 1_000]);
    tavily.enqueue({ kind: 'status', status: 429, body: '{}', headers: { 'retry-after': '3600' } });
    await expect(callTool(extractTool(), { urls: ['https://a.example'] }, context(), registry())).rejects.toThrow(/answered 429/);
    expect(tavily.requests).toHaveLength(4);
    tavily.enqueue({ kind: 'status', status: 400, body: '{"detail": {"error": "bad query"}}' });
    const refused = await callTool(searchTool(), { query: 'bridge' }, context(), registry());
    expect(refused.kind === 'error' && refused.error.message).toMatch(/answered 400: bad query/);
    expect(tavily.requests).toHaveLength(5);
  });

  it('a body that is not Tavily’s answer is told to the model', async () => {
    tavily.enqueue({ kind: 'status', status: 200, body: 'not json' }, { kind: 'status', status: 200, body: '{"results": "none"}' });
    const garbage = await callTool(searchTool(), { query: 'bridge' }, context(), registry());
    expect(garbage.kind === 'error' && garbage.error.message).toMatch(/not JSON/);
    const shape = await callTool(searchTool(), { query: 'bridge' }, context(), registry());
    expect(shape.kind === 'error' && shape.error.message).toMatch(/unexpected body/);
  });

  it('a search with no answer times out at the tool’s timeout, as transient (timer fired by the test)', async () => {
    tavily.enqueue({ kind: 'stall' });
    const { timer, armed, fireAll } = manualTimer();
    const pending = callTool(searchTool(), { query: 'bridge' }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => tavily.requests.length).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([12_000]);
    fireAll();
    await expect(pending).rejects.toThrow(ToolTimeoutError);
  });
});

describe('TavilyExtract', () => {
  it('posts the URLs to /extract and hands back RAGFlow’s json, a comma-separated string split', async () => {
    const tool = extractTool({ format: 'text' });
    expect(tool.name).toBe('tavily_extract');
    expect(tool.parameters).toMatchObject({ required: ['urls'], properties: { extract_depth: { enum: ['basic', 'advanced'] }, format: { enum: ['markdown', 'text'] } } });
    const outcome = await callTool(tool, { urls: `${PAGES[2]?.url}, https://missing.example/page`, extract_depth: 'advanced' }, context(), registry());
    expect(tavily.requests[0]).toMatchObject({
      path: '/extract',
      headers: { authorization: `Bearer ${TAVILY_TEST_KEY}` },
      body: { urls: [PAGES[2]?.url, 'https://missing.example/page'], extract_depth: 'advanced', format: 'text', include_images: false },
    });
    expect(outcome).toEqual({ kind: 'result', content: JSON.stringify([{ url: PAGES[2]?.url, raw_content: '# Oslo\n\nCold and sunny, -3 °C.', images: [] }]) });
  });

  it('falls back to the entry’s urls, and refuses a call with none', async () => {
    await callTool(extractTool({ urls: [PAGES[0]?.url] }), {}, context(), registry());
    expect(tavily.requests[0]?.body.urls).toEqual([PAGES[0]?.url]);
    const none = await callTool(extractTool(), { urls: [] }, context(), registry());
    expect(none.kind === 'error' && none.error.message).toBe('tool "tavily_extract": the argument "urls" must name at least one URL');
  });
});

function agentDsl(tools: unknown[]) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Agent:Researcher']],
    'Agent:Researcher': ['Agent', {
      llm_id: 'writer@Local',
      sys_prompt: 'You research on the web.',
      prompts: [{ role: 'user', content: '{sys.query}' }],
      max_rounds: 3,
      tools,
    }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Researcher@content}'] }],
  });
}

/** A stock template's TavilySearch entry (deep_research.json, seo_article_writer.json). */
const STOCK_SEARCH = {
  component_name: 'TavilySearch',
  name: 'TavilySearch',
  id: 'TavilySearch:FairToolsLive',
  params: {
    api_key: '', days: 7, exclude_domains: [], include_answer: false, include_domains: [], include_image_descriptions: false, include_images: false, include_raw_content: true, max_results: 5,
    outputs: { formalized_content: { type: 'string', value: '' }, json: { type: 'Array<Object>', value: [] } }, query: 'sys.query', search_depth: 'basic', topic: 'general',
  },
};

const referenceOf = (events: Awaited<ReturnType<typeof turn>>) =>
  (events.find((e) => e.event === 'message_end')?.data as { reference?: { chunks: Record<string, Record<string, unknown>>; doc_aggs: Record<string, unknown> } }).reference;

describe('an Agent with a stock template’s TavilySearch', () => {
  function run(secrets: Record<string, string>, timer = skippingTimer().timer) {
    const tools = createToolRegistry(kinds(), { timer });
    const services = { ...testServices({ openaiUrl: model.url, secrets }), tools };
    // the built-in Agent loads the entry; the run's registry talks to the local server
    return canvasFor(agentDsl([STOCK_SEARCH]), { services }, withComponents(createAgent(tools)));
  }

  it('searches, reads the results and cites them; the cited page is the message’s reference', async () => {
    compileWorkflow(agentDsl([STOCK_SEARCH]), builtinComponents);
    let ids: string[] = [];
    model.enqueue({ kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: { query: 'harbour bridge opened' } }] });
    model.respond = (body) => {
      const text = body.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => m.content).join('\n');
      ids = [...text.matchAll(/\nID: (\d+)/g)].map((m) => m[1] as string);
      return { kind: 'text', text: `It opened in 1932 [ID:${ids[0]}].` };
    };
    const before = model.calls;
    const events = await turn(run({ TAVILY_API_KEY: TAVILY_TEST_KEY }), { query: 'When did the harbour bridge open?' });

    expect(model.calls - before).toBe(2);
    const [first] = model.requests.slice(-2).map((r) => r.body);
    expect(first?.tools?.[0]?.function).toMatchObject({ name: 'tavily_search_0', description: expect.stringContaining('Tavily is a search engine optimized for LLMs') });
    expect(tavily.requests.map((r) => r.body.query)).toEqual(['harbour bridge opened']);
    expect(tavily.requests[0]?.body).toMatchObject({ max_results: 5, days: 7, include_raw_content: false });
    expect(messages(events)).toEqual([`It opened in 1932 [ID:${ids[0]}].`]);
    const reference = referenceOf(events);
    expect(Object.keys(reference?.chunks ?? {})).toEqual([ids[0]]);
    expect(reference?.chunks[ids[0] as string]).toMatchObject({ document_name: 'Harbour Bridge history', url: PAGES[0]?.url });
    expect(Object.keys(reference?.doc_aggs ?? {})).toEqual(['Harbour Bridge history']);
  });

  it('without a key, the model is told Tavily is not configured and answers; a 5xx fails the turn', async () => {
    model.enqueue({ kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: { query: 'bridge' } }] }, { kind: 'text', text: 'I cannot search the web right now.' });
    model.respond = () => ({ kind: 'text', text: 'ok' });
    const events = await turn(run({}), { query: 'bridge?' });
    expect(messages(events)).toEqual(['I cannot search the web right now.']);
    expect(model.requests.at(-1)?.body.messages.at(-1)?.content).toMatch(/Tavily is not configured: set the tenant secret TAVILY_API_KEY/);
    expect(tavily.requests).toHaveLength(0);

    const busy = { kind: 'status', status: 500, body: '{}' } as const;
    tavily.enqueue(busy, busy, busy);
    model.enqueue({ kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: { query: 'bridge' } }] });
    const before = model.calls;
    const error = await turn(run({ TAVILY_API_KEY: TAVILY_TEST_KEY }), { query: 'bridge?' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransientError);
    // the Agent streams into the Message, which is where the failure surfaces
    expect(error).toMatchObject({ code: 'unavailable', message: 'tool "tavily_search": the service answered 500' });
    expect(model.calls - before).toBe(1);
  });
});

describe('TavilySearch on the canvas', () => {
  const dsl = (params: Record<string, unknown>) => graph({
    begin: ['Begin', { mode: 'conversational' }, ['TavilySearch:Web']],
    'TavilySearch:Web': ['TavilySearch', params, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{TavilySearch:Web@formalized_content}'] }],
  });
  const run = (params: Record<string, unknown>, secrets: Record<string, string> = { TAVILY_API_KEY: TAVILY_TEST_KEY }) => {
    const tools = createToolRegistry(kinds(), { timer: skippingTimer().timer });
    return canvasFor(dsl(params), { services: { ...testServices({ secrets }), tools } });
  };

  it('searches the user’s query by default (RAGFlow’s meta default) and outputs formalized_content and json', async () => {
    const events = await turn(run({ max_results: 2 }), { query: 'oslo weather' });
    expect(tavily.requests.map((r) => [r.path, r.body.query, r.body.max_results])).toEqual([['/search', 'oslo weather', 2]]);
    const [text] = messages(events);
    expect(text).toContain('Cold and sunny in Oslo.');
    expect(text).toMatch(/ID: \d+/);
    const end = events.find((e) => e.event === 'message_end');
    expect(Object.values((end?.data as any).reference.doc_aggs).map((d: any) => d.doc_name)).toEqual(['Oslo weather']);
  });

  it('takes the query from a reference or text in its params, and its params are checked at load', async () => {
    await turn(run({ query: 'news about {sys.query}' }), { query: 'bridge' });
    expect(tavily.requests.at(-1)?.body.query).toBe('news about bridge');
    expect(() => compileWorkflow(dsl({ topic: 'sports' }), builtinComponents)).toThrow(DslValidationError);
    expect(() => compileWorkflow(dsl({ api_key: 'tvly-literal-SECRET-value' }), builtinComponents)).toThrow(/must not hold the credential itself/);
  });

  it('without a key fails as the component’s error, saying which secret to set', async () => {
    const events = await turn(run({}, {}), { query: 'bridge' });
    expect(events.at(-1)).toMatchObject({ event: 'workflow_failed', data: { error: { code: 'component_error', component_id: 'TavilySearch:Web', message: expect.stringContaining('set the tenant secret TAVILY_API_KEY') } } });
    expect(tavily.requests).toHaveLength(0);
  });
});

describe('the runtime', () => {
  it('hands each tenant’s runs the Tavily tools at EASEL_TOOL_TAVILY_BASE_URL, the key from that tenant’s secrets', async () => {
    const config = readConfig({ EASEL_TOOL_TAVILY_BASE_URL: tavily.url });
    const secrets: Record<string, Record<string, string>> = { acme: { TAVILY_API_KEY: TAVILY_TEST_KEY } };
    const engine = buildEngine(config, {
      // the engine's services are built without touching the store
      store: {} as StoreContext,
      models: testServices().models as never,
      guard: new SsrfGuard(),
      secretsFor: (tenant) => async (name) => secrets[tenant]?.[name],
    });
    const services = engine.servicesFor?.('acme') as { tools?: ToolRegistry; secret?: ToolContext['services']['secret'] };
    const kind = services.tools?.kind('TavilySearch');
    if (!kind || !services.tools) throw new Error('the runtime offers no TavilySearch');
    const tool = kind.create({ component_name: 'TavilySearch', name: 'TavilySearch', params: kind.params.parse({}) });
    const outcome = await callTool(tool, { query: 'oslo weather' }, { ...context(), services: { ...(services.secret ? { secret: services.secret } : {}) } }, services.tools);
    expect(outcome.kind === 'result' && outcome.references?.chunks.map((c) => c.url)).toEqual([PAGES[2]?.url]);
    expect(tavily.requests[0]?.headers.authorization).toBe(`Bearer ${TAVILY_TEST_KEY}`);
  });
});
