/**
 * Retries a streamed call with exponential backoff and full jitter, honouring Retry-After.
 * Only failures before the first event are retried: once text has reached the reader, a
 * second attempt would repeat it, so the failure goes up as it is.
 */
import { TransientError } from '../canvas/errors';
import { LlmTransientError } from './errors';

export interface RetryPolicy {
  /** Attempts in all, the first included. @default 3 */
  attempts: number;
  /** @default 250 */
  baseDelayMs: number;
  /** @default 8000 */
  maxDelayMs: number;
  /** Injectable for tests. @default Math.random */
  random?: () => number;
  /** Injectable for tests. @default setTimeout-based */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 3, baseDelayMs: 250, maxDelayMs: 8000 };

export async function* retrying<T>(
  attempt: () => AsyncIterable<T>,
  policy: RetryPolicy,
  signal?: AbortSignal,
): AsyncGenerator<T, void, undefined> {
  const random = policy.random ?? Math.random;
  const sleep = policy.sleep ?? abortableSleep;
  for (let n = 1; ; n++) {
    let delivered = false;
    try {
      for await (const item of attempt()) {
        delivered = true;
        yield item;
      }
      return;
    } catch (error) {
      if (delivered || !(error instanceof TransientError) || n >= policy.attempts || signal?.aborted) throw error;
      const backoff = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (n - 1)) * random();
      const hinted = error instanceof LlmTransientError ? error.retryAfterMs : undefined;
      await sleep(Math.min(policy.maxDelayMs, Math.max(backoff, hinted ?? 0)), signal);
    }
  }
}

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}
