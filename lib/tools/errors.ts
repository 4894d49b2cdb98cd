/**
 * Tool failures, split the way model provider failures are (lib/llm/errors): a transient one
 * (429, 5xx, a timeout, the network) is a `TransientError` — the turn commits nothing, fails
 * as `unavailable` and may be retried — and a permanent one is told to the model as the call's
 * result, as RAGFlow does with a tool's exception, so it can try something else.
 */
import { ComponentError, TransientError } from '../canvas/errors';
import type { ErrorCode } from '../errors';
import { isTransientStatus } from '../llm/errors';

/** A permanent failure of one call: the model reads `error: <message>`. */
export class ToolError extends ComponentError {
  constructor(message: string, options?: { cause?: unknown; code?: ErrorCode }) {
    super(message, { ...options, code: options?.code ?? 'tool_error' });
  }
}

/** A failure outside the workflow: the turn fails as `unavailable`, like a model's 5xx. */
export class ToolTransientError extends TransientError {}

/** The call took longer than its timeout; transient, like a model call that timed out. */
export class ToolTimeoutError extends ToolTransientError {
  constructor(
    readonly tool: string,
    readonly timeoutMs: number,
  ) {
    super(`tool "${tool}": no answer within ${timeoutMs} ms`);
  }
}

/**
 * A tool asked for a person's decision and the Agent cannot wait for one yet. A workflow
 * error of the Agent with a stable code, so the run never goes on as if the tool had answered.
 */
export class ToolSuspendedError extends ComponentError {
  constructor(
    readonly tool: string,
    readonly prompt: string,
  ) {
    super(`tool_suspended: the tool "${tool}" asks a person to decide (${JSON.stringify(prompt.slice(0, 200))}); an Agent cannot wait for that yet`, {
      code: 'tool_suspended',
    });
  }
}

/** The DSL names a tool kind the run's registry does not provide. */
export class ToolUnavailableError extends ComponentError {
  constructor(readonly kind: string) {
    super(`tool_unavailable: this run provides no tool of kind "${kind}"`, { code: 'tool_unavailable' });
  }
}

/**
 * The error for an HTTP answer that is not a success, classified as the model providers
 * classify theirs: 408, 409, 425, 429 and 5xx are transient, the rest permanent.
 */
export function toolHttpError(tool: string, status: number, detail?: string): ToolError | ToolTransientError {
  const message = `tool "${tool}": the service answered ${status}${detail ? `: ${detail}` : ''}`;
  return isTransientStatus(status) ? new ToolTransientError(message) : new ToolError(message);
}
