/**
 * Every error code of Easel, and the base class every typed error extends. A leaf module:
 * it imports nothing of ours, so the engine, the store, the outbound client and HTTP all
 * take the base from here. Each module declares its own subclasses (lib/canvas/errors.ts,
 * lib/store/errors.ts, ...); lib/http maps every code to a status, once.
 *
 * A new code is added to `ERROR_CODES` with its doc line; the HTTP tables are typed
 * `Record<ErrorCode, ...>`, so the compiler then asks for its status on both APIs.
 *
 * @example
 *   throw new EaselError('not_found', 'run not found');
 */

/** Each code with what it means. The first group is answered to clients; the rest are not. */
export const ERROR_CODES = {
  // ---- answered to clients (a 4xx, or 503 to retry) ----
  invalid_request: 'The request is malformed: JSON that does not parse, a body or query not matching the schema, a bad cursor.',
  invalid_dsl: 'The workflow DSL does not validate; the answer lists every problem.',
  invalid_inputs: 'Form values that do not fit their fields; the answer names the fields.',
  unauthorized: 'No API key, or one that is unknown or revoked.',
  forbidden: "The key's scope does not allow this route.",
  not_found: 'The item does not exist, or belongs to another tenant.',
  turn_conflict: 'The request named a turn that is not the current one, or another commit got there first.',
  run_finished: 'The run accepts no further turn (task mode finished, cancelled, aborted).',
  turn_in_progress: "Another request holds the claim on the run's next turn.",
  inbox_full: 'A double-text found the run\'s inbox of queued inputs full (10 inputs or 64 KiB by default); nothing was queued, retry once a queued turn has run.',
  not_waiting_for_input: 'Form inputs for a run that is not waiting for them.',
  form_link_expired: 'A form link past its expiry; ask for a new one.',
  form_link_used: "A form link whose form was answered already (through this link or otherwise) or whose run moved on; it works once.",
  no_timer_armed: 'A timer firing (pump-companions) for a run that has no form timer armed; `status` is the run status.',
  migration_refused: 'A paused run cannot move onto another version of its workflow: where it waits is not there, or its fields changed type (the reason names the component and field). Reported per run by the migrate route.',
  idempotency_mismatch: 'This Idempotency-Key was used before with a different request.',
  payload_too_large: 'A body, file, form value or stored item is over its limit.',
  workflow_failed: 'A webhook run answered when it ends (Streaming) failed, was cancelled or aborted; the answer carries `run_id`, `status` and the run\'s `error`.',
  rate_limited: 'A quota or rate limit is spent (turns per minute, model tokens per day, runs started); `Retry-After` says when to try again.',
  unavailable: 'A transient failure (a provider 429/5xx, a timeout, the store): nothing was committed; retry.',
  // ---- not answers for clients: internal signals and failures, logged and answered 500 ----
  invalid_state: 'A serialized state the engine cannot read, or a canvas used out of order.',
  component_error: 'A component failed; the engine reports it in the run (workflow_failed, exception_method).',
  llm_error: 'A model provider refused the request or answered badly (a component error of LLM/Agent).',
  tool_error: 'A tool call failed for good; the Agent tells the model, which may try something else.',
  tool_suspended: 'A tool asked for a person to decide, which an Agent cannot wait for yet (a component error of the Agent).',
  tool_unavailable: 'The DSL names a tool kind the run provides none of (a component error of the Agent).',
  ssrf_blocked: 'The SSRF guard refused an outbound URL (Invoke, webhooks).',
  outbound_failed: 'An outbound HTTP request got no response, and trying again would not help.',
  invalid_config: 'The configuration is invalid (e.g. an SSRF allow-list entry); raised at startup.',
  lease_lost: "A worker's lease on an async turn is gone (another took it over); it stops without writing.",
  claim_lost: "A queued turn's claim was taken over before a worker ran it (reported as turn.rejected).",
  stop_accepted: 'A stop reached a turn running in a worker; the native API answers it 202, not as an error.',
  turn_queued: 'A double-text was queued behind the turn in flight (or its turn runs now); the native API answers it 202, RAGFlow\'s routes wait for its turn.',
  local_setup: 'The local stack (npm start) could not be set up.',
  dynamodb_local_unavailable: 'DynamoDB Local could not be started or reached.',
  internal_error: 'Anything else: answered without details and logged.',
} as const satisfies Record<string, string>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Whether `code` (e.g. read from an answer) is one of ours. */
export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}

export class EaselError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}
