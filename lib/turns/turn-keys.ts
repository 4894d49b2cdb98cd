/**
 * Idempotency keys of turns: what a request is (its normalized form and fingerprint), how a
 * key is bound to its principal, the run id a keyed first turn gets, and what a key already
 * stands for — in the turn its `turn_number` names, or in a key record for continuing turns
 * sent without one. See execute.ts for where each is used.
 */
import { IdempotencyMismatchError, NotFoundError, TurnInProgressError } from '../store/errors';
import { canonicalJson, sha256 } from '../store/codec';
import { getIdempotency } from '../store/idempotency';
import { type Claim, getHead, getTurn, type SessionHead } from '../store/sessions';
import type { TurnEngine, TurnRequest, TurnResult } from './execute';
import { onBusyView } from './on-busy';
import type { TurnResponse } from './response';
import { resolveQueuedKey } from './turn-queued';

/** The stored answer of a committed turn, byte for byte as a retry gets it. */
export function replayOf(turn: { response: string }): TurnResult {
  return { body: turn.response, response: JSON.parse(turn.response) as TurnResponse, replayed: true };
}

/**
 * What a key already stands for in turn `target` of a loaded run: a committed turn (replay it),
 * a claim still live (`in_flight`: wait for it), or nothing (run the turn; an expired claim of
 * the key is taken over by the claim).
 */
export async function keyedTurn(engine: TurnEngine, head: SessionHead, target: number, keyHash: string, fingerprint: string, ownToken?: string): Promise<{ replay: TurnResult } | 'in_flight' | null> {
  if (head.turn >= target) {
    const turn = await getTurn(engine.store, head.tenant, head.id, target);
    if (!turn || turn.keyHash !== keyHash) return null;
    if (turn.fingerprint !== null && turn.fingerprint !== fingerprint) throw new IdempotencyMismatchError();
    return { replay: replayOf(turn) };
  }
  const claim = head.claim;
  if (head.turn !== target - 1 || !claim || claim.keyHash !== keyHash) return null;
  if (claim.fingerprint !== undefined && claim.fingerprint !== fingerprint) throw new IdempotencyMismatchError();
  if (ownToken !== undefined && claim.token === ownToken) return null;
  return claim.expiresAt > now(engine) ? 'in_flight' : null;
}

export type KnownKey = { replay: TurnResult } | { running: { runId: string; turn: number } } | { replacing: string | null };

/**
 * What the key record of a continuing turn sent without `turn_number` stands for: a committed
 * turn (replay it), a request still running (wait for it), or an attempt that died (take it over).
 */
export async function resolveKey(engine: TurnEngine, request: TurnRequest, key: string, fingerprint: string, wait: boolean, leaseMs: number, ownToken?: string): Promise<KnownKey> {
  const deadline = now(engine) + (engine.idempotencyWaitMs ?? leaseMs);
  for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
    const record = await getIdempotency(engine.store, request.tenant, key);
    if (!record) return { replacing: null };
    if (record.fingerprint !== fingerprint) throw new IdempotencyMismatchError();
    // a double-text's queued input: it becomes a turn whatever happens, and is never taken over
    if (record.queuedFrom !== undefined) return resolveQueuedKey(engine, request.tenant, record, wait);
    // the head before the turn: an attempt that commits between the two reads is then seen
    // committed, never as neither running (the head moved on) nor committed (the turn read first)
    const head = await getHead(engine.store, request.tenant, record.sessionId).catch((error: unknown) => {
      if (error instanceof NotFoundError) return null;
      throw error;
    });
    const turn = await getTurn(engine.store, request.tenant, record.sessionId, record.turn);
    if (turn && turn.committedBy === record.token) return { replay: replayOf(turn) };
    // our own earlier attempt (a redelivered message): the caller continues its claim
    if (head && ownToken !== undefined && record.token === ownToken) return { replacing: record.token };
    const at = now(engine);
    // in flight: its claim is live, or it recorded the key and has not claimed yet
    const claimed = head?.claim?.token === record.token;
    const running = head !== null && (claimed
      ? (head.claim as Claim).expiresAt > at
      : head.turn < record.turn && record.createdAt + leaseMs > at);
    // the attempt died (or lost its race): take it over
    if (!running) return { replacing: record.token };
    if (!wait) return { running: { runId: record.sessionId, turn: record.turn } };
    if (at + pause > deadline) throw new TurnInProgressError(head.turn, head.status);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/** The request as it is fingerprinted and stored: what was asked, not how it was spelled. */
export function normalizedRequest(request: TurnRequest): Record<string, unknown> {
  const { signal: _signal, command: engineCommand, ...runInput } = request.runInput ?? {};
  return {
    workflow_id: request.workflowId,
    run_id: request.runId ?? null,
    // a double-text's turn_number stays what it was sent with (turn-engine.ts admittedTurn)
    turn_number: request.turnNumber ?? request.admittedTurn ?? null,
    version: request.version ?? null,
    command: request.command ?? engineCommand ?? null,
    run_input: runInput,
    // only when the request says it: requests without one keep the fingerprint they always had
    ...(request.onBusy !== undefined && request.onBusy !== 'workflow' ? { on_busy: onBusyView(request.onBusy) } : {}),
  };
}

export function fingerprintOf(request: TurnRequest): string {
  return sha256(canonicalJson(normalizedRequest(request)));
}

/** An Idempotency-Key as stored: hashed with its tenant and principal, so keys of two principals never meet. */
export function keyHashOf(request: Pick<TurnRequest, 'tenant' | 'principal' | 'idempotencyKey'>): string {
  return sha256(`${request.tenant}\n${request.principal ?? ''}\n${request.idempotencyKey ?? ''}`).slice(0, 40);
}

/** The run id a keyed first turn gets: a function of the key, so every retry names the same run. */
export function derivedRunId(keyHash: string): string {
  return sha256(`easel-run:${keyHash}`).slice(0, 32);
}

const now = (engine: TurnEngine) => (engine.clock ?? Date.now)();
