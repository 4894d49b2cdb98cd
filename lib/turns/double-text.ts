/**
 * Double-texting: a turn that finds another turn of its run in flight does what its `on_busy`
 * says (on-busy.ts; docs/double-texting.md has the table):
 *
 * - `reject`: 409 `turn_in_progress`, as always;
 * - `enqueue`: the input joins the run's inbox (lib/store/inbox.ts), in the claim of the turn in
 *   flight, and becomes a turn of its own once the turns ahead of it committed (202);
 * - `interrupt`: likewise, and the turn in flight (an async one) is flagged to stop at its next
 *   checkpoint and commit as `interrupted`;
 * - `rollback`: likewise, and the turn in flight is flagged to be discarded: it commits as
 *   `rolled_back` with the run's state as it was before it (async-turn.ts, unapplied.ts).
 *
 * Inputs always join the back of the inbox, so a run's inputs become turns in the order they
 * were accepted. A turn that claimed nothing yet is not seen in flight: a request that loses to
 * its commit runs again on the new head (execute.ts). Nothing here costs a turn that finds its
 * run free anything: it runs only once a claim has refused the turn.
 */
import { randomBytes } from 'node:crypto';
import { EaselError } from '../errors';
import { IdempotencyMismatchError, TurnInProgressError } from '../store/errors';
import { getIdempotency } from '../store/idempotency';
import { appendToInbox, DEFAULT_INBOX_LIMITS, isStranded, type Promoted, type QueuedInput, rescueStranded } from '../store/inbox';
import { getHead } from '../store/sessions';
import { getWorkflow } from '../store/workflows';
import { type OnBusy, readOnBusy } from './on-busy';
import type { QueueMessage } from './queue';
import { checkTurnQuota } from './quotas';
import { fingerprintOf, keyHashOf, resolveKey } from './turn-keys';
import { resolveQueuedKey, TurnQueued } from './turn-queued';
import { DEFAULT_LEASE_MS, type TurnEngine, type TurnRequest, type TurnResult } from './turn-engine';

/** What a queued input carries to its turn (the store's `QueuedInput.input`): a queue message's fields. */
export interface QueuedRequest {
  run_input: QueueMessage['run_input'];
  actor?: QueueMessage['actor'];
  callback_url?: string;
  /** The owners whose files the input may name (lib/turns/files.ts FileAccess); absent: any of the tenant's. */
  file_owners?: string[] | null;
}

/** How long a claim made for a worker waits for it, unless the engine says. */
export const DEFAULT_ASYNC_HOLD_MS = 20 * 60_000;
export const holdOf = (engine: TurnEngine) => engine.asyncHoldMs ?? DEFAULT_ASYNC_HOLD_MS;

/**
 * The turn was refused by another turn's claim (`refusal`, which names it): acts as the
 * request's `on_busy` says. Throws the refusal (`reject`, or a synchronous turn met by
 * `interrupt`/`rollback` without `if_sync: enqueue`), TurnQueued (the input was queued: 202),
 * or returns the stored answer of a retried key; `again` when the turn in flight is gone by now
 * (committed or given back): the caller runs the request on the run as it is, its `turn_number`
 * admitted already. `ownToken`: the token this attempt recorded its key record under.
 */
export async function whenBusy(engine: TurnEngine, request: TurnRequest, refusal: TurnInProgressError, ownToken?: string): Promise<'again' | { replay: TurnResult }> {
  const runId = request.runId;
  let error = refusal;
  let claim = refusal.claim;
  // a stop keeps its own rules: 202 against an async turn (execute.ts), 409 against the others
  if (!runId || !claim || request.command === 'stop') throw refusal;
  const run = { tenant: request.tenant, workflowId: request.workflowId, runId };
  // a claim nobody works on, with queued inputs: the first of them takes it over, whoever finds it
  if (isStranded(claim, now(engine))) {
    const promoted = await rescueStranded(engine.store, request.tenant, runId, claim, holdOf(engine));
    if (promoted) await sendPromoted(engine, run, promoted);
    const head = await getHead(engine.store, request.tenant, runId);
    if (!head.claim) return 'again';
    claim = head.claim;
    error = new TurnInProgressError(head.turn, head.status, claim);
  }
  const onBusy = await settingOf(engine, request);
  if (onBusy.strategy === 'reject') throw error;
  // run out, and holding nothing queued: the slot is free to take
  if (claim.expiresAt <= now(engine)) return 'again';
  let strategy = onBusy.strategy;
  if ((strategy === 'interrupt' || strategy === 'rollback') && !claim.async) {
    if (onBusy.ifSync !== 'enqueue') throw error;
    strategy = 'enqueue';
  }
  if (!engine.enqueue) throw new EaselError('invalid_request', `on_busy "${onBusy.strategy}" queues the input for a worker, and no turn queue is configured here`);

  const keyHash = request.idempotencyKey !== undefined ? keyHashOf(request) : undefined;
  const fingerprint = fingerprintOf(request);
  let replacing: string | null = null;
  if (keyHash) {
    const known = await knownKey(engine, request, keyHash, fingerprint, error, ownToken);
    if ('replay' in known) return known;
    replacing = known.replacing;
  }
  await checkTurnQuota(engine, request);
  const entry: QueuedInput = { token: randomBytes(16).toString('hex'), ...(keyHash ? { keyHash, fingerprint } : {}), input: queuedRequest(request) };
  const flag = strategy === 'interrupt' ? 'interrupted' as const : strategy === 'rollback' ? 'rolled_back' as const : undefined;
  for (let attempt = 0; attempt < 20; attempt++) {
    const outcome = await appendToInbox(engine.store, {
      tenant: request.tenant,
      id: runId,
      claim,
      entry,
      limits: engine.inboxLimits ?? DEFAULT_INBOX_LIMITS,
      ...(flag ? { flag } : {}),
      ...(keyHash ? { keyRecord: { record: { key: keyHash, fingerprint, sessionId: runId, token: entry.token, createdAt: now(engine) }, replacing } } : {}),
      seen: { turn: error.currentTurn, status: error.status },
    });
    if ('queued' in outcome) throw new TurnQueued(runId, outcome.queued.turn, 'queued', claim.turn, entry.token);
    if ('moved' in outcome) return 'again';
    if ('again' in outcome) {
      claim = outcome.again;
      continue;
    }
    // another request with this key got there first
    const known = await knownKey(engine, request, keyHash as string, fingerprint, error, ownToken);
    if ('replay' in known) return known;
    replacing = known.replacing;
  }
  throw error;
}

/** The request's `on_busy`: its own, or (`workflow`) its workflow's setting — read only now, when the run is busy. */
async function settingOf(engine: TurnEngine, request: TurnRequest): Promise<OnBusy> {
  if (request.onBusy === undefined) return readOnBusy(undefined);
  if (request.onBusy !== 'workflow') return request.onBusy;
  const workflow = await getWorkflow(engine.store, request.tenant, request.workflowId);
  return readOnBusy(workflow.settings.on_busy);
}

/**
 * What the request's Idempotency-Key stands for already: a queued input (still queued or
 * running: TurnQueued; committed: its answer), a turn run directly (its answer; 409 while it
 * runs), or nothing — or an attempt that died, or this attempt's own record (`replacing`).
 */
async function knownKey(engine: TurnEngine, request: TurnRequest, keyHash: string, fingerprint: string, busy: TurnInProgressError, ownToken?: string): Promise<{ replay: TurnResult } | { replacing: string | null }> {
  const record = await getIdempotency(engine.store, request.tenant, keyHash);
  if (!record) return { replacing: null };
  if (record.fingerprint !== fingerprint) throw new IdempotencyMismatchError();
  if (record.queuedFrom !== undefined) return resolveQueuedKey(engine, request.tenant, record);
  if (ownToken !== undefined && record.token === ownToken) return { replacing: ownToken };
  const known = await resolveKey(engine, request, keyHash, fingerprint, false, engine.leaseMs ?? DEFAULT_LEASE_MS);
  if ('replay' in known) return known;
  if ('running' in known) throw busy;
  return { replacing: known.replacing };
}

/** What the worker needs of the request to run it as its own turn later. */
function queuedRequest(request: TurnRequest): QueuedRequest {
  const { signal: _signal, ...input } = request.runInput ?? {};
  return {
    run_input: {
      ...(typeof input.query === 'string' ? { query: input.query } : {}),
      ...(input.inputs ? { inputs: input.inputs } : {}),
      ...(input.files ? { files: input.files } : {}),
      ...(input.user_id ? { user_id: input.user_id } : {}),
    },
    ...(request.actor ? { actor: { kind: request.actor.kind, id: request.actor.id, ...(request.actor.key_id ? { key_id: request.actor.key_id } : {}) } } : {}),
    ...(request.callbackUrl ? { callback_url: request.callbackUrl } : {}),
    ...(request.fileAccess ? { file_owners: request.fileAccess.owners === null ? null : [...request.fileAccess.owners] } : {}),
  };
}

/**
 * Sends the turn a commit (or a claim given back) claimed for the run's first queued input to
 * the worker. If the message cannot be sent, the turn is not lost: its claim runs out and the
 * next request on the run sends for it again (`rescueStranded`).
 */
export async function sendPromoted(engine: TurnEngine, run: { tenant: string; workflowId: string; runId: string }, promoted: Promoted): Promise<void> {
  const queued = promoted.entry.input as QueuedRequest;
  const message: QueueMessage = {
    tenant: run.tenant,
    workflow_id: run.workflowId,
    run_id: run.runId,
    turn_number: promoted.turn - 1,
    run_input: queued.run_input,
    ...(queued.actor ? { actor: queued.actor } : {}),
    ...(queued.callback_url ? { callback_url: queued.callback_url } : {}),
    ...(queued.file_owners !== undefined ? { file_owners: queued.file_owners } : {}),
    claim: { token: promoted.token, turn: promoted.turn },
  };
  try {
    if (!engine.enqueue) throw new Error('no turn queue is configured');
    await engine.enqueue(message);
  } catch (error) {
    engine.log?.('a queued turn could not be sent to the worker; the next request on the run sends for it once its claim runs out', {
      tenant: run.tenant,
      run_id: run.runId,
      turn: promoted.turn,
      error: error instanceof Error ? error.message : String(error),
    });
  }
}

const now = (engine: TurnEngine) => (engine.clock ?? Date.now)();
