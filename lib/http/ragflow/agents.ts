/**
 * RAGFlow's agents and sessions, over Easel's workflows and runs: an agent is a workflow (its
 * DSL the active version's), a session is a run (session id == run id). Updating an agent's DSL
 * adds and activates a version; sessions stay on the version they started on.
 */
import type { Context, Hono } from 'hono';
import { compileWorkflow } from '../../canvas';
import { Canvas } from '../../canvas';
import { isRecord } from '../../canvas/references';
import { NotFoundError } from '../../store/errors';
import { deleteSession } from '../../store/deletion';
import { listSessions, type SessionSummary } from '../../store/session-listing';
import { loadSession } from '../../store/sessions';
import {
  addVersion,
  allWorkflows,
  createWorkflow,
  deleteWorkflow,
  getVersion,
  getWorkflow,
  updateWorkflow,
  type Workflow,
} from '../../store/workflows';
import { compiledVersion, createRun } from '../../turns/execute';
import { actorOf, mayReachRun, newRunUser, runListing } from '../access';
import type { AppDeps } from '../app';
import type { Principal } from '../auth';
import { WORKFLOW_ID } from '../schemas';
import { epochMs, failure, guarded, httpDate, jsonBody, ok, queryFlag, RAGFLOW, RagflowError, success } from './envelope';

export type RagflowEnv = { Variables: { principal: Principal } };

export function param(c: Context, name: string): string {
  const value = c.req.param(name);
  if (!value) throw new RagflowError(RAGFLOW.argument, `${name} is required.`);
  return value;
}

/** How many past turns a session's messages are rebuilt from. */
const MESSAGE_TURNS = 50;

export function registerAgentRoutes(app: Hono<RagflowEnv>, deps: AppDeps): void {
  const { engine } = deps;
  const store = engine.store;
  const guard = (h: (c: Context<RagflowEnv>) => Promise<Response>) => guarded(h as (c: Context) => Promise<Response>, (e) => deps.logger?.error('ragflow route failed', { error: String(e) }));

  /** The agent if the key may see it; RAGFlow answers a foreign or missing agent with `notFound`. */
  const ownAgent = async (c: Context<RagflowEnv>, id: string, notFound: RagflowError): Promise<Workflow> => {
    const principal = c.get('principal');
    if (principal.scope !== 'admin' && !principal.workflowIds.includes(id)) throw notFound;
    if (principal.endUser && !principal.endUser.workflowIds.includes(id)) throw notFound;
    // no workflow has an id of another shape; one too long for a DynamoDB key must not reach it
    if (!WORKFLOW_ID.safeParse(id).success) throw notFound;
    try {
      const w = await getWorkflow(store, principal.tenant, id);
      if (w.deleted) throw notFound;
      return w;
    } catch (error) {
      if (error instanceof NotFoundError) throw notFound;
      throw error;
    }
  };
  const adminOnly = (c: Context<RagflowEnv>) => {
    if (c.get('principal').scope !== 'admin') throw new RagflowError(RAGFLOW.operation, 'This operation needs an admin API key.');
  };
  const agentView = async (w: Workflow, tenant: string) => ({
    id: w.id,
    title: w.name,
    description: w.description || null,
    dsl: await getVersion(store, tenant, w.id, w.activeVersion),
    avatar: null,
    canvas_type: null,
    canvas_category: 'agent_canvas',
    permission: 'me',
    user_id: tenant,
    version: w.activeVersion,
    create_time: epochMs(w.createdAt),
    create_date: httpDate(w.createdAt),
    update_time: epochMs(w.updatedAt),
    update_date: httpDate(w.updatedAt),
  });
  const parseDsl = (dsl: unknown): Record<string, unknown> => {
    let value = dsl;
    if (typeof value === 'string') {
      try {
        value = JSON.parse(value);
      } catch {
        throw new RagflowError(RAGFLOW.argument, 'The DSL is not valid JSON.');
      }
    }
    if (!isRecord(value)) throw new RagflowError(RAGFLOW.argument, 'No DSL data in request.', false);
    try {
      compileWorkflow(value, engine.registry, { maxComponents: deps.maxDslNodes ?? 500 });
    } catch (error) {
      const problems = (error as { problems?: { component_id?: string; field?: string; message: string }[] }).problems;
      const detail = problems?.map((p) => [p.component_id, p.field].filter(Boolean).join('.') + `: ${p.message}`).join('; ');
      throw new RagflowError(RAGFLOW.argument, `Invalid DSL: ${detail ?? (error as Error).message}`);
    }
    return value;
  };

  app.get('/api/v1/agents', guard(async (c) => {
    const principal = c.get('principal');
    const q = c.req.query();
    const page = Math.max(1, Number(q.page ?? 1) || 1);
    const size = Math.min(100, Math.max(1, Number(q.page_size ?? 30) || 30));
    let agents = (await allWorkflows(store, principal.tenant)).filter((w) => principal.scope === 'admin' || (principal.workflowIds.includes(w.id) && (!principal.endUser || principal.endUser.workflowIds.includes(w.id))));
    if (q.id) agents = agents.filter((w) => w.id === q.id);
    if (q.title ?? q.name) agents = agents.filter((w) => w.name === (q.title ?? q.name));
    if ((q.id || q.title || q.name) && agents.length === 0) return failure(c, RAGFLOW.data, "The agent doesn't exist.");
    const orderby = q.orderby === 'create_time' ? 'createdAt' : 'updatedAt';
    const desc = queryFlag(q.desc);
    agents.sort((a, b) => (desc ? -1 : 1) * a[orderby].localeCompare(b[orderby]));
    const slice = agents.slice((page - 1) * size, page * size);
    const full = await Promise.all(slice.map((w) => getWorkflow(store, principal.tenant, w.id)));
    return ok(c, await Promise.all(full.map((w) => agentView(w, principal.tenant))));
  }));

  app.post('/api/v1/agents', guard(async (c) => {
    adminOnly(c);
    const principal = c.get('principal');
    const req = await jsonBody(c);
    if (req.dsl === undefined || req.dsl === null) return failure(c, RAGFLOW.argument, 'No DSL data in request.', false);
    const title = typeof req.title === 'string' ? req.title.trim() : '';
    if (!title) return failure(c, RAGFLOW.argument, 'No title in request.', false);
    const dsl = parseDsl(req.dsl);
    if ((await allWorkflows(store, principal.tenant)).some((w) => w.name === title)) {
      return failure(c, RAGFLOW.data, `Agent with title ${title} already exists.`);
    }
    const created = await createWorkflow(store, {
      tenant: principal.tenant,
      id: crypto.randomUUID().replaceAll('-', ''),
      name: title,
      ...(typeof req.description === 'string' ? { description: req.description } : {}),
      dsl,
    });
    return success(c, await agentView(created, principal.tenant));
  }));

  const notOwner = new RagflowError(RAGFLOW.operation, 'Only owner of canvas authorized for this operation.', false);

  app.get('/api/v1/agents/:id', guard(async (c) => {
    const w = await ownAgent(c, param(c, 'id'), new RagflowError(RAGFLOW.data, 'canvas not found.'));
    return ok(c, await agentView(w, c.get('principal').tenant));
  }));

  app.put('/api/v1/agents/:id', guard(async (c) => {
    adminOnly(c);
    const principal = c.get('principal');
    const id = param(c, 'id');
    await ownAgent(c, id, notOwner);
    const req = await jsonBody(c);
    const title = typeof req.title === 'string' ? req.title.trim() : undefined;
    const description = typeof req.description === 'string' ? req.description : undefined;
    if (req.dsl !== undefined && req.dsl !== null) await addVersion(store, principal.tenant, id, parseDsl(req.dsl), true);
    if (title !== undefined || description !== undefined) {
      await updateWorkflow(store, principal.tenant, id, { ...(title ? { name: title } : {}), ...(description !== undefined ? { description } : {}) });
    }
    return success(c, true);
  }));

  app.delete('/api/v1/agents/:id', guard(async (c) => {
    adminOnly(c);
    const id = param(c, 'id');
    await ownAgent(c, id, notOwner);
    await deleteWorkflow(store, c.get('principal').tenant, id);
    return success(c, true);
  }));

  // ---- sessions ----------------------------------------------------------------------------

  const notYours = (id: string) => new RagflowError(RAGFLOW.data, `You don't own the agent ${id}.`);

  /** A session as RAGFlow shows it: its messages rebuilt from the turns, the state as `dsl`. */
  const sessionView = async (tenant: string, agentId: string, summary: SessionSummary, withDsl: boolean) => {
    const loaded = await loadSession(store, tenant, summary.id, MESSAGE_TURNS);
    const workflow = await compiledVersion(engine, tenant, summary.workflowId, summary.version);
    const prologue = Canvas.create(workflow, { seed: 0 }).prologue;
    const messages = [
      ...(prologue ? [{ role: 'assistant', content: prologue }] : []),
      ...(loaded.history as [string, string][]).map(([role, content]) => ({ role, content })),
    ];
    const view: Record<string, unknown> = {
      id: summary.id,
      agent_id: agentId,
      user_id: summary.userId ?? '',
      name: 'New session',
      source: 'agent',
      message: messages,
      messages,
      status: summary.status,
      turn_number: summary.turn,
      version: summary.version,
      create_time: epochMs(summary.createdAt),
      create_date: httpDate(summary.createdAt),
      update_time: epochMs(summary.updatedAt),
      update_date: httpDate(summary.updatedAt),
    };
    if (withDsl) {
      const dsl = (await getVersion(store, tenant, summary.workflowId, summary.version)) as Record<string, unknown>;
      const state = (loaded.latest?.state ?? Canvas.create(workflow, { seed: 0 }).serialize()) as Record<string, unknown>;
      view.dsl = {
        components: dsl.components,
        graph: dsl.graph ?? {},
        globals: state.globals,
        history: loaded.history,
        path: state.frontier,
        messages: [],
        retrieval: [],
        memory: [],
        task_id: agentId,
        easel: { status: state.status, turn_number: summary.turn, prompt: state.prompt ?? null },
      };
    }
    return view;
  };

  app.post('/api/v1/agents/:id/sessions', guard(async (c) => {
    const principal = c.get('principal');
    const id = param(c, 'id');
    await ownAgent(c, id, new RagflowError(RAGFLOW.data, 'You cannot access the agent.'));
    const req = await jsonBody(c);
    const sent = typeof req.user_id === 'string' ? req.user_id : c.req.query('user_id');
    const clientAddress = deps.clientAddress?.(c);
    const { head } = await createRun(engine, { tenant: principal.tenant, workflowId: id, userId: newRunUser(principal, sent), actor: actorOf(principal), dialect: 'ragflow', ...(clientAddress ? { clientAddress } : {}) });
    return ok(c, await sessionView(principal.tenant, id, { id: head.id, workflowId: id, version: head.version, status: head.status, turn: 0, userId: head.userId, createdAt: head.createdAt, updatedAt: head.updatedAt }, true));
  }));

  app.get('/api/v1/agents/:id/sessions', guard(async (c) => {
    const principal = c.get('principal');
    const id = param(c, 'id');
    await ownAgent(c, id, notYours(id));
    const q = c.req.query();
    const page = Math.max(1, Number(q.page ?? 1) || 1);
    const size = Math.min(100, Math.max(1, Number(q.page_size ?? 30) || 30));
    const all: SessionSummary[] = [];
    let cursor: Record<string, unknown> | undefined;
    do {
      const res = await listSessions(store, principal.tenant, id, { limit: 100, ...(cursor ? { cursor } : {}), ...runListing(principal, q.user_id || undefined) });
      all.push(...res.items);
      cursor = res.cursor;
    } while (cursor && all.length < page * size + 100);
    let sessions = q.id ? all.filter((s) => s.id === q.id) : all;
    const orderby = q.orderby === 'create_time' ? 'createdAt' : 'updatedAt';
    const desc = queryFlag(q.desc);
    sessions = [...sessions].sort((a, b) => (desc ? -1 : 1) * a[orderby].localeCompare(b[orderby]));
    const slice = sessions.slice((page - 1) * size, page * size);
    return ok(c, await Promise.all(slice.map((s) => sessionView(principal.tenant, id, s, queryFlag(q.dsl)))));
  }));

  app.get('/api/v1/agents/:id/sessions/:sid', guard(async (c) => {
    const principal = c.get('principal');
    const id = param(c, 'id');
    await ownAgent(c, id, notYours(id));
    const summary = await findSession(c, id, param(c, 'sid'));
    return ok(c, await sessionView(principal.tenant, id, summary, true));
  }));

  app.delete('/api/v1/agents/:id/sessions', guard(async (c) => {
    adminOnly(c);
    const principal = c.get('principal');
    const id = param(c, 'id');
    await ownAgent(c, id, new RagflowError(RAGFLOW.data, `You don't own the agent ${id}`));
    const req = await jsonBody(c);
    let ids: string[] = Array.isArray(req.ids) ? req.ids.filter((x): x is string => typeof x === 'string') : [];
    if (ids.length === 0 && req.delete_all === true) {
      let cursor: Record<string, unknown> | undefined;
      do {
        const res = await listSessions(store, principal.tenant, id, { limit: 100, ...(cursor ? { cursor } : {}) });
        ids.push(...res.items.map((s) => s.id));
        cursor = res.cursor;
      } while (cursor);
    }
    if (ids.length === 0) return ok(c);
    const errors: string[] = [];
    const unique = [...new Set(ids)];
    if (unique.length < ids.length) errors.push(`Duplicate session ids: ${[...new Set(ids.filter((x, i) => ids.indexOf(x) !== i))].join(',')}`);
    ids = unique;
    let done = 0;
    for (const sid of ids) {
      try {
        await findSession(c, id, sid);
        await deleteSession(store, principal.tenant, sid);
        done++;
      } catch (error) {
        if (!(error instanceof RagflowError)) throw error;
        errors.push(`The agent doesn't own the session ${sid}`);
      }
    }
    if (errors.length === 0) return ok(c);
    if (done === 0) return failure(c, RAGFLOW.data, errors.join('; '));
    return ok(c, { success_count: done, errors });
  }));

  /** A session of this agent, or 102 as RAGFlow answers for one it does not own. */
  const findSession = async (c: Context<RagflowEnv>, agentId: string, sid: string): Promise<SessionSummary> => {
    const principal = c.get('principal');
    const tenant = principal.tenant;
    if (!/^[0-9a-f]{32}$/.test(sid)) throw new RagflowError(RAGFLOW.data, `The agent doesn't own the session ${sid}`);
    try {
      const { head } = await loadSession(store, tenant, sid, 0);
      if (head.workflowId !== agentId) throw new NotFoundError('run');
      if (!mayReachRun(principal, { id: head.id, workflowId: head.workflowId, userId: head.userId })) throw new NotFoundError('run');
      return { id: head.id, workflowId: head.workflowId, version: head.version, status: head.status, turn: head.turn, userId: head.userId, createdAt: head.createdAt, updatedAt: head.updatedAt };
    } catch (error) {
      if (error instanceof NotFoundError) throw new RagflowError(RAGFLOW.data, `The agent doesn't own the session ${sid}`);
      throw error;
    }
  };
}
