/**
 * PATCH /workflows/{id}: a workflow's name, description and settings — `on_busy`, what its turns
 * do when another turn of the run is in flight (docs/double-texting.md). Settings are Easel's,
 * kept beside the workflow and not in its DSL, so they change without a version and a RAGFlow
 * DSL imports and exports unchanged. Admin keys only.
 */
import { createRoute, z } from '@hono/zod-openapi';
import { NotFoundError } from '../../store/errors';
import { getWorkflow, updateWorkflow } from '../../store/workflows';
import { onBusyView, parseOnBusy } from '../../turns/on-busy';
import type { App, AppDeps } from '../app';
import { requireAdmin } from '../auth';
import { ErrorSchema, UpdateWorkflow, Workflow, WORKFLOW_ID } from '../schemas';
import { workflowView } from './workflows';
import { activeVersionFields } from './webhooks';

const json = <S extends z.ZodType>(schema: S, description: string) => ({ description, content: { 'application/json': { schema } } });

export function registerWorkflowSettingsRoutes(app: App, deps: AppDeps): void {
  const { store } = deps.engine;
  app.openapi(
    createRoute({
      method: 'patch',
      path: '/workflows/v1/workflows/{id}',
      summary: "Change a workflow's name, description or on_busy setting (its versions stay as they are)",
      request: { params: z.object({ id: WORKFLOW_ID }), body: { content: { 'application/json': { schema: UpdateWorkflow } }, required: true } },
      responses: { 200: json(Workflow, 'the workflow'), 400: json(ErrorSchema, 'invalid request'), 404: json(ErrorSchema, 'not found') },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { id } = c.req.valid('param');
      const body = c.req.valid('json');
      const current = await getWorkflow(store, principal.tenant, id);
      if (current.deleted) throw new NotFoundError('workflow');
      await updateWorkflow(store, principal.tenant, id, {
        ...(body.name !== undefined ? { name: body.name } : {}),
        ...(body.description !== undefined ? { description: body.description } : {}),
        ...(body.on_busy !== undefined ? { settings: { ...current.settings, on_busy: onBusyView(parseOnBusy(body.on_busy)) } } : {}),
      });
      const updated = await getWorkflow(store, principal.tenant, id);
      return c.json({ ...workflowView(updated), ...(await activeVersionFields(deps, principal.tenant, updated, true)) }, 200);
    },
  );
}
