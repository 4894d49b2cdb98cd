/**
 * Agent tags, as RAGFlow keeps them (mounted at /api/v1/agents): `GET /tags` counts the tags of
 * the agents the caller reaches (most used first), `PUT /{id}/tags` `{tags}` (a list, or one
 * comma-separated text) replaces an agent's. `GET /agents` filters on them (`tags`, `keywords`).
 */
import { updateWorkflow, workflowRecords } from '../../store/workflows';
import { mayReachWorkflow } from '../access';
import type { AppDeps } from '../app';
import { adminOnly, guardOf, param, reachableAgent, routeGroup } from './context';
import { jsonBody, RAGFLOW, RagflowError, success } from './envelope';

const MAX_TAGS = 32;
const MAX_TAG = 64;

export function tagRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  const store = deps.engine.store;

  app.get('/tags', guard(async (c) => {
    const principal = c.get('principal');
    const category = c.req.query('canvas_category');
    const counts = new Map<string, number>();
    for (const w of await workflowRecords(store, principal.tenant)) {
      if (!mayReachWorkflow(principal, w.id) || (category && w.canvasCategory !== category)) continue;
      for (const tag of w.tags) counts.set(tag, (counts.get(tag) ?? 0) + 1);
    }
    const sorted = [...counts].sort(([a, x], [b, y]) => y - x || a.localeCompare(b));
    return success(c, sorted.map(([tag, count]) => ({ tag, count })));
  }));

  app.put('/:id/tags', guard(async (c) => {
    adminOnly(c);
    const w = await reachableAgent(c, deps, param(c, 'id'), () => new RagflowError(RAGFLOW.operation, 'Agent not found or no permission.', false));
    const sent = (await jsonBody(c)).tags ?? '';
    const list = Array.isArray(sent) ? sent : typeof sent === 'string' ? sent.split(',') : undefined;
    if (!list || list.some((t) => typeof t !== 'string')) throw new RagflowError(RAGFLOW.argument, 'tags must be a list of strings or one comma-separated string.', false);
    const tags = [...new Set((list as string[]).map((t) => t.trim()).filter(Boolean))];
    if (tags.length > MAX_TAGS || tags.some((t) => t.length > MAX_TAG || t.includes(','))) {
      throw new RagflowError(RAGFLOW.argument, `At most ${MAX_TAGS} tags of at most ${MAX_TAG} characters each, without commas.`, false);
    }
    await updateWorkflow(store, w.tenant, w.id, { tags });
    return success(c, true);
  }));

  return app;
}
