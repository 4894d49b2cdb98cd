/**
 * GitHub repository search against a local server speaking GitHub's REST search API: what is
 * sent, the optional token, GitHub's rate limits (403 with `x-ratelimit-remaining: 0`, waited for
 * until `x-ratelimit-reset` on an injected clock when that is soon enough), and an Agent calling
 * the search through a local OpenAI-compatible model server.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { compileWorkflow, DslValidationError, TransientError } from '../../lib/canvas';
import { builtinComponents } from '../../lib/components';
import { formatChunks } from '../../lib/knowledge/format';
import { builtinTools, callTool, createToolRegistry, GITHUB_API_VERSION, GITHUB_TOKEN_SECRET, type GitHubParams, githubTool, type Tool, ToolTimeoutError, ToolTransientError } from '../../lib/tools';
import { messages, turn } from '../helpers/canvas';
import { GITHUB_TEST_TOKEN, GitHubServer, type Repository } from '../helpers/github-server';
import { OpenAiServer } from '../llm/openai-server';
import { manualTimer } from './support';
import { agentDsl, agentRun, blockIds, referenceOf, secretsOf, thrown, toolContext } from './web-search-support';

const REPOSITORIES: Repository[] = [
  { owner: 'acme', name: 'vector-store', description: 'A small vector store for embeddings.', stars: 420, language: 'Rust', topics: ['embeddings'] },
  { owner: 'lab', name: 'tiny-vector', description: 'Vector search in one file.', stars: 9_000, language: 'Python' },
  { owner: 'misc', name: 'vector-notes', description: null, stars: 3 },
  { owner: 'acme', name: 'weather-cli', description: 'Weather in your terminal.', stars: 77 },
];

/** The tool's clock: GitHub's `x-ratelimit-reset` is read against it. */
const NOW = Date.UTC(2026, 0, 1);

let github: GitHubServer;
let model: OpenAiServer;
beforeAll(async () => {
  [github, model] = await Promise.all([GitHubServer.start({ repositories: REPOSITORIES }), OpenAiServer.start()]);
});
afterAll(async () => {
  await Promise.all([github.close(), model.close()]);
});
beforeEach(() => {
  github.requests.length = 0;
  github.limit = 10;
  github.resetWindow(NOW / 1000 + 60);
});

const kind = githubTool();
const kindHere = () => githubTool({ baseUrl: github.url, now: () => NOW });

function githubSearch(params: Record<string, unknown> = {}): Tool {
  const k = kindHere();
  return k.create({ component_name: 'GitHub', name: 'GitHub', params: k.params.parse(params) as GitHubParams });
}

const anonymous = () => toolContext(secretsOf({}));
const withToken = () => toolContext(secretsOf({ [GITHUB_TOKEN_SECRET]: GITHUB_TEST_TOKEN }));
const registry = () => createToolRegistry([]);

describe('GitHub', () => {
  it('searches repositories by stars with GitHub’s headers, without a token when the tenant has none', async () => {
    const tool = githubSearch();
    expect(tool.name).toBe('github_search');
    expect(tool.description).toMatch(/^GitHub repository search is a feature/);
    expect(tool.parameters).toEqual({ type: 'object', properties: { query: expect.objectContaining({ type: 'string' }) }, required: ['query'] });
    const outcome = await callTool(tool, { query: 'vector search' }, anonymous(), registry());
    expect(outcome.kind).toBe('result');
    const [request] = github.requests;
    expect(request).toMatchObject({ method: 'GET', path: '/search/repositories' });
    expect(request?.query).toEqual({ q: 'vector search', sort: 'stars', order: 'desc', per_page: '10' });
    expect(request?.headers).toMatchObject({ accept: 'application/vnd.github+json', 'x-github-api-version': GITHUB_API_VERSION, 'user-agent': 'Easel' });
    expect(request?.headers.authorization).toBeUndefined();
  });

  it('sends the tenant’s GITHUB_TOKEN, or the secret api_key names', async () => {
    await callTool(githubSearch({ top_n: 2 }), { query: 'vector' }, withToken(), registry());
    expect(github.requests[0]?.headers.authorization).toBe(`Bearer ${GITHUB_TEST_TOKEN}`);
    expect(github.requests[0]?.query.per_page).toBe('2');
    await callTool(githubSearch({ api_key: '{secret.TEAM_GITHUB}' }), { query: 'vector' }, toolContext(secretsOf({ TEAM_GITHUB: GITHUB_TEST_TOKEN })), registry());
    expect(github.requests[1]?.headers.authorization).toBe(`Bearer ${GITHUB_TEST_TOKEN}`);
    const missing = await callTool(githubSearch({ api_key: '{secret.TEAM_GITHUB}' }), { query: 'vector' }, withToken(), registry());
    expect(missing.kind === 'error' && missing.error.message).toBe('tool "github_search": GitHub is not configured: the secret TEAM_GITHUB named by api_key is not set for this tenant');
    expect(github.requests).toHaveLength(2);
    expect(builtinTools.kind('GitHub')?.credentials).toEqual([{ param: 'api_key', secret: 'GITHUB_TOKEN' }]);
  });

  it('hands the model the repositories (name, url, description and stars) as knowledge blocks and references, and GitHub’s items as data', async () => {
    const outcome = await callTool(githubSearch(), { query: 'vector' }, anonymous(), registry());
    if (outcome.kind !== 'result') throw new Error(`expected a result, got ${outcome.kind}`);
    const chunks = outcome.references?.chunks ?? [];
    expect(chunks.map((c) => c.url)).toEqual(['https://github.com/lab/tiny-vector', 'https://github.com/acme/vector-store', 'https://github.com/misc/vector-notes']);
    expect(chunks[0]).toMatchObject({ document_name: 'tiny-vector', content: 'Vector search in one file.\n stars:9000' });
    expect(chunks[2]?.content).toBe('\n stars:3');
    expect(outcome.content).toBe(formatChunks(chunks));
    expect(outcome.data).toEqual([
      expect.objectContaining({ full_name: 'lab/tiny-vector', stargazers_count: 9_000, language: 'Python' }),
      expect.objectContaining({ full_name: 'acme/vector-store', topics: ['embeddings'] }),
      expect.objectContaining({ full_name: 'misc/vector-notes', description: null }),
    ]);
  });

  it('tells the model when nothing is found, and refuses a call without a query', async () => {
    const none = await callTool(githubSearch(), { query: 'zeppelin' }, anonymous(), registry());
    expect(none).toEqual({ kind: 'result', content: 'GitHub found no repositories for this query.', data: [] });
    const empty = await callTool(githubSearch(), { query: '' }, anonymous(), registry());
    expect(empty.kind === 'error' && empty.error.message).toBe('tool "github_search": invalid arguments: query: must be a non-empty string');
    expect(github.requests).toHaveLength(1);
  });

  it('params and tokens are checked at load', () => {
    expect(kind.params.safeParse({ top_n: 0 }).success).toBe(false);
    expect(kind.params.safeParse({ top_n: 101 }).success).toBe(false);
    expect(kind.params.parse({ top_n: '25' })).toMatchObject({ top_n: 25, api_key: '' });
    const error = thrown(() => compileWorkflow(agentDsl([{ component_name: 'GitHub', name: 'GitHub', params: { api_key: 'ghp_literalSECRETvalue' } }]), builtinComponents));
    expect(error).toBeInstanceOf(DslValidationError);
    expect((error as DslValidationError).problems).toEqual([expect.objectContaining({ field: 'obj.params.tools.0.params.api_key', message: expect.stringContaining('the secret GITHUB_TOKEN is used') })]);
    expect(JSON.stringify((error as DslValidationError).problems)).not.toContain('ghp_literalSECRETvalue');
  });
});

describe('GitHub failures', () => {
  it('a rate limit (403, x-ratelimit-remaining: 0) is waited for until x-ratelimit-reset on the tool’s clock, then succeeds', async () => {
    github.limit = 1;
    github.resetWindow(NOW / 1000 + 3);
    await callTool(githubSearch(), { query: 'vector' }, anonymous(), registry());
    const { timer, armed } = manualTimer();
    const pending = callTool(githubSearch(), { query: 'vector' }, anonymous(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 3_000).length).toBe(1);
    expect(github.requests).toHaveLength(2);
    github.resetWindow();
    armed.find((t) => t.ms === 3_000)!.fire();
    const outcome = await pending;
    expect(outcome.kind).toBe('result');
    expect(github.requests).toHaveLength(3);
  });

  it('a rate limit that resets later than the longest wait fails the turn as transient at once, saying how to raise it', async () => {
    github.limit = 0;
    const { timer, armed } = manualTimer();
    const error = await callTool(githubSearch(), { query: 'vector' }, anonymous(), createToolRegistry([], { timer })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ToolTransientError);
    expect((error as Error).message).toBe('tool "github_search": the service answered 403: rate limit exceeded (set the tenant secret GITHUB_TOKEN for a higher limit)');
    expect(github.requests).toHaveLength(1);
    expect(armed.map((t) => t.ms)).toEqual([12_000]);
    github.authenticatedLimit = 0;
    const authenticated = await callTool(githubSearch(), { query: 'vector' }, withToken(), registry()).catch((e: unknown) => e);
    github.authenticatedLimit = 30;
    expect((authenticated as Error).message).toBe('tool "github_search": the service answered 403: rate limit exceeded');
  });

  it('a secondary rate limit waits the retry-after GitHub asks for', async () => {
    github.enqueue({ kind: 'status', status: 403, body: '{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}', headers: { 'retry-after': '2' } });
    const { timer, armed } = manualTimer();
    const pending = callTool(githubSearch(), { query: 'vector' }, withToken(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 2_000).length).toBe(1);
    armed.find((t) => t.ms === 2_000)!.fire();
    expect((await pending).kind).toBe('result');
    expect(github.requests).toHaveLength(2);
  });

  it('a 429 then a success: retried after the backoff (timer fired by the test)', async () => {
    github.enqueue({ kind: 'status', status: 429, body: '{"message": "Too many requests"}' });
    const { timer, armed } = manualTimer();
    const pending = callTool(githubSearch(), { query: 'vector' }, anonymous(), createToolRegistry([], { timer }));
    await expect.poll(() => armed.filter((t) => t.ms === 500).length).toBe(1);
    armed.find((t) => t.ms === 500)!.fire();
    expect((await pending).kind).toBe('result');
    expect(github.requests).toHaveLength(2);
  });

  it('a rejected token (401) and a query GitHub cannot run (422) are told to the model, not retried', async () => {
    const bad = await callTool(githubSearch(), { query: 'vector' }, toolContext(secretsOf({ [GITHUB_TOKEN_SECRET]: 'ghp_revokedTOKEN' })), registry());
    expect(bad.kind === 'error' && bad.error.message).toBe('tool "github_search": the service answered 401: Bad credentials');
    github.enqueue({
      kind: 'status',
      status: 422,
      body: JSON.stringify({ message: 'Validation Failed', errors: [{ message: 'The listed users and repositories cannot be searched either because the resources do not exist or you do not have permission to view them.', resource: 'Search', field: 'q', code: 'invalid' }] }),
    });
    const invalid = await callTool(githubSearch(), { query: 'repo:nobody/nothing' }, anonymous(), registry());
    expect(invalid.kind === 'error' && invalid.error.message).toBe(
      'tool "github_search": the service answered 422: The listed users and repositories cannot be searched either because the resources do not exist or you do not have permission to view them.',
    );
    expect(github.requests).toHaveLength(2);
    expect(JSON.stringify(bad)).not.toContain('ghp_revokedTOKEN');
  });

  it('a search with no answer times out at 12 s, as transient (timer fired by the test)', async () => {
    github.enqueue({ kind: 'stall' });
    const { timer, armed, fireAll } = manualTimer();
    const pending = callTool(githubSearch(), { query: 'vector' }, anonymous(), createToolRegistry([], { timer }));
    await expect.poll(() => github.requests.length).toBe(1);
    expect(armed.map((t) => t.ms)).toEqual([12_000]);
    fireAll();
    await expect(pending).rejects.toThrow(ToolTimeoutError);
  });
});

describe('an Agent with a GitHub tool', () => {
  const ENTRY = { component_name: 'GitHub', name: 'GitHub', params: { top_n: 3 } };
  const run = (secrets: Record<string, string> = {}) => agentRun([ENTRY], [kindHere()], { modelUrl: model.url, secrets });

  it('searches, reads the repositories and cites one', async () => {
    compileWorkflow(agentDsl([ENTRY]), builtinComponents);
    let ids: string[] = [];
    model.enqueue({ kind: 'tools', calls: [{ name: 'github_search_0', arguments: { query: 'vector search' } }] });
    model.respond = (body) => {
      ids = blockIds(body);
      return { kind: 'text', text: `The most starred is tiny-vector [ID:${ids[0]}].` };
    };
    const events = await turn(run({ GITHUB_TOKEN: GITHUB_TEST_TOKEN }), { query: 'Which vector search libraries are popular?' });
    expect(github.requests.map((r) => [r.query.q, r.query.per_page, r.headers.authorization])).toEqual([['vector search', '3', `Bearer ${GITHUB_TEST_TOKEN}`]]);
    expect(messages(events)).toEqual([`The most starred is tiny-vector [ID:${ids[0]}].`]);
    expect(referenceOf(events)?.chunks[ids[0] as string]).toMatchObject({ document_name: 'tiny-vector', url: 'https://github.com/lab/tiny-vector' });
  });

  it('a rate limit that outlasts the wait fails the turn as unavailable', async () => {
    github.limit = 0;
    model.enqueue({ kind: 'tools', calls: [{ name: 'github_search_0', arguments: { query: 'vector' } }] });
    const error = await turn(run(), { query: 'vector?' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('rate limit exceeded') });
  });
});
