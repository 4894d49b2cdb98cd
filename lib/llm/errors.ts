/**
 * Provider failures, split the way a turn needs them: transient ones (429, 5xx, timeouts, the
 * network) become the engine's `TransientError` — the turn commits nothing and can be retried
 * — and permanent ones (a refused request, a bad answer) are workflow errors of the component.
 * Messages never carry the API key or the request body.
 */
import { ComponentError, TransientError } from '../canvas/errors';

export class LlmError extends ComponentError {
  constructor(
    message: string,
    readonly status?: number,
    options?: { cause?: unknown },
  ) {
    super(message, { ...options, code: 'llm_error' });
  }
}

export class LlmTransientError extends TransientError {
  constructor(
    message: string,
    readonly status?: number,
    readonly retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** HTTP statuses worth another attempt. */
export function isTransientStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 425 || status === 429 || status >= 500;
}

/** `Retry-After` in seconds or as an HTTP date, in ms; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
