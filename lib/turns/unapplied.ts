/**
 * Turns that leave the run's state as it was before them: an async turn a newer input discarded
 * (`rolled_back`, on_busy `rollback`), and a queued input the run no longer takes when its turn
 * comes (`rejected`: its form changed, the run finished). Each is a committed turn like any
 * other — ordered, idempotent, audited with who acted — whose record holds the state of the turn
 * before it and no conversation, so the run's history has neither its input nor any answer to
 * it. A rolled-back turn keeps the calls it had made (models, tools, Invoke, e-mail): they
 * happened and cannot be undone, and its answer lists them as `side_effects`.
 */
import { type CallRecord, Canvas, type TurnUsage } from '../canvas';
import { EaselError } from '../errors';
import { type Claim, commitTurn, loadSession } from '../store/sessions';
import { canvasOptions, compiled, withHistory } from './compiled';
import { sendPromoted } from './double-text';
import { runOf } from './execute';
import { countTurn } from './quotas';
import type { SideEffect, TurnResponse } from './response';
import { ttlOf, type TurnEngine, type TurnRequest, type TurnResult } from './turn-engine';
import { normalizedRequest } from './turn-keys';

/** What a queued input's turn may be refused for when it comes: each of these commits it as `rejected`. */
const REFUSALS = new Set<string>(['run_finished', 'not_waiting_for_input', 'invalid_inputs', 'invalid_request', 'no_timer_armed', 'payload_too_large']);

export function isRefusal(error: unknown): error is EaselError {
  return error instanceof EaselError && REFUSALS.has(error.code);
}

export interface Unapplied {
  status: 'rolled_back' | 'rejected';
  /** A rolled-back turn's calls: they are listed, and kept in its record. */
  calls?: { records: readonly CallRecord[]; dropped: number };
  usage?: TurnUsage;
  /** Why a queued input was rejected. */
  error?: { code: string; message: string };
  /** Blobs the session holds beyond its committed turns' (an async turn's checkpoints'). */
  storedBlobs?: ReadonlySet<string>;
  /** How long the claim of the next queued input waits for its worker. */
  holdMs: number;
}

/**
 * Commits turn `claim.turn` with the run's state as it was before it (fenced by the worker's
 * lease; a rollback only while the rollback is still what is asked of it). The state is read
 * again from the last committed turn: the canvas that ran the turn changed its copy.
 */
export async function commitUnapplied(engine: TurnEngine, request: TurnRequest & { runId: string }, claim: Claim, lease: { owner: string }, u: Unapplied): Promise<TurnResult> {
  const loaded = await loadSession(engine.store, request.tenant, request.runId, 0);
  const { head } = loaded;
  const workflow = await compiled(engine, request.tenant, head.workflowId, head.version);
  const options = canvasOptions(engine, head.id, head.tenant, head.dialect);
  const canvas = loaded?.latest ? Canvas.restore(workflow, withHistory(loaded.latest.state, [], workflow), options) : Canvas.create(workflow, options);
  const state = canvas.serialize();
  const prompt = canvas.prompt;
  const waiting = canvas.status === 'waiting_for_input';
  const calls = u.calls ?? { records: [], dropped: 0 };
  const usage = u.usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, calls: 0 };
  const response: TurnResponse = {
    run_id: head.id,
    workflow_id: head.workflowId,
    version: head.version,
    status: u.status,
    turn_number: claim.turn,
    is_waiting_for_input: waiting,
    is_completed: false,
    is_terminal: canvas.isTerminal,
    error: u.error ?? null,
    next_input_hint: waiting && prompt ? { component_id: prompt.component_ids[0] ?? '', tips: prompt.tips, inputs: prompt.inputs } : null,
    has_active_companions: false,
    has_background_work: waiting && prompt?.due_at !== undefined,
    outputs: null,
    usage,
    events: [],
    created_at: new Date((engine.clock ?? Date.now)()).toISOString(),
    ...(u.status === 'rolled_back' ? { side_effects: calls.records.map(sideEffectOf) } : {}),
  };
  const body = JSON.stringify(response);
  const { promoted } = await commitTurn(engine.store, {
    head,
    turn: claim.turn,
    token: claim.token,
    claim,
    status: u.status,
    runStatus: canvas.status,
    payload: {
      state: { ...state, history: [] },
      request: { ...normalizedRequest(request), ...(request.actor ? { actor: request.actor } : {}) },
      response: body,
      history: [],
      calls: { records: [...calls.records], dropped: calls.dropped },
    },
    keyHash: claim.keyHash ?? null,
    fingerprint: claim.fingerprint ?? null,
    ttlSeconds: ttlOf(engine),
    ...(engine.listingRefreshMs !== undefined ? { listingRefreshMs: engine.listingRefreshMs } : {}),
    dueAt: waiting ? (prompt?.due_at ?? null) : null,
    storedBlobs: new Set([...loaded.storedBlobs, ...(u.storedBlobs ?? [])]),
    lease: { owner: lease.owner, allowCancel: true, ...(u.status === 'rolled_back' ? { cancelAs: 'rolled_back' as const } : {}) },
    queueHoldMs: u.holdMs,
  });
  if (promoted) await sendPromoted(engine, runOf(head), promoted);
  // the tokens a discarded turn spent were spent all the same
  if (usage.total_tokens > 0) await countTurn(engine, request, usage.total_tokens);
  return { body, response, replayed: false };
}

/** A queued input refused when its turn came (`refusal`): its turn commits as `rejected`, saying why. */
export async function rejectQueued(engine: TurnEngine, request: TurnRequest & { runId: string }, claim: Claim, lease: { owner: string }, refusal: EaselError, holdMs: number): Promise<TurnResult> {
  return commitUnapplied(engine, request, claim, lease, { status: 'rejected', error: { code: refusal.code, message: refusal.message }, holdMs });
}

/** A call as a discarded turn lists it: what was called, not what was asked or answered. */
function sideEffectOf(record: CallRecord): SideEffect {
  return { component_id: record.component_id, kind: record.kind, ...(record.name ? { name: record.name } : {}), ordinal: record.ordinal, path: [...record.path], status: record.status };
}
