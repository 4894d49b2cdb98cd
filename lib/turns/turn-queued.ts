/**
 * A double-text's answer while its input waits (double-text.ts): the input is queued (or its
 * turn is running), and which turn it becomes. Where an Idempotency-Key of a queued input stands
 * now: still queued, running, or committed (its stored answer).
 */
import { EaselError } from '../errors';
import { TurnInProgressError } from '../store/errors';
import type { IdempotencyRecord } from '../store/idempotency';
import { turnCommittedBy } from '../store/inbox';
import { getHead, getTurn } from '../store/sessions';
import type { TurnResponse } from './response';
import type { TurnEngine, TurnResult } from './turn-engine';

/**
 * The input was queued behind the turn in flight (`queued`), or its turn runs now (`running`):
 * the native API answers 202 with it, RAGFlow's routes wait for the turn. Not an error.
 */
export class TurnQueued extends EaselError {
  constructor(
    readonly runId: string,
    /** The turn the input becomes (if every turn ahead of it commits) or is. */
    readonly turn: number,
    readonly state: 'queued' | 'running',
    /** Where the queued input may end up at the earliest (a turn ahead of it given back uncommitted). */
    readonly from: number,
    /** The claim token its turn is committed under: how a waiter finds it. */
    readonly token: string,
  ) {
    super('turn_queued', state === 'queued' ? `the input is queued as turn ${turn}` : `turn ${turn} is running in a worker`);
  }

  /** The 202 body: the same for a retry with the request's Idempotency-Key while the input waits. */
  body(): Record<string, unknown> {
    return { run_id: this.runId, turn_number: this.turn, status: this.state };
  }
}

/**
 * Where the input a key record names as queued stands now: still queued or running (TurnQueued
 * is thrown), or committed (its stored answer). A key of a queued input is never taken over: the
 * input always becomes a turn, so while it is between two places (its turn committing) this
 * looks again, up to the engine's idempotency wait (then 409 `turn_in_progress`, to retry).
 */
export async function resolveQueuedKey(engine: TurnEngine, tenant: string, record: IdempotencyRecord, wait = true): Promise<{ replay: TurnResult }> {
  const from = record.queuedFrom ?? record.turn;
  const deadline = now(engine) + (engine.idempotencyWaitMs ?? engine.leaseMs ?? 60_000);
  for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
    const head = await getHead(engine.store, tenant, record.sessionId);
    const claim = head.claim;
    if (claim?.token === record.token) throw new TurnQueued(head.id, claim.turn, 'running', from, record.token);
    const position = claim?.inbox?.indexOf(record.token) ?? -1;
    if (claim && position >= 0) throw new TurnQueued(head.id, claim.turn + position + 1, 'queued', from, record.token);
    const turn = await turnCommittedBy(engine.store, tenant, record.sessionId, from, Math.max(record.turn, from), record.token);
    const committed = turn === null ? null : await getTurn(engine.store, tenant, record.sessionId, turn);
    if (committed) return { replay: { body: committed.response, response: JSON.parse(committed.response) as TurnResponse, replayed: true } };
    if (!wait || now(engine) + pause > deadline) throw new TurnInProgressError(head.turn, head.status);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

const now = (engine: TurnEngine) => (engine.clock ?? Date.now)();
