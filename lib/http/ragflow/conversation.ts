/**
 * The turn a RAGFlow-side completion stands for (RAGFlow's own mode and its OpenAI-compatible
 * one): the agent checked against the key, the run input as RAGFlow reads it, RAGFlow's Begin
 * rules for a new session, and the Idempotency-Key with the native execute's semantics.
 */
import type { Context } from 'hono';
import { NotWaitingForInputError, type CanvasEvent, type RunInput } from '../../canvas';
import { isRecord } from '../../canvas/references';
import { NotFoundError } from '../../store/errors';
import type { SessionHead } from '../../store/sessions';
import { executeTurn, newRunId, type TurnRequest, type TurnResult } from '../../turns/execute';
import { derivedRunId, keyHashOf } from '../../turns/turn-keys';
import { actorOf, fileAccess, idempotencyPrincipal, newRunUser, runAuthorizer } from '../access';
import type { AppDeps } from '../app';
import { IDEMPOTENCY_KEY } from '../schemas';
import { type RagflowEnv, reachableAgent } from './context';
import { RAGFLOW, RagflowError } from './envelope';
import { awaitQueuedTurn } from './queued-answer';
import { TurnQueued } from '../../turns/turn-queued';

export interface Conversation {
  agentId: string;
  sessionId: string;
  isNew: boolean;
  request: TurnRequest;
}

export interface ConversationFields {
  /** A string, or (RAGFlow's own mode) an object whose keys answer Begin's fields. */
  query: unknown;
  sessionId?: string;
  inputs?: unknown;
  userId?: unknown;
  files?: unknown;
  /** RAGFlow's session source of a new session: `workflow` for its own mode's new sessions. */
  source?: 'workflow';
}

/** The request's Idempotency-Key, checked as the native API checks it. */
export function idempotencyKeyOf(c: Context): string | undefined {
  const key = c.req.header('idempotency-key');
  if (key === undefined) return undefined;
  if (!IDEMPOTENCY_KEY.safeParse(key).success) throw new RagflowError(RAGFLOW.argument, 'Idempotency-Key must be 1-255 characters of A-Z a-z 0-9 _ . : -');
  return key;
}

/** The turn a request stands for; the agent must be the key's. */
export async function conversation(c: Context<RagflowEnv>, deps: AppDeps, agentId: string, fields: ConversationFields): Promise<Conversation> {
  const principal = c.get('principal');
  await reachableAgent(c, deps, agentId, () => new RagflowError(RAGFLOW.data, `You don't own the agent ${agentId}`));
  if (fields.sessionId !== undefined && !/^[0-9a-f]{32}$/.test(fields.sessionId)) throw new RagflowError(RAGFLOW.data, 'Session not found!');
  const idempotencyKey = idempotencyKeyOf(c);
  const runInput = runInputOf(fields);
  // an end user's sessions carry the user the token asserts, whatever user_id was sent
  if (principal.endUser) runInput.user_id = principal.endUser.id;
  else if (typeof fields.userId === 'string' && fields.userId) runInput.user_id = fields.userId;
  const authorize = fields.sessionId ? runAuthorizer(principal) : undefined;
  const clientAddress = deps.clientAddress?.(c);
  const files = fileAccess(principal, deps.access);
  const request: TurnRequest = {
    tenant: principal.tenant,
    workflowId: agentId,
    principal: idempotencyPrincipal(principal),
    actor: actorOf(principal),
    ...(authorize ? { authorize } : {}),
    ...(files ? { fileAccess: files } : {}),
    ...(fields.sessionId ? { runId: fields.sessionId } : { runUserId: newRunUser(principal, runInput.user_id), dialect: 'ragflow' as const, ...(fields.source ? { source: fields.source } : {}) }),
    ...(clientAddress ? { clientAddress } : {}),
    ...(idempotencyKey ? { idempotencyKey } : {}),
    // a message meeting a turn in flight: as the workflow's on_busy setting says (double-text.ts)
    onBusy: 'workflow',
    runInput,
  };
  // a keyed new session's id is the key's, so every retry names the same session
  const sessionId = fields.sessionId ?? (idempotencyKey ? derivedRunId(keyHashOf(request)) : newRunId());
  if (!fields.sessionId && !idempotencyKey) request.newRunId = sessionId;
  // resolved by the turn (lib/turns/files.ts), under the same access as file fields
  if (Array.isArray(fields.files) && fields.files.length > 0) runInput.files = fields.files;
  return { agentId, sessionId, isNew: fields.sessionId === undefined, request };
}

/**
 * RAGFlow's run input: a string query (Begin's only field takes it when no inputs are sent,
 * lib/canvas), or an object query whose keys answer Begin's fields; explicit `inputs` win.
 */
function runInputOf(fields: ConversationFields): RunInput {
  const runInput: RunInput = {};
  const { query } = fields;
  if (typeof query === 'string' && query) runInput.query = query;
  if (isRecord(fields.inputs) && Object.keys(fields.inputs).length > 0) runInput.inputs = fields.inputs;
  else if (isRecord(query) && Object.keys(query).length > 0) runInput.inputs = query;
  if (isRecord(query)) runInput.query = JSON.stringify(query);
  return runInput;
}

/**
 * Runs the turn. RAGFlow clients may send Begin's inputs with every message; once the run is
 * past its first turn and not waiting for a form, they are dropped rather than refused. A
 * message queued behind a turn in flight (the workflow's on_busy) is answered once its own turn
 * has run, as a replay: RAGFlow's API has no 202 (queued-answer.ts).
 */
export async function runConversation(deps: AppDeps, conv: Conversation, hooks: { onEvent?: (e: CanvasEvent) => void; onLoaded?: (head: SessionHead) => void } = {}): Promise<TurnResult> {
  const request: TurnRequest = { ...conv.request, ...(hooks.onEvent ? { onEvent: hooks.onEvent } : {}), ...(hooks.onLoaded ? { onLoaded: hooks.onLoaded } : {}) };
  try {
    return await executeTurn(deps.engine, request);
  } catch (error) {
    if (error instanceof TurnQueued) return awaitQueuedTurn(deps, request.tenant, error);
    if (error instanceof NotWaitingForInputError && request.runInput?.inputs) {
      const { inputs: _dropped, ...rest } = request.runInput;
      return executeTurn(deps.engine, { ...request, runInput: rest }).catch((again: unknown) => {
        if (again instanceof TurnQueued) return awaitQueuedTurn(deps, request.tenant, again);
        throw again;
      });
    }
    if (error instanceof NotFoundError && error.what === 'run') throw new RagflowError(RAGFLOW.data, 'Session not found!');
    throw error;
  }
}

/** Python's truthiness, as RAGFlow reads `stream` and `return_trace`. */
export function truthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (isRecord(value)) return Object.keys(value).length > 0;
  return Boolean(value);
}
