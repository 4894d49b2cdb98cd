/**
 * The turn transaction: load -> checks -> [claim] -> run -> commit.
 *
 * - Ordering: turn n+1 has one slot, the item `T#<n+1>` (lib/store/turn-slot.ts); the
 *   conditional Put of its record is the commit point, so turn n+1 commits at most once, and
 *   only by a request that read turn n.
 * - Claim before side effects: a turn claims its slot (a placeholder with a lease) just before
 *   its first batch that reaches outside the run (a model, a tool, an HTTP call), or before its
 *   first event is streamed to a client; a request that loses the race learns it from the claim,
 *   before any side effect. A turn that only computes claims nothing: its commit succeeds only
 *   into an empty slot or over an expired claim, so it loses against a live claim (an async
 *   turn claimed after our read may already have called a model). Checks that need no claim
 *   (404, stale turn_number, finished run, wrong inputs) come first.
 * - All-or-nothing: a turn is one record (state, request, response); readers see it whole or
 *   not at all. A crash leaves at most the claim, which expires; nothing else changed.
 * - Flat cost: a pure turn is one consistent read and one conditional write; one that reaches
 *   outside adds the claim. The head (what listings show) follows only when a listed value
 *   changed (lib/store/sessions.ts).
 * - Idempotency: the key (hashed with its principal) and the request fingerprint travel in the
 *   items the turn writes anyway — the claim and the record; a first turn's run id is derived
 *   from them. A retry finds its answer in the turn its `turn_number` names (one extra read, on
 *   the retry path only). A continuing turn sent without `turn_number` keeps a key record.
 * - Quotas (quotas.ts, only when configured): the turn's counters are read beside its load and
 *   judged once the turn is known not to be a replay, before anything is claimed; a committed
 *   turn adds itself and its tokens after the commit.
 */
import { randomBytes } from 'node:crypto';
import { Canvas, type CanvasEvent, EaselError, type RunInput, type TurnControl } from '../canvas';
import type { CanvasState } from '../canvas/state';
import { IdempotencyMismatchError, NotFoundError, RunExistsError, TurnConflictError, TurnInProgressError } from '../store/errors';
import { requestCancel } from '../store/checkpoints';
import { abandonIdempotency, getIdempotency, putIdempotency } from '../store/idempotency';
import {
  type Claim,
  claimTurn,
  commitTurn,
  createSession,
  type LoadedSession,
  getHead,
  loadSession,
  releaseClaim,
  type SessionHead,
  sessionExpiry,
} from '../store/sessions';
import type { Actor } from './actors';
import { canvasOptions, compiled, resolveWorkflow, withHistory } from './compiled';
import { resolveFileInputs } from './files';
import { checkPauseMail, resendPauseMail, sendPauseMail } from './form-link-mail';
import { abortedBy, tracked, turnSignal } from './lifecycle';
import { checkTurnQuota, countTurn, RateLimitedError, runQuotaApplies, takeRunQuota } from './quotas';
import { buildResponse, queryNotice, standInOf } from './response';
import { holdOf, sendPromoted, whenBusy } from './double-text';
import { derivedRunId, fingerprintOf, keyedTurn, keyHashOf, normalizedRequest, resolveKey } from './turn-keys';
import { resolveQueuedKey } from './turn-queued';
import { leaseOf, type Prepared, ttlOf, type TurnEngine, type TurnRequest, type TurnResult } from './turn-engine';

export { canvasOptions, compiledVersion } from './compiled';
export { DEFAULT_LEASE_MS, DEFAULT_SESSION_TTL_DAYS, leaseOf, ttlOf } from './turn-engine';
export type { Prepared, RunOwner, TurnEngine, TurnHooks, TurnRequest, TurnResult } from './turn-engine';

/** History window last seen per workflow: how many turns a load reads ahead of knowing the version. */
const windowHint = new Map<string, number>();

/** Runs one turn of a run (creating the run on its first turn). */
export function executeTurn(engine: TurnEngine, request: TurnRequest): Promise<TurnResult> {
  const signal = turnSignal(engine.lifecycle, request.signal);
  return tracked(engine.lifecycle, runTurn(engine, signal ? { ...request, signal } : request));
}

async function runTurn(engine: TurnEngine, sent: TurnRequest): Promise<TurnResult> {
  // streamed events are seen at once: such a turn claims before its first one
  const lazy = sent.onEvent === undefined;
  const keyed = sent.idempotencyKey !== undefined;
  let original = sent;
  let existing = false;
  let lostCommit = false;
  let again = 0;
  for (let attempt = 0; ; attempt++) {
    let begun: BeginOutcome;
    try {
      begun = await beginTurn(engine, original, { lazy, existing });
    } catch (error) {
      // a first turn whose key-derived run exists already: an earlier attempt with this key
      if (keyed && error instanceof RunExistsError && attempt < 3) {
        existing = true;
        continue;
      }
      throw error;
    }
    if ('replay' in begun) {
      // a retry of a turn that paused at a form asking for its link by e-mail: sent if it was not yet
      await resendPauseMail(engine, original.tenant, begun.replay);
      return begun.replay;
    }
    if ('running' in begun) throw new TurnInProgressError(begun.running.turn - 1, 'running');
    if ('busy' in begun) {
      const next = await busyAgain(engine, original, begun.busy, ++again);
      if ('replay' in next) return next.replay;
      original = next.request;
      continue;
    }
    try {
      return await runAndCommit(engine, begun);
    } catch (error) {
      // lost the commit: to a same-key request (look once more, and replay its turn), or, for a
      // first turn claimed lazily, to an earlier attempt that created the run meanwhile
      if (keyed && error instanceof RunExistsError && attempt < 3) existing = true;
      else if (keyed && error instanceof TurnConflictError && !lostCommit) lostCommit = true;
      // a turn that claimed nothing has made no side effect: refused by a turn in flight, it
      // does what its on_busy says; beaten by a commit, it runs again on the run as it is now
      else if (begun.claim === null && error instanceof TurnInProgressError) {
        const next = await busyAgain(engine, original, { error }, ++again);
        if ('replay' in next) return next.replay;
        original = next.request;
      } else if (begun.claim === null && error instanceof TurnConflictError && ++again <= MAX_AGAIN) continue;
      else throw error;
    }
  }
}

/** How often one request goes round because the run moved under it before it gives up. */
const MAX_AGAIN = 8;

/**
 * A turn refused by another one in flight (double-text.ts): the stored answer of its key, or
 * the request to run again because that turn is gone (a double-text then goes on top of
 * whatever it committed: its `turn_number` was admitted already).
 */
async function busyAgain(engine: TurnEngine, request: TurnRequest, busy: Busy, count: number): Promise<{ replay: TurnResult } | { request: TurnRequest }> {
  if (count > MAX_AGAIN) throw busy.error;
  const outcome = await whenBusy(engine, request, busy.error, busy.token);
  if (outcome !== 'again') return outcome;
  if (request.turnNumber === undefined) return { request };
  const { turnNumber, ...rest } = request;
  return { request: { ...rest, admittedTurn: turnNumber } };
}

/** A turn refused by another's claim, and the token it had recorded its key under (if it had). */
interface Busy {
  error: TurnInProgressError;
  token?: string;
}

/**
 * A stop met an async turn in flight: its cancel flag is set, and that turn will commit as
 * `cancelled` (answered 202 with the turn in flight, not as an error).
 */
export class StopAccepted extends EaselError {
  constructor(
    readonly runId: string,
    readonly turn: number,
  ) {
    super('stop_accepted', `turn ${turn} is running in a worker; it will end as cancelled`);
  }
}

/** A turn about to run: its request, its session, and its claim (null until it needs one). */
export interface Started {
  request: TurnRequest;
  prepared: Prepared;
  claim: Claim | null;
  /** The claim token, chosen before the claim is taken (the commit records it). */
  token: string;
  keyHash?: string;
  fingerprint: string;
  /** `continued`: the claim was there already, an earlier attempt's under the same token. */
  continued?: true;
}

export type Begun =
  | { replay: TurnResult }
  /** The same key's turn is still running (only when the caller asked not to wait). */
  | { running: { runId: string; turn: number } }
  | (Started & { claim: Claim });

export interface ClaimOptions {
  leaseMs?: number;
  waitForSameKey?: boolean;
  async?: boolean;
  /**
   * The claim token to use, fixed by the caller (a queue message's own): a turn this token
   * already claims is an earlier delivery's, and is continued rather than claimed again.
   */
  token?: string;
}

/**
 * Everything up to the claim, and the claim itself: the stored answer of a known key, or a
 * turn that is ours for `leaseMs` — to run now, or (an async turn) to hand to a worker with
 * its claim token.
 */
export async function claimNextTurn(engine: TurnEngine, request: TurnRequest, options: ClaimOptions = {}): Promise<Begun> {
  const signal = turnSignal(engine.lifecycle, request.signal);
  let original = signal ? { ...request, signal } : request;
  let existing = false;
  let again = 0;
  for (let attempt = 0; ; attempt++) {
    let begun: BeginOutcome;
    try {
      begun = await beginTurn(engine, original, { ...options, lazy: false, existing });
    } catch (error) {
      // a first turn whose key-derived run exists already: an earlier attempt with this key
      if (!(error instanceof RunExistsError) || attempt >= 3) throw error;
      existing = true;
      continue;
    }
    if (!('busy' in begun)) return begun as Begun;
    const next = await busyAgain(engine, original, begun.busy, ++again);
    if ('replay' in next) return next;
    original = next.request;
  }
}

type BeginOutcome = { replay: TurnResult } | { running: { runId: string; turn: number } } | { busy: Busy } | Started;

/**
 * Idempotency, the load and the checks; claims eagerly unless `lazy`. `existing`: a keyed first
 * turn whose derived run exists (an earlier attempt made it).
 */
async function beginTurn(engine: TurnEngine, original: TurnRequest, options: ClaimOptions & { lazy: boolean; existing: boolean }): Promise<BeginOutcome> {
  const leaseMs = options.leaseMs ?? leaseOf(engine);
  const fingerprint = fingerprintOf(original);
  const keyHash = original.idempotencyKey ? keyHashOf(original) : undefined;
  const wait = options.waitForSameKey ?? true;
  // file ids in the inputs are resolved on this copy; the caller's request stays as sent
  const request: TurnRequest = { ...original };
  // the counters are read beside the load; judged only once the turn is known to be no replay
  const quota = checkTurnQuota(engine, original);
  let admitted = false;
  const deadline = now(engine) + (engine.idempotencyWaitMs ?? leaseOf(engine));
  for (let pause = 50, attempt = 0; attempt < 200; attempt++, pause = Math.min(pause * 2, 500)) {
    if (request.signal?.aborted) throw abortedBy(request.signal);
    let replacing: string | null = null;
    let runId = request.runId;
    // a continuing turn without turn_number: its key is kept in a record of its own
    const keyRecord = request.idempotencyKey !== undefined && runId !== undefined && request.turnNumber === undefined;
    if (keyRecord) {
      const known = await resolveKey(engine, request, keyHash as string, fingerprint, wait, leaseOf(engine), options.token);
      if ('replay' in known || 'running' in known) return known;
      replacing = known.replacing;
    }
    const derived = keyHash !== undefined && runId === undefined ? derivedRunId(keyHash) : undefined;
    if (derived && options.existing) runId = derived;

    let prepared: Prepared;
    if (runId) {
      const loaded = await loadRun(engine, request, runId);
      if (keyHash !== undefined && !keyRecord) {
        const target = derived ? 1 : (request.turnNumber as number) + 1;
        if (derived && loaded.head.fingerprint !== undefined && loaded.head.fingerprint !== fingerprint) throw new IdempotencyMismatchError();
        const known = await keyedTurn(engine, loaded.head, target, keyHash, fingerprint, options.token);
        if (known === 'in_flight') {
          if (!wait) return { running: { runId, turn: target } };
          if (now(engine) + pause > deadline) throw new TurnInProgressError(loaded.head.turn, loaded.head.status);
          await new Promise((resolve) => setTimeout(resolve, pause));
          continue;
        }
        if (known) return known;
      }
      try {
        prepared = await checkNext(engine, request, loaded, derived ? undefined : request.turnNumber, options.token);
      } catch (error) {
        // a same-key request may have recorded its key and committed since we looked: its
        // answer, not the refusal of a run that has moved on, is what this retry gets
        if (keyRecord && error instanceof EaselError) {
          const known = await resolveKey(engine, request, keyHash as string, fingerprint, wait, leaseOf(engine), options.token);
          if ('replay' in known || 'running' in known) return known;
        } else if (keyHash !== undefined && !derived && error instanceof TurnConflictError) {
          // sent with turn_number, its key names no turn there: a double-text keeps its key in a key record
          const known = await recordedKey(engine, request, keyHash, fingerprint, wait);
          if (known) return known;
        }
        if (error instanceof TurnInProgressError) return { busy: { error } };
        throw error;
      }
    } else {
      prepared = await prepareFirst(engine, request, derived);
    }
    const running = prepared.head.claim;
    const token = options.token ?? randomBytes(16).toString('hex');
    const started: Started = { request, prepared, claim: null, token, ...(keyHash ? { keyHash } : {}), fingerprint };
    if (options.token !== undefined && running?.token === options.token) return { ...started, claim: running, continued: true };
    if (request.command === 'stop' && running?.async && running.expiresAt > now(engine)) {
      if (await requestCancel(engine.store, prepared.head, running.token)) throw new StopAccepted(prepared.head.id, running.turn);
      continue; // the turn ended meanwhile: look again
    }
    if (!admitted) {
      admitted = true;
      await admit(engine, request, runId === undefined, derived, quota);
    }
    if (keyRecord) {
      const recorded = await putIdempotency(engine.store, request.tenant, {
        key: keyHash as string,
        fingerprint,
        sessionId: prepared.head.id,
        turn: prepared.head.turn + 1,
        token,
        createdAt: now(engine),
      }, replacing);
      // another request with this key got there first: follow it instead
      if (!recorded) continue;
    }
    // a turn with a key record claims at once, so that a same-key request finds it in flight
    if (!options.lazy || keyRecord) {
      try {
        await takeClaim(engine, started, leaseMs, options.async === true);
      } catch (error) {
        if (error instanceof TurnInProgressError) return { busy: { error, token } };
        throw error;
      }
    }
    return started;
  }
  throw new TurnInProgressError(0, 'running');
}

/**
 * The turn's quotas, once it is known not to be a replay: its budgets, then (a new run) a run
 * start. A keyed first turn refused while its run exists already is a retry: it gets the replay.
 */
async function admit(engine: TurnEngine, request: TurnRequest, first: boolean, derived: string | undefined, quota: Promise<void> | null): Promise<void> {
  try {
    await quota;
    if (first && runQuotaApplies(engine, request)) await takeRunQuota(engine, request);
  } catch (error) {
    if (error instanceof RateLimitedError && derived && (await runExists(engine, request.tenant, derived))) throw new RunExistsError(derived);
    throw error;
  }
}

async function runExists(engine: TurnEngine, tenant: string, id: string): Promise<boolean> {
  return getHead(engine.store, tenant, id).then(() => true, (error: unknown) => {
    if (error instanceof NotFoundError) return false;
    throw error;
  });
}

/**
 * Takes the turn's claim: for a first turn, the session is created first (RunExistsError when a
 * key-derived id is taken already).
 */
async function takeClaim(engine: TurnEngine, started: Started, leaseMs: number, async: boolean): Promise<Claim> {
  const { prepared, request } = started;
  if (prepared.unsaved) {
    prepared.head = await createSession(engine.store, {
      tenant: request.tenant,
      id: prepared.head.id,
      workflowId: prepared.head.workflowId,
      version: prepared.head.version,
      userId: prepared.head.userId,
      ...(prepared.head.dialect ? { dialect: prepared.head.dialect } : {}),
      ...(prepared.head.source ? { source: prepared.head.source } : {}),
      ttlSeconds: ttlOf(engine),
      ...(started.keyHash ? { keyHash: started.keyHash, fingerprint: started.fingerprint } : {}),
    });
    prepared.unsaved = false;
  }
  started.claim = await claimTurn(engine.store, prepared.head, started.token, leaseMs, {
    ...(async ? { async: true } : {}),
    ...(started.keyHash ? { keyHash: started.keyHash, fingerprint: started.fingerprint } : {}),
  });
  prepared.head.claim = started.claim;
  return started.claim;
}

/**
 * Creates a run without a turn (RAGFlow's create_session): turn 0, `not_started`. Started by an
 * execute key alone, it takes a run start (quotas.ts) like a first turn.
 */
export async function createRun(
  engine: TurnEngine,
  args: { tenant: string; workflowId: string; version?: number; userId?: string | null; name?: string; actor?: Actor; clientAddress?: string; dialect?: 'native' | 'ragflow' },
): Promise<{ head: SessionHead; prologue: string }> {
  const { workflow, version } = await resolveWorkflow(engine, args.tenant, args.workflowId, args.version);
  if (runQuotaApplies(engine, args)) await takeRunQuota(engine, args);
  const id = newRunId();
  const canvas = Canvas.create(workflow, canvasOptions(engine, id, args.tenant, args.dialect));
  const head = await createSession(engine.store, {
    tenant: args.tenant,
    id,
    workflowId: args.workflowId,
    version,
    userId: args.userId ?? null,
    ...(args.dialect === 'ragflow' ? { dialect: 'ragflow' as const } : {}),
    ...(args.name ? { name: args.name } : {}),
    ttlSeconds: ttlOf(engine),
  });
  return { head, prologue: canvas.prologue };
}

/** 32 lowercase hex characters: 128 random bits. */
export function newRunId(): string {
  return randomBytes(16).toString('hex');
}

async function prepareFirst(engine: TurnEngine, request: TurnRequest, derivedId?: string): Promise<Prepared> {
  const { workflow, version } = await resolveWorkflow(engine, request.tenant, request.workflowId, request.version);
  const id = derivedId ?? (request.newRunId && /^[0-9a-f]{32}$/.test(request.newRunId) ? request.newRunId : newRunId());
  const canvas = Canvas.create(workflow, canvasOptions(engine, id, request.tenant, request.dialect));
  if (request.command === 'stop') throw new EaselError('invalid_request', 'there is no run to stop yet');
  request.runInput = await resolveFileInputs(engine, request.tenant, canvas, request.runInput, expiryOf(engine), { runId: id, ...(request.fileAccess ? { access: request.fileAccess } : {}) });
  canvas.check(request.runInput ?? {});
  const at = new Date(now(engine)).toISOString();
  const head: SessionHead = {
    tenant: request.tenant,
    id,
    workflowId: request.workflowId,
    version,
    status: 'not_started',
    turn: 0,
    userId: request.runUserId !== undefined ? request.runUserId : (request.runInput?.user_id ?? null),
    ...(request.dialect === 'ragflow' ? { dialect: 'ragflow' as const } : {}),
    ...(request.source ? { source: request.source } : {}),
    createdAt: at,
    updatedAt: at,
    expiresAt: 0,
    claim: null,
    listedStatus: 'not_started',
  };
  return { canvas, head, loaded: null, workflow, unsaved: true };
}

/** The run as stored, for a turn of `request`'s workflow (404 for another workflow's run). */
async function loadRun(engine: TurnEngine, request: TurnRequest, runId: string): Promise<LoadedSession> {
  const hintKey = `${request.tenant}/${request.workflowId}`;
  const loaded = await loadSession(engine.store, request.tenant, runId, windowHint.get(hintKey) ?? 13);
  if (loaded.head.workflowId !== request.workflowId) throw new NotFoundError('run');
  request.authorize?.({ id: loaded.head.id, workflowId: loaded.head.workflowId, userId: loaded.head.userId });
  request.onLoaded?.(loaded.head);
  return loaded;
}

/** Loads a run and checks the request against it (nothing is claimed); `ownClaim` is a claim already ours. */
export async function prepareNext(engine: TurnEngine, request: TurnRequest, runId: string, ownClaim?: string): Promise<Prepared> {
  return checkNext(engine, request, await loadRun(engine, request, runId), request.turnNumber, ownClaim);
}

/** The checks of a turn on a loaded run, in DESIGN §7's order after the key: turn number, finished, in progress, inputs. */
async function checkNext(engine: TurnEngine, request: TurnRequest, loaded: LoadedSession, turnNumber: number | undefined, ownClaim?: string): Promise<Prepared> {
  const { head } = loaded;
  if (turnNumber !== undefined && turnNumber !== head.turn) throw new TurnConflictError(head.turn, head.status);
  const workflow = await compiled(engine, request.tenant, head.workflowId, head.version);
  windowHint.set(`${request.tenant}/${request.workflowId}`, workflow.historyWindow);
  const canvas = loaded.latest
    ? Canvas.restore(workflow, withHistory(loaded.latest.state, loaded.history, workflow), canvasOptions(engine, head.id, head.tenant, head.dialect))
    : Canvas.create(workflow, canvasOptions(engine, head.id, head.tenant, head.dialect));
  if (canvas.isTerminal) canvas.check({}); // throws run_finished
  const inFlight = head.claim && head.claim.expiresAt > now(engine) && head.claim.token !== ownClaim;
  // a stop meeting an async turn is not refused: the caller sets that turn's cancel flag
  if (inFlight && !(request.command === 'stop' && head.claim?.async)) throw new TurnInProgressError(head.turn, head.status, head.claim ?? undefined);
  if (request.command !== 'stop') {
    request.runInput = await resolveFileInputs(engine, request.tenant, canvas, request.runInput, expiryOf(engine), { runId: head.id, ...(request.fileAccess ? { access: request.fileAccess } : {}) });
    canvas.check(request.runInput ?? {});
  }
  return { canvas, head, loaded, workflow };
}

async function runAndCommit(engine: TurnEngine, started: Started): Promise<TurnResult> {
  const { request, prepared } = started;
  const claimed = async () => {
    if (started.claim) return;
    await takeClaim(engine, started, leaseOf(engine), false);
    await request.hooks?.afterClaim?.();
  };
  if (started.claim) await request.hooks?.afterClaim?.();
  // the claim is taken just before the first batch that reaches outside the run
  const control: TurnControl = started.claim ? {} : { beforeBatch: (batch) => (batch.external ? claimed() : undefined) };
  const events: CanvasEvent[] = [];
  const { signal } = request;
  try {
    const run = request.command === 'stop' ? prepared.canvas.stop() : prepared.canvas.run(engineInput(request), control);
    for await (const event of run) {
      events.push(event);
      request.onEvent?.(event);
      await request.hooks?.afterEvent?.(event);
    }
    // aborted between batches, the canvas ends the turn as cancelled: that is not committed either
    if (signal?.aborted) throw abortedBy(signal);
  } catch (caught) {
    const error = signal?.aborted ? abortedBy(signal) : caught;
    // a refusal, a transient failure or an abort: give the turn back so a retry need not wait for the lease
    if (error instanceof EaselError && started.claim) await giveBack(engine, started);
    throw error;
  }
  return commitCanvas(engine, request, prepared, started.claim, events, { token: started.token, ...(started.keyHash ? { keyHash: started.keyHash } : {}), fingerprint: started.fingerprint });
}

/**
 * Gives a claim back that will not be committed. A key record naming it is let go as well, so
 * that a retry with the key takes the turn at once instead of waiting for the attempt to expire.
 */
async function giveBack(engine: TurnEngine, started: Started): Promise<void> {
  const { request, prepared, claim } = started;
  if (!claim) return;
  // inputs queued behind the turn take its slot instead: the first of them goes to a worker
  const promoted = await releaseClaim(engine.store, prepared.head, claim, holdOf(engine)).catch(() => null);
  if (promoted) await sendPromoted(engine, runOf(prepared.head), promoted);
  const keyRecord = started.keyHash !== undefined && request.runId !== undefined && request.turnNumber === undefined;
  if (keyRecord) await abandonIdempotency(engine.store, request.tenant, started.keyHash as string, started.token).catch(() => undefined);
}

/** The turn's input as the engine takes it (with the caller's abort signal). */
export function engineInput(request: TurnRequest): RunInput {
  return { ...request.runInput, ...(request.signal ? { signal: request.signal } : {}) };
}

/**
 * Commits the turn the canvas has just run: its state, what was asked, what it answered.
 * `claim` null: the turn claimed nothing, and commits only into a free slot. `lease` fences
 * the commit of an async turn by its worker's lease (see commitTurn).
 */
export async function commitCanvas(
  engine: TurnEngine,
  request: TurnRequest,
  prepared: Prepared,
  claim: Claim | null,
  events: readonly CanvasEvent[],
  extra: {
    /** The committer's token when the turn holds no claim. */
    token?: string;
    keyHash?: string;
    fingerprint?: string;
    lease?: { owner: string; allowCancel: boolean; cancelAs?: 'interrupted' | 'rolled_back' };
    storedBlobs?: ReadonlySet<string>;
  } = {},
): Promise<TurnResult> {
  const { canvas, head } = prepared;
  const turn = claim?.turn ?? head.turn + 1;
  const state = canvas.serialize();
  const standIn = standInOf(canvas.lastTurnCalls.records);
  const notice = request.command ? undefined : queryNotice(head.status, request.runInput, state.status);
  // a form that asks for its link by e-mail: whether it can go is said in the response
  const mails = state.status === 'waiting_for_input' ? state.prompt?.mail : undefined;
  const formLinkEmail = mails ? await checkPauseMail(engine, head.tenant, mails) : undefined;
  const response = buildResponse({
    runId: head.id,
    workflowId: head.workflowId,
    version: head.version,
    status: state.status,
    turn,
    terminal: canvas.isTerminal,
    waitingFor: canvas.prompt?.component_ids ?? [],
    timerArmed: state.status === 'waiting_for_input' && state.prompt?.due_at !== undefined,
    events,
    usage: canvas.lastTurnUsage,
    createdAt: new Date(now(engine)).toISOString(),
    ...(standIn ? { standIn } : {}),
    ...(notice ? { notice } : {}),
    ...(formLinkEmail ? { formLinkEmail } : {}),
  });
  const body = JSON.stringify(response);
  await request.hooks?.beforeCommit?.();
  const { promoted } = await commitTurn(engine.store, {
    head,
    turn,
    token: claim?.token ?? extra.token ?? randomBytes(16).toString('hex'),
    claim,
    ...(prepared.unsaved ? { create: true } : {}),
    status: state.status,
    payload: {
      state: { ...state, history: [] } satisfies CanvasState,
      request: { ...normalizedRequest(request), ...(request.actor ? { actor: request.actor } : {}) },
      response: body,
      history: [...canvas.lastTurnHistory],
      calls: { records: [...canvas.lastTurnCalls.records], dropped: canvas.lastTurnCalls.dropped },
    },
    keyHash: extra.keyHash ?? claim?.keyHash ?? null,
    fingerprint: extra.fingerprint ?? claim?.fingerprint ?? null,
    ttlSeconds: ttlOf(engine),
    ...(engine.listingRefreshMs !== undefined ? { listingRefreshMs: engine.listingRefreshMs } : {}),
    ...(engine.afterResponse ? { deferListing: engine.afterResponse } : {}),
    dueAt: state.status === 'waiting_for_input' ? (state.prompt?.due_at ?? null) : null,
    storedBlobs: extra.storedBlobs ?? prepared.loaded?.storedBlobs ?? new Set(),
    ...(extra.lease ? { lease: extra.lease } : {}),
    queueHoldMs: holdOf(engine),
  });
  // the drain signal: this commit claimed the next turn for a queued input (double-text.ts)
  if (promoted) await sendPromoted(engine, runOf(head), promoted);
  // after the commit: a turn that crosses a token budget completes (quotas.ts); the form's link goes out
  await countTurn(engine, request, response.usage.total_tokens);
  if (mails && formLinkEmail?.status === 'sending') await sendPauseMail(engine, { tenant: head.tenant, workflowId: head.workflowId, runId: head.id, turn, pausedAt: response.created_at, mails });
  return { body, response, replayed: false };
}

/**
 * What a turn sent with `turn_number` finds its Idempotency-Key names in a key record — kept for
 * the inputs of double-texts (double-text.ts): a queued input (TurnQueued while it waits or runs)
 * or a turn run at once; null when there is none.
 */
async function recordedKey(engine: TurnEngine, request: TurnRequest, keyHash: string, fingerprint: string, wait: boolean): Promise<{ replay: TurnResult } | { running: { runId: string; turn: number } } | null> {
  const record = await getIdempotency(engine.store, request.tenant, keyHash);
  if (!record) return null;
  if (record.fingerprint !== fingerprint) throw new IdempotencyMismatchError();
  if (record.queuedFrom !== undefined) return resolveQueuedKey(engine, request.tenant, record, wait);
  const known = await resolveKey(engine, request, keyHash, fingerprint, wait, leaseOf(engine));
  return 'replacing' in known ? null : known;
}

export const runOf = (head: SessionHead) => ({ tenant: head.tenant, workflowId: head.workflowId, runId: head.id });
const now = (engine: TurnEngine) => (engine.clock ?? Date.now)();
const expiryOf = (engine: TurnEngine) => sessionExpiry(now(engine), ttlOf(engine));
