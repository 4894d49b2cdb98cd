/**
 * `GET /api/v1/agents/{id}/logs/{message_id}`. RAGFlow keeps each answer's component trace in
 * Redis under the agent and the `message_id` of its completion frames, for a while, and answers
 * `{}` once it is gone. Easel's message ids are made afresh for each completion request and
 * stored nowhere, so none leads back to a turn: this answers what RAGFlow answers for a log it
 * no longer has. A turn's full record (its events, calls and actor) is read with
 * `GET /workflows/v1/workflow-runs/{session_id}/turns/{n}`.
 */
import type { AppDeps } from '../app';
import { guardOf, param, reachableAgent, routeGroup } from './context';
import { success } from './envelope';

export function logRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  app.get('/logs/:mid', guard(async (c) => {
    await reachableAgent(c, deps, param(c, 'id'));
    param(c, 'mid');
    return success(c, {});
  }));
  return app;
}
