/**
 * Workflows as turns use them: a run's version resolved and compiled once per process
 * (versions are immutable), and the options its canvas runs with.
 */
import { type CanvasOptions, compileWorkflow, type Workflow } from '../canvas';
import { sha256 } from '../store/codec';
import { NotFoundError } from '../store/errors';
import { getVersion, getWorkflow } from '../store/workflows';
import { tenantFiles } from './files';
import type { TurnEngine } from './turn-engine';

const compiledCache = new Map<string, Workflow>();
const COMPILED_CACHE_SIZE = 200;

export async function resolveWorkflow(engine: TurnEngine, tenant: string, workflowId: string, version?: number) {
  const head = await getWorkflow(engine.store, tenant, workflowId);
  if (head.deleted) throw new NotFoundError('workflow');
  const chosen = version ?? head.activeVersion;
  if (!Number.isInteger(chosen) || chosen < 1 || chosen > head.latestVersion) throw new NotFoundError('workflow version');
  return { workflow: await compiled(engine, tenant, workflowId, chosen), version: chosen };
}

/** Versions are immutable: a compiled version is kept for the life of the process. */
export async function compiledVersion(engine: TurnEngine, tenant: string, workflowId: string, version: number): Promise<Workflow> {
  return compiled(engine, tenant, workflowId, version);
}

export async function compiled(engine: TurnEngine, tenant: string, workflowId: string, version: number): Promise<Workflow> {
  const cacheKey = `${tenant}/${workflowId}/${version}`;
  const hit = compiledCache.get(cacheKey);
  if (hit) return hit;
  const workflow = compileWorkflow(await getVersion(engine.store, tenant, workflowId, version), engine.registry);
  if (compiledCache.size >= COMPILED_CACHE_SIZE) compiledCache.delete(compiledCache.keys().next().value as string);
  compiledCache.set(cacheKey, workflow);
  return workflow;
}

export function canvasOptions(engine: TurnEngine, runId: string, tenant: string, dialect?: 'native' | 'ragflow'): CanvasOptions {
  return {
    ...(dialect === 'ragflow' ? { beginRules: 'ragflow' as const } : {}),
    ...(engine.clock ? { clock: engine.clock } : {}),
    // the first state of a run is a function of its id: a retried first turn is the same run
    seed: Number.parseInt(sha256(runId).slice(0, 8), 16) | 0,
    services: withFiles(engine.servicesFor?.(tenant) ?? engine.services, engine, tenant),
    ...(engine.stepBudgetTurn ? { stepBudgetTurn: engine.stepBudgetTurn } : {}),
    ...(engine.stepBudgetRun ? { stepBudgetRun: engine.stepBudgetRun } : {}),
  };
}

/** A run reads its tenant's uploaded files, unless its host gave it a `files` service of its own. */
function withFiles(services: Readonly<Record<string, unknown>>, engine: TurnEngine, tenant: string): Readonly<Record<string, unknown>> {
  return services.files ? services : { ...services, files: tenantFiles(engine.store, tenant) };
}

export function withHistory(state: unknown, history: unknown[], workflow: Workflow): unknown {
  const keep = Math.max(2, workflow.historyWindow * 2);
  return { ...(state as Record<string, unknown>), history: history.slice(-keep) };
}
