/**
 * Typed errors of the engine. Every error that leaves `Canvas` is one of these, each with a
 * stable `code` (lib/errors.ts) that the HTTP layer maps to a status once (lib/http/errors.ts).
 */
import type { FormField } from './forms';
import { EaselError, type ErrorCode } from '../errors';

export { EaselError, type ErrorCode } from '../errors';

/** One problem found in a DSL; `component_id` is absent for problems of the whole document. */
export interface DslProblem {
  component_id?: string;
  field?: string;
  message: string;
}

export class DslValidationError extends EaselError {
  readonly problems: readonly DslProblem[];

  constructor(problems: readonly DslProblem[]) {
    super('invalid_dsl', `invalid workflow DSL: ${problems.map(formatProblem).join('; ')}`);
    this.problems = problems;
  }
}

function formatProblem(p: DslProblem): string {
  const where = [p.component_id, p.field].filter(Boolean).join('.');
  return where ? `${where}: ${p.message}` : p.message;
}

/** One form value that does not fit its field. */
export interface InputProblem {
  component_id: string;
  field: string;
  message: string;
}

export class InvalidInputsError extends EaselError {
  readonly fields: readonly InputProblem[];

  constructor(fields: readonly InputProblem[]) {
    super(
      'invalid_inputs',
      `invalid inputs: ${fields.map((f) => `${f.field} (${f.message})`).join('; ')}`,
    );
    this.fields = fields;
  }
}

/** The run accepts no further turn (task mode finished, cancelled, aborted). */
export class RunFinishedError extends EaselError {
  constructor(readonly status: string) {
    super('run_finished', `the run is ${status} and accepts no further turn`);
  }
}

/** Form inputs were sent to a run that is not waiting for any. */
export class NotWaitingForInputError extends EaselError {
  constructor(readonly status: string) {
    super('not_waiting_for_input', `the run is ${status}, not waiting for input`);
  }
}

/** A timer was to fire on a run with no form timer armed; `status` is the run's status. */
export class NoTimerArmedError extends EaselError {
  constructor(readonly status: string) {
    super('no_timer_armed', `the run is ${status} with no form timer armed`);
  }
}

/** The turn request itself is malformed (e.g. a run input that is not an object). */
export class InvalidRunInputError extends EaselError {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super('invalid_request', `${field}: ${message}`);
  }
}

/**
 * A failure outside the workflow (a provider's 429/5xx, a timeout, the network). The turn
 * must commit nothing and may be retried; components throw it, the engine passes it through.
 */
export class TransientError extends EaselError {
  constructor(message: string, options?: { cause?: unknown; componentId?: string }) {
    super('unavailable', message, options);
    this.componentId = options?.componentId;
  }
  componentId: string | undefined;
}

/**
 * The host could not keep a checkpoint of a call a component completed (its lease was lost,
 * its store is gone, it is stopping): the batch in flight stops as on a transient failure, and
 * the turn goes on from its last checkpoint, elsewhere or later. `cause` is the host's error.
 */
export class TurnInterruptedError extends TransientError {
  constructor(cause: unknown) {
    super('the turn was interrupted while keeping a checkpoint', { cause });
  }
}

/**
 * Thrown by a component that cannot go on before a person answers (an Agent's tool call that
 * needs approval): the run pauses at the component with these fields, as at a form. The
 * calls it completed are kept with the pause; when the answer comes the component runs again,
 * those calls are answered from their records (`recordedCall`), and `ctx.resumed` holds `data`
 * with the answer in `ctx.formValues`. Not an error of the run: a pause.
 */
export class PauseRequest extends Error {
  constructor(
    readonly fields: readonly FormField[],
    readonly tips: string,
    readonly data: unknown,
  ) {
    super('the component waits for a person to answer');
    this.name = 'PauseRequest';
  }
}

/** A serialized state this engine cannot read (unknown version, wrong shape). */
export class StateVersionError extends EaselError {
  constructor(message: string) {
    super('invalid_state', message);
  }
}

/** A workflow error raised by a component; handled by its `exception_method` or fails the run. */
export class ComponentError extends EaselError {
  constructor(message: string, options?: { cause?: unknown; code?: ErrorCode }) {
    super(options?.code ?? 'component_error', message, options);
  }
}
