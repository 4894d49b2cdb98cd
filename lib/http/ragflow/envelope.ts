/**
 * RAGFlow's API conventions: HTTP 200 with `{code, message, data}`; code 0 for success,
 * 100 unexpected, 101 bad argument, 102 data (not found), 103 operation refused (conflict,
 * ownership), 109 authentication. Errors of the engine and the store map onto them once, here.
 */
import type { Context } from 'hono';
import { isRecord } from '../../canvas/references';
import { EaselError, type ErrorCode } from '../../errors';
import { errorResponse, retryAfterHeader } from '../errors';

export const RAGFLOW = { ok: 0, exception: 100, argument: 101, data: 102, operation: 103, auth: 109 } as const;

/** A RAGFlow code that reports a failure (any but `ok`). */
export type RagflowFailureCode = Exclude<(typeof RAGFLOW)[keyof typeof RAGFLOW], typeof RAGFLOW.ok>;

/**
 * The RAGFlow envelope code for every code (lib/errors.ts), beside its native status
 * (`STATUS_BY_CODE`): not found is `data`, conflicts and scope are `operation`, the rest of
 * what the client sent wrong is `argument`, and what it cannot fix is `exception`. Typed by
 * `ErrorCode`, so a new code does not compile until it has its code here.
 */
export const RAGFLOW_BY_CODE: Readonly<Record<ErrorCode, RagflowFailureCode>> = {
  invalid_request: RAGFLOW.argument,
  invalid_dsl: RAGFLOW.argument,
  unauthorized: RAGFLOW.auth,
  forbidden: RAGFLOW.operation,
  not_found: RAGFLOW.data,
  turn_conflict: RAGFLOW.operation,
  run_finished: RAGFLOW.operation,
  turn_in_progress: RAGFLOW.operation,
  inbox_full: RAGFLOW.operation,
  not_waiting_for_input: RAGFLOW.operation,
  form_link_expired: RAGFLOW.operation,
  form_link_used: RAGFLOW.operation,
  no_timer_armed: RAGFLOW.operation,
  migration_refused: RAGFLOW.operation,
  payload_too_large: RAGFLOW.argument,
  invalid_inputs: RAGFLOW.argument,
  idempotency_mismatch: RAGFLOW.argument,
  workflow_failed: RAGFLOW.exception,
  rate_limited: RAGFLOW.operation,
  unavailable: RAGFLOW.exception,
  invalid_state: RAGFLOW.exception,
  component_error: RAGFLOW.exception,
  llm_error: RAGFLOW.exception,
  tool_error: RAGFLOW.exception,
  tool_suspended: RAGFLOW.exception,
  tool_unavailable: RAGFLOW.exception,
  ssrf_blocked: RAGFLOW.exception,
  outbound_failed: RAGFLOW.exception,
  invalid_config: RAGFLOW.exception,
  lease_lost: RAGFLOW.exception,
  claim_lost: RAGFLOW.exception,
  stop_accepted: RAGFLOW.exception,
  turn_queued: RAGFLOW.exception,
  local_setup: RAGFLOW.exception,
  dynamodb_local_unavailable: RAGFLOW.exception,
  internal_error: RAGFLOW.exception,
};

export class RagflowError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** `{code: 0, data}` — RAGFlow drops `message` on success. */
export function ok(c: Context, data?: unknown): Response {
  return c.json(data === undefined ? { code: 0 } : { code: 0, data });
}

/** `{code: 0, message: "success", data}` — the shape of its create/update/delete answers. */
export function success(c: Context, data: unknown = true): Response {
  return c.json({ code: 0, message: 'success', data });
}

/**
 * A success whose `message` carries what a client may want to know (an import's warnings)
 * where RAGFlow says "success": its clients read `message` only when `code` is not 0.
 */
export function successWith(c: Context, data: unknown, message: string | undefined): Response {
  return c.json({ code: 0, message: message ?? 'success', data });
}

export function failure(c: Context, code: number, message: string, data?: unknown): Response {
  return c.json(data === undefined ? { code, message } : { code, message, data });
}

/**
 * The RAGFlow code and message for any error thrown while serving a RAGFlow route. An
 * EaselError keeps its message (RAGFlow shows its exceptions' text too); anything else is
 * `internal error`, without details. A spent quota is code 103 with its message, answered with
 * a `Retry-After` header (`ragflowHeaders`).
 */
export function toRagflow(error: unknown): { code: number; message: string; data?: unknown } {
  if (error instanceof RagflowError) return { code: error.code, message: error.message, ...(error.data !== undefined ? { data: error.data } : {}) };
  if (!(error instanceof EaselError)) return { code: RAGFLOW.exception, message: 'internal error' };
  // `??`: a code forced past the compiler (a cast, a plain object) is an unexpected one
  const code = RAGFLOW_BY_CODE[error.code] ?? RAGFLOW.exception;
  const body = errorResponse(error)?.body;
  return {
    code,
    message: error.message,
    ...(body?.fields ? { data: { fields: body.fields } } : {}),
    ...(body?.problems ? { data: { problems: body.problems } } : {}),
  };
}

/** The headers an error's envelope is answered with: `Retry-After` for a spent quota. */
export function ragflowHeaders(error: unknown): Record<string, string> {
  return retryAfterHeader(error) ?? {};
}

/** Runs a handler, answering any error in RAGFlow's envelope (HTTP 200, as RAGFlow does). */
export function guarded(handler: (c: Context) => Promise<Response>, onUnknown?: (error: unknown) => void) {
  return async (c: Context): Promise<Response> => {
    try {
      return await handler(c);
    } catch (error) {
      const mapped = toRagflow(error);
      if (mapped.code === RAGFLOW.exception && !(error instanceof EaselError)) onUnknown?.(error);
      return c.json(mapped, 200, ragflowHeaders(error));
    }
  };
}

/** RAGFlow's booleans in query strings: false only when spelled "false". */
export function queryFlag(value: string | undefined, fallback = true): boolean {
  if (value === undefined) return fallback;
  return !(value === 'false' || value === 'False');
}

export function epochMs(iso: string): number {
  return Date.parse(iso);
}

/** RFC 1123, as RAGFlow formats `create_date`. */
export function httpDate(iso: string): string {
  return new Date(iso).toUTCString();
}

/** The request's JSON object; an empty body counts as `{}`, as RAGFlow reads it. */
export async function jsonBody(c: Context): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  if (text.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(text);
    if (isRecord(parsed)) return parsed;
  } catch {
    // refused below
  }
  throw new RagflowError(RAGFLOW.argument, 'The request body must be a JSON object.');
}
