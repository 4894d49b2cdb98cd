/**
 * One tool call, the same way for every tool: through the registry's hook, bounded by the
 * tool's timeout (an AbortSignal the tool should pass on, and a deadline that holds even when
 * it does not), and classified on the way out. A permanent failure comes back as an outcome
 * for the model; a transient one is thrown so the turn fails as `unavailable`; a suspension
 * raised deeper (inside a sub-Agent) goes up as it is.
 */
import { PauseRequest, TransientError } from '../canvas/errors';
import { isRecord } from '../canvas/references';
import { OutboundError } from '../outbound/request';
import { ToolError, ToolSuspendedError, ToolTimeoutError, ToolTransientError } from './errors';
import type { ToolRegistry } from './registry';
import type { JsonValue, Tool, ToolContext, ToolFailure, ToolOutcome, ToolResult, ToolSuspension } from './types';

/** A result, a permanent failure, or a suspension; transient failures are thrown. */
export type SettledOutcome = ToolResult | ToolSuspension | (ToolFailure & { error: ToolError });

/** Runs `tool` once. `ctx.signal` is the turn's; the tool gets one that also ends at its timeout. */
export async function callTool(
  tool: Tool,
  args: Record<string, unknown>,
  ctx: ToolContext,
  registry: Pick<ToolRegistry, 'defaultTimeoutMs' | 'timer' | 'hook'>,
  /** The name the model called it by, for the hook. @default tool.name */
  calledAs: string = tool.name,
): Promise<SettledOutcome> {
  const run = () => bounded(tool, args, ctx, registry);
  const info = { componentId: ctx.componentId, path: ctx.path, ordinal: ctx.ordinal, tool: calledAs, arguments: args };
  let outcome: unknown;
  try {
    outcome = await (registry.hook ? registry.hook(info, run) : run());
  } catch (error) {
    return { kind: 'error', error: asToolError(error, tool.name) };
  }
  return settle(outcome, tool.name);
}

async function bounded(
  tool: Tool,
  args: Record<string, unknown>,
  ctx: ToolContext,
  registry: Pick<ToolRegistry, 'defaultTimeoutMs' | 'timer'>,
): Promise<ToolOutcome> {
  const timeoutMs = tool.timeoutMs ?? registry.defaultTimeoutMs;
  const controller = new AbortController();
  let cancelTimer = () => {};
  let onTurnAbort = () => {};
  const deadline = new Promise<never>((_, reject) => {
    const stop = (error: Error) => {
      controller.abort(error);
      reject(error);
    };
    cancelTimer = registry.timer(timeoutMs, () => stop(new ToolTimeoutError(tool.name, timeoutMs)));
    onTurnAbort = () => stop(new ToolTransientError(`tool "${tool.name}": the call was cancelled`));
    if (ctx.signal.aborted) onTurnAbort();
    else ctx.signal.addEventListener('abort', onTurnAbort, { once: true });
  });
  deadline.catch(() => {});
  try {
    const signal = AbortSignal.any([ctx.signal, controller.signal]);
    const wait = (ms: number) => waitOn(registry.timer, ms, signal);
    return await Promise.race([Promise.resolve().then(() => tool.invoke(args, { ...ctx, signal, wait })), deadline]);
  } finally {
    cancelTimer();
    ctx.signal.removeEventListener('abort', onTurnAbort);
  }
}

/** `ms` on `timer`, or until `signal` aborts (rejecting with its reason). */
function waitOn(timer: ToolRegistry['timer'], ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      cancel();
      reject(signal.reason);
    };
    const cancel = timer(ms, () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function settle(outcome: unknown, tool = ''): SettledOutcome {
  if (!isRecord(outcome)) return malformed(tool);
  switch (outcome.kind) {
    case 'result':
      return typeof outcome.content === 'string' ? (outcome as unknown as ToolResult) : malformed(tool);
    case 'suspend':
      if (typeof outcome.prompt !== 'string' || !isJson(outcome.state)) {
        return { kind: 'error', error: new ToolError(`tool "${tool}" suspended with a state that is not JSON`) };
      }
      return outcome as unknown as ToolSuspension;
    case 'error': {
      const error = asToolError(outcome.error, tool);
      return { kind: 'error', error };
    }
    default:
      return malformed(tool);
  }
}

/**
 * Transient failures (also an outbound request's timeout or refused connection) and
 * suspensions are thrown; anything else becomes a permanent `ToolError`.
 */
function asToolError(error: unknown, tool: string): ToolError {
  // a sub-Agent's call that waits for a person pauses the run, as the Agent's own would
  if (error instanceof TransientError || error instanceof ToolSuspendedError || error instanceof PauseRequest) throw error;
  if (error instanceof OutboundError && error.transient) throw new ToolTransientError(`tool "${tool}": ${error.message}`, { cause: error });
  if (error instanceof ToolError) return error;
  const message = error instanceof Error ? error.message : 'the tool failed';
  return new ToolError(message || `tool "${tool}" failed`, { cause: error });
}

function malformed(tool: string): SettledOutcome {
  return { kind: 'error', error: new ToolError(`tool "${tool}" returned no result`) };
}

/** Plain JSON only: finite numbers, strings, booleans, null, arrays and plain objects. */
function isJson(value: unknown, depth = 0): value is JsonValue {
  if (depth > 64) return false;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every((v) => isJson(v, depth + 1));
  if (!isRecord(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  return Object.values(value).every((v) => isJson(v, depth + 1));
}
