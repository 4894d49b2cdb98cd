/**
 * What the store refuses, as typed errors carrying what the caller needs to answer: a lost race
 * says which turn is current and in which status. Infrastructure failures (throttling, the
 * network, DynamoDB 5xx) are `StoreUnavailableError`: transient, nothing was committed.
 */
import { TransientError } from '../canvas/errors';
import { EaselError } from '../errors';

export class NotFoundError extends EaselError {
  constructor(readonly what: string) {
    super('not_found', `${what} not found`);
  }
}

/** The request named a turn that is not the current one, or another commit got there first. */
export class TurnConflictError extends EaselError {
  constructor(
    readonly currentTurn: number,
    readonly status: string,
  ) {
    super('turn_conflict', `the run is at turn ${currentTurn} (${status})`);
  }
}

/** Another request holds the claim on the next turn. */
export class TurnInProgressError extends EaselError {
  constructor(
    readonly currentTurn: number,
    readonly status: string,
  ) {
    super('turn_in_progress', `turn ${currentTurn + 1} of this run is in progress`);
  }
}

/**
 * A worker's lease on an async turn is gone: another worker took the turn over (this one was
 * presumed dead), or the turn was committed or given up. The worker must stop without writing.
 */
export class LeaseLostError extends EaselError {
  constructor() {
    super('lease_lost', 'this worker no longer holds the turn (another took it over)');
  }
}

/** A stop is pending on the async turn a worker runs: it must end the turn as cancelled. */
export class CancelRequestedError extends Error {
  constructor() {
    super('a stop is pending on this turn');
  }
}

export class IdempotencyMismatchError extends EaselError {
  constructor() {
    super('idempotency_mismatch', 'this Idempotency-Key was used with a different request');
  }
}

export class StoreUnavailableError extends TransientError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * A session with this id exists already: a first turn whose run id is derived from its
 * Idempotency-Key met an earlier attempt with the same key (the caller resolves the key).
 */
export class RunExistsError extends Error {
  constructor(readonly id: string) {
    super(`run ${id} exists already`);
  }
}
