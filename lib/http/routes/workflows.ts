/**
 * Workflows and their versions. Every DSL is compiled (validated) before it is stored, its
 * webhook credentials moved into the tenant's secrets (lib/webhooks/import.ts). A workflow in
 * webhook mode shows admin keys its `webhook_url`.
 */
import { randomBytes } from 'node:crypto';
import { createRoute, z } from '@hono/zod-openapi';
import { compileWorkflow } from '../../canvas';
import { templateFields } from '../../canvas/template-file';
import {
  activateVersion,
  deleteWorkflow,
  getWorkflow,
  listVersions,
  listWorkflows,
  type Workflow as StoredWorkflow,
} from '../../store/workflows';
import { NotFoundError } from '../../store/errors';
import { keys } from '../../store/item-keys';
import { addImportedVersion, createImportedWorkflow } from '../../webhooks/import';
import type { App, AppDeps } from '../app';
import { type Principal, requireAdmin, requireWorkflow } from '../auth';
import { HttpError } from '../errors';
import { prepareImport } from '../dsl-import';
import { knowledgeWarnings } from '../knowledge-warnings';
import { decodeCursor, encodeCursor } from '../cursor';
import { CreateVersion, CreateWorkflow, Cursor, ErrorSchema, Limit, Page, Workflow, WORKFLOW_ID } from '../schemas';
import { activeVersionFields } from './webhooks';
import { onBusyView, parseOnBusy, readOnBusy } from '../../turns/on-busy';

const json = <S extends z.ZodType>(schema: S, description: string) => ({ description, content: { 'application/json': { schema } } });
const errors = { 400: json(ErrorSchema, 'invalid request or DSL'), 404: json(ErrorSchema, 'not found') };
const IdParam = z.object({ id: WORKFLOW_ID });
const Warnings = z
  .array(z.object({
    code: z.enum(['unknown_knowledge_base', 'tool_dropped', 'credential_moved', 'credential_unset']),
    component_id: z.string(),
    message: z.string(),
    ids: z.array(z.string()).optional(),
    field: z.string().optional(),
    kind: z.string().optional(),
    secret: z.string().optional(),
  }))
  .openapi('ImportWarnings', {
    description: 'What the import changed or stored but may not work as written: knowledge bases the tenant does not have (unknown_knowledge_base), tool entries left out by drop_unsupported_tools (tool_dropped), credentials moved into the tenant’s secrets (credential_moved), secrets a tool names that are not set (credential_unset)',
  });

export function workflowView(w: StoredWorkflow) {
  return {
    id: w.id,
    name: w.name,
    description: w.description,
    canvas_type: w.canvasType,
    canvas_category: w.canvasCategory,
    version: w.activeVersion,
    active_version: w.activeVersion,
    latest_version: w.latestVersion,
    created_at: w.createdAt,
    updated_at: w.updatedAt,
    on_busy: onBusyView(readOnBusy(w.settings.on_busy)),
  };
}

export function registerWorkflowRoutes(app: App, deps: AppDeps): void {
  const { store, registry } = deps.engine;
  const view = async (principal: Principal, w: StoredWorkflow) => ({ ...workflowView(w), ...(await activeVersionFields(deps, principal.tenant, w, principal.scope === 'admin')) });
  const live = async (tenant: string, id: string) => {
    const w = await getWorkflow(store, tenant, id);
    if (w.deleted) throw new NotFoundError('workflow');
    return w;
  };

  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/workflows',
      summary: 'Create a workflow from a RAGFlow DSL (version 1, active)',
      request: { body: { content: { 'application/json': { schema: CreateWorkflow } }, required: true } },
      responses: { 201: json(Workflow.extend({ warnings: Warnings }), 'created'), ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const body = c.req.valid('json');
      const template = templateFields(body);
      const name = body.name ?? template.title;
      if (!name) throw new HttpError('invalid_request', 'name is required (or the title of a RAGFlow template file)', { field: 'name' });
      const prepared = await prepareImport(deps, principal.tenant, body.dsl, {
        dropUnsupportedTools: body.drop_unsupported_tools,
        compile: (dsl) => compileWorkflow(dsl, registry, { maxComponents: deps.maxDslNodes ?? 500 }),
      });
      await prepared.commit();
      const created = await createImportedWorkflow(deps, {
        tenant: principal.tenant,
        id: `wf_${randomBytes(8).toString('hex')}`,
        name,
        ...(template.description ? { description: template.description } : {}),
        canvasType: body.canvas_type ?? null,
        ...(body.canvas_category ? { canvasCategory: body.canvas_category } : {}),
        ...(body.on_busy !== undefined ? { settings: { on_busy: onBusyView(parseOnBusy(body.on_busy)) } } : {}),
        dsl: prepared.dsl,
      });
      const warnings = [...prepared.warnings, ...(await knowledgeWarnings(deps, principal.tenant, prepared.dsl))];
      return c.json({ ...(await view(principal, created)), warnings }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/workflows',
      summary: 'List workflows, newest first',
      request: { query: z.object({ limit: Limit, cursor: Cursor }) },
      responses: { 200: json(Page(z.looseObject({ id: z.string(), name: z.string() })), 'workflows') },
    }),
    async (c) => {
      const principal = c.get('principal');
      const { limit, cursor } = c.req.valid('query');
      const page = await listWorkflows(store, principal.tenant, limit, decodeCursor(cursor, { attribute: 'gsi1pk', value: keys.workflowList(principal.tenant) }));
      const items = page.items
        .filter((w) => principal.scope === 'admin' || principal.workflowIds.includes(w.id))
        .map((w) => ({ id: w.id, name: w.name, created_at: w.createdAt, updated_at: w.updatedAt }));
      return c.json({ items, next_cursor: encodeCursor(page.cursor) }, 200);
    },
  );

  app.openapi(
    createRoute({ method: 'get', path: '/workflows/v1/workflows/{id}', summary: 'A workflow', request: { params: IdParam }, responses: { 200: json(Workflow, 'the workflow'), ...errors } }),
    async (c) => {
      const principal = c.get('principal');
      const { id } = c.req.valid('param');
      requireWorkflow(principal, id);
      return c.json(await view(principal, await live(principal.tenant, id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/workflows/{id}/versions',
      summary: 'Add a version (activated unless activate is false)',
      request: { params: IdParam, body: { content: { 'application/json': { schema: CreateVersion } }, required: true } },
      responses: { 201: json(z.object({ version: z.number().int(), active_version: z.number().int(), warnings: Warnings }), 'created'), ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { id } = c.req.valid('param');
      const body = c.req.valid('json');
      await live(principal.tenant, id);
      const prepared = await prepareImport(deps, principal.tenant, body.dsl, {
        dropUnsupportedTools: body.drop_unsupported_tools,
        compile: (dsl) => compileWorkflow(dsl, registry, { maxComponents: deps.maxDslNodes ?? 500 }),
      });
      await prepared.commit();
      const version = await addImportedVersion(deps, principal.tenant, id, prepared.dsl, body.activate);
      const after = await getWorkflow(store, principal.tenant, id);
      const warnings = [...prepared.warnings, ...(await knowledgeWarnings(deps, principal.tenant, prepared.dsl))];
      return c.json({ version, active_version: after.activeVersion, warnings }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/workflows/{id}/versions',
      summary: 'The versions of a workflow',
      request: { params: IdParam },
      responses: { 200: json(z.object({ items: z.array(z.object({ version: z.number().int(), created_at: z.string(), active: z.boolean() })) }), 'versions'), ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      const { id } = c.req.valid('param');
      requireWorkflow(principal, id);
      const w = await live(principal.tenant, id);
      const versions = await listVersions(store, principal.tenant, id);
      return c.json({ items: versions.map((v) => ({ version: v.version, created_at: v.createdAt, active: v.version === w.activeVersion })) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/workflows/{id}/versions/{n}/activate',
      summary: 'Make a version the one new runs start on (rollback: activate an older one)',
      request: { params: IdParam.extend({ n: z.coerce.number().int().min(1) }) },
      responses: { 200: json(Workflow, 'the workflow'), ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { id, n } = c.req.valid('param');
      await live(principal.tenant, id);
      await activateVersion(store, principal.tenant, id, n);
      return c.json(await view(principal, await getWorkflow(store, principal.tenant, id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/workflows/v1/workflows/{id}',
      summary: 'Delete a workflow: no new runs; live runs continue on their version',
      request: { params: IdParam },
      responses: { 204: { description: 'deleted' }, ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { id } = c.req.valid('param');
      await live(principal.tenant, id);
      await deleteWorkflow(store, principal.tenant, id);
      return c.body(null, 204);
    },
  );
}
