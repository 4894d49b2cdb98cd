/**
 * One mapping from error codes to HTTP statuses, and the error body `{code, error, ...}`.
 * Anything unknown is logged by the caller and answered 500 without details.
 */
import { DslValidationError, EaselError, InvalidInputsError } from '../canvas/errors';
import { TurnConflictError, TurnInProgressError } from '../store/errors';

export const STATUS_BY_CODE: Readonly<Record<string, number>> = {
  invalid_request: 400,
  invalid_dsl: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  turn_conflict: 409,
  run_finished: 409,
  turn_in_progress: 409,
  not_waiting_for_input: 409,
  payload_too_large: 413,
  invalid_inputs: 422,
  idempotency_mismatch: 422,
  unavailable: 503,
};

export interface ErrorBody {
  code: string;
  error: string;
  [extra: string]: unknown;
}

/** An error answered as it is (auth, validation of the HTTP request itself). */
export class HttpError extends EaselError {
  constructor(
    code: string,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(code, message);
  }
}

/**
 * The validation hook of every OpenAPIHono app (the main one and sub-apps): a request that
 * does not match its schema is `invalid_request` naming the first field, with all of them in
 * `fields`.
 */
export function validationHook(result: { success: boolean; error?: { issues: readonly { path: readonly PropertyKey[]; message: string }[] } }): void {
  if (result.success) return;
  const issues = result.error?.issues ?? [];
  const path = (i: { path: readonly PropertyKey[] }) => i.path.map(String).join('.');
  const issue = issues[0];
  throw new HttpError('invalid_request', `${(issue && path(issue)) || 'body'}: ${issue?.message ?? 'invalid'}`, {
    fields: issues.map((i) => ({ field: path(i), message: i.message })),
  });
}

export function errorResponse(error: unknown): { status: number; body: ErrorBody } | undefined {
  if (!(error instanceof EaselError)) return undefined;
  const status = STATUS_BY_CODE[error.code];
  if (status === undefined) return undefined;
  const body: ErrorBody = { code: error.code, error: error.message };
  if (error instanceof HttpError) Object.assign(body, error.extra);
  if (error instanceof DslValidationError) body.problems = error.problems;
  if (error instanceof InvalidInputsError) body.fields = error.fields;
  if (error instanceof TurnConflictError || error instanceof TurnInProgressError) {
    body.current_turn_number = error.currentTurn;
    body.status = error.status;
  }
  if ('status' in error && typeof error.status === 'string' && body.status === undefined) body.status = error.status;
  return { status, body };
}

export const INTERNAL_ERROR: ErrorBody = { code: 'internal_error', error: 'internal error' };
