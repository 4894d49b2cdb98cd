/**
 * A `fetch` for tenant-supplied URLs, for clients that take one (the MCP SDK's transports): the
 * same guard and pinning as `outboundRequest` — every hop checked BEFORE a socket exists, the
 * socket sent to the address the guard approved — with fetch's interface and a streamed body
 * (a server-sent event stream stays open as long as the caller reads it).
 *
 * - Redirects follow `init.redirect`: `follow` (the default) re-checks each hop and drops
 *   credentials (`authorization`, `cookie`) at another origin, as `outboundRequest`; `manual`
 *   hands the 3xx back as it is, for a caller that decides itself; `error` refuses it.
 * - `init.signal` aborts the exchange at any point, the body's stream included.
 * - Bounded: the time until response headers, the number of redirects, the request body and
 *   the bytes of each response body (the stream errors past it).
 * - Failures are ours, not fetch's TypeError: `SsrfBlockedError` for a refused hop,
 *   `OutboundError` (with `transient`) for the rest, so a caller can classify them.
 *
 * @example
 * const fetch = createGuardedFetch({ guard });
 * const res = await fetch('https://mcp.example.com/mcp', { method: 'POST', body: '{}', signal });
 * for await (const chunk of res.body!) ...
 */
import http from 'node:http';
import {
  BODY_HEADERS,
  CREDENTIAL_HEADERS,
  DEFAULT_MAX_REDIRECTS,
  networkError,
  OutboundError,
  pinnedRequest,
  REDIRECT_STATUSES,
  untilAborted,
} from './request';
import type { SsrfCheckResult, SsrfGuard } from './ssrf';

/** What fetch-taking clients accept (the MCP SDK's `FetchLike`). */
export type GuardedFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Arms a timer and returns its cancel function; injectable so tests never wait. */
export type FetchTimer = (ms: number, onTimeout: () => void) => () => void;

export interface GuardedFetchOptions {
  guard: SsrfGuard;
  /** From the first hop's check to the final response's headers. @default 30_000 */
  headersTimeoutMs?: number;
  /** @default 5 */
  maxRedirects?: number;
  /** @default 1 MiB */
  maxRequestBytes?: number;
  /** Per response body; the stream errors with `response_too_large` past it. @default 16 MiB */
  maxResponseBytes?: number;
  /** @default setTimeout-based */
  timer?: FetchTimer;
}

export const DEFAULT_FETCH_HEADERS_TIMEOUT_MS = 30_000;
export const DEFAULT_FETCH_MAX_REQUEST_BYTES = 1024 * 1024;
export const DEFAULT_FETCH_MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

/** Headers this module sets itself: a caller's would be wrong after a redirect, or undecodable. */
const OWNED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'accept-encoding']);
/** Statuses whose responses carry no body (fetch's null body statuses). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
const MAX_TIMER_MS = 2 ** 31 - 1;

const systemTimer: FetchTimer = (ms, onTimeout) => {
  const timer = setTimeout(onTimeout, Math.min(ms, MAX_TIMER_MS));
  return () => clearTimeout(timer);
};

export function createGuardedFetch(options: GuardedFetchOptions): GuardedFetch {
  const headersTimeoutMs = options.headersTimeoutMs ?? DEFAULT_FETCH_HEADERS_TIMEOUT_MS;
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const maxRequestBytes = options.maxRequestBytes ?? DEFAULT_FETCH_MAX_REQUEST_BYTES;
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_FETCH_MAX_RESPONSE_BYTES;
  const timer = options.timer ?? systemTimer;
  if (!(headersTimeoutMs > 0)) throw new RangeError('headersTimeoutMs must be a positive number');
  if (!Number.isInteger(maxRedirects) || maxRedirects < 0) throw new RangeError('maxRedirects must be an integer >= 0');

  return async (input, init) => {
    let request: Request;
    try {
      request = new Request(input, init);
    } catch (cause) {
      throw new OutboundError('invalid_request', 'outbound request failed: the request is not valid', { transient: false, cause });
    }
    let url = new URL(request.url);
    url.hash = '';
    let method = request.method;
    let body = await readRequestBody(request, maxRequestBytes, url);
    const headers = ownHeaders(request.headers);

    // one controller for the exchange up to the final response's headers: the caller's
    // signal aborts it (and, later, the body), the headers deadline only until then
    const controller = new AbortController();
    const onCallerAbort = () => controller.abort(request.signal.reason);
    if (request.signal.aborted) onCallerAbort();
    else request.signal.addEventListener('abort', onCallerAbort, { once: true });
    const cancelDeadline = timer(headersTimeoutMs, () =>
      controller.abort(new OutboundError('timeout', `outbound request to ${url.origin} got no answer within ${headersTimeoutMs} ms`, { transient: true })),
    );

    try {
      for (let redirects = 0; ; redirects++) {
        const target = await untilAborted(options.guard.check(url), controller.signal);
        const res = await send(target, method, headers, body, controller.signal);
        const status = res.statusCode ?? 0;
        const location = res.headers.location;
        if (!REDIRECT_STATUSES.has(status) || location === undefined || request.redirect === 'manual') {
          cancelDeadline();
          return toResponse(res, { url, redirected: redirects > 0, method, maxResponseBytes, signal: request.signal });
        }
        res.destroy();
        if (request.redirect === 'error') {
          throw new OutboundError('protocol', `outbound request to ${url.origin} was redirected, which the request does not allow`, { transient: false });
        }
        if (redirects >= maxRedirects) {
          throw new OutboundError('too_many_redirects', `outbound request to ${url.origin} failed: more than ${maxRedirects} redirects`, { transient: false });
        }
        let next: URL;
        try {
          next = new URL(location, url);
        } catch (cause) {
          throw new OutboundError('invalid_url', `outbound request to ${url.origin} failed: the redirect location is not a valid URL`, { transient: false, cause });
        }
        next.hash = '';
        if (status === 303 ? method !== 'HEAD' : (status === 301 || status === 302) && method === 'POST') {
          method = 'GET';
          body = undefined;
          for (const name of BODY_HEADERS) delete headers[name];
        }
        if (next.origin !== url.origin) for (const name of CREDENTIAL_HEADERS) delete headers[name];
        url = next;
      }
    } catch (error) {
      cancelDeadline();
      throw error;
    } finally {
      request.signal.removeEventListener('abort', onCallerAbort);
    }
  };
}

/** One request on a fresh socket to the approved address; resolves at the response's headers. */
function send(
  target: SsrfCheckResult,
  method: string,
  headers: Record<string, string>,
  body: Buffer | undefined,
  signal: AbortSignal,
): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const { url } = target;
    let req: http.ClientRequest | undefined;
    let settled = false;
    const fail = (error: unknown) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      req?.destroy();
      reject(error);
    };
    const onAbort = () => fail(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });

    try {
      req = pinnedRequest(url, target, method, { 'user-agent': 'easel', ...headers, host: url.host, 'accept-encoding': 'identity' }, body?.length);
    } catch (error) {
      return fail(error);
    }
    req.on('error', (err) => fail(networkError(err, url)));
    req.on('response', (res) => {
      if (settled) return void res.destroy();
      settled = true;
      signal.removeEventListener('abort', onAbort);
      resolve(res);
    });
    req.end(body);
  });
}

interface ResponseContext {
  url: URL;
  redirected: boolean;
  method: string;
  maxResponseBytes: number;
  /** The caller's: it aborts the body too. */
  signal: AbortSignal;
}

/** A fetch `Response` whose body streams from `res`, with backpressure and the size bound. */
function toResponse(res: http.IncomingMessage, context: ResponseContext): Response {
  const { url, maxResponseBytes, signal } = context;
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 599) {
    res.destroy();
    throw new OutboundError('protocol', `outbound request to ${url.origin} failed: status ${status} is not an HTTP answer`, { transient: false });
  }
  const headers = new Headers();
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) headers.append(res.rawHeaders[i] as string, res.rawHeaders[i + 1] as string);

  let body: ReadableStream<Uint8Array> | null = null;
  if (context.method === 'HEAD' || NULL_BODY_STATUSES.has(status)) {
    res.resume();
  } else {
    const declared = Number(res.headers['content-length']);
    const tooLarge = () =>
      new OutboundError('response_too_large', `outbound request to ${url.origin} failed: the response exceeds ${maxResponseBytes} bytes`, { transient: false });
    if (Number.isFinite(declared) && declared > maxResponseBytes) {
      res.destroy();
      throw tooLarge();
    }
    let open = true;
    let stream!: ReadableStreamDefaultController<Uint8Array>;
    const end = (error?: unknown) => {
      if (!open) return;
      open = false;
      signal.removeEventListener('abort', onAbort);
      if (error === undefined) return stream.close();
      stream.error(error);
      res.destroy();
    };
    const onAbort = () => end(signal.reason);
    body = new ReadableStream<Uint8Array>({
      start(controller) {
        stream = controller;
        let size = 0;
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        res.on('data', (chunk: Buffer) => {
          if (!open) return;
          size += chunk.length;
          if (size > maxResponseBytes) return end(tooLarge());
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 1) <= 0) res.pause();
        });
        res.on('end', () => end());
        res.on('error', (err) => end(networkError(err, url)));
        res.on('close', () => {
          if (!res.complete) end(new OutboundError('connection', `outbound request to ${url.origin} failed: the connection closed mid-answer`, { transient: true }));
        });
      },
      pull() {
        res.resume();
      },
      cancel() {
        open = false;
        signal.removeEventListener('abort', onAbort);
        res.destroy();
      },
    });
  }
  const response = new Response(body, { status, statusText: res.statusMessage ?? '', headers });
  // a constructed Response has no URL; clients read it to resolve relative locations
  Object.defineProperty(response, 'url', { value: url.href });
  Object.defineProperty(response, 'redirected', { value: context.redirected });
  return response;
}

async function readRequestBody(request: Request, maxBytes: number, url: URL): Promise<Buffer | undefined> {
  if (!request.body) return undefined;
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body) {
    size += chunk.byteLength;
    if (size > maxBytes) {
      throw new OutboundError('invalid_request', `outbound request to ${url.origin} failed: the request body exceeds ${maxBytes} bytes`, { transient: false });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function ownHeaders(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    if (!OWNED_HEADERS.has(name)) out[name] = value;
  });
  return out;
}
