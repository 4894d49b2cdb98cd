/**
 * `GET /api/v1/agents/{id}/sessions` as RAGFlow filters, orders and pages it (its
 * `list_agent_sessions`): `id`, `user_id`, `keywords` (in the session id or name; Easel does not
 * search the messages), `from_date` / `to_date` (on the date `orderby` names), `orderby`
 * (`update_time` by default, or `create_time`), `desc` (true unless "false"), `page`,
 * `page_size`, and `exp_user_id` (that user's sessions as `{id, name}`, newest first). The
 * sessions the principal reaches come from the listing index (no state is read), all of them:
 * RAGFlow answers the `total`.
 */
import type { SessionSummary } from '../../store/session-listing';
import { listSessions } from '../../store/session-listing';
import type { StoreContext } from '../../store/dynamo';
import { runListing } from '../access';
import type { Principal } from '../auth';
import { pageOf } from './context';
import { RAGFLOW, RagflowError } from './envelope';

/** Every session of the agent the principal may list; `userId` narrows an admin's. */
export async function reachableSessions(store: StoreContext, principal: Principal, agentId: string, userId?: string): Promise<SessionSummary[]> {
  const all: SessionSummary[] = [];
  let cursor: Record<string, unknown> | undefined;
  do {
    const res = await listSessions(store, principal.tenant, agentId, { limit: 100, ...(cursor ? { cursor } : {}), ...runListing(principal, userId) });
    all.push(...res.items);
    cursor = res.cursor;
  } while (cursor);
  return all;
}

/** A RAGFlow date filter: `YYYY-MM-DD` (the whole day) or an ISO time, as epoch ms. */
function dateBound(name: string, value: string | undefined, end: boolean): number | undefined {
  if (!value) return undefined;
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(value) ? Date.parse(`${value}T${end ? '23:59:59.999' : '00:00:00'}Z`) : Date.parse(value);
  if (Number.isNaN(ms)) throw new RagflowError(RAGFLOW.argument, `${name} must be a date (YYYY-MM-DD) or an ISO 8601 time.`);
  return ms;
}

export function filterSessions(sessions: readonly SessionSummary[], q: Record<string, string>): { page: SessionSummary[]; total: number } {
  const { page, size } = pageOf(q);
  const byUpdate = (q.orderby ?? 'update_time').startsWith('update_');
  const at = (s: SessionSummary) => Date.parse(byUpdate ? s.updatedAt : s.createdAt);
  const from = dateBound('from_date', q.from_date, false);
  const to = dateBound('to_date', q.to_date, true);
  const keywords = (q.keywords ?? '').toLowerCase();
  const matched = sessions.filter((s) =>
    (!q.id || s.id === q.id)
    && (!keywords || s.id.includes(keywords) || (s.name ?? '').toLowerCase().includes(keywords))
    && (from === undefined || at(s) >= from)
    && (to === undefined || at(s) <= to),
  );
  const desc = q.desc !== 'false' && q.desc !== 'False';
  const sorted = [...matched].sort((a, b) => (desc ? -1 : 1) * (at(a) - at(b)) || (desc ? -1 : 1) * a.id.localeCompare(b.id));
  return { page: sorted.slice((page - 1) * size, page * size), total: matched.length };
}

/** `exp_user_id`: the names of that user's sessions, newest first. */
export function sessionNames(sessions: readonly SessionSummary[]): { id: string; name: string }[] {
  return [...sessions].sort((a, b) => b.createdAt.localeCompare(a.createdAt)).map((s) => ({ id: s.id, name: s.name ?? '' }));
}
