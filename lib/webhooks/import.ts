/**
 * Storing an imported DSL, for every import path (the native workflow routes, RAGFlow's
 * `POST/PUT /api/v1/agents`, the local examples): webhook credentials are moved into the
 * tenant's secrets before anything is stored (credentials.ts), and a workflow in webhook mode
 * gets its webhook (store/webhooks.ts) once stored. Call them on a DSL that compiled.
 *
 * @example
 *   const created = await createImportedWorkflow(deps, { tenant, id, name, dsl });
 *   await addImportedVersion(deps, tenant, created.id, dsl2, true);
 */
import type { TenantSecrets } from '../secrets/tenant-secrets';
import type { StoreContext } from '../store/dynamo';
import { ensureWebhook } from '../store/webhooks';
import { addVersion, createWorkflow, type NewWorkflow, type Workflow } from '../store/workflows';
import { sealCredentials, webhookBegins } from './credentials';

/** What importing needs: the store (the app's `engine.store`) and the tenant's secrets. */
export interface ImportDeps {
  engine: { store: StoreContext };
  secrets?: TenantSecrets;
}

export async function createImportedWorkflow(deps: ImportDeps, w: NewWorkflow & { dsl: Record<string, unknown> }): Promise<Workflow> {
  const dsl = await sealCredentials(deps.secrets, w.tenant, w.dsl);
  const created = await createWorkflow(deps.engine.store, { ...w, dsl });
  if (webhookBegins(dsl).length === 0) return created;
  return { ...created, webhookId: await ensureWebhook(deps.engine.store, w.tenant, w.id) };
}

/** Adds version latest+1 (activated when `activate`); returns its number. */
export async function addImportedVersion(deps: ImportDeps, tenant: string, id: string, dsl: Record<string, unknown>, activate: boolean): Promise<number> {
  const sealed = await sealCredentials(deps.secrets, tenant, dsl);
  const version = await addVersion(deps.engine.store, tenant, id, sealed, activate);
  if (webhookBegins(sealed).length > 0) await ensureWebhook(deps.engine.store, tenant, id);
  return version;
}
