/**
 * What the store refuses, as typed errors carrying what the caller needs to answer: a lost race
 * says which turn is current and in which status. Infrastructure failures (throttling, the
 * network, DynamoDB 5xx) are `StoreUnavailableError`: transient, nothing was committed.
 */
import { TransientError } from '../canvas/errors';
import { EaselError } from '../errors';
import type { Claim } from './turn-slot';

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

/**
 * Another request holds the claim on the next turn. `claim` is that claim as it was seen, when
 * the refusal came from it (what a double-text acts on: lib/turns/double-text.ts).
 */
export class TurnInProgressError extends EaselError {
  constructor(
    readonly currentTurn: number,
    readonly status: string,
    readonly claim?: Claim,
  ) {
    super('turn_in_progress', `turn ${currentTurn + 1} of this run is in progress`);
  }
}

/** The run's inbox of queued inputs is full (lib/store/inbox.ts): nothing was queued. */
export class InboxFullError extends EaselError {
  constructor(
    readonly currentTurn: number,
    readonly status: string,
    readonly limit: { entries: number; bytes: number },
  ) {
    super('inbox_full', `this run already has the most inputs queued it takes (${limit.entries}, or ${Math.round(limit.bytes / 1024)} KiB); retry once a queued turn has run`);
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

/** How a flagged async turn must end: a stop, an interrupt or a rollback (lib/turns/double-text.ts). */
export type CancelMode = 'cancelled' | 'interrupted' | 'rolled_back';

/**
 * A stop (or an interrupt, or a rollback) is pending on the async turn a worker runs: it must
 * end the turn as `mode` says.
 */
export class CancelRequestedError extends Error {
  constructor(readonly mode: CancelMode = 'cancelled') {
    super(mode === 'cancelled' ? 'a stop is pending on this turn' : `this turn is to end as ${mode}`);
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
