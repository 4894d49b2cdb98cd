/**
 * An Easel workflow as RAGFlow shows an agent (its `user_canvas` row): whole, with the active
 * version's DSL (`GET /agents/{id}`, the answer to a create), or as a listing row without it
 * (`GET /agents`). The tenant stands for RAGFlow's owner (`user_id`, `tenant_id`, `nickname`).
 */
import type { StoreContext } from '../../store/dynamo';
import { getVersion, type Workflow } from '../../store/workflows';
import { epochMs, httpDate } from './envelope';

/** RAGFlow keeps tags as one comma-separated text. */
export const tagText = (w: Workflow) => w.tags.join(',');

/** A listing row: what RAGFlow's agent list selects, plus the times and Easel's version. */
export function agentRow(w: Workflow) {
  return {
    id: w.id,
    avatar: null,
    title: w.name,
    description: w.description || null,
    permission: 'me',
    tenant_id: w.tenant,
    user_id: w.tenant,
    nickname: w.tenant,
    tenant_avatar: null,
    canvas_type: w.canvasType,
    canvas_category: w.canvasCategory,
    tags: tagText(w),
    type: 'agent',
    version: w.activeVersion,
    create_time: epochMs(w.createdAt),
    create_date: httpDate(w.createdAt),
    update_time: epochMs(w.updatedAt),
    update_date: httpDate(w.updatedAt),
  };
}

/** The whole agent, its `dsl` the active version's. */
export async function agentView(store: StoreContext, w: Workflow) {
  const { type: _listing, ...row } = agentRow(w);
  return { ...row, dsl: await getVersion(store, w.tenant, w.id, w.activeVersion), last_publish_time: null };
}
