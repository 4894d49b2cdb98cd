/**
 * The turn transaction: idempotency key -> load -> checks -> claim -> run -> commit.
 *
 * - Ordering: the claim reserves turn n+1 for a lease before anything runs; the conditional
 *   Put of turn record n+1 is the commit point, so turn n+1 commits at most once.
 * - Claim before side effects: a request that loses the race learns it from the claim, before
 *   any model call or HTTP request; checks that need no claim (404, stale turn_number,
 *   finished run, wrong inputs) come first and claim nothing.
 * - All-or-nothing: a turn is one record (state, request, response); readers see it whole or
 *   not at all. A crash leaves the claim, which expires; nothing else changed.
 * - Idempotency: the key is looked up first; a known key returns the stored response byte for
 *   byte, waits for the same-key request in flight, or takes over an attempt that died.
 */
import { randomBytes } from 'node:crypto';
import {
  Canvas,
  type CanvasEvent,
  type CanvasOptions,
  compileWorkflow,
  type ComponentRegistry,
  EaselError,
  type RunInput,
  type Workflow,
} from '../canvas';
import type { CanvasState } from '../canvas/state';
import { canonicalJson, sha256 } from '../store/codec';
import type { StoreContext } from '../store/dynamo';
import { IdempotencyMismatchError, NotFoundError, TurnConflictError, TurnInProgressError } from '../store/errors';
import { requestCancel } from '../store/checkpoints';
import { getIdempotency, putIdempotency } from '../store/idempotency';
import {
  type Claim,
  claimTurn,
  commitTurn,
  createSession,
  getHead,
  getTurn,
  type LoadedSession,
  loadSession,
  releaseClaim,
  type SessionHead,
} from '../store/sessions';
import { getVersion, getWorkflow } from '../store/workflows';
import { resolveFileInputs } from './files';
import { buildResponse, type TurnResponse } from './response';

export const DEFAULT_LEASE_MS = 60_000;
export const DEFAULT_SESSION_TTL_DAYS = 30;

export interface TurnEngine {
  store: StoreContext;
  registry: ComponentRegistry;
  /** Handed to components (models, outbound HTTP, secrets). */
  services: Readonly<Record<string, unknown>>;
  /** The services of one tenant's runs (its secrets); absent: `services` for every tenant. */
  servicesFor?: (tenant: string) => Readonly<Record<string, unknown>>;
  /** How long a claim holds before another request may take the turn over. @default 60000 */
  leaseMs?: number;
  /** Idle sessions expire after this long. @default 30 days */
  sessionTtlSeconds?: number;
  stepBudgetTurn?: number;
  stepBudgetRun?: number;
  /** How long a request waits for a same-key request in flight. @default leaseMs */
  idempotencyWaitMs?: number;
  /** Epoch ms; also the store's clock. @default Date.now */
  clock?: () => number;
}

export interface TurnRequest {
  tenant: string;
  workflowId: string;
  /** Absent: start a new run. */
  runId?: string;
  /** The id a new run gets (32 hex; generated when absent), for callers that must name it early. */
  newRunId?: string;
  /** When sent, must equal the run's current turn. */
  turnNumber?: number;
  /** First turn only: the version to pin (else the active one). */
  version?: number;
  runInput?: RunInput;
  command?: 'stop';
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Each engine event as it happens (live streaming); the committed response is the truth. */
  onEvent?: (event: CanvasEvent) => void;
  /** Test seams: a hook that throws simulates a crash at that point. */
  hooks?: TurnHooks;
}

export interface TurnHooks {
  afterClaim?(): Promise<void> | void;
  afterEvent?(event: CanvasEvent): Promise<void> | void;
  beforeCommit?(): Promise<void> | void;
}

export interface TurnResult {
  /** The response body, byte for byte what a retry with the same key gets. */
  body: string;
  response: TurnResponse;
  replayed: boolean;
}

export interface Prepared {
  canvas: Canvas;
  head: SessionHead;
  loaded: LoadedSession | null;
  workflow: Workflow;
}

const compiledCache = new Map<string, Workflow>();
const COMPILED_CACHE_SIZE = 200;
/** History window last seen per workflow: how many turns a load reads ahead of knowing the version. */
const windowHint = new Map<string, number>();

/** Runs one turn of a run (creating the run on its first turn). */
export async function executeTurn(engine: TurnEngine, original: TurnRequest): Promise<TurnResult> {
  const begun = await claimNextTurn(engine, original);
  if ('replay' in begun) return begun.replay;
  if ('running' in begun) throw new TurnInProgressError(begun.running.turn - 1, 'running');
  return runAndCommit(engine, begun.request, begun.prepared, begun.claim);
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

export type Begun =
  | { replay: TurnResult }
  /** The same key's turn is still running (only when the caller asked not to wait). */
  | { running: { runId: string; turn: number } }
  /** `continued`: the claim was there already, an earlier attempt's under the same token. */
  | { request: TurnRequest; prepared: Prepared; claim: Claim; continued?: true };

/** The stored answer of a committed turn, byte for byte as a retry gets it. */
export function replayOf(turn: { response: string }): TurnResult {
  return { body: turn.response, response: JSON.parse(turn.response) as TurnResponse, replayed: true };
}

/**
 * Everything up to the claim: idempotency, the checks, the claim itself. What comes back is
 * either the stored answer of a known key, or a turn that is ours for `leaseMs` — to run now,
 * or (an async turn) to hand to a worker with its claim token.
 */
export async function claimNextTurn(
  engine: TurnEngine,
  original: TurnRequest,
  options: {
    leaseMs?: number;
    waitForSameKey?: boolean;
    async?: boolean;
    /**
     * The claim token to use, fixed by the caller (a queue message's own): a turn this token
     * already claims is an earlier delivery's, and is continued rather than claimed again.
     */
    token?: string;
  } = {},
): Promise<Begun> {
  const leaseMs = options.leaseMs ?? leaseOf(engine);
  const fingerprint = fingerprintOf(original);
  // file ids in the inputs are resolved on this copy; the caller's request stays as sent
  const request: TurnRequest = { ...original };
  for (let attempt = 0; attempt < 5; attempt++) {
    let replacing: string | null = null;
    let runId = request.runId;
    if (request.idempotencyKey) {
      const known = await resolveKey(engine, request, fingerprint, options.waitForSameKey ?? true, options.token);
      if ('replay' in known || 'running' in known) return known;
      replacing = known.replacing;
      runId ??= known.sessionId;
    }
    const prepared = runId ? await prepareNext(engine, request, runId, options.token) : await prepareFirst(engine, request);
    const running = prepared.head.claim;
    if (options.token !== undefined && running?.token === options.token) return { request, prepared, claim: running, continued: true };
    if (request.command === 'stop' && running?.async && running.expiresAt > now(engine)) {
      if (await requestCancel(engine.store, prepared.head, running.token)) throw new StopAccepted(prepared.head.id, running.turn);
      continue; // the turn ended meanwhile: look again
    }
    const token = options.token ?? randomBytes(16).toString('hex');
    if (request.idempotencyKey) {
      const recorded = await putIdempotency(engine.store, request.tenant, {
        key: request.idempotencyKey,
        fingerprint,
        sessionId: prepared.head.id,
        turn: prepared.head.turn + 1,
        token,
        createdAt: now(engine),
      }, replacing);
      // another request with this key got there first: follow it instead
      if (!recorded) continue;
    }
    const claim = prepared.loaded === null && prepared.head.turn === 0 && !runId
      ? await createClaimed(engine, request, prepared, token, leaseMs, options.async === true)
      : await claimTurn(engine.store, prepared.head, token, leaseMs, { async: options.async === true });
    return { request, prepared, claim };
  }
  throw new TurnInProgressError(0, 'running');
}

/** Creates a run without a turn (RAGFlow's create_session): turn 0, `not_started`. */
export async function createRun(
  engine: TurnEngine,
  args: { tenant: string; workflowId: string; version?: number; userId?: string | null },
): Promise<{ head: SessionHead; prologue: string }> {
  const { workflow, version } = await resolveWorkflow(engine, args.tenant, args.workflowId, args.version);
  const id = newRunId();
  const canvas = Canvas.create(workflow, canvasOptions(engine, id, args.tenant));
  const head = await createSession(engine.store, {
    tenant: args.tenant,
    id,
    workflowId: args.workflowId,
    version,
    userId: args.userId ?? null,
    ttlSeconds: ttlOf(engine),
  });
  return { head, prologue: canvas.prologue };
}

/** 32 lowercase hex characters: 128 random bits. */
export function newRunId(): string {
  return randomBytes(16).toString('hex');
}

async function prepareFirst(engine: TurnEngine, request: TurnRequest): Promise<Prepared> {
  const { workflow, version } = await resolveWorkflow(engine, request.tenant, request.workflowId, request.version);
  const id = request.newRunId && /^[0-9a-f]{32}$/.test(request.newRunId) ? request.newRunId : newRunId();
  const canvas = Canvas.create(workflow, canvasOptions(engine, id, request.tenant));
  if (request.command === 'stop') throw new EaselError('invalid_request', 'there is no run to stop yet');
  request.runInput = await resolveFileInputs(engine, request.tenant, canvas, request.runInput, expiryOf(engine));
  canvas.check(request.runInput ?? {});
  const at = new Date(now(engine)).toISOString();
  const head: SessionHead = {
    tenant: request.tenant,
    id,
    workflowId: request.workflowId,
    version,
    status: 'not_started',
    turn: 0,
    userId: request.runInput?.user_id ?? null,
    createdAt: at,
    updatedAt: at,
    expiresAt: 0,
    claim: null,
  };
  return { canvas, head, loaded: null, workflow };
}

/** Loads a run and checks the request against it (nothing is claimed); `ownClaim` is a claim already ours. */
export async function prepareNext(engine: TurnEngine, request: TurnRequest, runId: string, ownClaim?: string): Promise<Prepared> {
  const hintKey = `${request.tenant}/${request.workflowId}`;
  const loaded = await loadSession(engine.store, request.tenant, runId, windowHint.get(hintKey) ?? 13);
  const { head } = loaded;
  if (head.workflowId !== request.workflowId) throw new NotFoundError('run');
  if (request.turnNumber !== undefined && request.turnNumber !== head.turn) {
    throw new TurnConflictError(head.turn, head.status);
  }
  const workflow = await compiled(engine, request.tenant, head.workflowId, head.version);
  windowHint.set(hintKey, workflow.historyWindow);
  const canvas = loaded.latest
    ? Canvas.restore(workflow, withHistory(loaded.latest.state, loaded.history, workflow), canvasOptions(engine, runId, request.tenant))
    : Canvas.create(workflow, canvasOptions(engine, runId, request.tenant));
  if (canvas.isTerminal) canvas.check({}); // throws run_finished
  const inFlight = head.claim && head.claim.expiresAt > now(engine) && head.claim.token !== ownClaim;
  // a stop meeting an async turn is not refused: the caller sets that turn's cancel flag
  if (inFlight && !(request.command === 'stop' && head.claim?.async)) throw new TurnInProgressError(head.turn, head.status);
  if (request.command !== 'stop') {
    request.runInput = await resolveFileInputs(engine, request.tenant, canvas, request.runInput, expiryOf(engine));
    canvas.check(request.runInput ?? {});
  }
  return { canvas, head, loaded, workflow };
}

async function createClaimed(engine: TurnEngine, request: TurnRequest, prepared: Prepared, token: string, leaseMs: number, async: boolean): Promise<Claim> {
  const expiresAt = now(engine) + leaseMs;
  const head = await createSession(engine.store, {
    tenant: request.tenant,
    id: prepared.head.id,
    workflowId: prepared.head.workflowId,
    version: prepared.head.version,
    userId: prepared.head.userId,
    ttlSeconds: ttlOf(engine),
    claim: { token, expiresAt, ...(async ? { async: true } : {}) },
  });
  prepared.head = head;
  return head.claim as Claim;
}

async function runAndCommit(engine: TurnEngine, request: TurnRequest, prepared: Prepared, claim: Claim): Promise<TurnResult> {
  await request.hooks?.afterClaim?.();
  const events: CanvasEvent[] = [];
  try {
    const run = request.command === 'stop' ? prepared.canvas.stop() : prepared.canvas.run(engineInput(request));
    for await (const event of run) {
      events.push(event);
      request.onEvent?.(event);
      await request.hooks?.afterEvent?.(event);
    }
  } catch (error) {
    // a refusal or a transient failure: give the turn back so a retry need not wait for the lease
    if (error instanceof EaselError) await releaseClaim(engine.store, prepared.head, claim).catch(() => undefined);
    throw error;
  }
  return commitCanvas(engine, request, prepared, claim, events);
}

/** The turn's input as the engine takes it (with the caller's abort signal). */
export function engineInput(request: TurnRequest): RunInput {
  return { ...request.runInput, ...(request.signal ? { signal: request.signal } : {}) };
}

/**
 * Commits the turn the canvas has just run: its state, what was asked, what it answered.
 * `lease` fences the commit of an async turn by its worker's lease (see commitTurn).
 */
export async function commitCanvas(
  engine: TurnEngine,
  request: TurnRequest,
  prepared: Prepared,
  claim: Claim,
  events: readonly CanvasEvent[],
  extra: { lease?: { owner: string; allowCancel: boolean }; storedBlobs?: ReadonlySet<string> } = {},
): Promise<TurnResult> {
  const { canvas, head } = prepared;
  const state = canvas.serialize();
  const response = buildResponse({
    runId: head.id,
    workflowId: head.workflowId,
    version: head.version,
    status: state.status,
    turn: claim.turn,
    terminal: canvas.isTerminal,
    waitingFor: canvas.prompt?.component_ids ?? [],
    timerArmed: state.status === 'waiting_for_input' && state.prompt?.due_at !== undefined,
    events,
    usage: canvas.lastTurnUsage,
    createdAt: new Date(now(engine)).toISOString(),
  });
  const body = JSON.stringify(response);
  await request.hooks?.beforeCommit?.();
  await commitTurn(engine.store, {
    head,
    claim,
    status: state.status,
    payload: {
      state: { ...state, history: [] } satisfies CanvasState,
      request: normalizedRequest(request),
      response: body,
      history: [...canvas.lastTurnHistory],
    },
    idempotencyKey: request.idempotencyKey ?? null,
    ttlSeconds: ttlOf(engine),
    dueAt: state.status === 'waiting_for_input' ? (state.prompt?.due_at ?? null) : null,
    storedBlobs: extra.storedBlobs ?? prepared.loaded?.storedBlobs ?? new Set(),
    ...(extra.lease ? { lease: extra.lease } : {}),
  });
  return { body, response, replayed: false };
}

type KnownKey = { replay: TurnResult } | { running: { runId: string; turn: number } } | { replacing: string | null; sessionId?: string };

/**
 * What an Idempotency-Key already stands for: a committed turn (replay it), a request still
 * running (wait for it), or an attempt that died (take it over).
 */
async function resolveKey(engine: TurnEngine, request: TurnRequest, fingerprint: string, wait: boolean, ownToken?: string): Promise<KnownKey> {
  const key = request.idempotencyKey as string;
  const deadline = now(engine) + (engine.idempotencyWaitMs ?? leaseOf(engine));
  for (let pause = 50; ; pause = Math.min(pause * 2, 500)) {
    const record = await getIdempotency(engine.store, request.tenant, key);
    if (!record) return { replacing: null };
    if (record.fingerprint !== fingerprint) throw new IdempotencyMismatchError();
    const turn = await getTurn(engine.store, request.tenant, record.sessionId, record.turn);
    if (turn && turn.committedBy === record.token) {
      return { replay: replayOf(turn) };
    }
    const head = await getHead(engine.store, request.tenant, record.sessionId).catch((error: unknown) => {
      if (error instanceof NotFoundError) return null;
      throw error;
    });
    // our own earlier attempt (a redelivered message): the caller continues its claim
    if (head && ownToken !== undefined && record.token === ownToken) return { replacing: record.token, ...(!request.runId ? { sessionId: record.sessionId } : {}) };
    const at = now(engine);
    const running = head
      ? head.claim?.token === record.token && head.claim.expiresAt > at
      : record.turn === 1 && record.createdAt + leaseOf(engine) > at; // its run is being created
    if (!running) {
      // the attempt died (or lost its race): a first turn resumes on the run it created
      return { replacing: record.token, ...(head && !request.runId ? { sessionId: record.sessionId } : {}) };
    }
    if (!wait) return { running: { runId: record.sessionId, turn: record.turn } };
    if (at + pause > deadline) throw new TurnInProgressError(head?.turn ?? 0, head?.status ?? 'running');
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

async function resolveWorkflow(engine: TurnEngine, tenant: string, workflowId: string, version?: number) {
  const head = await getWorkflow(engine.store, tenant, workflowId);
  if (head.deleted) throw new NotFoundError('workflow');
  const chosen = version ?? head.activeVersion;
  if (!Number.isInteger(chosen) || chosen < 1 || chosen > head.latestVersion) throw new NotFoundError('workflow version');
  return { workflow: await compiled(engine, tenant, workflowId, chosen), version: chosen };
}

/** Versions are immutable: a compiled version is kept for the life of the process. */
export async function compiledVersion(engine: TurnEngine, tenant: string, workflowId: string, version: number): Promise<Workflow> {
  return compiled(engine, tenant, workflowId, version);
}

async function compiled(engine: TurnEngine, tenant: string, workflowId: string, version: number): Promise<Workflow> {
  const cacheKey = `${tenant}/${workflowId}/${version}`;
  const hit = compiledCache.get(cacheKey);
  if (hit) return hit;
  const workflow = compileWorkflow(await getVersion(engine.store, tenant, workflowId, version), engine.registry);
  if (compiledCache.size >= COMPILED_CACHE_SIZE) compiledCache.delete(compiledCache.keys().next().value as string);
  compiledCache.set(cacheKey, workflow);
  return workflow;
}

export function canvasOptions(engine: TurnEngine, runId: string, tenant: string): CanvasOptions {
  return {
    ...(engine.clock ? { clock: engine.clock } : {}),
    // the first state of a run is a function of its id: a retried first turn is the same run
    seed: Number.parseInt(sha256(runId).slice(0, 8), 16) | 0,
    services: engine.servicesFor?.(tenant) ?? engine.services,
    ...(engine.stepBudgetTurn ? { stepBudgetTurn: engine.stepBudgetTurn } : {}),
    ...(engine.stepBudgetRun ? { stepBudgetRun: engine.stepBudgetRun } : {}),
  };
}

function withHistory(state: unknown, history: unknown[], workflow: Workflow): unknown {
  const keep = Math.max(2, workflow.historyWindow * 2);
  return { ...(state as Record<string, unknown>), history: history.slice(-keep) };
}

/** The request as it is fingerprinted and stored: what was asked, not how it was spelled. */
function normalizedRequest(request: TurnRequest): Record<string, unknown> {
  const { signal: _signal, command: engineCommand, ...runInput } = request.runInput ?? {};
  return {
    workflow_id: request.workflowId,
    run_id: request.runId ?? null,
    turn_number: request.turnNumber ?? null,
    version: request.version ?? null,
    command: request.command ?? engineCommand ?? null,
    run_input: runInput,
  };
}

export function fingerprintOf(request: TurnRequest): string {
  return sha256(canonicalJson(normalizedRequest(request)));
}

const now = (engine: TurnEngine) => (engine.clock ?? Date.now)();
export const leaseOf = (engine: TurnEngine) => engine.leaseMs ?? DEFAULT_LEASE_MS;
export const ttlOf = (engine: TurnEngine) => engine.sessionTtlSeconds ?? DEFAULT_SESSION_TTL_DAYS * 86_400;
const expiryOf = (engine: TurnEngine) => Math.floor(now(engine) / 1000) + ttlOf(engine);
