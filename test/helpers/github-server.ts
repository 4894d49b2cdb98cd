/**
 * A local stand-in for GitHub's REST search API
 * (https://docs.github.com/rest/search/search#search-repositories):
 *
 * - `GET /search/repositories?q=...&sort=stars&order=desc&per_page=N` answers
 *   `{total_count, incomplete_results, items: [repository]}`: the repositories whose name,
 *   description or topics share a word with `q`, the most starred first, at most `per_page`;
 * - a request without `User-Agent` is HTTP 403 (GitHub's administrative rules); an
 *   `Authorization: Bearer <token>` other than `token` is HTTP 401 `{"message": "Bad credentials"}`;
 *   an empty `q` is HTTP 422 `{"message": "Validation Failed", "errors": [...]}`;
 * - the search's primary rate limit, as GitHub counts it: `limit` requests a window without a
 *   token, `authenticatedLimit` with one (10 and 30 by default), each answer carrying
 *   `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (epoch seconds, `resetAt`); past it,
 *   HTTP 403 `{"message": "API rate limit exceeded for ..."}` with `x-ratelimit-remaining: 0`.
 *   `resetWindow()` starts a new window.
 *
 * Scriptable per request (status+headers, stall); every request is recorded.
 */
import { json, type RecordedRequest, ScriptedServer, ServiceStandIn, wordsOf } from './scripted-server';

export interface Repository {
  name: string;
  owner: string;
  description: string | null;
  stars: number;
  language?: string;
  topics?: string[];
}

export const GITHUB_TEST_TOKEN = 'ghp_testTOKEN0123456789abcdef';

const DOCS = 'https://docs.github.com/rest';

export class GitHubServer extends ServiceStandIn {
  /** When the current window ends, in epoch seconds. */
  resetAt = 1_767_225_660;
  #used = { anonymous: 0, authenticated: 0 };

  private constructor(
    server: ScriptedServer,
    public repositories: Repository[],
    public token: string,
    public limit: number,
    public authenticatedLimit: number,
  ) {
    super(server);
  }

  static async start(options: { repositories?: Repository[]; token?: string; limit?: number; authenticatedLimit?: number } = {}): Promise<GitHubServer> {
    let self: GitHubServer | undefined;
    const http = await ScriptedServer.start((request) => (self as GitHubServer).answer(request));
    self = new GitHubServer(http, options.repositories ?? [], options.token ?? GITHUB_TEST_TOKEN, options.limit ?? 10, options.authenticatedLimit ?? 30);
    return self;
  }

  resetWindow(resetAt = this.resetAt + 60): void {
    this.#used = { anonymous: 0, authenticated: 0 };
    this.resetAt = resetAt;
  }

  private answer(request: RecordedRequest) {
    if (!request.headers['user-agent']) {
      return { status: 403, body: 'Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). Check https://developer.github.com for other possible causes.', headers: { 'content-type': 'text/plain' } };
    }
    const auth = request.headers.authorization;
    if (auth !== undefined && auth !== `Bearer ${this.token}`) return json(401, { message: 'Bad credentials', documentation_url: DOCS, status: '401' });
    if (request.method !== 'GET' || request.path !== '/search/repositories') return json(404, { message: 'Not Found', documentation_url: DOCS, status: '404' });

    const who = auth ? 'authenticated' : 'anonymous';
    const limit = auth ? this.authenticatedLimit : this.limit;
    const used = Math.min(this.#used[who] + 1, limit + 1);
    this.#used[who] = used;
    const rate = {
      'x-ratelimit-limit': String(limit),
      'x-ratelimit-remaining': String(Math.max(0, limit - used)),
      'x-ratelimit-used': String(Math.min(used, limit)),
      'x-ratelimit-reset': String(this.resetAt),
      'x-ratelimit-resource': 'search',
    };
    if (used > limit) {
      return json(403, {
        message: "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)",
        documentation_url: 'https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting',
      }, rate);
    }

    const q = request.query.q ?? '';
    if (!q.trim()) {
      return json(422, { message: 'Validation Failed', errors: [{ resource: 'Search', field: 'q', code: 'missing' }], documentation_url: `${DOCS}/search/search#search-repositories`, status: '422' }, rate);
    }
    const words = new Set(wordsOf(q));
    const perPage = Math.min(Number(request.query.per_page ?? 30), 100);
    const found = this.repositories
      .filter((r) => wordsOf(`${r.name} ${r.description ?? ''} ${(r.topics ?? []).join(' ')}`).some((w) => words.has(w)))
      .sort((a, b) => (request.query.sort === 'stars' && request.query.order !== 'asc' ? b.stars - a.stars : 0));
    return json(200, { total_count: found.length, incomplete_results: false, items: found.slice(0, perPage).map((r, i) => repositoryItem(r, i)) }, rate);
  }
}

/** A repository as the search answers it (a subset of GitHub's fields, in its shapes). */
function repositoryItem(r: Repository, index: number) {
  const fullName = `${r.owner}/${r.name}`;
  return {
    id: 1000 + index,
    node_id: `R_kgDO${1000 + index}`,
    name: r.name,
    full_name: fullName,
    private: false,
    owner: { login: r.owner, id: 500 + index, type: 'Organization', html_url: `https://github.com/${r.owner}` },
    html_url: `https://github.com/${fullName}`,
    description: r.description,
    fork: false,
    url: `https://api.github.com/repos/${fullName}`,
    created_at: '2019-03-01T10:00:00Z',
    updated_at: '2026-01-01T10:00:00Z',
    pushed_at: '2026-01-01T09:00:00Z',
    homepage: null,
    size: 4096,
    stargazers_count: r.stars,
    watchers_count: r.stars,
    language: r.language ?? null,
    forks_count: Math.floor(r.stars / 10),
    open_issues_count: 12,
    default_branch: 'main',
    score: 1,
    topics: r.topics ?? [],
    license: { key: 'mit', name: 'MIT License', spdx_id: 'MIT' },
    visibility: 'public',
    forks: Math.floor(r.stars / 10),
    open_issues: 12,
    watchers: r.stars,
  };
}
