/**
 * An agent's versions (mounted at /api/v1/agents/{id}/versions), in the shape of RAGFlow's
 * `user_canvas_version` rows, over Easel's numbered, immutable workflow versions: the id is the
 * version number, `release` marks the active one (the version new sessions start on), the title
 * is RAGFlow's `<owner>_<agent title>_<time>`. Newest first. The list leaves each version's DSL
 * out (one read per version); `GET .../versions/{id}` carries it.
 */
import { NotFoundError } from '../../store/errors';
import { getVersion, listVersions, type VersionSummary, type Workflow } from '../../store/workflows';
import type { AppDeps } from '../app';
import { guardOf, param, reachableAgent, routeGroup } from './context';
import { epochMs, httpDate, RAGFLOW, RagflowError, success } from './envelope';

function versionRow(w: Workflow, v: VersionSummary) {
  const stamp = v.createdAt.slice(0, 19).replace('T', ' ');
  return {
    id: String(v.version),
    user_canvas_id: w.id,
    title: `${w.tenant}_${w.name}_${stamp}`,
    description: w.description || null,
    release: v.version === w.activeVersion,
    version: v.version,
    create_time: epochMs(v.createdAt),
    create_date: httpDate(v.createdAt),
    update_time: epochMs(v.createdAt),
    update_date: httpDate(v.createdAt),
  };
}

export function versionRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  const store = deps.engine.store;

  app.get('/', guard(async (c) => {
    const w = await reachableAgent(c, deps, param(c, 'id'));
    const versions = await listVersions(store, w.tenant, w.id);
    return success(c, versions.map((v) => versionRow(w, v)).reverse());
  }));

  app.get('/:vid', guard(async (c) => {
    const w = await reachableAgent(c, deps, param(c, 'id'));
    const vid = param(c, 'vid');
    const notFound = new RagflowError(RAGFLOW.data, 'Version not found.');
    const version = /^[1-9]\d{0,5}$/.test(vid) ? (await listVersions(store, w.tenant, w.id)).find((v) => v.version === Number(vid)) : undefined;
    if (!version) throw notFound;
    try {
      return success(c, { ...versionRow(w, version), dsl: await getVersion(store, w.tenant, w.id, version.version) });
    } catch (error) {
      if (error instanceof NotFoundError) throw notFound;
      throw error;
    }
  }));

  return app;
}
