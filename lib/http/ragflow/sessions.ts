/**
 * RAGFlow's agent sessions over Easel's runs (mounted at /api/v1/agents/{id}/sessions): a
 * session is a run (session id == run id). Creating one makes a run at turn 0 with the prologue;
 * its `name` is kept on the run, its `user_id` is the one lib/http/access.ts decides.
 */
import { deleteSession } from '../../store/deletion';
import { createRun } from '../../turns/execute';
import { actorOf, newRunUser } from '../access';
import type { AppDeps } from '../app';
import { adminOnly, guardOf, param, reachableAgent, routeGroup } from './context';
import { jsonBody, ok, RAGFLOW, RagflowError, success } from './envelope';
import { deleteSessions } from './session-delete';
import { filterSessions, reachableSessions, sessionNames } from './session-list';
import { findSession, sessionNotFound, sessionView } from './session-view';

/** RAGFlow's name column. */
const MAX_NAME = 255;

export function sessionRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  const { engine } = deps;

  app.post('/', guard(async (c) => {
    const principal = c.get('principal');
    const id = param(c, 'id');
    await reachableAgent(c, deps, id);
    const req = await jsonBody(c);
    const name = req.name ?? '';
    if (typeof name !== 'string' || name.length > MAX_NAME) throw new RagflowError(RAGFLOW.argument, `name must be a string of at most ${MAX_NAME} characters.`);
    const sent = typeof req.user_id === 'string' && req.user_id ? req.user_id : c.req.query('user_id');
    const clientAddress = deps.clientAddress?.(c);
    const { head } = await createRun(engine, { tenant: principal.tenant, workflowId: id, userId: newRunUser(principal, sent), name, actor: actorOf(principal), dialect: 'ragflow', ...(clientAddress ? { clientAddress } : {}) });
    return ok(c, await sessionView(engine, principal.tenant, { ...head, turn: 0 }, true));
  }));

  app.get('/', guard(async (c) => {
    const principal = c.get('principal');
    const id = param(c, 'id');
    await reachableAgent(c, deps, id);
    const q = c.req.query();
    const sessions = await reachableSessions(engine.store, principal, id, q.exp_user_id || q.user_id || undefined);
    if (q.exp_user_id) {
      const names = sessionNames(sessions);
      return c.json({ code: 0, message: 'success', data: names, total: names.length });
    }
    const { page, total } = filterSessions(sessions, q);
    const withDsl = q.dsl !== 'false' && q.dsl !== 'False';
    const data = await Promise.all(page.map((s) => sessionView(engine, principal.tenant, s, withDsl)));
    return c.json({ code: 0, message: 'success', data, total });
  }));

  app.get('/:sid', guard(async (c) => {
    const principal = c.get('principal');
    const id = param(c, 'id');
    await reachableAgent(c, deps, id);
    const summary = await findSession(engine, principal, id, param(c, 'sid'), sessionNotFound);
    return success(c, await sessionView(engine, principal.tenant, summary, true));
  }));

  app.delete('/:sid', guard(async (c) => {
    adminOnly(c);
    const principal = c.get('principal');
    const id = param(c, 'id');
    await reachableAgent(c, deps, id);
    const summary = await findSession(engine, principal, id, param(c, 'sid'), sessionNotFound);
    await deleteSession(engine.store, principal.tenant, summary.id);
    // RAGFlow answers the number of sessions deleted
    return success(c, 1);
  }));

  app.delete('/', guard(async (c) => {
    adminOnly(c);
    const id = param(c, 'id');
    await reachableAgent(c, deps, id);
    return deleteSessions(c, engine, id, await jsonBody(c));
  }));

  return app;
}
