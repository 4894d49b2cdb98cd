/**
 * What every RAGFlow route group shares: its Hono env, the guard that answers errors in the
 * envelope, path parameters, paging, and the access checks (lib/http/access.ts decides; these
 * say it in RAGFlow's codes and words).
 */
import { type Context, Hono } from 'hono';
import { NotFoundError } from '../../store/errors';
import { getWorkflow, type Workflow } from '../../store/workflows';
import { mayAdminister, mayReachWorkflow } from '../access';
import type { AppDeps } from '../app';
import type { Principal } from '../auth';
import { WORKFLOW_ID } from '../schemas';
import { guarded, RAGFLOW, RagflowError } from './envelope';

export type RagflowEnv = { Variables: { principal: Principal } };
export type RagflowContext = Context<RagflowEnv>;
type Handler = (c: RagflowContext) => Promise<Response>;

/** A route group: a Hono app of its own, mounted with `app.route()` (lib/http/ragflow/index.ts). */
export function routeGroup(): Hono<RagflowEnv> {
  return new Hono<RagflowEnv>();
}

/** The guard of every RAGFlow handler: any error is answered in the envelope; unexpected ones are logged. */
export function guardOf(deps: AppDeps): (handler: Handler) => (c: RagflowContext) => Promise<Response> {
  return (handler) => guarded(handler as (c: Context) => Promise<Response>, (e) => deps.logger?.error('ragflow route failed', { error: String(e) }));
}

export function param(c: Context, name: string): string {
  const value = c.req.param(name);
  if (!value) throw new RagflowError(RAGFLOW.argument, `${name} is required.`);
  return value;
}

/** RAGFlow's most per page (`REST_API_MAX_PAGE_SIZE`). */
const MAX_PAGE_SIZE = 100;

/** `page` and `page_size` as RAGFlow reads them: a bad value falls back to 1 / 30; past 100 is refused. */
export function pageOf(q: Record<string, string>): { page: number; size: number } {
  const int = (v: string | undefined, fallback: number) => {
    const n = Number(v);
    return v !== undefined && Number.isInteger(n) && n >= 1 ? n : fallback;
  };
  const size = int(q.page_size, 30);
  if (size > MAX_PAGE_SIZE) throw new RagflowError(RAGFLOW.argument, `page_size must be less than or equal to ${MAX_PAGE_SIZE}`);
  return { page: int(q.page, 1), size };
}

/** RAGFlow's refusal of an agent the caller may not use (its `_require_canvas_access`). */
export const noAccess = () => new RagflowError(RAGFLOW.operation, 'Make sure you have permission to access the agent.', false);

/**
 * The agent if the principal reaches it; else `refusal`, the same for a missing, deleted or
 * another tenant's agent, so an id tells nothing.
 */
export async function reachableAgent(c: RagflowContext, deps: AppDeps, id: string, refusal: () => RagflowError = noAccess): Promise<Workflow> {
  const principal = c.get('principal');
  // no workflow has an id of another shape; one too long for a DynamoDB key must not reach it
  if (!mayReachWorkflow(principal, id) || !WORKFLOW_ID.safeParse(id).success) throw refusal();
  try {
    const w = await getWorkflow(deps.engine.store, principal.tenant, id);
    if (w.deleted) throw refusal();
    return w;
  } catch (error) {
    if (error instanceof NotFoundError) throw refusal();
    throw error;
  }
}

/** Refuses a principal without the admin scope (execute keys run agents; they do not manage them). */
export function adminOnly(c: RagflowContext): void {
  if (!mayAdminister(c.get('principal'))) throw new RagflowError(RAGFLOW.operation, 'This operation needs an admin API key.');
}
