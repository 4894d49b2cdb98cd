/**
 * SearXNG against a local server speaking SearXNG's JSON search API: what is sent, that the
 * tenant's instance URL goes through the run's SSRF guard (and every redirect), how failures are
 * classified, and an Agent calling the search through a local OpenAI-compatible model server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { compileWorkflow, DslValidationError } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { formatChunks } from '../../lib/knowledge/format';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { builtinTools, callTool, createToolRegistry, type SearxngParams, searxngTool, type Tool, ToolError, ToolTimeoutError, type ToolServices } from '../../lib/tools';
import { messages, turn } from '../helpers/canvas';
import { type SearxPage, SearxngServer } from '../helpers/searxng-server';
import { OpenAiServer } from '../llm/openai-server';
import { manualTimer } from './support';
import { agentDsl, agentRun, blockIds, referenceOf, thrown, toolContext } from './web-search-support';

const PAGES: SearxPage[] = [
  { url: 'https://bridges.example.org/harbour-bridge', title: 'Harbour Bridge history', content: 'The harbour bridge opened in 1932 and carries eight lanes.' },
  { url: 'https://news.example.com/bridge-repairs', title: 'Bridge repairs begin', content: 'Repairs on the harbour bridge begin in May.' },
  { url: 'https://maps.example.net/bridge', title: 'Bridge on the map', content: '' },
  { url: 'https://weather.example.net/oslo', title: 'Oslo weather', content: 'Cold and sunny in Oslo.' },
];

let searx: SearxngServer;
let model: OpenAiServer;
beforeAll(async () => {
  [searx, model] = await Promise.all([SearxngServer.start({ pages: PAGES }), OpenAiServer.start()]);
});
afterAll(async () => {
  await Promise.all([searx.close(), model.close()]);
});
beforeEach(() => {
  searx.requests.length = 0;
  searx.jsonEnabled = true;
});

const kind = searxngTool();

function searxng(params: Record<string, unknown> = { searxng_url: searx.url }): Tool {
  return kind.create({ component_name: 'SearXNG', name: 'SearXNG', params: kind.params.parse(params) as SearxngParams });
}

/** The run's guard lets the local instance through, as EASEL_SSRF_ALLOW=127.0.0.1 would. */
const allowed = (services: ToolServices = {}) => toolContext({ guard: new SsrfGuard({ allow: ['127.0.0.1'] }), ...services });
const registry = () => createToolRegistry([]);

describe('SearXNG', () => {
  it('asks the instance’s JSON API with RAGFlow’s query', async () => {
    const tool = searxng({ searxng_url: `${searx.url}/` });
    expect(tool.name).toBe('searxng_search');
    expect(tool.description).toMatch(/^SearXNG is a privacy-focused metasearch engine/);
    expect(tool.parameters).toEqual({
      type: 'object',
      properties: { query: expect.objectContaining({ type: 'string' }), searxng_url: expect.objectContaining({ type: 'string', description: expect.stringContaining('base URL of your SearXNG instance') }) },
      required: ['query'],
    });
    const outcome = await callTool(tool, { query: 'harbour bridge' }, allowed(), registry());
    expect(outcome.kind).toBe('result');
    expect(searx.requests).toHaveLength(1);
    expect(searx.requests[0]).toMatchObject({ method: 'GET', path: '/search' });
    expect(searx.requests[0]?.query).toEqual({ q: 'harbour bridge', format: 'json', categories: 'general', language: 'auto', safesearch: '1', pageno: '1' });
    expect(searx.requests[0]?.headers.accept).toBe('application/json');
  });

  it('hands the model knowledge blocks and references, and the first top_n results as data', async () => {
    const outcome = await callTool(searxng({ searxng_url: searx.url, top_n: 3 }), { query: 'harbour bridge' }, allowed(), registry());
    if (outcome.kind !== 'result') throw new Error(`expected a result, got ${outcome.kind}`);
    const chunks = outcome.references?.chunks ?? [];
    // the third result has no text: RAGFlow leaves it out of the blocks, not out of its json
    expect(chunks.map((c) => c.url)).toEqual([PAGES[0]?.url, PAGES[1]?.url]);
    expect(chunks[0]).toMatchObject({ document_name: 'Harbour Bridge history', content: PAGES[0]?.content, similarity: 1 });
    expect(outcome.content).toBe(formatChunks(chunks));
    expect((outcome.data as { url: string }[]).map((r) => r.url)).toEqual([PAGES[0]?.url, PAGES[1]?.url, PAGES[2]?.url]);
    expect(outcome.data).toEqual(expect.arrayContaining([expect.objectContaining({ engine: 'duckduckgo', category: 'general' })]));
  });

  it('tells the model when nothing is found, and refuses a call without a query', async () => {
    const none = await callTool(searxng(), { query: 'zeppelin hangar' }, allowed(), registry());
    expect(none).toEqual({ kind: 'result', content: 'SearXNG found no web results for this query.', data: [] });
    const empty = await callTool(searxng(), { query: '' }, allowed(), registry());
    expect(empty.kind === 'error' && empty.error.message).toBe('tool "searxng_search": invalid arguments: query: must be a non-empty string');
    expect(searx.requests).toHaveLength(1);
  });
});

describe('the SearXNG instance', () => {
  it('is refused by the run’s default guard on a loopback address, with the guard’s reason; nothing is sent', async () => {
    const outcome = await callTool(searxng(), { query: 'bridge' }, toolContext({ guard: new SsrfGuard() }), registry());
    expect(outcome.kind === 'error' && outcome.error).toBeInstanceOf(ToolError);
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "searxng_search": SearXNG cannot be reached: outbound request refused: 127.0.0.1 is a loopback address');
    expect(searx.requests).toHaveLength(0);
  });

  it('a redirect to a refused address is refused, after the first hop only', async () => {
    searx.enqueue({ kind: 'status', status: 302, body: '', headers: { location: 'http://169.254.169.254/latest/meta-data/' } });
    const outcome = await callTool(searxng(), { query: 'bridge' }, allowed(), registry());
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "searxng_search": SearXNG cannot be reached: outbound request refused: 169.254.169.254 is a link-local address');
    expect(searx.requests).toHaveLength(1);
  });

  it('without a guard, the run has no outbound HTTP: the tool refuses to call', async () => {
    const outcome = await callTool(searxng(), { query: 'bridge' }, toolContext(), registry());
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "searxng_search": outbound HTTP is not configured for this run, so SearXNG cannot be reached');
    expect(searx.requests).toHaveLength(0);
  });

  it('is the entry’s searxng_url, else the one the model writes; neither is a permanent error', async () => {
    await callTool(searxng({}), { query: 'oslo', searxng_url: `${searx.url}/` }, allowed(), registry());
    expect(searx.requests).toHaveLength(1);
    // the entry's URL wins over the model's
    await callTool(searxng(), { query: 'oslo', searxng_url: 'https://searx.elsewhere.example' }, allowed(), registry());
    expect(searx.requests).toHaveLength(2);
    const none = await callTool(searxng({}), { query: 'oslo' }, allowed(), registry());
    expect(none.kind === 'error' && none.error.message).toBe('tool "searxng_search": SearXNG is not configured: set searxng_url to the URL of a SearXNG instance');
    const bad = await callTool(searxng({}), { query: 'oslo', searxng_url: 'file:///etc/passwd' }, allowed(), registry());
    expect(bad.kind === 'error' && bad.error.message).toBe('tool "searxng_search": the argument "searxng_url" must be an http(s) URL');
    expect(searx.requests).toHaveLength(2);
  });

  it('params are checked at load as RAGFlow checks them (top_n also as text)', () => {
    expect(kind.params.safeParse({ top_n: 0 }).success).toBe(false);
    expect(kind.params.safeParse({ top_n: 'many' }).success).toBe(false);
    expect(kind.params.safeParse({ searxng_url: 'ftp://searx.example.org' }).success).toBe(false);
    expect(kind.params.parse({ top_n: ' 5 ', searxng_url: ' https://searx.example.org/ ' })).toMatchObject({ top_n: 5, searxng_url: 'https://searx.example.org' });
    expect(kind.params.parse({})).toMatchObject({ top_n: 10, searxng_url: '' });
    const error = thrown(() => compileWorkflow(agentDsl([{ component_name: 'SearXNG', name: 'web', params: { searxng_url: 'searx dot example' } }]), builtinComponents));
    expect(error).toBeInstanceOf(DslValidationError);
    expect((error as DslValidationError).problems).toEqual([expect.objectContaining({ field: 'obj.params.tools.0.params.searxng_url', message: expect.stringContaining('must be the http(s) URL of a SearXNG instance') })]);
    expect(builtinTools.kind('SearXNG')?.credentials).toBeUndefined();
  });
});

describe('SearXNG failures', () => {
  it('an instance that does not serve JSON (403) is told to the model, with what to change', async () => {
    searx.jsonEnabled = false;
    const outcome = await callTool(searxng(), { query: 'bridge' }, allowed(), registry());
    expect(outcome.kind === 'error' && outcome.error.message).toBe('tool "searxng_search": the service answered 403: the instance does not serve format=json (add json to search.formats in its settings.yml)');
    expect(searx.requests).toHaveLength(1);
  });

  it('a 429 from the instance’s limiter is retried after the backoff (timer fired by the test), then succeeds', async () => {
    searx.enqueue({ kind: 'status', status: 429, body: 'Too Many Requests', headers: { 'content-type': 'text/plain' } });
    const { timer, armed } = manualTimer();
    const pending = callTool(searxng(), { query: 'bridge' }, allowed(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 500).length).toBe(1);
    expect(searx.requests).toHaveLength(1);
    armed.find((t) => t.ms === 500)!.fire();
    expect((await pending).kind).toBe('result');
    expect(searx.requests).toHaveLength(2);
  });

  it('an answer that is not SearXNG’s JSON is told to the model', async () => {
    searx.enqueue({ kind: 'status', status: 200, body: '<html>a login page</html>' }, { kind: 'status', status: 200, body: '{"results": {}}' });
    const html = await callTool(searxng(), { query: 'bridge' }, allowed(), registry());
    expect(html.kind === 'error' && html.error.message).toBe('tool "searxng_search": SearXNG answered 200 with a body that is not JSON');
    const shape = await callTool(searxng(), { query: 'bridge' }, allowed(), registry());
    expect(shape.kind === 'error' && shape.error.message).toMatch(/SearXNG answered with an unexpected body/);
  });

  it('a search with no answer times out at 12 s, as transient (timer fired by the test)', async () => {
    searx.enqueue({ kind: 'stall' });
    const { timer, armed, fireAll } = manualTimer();
    const pending = callTool(searxng(), { query: 'bridge' }, allowed(), createToolRegistry([], { timer }));
    await expect.poll(() => searx.requests.length).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([12_000]);
    fireAll();
    await expect(pending).rejects.toThrow(ToolTimeoutError);
  });
});

describe('an Agent with a SearXNG tool', () => {
  const entry = () => ({ component_name: 'SearXNG', name: 'SearXNG', params: { searxng_url: searx.url, top_n: 5 } });

  it('searches the tenant’s instance, reads the results and cites one', async () => {
    let ids: string[] = [];
    model.enqueue({ kind: 'tools', calls: [{ name: 'searxng_search_0', arguments: { query: 'harbour bridge opened' } }] });
    model.respond = (body) => {
      ids = blockIds(body);
      return { kind: 'text', text: `It opened in 1932 [ID:${ids[0]}].` };
    };
    const events = await turn(agentRun([entry()], [kind], { modelUrl: model.url, allow: ['127.0.0.1'] }), { query: 'When did the harbour bridge open?' });
    expect(model.requests.at(-2)?.body.tools?.[0]?.function).toMatchObject({ name: 'searxng_search_0', parameters: { required: ['query'] } });
    expect(searx.requests.map((r) => r.query.q)).toEqual(['harbour bridge opened']);
    expect(messages(events)).toEqual([`It opened in 1932 [ID:${ids[0]}].`]);
    expect(referenceOf(events)?.chunks[ids[0] as string]).toMatchObject({ document_name: 'Harbour Bridge history', url: PAGES[0]?.url });
  });

  it('on a run whose guard refuses the instance, the model is told why and answers', async () => {
    model.enqueue({ kind: 'tools', calls: [{ name: 'searxng_search_0', arguments: { query: 'bridge' } }] }, { kind: 'text', text: 'The search engine is out of reach.' });
    const events = await turn(agentRun([entry()], [kind], { modelUrl: model.url }), { query: 'bridge?' });
    expect(messages(events)).toEqual(['The search engine is out of reach.']);
    expect(model.requests.at(-1)?.body.messages.at(-1)?.content).toBe('error: tool "searxng_search": SearXNG cannot be reached: outbound request refused: 127.0.0.1 is a loopback address');
    expect(searx.requests).toHaveLength(0);
  });
});
