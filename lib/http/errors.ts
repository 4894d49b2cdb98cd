/**
 * One mapping from error codes to HTTP statuses, and the error body `{code, error, ...}`.
 * Anything unknown is logged by the caller and answered 500 without details.
 */
import { DslValidationError, InvalidInputsError } from '../canvas/errors';
import { EaselError, type ErrorCode } from '../errors';
import { InboxFullError, TurnConflictError, TurnInProgressError } from '../store/errors';
import { RateLimitedError } from '../turns/quotas';

/** The status of codes that are not answers for a client: logged, answered as `INTERNAL_ERROR`. */
export const INTERNAL_STATUS = 500;

/**
 * The native API's status for every code (lib/errors.ts says what each means). Typed by
 * `ErrorCode`, so a new code does not compile until it has its status here.
 */
export const STATUS_BY_CODE: Readonly<Record<ErrorCode, number>> = {
  invalid_request: 400,
  invalid_dsl: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  turn_conflict: 409,
  run_finished: 409,
  turn_in_progress: 409,
  inbox_full: 409,
  not_waiting_for_input: 409,
  no_timer_armed: 409,
  migration_refused: 409,
  form_link_expired: 410,
  form_link_used: 410,
  payload_too_large: 413,
  invalid_inputs: 422,
  idempotency_mismatch: 422,
  workflow_failed: 422,
  rate_limited: 429,
  unavailable: 503,
  // not answers for clients: if one gets this far, it is a defect, logged and answered 500
  invalid_state: INTERNAL_STATUS,
  component_error: INTERNAL_STATUS,
  llm_error: INTERNAL_STATUS,
  tool_error: INTERNAL_STATUS,
  tool_suspended: INTERNAL_STATUS,
  tool_unavailable: INTERNAL_STATUS,
  ssrf_blocked: INTERNAL_STATUS,
  outbound_failed: INTERNAL_STATUS,
  invalid_config: INTERNAL_STATUS,
  lease_lost: INTERNAL_STATUS,
  claim_lost: INTERNAL_STATUS,
  // app.onError answers a StopAccepted 202 before this table is read
  stop_accepted: INTERNAL_STATUS,
  // likewise a TurnQueued (a double-text accepted)
  turn_queued: INTERNAL_STATUS,
  local_setup: INTERNAL_STATUS,
  dynamodb_local_unavailable: INTERNAL_STATUS,
  internal_error: INTERNAL_STATUS,
};

export interface ErrorBody {
  code: ErrorCode;
  error: string;
  [extra: string]: unknown;
}

/** An error answered as it is (auth, validation of the HTTP request itself). */
export class HttpError extends EaselError {
  constructor(
    code: ErrorCode,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(code, message);
  }
}

/**
 * The validation hook of every OpenAPIHono app (the main one and sub-apps): a request that
 * does not match its schema is `invalid_request` naming the first field (`field`, as every
 * refusal of one field does), with all of them in `fields`.
 */
export function validationHook(result: { success: boolean; error?: { issues: readonly { path: readonly PropertyKey[]; message: string; keys?: readonly string[] }[] } }): void {
  if (result.success) return;
  const issues = result.error?.issues ?? [];
  // an unknown key is named itself, not the object it is in
  const path = (i: { path: readonly PropertyKey[]; keys?: readonly string[] }) => [...i.path, ...(i.keys?.slice(0, 1) ?? [])].map(String).join('.');
  const issue = issues[0];
  const field = (issue && path(issue)) || 'body';
  throw new HttpError('invalid_request', `${field}: ${issue?.message ?? 'invalid'}`, {
    field,
    fields: issues.map((i) => ({ field: path(i), message: i.message })),
  });
}

/**
 * The status, body and headers for an error a client may be told about; undefined for anything
 * else (not an EaselError, or a code whose status is `INTERNAL_STATUS`): the caller logs it and
 * answers `INTERNAL_ERROR`.
 */
export function errorResponse(error: unknown): { status: number; body: ErrorBody; headers?: Record<string, string> } | undefined {
  if (!(error instanceof EaselError)) return undefined;
  // `??`: a code forced past the compiler (a cast, a plain object) is not one to explain
  const status = STATUS_BY_CODE[error.code] ?? INTERNAL_STATUS;
  if (status === INTERNAL_STATUS) return undefined;
  const body: ErrorBody = { code: error.code, error: error.message };
  if (error instanceof HttpError) Object.assign(body, error.extra);
  if (error instanceof DslValidationError) body.problems = error.problems;
  if (error instanceof InvalidInputsError) body.fields = error.fields;
  if (error instanceof TurnConflictError || error instanceof TurnInProgressError || error instanceof InboxFullError) {
    body.current_turn_number = error.currentTurn;
    body.status = error.status;
  }
  if (error instanceof InboxFullError) body.limit = error.limit;
  if ('status' in error && typeof error.status === 'string' && body.status === undefined) body.status = error.status;
  if (error instanceof RateLimitedError) {
    body.limit = error.limit;
    body.retry_after = error.retryAfter;
    return { status, body, headers: retryAfterHeader(error) };
  }
  return { status, body };
}

/** `Retry-After` (seconds) of a spent quota; none for other errors. */
export function retryAfterHeader(error: unknown): Record<string, string> | undefined {
  return error instanceof RateLimitedError ? { 'retry-after': String(error.retryAfter) } : undefined;
}

export const INTERNAL_ERROR: ErrorBody = { code: 'internal_error', error: 'internal error' };
