/**
 * Queue-triggered turns. A message starts or resumes a run:
 *
 *   {tenant, workflow_id, run_id?, turn_number?, version?, run_input, idempotency_key?,
 *    callback_url?, claim?: {token, turn}, actor?: {kind, id, key_id?}}
 *
 * Resumes must carry `turn_number`; `claim` marks an async turn already claimed by the HTTP
 * request that queued it (its quotas were judged there; `actor` is who sent it, so that the
 * worker counts the turn's tokens against them). Every turn run here is an async turn (async-turn.ts): checkpointed
 * between batches, resumable by another worker. Outcomes: done (the callback is told),
 * continued (suspended before the invocation ends and queued again, claim included), retry
 * (another worker holds the turn, or a transient failure: the message comes back later,
 * and resumes from the last checkpoint), superseded (this worker was presumed dead and another
 * took the turn over: it ends without writing), or a permanent failure (invalid message, stale
 * turn, unknown run, refused inputs, a claim another request took before any worker ran it:
 * reported and dropped, never retried). Duplicate deliveries are absorbed by the idempotency
 * key or the claim token.
 */
import { z } from 'zod';
import { TransientError } from '../canvas/errors';
import { EaselError } from '../errors';
import { sendWebhook } from '../outbound/webhook';
import { type SsrfGuard, urlRefusal } from '../outbound/ssrf';
import { sha256 } from '../store/codec';
import { LeaseLostError, TurnInProgressError } from '../store/errors';
import { webhookSecret } from '../store/tenants';
import { type AsyncTurnOptions, type AsyncTurnOutcome, DEFAULT_HOLD_MS, runAsyncTurn, type WorkerProgress } from './async-turn';
import { ACTOR_KINDS } from './actors';
import { formLinkSeconds } from '../components/user-fill-up';
import type { SignedTokens } from '../secrets/signed-tokens';
import { claimNextTurn, compiledVersion, type TurnEngine, type TurnRequest } from './execute';
import { DEFAULT_LINK_SECONDS, pauseLink } from './form-links';
import { resendPauseMail } from './form-link-mail';
import type { TurnResponse } from './response';
import { RateLimitedError } from './quotas';
import { isReplayPage, type ReplayPageMessage } from './replay-message';

export const QueueMessage = z.lazy(() => z
  .object({
    tenant: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
    workflow_id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
    run_id: z.string().regex(/^[0-9a-f]{32}$/).optional(),
    turn_number: z.number().int().min(0).optional(),
    version: z.number().int().min(1).optional(),
    run_input: z
      .object({
        query: z.string().optional(),
        inputs: z.record(z.string(), z.unknown()).optional(),
        command: z.enum(['stop']).optional(),
        files: z.array(z.unknown()).optional(),
        user_id: z.string().optional(),
        /** A webhook delivery that starts the run (its turn is claimed: lib/http/routes/webhooks.ts). */
        webhook_payload: z.record(z.string(), z.unknown()).optional(),
      })
      .default({}),
    idempotency_key: z.string().regex(/^[A-Za-z0-9_.:-]{1,255}$/).optional(),
    callback_url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2048).optional(),
    claim: z.object({ token: z.string().regex(/^[0-9a-f]{32}$/), turn: z.number().int().min(1) }).optional(),
    /** Who asked for the turn (the HTTP request that queued it); absent: the queue message itself. */
    actor: z.object({ kind: z.enum(ACTOR_KINDS), id: z.string().min(1).max(256), key_id: z.string().max(64).optional() }).optional(),
    /** A queued input's (double-text.ts): the owners whose files it may name, as its sender could; null: any of the tenant's. */
    file_owners: z.array(z.string().max(300)).max(10).nullable().optional(),
  })
  .refine((m) => m.run_id === undefined || m.turn_number !== undefined || m.claim !== undefined, {
    path: ['turn_number'],
    message: 'a message that resumes a run must carry turn_number',
  }));
export type QueueMessage = z.output<typeof QueueMessage>;

/** Whatever the worker's queue carries: a turn, or a page of a replay. */
export type WorkerMessage = QueueMessage | ReplayPageMessage;

/**
 * Where a worker's share of an async turn began, how many checkpoints it wrote, and, resumed
 * inside a batch, how many calls were answered from their records and which differed (logs).
 */
type Worked = {
  resumed_from_checkpoint?: number | null;
  checkpoints_written?: number;
  calls_replayed?: number;
  calls_diverged?: readonly { component_id: string; kind: string; ordinal: number }[];
};

export type Outcome =
  | ({ kind: 'done'; runId: string; turn: number; status: string } & Worked)
  /** `aborted`: the invocation ran out (or the process stopped) in the middle of a batch, which the next worker runs again. */
  | ({ kind: 'continued'; runId: string; turn: number; aborted?: true } & Worked)
  | { kind: 'retry'; reason: string }
  | { kind: 'superseded'; reason: string }
  /** Aborted midway by a worker whose queue goes with it (npm start stopping): given back, nothing committed. */
  | { kind: 'released'; runId: string; turn: number; reason: string }
  | { kind: 'failed'; code: string; reason: string };

export interface QueueDeps {
  engine: TurnEngine;
  guard: SsrfGuard;
  log?: (message: string, fields: Record<string, unknown>) => void;
  /** Counted per outcome (metrics). */
  count?: (outcome: Outcome['kind']) => void;
  /** Queues a message again: a suspended turn's continuation, a replay's next page. */
  requeue?: (message: WorkerMessage) => Promise<void>;
  /** How long an async turn's claim waits for its next worker. @default 20 minutes */
  holdMs?: number;
  /** What becomes of a turn aborted midway (see AsyncTurnOptions). @default 'suspend': queued again */
  onAbort?: AsyncTurnOptions['onAbort'];
  /** Form links for the `turn.paused` webhooks of forms that ask for them (UserFillUp `form_link`); absent: none are sent. */
  formLinks?: { tokens: SignedTokens; baseUrl?: string };
}

export interface Delivery {
  /**
   * The SQS message id. A message without a claim claims its turn under a token derived from
   * it, so a redelivery after a crash finds its own claim and checkpoint and goes on from there.
   */
  messageId?: string;
  /** Epoch ms after which this worker starts no new batch (its invocation ends soon after). */
  stopBy?: number;
  /** Test seams of the async turn runner. */
  hooks?: AsyncTurnOptions['hooks'];
}

/** One message: run its turn and report where it went. Never throws. */
export async function processMessage(deps: QueueDeps, body: string, delivery: Delivery = {}): Promise<Outcome> {
  let message: QueueMessage;
  try {
    const parsed = QueueMessage.safeParse(JSON.parse(body));
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return report(deps, undefined, { kind: 'failed', code: 'invalid_request', reason: `${issue?.path.join('.') || 'message'}: ${issue?.message}` });
    }
    message = parsed.data;
  } catch {
    return report(deps, undefined, { kind: 'failed', code: 'invalid_request', reason: 'the message is not JSON' });
  }
  // a callback the guard refuses is refused before the turn starts (one whose claim came with
  // the message was checked by the request that claimed it; its webhook is checked again when sent)
  const refusal = message.callback_url && !message.claim ? await urlRefusal(deps.guard, message.callback_url) : null;
  if (refusal) return report(deps, message, { kind: 'failed', code: 'invalid_request', reason: `callback_url: ${refusal}` });
  const { command, ...runInput } = message.run_input;
  const request: TurnRequest = {
    tenant: message.tenant,
    workflowId: message.workflow_id,
    ...(message.run_id ? { runId: message.run_id } : {}),
    ...(message.turn_number !== undefined ? { turnNumber: message.turn_number } : {}),
    ...(message.version !== undefined ? { version: message.version } : {}),
    runInput,
    ...(command ? { command } : {}),
    ...idempotencyOf(message, delivery.messageId),
    actor: message.actor ? { kind: message.actor.kind, id: message.actor.id, ...(message.actor.key_id ? { key_id: message.actor.key_id } : {}) } : { kind: 'queue', id: message.run_id ?? 'new' },
    ...(message.file_owners !== undefined ? { fileAccess: { owners: message.file_owners } } : {}),
  };
  const options: AsyncTurnOptions = {
    ...(delivery.stopBy !== undefined ? { stopBy: delivery.stopBy } : {}),
    ...(deps.holdMs !== undefined ? { holdMs: deps.holdMs } : {}),
    ...(delivery.hooks ? { hooks: delivery.hooks } : {}),
    ...(deps.onAbort ? { onAbort: deps.onAbort } : {}),
  };
  try {
    let outcome: AsyncTurnOutcome;
    let claim = message.claim && message.run_id ? { runId: message.run_id, token: message.claim.token, turn: message.claim.turn } : undefined;
    if (claim) {
      outcome = await runAsyncTurn(deps.engine, { ...request, runId: claim.runId }, claim, options);
    } else {
      const begun = await claimNextTurn(deps.engine, request, {
        leaseMs: deps.holdMs ?? DEFAULT_HOLD_MS,
        waitForSameKey: false,
        async: true,
        ...(delivery.messageId ? { token: sha256(`easel-queue-message:${delivery.messageId}`).slice(0, 32) } : {}),
      });
      if ('running' in begun) return report(deps, message, { kind: 'retry', reason: `turn ${begun.running.turn} is in progress` });
      if ('replay' in begun) {
        outcome = { kind: 'committed', result: begun.replay };
      } else {
        claim = { runId: begun.prepared.head.id, token: begun.claim.token, turn: begun.claim.turn };
        outcome = await runAsyncTurn(deps.engine, { ...begun.request, runId: claim.runId }, claim, {
          ...options,
          claimed: { prepared: begun.prepared, fresh: begun.continued !== true },
        });
      }
    }
    if (outcome.kind === 'suspended') return await continueLater(deps, message, outcome, claim as NonNullable<typeof claim>);
    if (outcome.kind === 'released') {
      const reason = 'the worker stopped before the turn could commit; nothing was committed, and the turn was given back';
      if (message.callback_url) await notify(deps, message, 'turn.rejected', { code: 'unavailable', error: reason, run_id: outcome.runId });
      return report(deps, message, { kind: 'released', runId: outcome.runId, turn: outcome.turn, reason });
    }
    const r = outcome.result.response;
    // a delivery of a turn committed before (a redelivered message): its form link's mail, if it was not sent yet
    if (outcome.result.replayed) await resendPauseMail(deps.engine, message.tenant, outcome.result);
    if (message.callback_url) {
      const paused = r.status === 'waiting_for_input';
      await notify(deps, message, paused ? 'turn.paused' : `turn.${r.status}`, paused ? await withFormLink(deps, message.tenant, r) : r);
    }
    return report(deps, message, { kind: 'done', runId: r.run_id, turn: r.turn_number, status: r.status, ...worked(outcome.progress) });
  } catch (error) {
    // a spent budget (of a message queued without a claim) ends: the message comes back later
    if (error instanceof TurnInProgressError || error instanceof TransientError || error instanceof RateLimitedError) {
      return report(deps, message, { kind: 'retry', reason: error.message });
    }
    if (error instanceof LeaseLostError) return report(deps, message, { kind: 'superseded', reason: error.message });
    const code = error instanceof EaselError ? error.code : 'internal_error';
    const outcome: Outcome = { kind: 'failed', code, reason: error instanceof Error ? error.message : 'failed' };
    if (!(error instanceof EaselError)) return report(deps, message, { kind: 'retry', reason: outcome.reason });
    if (message.callback_url) await notify(deps, message, 'turn.rejected', { code, error: outcome.reason, run_id: message.run_id ?? null });
    return report(deps, message, outcome);
  }
}

/**
 * The message's Idempotency-Key; for a first turn sent without one, a key of its SQS message
 * id: a redelivery of the message (after a worker crashed, or SQS's at-least-once delivery) then
 * finds the run the first delivery started — the run id is derived from the key — instead of
 * starting a second one. A later turn has its run and its claim token (derived from the
 * message id) for that.
 */
function idempotencyOf(message: QueueMessage, messageId: string | undefined): { idempotencyKey?: string } {
  if (message.idempotency_key) return { idempotencyKey: message.idempotency_key };
  if (message.run_id || !messageId) return {};
  return { idempotencyKey: `sqs-message:${sha256(messageId).slice(0, 32)}` };
}

/**
 * A suspended turn goes back on the queue as a new message carrying its claim, so the next
 * worker continues it at once — and a long turn does not use up the redeliveries
 * (maxReceiveCount) that are there for crashes. If that send fails, this delivery is retried.
 */
async function continueLater(deps: QueueDeps, message: QueueMessage, outcome: { runId: string; turn: number; progress: WorkerProgress; aborted?: true }, claim: { runId: string; token: string; turn: number }): Promise<Outcome> {
  const next: QueueMessage = { ...message, run_id: claim.runId, turn_number: claim.turn - 1, claim: { token: claim.token, turn: claim.turn } };
  try {
    if (!deps.requeue) throw new Error('no queue to continue on');
    await deps.requeue(next);
  } catch (error) {
    return report(deps, message, { kind: 'retry', reason: `the continuation could not be queued: ${error instanceof Error ? error.message : String(error)}` });
  }
  return report(deps, message, { kind: 'continued', runId: outcome.runId, turn: outcome.turn, ...(outcome.aborted ? { aborted: true } : {}), ...worked(outcome.progress) });
}

function worked(progress: WorkerProgress | undefined): Worked {
  if (!progress) return {};
  return {
    resumed_from_checkpoint: progress.resumedFrom,
    checkpoints_written: progress.checkpoints,
    ...(progress.replayedCalls > 0 ? { calls_replayed: progress.replayedCalls } : {}),
    ...(progress.divergedCalls.length > 0 ? { calls_diverged: progress.divergedCalls } : {}),
  };
}

/** A paused turn's response, with the form's link when the form asks for it to be sent (`form_link`). */
async function withFormLink(deps: QueueDeps, tenant: string, r: TurnResponse): Promise<TurnResponse | (TurnResponse & { form_link: unknown })> {
  const componentId = r.next_input_hint?.component_id;
  if (!deps.formLinks || !componentId) return r;
  const workflow = await compiledVersion(deps.engine, tenant, r.workflow_id, r.version);
  const node = workflow.nodes.get(componentId);
  const seconds = node ? formLinkSeconds(node.params, DEFAULT_LINK_SECONDS) : undefined;
  if (seconds === undefined) return r;
  const link = await pauseLink(deps.formLinks.tokens, { tenant, workflowId: r.workflow_id, runId: r.run_id, turn: r.turn_number, pausedAt: r.created_at, seconds }, deps.formLinks.baseUrl);
  return { ...r, form_link: link };
}

async function notify(deps: QueueDeps, message: QueueMessage, event: string, payload: unknown): Promise<void> {
  const secret = await webhookSecret(deps.engine.store, message.tenant);
  const result = await sendWebhook({ url: message.callback_url as string, event, payload, secret, guard: deps.guard });
  if (!result.delivered) deps.log?.('webhook not delivered', { event, attempts: result.attempts, status: result.status, error: result.error });
}

function report(deps: QueueDeps, message: QueueMessage | undefined, outcome: Outcome): Outcome {
  deps.count?.(outcome.kind);
  deps.log?.(`queued turn ${outcome.kind}`, {
    tenant: message?.tenant,
    workflow_id: message?.workflow_id,
    run_id: message?.run_id ?? (outcome.kind === 'done' ? outcome.runId : undefined),
    ...outcome,
  });
  return outcome;
}

/**
 * SQS's partial batch response: the ids of the messages to deliver again. A message may also be
 * a page of a replay (replay-message.ts), which the replay worker takes (loaded on first use).
 */
export async function processBatch(deps: QueueDeps, records: readonly { messageId: string; body: string }[], delivery: Delivery = {}): Promise<{ batchItemFailures: { itemIdentifier: string }[] }> {
  const failures: { itemIdentifier: string }[] = [];
  for (const record of records) {
    const page = replayPageOf(record.body);
    const outcome = page === undefined
      ? await processMessage(deps, record.body, { ...delivery, messageId: record.messageId })
      : await (await import('./replay-worker')).processReplayPage({ engine: deps.engine, ...(deps.requeue ? { requeue: deps.requeue } : {}), ...(deps.log ? { log: deps.log } : {}) }, page, delivery.stopBy !== undefined ? { stopBy: delivery.stopBy } : {});
    if (outcome.kind === 'retry') failures.push({ itemIdentifier: record.messageId });
  }
  return { batchItemFailures: failures };
}

/** The parsed body when it is a replay page's message; undefined for anything else (a turn's, or garbage, which processMessage reports). */
function replayPageOf(body: string): unknown {
  try {
    const parsed: unknown = JSON.parse(body);
    return isReplayPage(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}
