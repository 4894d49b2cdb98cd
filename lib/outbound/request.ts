/**
 * One HTTP request to a tenant-supplied URL, through the SSRF guard.
 *
 * Every hop (the first URL and each redirect target) is checked by the guard BEFORE a socket
 * exists, and the socket then goes to the address the guard approved: the request carries a
 * `lookup` that answers with exactly the checked addresses, so a DNS answer that changes
 * between check and connect cannot redirect it. (Node does not call `lookup` for IP-literal
 * hosts; those connect to the literal the guard has just judged.) node:http is used rather
 * than fetch because fetch offers no way to pin the address.
 *
 * No retries: a failure says whether it is `transient`, and the caller decides.
 *
 * @example
 * const res = await outboundRequest({
 *   url: 'https://api.example.com/items', method: 'POST',
 *   headers: { 'content-type': 'application/json' }, body: JSON.stringify({ a: 1 }),
 *   timeoutMs: 10_000, guard,
 * });
 * // res.status, res.headers, res.body, res.url (after redirects), res.redirects
 */
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { EaselError } from '../errors';
import type { SsrfCheckResult, SsrfGuard } from './ssrf';

export interface OutboundRequestOptions {
  url: string | URL;
  method: string;
  /** Request headers. `host`, `content-length`, `transfer-encoding` and `connection` are set here. */
  headers?: Readonly<Record<string, string>>;
  body?: string | Uint8Array;
  /** One deadline for the whole exchange: resolution, connection, every redirect, the body. */
  timeoutMs: number;
  /** @default 5 */
  maxRedirects?: number;
  /** @default 1 MiB (1_048_576) */
  maxResponseBytes?: number;
  guard: SsrfGuard;
  signal?: AbortSignal;
}

export interface OutboundResponse {
  status: number;
  /** Lower-case names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** Decoded with the charset of `content-type`, UTF-8 by default. */
  body: string;
  /** The URL that answered, after redirects (without fragment). */
  url: string;
  redirects: number;
}

export type OutboundFailure =
  | 'timeout'
  | 'aborted'
  | 'connection'
  | 'protocol'
  | 'too_many_redirects'
  | 'response_too_large'
  | 'invalid_url'
  | 'invalid_request';

/**
 * A request that did not produce a response. `transient` failures (timeout, the caller's
 * abort, a connection refused/reset) may succeed if tried again; the others will not. The
 * message names the origin only, never the path, query or credentials.
 */
export class OutboundError extends EaselError {
  readonly reason: OutboundFailure;
  readonly transient: boolean;

  constructor(reason: OutboundFailure, message: string, options: { transient: boolean; cause?: unknown }) {
    super('outbound_failed', message, { cause: options.cause });
    this.reason = reason;
    this.transient = options.transient;
  }
}

export const DEFAULT_MAX_REDIRECTS = 5;
export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;

export const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Headers this module owns; a caller's value would be wrong or stale after a redirect. */
const OWNED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);
/** Headers that describe a body; dropped with it when a redirect turns the request into GET. */
export const BODY_HEADERS = ['content-type', 'content-encoding', 'content-language', 'content-location'];
/** Credentials that must not follow a redirect to another origin. */
export const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];
const TRANSIENT_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
]);
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Sends one request, following redirects (each hop re-checked by the guard).
 *
 * @throws SsrfBlockedError (unchanged from the guard) if any hop is refused.
 * @throws OutboundError for everything else that prevents a response.
 * @throws RangeError for a non-positive `timeoutMs` or negative limits (a programming error).
 */
export async function outboundRequest(options: OutboundRequestOptions): Promise<OutboundResponse> {
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  if (!(options.timeoutMs > 0)) throw new RangeError('timeoutMs must be a positive number');
  if (!Number.isInteger(maxRedirects) || maxRedirects < 0) throw new RangeError('maxRedirects must be an integer >= 0');
  if (!(maxResponseBytes >= 0)) throw new RangeError('maxResponseBytes must be >= 0');

  let url: URL;
  try {
    url = new URL(typeof options.url === 'string' ? options.url : options.url.href);
  } catch (cause) {
    throw new OutboundError('invalid_url', 'outbound request failed: the URL is not valid', { transient: false, cause });
  }
  url.hash = '';

  // One controller for the whole exchange: the deadline and the caller's signal both abort it.
  const controller = new AbortController();
  const timer = setTimeout(() => {
    controller.abort(
      new OutboundError('timeout', `outbound request to ${url.origin} timed out after ${options.timeoutMs} ms`, { transient: true }),
    );
  }, Math.min(options.timeoutMs, MAX_TIMER_MS));
  const onCallerAbort = () => {
    controller.abort(
      new OutboundError('aborted', `outbound request to ${url.origin} was aborted`, { transient: true, cause: options.signal?.reason }),
    );
  };
  if (options.signal?.aborted) onCallerAbort();
  else options.signal?.addEventListener('abort', onCallerAbort, { once: true });

  try {
    let method = options.method.toUpperCase();
    let body = options.body === undefined ? undefined : toBuffer(options.body);
    const headers = ownHeaders(options.headers);

    for (let redirects = 0; ; redirects++) {
      const target = await untilAborted(options.guard.check(url), controller.signal);
      const result = await exchange(target, method, headers, body, maxResponseBytes, controller.signal);
      if (result.kind === 'response') return { ...result.response, url: url.href, redirects };

      if (redirects >= maxRedirects) {
        throw new OutboundError('too_many_redirects', `outbound request to ${url.origin} failed: more than ${maxRedirects} redirects`, {
          transient: false,
        });
      }
      let next: URL;
      try {
        next = new URL(result.location, url);
      } catch (cause) {
        throw new OutboundError('invalid_url', `outbound request to ${url.origin} failed: the redirect location is not a valid URL`, {
          transient: false,
          cause,
        });
      }
      next.hash = '';
      if (result.status === 303 ? method !== 'HEAD' : (result.status === 301 || result.status === 302) && method === 'POST') {
        method = 'GET';
        body = undefined;
        for (const name of BODY_HEADERS) delete headers[name];
      }
      if (next.origin !== url.origin) for (const name of CREDENTIAL_HEADERS) delete headers[name];
      url = next;
    }
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onCallerAbort);
  }
}

type ExchangeResult =
  | { kind: 'response'; response: Omit<OutboundResponse, 'url' | 'redirects'> }
  | { kind: 'redirect'; status: number; location: string };

/** One request/response on a fresh connection to the approved address. */
function exchange(
  target: SsrfCheckResult,
  method: string,
  headers: Record<string, string>,
  body: Buffer | undefined,
  maxResponseBytes: number,
  signal: AbortSignal,
): Promise<ExchangeResult> {
  return new Promise((resolve, reject) => {
    const { url } = target;

    let settled = false;
    let req: http.ClientRequest | undefined;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      outcome();
      req?.destroy();
    };
    const fail = (err: unknown) => finish(() => reject(err));
    const onAbort = () => fail(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });

    try {
      req = pinnedRequest(url, target, method, { 'user-agent': 'easel', ...headers, host: url.host }, body?.length);
    } catch (error) {
      return fail(error);
    }

    req.on('error', (err) => fail(networkError(err, url)));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (REDIRECT_STATUSES.has(status) && location !== undefined) {
        return finish(() => resolve({ kind: 'redirect', status, location }));
      }
      const tooLarge = () =>
        new OutboundError('response_too_large', `outbound request to ${url.origin} failed: the response exceeds ${maxResponseBytes} bytes`, {
          transient: false,
        });
      // A HEAD, 204 or 304 response declares a length it does not send.
      const bodyless = method === 'HEAD' || status === 204 || status === 304;
      const declared = Number(res.headers['content-length']);
      if (!bodyless && Number.isFinite(declared) && declared > maxResponseBytes) return fail(tooLarge());

      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxResponseBytes) return fail(tooLarge());
        chunks.push(chunk);
      });
      res.on('error', (err) => fail(networkError(err, url)));
      res.on('end', () =>
        finish(() =>
          resolve({
            kind: 'response',
            response: { status, headers: flattenHeaders(res.headers), body: decode(Buffer.concat(chunks), res.headers['content-type']) },
          }),
        ),
      );
    });
    req.end(body);
  });
}

/** A `lookup` that ignores the name and answers with the addresses the guard approved. */
/**
 * One hop's request, its socket pinned to the address the guard approved (`target`), on a
 * fresh socket (a pooled one could have been approved for another URL).
 * @throws OutboundError `invalid_request` for a method or header Node refuses (checked before any socket opens)
 */
export function pinnedRequest(url: URL, target: SsrfCheckResult, method: string, headers: Record<string, string>, bodyLength?: number): http.ClientRequest {
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const secure = url.protocol === 'https:';
  const requestHeaders = bodyLength === undefined ? headers : { ...headers, 'content-length': String(bodyLength) };
  try {
    return (secure ? https : http).request({
      protocol: url.protocol,
      host: hostname,
      port: url.port === '' ? undefined : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method,
      headers: requestHeaders,
      agent: false,
      lookup: pinnedLookup(target),
      ...(secure && isIP(hostname) === 0 ? { servername: hostname } : {}),
    });
  } catch (cause) {
    throw new OutboundError('invalid_request', `outbound request to ${url.origin} failed: invalid method or header`, { transient: false, cause });
  }
}

export function pinnedLookup(target: SsrfCheckResult): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) callback(null, target.addresses.map((a) => ({ address: a.address, family: a.family })));
    else callback(null, target.address, target.family);
  };
}

/** Waits for `promise`, or rejects with the abort reason as soon as `signal` fires. */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/** A socket-level failure as an `OutboundError`, transient when trying again may help. */
export function networkError(err: unknown, url: URL): OutboundError {
  if (err instanceof OutboundError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const hangUp = err instanceof Error && /socket hang up/i.test(err.message);
  const transient = hangUp || (code !== undefined && TRANSIENT_CODES.has(code));
  const what = hangUp ? 'socket hang up' : (code ?? 'network error');
  return new OutboundError(transient ? 'connection' : 'protocol', `outbound request to ${url.origin} failed: ${what}`, {
    transient,
    cause: err,
  });
}

function ownHeaders(headers: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    const lower = name.toLowerCase();
    if (!OWNED_HEADERS.has(lower)) out[lower] = value;
  }
  return out;
}

function toBuffer(body: string | Uint8Array): Buffer {
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

function flattenHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function decode(bytes: Buffer, contentType: string | undefined): string {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1];
  try {
    return new TextDecoder(charset ?? 'utf-8').decode(bytes);
  } catch {
    return new TextDecoder('utf-8').decode(bytes); // an unknown charset label
  }
}
