/**
 * `DELETE /api/v1/agents/{id}/sessions` `{ids}` or `{delete_all: true}`, answered as RAGFlow's
 * `delete_agent_session` does: nothing asked, nothing done (`{code: 0}`); sessions not the
 * agent's are named in `errors`, with `success_count` when some were deleted and code 102 when
 * none were; duplicate ids are reported the same way once everything else went through.
 */
import { deleteSession } from '../../store/deletion';
import type { TurnEngine } from '../../turns/execute';
import type { RagflowContext } from './context';
import { failure, ok, RAGFLOW, RagflowError } from './envelope';
import { reachableSessions } from './session-list';
import { findSession } from './session-view';

export async function deleteSessions(c: RagflowContext, engine: TurnEngine, agentId: string, req: Record<string, unknown>): Promise<Response> {
  const principal = c.get('principal');
  if (Object.keys(req).length === 0) return ok(c);
  let ids: string[] = Array.isArray(req.ids) ? req.ids.filter((x): x is string => typeof x === 'string') : [];
  if (ids.length === 0) {
    if (req.delete_all !== true) return ok(c);
    ids = (await reachableSessions(engine.store, principal, agentId)).map((s) => s.id);
    if (ids.length === 0) return ok(c);
  }
  const unique = [...new Set(ids)];
  const duplicates = unique.filter((id) => ids.indexOf(id) !== ids.lastIndexOf(id)).map((id) => `Duplicate session ids: ${id}`);
  const notOwned = (sid: string) => new RagflowError(RAGFLOW.data, `The agent doesn't own the session ${sid}`);
  const errors: string[] = [];
  let done = 0;
  for (const sid of unique) {
    try {
      await findSession(engine, principal, agentId, sid, () => notOwned(sid));
    } catch (error) {
      if (!(error instanceof RagflowError)) throw error;
      errors.push(error.message);
      continue;
    }
    await deleteSession(engine.store, principal.tenant, sid);
    done++;
  }
  for (const reported of [errors, duplicates]) {
    if (reported.length === 0) continue;
    if (done > 0) return ok(c, { success_count: done, errors: reported });
    return failure(c, RAGFLOW.data, reported.join(reported === errors ? '; ' : ';'));
  }
  return ok(c);
}
