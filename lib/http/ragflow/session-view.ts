/**
 * An Easel run as RAGFlow shows a session: its messages rebuilt from the turns (the prologue
 * first; an assistant message with the references its `message_end` sent, kept in the turn's
 * history), and, when asked, the state as a `dsl` (RAGFlow keeps a copy of the canvas per session).
 */
import { Canvas, entryPrologue } from '../../canvas';
import { isRecord } from '../../canvas/references';
import { NotFoundError } from '../../store/errors';
import type { SessionSummary } from '../../store/session-listing';
import { loadSession } from '../../store/sessions';
import { getVersion } from '../../store/workflows';
import { compiledVersion, type TurnEngine } from '../../turns/execute';
import { mayReachRun } from '../access';
import type { Principal } from '../auth';
import { epochMs, httpDate, RAGFLOW, RagflowError } from './envelope';

/** How many past turns a session's messages are rebuilt from. */
const MESSAGE_TURNS = 50;

export async function sessionView(engine: TurnEngine, tenant: string, summary: SessionSummary, withDsl: boolean): Promise<Record<string, unknown>> {
  const store = engine.store;
  const agentId = summary.workflowId;
  const loaded = await loadSession(store, tenant, summary.id, MESSAGE_TURNS);
  const workflow = await compiledVersion(engine, tenant, agentId, summary.version);
  const prologue = entryPrologue(workflow);
  const messages = [
    ...(prologue ? [{ role: 'assistant', content: prologue }] : []),
    ...(loaded.history as [string, string, unknown?][]).map(([role, content, reference]) => ({
      role,
      content,
      ...(role === 'assistant' && isRecord(reference) ? { reference: referenceList(reference) } : {}),
    })),
  ];
  const view: Record<string, unknown> = {
    id: summary.id,
    agent_id: agentId,
    dialog_id: agentId,
    user_id: summary.userId ?? '',
    exp_user_id: summary.userId ?? '',
    name: summary.name ?? '',
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
    const dsl = (await getVersion(store, tenant, agentId, summary.version)) as Record<string, unknown>;
    const state = (loaded.latest?.state ?? Canvas.create(workflow, { seed: 0 }).serialize()) as Record<string, unknown>;
    view.dsl = {
      components: dsl.components,
      graph: dsl.graph ?? {},
      globals: state.globals,
      history: (loaded.history as [string, string][]).map(([role, content]) => [role, content]),
      path: state.frontier,
      messages: [],
      // RAGFlow's list of per-run references; Easel keeps the current pass's
      retrieval: isRecord(state.retrieval) ? [state.retrieval] : [],
      memory: [],
      task_id: agentId,
      easel: { status: state.status, turn_number: summary.turn, prompt: state.prompt ?? null },
    };
  }
  return view;
}

/**
 * A message's references as RAGFlow's `_normalize_agent_session` lists them: each chunk with
 * its citation id (the `[ID:n]` the answer writes).
 */
function referenceList(reference: Record<string, unknown>): Record<string, unknown>[] {
  const chunks = isRecord(reference.chunks) ? reference.chunks : {};
  return Object.entries(chunks).map(([citationId, raw]) => {
    const chunk = isRecord(raw) ? raw : {};
    const pick = (first: string, second: string) => chunk[first] ?? chunk[second] ?? null;
    return {
      id: pick('chunk_id', 'id'),
      content: pick('content_with_weight', 'content'),
      document_id: pick('doc_id', 'document_id'),
      document_name: pick('docnm_kwd', 'document_name'),
      dataset_id: pick('kb_id', 'dataset_id'),
      image_id: pick('image_id', 'img_id'),
      positions: pick('positions', 'position_int'),
      citation_id: citationId,
    };
  });
}

/**
 * A session of this agent the principal reaches, or `missing` (the same for another agent's,
 * another user's, a deleted one and one that never was).
 */
export async function findSession(engine: TurnEngine, principal: Principal, agentId: string, sid: string, missing: () => RagflowError): Promise<SessionSummary> {
  if (!/^[0-9a-f]{32}$/.test(sid)) throw missing();
  try {
    const { head } = await loadSession(engine.store, principal.tenant, sid, 0);
    if (head.workflowId !== agentId || !mayReachRun(principal, { id: head.id, workflowId: head.workflowId, userId: head.userId })) throw missing();
    const { id, workflowId, version, status, turn, userId, name, createdAt, updatedAt } = head;
    return { id, workflowId, version, status, turn, userId, ...(name !== undefined ? { name } : {}), createdAt, updatedAt };
  } catch (error) {
    if (error instanceof NotFoundError) throw missing();
    throw error;
  }
}

/** RAGFlow's answer for a session that is not there. */
export const sessionNotFound = () => new RagflowError(RAGFLOW.data, 'Session not found!');
