/**
 * `/workflows/v1/mcp-servers`: a tenant's MCP servers, which Agents name by id in their `mcp`
 * entries — admin keys only (execute keys and end-user tokens get 403 before anything is read).
 * Another tenant's ids answer exactly as missing ones (404).
 *
 *   POST   /                {name, url, server_type, headers?, variables?, description?}  201
 *   GET    /?limit=&cursor=&keywords=          {items, next_cursor}, newest first
 *   GET    /{id}, PATCH /{id} (tools listed again when the connection changes), DELETE /{id}
 *   POST   /{id}/tools      list the server's tools again (each tool's `enabled` kept)
 *   POST   /import          {mcpServers: {name: {type, url, headers?, authorization_token?}}}  {results}
 *
 * Literal header values and `variables.authorization_token` are moved into the tenant's secrets:
 * the server shows `{secret.NAME}` and the answer lists the secrets made (`secrets`). A server
 * whose tools cannot be listed is stored all the same, with `tools_error` saying why.
 */
import { createRoute, OpenAPIHono, z } from '@hono/zod-openapi';
import { EaselError } from '../../errors';
import type { McpRegistry, SavedMcpServer } from '../../mcp/registry';
import { MCP_SERVER_TYPES, type McpServerRecord, type McpToolMeta } from '../../mcp/types';
import { MAX_MCP_LIST_TIMEOUT_MS, McpServerRefusedError } from '../../mcp/validation';
import type { AppDeps, AppEnv } from '../app';
import { requireAdmin } from '../auth';
import { decodePageCursor, encodePageCursor } from '../cursor';
import { HttpError, validationHook } from '../errors';
import { mcpRegistryOf } from '../mcp';
import { ErrorSchema } from '../schemas';

const json = (schema: z.ZodType, description: string) => ({ description, content: { 'application/json': { schema } } });
const errors = {
  400: json(ErrorSchema, 'invalid request (the field is named)'),
  403: json(ErrorSchema, 'not an admin key'),
  404: json(ErrorSchema, 'no such MCP server (another tenant’s included)'),
};

// the path parameter is checked by the registry: a malformed id is a missing server (404), as another tenant's
const IdParam = z.object({ id: z.string().max(64).openapi({ example: '0123456789abcdef0123456789abcdef' }) });
const Headers = z.record(z.string(), z.string()).openapi({ description: 'Sent with every request; `${var}` from `variables`, `{secret.NAME}` from the tenant’s secrets. A literal value is moved into a tenant secret.' });
const Variables = z.record(z.string(), z.unknown()).openapi({ description: 'RAGFlow’s template variables; `authorization_token`, and any variable a header template takes, is moved into a tenant secret when given literally' });
const TimeoutSeconds = z.number().positive().max(MAX_MCP_LIST_TIMEOUT_MS / 1000).optional().openapi({ description: 'How long listing the tools may take. @default 10' });
const ServerType = z.enum(MCP_SERVER_TYPES);

const CreateMcpServer = z
  .strictObject({
    name: z.string(),
    url: z.string(),
    server_type: ServerType,
    description: z.string().optional(),
    headers: Headers.optional(),
    variables: Variables.optional(),
    timeout_seconds: TimeoutSeconds,
  })
  .openapi('CreateMcpServer');
const UpdateMcpServer = z
  .strictObject({
    name: z.string().optional(),
    url: z.string().optional(),
    server_type: ServerType.optional(),
    description: z.string().optional(),
    headers: Headers.optional(),
    variables: Variables.optional(),
    tools: z.record(z.string(), z.strictObject({ enabled: z.boolean() })).optional().openapi({ description: 'Switch cached tools on or off, by name' }),
    timeout_seconds: TimeoutSeconds,
  })
  .openapi('UpdateMcpServer');
const ImportBody = z.strictObject({ mcpServers: z.record(z.string(), z.unknown()), timeout_seconds: TimeoutSeconds }).openapi('ImportMcpServers');
const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: z.string().max(512).optional(),
  keywords: z.string().max(256).optional().openapi({ description: 'Part of the name' }),
});

const Tool = z.looseObject({ name: z.string(), description: z.string().optional(), inputSchema: z.record(z.string(), z.unknown()), enabled: z.boolean() }).openapi('McpTool');
const McpServerSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string(),
    url: z.string(),
    server_type: ServerType,
    headers: z.record(z.string(), z.string()),
    variables: z.record(z.string(), z.unknown()),
    tools: z.array(Tool),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('McpServer');
const SavedSchema = McpServerSchema.extend({
  secrets: z.array(z.object({ field: z.string(), secret: z.string() })).openapi({ description: 'Tenant secrets made from literal credentials in this request' }),
  tools_error: z.string().optional().openapi({ description: 'Why the tools could not be listed (the server is stored with the tools it had)' }),
}).openapi('SavedMcpServer');
const ImportResult = z
  .object({
    server: z.string(),
    success: z.boolean(),
    id: z.string().optional(),
    name: z.string().optional(),
    secrets: z.array(z.object({ field: z.string(), secret: z.string() })).optional(),
    tools_error: z.string().optional(),
    error: ErrorSchema.optional(),
  })
  .openapi('McpImportResult');

function view(r: McpServerRecord) {
  const { tools, ...variables } = r.variables;
  const cached = tools !== null && typeof tools === 'object' && !Array.isArray(tools) ? Object.values(tools as Record<string, McpToolMeta>) : [];
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    url: r.url,
    server_type: r.server_type,
    headers: r.headers,
    variables,
    tools: cached.map((t) => ({ ...t, enabled: t.enabled ?? true })),
    created_at: new Date(r.create_time).toISOString(),
    updated_at: new Date(r.update_time).toISOString(),
  };
}

function savedView(saved: SavedMcpServer) {
  return { ...view(saved.server), secrets: saved.secrets, ...(saved.toolsError !== undefined ? { tools_error: saved.toolsError } : {}) };
}

/** A registry refusal as every refusal of one field is answered: `field` named. */
function withField(error: unknown): unknown {
  if (error instanceof McpServerRefusedError) return new HttpError('invalid_request', error.message, { field: error.field });
  if (!(error instanceof EaselError) || error instanceof HttpError || error.code !== 'invalid_request') return error;
  const field = /^([a-z_][a-z0-9_]*): /.exec(error.message)?.[1];
  return field ? new HttpError('invalid_request', error.message, { field }) : error;
}

const timeoutOf = (seconds: number | undefined) => (seconds !== undefined ? { timeoutMs: Math.round(seconds * 1000) } : {});

export function mcpServerRoutes(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  app.onError((error) => {
    throw withField(error);
  });
  const admin = (c: { get(key: 'principal'): AppEnv['Variables']['principal'] }): { tenant: string; registry: McpRegistry } => {
    const principal = c.get('principal');
    requireAdmin(principal);
    return { tenant: principal.tenant, registry: mcpRegistryOf(deps) };
  };

  app.openapi(
    createRoute({
      method: 'post',
      path: '/',
      summary: 'Register an MCP server (its tools are listed and cached)',
      request: { body: { content: { 'application/json': { schema: CreateMcpServer } }, required: true } },
      responses: { 201: json(SavedSchema, 'created'), ...errors },
    }),
    async (c) => {
      const { tenant, registry } = admin(c);
      const body = c.req.valid('json');
      const saved = await registry.create(tenant, body, { ...timeoutOf(body.timeout_seconds), signal: c.req.raw.signal });
      return c.json(savedView(saved), 201);
    },
  );

  app.openapi(
    createRoute({ method: 'get', path: '/', summary: 'The tenant’s MCP servers, newest first', request: { query: ListQuery }, responses: { 200: json(z.object({ items: z.array(McpServerSchema), next_cursor: z.string().nullable() }), 'MCP servers'), ...errors } }),
    async (c) => {
      const { tenant, registry } = admin(c);
      const query = c.req.valid('query');
      const from = decodePageCursor(query.cursor) ?? { page: 1, pageSize: query.limit };
      const listed = await registry.list(tenant, { page: from.page, pageSize: from.pageSize, orderby: 'create_time', desc: true, ...(query.keywords ? { keywords: query.keywords } : {}) });
      const next = from.page * from.pageSize < listed.total ? { page: from.page + 1, pageSize: from.pageSize } : undefined;
      return c.json({ items: listed.items.map(view), next_cursor: encodePageCursor(next) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/import',
      summary: 'Register the servers of an mcpServers document (RAGFlow’s import); each gets its own result',
      request: { body: { content: { 'application/json': { schema: ImportBody } }, required: true } },
      responses: { 200: json(z.object({ results: z.array(ImportResult) }), 'one result per server'), ...errors },
    }),
    async (c) => {
      const { tenant, registry } = admin(c);
      const body = c.req.valid('json');
      const outcomes = await registry.importServers(tenant, body.mcpServers, { ...timeoutOf(body.timeout_seconds), signal: c.req.raw.signal });
      const results = outcomes.map((o) => {
        if (o.success) return { server: o.server, success: true, id: o.id, name: o.new_name, secrets: o.secrets, ...(o.tools_error ? { tools_error: o.tools_error } : {}) };
        const refusal = withField(o.refusal) as EaselError;
        return { server: o.server, success: false, error: { code: refusal.code, error: refusal.message, ...(refusal instanceof HttpError ? refusal.extra : {}) } };
      });
      return c.json({ results }, 200);
    },
  );

  app.openapi(
    createRoute({ method: 'get', path: '/{id}', summary: 'An MCP server', request: { params: IdParam }, responses: { 200: json(McpServerSchema, 'the server'), ...errors } }),
    async (c) => {
      const { tenant, registry } = admin(c);
      return c.json(view(await registry.get(tenant, c.req.valid('param').id)), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'patch',
      path: '/{id}',
      summary: 'Change an MCP server (its tools are listed again when its URL, type, headers or variables change)',
      request: { params: IdParam, body: { content: { 'application/json': { schema: UpdateMcpServer } }, required: true } },
      responses: { 200: json(SavedSchema, 'the server'), ...errors },
    }),
    async (c) => {
      const { tenant, registry } = admin(c);
      const { tools, timeout_seconds: seconds, ...patch } = c.req.valid('json');
      const switches = tools ? Object.fromEntries(Object.entries(tools).map(([name, t]) => [name, t.enabled])) : undefined;
      const saved = await registry.update(tenant, c.req.valid('param').id, { ...patch, ...(switches ? { tools: switches } : {}) }, { relist: 'on_change', ...timeoutOf(seconds), signal: c.req.raw.signal });
      return c.json(savedView(saved), 200);
    },
  );

  app.openapi(
    createRoute({ method: 'delete', path: '/{id}', summary: 'Delete an MCP server and the secrets made from its credentials', request: { params: IdParam }, responses: { 204: { description: 'deleted' }, ...errors } }),
    async (c) => {
      const { tenant, registry } = admin(c);
      await registry.delete(tenant, c.req.valid('param').id);
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({ method: 'post', path: '/{id}/tools', summary: 'List the server’s tools again and cache them (each tool’s enabled switch kept)', request: { params: IdParam }, responses: { 200: json(SavedSchema, 'the server'), ...errors } }),
    async (c) => {
      const { tenant, registry } = admin(c);
      return c.json(savedView(await registry.refreshTools(tenant, c.req.valid('param').id, { signal: c.req.raw.signal })), 200);
    },
  );

  return app;
}
