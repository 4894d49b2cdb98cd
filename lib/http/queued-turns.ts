/**
 * A turn handed to the queue worker: claimed here — so concurrent requests meet it — then
 * queued with its claim. If the queue refuses the message, the claim is given back and nothing
 * was started. Used by `Prefer: respond-async` (routes/execute.ts) and webhooks.
 */
import { releaseClaim } from '../store/sessions';
import { claimNextTurn, type TurnRequest, type TurnResult } from '../turns/execute';
import type { QueueMessage } from '../turns/queue';
import type { AppDeps } from './app';
import { HttpError } from './errors';

export type QueuedTurn = { replay: TurnResult } | { running: { runId: string; turn: number } } | { queued: { runId: string; turn: number } };

/** `message` is what the worker needs besides the run, the turn and the claim. */
export async function queueTurn(
  deps: AppDeps,
  request: TurnRequest,
  message: Pick<QueueMessage, 'run_input'> & Partial<Pick<QueueMessage, 'idempotency_key' | 'callback_url'>>,
): Promise<QueuedTurn> {
  if (!deps.enqueue) throw new HttpError('invalid_request', 'asynchronous turns are not configured here (no turn queue)');
  const begun = await claimNextTurn(deps.engine, request, { leaseMs: deps.asyncLeaseMs ?? 20 * 60_000, waitForSameKey: false, async: true });
  if ('replay' in begun || 'running' in begun) return begun;
  const { head } = begun.prepared;
  try {
    await deps.enqueue({
      tenant: request.tenant,
      workflow_id: request.workflowId,
      run_id: head.id,
      turn_number: head.turn,
      ...message,
      ...(request.actor ? { actor: request.actor } : {}),
      claim: { token: begun.claim.token, turn: begun.claim.turn },
    });
  } catch (error) {
    await releaseClaim(deps.engine.store, head, begun.claim).catch(() => undefined);
    // what the queue said is for the logs: it may name infrastructure
    deps.logger?.error('the turn could not be queued', { error: error instanceof Error ? error.message : String(error) });
    throw new HttpError('unavailable', 'the turn could not be queued; nothing was started');
  }
  return { queued: { runId: head.id, turn: begun.claim.turn } };
}
