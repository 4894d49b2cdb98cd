/** Key management for admin keys: create (the secret is shown once), list, revoke. */
import { randomBytes } from 'node:crypto';
import { createRoute, z } from '@hono/zod-openapi';
import { type ApiKey, hashSecret, listApiKeys, putApiKey, revokeApiKey } from '../../store/api-keys';
import { webhookSecret } from '../../store/tenants';
import { missingWorkflows } from '../../store/workflows';
import type { App, AppDeps } from '../app';
import { requireAdmin } from '../auth';
import { HttpError } from '../errors';
import { CreateKey, ErrorSchema, KeySchema } from '../schemas';

export function keyView(key: ApiKey) {
  return { id: key.id, name: key.name, scope: key.scope, workflow_ids: key.workflowIds, created_at: key.createdAt, revoked_at: key.revokedAt };
}

/** A new key's secret: `ek_` and 43 characters of base64url (256 random bits). */
export function newSecret(): string {
  return `ek_${randomBytes(32).toString('base64url')}`;
}

export function registerKeyRoutes(app: App, deps: AppDeps): void {
  const store = deps.engine.store;

  app.openapi(
    createRoute({
      method: 'post',
      path: '/workflows/v1/keys',
      summary: 'Create an API key (the secret is returned once)',
      request: { body: { content: { 'application/json': { schema: CreateKey } }, required: true } },
      responses: {
        201: { description: 'created', content: { 'application/json': { schema: KeySchema.extend({ key: z.string() }) } } },
        400: { description: 'invalid request; `unknown_workflow_ids`: the workflow ids this tenant has no workflow for', content: { 'application/json': { schema: ErrorSchema } } },
      },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const body = c.req.valid('json');
      if (body.scope === 'execute') {
        // another tenant's workflow is answered as a missing one: the key learns nothing of it
        const unknown = await missingWorkflows(store, principal.tenant, body.workflow_ids);
        if (unknown.length > 0) {
          throw new HttpError('invalid_request', `workflow_ids: this tenant has no workflow ${unknown.join(', ')}`, { field: 'workflow_ids', unknown_workflow_ids: unknown });
        }
      }
      const secret = (deps.newSecret ?? newSecret)();
      const key: ApiKey = {
        tenant: principal.tenant,
        id: randomBytes(8).toString('hex'),
        name: body.name,
        scope: body.scope,
        workflowIds: body.scope === 'execute' ? body.workflow_ids : [],
        createdAt: new Date().toISOString(),
        revokedAt: null,
      };
      await putApiKey(store, { ...key, secretHash: hashSecret(secret) });
      return c.json({ ...keyView(key), key: secret }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/keys',
      summary: 'List the API keys of the tenant',
      responses: { 200: { description: 'keys', content: { 'application/json': { schema: z.object({ items: z.array(KeySchema) }) } } } },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      return c.json({ items: (await listApiKeys(store, principal.tenant)).map(keyView) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/workflows/v1/webhook-secret',
      summary: 'The secret that signs this tenant’s webhooks (Easel-Signature), for verifying them',
      responses: { 200: { description: 'the secret', content: { 'application/json': { schema: z.object({ secret: z.string() }) } } } },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      return c.json({ secret: await webhookSecret(store, principal.tenant) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/workflows/v1/keys/{id}',
      summary: 'Revoke an API key (effective within 30 s: authenticated keys are cached that long)',
      request: { params: z.object({ id: z.string().regex(/^[0-9a-f]{16}$/) }) },
      responses: { 204: { description: 'revoked' } },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      await revokeApiKey(store, principal.tenant, c.req.valid('param').id);
      return c.body(null, 204);
    },
  );
}
