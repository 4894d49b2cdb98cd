/** Test doubles for tools: a timer fired by hand, and a tool whose behaviour each test sets. */
import type { Tool, ToolContext, ToolOutcome, ToolTimer } from '../../lib/tools';

/** A timer that only fires when the test says so: timeouts without waiting on the clock. */
export function manualTimer() {
  const armed: { ms: number; fire: () => void; cancelled: boolean }[] = [];
  const timer: ToolTimer = (ms, fire) => {
    const entry = { ms, fire, cancelled: false };
    armed.push(entry);
    return () => {
      entry.cancelled = true;
    };
  };
  /** Fires every timer still armed. */
  const fireAll = () => {
    for (const t of armed) if (!t.cancelled) t.fire();
  };
  return { timer, armed, fireAll };
}

/** A tool that records its calls and answers with `behave`. */
export function probeTool(behave: (args: Record<string, unknown>, ctx: ToolContext) => Promise<ToolOutcome>, extra: Partial<Tool> = {}) {
  const calls: { args: Record<string, unknown>; ctx: ToolContext }[] = [];
  const tool: Tool = {
    name: 'probe',
    description: 'A tool for tests.',
    parameters: { type: 'object', properties: { q: { type: 'string' } } },
    ...extra,
    invoke: (args, ctx) => {
      calls.push({ args, ctx });
      return behave(args, ctx);
    },
  };
  return { tool, calls };
}

/** A promise with its resolve function outside, to wait until a tool has started. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * A timer that fires at once every wait of at most `upToMs` (a retry's backoff) and never a
 * longer one (a call's timeout): retries run without waiting, and `waits` says what was asked.
 */
export function skippingTimer(upToMs = 5_000) {
  const waits: number[] = [];
  const timer: ToolTimer = (ms, fire) => {
    if (ms > upToMs) return () => {};
    waits.push(ms);
    const handle = setImmediate(fire);
    return () => clearImmediate(handle);
  };
  return { timer, waits };
}
