/**
 * The Crawler against a local web site: the page in each of RAGFlow's extract types, the SSRF
 * guard refusing every class of internal address (also behind a redirect from an allowed site),
 * the size and type bounds, failures classified, and an Agent reading a page through a local
 * OpenAI-compatible model server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { compileWorkflow, DslValidationError } from '../../lib/canvas';
import { builtinComponents, withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { type Resolver, SsrfGuard } from '../../lib/outbound/ssrf';
import {
  builtinTools,
  CRAWLER_MAX_CONTENT_CHARS,
  CRAWLER_MAX_PAGE_BYTES,
  type CrawlerParams,
  callTool,
  crawlerTool,
  createToolRegistry,
  type Tool,
  type ToolContext,
  ToolError,
  type ToolRegistry,
  ToolTimeoutError,
  ToolTransientError,
} from '../../lib/tools';
import { canvasFor, messages, turn } from '../helpers/canvas';
import { CrawlerSite } from '../helpers/crawler-server';
import { graph } from '../helpers/dsl-builder';
import { testServices } from '../helpers/services';
import { OpenAiServer } from '../llm/openai-server';
import { manualTimer, skippingTimer } from './support';

const GUIDE = `<!doctype html><html><head><title>Ferry guide</title><style>p{color:red}</style><script>track()</script></head><body>
<nav><a href="/">Home</a></nav>
<h1>Ferry   timetable</h1>
<p class="lead" onclick="x()">Boats leave <b>hourly</b>; see <a href="/fares?zone=1&amp;day=2">the fares</a>.</p>
<ul><li>Harbour</li><li>Island</li></ul>
<p hidden>internal note</p>
</body></html>`;

let site: CrawlerSite;
let model: OpenAiServer;
beforeAll(async () => {
  [site, model] = await Promise.all([
    CrawlerSite.start({
      '/guide': { body: GUIDE },
      '/notes.txt': { type: 'text/plain; charset=utf-8', body: '  Plain notes, kept as they are.\n' },
      '/untyped': { type: null, body: '<p>No content type</p>' },
      '/report.pdf': { type: 'application/pdf', body: Buffer.from('%PDF-1.7\n\u0000\u0001binary') },
      '/empty': { body: '<html><body><script>render()</script></body></html>' },
      '/long': { type: 'text/plain', body: 'x'.repeat(CRAWLER_MAX_CONTENT_CHARS + 10) },
      '/huge': { type: 'text/plain', body: 'y'.repeat(CRAWLER_MAX_PAGE_BYTES + 1) },
      '/moved': { status: 302, headers: { location: '/guide' } },
    }),
    OpenAiServer.start(),
  ]);
});
afterAll(async () => {
  await Promise.all([site.close(), model.close()]);
});
beforeEach(() => {
  site.requests.length = 0;
});

const kind = crawlerTool();

function crawler(params: Record<string, unknown> = {}): Tool {
  return kind.create({ component_name: 'Crawler', name: 'Crawler', params: kind.params.parse(params) as CrawlerParams });
}

/** `site.test` is the local site, let through by name; every other name resolves to what `names` says. */
function siteGuard(names: Record<string, string> = {}): SsrfGuard {
  const resolve: Resolver = async (host) => {
    const address = host === 'site.test' ? '127.0.0.1' : names[host];
    if (!address) throw new Error(`ENOTFOUND ${host}`);
    return [{ address, family: address.includes(':') ? 6 : 4 }];
  };
  return new SsrfGuard({ allow: ['site.test'], resolve });
}

function context(guard: SsrfGuard | null = siteGuard()): ToolContext {
  return {
    signal: new AbortController().signal,
    services: guard ? { guard } : {},
    componentId: 'Agent:Reader',
    ordinal: 0,
    path: [],
    recordUsage: () => undefined,
  };
}

const registry = (): ToolRegistry => createToolRegistry([]);
const page = (path: string) => `http://site.test:${site.port}${path}`;

async function read(tool: Tool, args: Record<string, unknown>, ctx = context(), reg = registry()): Promise<string> {
  const outcome = await callTool(tool, args, ctx, reg);
  if (outcome.kind !== 'result') throw new Error(`expected a result, got ${outcome.kind === 'error' ? outcome.error.message : outcome.kind}`);
  return outcome.content;
}

async function refusal(tool: Tool, args: Record<string, unknown>, ctx = context()): Promise<string> {
  const outcome = await callTool(tool, args, ctx, registry());
  if (outcome.kind !== 'error') throw new Error(`expected an error, got ${outcome.kind}`);
  expect(outcome.error).toBeInstanceOf(ToolError);
  return outcome.error.message;
}

describe('Crawler', () => {
  it('describes itself as RAGFlow’s web_crawler and GETs the page, asking for HTML', async () => {
    const tool = crawler();
    expect(tool.name).toBe('web_crawler');
    expect(tool.description).toBe('This tool can be used to crawl a web page and return its content as HTML, Markdown, or the extracted main text.');
    expect(tool.parameters).toEqual({
      type: 'object',
      properties: { query: { type: 'string', description: 'The absolute URL (including the http:// or https:// scheme) of the web page to crawl.' } },
      required: ['query'],
    });
    await read(tool, { query: page('/guide') });
    expect(site.requests).toEqual([
      expect.objectContaining({ method: 'GET', path: '/guide', headers: expect.objectContaining({ host: `site.test:${site.port}`, accept: expect.stringMatching(/^text\/html/) }) }),
    ]);
  });

  it('hands back Markdown by default: headings, links made absolute, lists; scripts, navigation and hidden text dropped', async () => {
    expect(await read(crawler(), { query: page('/guide') })).toBe(
      [
        '# Ferry timetable',
        '',
        `Boats leave hourly; see [the fares](http://site.test:${site.port}/fares?zone=1&day=2).`,
        '',
        '- Harbour',
        '- Island',
      ].join('\n'),
    );
  });

  it('hands back cleaned HTML for extract_type html, and the reader’s text for content', async () => {
    expect(await read(crawler({ extract_type: 'html' }), { query: page('/guide') })).toBe(
      [
        '<html><body>',
        '<h1>Ferry   timetable</h1>',
        `<p>Boats leave <b>hourly</b>; see <a href="http://site.test:${site.port}/fares?zone=1&amp;day=2">the fares</a>.</p>`,
        '<ul><li>Harbour</li><li>Island</li></ul>',
        '</body></html>',
      ].join('\n'),
    );
    expect(await read(crawler({ extract_type: 'content' }), { query: page('/guide') })).toBe('Ferry guide\n\nFerry timetable\nBoats leave hourly; see the fares.\n- Harbour\n- Island');
  });

  it('follows a redirect within allowed hosts, reads text as it is and a page without a type as HTML', async () => {
    expect(await read(crawler(), { query: page('/moved') })).toMatch(/^# Ferry timetable/);
    expect(site.requests.map((r) => r.path)).toEqual(['/moved', '/guide']);
    expect(await read(crawler({ extract_type: 'html' }), { query: page('/notes.txt') })).toBe('Plain notes, kept as they are.');
    expect(await read(crawler(), { query: page('/untyped') })).toBe('No content type');
  });

  it('falls back to the entry’s query when it is a URL, not when it is RAGFlow’s {sys.query}', async () => {
    expect(await read(crawler({ query: page('/notes.txt') }), {})).toBe('Plain notes, kept as they are.');
    expect(await refusal(crawler({ query: '{sys.query}' }), {})).toBe('tool "web_crawler": the argument "query" must be the absolute URL of the page to crawl');
    expect(await refusal(crawler(), { query: 'www.example.com/page' })).toBe('tool "web_crawler": "query" must be an absolute URL with its http:// or https:// scheme');
    expect(await refusal(crawler(), { query: 'file:///etc/passwd' })).toBe('tool "web_crawler": "query" must be an http:// or https:// URL');
    expect(site.requests.map((r) => r.path)).toEqual(['/notes.txt']);
  });

  it('refuses what is not HTML or text, and a page larger than it reads; cuts a long text with a note', async () => {
    expect(await refusal(crawler(), { query: page('/report.pdf') })).toBe(
      `tool "web_crawler": the page at http://site.test:${site.port} is application/pdf, not HTML or text; the crawler reads web pages only`,
    );
    expect(await refusal(crawler(), { query: page('/huge') })).toBe(`tool "web_crawler": the page at http://site.test:${site.port} is larger than 4 MiB, the most the crawler reads`);
    const long = await read(crawler(), { query: page('/long') });
    expect(long.startsWith('x'.repeat(CRAWLER_MAX_CONTENT_CHARS))).toBe(true);
    expect(long.slice(CRAWLER_MAX_CONTENT_CHARS)).toBe('\n\n[the page goes on; only its first 100,000 characters are shown]');
    expect(await read(crawler(), { query: page('/empty') })).toBe(`The page at ${page('/empty')} has no readable text.`);
  });

  it('params are checked at load as RAGFlow checks them', () => {
    const bad = kind.params.safeParse({ extract_type: 'pdf' });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.message).toBe(`Type of content from the crawler "pdf" is not supported, it should be in ['html', 'markdown', 'content']`);
    expect(kind.params.safeParse({ proxy: 'http://proxy.example:3128' }).error?.issues[0]?.message).toMatch(/a proxy is not supported/);
    expect(kind.params.parse({ proxy: null, extract_type: null })).toMatchObject({ extract_type: 'markdown' });
    expect(builtinTools.kinds).toContain('Crawler');
    const dsl = agentDsl([{ component_name: 'Crawler', name: 'Crawler', params: { extract_type: 'screenshot' } }]);
    expect(() => compileWorkflow(dsl, builtinComponents)).toThrow(DslValidationError);
  });
});

describe('the Crawler and the SSRF guard', () => {
  // The run's guard allows nothing: every one of these must be refused before a socket exists.
  const refused: [string, string, string][] = [
    ['loopback', 'http://127.0.0.1:PORT/guide', 'outbound request refused: 127.0.0.1 is a loopback address'],
    ['loopback, IPv6', 'http://[::1]:PORT/guide', 'outbound request refused: [::1] is a loopback address'],
    ['IPv4-mapped IPv6 loopback', 'http://[::ffff:127.0.0.1]:PORT/guide', 'outbound request refused: [::ffff:7f00:1] is a loopback address'],
    ['private 10/8', 'http://10.0.0.8/', 'outbound request refused: 10.0.0.8 is a private address'],
    ['private 172.16/12', 'http://172.20.1.1/', 'outbound request refused: 172.20.1.1 is a private address'],
    ['private 192.168/16', 'http://192.168.1.1/admin', 'outbound request refused: 192.168.1.1 is a private address'],
    ['instance metadata (link-local)', 'http://169.254.169.254/latest/meta-data/iam/', 'outbound request refused: 169.254.169.254 is a link-local address'],
    ['link-local IPv6', 'http://[fe80::1]/', 'outbound request refused: [fe80::1] is a link-local address'],
    ['unique-local IPv6 (EC2 metadata)', 'http://[fd00:ec2::254]/latest/', 'outbound request refused: [fd00:ec2::254] is a unique-local address'],
    ['IPv4-mapped IPv6 metadata', 'http://[::ffff:169.254.169.254]/', 'outbound request refused: [::ffff:a9fe:a9fe] is a link-local address'],
    ['unspecified', 'http://0.0.0.0:PORT/', 'outbound request refused: 0.0.0.0 is an unspecified address'],
    ['shared (carrier-grade NAT)', 'http://100.64.0.1/', 'outbound request refused: 100.64.0.1 is a shared address'],
    ['decimal-encoded loopback', 'http://2130706433:PORT/guide', 'outbound request refused: 127.0.0.1 is a loopback address'],
    ['a name resolving to a private address', 'http://intranet.test/', 'outbound request refused: intranet.test resolves to a private address'],
    ['a name resolving to loopback', 'http://localhost.test:PORT/guide', 'outbound request refused: localhost.test resolves to a loopback address'],
  ];

  it.each(refused)('refuses %s, telling the model why and sending nothing', async (_, url, reason) => {
    const guard = new SsrfGuard({ resolve: async (host) => [{ address: host === 'intranet.test' ? '10.1.2.3' : '127.0.0.1', family: 4 }] });
    const message = await refusal(crawler(), { query: url.replace('PORT', String(site.port)) }, context(guard));
    expect(message).toBe(`tool "web_crawler": ${reason}`);
    expect(site.requests).toHaveLength(0);
  });

  it('refuses a redirect from an allowed site into a refused address, before connecting to it', async () => {
    for (const location of [`http://127.0.0.1:${site.port}/guide`, 'http://169.254.169.254/latest/meta-data/', `http://rebound.test:${site.port}/guide`]) {
      site.enqueue({ kind: 'status', status: 302, headers: { location } });
      const message = await refusal(crawler(), { query: page('/start') }, context(siteGuard({ 'rebound.test': '127.0.0.1' })));
      expect(message).toMatch(/^tool "web_crawler": outbound request refused: (127\.0\.0\.1 is a loopback|169\.254\.169\.254 is a link-local|rebound\.test resolves to a loopback) address$/);
    }
    // only the allowed site's /start was ever asked; no hop reached the loopback page
    expect(site.requests.map((r) => r.path)).toEqual(['/start', '/start', '/start']);
  });

  it('a run without a guard fetches nothing', async () => {
    expect(await refusal(crawler(), { query: page('/guide') }, context(null))).toBe('tool "web_crawler": this run has no outbound guard, so it fetches no page');
    expect(site.requests).toHaveLength(0);
  });
});

describe('Crawler failures', () => {
  it('a 429 is retried after the wait the site asks for (timer fired by the test), then succeeds', async () => {
    site.enqueue({ kind: 'status', status: 429, headers: { 'retry-after': '2' } });
    const { timer, armed } = manualTimer();
    const pending = callTool(crawler(), { query: page('/notes.txt') }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 2_000).length).toBe(1);
    expect(site.requests).toHaveLength(1);
    armed.find((t) => t.ms === 2_000)!.fire();
    expect(await pending).toEqual({ kind: 'result', content: 'Plain notes, kept as they are.' });
    expect(site.requests).toHaveLength(2);
  });

  it('a 5xx that goes on fails the turn as transient; a 404 is told to the model', async () => {
    const busy = { kind: 'status', status: 503 } as const;
    site.enqueue(busy, busy, busy);
    const { timer, waits } = skippingTimer();
    await expect(callTool(crawler(), { query: page('/guide') }, context(), createToolRegistry([], { timer }))).rejects.toThrow(ToolTransientError);
    expect(waits).toEqual([500, 1_000]);
    expect(await refusal(crawler(), { query: page('/missing') })).toBe('tool "web_crawler": the service answered 404');
  });

  it('a page that never answers times out at the tool’s timeout, as transient (timer fired by the test)', async () => {
    site.enqueue({ kind: 'stall' });
    const { timer, armed, fireAll } = manualTimer();
    const pending = callTool(crawler(), { query: page('/guide') }, context(), createToolRegistry([], { timer }));
    await expect.poll(() => site.requests.length).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([30_000]);
    fireAll();
    await expect(pending).rejects.toThrow(ToolTimeoutError);
  });
});

function agentDsl(tools: unknown[]) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Agent:Reader']],
    'Agent:Reader': ['Agent', {
      llm_id: 'writer@Local',
      sys_prompt: 'You read web pages.',
      prompts: [{ role: 'user', content: '{sys.query}' }],
      max_rounds: 3,
      tools,
    }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{Agent:Reader@content}'] }],
  });
}

describe('an Agent with a Crawler', () => {
  it('crawls the page the model names and answers from it; a refused address is told to the model', async () => {
    const entry = { component_name: 'Crawler', name: 'Crawler', params: { extract_type: 'markdown', query: '{sys.query}' } };
    compileWorkflow(agentDsl([entry]), builtinComponents);
    const tools = createToolRegistry([crawlerTool()]);
    const resolve: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
    const services = { ...testServices({ openaiUrl: model.url, allow: ['site.test'], resolve }), tools };
    model.enqueue(
      { kind: 'tools', calls: [{ name: 'web_crawler_0', arguments: { query: page('/guide') } }] },
      { kind: 'tools', calls: [{ name: 'web_crawler_0', arguments: { query: 'http://169.254.169.254/latest/meta-data/' } }] },
      { kind: 'text', text: 'Boats leave hourly.' },
    );
    const before = model.requests.length;
    const events = await turn(canvasFor(agentDsl([entry]), { services }, withComponents(createAgent(tools))), { query: 'How often do ferries leave?' });
    expect(messages(events)).toEqual(['Boats leave hourly.']);
    const sent = model.requests.slice(before).map((r) => r.body);
    expect(sent[0]?.tools?.[0]?.function).toMatchObject({ name: 'web_crawler_0', parameters: { required: ['query'] } });
    const toolMessages = sent[2]?.messages.filter((m: { role: string }) => m.role === 'tool').map((m: { content: string }) => m.content);
    expect(toolMessages?.[0]).toMatch(/^# Ferry timetable\n/);
    expect(toolMessages?.[1]).toMatch(/169\.254\.169\.254 is a link-local address/);
    expect(site.requests.map((r) => r.path)).toEqual(['/guide']);
  });
});
