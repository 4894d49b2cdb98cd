/**
 * Who may do what: the one place the access matrix of docs/access.md is decided. Routes ask
 * here; none decides on its own.
 *
 *   admin key                 everything of its tenant
 *   execute key (bare)        its workflows' description and form; start a run (rate-limited);
 *                             upload a file (answered with a file token)
 *   execute key + run token   that run, and nothing else: its turns, its events, its files
 *   execute key + end-user    that user's runs of the workflows the token names: list, read,
 *     token                   resume; start runs that are the user's; upload the user's files
 *   webhook delivery          no key: its Begin's credentials (lib/webhooks/delivery.ts) let it
 *                             start a run that is the tenant's alone (`webhookRun`)
 *
 * Anything an execute key may not reach answers exactly as if it did not exist (404), so a key
 * learns nothing about runs that are not its own. The RAGFlow and OpenAI-compatible routes carry
 * only Authorization: an execute key needs an end-user token there.
 */
import type { ServerKeySet } from '../secrets/server-keys';
import { type SignedTokens, signedTokens } from '../secrets/signed-tokens';
import type { Actor } from '../turns/actors';
import type { RunOwner } from '../turns/execute';
import type { FileAccess } from '../turns/files';
import type { StoredFile } from '../store/files';
import { NotFoundError } from '../store/errors';
import type { Principal } from './auth';
import { HttpError } from './errors';
import { formLinkTokens } from '../turns/form-links';

/**
 * The server-signed tokens: one per run a public key started, one per upload made without a
 * run, one per form link (lib/http/form-links.ts).
 */
export interface AccessTokens {
  runTokens: SignedTokens;
  fileTokens: SignedTokens;
  formTokens: SignedTokens;
}

/** The tokens, each under a server key of its own purpose. */
export function accessTokens(serverKey: (purpose: string) => Promise<ServerKeySet>, now: () => number = Date.now): AccessTokens {
  return {
    runTokens: signedTokens(serverKey, 'run-token', 'rt1', now),
    fileTokens: signedTokens(serverKey, 'file-token', 'ft1', now),
    formTokens: formLinkTokens(serverKey, now),
  };
}

/** Whether the principal reaches this workflow (RAGFlow: agent): an admin every one; an execute key those it lists, narrowed by an end-user token's. */
export function mayReachWorkflow(p: Principal, workflowId: string): boolean {
  if (p.scope === 'admin') return true;
  if (!p.workflowIds.includes(workflowId)) return false;
  return !p.endUser || p.endUser.workflowIds.includes(workflowId);
}

/** Whether the principal may change or delete workflows, versions, keys and runs: the admin scope only. */
export function mayAdminister(p: Principal): boolean {
  return p.scope === 'admin';
}

/** Whether the principal reaches this run (its tenant is checked by the store's keys). */
export function mayReachRun(p: Principal, run: RunOwner): boolean {
  if (p.scope === 'admin') return true;
  if (!p.workflowIds.includes(run.workflowId)) return false;
  if (p.runId === run.id) return true;
  return p.endUser !== undefined && run.userId === p.endUser.id && p.endUser.workflowIds.includes(run.workflowId);
}

/** For the turn layer: refuses a run the principal does not reach, as a missing one. */
export function runAuthorizer(p: Principal): ((run: RunOwner) => void) | undefined {
  if (p.scope === 'admin') return undefined;
  return (run) => {
    if (!mayReachRun(p, run)) throw new NotFoundError('run');
  };
}

/**
 * A turn on an existing run: a bare execute key (or one whose run token opens another run)
 * is refused before anything is read; an end user's is checked once the run is loaded.
 */
export function checkRunRequest(p: Principal, runId: string): void {
  if (p.scope === 'admin' || p.runId === runId || p.endUser) return;
  throw new NotFoundError('run');
}

/** Whose runs a listing shows: the tenant's (admin), the end user's, or none (refused). */
export function runListing(p: Principal, requestedUserId: string | undefined): { userId?: string } {
  if (p.scope === 'admin') return requestedUserId !== undefined ? { userId: requestedUserId } : {};
  // a client-sent user id never widens what the token asserts
  if (p.endUser) return { userId: p.endUser.id };
  throw new HttpError('forbidden', 'listing runs needs an admin key, or an execute key with an end-user token (Easel-End-User-Token)');
}

/** The user a new run belongs to: the end user's; on a bare execute key nobody's (a sent user_id is only passed to the workflow). */
export function newRunUser(p: Principal, sentUserId: string | null | undefined): string | null {
  if (p.scope === 'admin') return sentUserId ?? null;
  return p.endUser?.id ?? null;
}

/** Idempotency keys are bound to the key and, when one is asserted, the end user. */
export function idempotencyPrincipal(p: Principal): string {
  return p.endUser ? `${p.keyId}\nuser:${p.endUser.id}` : p.keyId;
}

/** Who acts, as turn records name it. */
export function actorOf(p: Principal): Actor {
  if (p.scope === 'admin') return { kind: 'admin_key', id: p.keyId };
  if (p.endUser) return { kind: 'end_user', id: p.endUser.id, key_id: p.keyId };
  if (p.runId) return { kind: 'run_token', id: p.keyId };
  return { kind: 'execute_key', id: p.keyId };
}

/**
 * A run a webhook delivery starts: nobody's (admin keys alone reach it), its turns acted by the
 * webhook, and its idempotency keys (delivery ids) bound to that webhook.
 */
export function webhookRun(webhookId: string): { principal: string; actor: Actor; runUserId: null } {
  return { principal: `webhook:${webhookId}`, actor: { kind: 'webhook', id: webhookId }, runUserId: null };
}

/** Who an upload belongs to: the run of the run token, the end user, or nobody yet (bare key: a file token is answered). */
export function uploadOwner(p: Principal): string | undefined {
  if (p.scope === 'admin') return undefined;
  if (p.runId) return `run:${p.runId}`;
  if (p.endUser) return `user:${p.endUser.id}`;
  return undefined;
}

/** Whether the principal may read a file's metadata. A bare key's upload is read with its token only. */
export function mayReadFile(p: Principal, file: StoredFile): boolean {
  if (p.scope === 'admin') return true;
  if (file.owner === undefined) return false;
  if (p.runId && file.owner === `run:${p.runId}`) return true;
  return p.endUser !== undefined && file.owner === `user:${p.endUser.id}`;
}

/** Which files the principal may name in a turn. */
export function fileAccess(p: Principal, tokens: AccessTokens | undefined): FileAccess | undefined {
  if (p.scope === 'admin') return undefined;
  const fileOfToken = tokens ? (value: string) => tokens.fileTokens.verify(p.tenant, value) : undefined;
  return { owners: p.endUser ? [`user:${p.endUser.id}`] : [], ...(fileOfToken ? { fileOfToken } : {}) };
}

/** RAGFlow's and OpenAI's clients send only Authorization: there, an execute key must carry an end-user token. */
export function compatRouteRefusal(p: Principal): string | null {
  if (p.scope === 'admin' || p.endUser) return null;
  return 'An execute key needs an end-user token on this route: send "Authorization: Bearer <key>.<end-user token>" (an HS256 JWT signed with an embed secret of the tenant).';
}
