/**
 * GitHub repository search as an Agent's tool, as RAGFlow offers it (agent/tools/github.py):
 * the kind `GitHub` is the function `github_search`; the model writes `query`, the entry's
 * `top_n` (10) says how many repositories, the most starred first.
 *
 * Calls go to GitHub's REST API, `GET {base}/search/repositories?q=...&sort=stars&order=desc
 * &per_page=<top_n>` with `Accept: application/vnd.github+json`, `X-GitHub-Api-Version` and a
 * `User-Agent` (https://docs.github.com/rest/search/search#search-repositories), the base being
 * the operator's (EASEL_TOOL_GITHUB_BASE_URL).
 *
 * A token is optional: the search works without one at GitHub's lower limit (10 searches a
 * minute, 30 with a token). `api_key: "{secret.NAME}"` names one; empty, the tenant secret
 * `GITHUB_TOKEN` is sent when it is set. A rate limit (403 or 429 with `x-ratelimit-remaining: 0`,
 * a `retry-after`, or a secondary limit) is transient: retried when GitHub's reset comes within
 * the retry policy's longest wait, else the turn fails as `unavailable`.
 *
 * Results become knowledge blocks the model cites and the pass's references (name, html_url,
 * description and stars, as RAGFlow reads them); `data` is GitHub's `items`, RAGFlow's `json`.
 *
 * @example
 *   const tools = createToolRegistry([githubTool({ baseUrl: 'https://api.github.com' })]);
 */
import { z } from 'zod';
import { retryAfterMs } from '../llm/errors';
import type { OutboundResponse } from '../outbound/request';
import { credentialParam, functionShape, integerParam, parseServiceAnswer, parseToolArgs, resolveCredential, withDefault } from './params';
import type { ToolEntry, ToolKind } from './registry';
import type { Tool, ToolResult } from './types';
import { webSearchResult } from './web-results';
import { requestService, type ServiceEndpoint, serviceEndpoint, serviceJson, type ServiceVerdict } from './web-service';

export const GITHUB_BASE_URL = 'https://api.github.com';
/** The tenant secret whose token is sent, when set and an entry's `api_key` is empty. */
export const GITHUB_TOKEN_SECRET = 'GITHUB_TOKEN';
export const GITHUB_FUNCTION = 'github_search';
/** RAGFlow's limit on a search (COMPONENT_EXEC_TIMEOUT, 12 s). */
export const GITHUB_TIMEOUT_MS = 12_000;
/** The REST API version the answers' shapes are read in. */
export const GITHUB_API_VERSION = '2022-11-28';
/** What the model reads when a search finds nothing. */
export const GITHUB_NOTHING_FOUND = 'GitHub found no repositories for this query.';
/** GitHub's largest page. */
const MAX_PER_PAGE = 100;
/** GitHub asks clients hit by a secondary rate limit without a `retry-after` to wait a minute at least. */
const SECONDARY_LIMIT_WAIT_MS = 60_000;

export const GITHUB_DESCRIPTION =
  'GitHub repository search is a feature that enables users to find specific repositories on the GitHub platform. This search functionality allows users to locate projects, codebases, and other content hosted on GitHub based on various criteria.';

const PARAMETERS = {
  type: 'object',
  properties: {
    query: {
      type: 'string',
      description: 'The search keywords to execute with GitHub. The keywords should be the most important words/terms(includes synonyms) from the original request.',
    },
  },
  required: ['query'],
};

const githubParams = z.lazy(() => z.looseObject({
  api_key: credentialParam('api_key', GITHUB_TOKEN_SECRET),
  top_n: withDefault(integerParam(1, `Top N should be within [1, ${MAX_PER_PAGE}]`).pipe(z.number().max(MAX_PER_PAGE, `Top N should be within [1, ${MAX_PER_PAGE}]`)), 10),
  ...functionShape(),
}));
export type GitHubParams = z.output<typeof githubParams>;

/** What the model may write; anything else is ignored. */
const githubArgs = z.lazy(() => z.object({ query: z.string().trim().min(1, 'must be a non-empty string') }));

const githubAnswer = z.lazy(() => z.looseObject({
  items: z.array(
    z.looseObject({
      name: z.string().nullish(),
      full_name: z.string().nullish(),
      html_url: z.string().nullish(),
      description: z.string().nullish(),
      watchers: z.number().nullish(),
      stargazers_count: z.number().nullish(),
    }),
  ),
}));

export interface GitHubOptions {
  /** The operator's GitHub API endpoint (GitHub Enterprise's `https://HOST/api/v3`, a proxy). @default GITHUB_BASE_URL */
  baseUrl?: string;
  /** The clock that `x-ratelimit-reset` is read against; injectable for tests. @default Date.now */
  now?: () => number;
}

/** The kind `GitHub`, talking to `baseUrl`. */
export function githubTool(options: GitHubOptions = {}): ToolKind<GitHubParams> {
  const endpoint = serviceEndpoint(options.baseUrl ?? GITHUB_BASE_URL);
  const now = options.now ?? Date.now;
  return {
    name: 'GitHub',
    params: githubParams,
    credentials: [{ param: 'api_key', secret: GITHUB_TOKEN_SECRET }],
    create: (entry) => searchTool(entry, endpoint, now),
  };
}

function searchTool(entry: ToolEntry<GitHubParams>, endpoint: ServiceEndpoint, now: () => number): Tool {
  const p = entry.params;
  const name = p.function_name || GITHUB_FUNCTION;
  return {
    name,
    description: p.description || GITHUB_DESCRIPTION,
    parameters: PARAMETERS,
    timeoutMs: GITHUB_TIMEOUT_MS,
    async invoke(args, ctx): Promise<ToolResult> {
      const a = parseToolArgs(name, githubArgs, args);
      const token = await resolveCredential(name, 'GitHub', { name: 'api_key', value: p.api_key, defaultSecret: GITHUB_TOKEN_SECRET }, ctx, { optional: true });
      const query = new URLSearchParams({ q: a.query, sort: 'stars', order: 'desc', per_page: String(p.top_n) });
      const headers: Record<string, string> = {
        accept: 'application/vnd.github+json',
        'x-github-api-version': GITHUB_API_VERSION,
        'user-agent': 'Easel',
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      };
      const res = await requestService(
        name,
        ctx,
        { url: `${endpoint.prefix}/search/repositories?${query}`, headers, guard: endpoint.guard, timeoutMs: GITHUB_TIMEOUT_MS },
        { classify: (r) => githubVerdict(r, now(), token !== undefined) },
      );
      const answer = parseServiceAnswer(name, 'GitHub', githubAnswer, serviceJson(name, 'GitHub', res));
      const results = answer.items.map((r) => ({
        title: r.name,
        url: r.html_url,
        content: `${r.description ?? ''}\n stars:${r.watchers ?? r.stargazers_count ?? 0}`,
      }));
      return webSearchResult(results, { nothingFound: GITHUB_NOTHING_FOUND, data: answer.items });
    },
  };
}

/**
 * GitHub's rate limits come as 403 or 429 (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api):
 * wait for `retry-after` when given, else until `x-ratelimit-reset` when nothing remains, else a
 * minute for a secondary limit. A 422 is a query GitHub cannot run: its own reason is the detail.
 */
export function githubVerdict(res: OutboundResponse, nowMs: number, withToken: boolean): ServiceVerdict | undefined {
  if (res.status === 422) {
    const reason = validationReason(res.body);
    return { kind: 'final', ...(reason ? { detail: reason } : {}) };
  }
  if (res.status !== 403 && res.status !== 429) return undefined;
  const detail = `rate limit exceeded${withToken ? '' : ` (set the tenant secret ${GITHUB_TOKEN_SECRET} for a higher limit)`}`;
  const retryAfter = retryAfterMs(res.headers['retry-after'], nowMs);
  if (retryAfter !== undefined) return { kind: 'later', waitMs: retryAfter, detail };
  if (res.headers['x-ratelimit-remaining'] === '0') {
    const reset = Number(res.headers['x-ratelimit-reset']);
    const waitMs = Number.isFinite(reset) ? Math.max(0, reset * 1000 - nowMs) : undefined;
    return { kind: 'later', ...(waitMs !== undefined ? { waitMs } : {}), detail };
  }
  if (/secondary rate limit/i.test(res.body)) return { kind: 'later', waitMs: SECONDARY_LIMIT_WAIT_MS, detail };
  return res.status === 429 ? { kind: 'later', detail } : undefined;
}

/** `{"message": "Validation Failed", "errors": [{"message": "..."}]}`: the first error's own message. */
function validationReason(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { message?: unknown; errors?: { message?: unknown }[] };
    const first = Array.isArray(parsed.errors) ? parsed.errors[0]?.message : undefined;
    const reason = typeof first === 'string' ? first : typeof parsed.message === 'string' ? parsed.message : undefined;
    return reason?.slice(0, 200);
  } catch {
    return undefined;
  }
}
