/**
 * Route groups only a tenant's administrators reach (knowledge bases, MCP servers): each is a
 * chunk of its own, loaded and built on its first request, so a cold start that serves turns
 * neither evaluates their code nor builds their few hundred schemas. The key middleware, the
 * body limit and the JSON parse of the app run before a group's routes as before; errors are
 * answered by the app's own mapping. `mountAll` mounts every group at once: the OpenAPI
 * document is generated from such an app (at build time on Lambda).
 */
import type { OpenAPIHono } from '@hono/zod-openapi';
import { type Context, Hono } from 'hono';
import type { AppDeps, AppEnv } from './app';

export interface RouteGroup {
  /** Every path the group serves starts with it. */
  prefix: string;
  load(deps: AppDeps): Promise<OpenAPIHono<AppEnv>>;
}

/** `POST /workflows/v1/knowledge-bases/{id}/documents`: a multipart upload with its own size limit. */
export const DOCUMENT_UPLOAD_PATH = /^\/workflows\/v1\/knowledge-bases\/[^/]+\/documents$/;

export const ADMIN_ROUTE_GROUPS: readonly RouteGroup[] = [
  { prefix: '/workflows/v1/knowledge-bases', load: async (deps) => (await import('./routes/knowledge-bases')).knowledgeBaseRoutes(deps) },
  { prefix: '/workflows/v1/mcp-servers', load: async (deps) => (await import('./routes/mcp-servers')).mcpServerRoutes(deps) },
];

/** Where the principal the app's key middleware found, and the body it parsed, travel to a group's own Hono app. */
const PRINCIPAL = Symbol('easel.principal');
const PARSED_BODY = Symbol('easel.parsedBody');
type GroupEnv = { Bindings: Record<string | symbol, unknown>; Variables: AppEnv['Variables'] };

/**
 * Answers `group`'s paths by loading it on the first request that reaches one. A failed load
 * (a missing chunk) fails that request and the next one tries again.
 */
export function mountLazily(app: Hono<AppEnv>, group: RouteGroup, deps: AppDeps, notFound: (c: Context) => Response): void {
  let loading: Promise<Hono<GroupEnv>> | undefined;
  const inner = () =>
    (loading ??= group.load(deps).then(
      (routes) => {
        const hosted = new Hono<GroupEnv>();
        hosted.use(async (c, next) => {
          c.set('principal', c.env[PRINCIPAL] as AppEnv['Variables']['principal']);
          // the app's parse (parseJsonOnce), not a second one
          const parsed = c.env[PARSED_BODY] as Promise<unknown> | undefined;
          if (parsed) c.req.json = <T>() => parsed as Promise<T>;
          await next();
        });
        hosted.route(group.prefix, routes as unknown as Hono<GroupEnv>);
        hosted.notFound(notFound);
        // the app's onError answers: the group's own handlers have named the field already
        hosted.onError((error) => {
          throw error;
        });
        return hosted;
      },
      (error: unknown) => {
        loading = undefined;
        throw error;
      },
    ));
  const handler = async (c: Context<AppEnv>) => {
    const hosted = await inner();
    const raw = c.req.raw;
    // the app has read a JSON body already (parseJsonOnce): the group gets the same text and its parse
    const read = raw.bodyUsed;
    const request = read ? new Request(raw.url, { method: raw.method, headers: raw.headers, body: await c.req.text() }) : raw;
    // parseJsonOnce replaces c.req.json with its parse when the body was JSON
    const parsed = Object.hasOwn(c.req, 'json') ? c.req.json() : undefined;
    const env = { ...(c.env as object), [PRINCIPAL]: c.get('principal'), [PARSED_BODY]: parsed };
    return hosted.fetch(request, env, executionContext(c));
  };
  app.all(group.prefix, handler);
  app.all(`${group.prefix}/*`, handler);
}

/** Mounts every group at once, as `app.route` does: for the OpenAPI document. */
export async function mountAll(app: OpenAPIHono<AppEnv>, deps: AppDeps): Promise<void> {
  for (const group of ADMIN_ROUTE_GROUPS) app.route(group.prefix, await group.load(deps));
}

function executionContext(c: Context): Parameters<Hono['fetch']>[2] {
  try {
    return c.executionCtx;
  } catch {
    // Node and Lambda have none
    return undefined;
  }
}
