/**
 * How a built-in tool talks to a web service, the same way for every tool: through the SSRF
 * guard, bounded in size, retried when the service says "later" (429, 5xx, a dropped
 * connection) with a backoff on the call's timer, and classified on the way out — what is
 * still transient after the retries fails the turn as `unavailable`, the rest is told to the
 * model.
 *
 * ```ts
 * const wiki = serviceEndpoint(options.baseUrl ?? 'https://en.wikipedia.org');
 * const res = await requestService('wikipedia_search', ctx, {
 *   url: `${wiki.prefix}/w/api.php?${query}`, guard: wiki.guard, timeoutMs: 12_000,
 * });
 * const answer = serviceJson('wikipedia_search', 'Wikipedia', res);
 * ```
 */
import { retryAfterMs } from '../llm/errors';
import { OutboundError, type OutboundResponse, outboundRequest } from '../outbound/request';
import { SsrfGuard } from '../outbound/ssrf';
import { ToolError, toolHttpError, ToolTransientError } from './errors';
import type { ToolContext } from './types';

/** An operator-chosen service: requests go under `prefix`, its host let through `guard`. */
export interface ServiceEndpoint {
  /** The base URL without a trailing slash. */
  readonly prefix: string;
  readonly guard: SsrfGuard;
}

/**
 * The operator chose the base URL (a default, or `EASEL_TOOL_<NAME>_BASE_URL`), so its host
 * is let through the SSRF guard whatever it resolves to (a proxy in a VPC, a local stand-in);
 * the connection still goes to the address the guard resolved, and a redirect elsewhere is
 * judged like any tenant URL.
 */
export function serviceEndpoint(baseUrl: string): ServiceEndpoint {
  const base = new URL(baseUrl.replace(/\/+$/, ''));
  const host = base.hostname.startsWith('[') ? base.hostname.slice(1, -1) : base.hostname;
  return { prefix: base.href.replace(/\/+$/, ''), guard: new SsrfGuard({ allow: [host] }) };
}

export interface ServiceRequest {
  url: string;
  /** @default GET */
  method?: string;
  headers?: Readonly<Record<string, string>>;
  body?: string;
  /** The guard for this URL: the endpoint's, or the run's for a tenant's URL. */
  guard: SsrfGuard;
  /** One attempt's deadline; the call's own timeout bounds all of them together. */
  timeoutMs: number;
  /** @default 8 MiB */
  maxResponseBytes?: number;
  /** The reason in a refusal's body, for services whose errors are not JSON. @default errorDetail */
  errorDetail?: (body: string) => string | undefined;
}

export interface RetryPolicy {
  /** Attempts in all, the first included. @default 3 */
  attempts?: number;
  /** The wait before the second attempt, doubled for each one after. @default 500 ms */
  backoffMs?: number;
  /** A `Retry-After` longer than this is not waited for: the failure stands. @default 5 s */
  maxWaitMs?: number;
  /**
   * What a failed answer means when its status alone does not say: GitHub's 403 with
   * `x-ratelimit-remaining: 0` is a rate limit, SerpApi's 429 for a plan out of searches is
   * final. @default undefined for every answer: the status decides
   */
  classify?: (res: OutboundResponse) => ServiceVerdict | undefined;
}

/**
 * A service's own reading of a failed answer. `later`: retried after `waitMs` (else the
 * backoff) and, still failing, transient; `final`: not retried, told to the model. `detail`
 * replaces the reason read from the body.
 */
export type ServiceVerdict = { kind: 'later'; waitMs?: number; detail?: string } | { kind: 'final'; detail?: string };

export const DEFAULT_SERVICE_RESPONSE_BYTES = 8 * 1024 * 1024;
/** Statuses worth another attempt: the service is busy or briefly down, the request was fine. */
const RETRIED_STATUSES = new Set([429, 500, 502, 503, 504]);

/**
 * One request with retries; a 2xx response, or a throw: `ToolTransientError` when it is still
 * transient after the last attempt (or the wait it asks for is too long), `ToolError` when the
 * service refused it for good. `service` names the service in messages (never the URL's query,
 * which may carry a key).
 */
export async function requestService(tool: string, ctx: ToolContext, request: ServiceRequest, policy: RetryPolicy = {}): Promise<OutboundResponse> {
  const attempts = policy.attempts ?? 3;
  const backoffMs = policy.backoffMs ?? 500;
  const maxWaitMs = policy.maxWaitMs ?? 5_000;
  for (let attempt = 1; ; attempt++) {
    let waitMs: number | undefined;
    let failure: ToolError | ToolTransientError;
    try {
      const res = await outboundRequest({
        url: request.url,
        method: request.method ?? 'GET',
        ...(request.headers ? { headers: request.headers } : {}),
        ...(request.body !== undefined ? { body: request.body } : {}),
        timeoutMs: request.timeoutMs,
        maxResponseBytes: request.maxResponseBytes ?? DEFAULT_SERVICE_RESPONSE_BYTES,
        guard: request.guard,
        signal: ctx.signal,
      });
      if (res.status >= 200 && res.status <= 299) return res;
      const verdict = policy.classify?.(res);
      const answered = toolHttpError(tool, res.status, verdict?.detail ?? (request.errorDetail ?? errorDetail)(res.body));
      if (verdict?.kind === 'final') throw answered instanceof ToolError ? answered : new ToolError(answered.message);
      if (verdict?.kind === 'later') {
        failure = answered instanceof ToolTransientError ? answered : new ToolTransientError(answered.message);
        waitMs = verdict.waitMs;
      } else {
        failure = answered;
        if (!RETRIED_STATUSES.has(res.status)) throw failure;
        waitMs = retryAfterMs(res.headers['retry-after']);
      }
    } catch (error) {
      if (!(error instanceof OutboundError) || !error.transient || ctx.signal.aborted) throw error;
      failure = new ToolTransientError(`tool "${tool}": ${error.message}`, { cause: error });
    }
    const wait = waitMs ?? backoffMs * 2 ** (attempt - 1);
    if (attempt >= attempts || wait > maxWaitMs || ctx.signal.aborted) throw failure;
    await (ctx.wait ?? realWait)(wait);
  }
}

/** The body as JSON, or a permanent error naming the service. */
export function serviceJson(tool: string, service: string, res: OutboundResponse): unknown {
  try {
    return JSON.parse(res.body) as unknown;
  } catch (cause) {
    throw new ToolError(`tool "${tool}": ${service} answered ${res.status} with a body that is not JSON`, { cause });
  }
}

/** A host that gives no `wait` (a tool called outside `callTool`) waits on the real clock. */
const realWait = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A short reason from a JSON error body (`{"error": "..."}`, `{"message": "..."}`,
 * `{"detail": {"error": "..."}}`), at most 200 characters; never the request.
 */
export function errorDetail(body: string): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const record = parsed as Record<string, unknown>;
  for (const candidate of [record.error, record.message, record.detail]) {
    if (typeof candidate === 'string') return candidate.slice(0, 200);
    if (typeof candidate === 'object' && candidate !== null) {
      const nested = (candidate as Record<string, unknown>).error ?? (candidate as Record<string, unknown>).message;
      if (typeof nested === 'string') return nested.slice(0, 200);
    }
  }
  return undefined;
}
