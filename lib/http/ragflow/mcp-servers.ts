/**
 * RAGFlow's MCP server routes (mounted at /api/v1/mcp/servers) over the registry, with the
 * answers and messages of RAGFlow's `mcp_api.py` — admin keys only, as the other managing routes:
 *
 *   GET    /?keywords=&page=&page_size=&orderby=&desc=&mcp_ids=   {mcp_servers, total}
 *   GET    /{id}                      the server (`?mode=download`: its `{mcpServers}` export)
 *   POST   /                          {name, url, server_type, headers?, variables?, description?, timeout?}
 *   PUT    /{id}                      the same fields, each optional (its tools are listed again)
 *   DELETE /{id}                      true
 *   POST   /import                    {mcpServers: {name: {type, url, authorization_token?, ...}}}  {results}
 *   POST   /{id}/test                 {url, server_type, headers?, variables?, timeout?}  the tools
 *
 * Where Easel differs: credentials are tenant secrets, so the server's headers and
 * `authorization_token` show `{secret.NAME}` (the success message names the secrets made); a
 * create answers the stored server, not the request echoed; update keeps each tool's `enabled`.
 */
import { EaselError } from '../../errors';
import { McpListingError, type McpRegistry, type SavedMcpServer } from '../../mcp/registry';
import type { McpServerRecord } from '../../mcp/types';
import { checkToolSwitches, listTimeoutMs, McpServerRefusedError } from '../../mcp/validation';
import { NotFoundError } from '../../store/errors';
import { McpServerLimitError, McpServerNameTakenError } from '../../store/mcp-servers';
import type { AppDeps } from '../app';
import { mcpRegistryOf } from '../mcp';
import { adminOnly, guardOf, pageOf, param, type RagflowContext, routeGroup } from './context';
import { httpDate, jsonBody, RAGFLOW, RagflowError, success, successWith } from './envelope';

/** RAGFlow's `REST_API_MAX_IDS`. */
const MAX_IDS = 100;
const ORDERS = new Set(['create_time', 'update_time', 'name']);

export function mcpServerRoutes(deps: AppDeps) {
  const app = routeGroup();
  const guard = guardOf(deps);
  const caller = (c: RagflowContext): { tenant: string; registry: McpRegistry } => {
    adminOnly(c);
    return { tenant: c.get('principal').tenant, registry: mcpRegistryOf(deps) };
  };

  app.get('/', guard(async (c) => {
    const { tenant, registry } = caller(c);
    const q = c.req.query();
    const { page, size } = pageOf(q);
    const ids = (c.req.queries('mcp_ids') ?? []).flatMap((v) => v.split(',')).filter((v) => v !== '');
    if (ids.length === 0) ids.push(...(q.mcp_id ?? '').split(',').filter((v) => v !== ''));
    if (ids.length > MAX_IDS) throw new RagflowError(RAGFLOW.argument, `mcp_ids must contain at most ${MAX_IDS} IDs`);
    const orderby = q.orderby && ORDERS.has(q.orderby) ? (q.orderby as 'create_time' | 'update_time' | 'name') : 'create_time';
    const listed = await registry.list(tenant, {
      ...(q.keywords ? { keywords: q.keywords } : {}),
      ids,
      orderby,
      desc: (q.desc ?? 'true').toLowerCase() !== 'false',
      page,
      pageSize: size,
    });
    return success(c, { mcp_servers: listed.items.map(listRow), total: listed.total });
  }));

  app.post('/import', guard(async (c) => {
    const { tenant, registry } = caller(c);
    const req = await jsonBody(c);
    if (!('mcpServers' in req)) throw missing(['mcpServers']);
    const servers = req.mcpServers;
    if (!servers || (typeof servers === 'object' && Object.keys(servers).length === 0)) throw new RagflowError(RAGFLOW.data, 'No MCP servers provided.');
    if (typeof servers !== 'object' || Array.isArray(servers)) throw new RagflowError(RAGFLOW.argument, 'mcpServers must be an object of server names to their settings.');
    const outcomes = await registry.importServers(tenant, servers as Record<string, unknown>, { timeoutMs: listTimeoutMs(req.timeout), signal: c.req.raw.signal });
    const results = outcomes.map((o) => (o.success
      ? { server: o.server, success: true, action: o.action, id: o.id, new_name: o.new_name, ...(o.message ? { message: o.message } : {}) }
      : { server: o.server, success: false, message: ragflowMessage(o.refusal, { name: o.server, url: (servers as Record<string, { url?: unknown } | undefined>)[o.server]?.url }).message }));
    return success(c, { results });
  }));

  app.get('/:id', guard(async (c) => {
    const { tenant, registry } = caller(c);
    const id = param(c, 'id');
    if (c.req.query('mode') === 'download') {
      const exported = await registry.exportServers(tenant, [id]);
      if (!exported) throw notFound(id, tenant);
      return success(c, exported);
    }
    return success(c, recordView(await registry.get(tenant, id).catch(rethrow({ id, tenant }))));
  }));

  app.post('/', guard(async (c) => {
    const { tenant, registry } = caller(c);
    const req = await jsonBody(c);
    const absent = ['name', 'url', 'server_type'].filter((k) => !(k in req));
    if (absent.length > 0) throw missing(absent);
    const made = await registry
      .create(tenant, { name: req.name, url: req.url, server_type: req.server_type, description: req.description, headers: jsonObject(req.headers), variables: jsonObject(req.variables) }, { timeoutMs: listTimeoutMs(req.timeout), signal: c.req.raw.signal })
      .catch(rethrow({ name: req.name, url: req.url }));
    return successWith(c, recordView(made.server), savedMessage(made));
  }));

  app.put('/:id', guard(async (c) => {
    const { tenant, registry } = caller(c);
    const id = param(c, 'id');
    const req = await jsonBody(c);
    const variables = 'variables' in req ? jsonObject(req.variables) : undefined;
    const switches = variables && typeof variables === 'object' && !Array.isArray(variables) ? checkToolSwitches((variables as Record<string, unknown>).tools) : {};
    const saved = await registry
      .update(tenant, id, {
        ...('name' in req ? { name: req.name } : {}),
        ...('url' in req ? { url: req.url } : {}),
        ...('server_type' in req ? { server_type: req.server_type } : {}),
        ...('description' in req ? { description: req.description } : {}),
        ...('headers' in req ? { headers: jsonObject(req.headers) } : {}),
        ...(variables !== undefined ? { variables } : {}),
        tools: switches,
      }, { relist: 'always', timeoutMs: listTimeoutMs(req.timeout), signal: c.req.raw.signal })
      .catch(rethrow({ id, tenant, name: req.name, url: req.url }));
    return successWith(c, recordView(saved.server), savedMessage(saved));
  }));

  app.delete('/:id', guard(async (c) => {
    const { tenant, registry } = caller(c);
    const id = param(c, 'id');
    await registry.delete(tenant, id).catch(rethrow({ id, tenant }));
    return success(c, true);
  }));

  app.post('/:id/test', guard(async (c) => {
    const { tenant, registry } = caller(c);
    const id = param(c, 'id');
    const req = await jsonBody(c);
    const absent = ['url', 'server_type'].filter((k) => !(k in req));
    if (absent.length > 0) throw missing(absent);
    if (typeof req.url !== 'string' || req.url === '') throw new RagflowError(RAGFLOW.data, 'Invalid MCP url.');
    try {
      const tools = await registry.test(tenant, id, {
        url: req.url,
        server_type: req.server_type,
        ...('headers' in req ? { headers: jsonObject(req.headers) } : {}),
        ...('variables' in req ? { variables: jsonObject(req.variables) } : {}),
      }, { timeoutMs: listTimeoutMs(req.timeout), signal: c.req.raw.signal });
      return success(c, tools);
    } catch (error) {
      if (error instanceof McpListingError) throw new RagflowError(RAGFLOW.data, `Test MCP error: ${error.message}`);
      throw ragflowMessage(error, { url: req.url, invalidUrl: 'Invalid MCP url.' });
    }
  }));

  return app;
}

/** A list row: the fields RAGFlow's `get_servers` selects. */
function listRow(r: McpServerRecord) {
  return { id: r.id, name: r.name, server_type: r.server_type, url: r.url, description: r.description === '' ? null : r.description, variables: r.variables, create_date: httpDate(new Date(r.create_time).toISOString()), update_date: httpDate(new Date(r.update_time).toISOString()) };
}

/** A server as RAGFlow's `MCPServer.to_dict()`. */
function recordView(r: McpServerRecord) {
  return {
    id: r.id,
    name: r.name,
    tenant_id: r.tenant_id,
    url: r.url,
    server_type: r.server_type,
    description: r.description === '' ? null : r.description,
    variables: r.variables,
    headers: r.headers,
    create_time: r.create_time,
    create_date: httpDate(new Date(r.create_time).toISOString()),
    update_time: r.update_time,
    update_date: httpDate(new Date(r.update_time).toISOString()),
  };
}

/** "success", or what a client should know besides: the secrets made, a listing that failed. */
function savedMessage(saved: SavedMcpServer): string | undefined {
  const notes = [
    ...saved.secrets.map((s) => `${s.field} is kept as the tenant secret ${s.secret}`),
    ...(saved.toolsError ? [`the tools could not be listed: ${saved.toolsError}`] : []),
  ];
  return notes.length > 0 ? `success; ${notes.join('; ')}` : undefined;
}

/** RAGFlow's `safe_json_parse`: an object as it is, JSON text parsed, anything else `{}`. */
function jsonObject(value: unknown): unknown {
  if (value === undefined || value === null) return {};
  if (typeof value === 'object') return Array.isArray(value) ? {} : value;
  if (typeof value !== 'string' || value === '') return {};
  try {
    const parsed: unknown = JSON.parse(value);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/** RAGFlow's `validate_request` refusal. */
function missing(fields: readonly string[]): RagflowError {
  return new RagflowError(RAGFLOW.argument, `required argument are missing: ${fields.join(',')}; `);
}

function notFound(id: string, tenant: string): RagflowError {
  return new RagflowError(RAGFLOW.data, `Cannot find MCP server ${id} for user ${tenant}`);
}

interface Sent {
  id?: string;
  tenant?: string;
  name?: unknown;
  url?: unknown;
  /** RAGFlow's words for a URL that is not a string (the test route says "Invalid MCP url."). */
  invalidUrl?: string;
}

function rethrow(sent: Sent) {
  return (error: unknown): never => {
    throw ragflowMessage(error, sent);
  };
}

/** A registry refusal in RAGFlow's words and codes; anything else as it is. */
function ragflowMessage(error: unknown, sent: Sent): Error {
  if (error instanceof NotFoundError && sent.id !== undefined && sent.tenant !== undefined) return notFound(sent.id, sent.tenant);
  if (error instanceof McpServerNameTakenError) return new RagflowError(RAGFLOW.data, 'Duplicated MCP server name.');
  if (error instanceof McpServerLimitError) return new RagflowError(RAGFLOW.data, error.message);
  if (!(error instanceof McpServerRefusedError)) return error instanceof EaselError || error instanceof RagflowError ? error : (error as Error);
  switch (error.reason) {
    case 'missing':
      return new RagflowError(RAGFLOW.data, error.detail);
    case 'type_unsupported':
      return new RagflowError(RAGFLOW.data, 'Unsupported MCP server type.');
    case 'name_invalid': {
      // Python's len(): code points
      const length = typeof sent.name === 'string' ? [...sent.name].length : 0;
      return new RagflowError(RAGFLOW.data, `Invalid MCP name or length is ${length} which is large than 255.`);
    }
    case 'url_invalid':
      return new RagflowError(RAGFLOW.data, typeof sent.url !== 'string' || sent.url.trim() === '' ? (sent.invalidUrl ?? 'Invalid url.') : error.detail);
    case 'url_refused':
      return new RagflowError(RAGFLOW.data, error.detail);
    default:
      return new RagflowError(RAGFLOW.argument, error.message);
  }
}
