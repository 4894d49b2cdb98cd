/**
 * How an AWS SDK call's failure reads, for both Bedrock clients (models, knowledge bases),
 * which classify it in their own error classes: its name, message, HTTP status, code, fault
 * and `Retry-After`, and whether it got no answer at all (a connection refused, reset or cut
 * short, HTTP/1.1 and HTTP/2), which is transient. A leaf module: importing it loads no SDK.
 */
import { retryAfterMs } from './errors';

export const AWS_NETWORK_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ERR_HTTP2_STREAM_ERROR',
  'ERR_HTTP2_SESSION_ERROR',
  'ERR_HTTP2_GOAWAY_SESSION',
  'ERR_HTTP2_STREAM_CANCEL',
  'ERR_HTTP2_INVALID_SESSION',
  'ERR_HTTP2_ERROR',
  'ERR_STREAM_PREMATURE_CLOSE',
  'UND_ERR_SOCKET',
]);

export const AWS_NETWORK_MESSAGE = /socket hang up|abnormally aborted|ECONNRESET|ECONNREFUSED|network|premature close|stream timed out/i;

/** What a failure of an SDK call says about itself. */
export interface SdkErrorFacts {
  /** The exception's name (`ThrottlingException`), `Error` when it has none. */
  name: string;
  message: string;
  status?: number;
  code?: string;
  fault?: 'server' | 'client';
  retryAfterMs?: number;
  /** No HTTP answer came: the connection was refused, reset or cut short. */
  network: boolean;
}

interface SdkErrorLike {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  $fault?: unknown;
  $metadata?: { httpStatusCode?: unknown };
  $response?: { statusCode?: unknown; headers?: Record<string, string | undefined> };
}

export function sdkErrorFacts(error: unknown): SdkErrorFacts {
  const e = (typeof error === 'object' && error !== null ? error : {}) as SdkErrorLike;
  const name = typeof e.name === 'string' && e.name !== '' ? e.name : 'Error';
  const message = typeof e.message === 'string' ? e.message : String(error);
  const rawStatus = e.$metadata?.httpStatusCode ?? e.$response?.statusCode;
  const status = typeof rawStatus === 'number' ? rawStatus : undefined;
  const code = typeof e.code === 'string' ? e.code : undefined;
  const headers = e.$response?.headers;
  const retryAfter = retryAfterMs(headers?.['retry-after'] ?? headers?.['Retry-After']);
  const fault = e.$fault === 'server' || e.$fault === 'client' ? e.$fault : undefined;
  const network = status === undefined && ((code !== undefined && AWS_NETWORK_CODES.has(code)) || AWS_NETWORK_MESSAGE.test(message) || name === 'AbortError');
  return {
    name,
    message,
    network,
    ...(status !== undefined ? { status } : {}),
    ...(code !== undefined ? { code } : {}),
    ...(fault ? { fault } : {}),
    ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {}),
  };
}
