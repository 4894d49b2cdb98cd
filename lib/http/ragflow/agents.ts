/**
 * RAGFlow's agents over Easel's workflows (mounted at /api/v1/agents): an agent is a workflow,
 * its DSL the active version's. Updating an agent's DSL adds and activates a version; sessions
 * stay on the version they started on. Answers follow RAGFlow's `agent_api.py`.
 */
import { randomUUID } from 'node:crypto';
import { DEFAULT_CANVAS_CATEGORY, deleteWorkflow, getWorkflow, updateWorkflow, workflowRecords } from '../../store/workflows';
import { addImportedVersion, createImportedWorkflow } from '../../webhooks/import';
import { mayReachWorkflow } from '../access';
import type { AppDeps } from '../app';
import type { Principal } from '../auth';
import { prepareImport } from '../dsl-import';
import { knowledgeWarnings, warningText } from '../knowledge-warnings';
import { webhookFields } from '../routes/webhooks';
import { checkTitleFree, compileDsl, detailsOf, dropUnsupportedToolsOf, readDsl, titleOf } from './agent-input';
import { agentFilters, filterAgents } from './agent-list';
import { agentRow, agentView } from './agent-view';
import { adminOnly, guardOf, param, reachableAgent, routeGroup } from './context';
import { jsonBody, RAGFLOW, RagflowError, success, successWith } from './envelope';

// completions.ts reads these from here
export { param, type RagflowEnv } from './context';

export function agentRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  const store = deps.engine.store;
  const maxNodes = deps.maxDslNodes ?? 500;
  const compileWith = (dsl: Record<string, unknown>) => compileDsl(dsl, deps.engine.registry, maxNodes);
  const reachable = async (principal: Principal) => (await workflowRecords(store, principal.tenant)).filter((w) => mayReachWorkflow(principal, w.id));

  app.get('/', guard(async (c) => {
    const principal = c.get('principal');
    const agents = await reachable(principal);
    const q = c.req.query();
    if (q.type === 'filter') return success(c, agentFilters(agents, principal.tenant));
    const { page, total } = filterAgents(agents, q, principal.tenant);
    return success(c, { canvas: page.map(agentRow), total });
  }));

  app.post('/', guard(async (c) => {
    adminOnly(c);
    const principal = c.get('principal');
    const req = await jsonBody(c);
    if (req.dsl === undefined || req.dsl === null) throw new RagflowError(RAGFLOW.argument, 'No DSL data in request.', false);
    const sent = readDsl(req.dsl);
    const title = titleOf(req);
    if (title === undefined) throw new RagflowError(RAGFLOW.argument, 'No title in request.', false);
    const details = detailsOf(req);
    const category = details.canvasCategory ?? DEFAULT_CANVAS_CATEGORY;
    const drop = dropUnsupportedToolsOf(req, c.req.query('drop_unsupported_tools'));
    const { dsl, warnings, commit } = await prepareImport(deps, principal.tenant, sent, { dropUnsupportedTools: drop, compile: compileWith });
    checkTitleFree(title, category, await workflowRecords(store, principal.tenant));
    await commit();
    const created = await createImportedWorkflow(deps, { tenant: principal.tenant, id: randomUUID().replaceAll('-', ''), name: title, ...details, canvasCategory: category, dsl });
    const data = { ...(await agentView(store, created)), ...(await webhookFields(deps, created.tenant, created, false)) };
    return successWith(c, data, warningText([...warnings, ...(await knowledgeWarnings(deps, principal.tenant, dsl))]));
  }));

  app.get('/:id', guard(async (c) => {
    const w = await reachableAgent(c, deps, param(c, 'id'), () => new RagflowError(RAGFLOW.data, 'canvas not found.'));
    return success(c, { ...(await agentView(store, w)), ...(await webhookFields(deps, w.tenant, w, false)) });
  }));

  app.put('/:id', guard(async (c) => {
    adminOnly(c);
    const principal = c.get('principal');
    const current = await reachableAgent(c, deps, param(c, 'id'));
    const req = await jsonBody(c);
    const sent = req.dsl === undefined || req.dsl === null ? undefined : readDsl(req.dsl);
    const title = titleOf(req);
    const details = detailsOf(req);
    const drop = dropUnsupportedToolsOf(req, c.req.query('drop_unsupported_tools'));
    const prepared = sent ? await prepareImport(deps, principal.tenant, sent, { dropUnsupportedTools: drop, compile: compileWith }) : undefined;
    if (title !== undefined) checkTitleFree(title, details.canvasCategory ?? current.canvasCategory, await workflowRecords(store, principal.tenant), current.id);
    await prepared?.commit();
    const dsl = prepared?.dsl;
    if (dsl) await addImportedVersion(deps, principal.tenant, current.id, dsl, true);
    if (title !== undefined || Object.keys(details).length > 0) await updateWorkflow(store, principal.tenant, current.id, { ...(title !== undefined ? { name: title } : {}), ...details });
    const updated = await getWorkflow(store, principal.tenant, current.id);
    const warnings = dsl ? [...(prepared?.warnings ?? []), ...(await knowledgeWarnings(deps, principal.tenant, dsl))] : [];
    return successWith(c, { update_time: Date.parse(updated.updatedAt) }, warningText(warnings));
  }));

  app.delete('/:id', guard(async (c) => {
    adminOnly(c);
    const id = param(c, 'id');
    await reachableAgent(c, deps, id, () => new RagflowError(RAGFLOW.operation, 'Only the owner of the agent is authorized for this operation.', false));
    await deleteWorkflow(store, c.get('principal').tenant, id);
    return success(c, true);
  }));

  return app;
}
