/**
 * What an AWS SDK call that got no answer looks like: the error codes and messages of a
 * connection refused, reset or cut short (HTTP/1.1 and HTTP/2). Both Bedrock clients (models,
 * knowledge bases) classify such a failure as transient. A leaf module: importing it loads no SDK.
 */
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
