/**
 * `GET /api/v1/agents` as RAGFlow filters, orders and pages it (its `list_agents`):
 * `keywords` (in the title or the tags, any case), `canvas_category` (comma-separated),
 * `canvas_type`, `tags` (comma-separated, any of them), `owner_ids` (the tenant is the only
 * owner), `orderby` (`create_time` by default, `update_time`, `title`), `desc` (true unless
 * "false"), `page`, `page_size`; and Easel's `id` and `title` (exact). RAGFlow's compilation
 * template groups do not exist in Easel: the category that names them lists nothing.
 */
import type { Workflow } from '../../store/workflows';
import { pageOf } from './context';
import { RAGFLOW, RagflowError } from './envelope';

const TEMPLATE_GROUPS = 'compilation_template_group';

const list = (value: string | undefined) => (value ?? '').split(',').map((s) => s.trim()).filter(Boolean);

/** The page of `agents` (those the caller reaches) the query asks for, and how many match in all. */
export function filterAgents(agents: readonly Workflow[], q: Record<string, string>, tenant: string): { page: Workflow[]; total: number } {
  const owners = list(q.owner_ids);
  if (owners.some((o) => o !== tenant)) throw new RagflowError(RAGFLOW.operation, 'Only authorized owner_ids can be queried.', false);
  const { page, size } = pageOf(q);
  const categories = list(q.canvas_category);
  if (categories.length > 0 && categories.every((c) => c === TEMPLATE_GROUPS)) return { page: [], total: 0 };
  const keywords = (q.keywords ?? '').toLowerCase();
  const tags = list(q.tags);
  const title = q.title ?? q.name;
  const matched = agents.filter((w) =>
    (!q.id || w.id === q.id)
    && (!title || w.name === title)
    && (!keywords || w.name.toLowerCase().includes(keywords) || w.tags.join(',').toLowerCase().includes(keywords))
    && (categories.length === 0 || categories.includes(w.canvasCategory))
    && (!q.canvas_type || w.canvasType === q.canvas_type)
    && (tags.length === 0 || tags.some((t) => w.tags.includes(t))),
  );
  const desc = String(q.desc ?? 'true').toLowerCase() !== 'false';
  const key = q.orderby === 'update_time' ? (w: Workflow) => w.updatedAt : q.orderby === 'title' ? (w: Workflow) => w.name : (w: Workflow) => w.createdAt;
  const sorted = [...matched].sort((a, b) => (desc ? -1 : 1) * key(a).localeCompare(key(b)));
  return { page: sorted.slice((page - 1) * size, page * size), total: matched.length };
}

/** `GET /agents?type=filter`: the owners and categories an agent list can be narrowed to, with counts. */
export function agentFilters(agents: readonly Workflow[], tenant: string) {
  const counts = new Map<string, number>();
  for (const w of agents) counts.set(w.canvasCategory, (counts.get(w.canvasCategory) ?? 0) + 1);
  return {
    filter: {
      owner: agents.length > 0 ? [{ id: tenant, label: tenant, count: agents.length }] : [],
      canvas_category: [...counts].map(([id, count]) => ({ id, count })),
    },
    total: agents.length,
  };
}
