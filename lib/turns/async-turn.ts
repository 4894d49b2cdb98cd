/**
 * Async turns: a turn claimed by one request and run by a queue worker, possibly for longer
 * than one invocation allows, possibly by several workers in turn.
 *
 * - The worker takes the claim's lease (its own `owner` id) and keeps it alive with a heartbeat
 *   while a batch runs; a worker that crashes stops renewing, and once its lease expires the
 *   next delivery of the message takes the turn over. Meanwhile the claim itself is kept
 *   (`holdMs` past the last sign of life), so no other request takes the turn before then.
 * - After each batch that reached outside the run (a model, an Invoke) it writes a checkpoint
 *   (engine state mid-turn + the events since the last one), fenced by the lease. A successor
 *   resumes from the last checkpoint: the model calls and Invoke requests of the batches before
 *   it are not made again. Batches of components that only compute are not worth a write: a
 *   successor runs them again, with the same result.
 * - Inside a batch, after each call a component completes (an Agent's model rounds and tool
 *   calls, a sub-Agent's too) it writes a checkpoint of the same form: the state at the batch's
 *   start, the events before the batch, and the calls completed since. A successor runs that
 *   batch again and its completed calls are answered from their records, so a crash inside a
 *   tool loop repeats at most the call in flight; the batch's events are emitted once, by the
 *   run that finishes it. Writes are serialized, each in the lease's fence. A synchronous turn
 *   writes none of these.
 * - Near the end of its invocation (`stopBy`) the worker suspends the turn at a checkpoint and
 *   lets go of the lease; the caller queues the message again for the next worker.
 * - A stop sets a cancel flag on the claim; the worker reads it with each checkpoint and each
 *   heartbeat and ends the turn as `cancelled` before its next batch. A stop that lands after the
 *   last checkpoint still wins: the commit is refused, and the turn is cancelled from there. A
 *   newer input's interrupt or rollback (double-text.ts) is the same flag with another ending:
 *   `interrupted` (the pass ends there), or `rolled_back` (the run's state stays as it was
 *   before the turn, unapplied.ts); a stop overrides either.
 * - A claim promoted from a run's inbox runs a queued input: one that no longer fits the run
 *   (its form changed, the run finished) commits as `rejected`, so every queued input becomes
 *   exactly one turn.
 * - The session head's turn and status move only with the final commit.
 */
import { randomBytes } from 'node:crypto';
import { Canvas, type CanvasEvent, EaselError, type ReplayDivergence, type TurnCheckpoint, type TurnControl, TurnInterruptedError } from '../canvas';
import { acquireLease, type Lease, loadCheckpoint, releaseLease, renewLease, saveCheckpoint, type SavedCheckpoint } from '../store/checkpoints';
import { type CancelMode, CancelRequestedError, LeaseLostError } from '../store/errors';
import { type Claim, getTurn, releaseClaim } from '../store/sessions';
import { sendPromoted } from './double-text';
import { commitUnapplied, isRefusal, rejectQueued, type Unapplied } from './unapplied';
import {
  canvasOptions,
  commitCanvas,
  engineInput,
  leaseOf,
  type Prepared,
  prepareNext,
  ttlOf,
  type TurnEngine,
  type TurnRequest,
  type TurnResult,
  runOf,
} from './execute';
import { mergeMessageDeltas } from './response';
import { abortedBy, tracked, turnSignal } from './lifecycle';
import { replayOf } from './turn-keys';

/** What this worker did of the turn, for logs and metrics. */
export interface WorkerProgress {
  /** The checkpoint it went on from (its sequence number), if it did not start the turn. */
  resumedFrom: number | null;
  /** Checkpoints it wrote (between batches and inside them). */
  checkpoints: number;
  /** Calls of the batch it resumed inside that were answered from their records. */
  replayedCalls: number;
  /** Calls that differed from their records: from each, its component's calls went live. */
  divergedCalls: readonly ReplayDivergence[];
}

/** Which checkpoint was just written, for the `afterCheckpoint` hook. */
export interface CheckpointInfo {
  /** Taken inside a batch, after a call completed (else between batches). */
  inBatch: boolean;
  /** Call records it holds: those before the batch and those of the batch in flight. */
  calls: number;
}

export type AsyncTurnOutcome =
  | { kind: 'committed'; result: TurnResult; progress?: WorkerProgress }
  /**
   * Stopped at a checkpoint before `stopBy`, or aborted (`aborted`: the batch it was in is
   * dropped); the message must be queued again, and the next worker goes on from the checkpoint.
   */
  | { kind: 'suspended'; runId: string; turn: number; progress: WorkerProgress; aborted?: true }
  /** Aborted with `onAbort: 'release'`: nothing was committed, and the turn is free again. */
  | { kind: 'released'; runId: string; turn: number };

export interface AsyncTurnOptions {
  /** Epoch ms after which no new batch starts here: the turn is suspended instead. */
  stopBy?: number;
  /** How long a suspended turn's claim waits for the next worker. @default 20 minutes */
  holdMs?: number;
  /**
   * The session as the claim was just made (queue messages without a claim): not read again,
   * and no checkpoint looked for unless the claim was an earlier attempt's (`fresh: false`).
   */
  claimed?: { prepared: Prepared; fresh: boolean };
  /** Test seams: a hook that throws (or never returns) stands for a crash at that point. */
  hooks?: { afterCheckpoint?(seq: number, info: CheckpointInfo): Promise<void> | void };
  /**
   * What becomes of a turn aborted midway (its entry point is stopping): `suspend` keeps the
   * claim and its checkpoint for the next worker (the caller queues it again); `release` gives
   * the claim back, for a queue that dies with its process (npm start). @default 'suspend'
   */
  onAbort?: 'suspend' | 'release';
}

/** How long an async claim is kept with no worker alive (EASEL_ASYNC_LEASE_MS's default). */
export const DEFAULT_HOLD_MS = 20 * 60_000;

/**
 * Runs (or continues) the async turn `claimed.turn` claimed under `claimed.token`. A delivery of a turn already
 * committed returns its stored answer; a claim gone to another request is `claim_lost`; a
 * lease still held by a live worker is TurnInProgressError (try again later); a lease lost
 * midway (this worker was presumed dead and taken over) is LeaseLostError.
 */
export function runAsyncTurn(
  engine: TurnEngine,
  request: TurnRequest & { runId: string },
  claimed: { token: string; turn: number },
  options: AsyncTurnOptions = {},
): Promise<AsyncTurnOutcome> {
  const signal = turnSignal(engine.lifecycle, request.signal);
  return tracked(engine.lifecycle, runClaimed(engine, signal ? { ...request, signal } : request, claimed, options));
}

/**
 * How often a worker renews its lease while a batch runs: three times per lease and per hold,
 * so that neither runs out while the worker lives, whichever is shorter.
 */
export function heartbeatMs(times: { leaseMs: number; holdMs: number }): number {
  return Math.max(50, Math.floor(Math.min(times.leaseMs, times.holdMs) / 3));
}

async function runClaimed(
  engine: TurnEngine,
  request: TurnRequest & { runId: string },
  claimed: { token: string; turn: number },
  options: AsyncTurnOptions,
): Promise<AsyncTurnOutcome> {
  const { token } = claimed;
  const { signal } = request;
  if (signal?.aborted) throw abortedBy(signal);
  const store = engine.store;
  const leaseMs = leaseOf(engine);
  const holdMs = options.holdMs ?? DEFAULT_HOLD_MS;
  const times = { leaseMs, holdMs };
  const owner = randomBytes(16).toString('hex');
  const lease: Lease = { tenant: request.tenant, id: request.runId, turn: claimed.turn, token, owner };
  let claim: Claim;
  try {
    claim = await acquireLease(store, lease, times);
  } catch (error) {
    if (!(error instanceof LeaseLostError)) throw error;
    const replay = await committedBy(engine, request.tenant, request.runId, claimed);
    if (replay) return { kind: 'committed', result: replay };
    // never ran, and never will: reported (and its callback told) as a refused turn
    throw new EaselError('claim_lost', 'the turn was taken over by another request before a worker could run it');
  }
  const own: TurnRequest = { ...request, turnNumber: claim.turn - 1 };
  let saved: SavedCheckpoint | null;
  let prepared: Prepared;
  try {
    [saved, prepared] = await Promise.all([
      options.claimed?.fresh ? null : loadCheckpoint(store, request.tenant, request.runId, claim.turn, token),
      options.claimed?.prepared ?? prepareNext(engine, own, request.runId, token),
    ]);
  } catch (error) {
    // a queued input the run no longer takes (its form changed, the run finished): its turn is
    // `rejected` — unless a stop is pending on it, which ends the run as a stop does
    if (claim.queued && isRefusal(error)) {
      const stopped = claim.cancelRequested && !claim.cancelAs ? await stopQueued(engine, own, lease, claim) : null;
      return { kind: 'committed', result: stopped ?? (await rejectQueued(engine, { ...own, runId: request.runId }, claim, { owner }, error, holdMs)) };
    }
    throw error;
  }
  const storedBlobs = new Set([...(prepared.loaded?.storedBlobs ?? []), ...(saved?.blobs ?? [])]);

  const progress = new Progress(saved);
  let written = 0;
  let canvas = prepared.canvas;
  const report = (): WorkerProgress => {
    const replay = canvas.lastTurnReplay;
    return { resumedFrom: saved?.seq ?? null, checkpoints: written, replayedCalls: replay.replayed, divergedCalls: replay.diverged };
  };
  // the batch in flight is dropped; the claim and its last checkpoint wait for the next worker,
  // unless no worker will come (the queue goes with this process): then the turn is given back
  const aborted = async (): Promise<AsyncTurnOutcome> => {
    if (options.onAbort === 'release') {
      const promoted = await releaseClaim(store, prepared.head, claim, holdMs).catch(() => null);
      if (promoted) await sendPromoted(engine, runOf(prepared.head), promoted);
      return { kind: 'released', runId: request.runId, turn: claim.turn };
    }
    await releaseLease(store, lease, holdMs).catch(() => undefined);
    return { kind: 'suspended', runId: request.runId, turn: claim.turn, progress: report(), aborted: true };
  };
  // how a pending flag ends the turn: a stop, a newer input's interrupt or rollback
  let cancel: CancelMode | null = claim.cancelRequested ? (claim.cancelAs ?? 'cancelled') : null;
  let lost = false;
  const heartbeat = setInterval(() => {
    renewLease(store, lease, times).then(
      (r) => {
        if (r.cancelRequested) cancel = r.cancelAs ?? 'cancelled';
      },
      (error: unknown) => {
        if (error instanceof LeaseLostError) lost = true;
        // a transient failure: the next beat (or checkpoint) tries again
      },
    );
  }, heartbeatMs(times));
  heartbeat.unref?.();

  const save = async (checkpoint: TurnCheckpoint, inBatch: boolean) => {
    const events = progress.take(inBatch);
    await saveCheckpoint(store, lease, {
      // the conversation so far is in the committed turns: only this turn's entries are kept
      checkpoint: { ...checkpoint, state: { ...checkpoint.state, history: [] } } satisfies TurnCheckpoint,
      events,
      seq: progress.nextSeq,
      from: progress.savedCount,
      times,
      ttlSeconds: ttlOf(engine),
      storedBlobs,
    });
    progress.saved();
    written++;
  };
  const callsIn = (checkpoint: TurnCheckpoint) => (checkpoint.calls?.records.length ?? 0) + (checkpoint.replay?.length ?? 0);
  const saveInBatch = async (checkpoint: TurnCheckpoint) => {
    if (lost) throw new LeaseLostError();
    // a stop is pending: the turn ends as cancelled before its next batch, and the write would be refused
    if (cancel) return;
    try {
      await save(checkpoint, true);
    } catch (error) {
      if (error instanceof CancelRequestedError) {
        cancel = error.mode;
        return;
      }
      if (error instanceof LeaseLostError) lost = true;
      throw error;
    }
    await options.hooks?.afterCheckpoint?.(progress.seq, { inBatch: true, calls: callsIn(checkpoint) });
  };
  // checkpoints inside a batch, one at a time and in order (parallel tool calls complete at once)
  let writes: Promise<void> = Promise.resolve();

  const control: TurnControl = {
    // a rollback discards what the turn did: it ends as soon as it can, as a stop does
    cancelled: () => cancel === 'cancelled' || cancel === 'rolled_back',
    interrupted: () => cancel === 'interrupted',
    beforeBatch: () => progress.batchStarts(),
    afterCall: (checkpoint) => {
      const write = writes.then(() => saveInBatch(checkpoint));
      writes = write.catch(() => undefined);
      return write;
    },
    afterBatch: async (checkpoint, batch) => {
      await writes;
      if (lost) return 'suspend';
      const due = options.stopBy !== undefined && now(engine) >= options.stopBy;
      // a batch that reached nothing outside the run is cheap to run again: no checkpoint
      if (!batch.external && !due) return 'continue';
      try {
        await save(checkpoint, false);
        await options.hooks?.afterCheckpoint?.(progress.seq, { inBatch: false, calls: callsIn(checkpoint) });
      } catch (error) {
        if (error instanceof CancelRequestedError) {
          cancel = error.mode;
          return 'continue';
        }
        if (error instanceof LeaseLostError) {
          lost = true;
          return 'suspend';
        }
        throw error;
      }
      return due ? 'suspend' : 'continue';
    },
  };

  try {
    if (saved) canvas = fromCheckpoint(engine, prepared, saved);
    const events = request.command === 'stop'
      ? canvas.stop()
      : saved
        ? canvas.continueTurn(saved.checkpoint as TurnCheckpoint, control, request.signal)
        : canvas.run(engineInput(request), control);
    for await (const event of events) {
      progress.add(event);
      request.onEvent?.(event);
    }
  } catch (thrown) {
    clearInterval(heartbeat);
    // a checkpoint inside a batch failed: the batch stopped on that failure, which is the one to act on
    const error = thrown instanceof TurnInterruptedError ? thrown.cause : thrown;
    if (signal?.aborted && !lost) return aborted();
    if (!lost) await letGo(engine, prepared, claim, lease, error, holdMs);
    throw error;
  }
  clearInterval(heartbeat);
  if (lost) throw new LeaseLostError();
  // aborted between batches, the canvas ends the turn as cancelled: that is not committed
  if (signal?.aborted) return aborted();
  if (canvas.isSuspended) {
    await releaseLease(store, lease, holdMs);
    return { kind: 'suspended', runId: request.runId, turn: claim.turn, progress: report() };
  }

  // every call the turn made happened, whatever becomes of the turn: a rollback lists them
  const unapplied = { calls: canvas.lastTurnCalls, usage: canvas.lastTurnUsage, storedBlobs, holdMs };
  let result: TurnResult;
  try {
    result = cancel === 'rolled_back'
      ? await commitUnapplied(engine, { ...own, runId: request.runId }, claim, { owner }, { ...unapplied, status: 'rolled_back' })
      : await commitCanvas(engine, own, { ...prepared, canvas }, claim, progress.events, {
        lease: { owner, allowCancel: canvas.status === 'cancelled' || canvas.status === 'interrupted', ...(canvas.status === 'interrupted' ? { cancelAs: 'interrupted' as const } : {}) },
        storedBlobs,
      });
  } catch (error) {
    if (!(error instanceof CancelRequestedError)) throw error;
    result = await commitFlagged(engine, own, lease, claim, error.mode, unapplied);
  }
  // the record replaced the claim, and with it the checkpoint
  return { kind: 'committed', result, progress: report() };
}

/**
 * A flag arrived after the last checkpoint: what ran since is dropped, and the turn ends from
 * that checkpoint (or from its start) as the flag says — cancelled or interrupted — or, for a
 * rollback, is discarded whole (its calls, made all the same, listed). A stronger flag arriving
 * meanwhile (a stop over an interrupt, a rollback over an interrupt) is honoured in turn.
 */
async function commitFlagged(
  engine: TurnEngine,
  request: TurnRequest,
  lease: Lease,
  claim: Claim,
  first: CancelMode,
  unapplied: Omit<Unapplied, 'status'>,
): Promise<TurnResult> {
  let mode = first;
  for (let attempt = 0; ; attempt++) {
    try {
      if (mode === 'rolled_back') return await commitUnapplied(engine, { ...request, runId: lease.id }, claim, { owner: lease.owner }, { ...unapplied, status: 'rolled_back' });
      return await commitStopped(engine, request, lease, claim, mode, unapplied.storedBlobs ?? new Set<string>());
    } catch (error) {
      if (!(error instanceof CancelRequestedError) || error.mode === mode || attempt >= 3) throw error;
      mode = error.mode;
    }
  }
}

/** A stop met a queued input the run does not take: the turn is the stop's (null when the run is finished already). */
async function stopQueued(engine: TurnEngine, request: TurnRequest, lease: Lease, claim: Claim): Promise<TurnResult | null> {
  let prepared: Prepared;
  try {
    // a stop's checks: the run, not the input
    prepared = await prepareNext(engine, { ...request, command: 'stop' }, lease.id, lease.token);
  } catch (error) {
    if (isRefusal(error)) return null;
    throw error;
  }
  const events: CanvasEvent[] = [];
  for await (const event of prepared.canvas.stop()) events.push(event);
  // the turn is the queued input's, as sent, ended by the stop as any async turn is
  return commitCanvas(engine, request, prepared, claim, events, { lease: { owner: lease.owner, allowCancel: true } });
}

/** The turn ends from its last checkpoint (or its start) as `mode` says: cancelled or interrupted. */
async function commitStopped(engine: TurnEngine, request: TurnRequest, lease: Lease, claim: Claim, mode: 'cancelled' | 'interrupted', storedBlobs: ReadonlySet<string>): Promise<TurnResult> {
  const [saved, prepared] = await Promise.all([
    loadCheckpoint(engine.store, lease.tenant, lease.id, lease.turn, lease.token),
    prepareNext(engine, request, lease.id, lease.token),
  ]);
  const stop: TurnControl = mode === 'interrupted' ? { interrupted: () => true } : { cancelled: () => true };
  const progress = new Progress(saved);
  const canvas = saved ? fromCheckpoint(engine, prepared, saved) : prepared.canvas;
  const events = saved ? canvas.continueTurn(saved.checkpoint as TurnCheckpoint, stop) : canvas.run(engineInput(request), stop);
  for await (const event of events) progress.add(event);
  return commitCanvas(engine, request, { ...prepared, canvas }, claim, progress.events, {
    lease: { owner: lease.owner, allowCancel: true, ...(mode === 'interrupted' ? { cancelAs: 'interrupted' as const } : {}) },
    storedBlobs,
  });
}

/** The canvas of a checkpoint, its conversation rebuilt: the committed turns', then this turn's. */
function fromCheckpoint(engine: TurnEngine, prepared: Prepared, saved: SavedCheckpoint): Canvas {
  const checkpoint = saved.checkpoint as TurnCheckpoint;
  const history = [...prepared.canvas.serialize().history, ...checkpoint.history];
  return Canvas.restore(prepared.workflow, { ...checkpoint.state, history }, canvasOptions(engine, prepared.head.id, prepared.head.tenant, prepared.head.dialect));
}

/**
 * After a failure: a refusal of the turn gives the claim back (nothing ran); a transient
 * failure keeps the claim, with its checkpoint, for the retry, but lets go of the lease so the
 * retry need not wait for it to expire.
 */
async function letGo(engine: TurnEngine, prepared: Prepared, claim: Claim, lease: Lease, error: unknown, holdMs: number): Promise<void> {
  const transient = error instanceof EaselError && error.code === 'unavailable';
  if (error instanceof EaselError && !transient) {
    // inputs queued behind the turn take its slot instead: the first of them goes to a worker
    const promoted = await releaseClaim(engine.store, prepared.head, claim, holdMs).catch(() => null);
    if (promoted) await sendPromoted(engine, runOf(prepared.head), promoted);
  } else {
    await releaseLease(engine.store, lease, holdMs).catch(() => undefined);
  }
}

/** The stored answer of the turn `claimed` names, if its token committed it (the run may have moved on since). */
async function committedBy(engine: TurnEngine, tenant: string, runId: string, claimed: { token: string; turn: number }): Promise<TurnResult | null> {
  const committed = await getTurn(engine.store, tenant, runId, claimed.turn);
  if (!committed || committed.committedBy !== claimed.token) return null;
  return replayOf(committed);
}

/**
 * The events of the turn so far, and those not yet in a checkpoint. Checkpoints store events
 * with message deltas merged, as the committed response holds them; a batch never starts with
 * a message, so merging batch by batch gives the same list as merging the whole turn. A
 * checkpoint inside a batch stores only the events before the batch: the run that resumes from
 * it emits the batch's events again.
 */
class Progress {
  readonly events: CanvasEvent[];
  pending: CanvasEvent[] = [];
  /** Event items written so far. */
  seq: number;
  /** Merged events stored so far (the index of the next one). */
  savedCount: number;
  /** How many of `pending` came before the batch in flight. */
  private beforeBatch = 0;
  private taken: { merged: CanvasEvent[]; count: number } | undefined;

  constructor(saved: SavedCheckpoint | null) {
    this.events = [...((saved?.events ?? []) as CanvasEvent[])];
    this.seq = saved?.seq ?? 0;
    this.savedCount = this.events.length;
  }

  /** A batch starts: events from here on belong to it. */
  batchStarts(): void {
    this.beforeBatch = this.pending.length;
  }

  /** The events the next checkpoint stores, merged: all those pending, or (`inBatch`) those before the batch. */
  take(inBatch: boolean): CanvasEvent[] {
    const count = inBatch ? this.beforeBatch : this.pending.length;
    this.taken = { merged: mergeMessageDeltas(this.pending.slice(0, count)), count };
    return this.taken.merged;
  }

  add(event: CanvasEvent): void {
    this.events.push(event);
    this.pending.push(event);
  }

  /** The sequence number the next checkpoint is written under (the events `take` gave get their own). */
  get nextSeq(): number {
    return (this.taken?.count ?? 0) > 0 ? this.seq + 1 : this.seq;
  }

  saved(): void {
    const taken = this.taken ?? { merged: [], count: 0 };
    this.seq = this.nextSeq;
    this.savedCount += taken.merged.length;
    // events added while the write was under way stay pending
    this.pending = this.pending.slice(taken.count);
    this.beforeBatch = Math.max(0, this.beforeBatch - taken.count);
    this.taken = undefined;
  }
}

const now = (engine: TurnEngine) => (engine.clock ?? Date.now)();
