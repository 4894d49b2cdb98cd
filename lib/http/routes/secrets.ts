/**
 * `/workflows/v1/secrets`: the tenant's secrets for `{secret.NAME}`, admin keys only. Values go
 * in and never come out: a PUT answers the name and times, the list gives names and times.
 *
 *   PUT    /workflows/v1/secrets/{name}  {value}   201 made / 200 replaced
 *   GET    /workflows/v1/secrets                   {items: [{name, created_at, updated_at}]}
 *   DELETE /workflows/v1/secrets/{name}            204, or 404
 *
 * A Hono sub-app, mounted by createApp under the auth middleware.
 */
import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { EaselError } from '../../canvas/errors';
import { MasterKeyError } from '../../secrets/master-key';
import { MAX_SECRET_BYTES, SECRET_NAME, type SecretInfo, type TenantSecrets } from '../../secrets/tenant-secrets';
import type { AppDeps, AppEnv } from '../app';
import { requireAdmin } from '../auth';
import { HttpError, validationHook } from '../errors';
import { ErrorSchema } from '../schemas';

const Name = z.object({
  name: z.string().regex(SECRET_NAME, 'a secret name is a letter or underscore, then up to 63 letters, digits or underscores').openapi({ example: 'CRM_TOKEN' }),
});
const PutSecret = z.strictObject({ value: z.string({ error: 'must be a string' }).min(1, 'must not be empty') }).openapi('PutSecret');
const SecretSchema = z.object({ name: z.string(), created_at: z.string(), updated_at: z.string() }).openapi('Secret');
const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
const errors = {
  400: json(ErrorSchema, 'invalid request (the field is named)'),
  403: json(ErrorSchema, 'not an admin key'),
};

function view(s: SecretInfo) {
  return { name: s.name, created_at: s.createdAt, updated_at: s.updatedAt };
}

export function secretRoutes(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const secretsOf = (): TenantSecrets => {
    if (!deps.secrets) throw new EaselError('unavailable', 'tenant secrets are not configured on this server');
    return deps.secrets;
  };

  app.openapi(
    createRoute({
      method: 'put',
      path: '/{name}',
      summary: 'Store or replace a secret (the value is never returned)',
      request: { params: Name, body: { content: { 'application/json': { schema: PutSecret } }, required: true } },
      responses: { 200: json(SecretSchema, 'replaced'), 201: json(SecretSchema, 'created'), 413: json(ErrorSchema, 'value too large'), ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { name } = c.req.valid('param');
      const { value } = c.req.valid('json');
      if (Buffer.byteLength(value, 'utf8') > MAX_SECRET_BYTES) {
        const message = `at most ${MAX_SECRET_BYTES} bytes`;
        throw new HttpError('payload_too_large', `value: ${message}`, { fields: [{ field: 'value', message }] });
      }
      const saved = await guarded(deps, () => secretsOf().put(principal.tenant, name, value));
      return c.json(view(saved), saved.created ? 201 : 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/',
      summary: 'The tenant’s secrets: names and times, never values',
      responses: { 200: json(z.object({ items: z.array(SecretSchema) }), 'secrets'), 403: errors[403] },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const items = await guarded(deps, () => secretsOf().list(principal.tenant));
      return c.json({ items: items.map(view) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/{name}',
      summary: 'Delete a secret (runs that use it then fail on the unknown name)',
      request: { params: Name },
      responses: { 204: { description: 'deleted' }, 404: json(ErrorSchema, 'no such secret'), ...errors },
    }),
    async (c) => {
      const principal = c.get('principal');
      requireAdmin(principal);
      const { name } = c.req.valid('param');
      if (!(await guarded(deps, () => secretsOf().delete(principal.tenant, name)))) throw new HttpError('not_found', 'secret not found');
      return c.body(null, 204);
    },
  );

  return app;
}

/** A master key that cannot be read is the server's problem: logged, answered 503 without details. */
export async function guarded<T>(deps: AppDeps, run: () => Promise<T>, what = 'tenant secrets'): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (!(error instanceof MasterKeyError)) throw error;
    deps.logger?.error(`${what}: the master key is unusable`, { error: error.message });
    throw new EaselError('unavailable', `${what} are unavailable (the server’s master key cannot be used)`);
  }
}
