/**
 * RAGFlow's stock templates whose Agents search the web — deep_research, seo_article_writer,
 * market_seo_article_writer and trip_planner — imported unchanged through RAGFlow's API and run
 * to the end against a local server speaking Tavily's API and a local OpenAI-compatible model
 * that calls every tool it is offered once, then answers. The Tavily key is the tenant's
 * secret; the calls, their arguments and their results are in the trace (`return_trace`) and
 * in each Agent's `use_tools`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MasterKeys, StaticKeyRing } from '../../lib/secrets/master-key';
import { TenantSecrets } from '../../lib/secrets/tenant-secrets';
import { createToolRegistry, tavilyTools } from '../../lib/tools';
import { retrievalTool } from '../../lib/tools/retrieval';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { TAVILY_TEST_KEY, TavilyServer } from '../helpers/tavily-server';
import { OpenAiServer, type RecordedRequest } from '../llm/openai-server';

const CORPUS = resolve(process.env.EASEL_RAGFLOW_CORPUS ?? resolve(__dirname, '../../../shared/ragflow'));
const TEMPLATES = ['deep_research', 'seo_article_writer', 'market_seo_article_writer', 'trip_planner'];
const file = (name: string) => resolve(CORPUS, `agent/templates/${name}.json`);

const PAGES = [
  { url: 'https://travel.example.org/kyoto-autumn', title: 'Kyoto in autumn', content: 'Kyoto temples and autumn leaves; trains from Osaka take 15 minutes.', score: 0.9 },
  { url: 'https://seo.example.com/keywords', title: 'Espresso machine keywords', content: 'Espresso machine buyers search for grinder, pressure and price.', score: 0.8 },
];

let api: Served;
let model: OpenAiServer;
let tavily: TavilyServer;

/**
 * A model that calls each tool it is offered once (a search with the question's words, an
 * extraction of the first page, a sub-Agent with the question), then answers with what came back.
 */
function respond(body: RecordedRequest['body']) {
  const called = new Set(body.messages.flatMap((m) => (m.tool_calls ?? []) as { function: { name: string } }[]).map((c) => c.function.name));
  const question = [...body.messages].reverse().find((m) => m.role === 'user')?.content ?? '';
  const pending = (body.tools ?? []).map((t) => t.function.name).filter((name) => !called.has(name));
  if (pending.length > 0) {
    return {
      kind: 'tools' as const,
      calls: pending.map((name) => ({
        name,
        arguments: name.startsWith('tavily_search') ? { query: 'kyoto espresso keywords' } : name.startsWith('tavily_extract') ? { urls: [PAGES[0]!.url] } : { user_prompt: String(question).slice(0, 200) },
      })),
    };
  }
  const results = body.messages.filter((m) => m.role === 'tool').length;
  return { kind: 'text' as const, text: `Answer from ${results} tool results.` };
}

beforeAll(async () => {
  [model, tavily] = await Promise.all([OpenAiServer.start(), TavilyServer.start({ pages: PAGES })]);
  model.respond = respond;
  const engine = testEngine({ openaiUrl: model.url });
  // the runs' Tavily tools talk to the local server, as EASEL_TOOL_TAVILY_BASE_URL makes them
  const tools = createToolRegistry([retrievalTool, ...tavilyTools({ baseUrl: tavily.url })]);
  const secrets = new TenantSecrets({ store: engine.store, master: new MasterKeys(new StaticKeyRing()) });
  engine.servicesFor = (tenant) => ({ ...engine.services, tools, secret: (name: string) => secrets.get(tenant, name) });
  api = await serveApp(engine, { secrets });
  const put = await api.call('PUT', '/workflows/v1/secrets/TAVILY_API_KEY', { body: { value: TAVILY_TEST_KEY } });
  expect(put.status).toBeLessThan(300);
});
afterAll(async () => {
  await Promise.all([api?.close(), model?.close(), tavily?.close()]);
});

type Trace = { component_id: string; trace: { outputs?: { use_tools?: unknown[] } }[] };

describe.skipIf(!TEMPLATES.every((t) => existsSync(file(t))))('stock templates with web tools', () => {
  it.each(TEMPLATES)('%s imports unchanged and runs to the end; its Tavily calls are in the trace and use_tools', async (name) => {
    const template = JSON.parse(readFileSync(file(name), 'utf8')) as { dsl: unknown };
    const created = await api.call('POST', '/api/v1/agents', { body: { title: `${name} ${Math.random()}`, dsl: template.dsl } });
    expect(created.json).toMatchObject({ code: 0 });
    const searchesBefore = tavily.requests.filter((r) => r.path === '/search').length;

    const asked = await api.call('POST', '/api/v1/agents/chat/completions', {
      body: { agent_id: created.json.data.id, query: 'Plan three days in Kyoto and write about espresso machines', stream: false, return_trace: true },
    });
    expect(asked.json.code).toBe(0);
    const data = asked.json.data.data as { content: string; trace: Trace[] };
    expect(data.content).toMatch(/Answer from \d+ tool results\./);

    const searches = tavily.requests.slice(0).filter((r) => r.path === '/search').slice(searchesBefore);
    expect(searches.length).toBeGreaterThan(0);
    expect(searches.every((r) => r.headers.authorization === `Bearer ${TAVILY_TEST_KEY}`)).toBe(true);
    expect(searches[0]?.body).toMatchObject({ query: 'kyoto espresso keywords', search_depth: 'basic' });

    // every call, a sub-Agent's own calls under its call (as RAGFlow's trace shows them under its path)
    type Call = { name: string; arguments: any; result: string; calls?: Call[] };
    const flat = (calls: Call[]): Call[] => calls.flatMap((c) => [c, ...flat(c.calls ?? [])]);
    const calls = flat(data.trace.flatMap((t) => t.trace.flatMap((e) => (e.outputs?.use_tools ?? []) as Call[])));
    const search = calls.find((c) => c.name.startsWith('tavily_search'));
    expect(search?.arguments).toEqual({ query: 'kyoto espresso keywords' });
    expect(search?.result).toContain('Kyoto temples and autumn leaves');
    expect(asked.text).not.toContain(TAVILY_TEST_KEY);
  });
});
