/**
 * Admin routes for the people behind public keys (docs/access.md):
 *
 *   POST   /workflows/v1/embed-secrets          201 {id, secret, created_at}: the secret, shown this once
 *   GET    /workflows/v1/embed-secrets          {items: [{id, created_at}]}
 *   DELETE /workflows/v1/embed-secrets/{id}     204; tokens signed with it stop working (within the auth cache time)
 *   DELETE /workflows/v1/end-users/{user_id}    200 {runs_deleted, files_deleted}: the user's runs and uploads
 *
 * A Hono sub-app, mounted by createApp under the auth middleware.
 */
import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { EaselError } from '../../errors';
import { type EmbedSecrets, MAX_EMBED_SECRETS } from '../../secrets/embed-secrets';
import { NotFoundError } from '../../store/errors';
import { deleteFile, listUserFiles } from '../../store/files';
import { listSessions } from '../../store/session-listing';
import { allWorkflows } from '../../store/workflows';
import { deleteRun } from '../../turns/runs';
import type { AppDeps, AppEnv } from '../app';
import { requireAdmin } from '../auth';
import { HttpError, validationHook } from '../errors';
import { ErrorSchema } from '../schemas';
import { guarded } from './secrets';

const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
const errors = { 400: json(ErrorSchema, 'invalid request (the field is named)'), 403: json(ErrorSchema, 'not an admin key') };
const EmbedSecretSchema = z.object({ id: z.string(), created_at: z.string() }).openapi('EmbedSecret');
const EmbedSecretId = z.object({ id: z.string().regex(/^emb_[0-9a-f]{16}$/, 'an embed secret id is emb_ and 16 hex digits') });
const UserId = z.object({ user_id: z.string().regex(/^[\x21-\x7e]{1,256}$/, 'a user id is 1-256 printable characters') });

export function endUserRoutes(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const embed = (): EmbedSecrets => {
    if (!deps.embedSecrets) throw new EaselError('unavailable', 'embed secrets are not configured on this server');
    return deps.embedSecrets;
  };

  app.openapi(
    createRoute({
      method: 'post',
      path: '/embed-secrets',
      summary: 'Make an embed secret, for the tenant’s site to sign end-user tokens with (shown once)',
      responses: { 201: json(EmbedSecretSchema.extend({ secret: z.string() }), 'made: keep the secret, it is not shown again'), ...errors, 400: json(ErrorSchema, `the tenant holds ${MAX_EMBED_SECRETS} already: delete one first`) },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const made = await guarded(deps, async () => {
        try {
          return await embed().create(principal.tenant);
        } catch (error) {
          if (error instanceof RangeError) throw new HttpError('invalid_request', error.message);
          throw error;
        }
      }, 'embed secrets');
      return c.json({ id: made.id, secret: made.secret, created_at: made.createdAt }, 201);
    },
  );

  app.openapi(
    createRoute({ method: 'get', path: '/embed-secrets', summary: 'The tenant’s embed secrets: ids and times, never values', responses: { 200: json(z.object({ items: z.array(EmbedSecretSchema) }), 'embed secrets'), 403: errors[403] } }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const items = await guarded(deps, () => embed().list(principal.tenant), 'embed secrets');
      return c.json({ items: items.map((s) => ({ id: s.id, created_at: s.createdAt })) }, 200);
    },
  );

  app.openapi(
    createRoute({ method: 'delete', path: '/embed-secrets/{id}', summary: 'Delete an embed secret: tokens it signed are refused from then on', request: { params: EmbedSecretId }, responses: { 204: { description: 'deleted' }, 404: json(ErrorSchema, 'no such embed secret'), ...errors } }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      if (!(await guarded(deps, () => embed().delete(principal.tenant, c.req.valid('param').id), 'embed secrets'))) throw new HttpError('not_found', 'embed secret not found');
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/end-users/{user_id}',
      summary: 'Delete everything of one end user: their runs (of every workflow) and the files they uploaded',
      request: { params: UserId },
      responses: { 200: json(z.object({ runs_deleted: z.number().int(), files_deleted: z.number().int() }), 'deleted'), ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { user_id } = c.req.valid('param');
      const { engine } = deps;
      let runs = 0;
      for (const workflow of await allWorkflows(engine.store, principal.tenant)) {
        let cursor: Record<string, unknown> | undefined;
        do {
          const page = await listSessions(engine.store, principal.tenant, workflow.id, { limit: 100, userId: user_id, ...(cursor ? { cursor } : {}) });
          for (const run of page.items) {
            if (await gone(() => deleteRun(engine, principal.tenant, run.id))) runs++;
          }
          cursor = page.cursor;
        } while (cursor);
      }
      let files = 0;
      let cursor: Record<string, unknown> | undefined;
      do {
        const page = await listUserFiles(engine.store, principal.tenant, user_id, cursor);
        for (const id of page.ids) {
          if (await gone(() => deleteFile(engine.store, principal.tenant, id))) files++;
        }
        cursor = page.cursor;
      } while (cursor);
      deps.logger?.info('end user deleted', { tenant: principal.tenant, runs_deleted: runs, files_deleted: files });
      return c.json({ runs_deleted: runs, files_deleted: files }, 200);
    },
  );

  return app;
}

/** Deleted now: true; gone already (a concurrent delete, an expiry): false. */
async function gone(remove: () => Promise<void>): Promise<boolean> {
  try {
    await remove();
    return true;
  } catch (error) {
    if (error instanceof NotFoundError) return false;
    throw error;
  }
}
