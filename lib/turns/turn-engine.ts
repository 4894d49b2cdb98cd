/**
 * What the turn layer works with: the engine (store, components, services, limits), a turn's
 * request and its result. execute.ts runs turns on them; it re-exports everything here.
 */
import type { Canvas, CanvasEvent, ComponentRegistry, RunInput, Workflow } from '../canvas';
import type { StoreContext } from '../store/dynamo';
import type { InboxLimits } from '../store/inbox';
import type { LoadedSession, SessionHead } from '../store/sessions';
import type { Actor } from './actors';
import type { FileAccess } from './files';
import type { FormLinkSettings } from './form-link-mail';
import type { OnBusy } from './on-busy';
import type { TurnLifecycle } from './lifecycle';
import type { QueueMessage } from './queue';
import type { QuotaSettings } from './quotas';
import type { TurnResponse } from './response';

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
  /** Replays of recorded runs (replay.ts) and their results are kept this long. @default 7 days */
  replayTtlSeconds?: number;
  stepBudgetTurn?: number;
  stepBudgetRun?: number;
  /** How long a request waits for a same-key request in flight. @default leaseMs */
  idempotencyWaitMs?: number;
  /** How stale the listing's turn and updated_at may get when nothing listed changed. @default 60000 */
  listingRefreshMs?: number;
  /** Epoch ms; also the store's clock. @default Date.now */
  clock?: () => number;
  /** Turn and run-start limits (quotas.ts); absent: none, and no counter is read or written. */
  quotas?: QuotaSettings;
  /** What stops turns from outside (a stopping server, an invocation about to time out); see lifecycle.ts. */
  lifecycle?: TurnLifecycle;
  /**
   * Takes work a turn leaves for after its response (the listing's update of the run's head),
   * where the entry point can send the response first and finish the work before its invocation
   * ends (a streaming Function URL). Absent: the work is done before the turn returns.
   */
  afterResponse?: (work: () => Promise<void>) => void;
  /**
   * Form links the server makes and e-mails from committed turns (UserFillUp
   * `form_link_email`, form-link-mail.ts); absent: a pause that asks for one says it was not sent.
   */
  formLinks?: FormLinkSettings;
  /**
   * Hands a claimed turn to the queue worker: here, a run's next queued input once the turn
   * ahead of it committed (double-text.ts). Absent: a double-text that would queue one is refused (400 `invalid_request`).
   */
  enqueue?: (message: QueueMessage) => Promise<void>;
  /** How long a claim made for a worker waits for it (EASEL_ASYNC_LEASE_MS). @default 20 minutes */
  asyncHoldMs?: number;
  /** How many inputs a run's inbox holds. @default DEFAULT_INBOX_LIMITS (10 inputs, 64 KiB) */
  inboxLimits?: InboxLimits;
  /** Told what went wrong where nobody waits for the answer (a queued turn that could not be sent for). */
  log?: (message: string, fields: Record<string, unknown>) => void;
}

export interface TurnRequest {
  tenant: string;
  workflowId: string;
  /**
   * Who is asking (the API key's id, and the end user when one is asserted): idempotency keys
   * are bound to it. Absent: the tenant alone (internal callers, queue producers).
   */
  principal?: string;
  /** Who acts, as the turn record names it; quotas count against it (`quotaSubject`). */
  actor?: Actor;
  /**
   * Whether the caller may act on the run, asked once it is loaded (before anything else about
   * it is answered): throws NotFoundError when not. Absent: the tenant's caller may.
   */
  authorize?: (run: RunOwner) => void;
  /** A new run's user (listed and reached under it); absent: `run_input.user_id`. */
  runUserId?: string | null;
  /** Which uploaded files the caller may name; absent: any of the tenant's. */
  fileAccess?: FileAccess;
  /** The client's address (HTTP): runs started by an execute key alone are limited per address too. */
  clientAddress?: string;
  /** Absent: start a new run. */
  runId?: string;
  /** The id a new run gets (32 hex; generated when absent), for callers that must name it early. */
  newRunId?: string;
  /** When sent, must equal the run's current turn. */
  turnNumber?: number;
  /** First turn only: the version to pin (else the active one). */
  version?: number;
  /**
   * First turn only: the API starting the run. A run keeps the Begin rules of the API that
   * started it: `ragflow` never pauses at Begin (RAGFlow pauses only at UserFillUp). @default 'native'
   */
  dialect?: 'native' | 'ragflow';
  /** First turn only: RAGFlow's session source of the new run (SessionHead.source). */
  source?: 'workflow';
  /** Told of the run once it is loaded, before anything runs (not on replays). */
  onLoaded?: (head: SessionHead) => void;
  runInput?: RunInput;
  command?: 'stop';
  idempotencyKey?: string;
  /**
   * What to do when another turn of the run is in flight (double-text.ts): absent, `reject`
   * (409 `turn_in_progress`); `workflow`: the workflow's own setting.
   */
  onBusy?: OnBusy | 'workflow';
  /**
   * The `turn_number` a double-text was admitted with when the turn it met has committed (or
   * was given back) since: it is not checked again — the input goes on top of that turn — but
   * stays what the request is fingerprinted and recorded with. Set by the engine only.
   */
  admittedTurn?: number;
  /** Where the worker tells the end of a queued input's turn (its `callback_url`). */
  callbackUrl?: string;
  /**
   * Aborts the turn: it commits nothing, gives its claim back and fails with TurnAbortedError
   * (`unavailable`). The engine's lifecycle signal does the same.
   */
  signal?: AbortSignal;
  /** Each engine event as it happens (live streaming); the committed response is the truth. */
  onEvent?: (event: CanvasEvent) => void;
  /** Test seams: a hook that throws simulates a crash at that point. */
  hooks?: TurnHooks;
}

/** What deciding who may act on a run needs to know about it. */
export interface RunOwner {
  id: string;
  workflowId: string;
  userId: string | null;
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
  /** The session's head is not written yet (a first turn until it claims or commits). */
  unsaved?: boolean;
}

export const leaseOf = (engine: TurnEngine) => engine.leaseMs ?? DEFAULT_LEASE_MS;
export const ttlOf = (engine: TurnEngine) => engine.sessionTtlSeconds ?? DEFAULT_SESSION_TTL_DAYS * 86_400;
