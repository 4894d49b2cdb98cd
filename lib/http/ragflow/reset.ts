/**
 * `POST /api/v1/agents/{id}/reset`. RAGFlow's agent row holds its canvas with run state in it
 * (the path, the history, `sys.*` globals); reset clears that state, saves the canvas and
 * answers it. Easel keeps run state in runs, never in a workflow, so a DSL as Easel stored it is
 * already reset unless it was imported with state in it: then the cleared DSL becomes a new
 * active version (running sessions stay on theirs). Either way the answer is the cleared DSL.
 */
import { isRecord } from '../../canvas/references';
import { addVersion, getVersion } from '../../store/workflows';
import type { AppDeps } from '../app';
import { adminOnly, guardOf, param, reachableAgent, routeGroup } from './context';
import { success } from './envelope';

/** A `sys.*` global emptied as RAGFlow empties it: by the type of what it holds. */
function emptied(value: unknown): unknown {
  if (typeof value === 'string') return '';
  if (typeof value === 'number') return 0;
  if (Array.isArray(value)) return [];
  if (isRecord(value)) return {};
  return null;
}

/** An `env.*` global back to its variable's value, or that type's empty value. */
function initial(name: string, variables: Record<string, unknown>): unknown {
  const variable = variables[name];
  if (!isRecord(variable)) return '';
  if (variable.value !== undefined && variable.value !== null) return variable.value;
  const type = typeof variable.type === 'string' ? variable.type : '';
  if (type === 'number') return 0;
  if (type === 'boolean') return false;
  if (type === 'object') return {};
  return type.startsWith('array') ? [] : '';
}

const STATE_LISTS = ['path', 'history', 'retrieval', 'memory'] as const;

/**
 * The DSL without run state, as RAGFlow's `Canvas.reset()` leaves it (components untouched:
 * Easel writes nothing into them), and whether that changed anything.
 */
export function resetDsl(dsl: Record<string, unknown>): { dsl: Record<string, unknown>; changed: boolean } {
  const variables = isRecord(dsl.variables) ? dsl.variables : {};
  const globals = isRecord(dsl.globals)
    ? Object.fromEntries(Object.entries(dsl.globals).map(([k, v]) => [k, k.startsWith('sys.') ? emptied(v) : k.startsWith('env.') ? initial(k.slice(4), variables) : v]))
    : dsl.globals;
  const changed = STATE_LISTS.some((k) => dsl[k] !== undefined && !(Array.isArray(dsl[k]) && dsl[k].length === 0)) || JSON.stringify(globals) !== JSON.stringify(dsl.globals);
  return { dsl: { ...dsl, path: [], history: [], retrieval: [], memory: [], ...(globals !== undefined ? { globals } : {}) }, changed };
}

export function resetRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  const store = deps.engine.store;
  app.post('/reset', guard(async (c) => {
    adminOnly(c);
    const w = await reachableAgent(c, deps, param(c, 'id'));
    const dsl = (await getVersion(store, w.tenant, w.id, w.activeVersion)) as Record<string, unknown>;
    const reset = resetDsl(dsl);
    if (reset.changed) await addVersion(store, w.tenant, w.id, reset.dsl, true);
    return success(c, reset.dsl);
  }));
  return app;
}
