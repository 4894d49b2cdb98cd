/**
 * Turns stopped from outside the run: the local server is stopping (SIGTERM, past its grace
 * period), a Lambda invocation is about to time out. A turn whose signal aborts commits
 * nothing: a synchronous turn gives its claim back and fails with TurnAbortedError
 * (`unavailable`, 503), so a retry with the same Idempotency-Key finds the turn free at once; an
 * async turn lets go of its lease and keeps its claim and last checkpoint for the next worker.
 *
 * @example
 *   const stopping = new AbortController();
 *   const engine = { ...base, lifecycle: { signal: () => stopping.signal } };
 *   stopping.abort(new TurnAbortedError('the server is stopping'));
 */
import { TransientError } from '../canvas/errors';

/** What an entry point tells the engine about the turns it runs. */
export interface TurnLifecycle {
  /** The signal of the turns starting now (read at the start of each turn); undefined: none. */
  signal(): AbortSignal | undefined;
  /** Told of every turn as it starts, so a stopping server can wait for them. */
  started?(turn: Promise<unknown>): void;
}

/**
 * The turn was stopped before it could commit; nothing of it was written. Transient: the same
 * request may be sent again (a queue message is handed back or continued).
 */
export class TurnAbortedError extends TransientError {
  constructor(why: string) {
    super(`${why}: the turn was stopped before it committed; nothing was written, retry it with the same Idempotency-Key`);
  }
}

/** The signal a turn runs under: its caller's and its entry point's, whichever aborts first. */
export function turnSignal(lifecycle: TurnLifecycle | undefined, own: AbortSignal | undefined): AbortSignal | undefined {
  const outer = lifecycle?.signal();
  if (!outer) return own;
  if (!own) return outer;
  return AbortSignal.any([own, outer]);
}

/** Why an aborted signal stopped the turn, as the error its caller gets. */
export function abortedBy(signal: AbortSignal): TurnAbortedError {
  const reason: unknown = signal.reason;
  if (reason instanceof TurnAbortedError) return reason;
  return new TurnAbortedError(reason instanceof Error ? reason.message : 'the turn was aborted');
}

/** Tells the lifecycle of a turn as it starts, and hands the turn back. */
export function tracked<T>(lifecycle: TurnLifecycle | undefined, turn: Promise<T>): Promise<T> {
  lifecycle?.started?.(turn.catch(() => undefined));
  return turn;
}
