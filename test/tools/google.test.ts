/**
 * Google (through SerpApi) against a local server speaking SerpApi's Google Search API: what is
 * sent, where the key comes from and that no message repeats it, how failures are classified,
 * and an Agent calling the search through a local OpenAI-compatible model server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { compileWorkflow, DslValidationError, TransientError } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { readConfig } from '../../lib/config';
import { citationId, formatChunks } from '../../lib/knowledge/format';
import {
  builtinToolKindsWith,
  callTool,
  createToolRegistry,
  GOOGLE_KEY_SECRET,
  type GoogleParams,
  googleTool,
  type Tool,
  ToolError,
  ToolTimeoutError,
  ToolTransientError,
} from '../../lib/tools';
import { messages, turn } from '../helpers/canvas';
import { type GooglePage, SERPAPI_TEST_KEY, SerpApiServer } from '../helpers/google-server';
import { OpenAiServer } from '../llm/openai-server';
import { manualTimer, skippingTimer } from './support';
import { agentDsl, agentRun, blockIds, referenceOf, secretsOf, thrown, toolContext } from './web-search-support';

const PAGES: GooglePage[] = [
  { link: 'https://bridges.example.org/harbour-bridge', title: 'Harbour Bridge history', snippet: 'The harbour bridge opened in 1932.', sourceDescription: 'A history of the harbour bridge, which opened in 1932 and carries eight lanes.' },
  { link: 'https://news.example.com/bridge-repairs', title: 'Bridge repairs begin', snippet: 'Repairs on the harbour bridge begin in May.' },
  { link: 'https://weather.example.net/oslo', title: 'Oslo weather', snippet: 'Cold and sunny in Oslo.' },
];

let serp: SerpApiServer;
let model: OpenAiServer;
beforeAll(async () => {
  [serp, model] = await Promise.all([SerpApiServer.start({ pages: PAGES }), OpenAiServer.start()]);
});
afterAll(async () => {
  await Promise.all([serp.close(), model.close()]);
});
beforeEach(() => {
  serp.requests.length = 0;
});

const kind = googleTool();
const kindHere = () => googleTool({ baseUrl: `${serp.url}/` });

function googleSearch(params: Record<string, unknown> = {}): Tool {
  const k = kindHere();
  return k.create({ component_name: 'Google', name: 'Google', params: k.params.parse(params) as GoogleParams });
}

const keyed = (secrets: Record<string, string> = { [GOOGLE_KEY_SECRET]: SERPAPI_TEST_KEY }) => toolContext(secretsOf(secrets));
const registry = () => createToolRegistry([]);

describe('Google', () => {
  it('asks SerpApi’s Google engine with RAGFlow’s country and language, the key from the tenant’s secret', async () => {
    const tool = googleSearch({ api_key: '', country: 'us', language: 'en' });
    expect(tool.name).toBe('google_search');
    expect(tool.description).toMatch(/^Search the world's information/);
    expect(tool.parameters).toEqual({
      type: 'object',
      properties: { q: expect.objectContaining({ type: 'string' }), start: expect.objectContaining({ type: 'integer' }), num: expect.objectContaining({ type: 'integer' }) },
      required: ['q'],
    });
    const outcome = await callTool(tool, { q: 'harbour bridge' }, keyed(), registry());
    expect(outcome.kind).toBe('result');
    expect(serp.requests).toHaveLength(1);
    const [request] = serp.requests;
    expect(request).toMatchObject({ method: 'GET', path: '/search.json' });
    expect(request?.query).toEqual({ engine: 'google', q: 'harbour bridge', google_domain: 'google.com', gl: 'us', hl: 'en', start: '0', num: '6', api_key: SERPAPI_TEST_KEY });
    expect(request?.headers.authorization).toBeUndefined();
  });

  it('uses RAGFlow’s defaults (cn, en, from 0, 6 results), and the model’s start and num over them', async () => {
    await callTool(googleSearch(), { q: 'bridge' }, keyed(), registry());
    expect(serp.requests[0]?.query).toMatchObject({ gl: 'cn', hl: 'en', start: '0', num: '6' });
    await callTool(googleSearch({ num: '3' }), { q: 'bridge', start: 10, num: '2' }, keyed(), registry());
    expect(serp.requests[1]?.query).toMatchObject({ start: '10', num: '2' });
  });

  it('hands the model knowledge blocks and references (the source’s description before the snippet), and SerpApi’s organic_results as data', async () => {
    const outcome = await callTool(googleSearch({ num: 2 }), { q: 'harbour bridge' }, keyed(), registry());
    if (outcome.kind !== 'result') throw new Error(`expected a result, got ${outcome.kind}`);
    const chunks = outcome.references?.chunks ?? [];
    expect(chunks.map((c) => c.url)).toEqual([PAGES[0]?.link, PAGES[1]?.link]);
    expect(chunks[0]).toMatchObject({ document_name: 'Harbour Bridge history', content: PAGES[0]?.sourceDescription, similarity: 1 });
    expect(chunks[1]?.content).toBe(PAGES[1]?.snippet);
    expect(outcome.references?.doc_aggs).toEqual([
      { doc_name: 'Harbour Bridge history', doc_id: chunks[0]?.id, count: 1, url: PAGES[0]?.link },
      { doc_name: 'Bridge repairs begin', doc_id: chunks[1]?.id, count: 1, url: PAGES[1]?.link },
    ]);
    expect(outcome.content).toBe(formatChunks(chunks));
    expect(outcome.content).toContain(`\nID: ${citationId(chunks[0]?.id ?? '')}\n├── Title: Harbour Bridge history\n├── URL: ${PAGES[0]?.link}\n└── Content:\nA history of the harbour bridge`);
    expect(outcome.data).toEqual([
      expect.objectContaining({ position: 1, title: 'Harbour Bridge history', link: PAGES[0]?.link, snippet: PAGES[0]?.snippet }),
      expect.objectContaining({ position: 2, title: 'Bridge repairs begin', link: PAGES[1]?.link }),
    ]);
  });

  it('tells the model when Google finds nothing (SerpApi’s 200 with an error line), and refuses a call without q', async () => {
    const none = await callTool(googleSearch(), { q: 'zeppelin hangar' }, keyed(), registry());
    expect(none).toEqual({ kind: 'result', content: 'Google found no web results for this query.', data: [] });
    const empty = await callTool(googleSearch(), { q: ' ' }, keyed(), registry());
    expect(empty.kind === 'error' && empty.error.message).toBe('tool "google_search": invalid arguments: q: must be a non-empty string');
    expect(serp.requests).toHaveLength(1);
  });
});

describe('the SerpApi key', () => {
  it('is the secret api_key names, resolved at call time', async () => {
    await callTool(googleSearch({ api_key: '{secret.RESEARCH_SERP}' }), { q: 'bridge' }, keyed({ RESEARCH_SERP: SERPAPI_TEST_KEY, [GOOGLE_KEY_SECRET]: 'serp-not-this-one' }), registry());
    expect(serp.requests[0]?.query.api_key).toBe(SERPAPI_TEST_KEY);
  });

  it('missing, tells the model which secret to set, and sends nothing', async () => {
    const missing = await callTool(googleSearch(), { q: 'bridge' }, keyed({}), registry());
    expect(missing.kind === 'error' && missing.error).toBeInstanceOf(ToolError);
    expect(missing.kind === 'error' && missing.error.message).toBe(
      'tool "google_search": Google (SerpApi) is not configured: set the tenant secret SERPAPI_API_KEY, or write {secret.NAME} in api_key',
    );
    const named = await callTool(googleSearch({ api_key: '{secret.MY_SERP}' }), { q: 'bridge' }, keyed(), registry());
    expect(named.kind === 'error' && named.error.message).toBe('tool "google_search": Google (SerpApi) is not configured: the secret MY_SERP named by api_key is not set for this tenant');
    expect(serp.requests).toHaveLength(0);
  });

  it('written into the DSL, is refused at load without repeating it', () => {
    const error = thrown(() => compileWorkflow(agentDsl([{ component_name: 'Google', name: 'Google', params: { api_key: 'serp-literal-SECRET-value' } }]), builtinComponents));
    expect(error).toBeInstanceOf(DslValidationError);
    expect((error as DslValidationError).problems).toEqual([
      expect.objectContaining({ component_id: 'Agent:Researcher', field: 'obj.params.tools.0.params.api_key', message: expect.stringContaining('left empty, the secret SERPAPI_API_KEY is used') }),
    ]);
    expect(JSON.stringify((error as DslValidationError).problems)).not.toContain('serp-literal-SECRET-value');
  });

  it('a rejected key (401) is told to the model with SerpApi’s reason, never the key or the URL', async () => {
    const outcome = await callTool(googleSearch(), { q: 'bridge' }, keyed({ [GOOGLE_KEY_SECRET]: 'serp-wrong-KEY-77' }), registry());
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "google_search": the service answered 401: Invalid API key. Your API key should be here: https://serpapi.com/manage-api-key');
  });

  it('is in no message when SerpApi fails for good or stays down', async () => {
    const busy = { kind: 'status', status: 503, body: '{"error": "We couldn\'t get valid results for this search. Please try again later."}' } as const;
    serp.enqueue(busy, busy, busy);
    const error = await callTool(googleSearch(), { q: 'bridge' }, keyed(), createToolRegistry([], { timer: skippingTimer().timer })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolTransientError);
    serp.enqueue({ kind: 'stall' });
    const { timer, fireAll } = manualTimer();
    const pending = callTool(googleSearch(), { q: 'bridge' }, keyed(), createToolRegistry([], { timer }));
    await expect.poll(() => serp.requests.length).toBe(4);
    fireAll();
    const timeout = await pending.catch((e: unknown) => e);
    for (const e of [error, timeout]) {
      expect((e as Error).message).not.toContain(SERPAPI_TEST_KEY);
      expect((e as Error).message).not.toContain('api_key');
    }
  });
});

describe('Google params', () => {
  it('are checked at load as RAGFlow checks them', () => {
    expect(kind.params.safeParse({ country: 'xx' }).success).toBe(false);
    expect(kind.params.safeParse({ language: 'latin' }).success).toBe(false);
    expect(kind.params.safeParse({ num: 0 }).success).toBe(false);
    expect(kind.params.safeParse({ num: 101 }).success).toBe(false);
    expect(kind.params.safeParse({ start: -1 }).success).toBe(false);
    expect(kind.params.safeParse({ start: 'ten' }).success).toBe(false);
    expect(kind.params.parse({ country: 'gb', language: 'zh-cn', start: '20', num: null })).toMatchObject({ country: 'gb', language: 'zh-cn', start: 20, num: 6, api_key: '' });
    const problems = (thrown(() => compileWorkflow(agentDsl([{ component_name: 'Google', name: 'Google', params: { country: 'atlantis' } }]), builtinComponents)) as DslValidationError).problems;
    expect(problems).toEqual([expect.objectContaining({ field: 'obj.params.tools.0.params.country', message: expect.stringContaining('Google Country is not supported') })]);
  });
});

describe('SerpApi failures', () => {
  it('a 429 (too fast) is retried after the backoff (timer fired by the test), then succeeds', async () => {
    serp.enqueue({ kind: 'status', status: 429, body: '{"error": "Your searches per hour limit has been reached."}' });
    const { timer, armed } = manualTimer();
    const pending = callTool(googleSearch(), { q: 'bridge' }, keyed(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 500).length).toBe(1);
    expect(serp.requests).toHaveLength(1);
    armed.find((t) => t.ms === 500)!.fire();
    const outcome = await pending;
    expect(outcome.kind).toBe('result');
    expect(serp.requests).toHaveLength(2);
    expect(serp.requests[1]?.search).toBe(serp.requests[0]?.search);
  });

  it('a 429 for a plan out of searches is told to the model at once, not retried', async () => {
    serp.enqueue({ kind: 'status', status: 429, body: '{"error": "Your account has run out of searches."}' });
    const outcome = await callTool(googleSearch(), { q: 'bridge' }, keyed(), registry());
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "google_search": the service answered 429: Your account has run out of searches.');
    expect(serp.requests).toHaveLength(1);
  });

  it('a search SerpApi could not run (200 with status Error) is told to the model', async () => {
    serp.enqueue({ kind: 'status', status: 200, body: '{"search_metadata": {"status": "Error"}, "error": "Unsupported `xx` country."}' });
    const outcome = await callTool(googleSearch(), { q: 'bridge' }, keyed(), registry());
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "google_search": SerpApi answered: Unsupported `xx` country.');
  });

  it('a search with no answer times out at 12 s, as transient (timer fired by the test)', async () => {
    serp.enqueue({ kind: 'stall' });
    const { timer, armed, fireAll } = manualTimer();
    const pending = callTool(googleSearch(), { q: 'bridge' }, keyed(), createToolRegistry([], { timer }));
    await expect.poll(() => serp.requests.length).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([12_000]);
    fireAll();
    await expect(pending).rejects.toThrow(ToolTimeoutError);
  });
});

/** The Google entry of the stock template web_search_assistant.json. */
const STOCK_GOOGLE = { component_name: 'Google', name: 'Google', params: { api_key: '', country: 'us', language: 'en' } };

describe('an Agent with a stock template’s Google', () => {
  const run = (secrets: Record<string, string>) => agentRun([STOCK_GOOGLE], [kindHere()], { modelUrl: model.url, secrets });

  it('searches, reads the results and cites one; the cited page is the message’s reference', async () => {
    compileWorkflow(agentDsl([STOCK_GOOGLE]), builtinComponents);
    let ids: string[] = [];
    model.enqueue({ kind: 'tools', calls: [{ name: 'google_search_0', arguments: { q: 'harbour bridge opened' } }] });
    model.respond = (body) => {
      ids = blockIds(body);
      return { kind: 'text', text: `It opened in 1932 [ID:${ids[0]}].` };
    };
    const events = await turn(run({ SERPAPI_API_KEY: SERPAPI_TEST_KEY }), { query: 'When did the harbour bridge open?' });

    const [first] = model.requests.slice(-2).map((r) => r.body);
    expect(first?.tools?.[0]?.function).toMatchObject({ name: 'google_search_0', description: expect.stringContaining("Search the world's information") });
    expect(serp.requests.map((r) => r.query.q)).toEqual(['harbour bridge opened']);
    expect(serp.requests[0]?.query).toMatchObject({ gl: 'us', hl: 'en' });
    expect(messages(events)).toEqual([`It opened in 1932 [ID:${ids[0]}].`]);
    const reference = referenceOf(events);
    expect(Object.keys(reference?.chunks ?? {})).toEqual([ids[0]]);
    expect(reference?.chunks[ids[0] as string]).toMatchObject({ document_name: 'Harbour Bridge history', url: PAGES[0]?.link });
  });

  it('without a key, the model is told which secret to set and answers; SerpApi down fails the turn', async () => {
    model.enqueue({ kind: 'tools', calls: [{ name: 'google_search_0', arguments: { q: 'bridge' } }] }, { kind: 'text', text: 'I cannot search the web right now.' });
    const events = await turn(run({}), { query: 'bridge?' });
    expect(messages(events)).toEqual(['I cannot search the web right now.']);
    expect(model.requests.at(-1)?.body.messages.at(-1)?.content).toMatch(/Google \(SerpApi\) is not configured: set the tenant secret SERPAPI_API_KEY/);

    const down = { kind: 'status', status: 500, body: '{}' } as const;
    serp.enqueue(down, down, down);
    model.enqueue({ kind: 'tools', calls: [{ name: 'google_search_0', arguments: { q: 'bridge' } }] });
    const error = await turn(run({ SERPAPI_API_KEY: SERPAPI_TEST_KEY }), { query: 'bridge?' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ code: 'unavailable', message: 'tool "google_search": the service answered 500' });
  });
});

describe('the runtime’s Google', () => {
  it('talks to EASEL_TOOL_GOOGLE_BASE_URL', async () => {
    const config = readConfig({ EASEL_TOOL_GOOGLE_BASE_URL: serp.url });
    expect(config.tools.baseUrls.GOOGLE).toBe(serp.url);
    const google = builtinToolKindsWith({ baseUrls: config.tools.baseUrls }).find((k) => k.name === 'Google');
    if (!google) throw new Error('the built-in kinds have no Google');
    const tool = google.create({ component_name: 'Google', name: 'Google', params: google.params.parse({}) });
    const outcome = await callTool(tool, { q: 'oslo weather' }, keyed(), registry());
    expect(outcome.kind === 'result' && outcome.references?.chunks.map((c) => c.url)).toEqual([PAGES[2]?.link]);
  });
});
