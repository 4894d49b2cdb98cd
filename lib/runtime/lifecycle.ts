/**
 * How an entry point stops the turns it runs (lib/turns/lifecycle.ts): the local server when it
 * is told to stop, a Lambda invocation shortly before it would time out. Turns stopped this way
 * commit nothing and give their claim back, so a retry can take the turn at once.
 *
 * @example
 *   const shutdown = createShutdown();
 *   const runtime = buildRuntime(config, { lifecycle: shutdown.lifecycle });
 *   // SIGTERM: give the turns a grace period, then
 *   shutdown.abort('the server is stopping');
 *   await shutdown.settled();
 *
 *   const deadline = invocationDeadline(config.deadlineMarginMs);
 *   const runtime = buildRuntime(config, { lifecycle: deadline.lifecycle });
 *   export const handler = async (event, context) => {
 *     deadline.arm(context);
 *     try { ... } finally { deadline.disarm(); }
 *   };
 */
import { TurnAbortedError, type TurnLifecycle } from '../turns/lifecycle';

export interface Shutdown {
  lifecycle: TurnLifecycle;
  /** Turns started and not settled yet. */
  readonly running: number;
  /** Resolves once no turn is running (turns that start meanwhile are waited for too). */
  settled(): Promise<void>;
  /** Aborts every turn running, and those that start from now on. */
  abort(why: string): void;
  readonly aborted: boolean;
}

/** The turns of a long-lived process (npm start), and the one signal that stops them all. */
export function createShutdown(): Shutdown {
  const controller = new AbortController();
  const running = new Set<Promise<unknown>>();
  return {
    lifecycle: {
      signal: () => controller.signal,
      started(turn) {
        running.add(turn);
        void turn.finally(() => running.delete(turn));
      },
    },
    get running() {
      return running.size;
    },
    async settled() {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
    abort(why) {
      if (!controller.signal.aborted) controller.abort(new TurnAbortedError(why));
    },
    get aborted() {
      return controller.signal.aborted;
    },
  };
}

/** What the deadline needs of a Lambda context. */
export interface RemainingTime {
  getRemainingTimeInMillis(): number;
}

/** Timers, injectable so tests decide when the deadline comes. */
export interface DeadlineTimers {
  set(run: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realTimers: DeadlineTimers = {
  set: (run, ms) => setTimeout(run, ms),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface InvocationDeadline {
  lifecycle: TurnLifecycle;
  /**
   * An invocation begins: the turns it runs are aborted once it has `marginMs` left (at once
   * if it has less already).
   */
  arm(context: RemainingTime): void;
  /** The invocation ends (its turns have settled). */
  disarm(): void;
}

/**
 * The deadline of the current invocation. A Lambda container handles one invocation at a
 * time, so one deadline serves every turn of the container; each invocation arms it anew.
 */
export function invocationDeadline(marginMs: number, timers: DeadlineTimers = realTimers): InvocationDeadline {
  let controller: AbortController | undefined;
  let timer: unknown;
  return {
    lifecycle: { signal: () => controller?.signal },
    arm(context) {
      if (timer !== undefined) timers.clear(timer);
      const current = new AbortController();
      controller = current;
      const left = context.getRemainingTimeInMillis() - marginMs;
      const expire = () => current.abort(new TurnAbortedError('the invocation was about to time out'));
      if (left <= 0) expire();
      else timer = timers.set(expire, left);
    },
    disarm() {
      if (timer !== undefined) timers.clear(timer);
      timer = undefined;
      controller = undefined;
    },
  };
}
