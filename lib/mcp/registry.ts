/**
 * The per-tenant MCP server registry, in RAGFlow's shapes (api/apps/restful_apis/mcp_api.py):
 * servers are created, listed, read, changed, deleted, imported from an `mcpServers` document
 * and tested; what a run sees of them is `forTenant(tenant)`, a `RunMcp`.
 *
 * - Every URL passes the SSRF guard when it is given (the refusal is named); the connector checks
 *   it again on every connection.
 * - Credentials are moved into the tenant's secrets before anything is stored (credentials.ts);
 *   the server keeps `{secret.NAME}` and the answer names the secrets made. The secrets a server
 *   made go with it when it is deleted or no longer references them.
 * - Creating, changing the connection of, or testing a server lists its tools through the
 *   connector and caches them in `variables.tools` (by name), each tool's `enabled` switch kept
 *   across listings. A listing that fails does not refuse the server (as RAGFlow): it is stored
 *   with the tools it had (none when new), and the answer carries the reason (`toolsError`).
 *
 * @example
 *   const registry = new McpRegistry({ store, guard, secrets: tenantSecrets, secretsFor, connector });
 *   const { server } = await registry.create('acme', { name: 'GitHub', url: 'https://mcp.example.com/mcp', server_type: 'streamable-http', headers: { Authorization: 'Bearer ghp_…' } });
 *   server.headers; // { Authorization: '{secret.MCP_GITHUB_AUTHORIZATION}' }
 */
import { randomBytes } from 'node:crypto';
import { EaselError } from '../errors';
import { type SsrfGuard, urlRefusal } from '../outbound/ssrf';
import { redactSecrets } from '../secrets/redact';
import type { SecretResolver } from '../secrets/resolver';
import type { TenantSecrets } from '../secrets/tenant-secrets';
import type { StoreContext } from '../store/dynamo';
import { NotFoundError } from '../store/errors';
import {
  createMcpServer,
  deleteMcpServer,
  findMcpServer,
  getMcpServer,
  listMcpServers,
  MAX_MCP_SERVERS_PER_TENANT,
  McpServerChangedError,
  McpServerNameTakenError,
  mcpServerNamed,
  replaceMcpServer,
  type StoredMcpServer,
} from '../store/mcp-servers';
import { AUTHORIZATION_TOKEN, planCredentials, referencedSecrets, type SecretWrite } from './credentials';
import type { McpConnector, McpServerConnection, McpServerRecord, McpServerType, McpToolMeta, RunMcp } from './types';
import {
  checkDescription,
  checkHeaders,
  checkName,
  checkServerType,
  checkUrlShape,
  checkVariables,
  DEFAULT_MCP_LIST_TIMEOUT_MS,
  McpServerRefusedError,
} from './validation';

/** Server ids: 32 hex digits, as RAGFlow's `get_uuid()`. */
export const MCP_SERVER_ID = /^[0-9a-f]{32}$/;

/** Times an update is applied when other writes keep changing the server under it. */
const MAX_UPDATE_ATTEMPTS = 3;

export interface McpRegistryDeps {
  store: StoreContext;
  /** Checks every URL when it is given. */
  guard: SsrfGuard;
  /** Where literal credentials are moved; absent, a server with one is refused. */
  secrets?: TenantSecrets;
  /** `{secret.NAME}` of one tenant, for the connector's headers. */
  secretsFor(tenant: string): SecretResolver;
  connector: McpConnector;
  /** Epoch ms. @default Date.now */
  now?: () => number;
  /** @default MAX_MCP_SERVERS_PER_TENANT */
  maxServers?: number;
}

export interface NewMcpServer {
  name: unknown;
  url: unknown;
  server_type: unknown;
  description?: unknown;
  headers?: unknown;
  variables?: unknown;
  /** Tool name -> enabled, applied to the first listing (an exported server's switches). */
  tools?: Record<string, boolean>;
}

export interface McpServerPatch {
  name?: unknown;
  url?: unknown;
  server_type?: unknown;
  description?: unknown;
  headers?: unknown;
  variables?: unknown;
  /** Tool name -> enabled, for tools of the cached listing (RAGFlow's switches). */
  tools?: Record<string, boolean>;
}

/** How long a listing may take and what cancels it. */
export interface ListingOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** A secret made from a literal credential: where it was and its name (never its value). */
export interface MovedCredential {
  field: string;
  secret: string;
}

export interface SavedMcpServer {
  server: McpServerRecord;
  secrets: MovedCredential[];
  /** Why the tools could not be listed (the server is stored with the tools it had). */
  toolsError?: string;
}

export interface McpListQuery {
  /** Part of the name, whatever its case. */
  keywords?: string;
  ids?: readonly string[];
  orderby?: 'create_time' | 'update_time' | 'name';
  /** @default true */
  desc?: boolean;
  /** From 1. @default 1 */
  page?: number;
  /** @default 30 */
  pageSize?: number;
}

export type ImportOutcome =
  | { server: string; success: true; action: 'created'; id: string; new_name: string; message?: string; secrets: MovedCredential[]; tools_error?: string }
  | { server: string; success: false; refusal: EaselError };

/** RAGFlow's export document: `{mcpServers: {name: {type, url, name, authorization_token, tools}}}`. */
export interface McpExport {
  mcpServers: Record<string, { type: McpServerType; url: string; name: string; authorization_token: unknown; tools: unknown }>;
}

export class McpRegistry {
  private readonly now: () => number;

  constructor(private readonly deps: McpRegistryDeps) {
    this.now = deps.now ?? Date.now;
  }

  /** A new server, its tools listed. @throws McpServerRefusedError, McpServerNameTakenError, McpServerLimitError */
  async create(tenant: string, input: NewMcpServer, options: ListingOptions = {}): Promise<SavedMcpServer> {
    const serverType = checkServerType(input.server_type);
    const name = checkName(input.name);
    if (await mcpServerNamed(this.deps.store, tenant, name)) throw new McpServerNameTakenError(name);
    const url = await this.checkUrl(input.url);
    const description = checkDescription(input.description);
    const headers = checkHeaders(input.headers);
    const variables = checkVariables(input.variables);
    const at = this.now();
    const id = randomBytes(16).toString('hex');
    const plan = await this.plan(tenant, name, headers, variables, []);
    const draft: McpServerRecord = { id, tenant_id: tenant, name, url, server_type: serverType, description, headers: plan.headers, variables: plan.variables, create_time: at, update_time: at };
    const written = await this.writeSecrets(tenant, plan.writes);
    try {
      const listing = await this.listTools(tenant, draft, pendingOf(plan.writes), options);
      draft.variables = { ...plan.variables, tools: cacheTools(listing.tools ?? [], {}, input.tools ?? {}) };
      const stored = await createMcpServer(this.deps.store, { record: draft, ownedSecrets: written }, this.deps.maxServers ?? MAX_MCP_SERVERS_PER_TENANT);
      return saved(stored.record, plan.writes, listing.error);
    } catch (error) {
      await this.deleteSecrets(tenant, written);
      throw error;
    }
  }

  /** The server, or NotFoundError (another tenant's included). */
  async get(tenant: string, id: string): Promise<McpServerRecord> {
    return (await this.stored(tenant, id)).record;
  }

  /** The tenant's servers as RAGFlow's list filters, orders and pages them; `total` counts all that match. */
  async list(tenant: string, query: McpListQuery = {}): Promise<{ items: McpServerRecord[]; total: number }> {
    const keywords = query.keywords?.toLowerCase();
    const ids = query.ids && query.ids.length > 0 ? new Set(query.ids) : undefined;
    const orderby = query.orderby ?? 'create_time';
    const direction = query.desc === false ? 1 : -1;
    const all = (await listMcpServers(this.deps.store, tenant))
      .map((s) => s.record)
      .filter((r) => (!ids || ids.has(r.id)) && (!keywords || r.name.toLowerCase().includes(keywords)))
      .sort((a, b) => direction * compare(a[orderby], b[orderby]) || compare(a.id, b.id));
    const page = query.page ?? 1;
    const size = query.pageSize ?? 30;
    return { items: all.slice((page - 1) * size, page * size), total: all.length };
  }

  /**
   * Changes a server. Its tools are listed again when `relist` is 'always' (RAGFlow's update) or
   * when its URL, type, headers or variables change ('on_change').
   */
  async update(tenant: string, id: string, patch: McpServerPatch, options: ListingOptions & { relist?: 'always' | 'on_change' } = {}): Promise<SavedMcpServer> {
    // another request changed the server between our read and our write: the store refused
    // ours rather than undo theirs, and the patch is applied again on what they wrote
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.updateOnce(tenant, id, patch, options);
      } catch (error) {
        if (!(error instanceof McpServerChangedError) || attempt >= MAX_UPDATE_ATTEMPTS) throw error;
      }
    }
  }

  private async updateOnce(tenant: string, id: string, patch: McpServerPatch, options: ListingOptions & { relist?: 'always' | 'on_change' }): Promise<SavedMcpServer> {
    const before = await this.stored(tenant, id);
    const old = before.record;
    const serverType = patch.server_type === undefined ? old.server_type : checkServerType(patch.server_type);
    const name = patch.name === undefined ? old.name : checkName(patch.name);
    if (name !== old.name) {
      const holder = await mcpServerNamed(this.deps.store, tenant, name);
      if (holder && holder !== id) throw new McpServerNameTakenError(name);
    }
    const url = patch.url === undefined ? old.url : await this.checkUrl(patch.url);
    const description = patch.description === undefined ? old.description : checkDescription(patch.description);
    const headers = patch.headers === undefined ? old.headers : checkHeaders(patch.headers);
    const { tools: cached, ...oldVariables } = old.variables;
    const variables = patch.variables === undefined ? oldVariables : checkVariables(patch.variables);
    const plan = await this.plan(tenant, name, headers, variables, before.ownedSecrets);
    const connectionChanged = url !== old.url || serverType !== old.server_type || patch.headers !== undefined || patch.variables !== undefined;
    const next: McpServerRecord = { ...old, name, url, server_type: serverType, description, headers: plan.headers, variables: plan.variables, update_time: Math.max(this.now(), old.update_time) };
    const written = await this.writeSecrets(tenant, plan.writes);
    try {
      const previous = toolsOf(cached);
      let toolsError: string | undefined;
      let tools = cacheTools(Object.values(previous), previous, patch.tools ?? {});
      if (options.relist === 'always' || connectionChanged) {
        const listing = await this.listTools(tenant, next, pendingOf(plan.writes), options);
        toolsError = listing.error;
        if (listing.tools) tools = cacheTools(listing.tools, previous, patch.tools ?? {});
      }
      next.variables = { ...plan.variables, tools };
      const referenced = referencedSecrets(next.headers, next.variables);
      const owned = [...new Set([...before.ownedSecrets, ...written])].filter((s) => referenced.has(s));
      const stored = await replaceMcpServer(this.deps.store, before, { record: next, ownedSecrets: owned });
      // secrets this server made and no longer uses
      await this.deleteSecrets(tenant, before.ownedSecrets.filter((s) => !referenced.has(s)));
      return saved(stored.record, plan.writes, toolsError);
    } catch (error) {
      await this.deleteSecrets(tenant, written);
      throw error;
    }
  }

  /** Lists the stored server's tools again and caches them (switches kept). */
  async refreshTools(tenant: string, id: string, options: ListingOptions = {}): Promise<SavedMcpServer> {
    return this.update(tenant, id, {}, { ...options, relist: 'always' });
  }

  /** Deletes a server and the secrets it made (NotFoundError when there is none). */
  async delete(tenant: string, id: string): Promise<McpServerRecord> {
    if (!MCP_SERVER_ID.test(id)) throw new NotFoundError('MCP server');
    const gone = await deleteMcpServer(this.deps.store, tenant, id);
    await this.deleteSecrets(tenant, gone.ownedSecrets);
    return gone.record;
  }

  /**
   * RAGFlow's import: each `name: {type, url, headers?, authorization_token?, ...}` is created (a
   * taken name becomes `name_0`, `name_1`, ...), and each gets an outcome; one refused does not
   * stop the others. A token with no Authorization header of its own is sent as
   * `Authorization: Bearer ${authorization_token}`; an exported server's `tools` switches apply.
   */
  async importServers(tenant: string, servers: Record<string, unknown>, options: ListingOptions = {}): Promise<ImportOutcome[]> {
    const outcomes: ImportOutcome[] = [];
    for (const [serverName, config] of Object.entries(servers)) {
      const c = (config !== null && typeof config === 'object' && !Array.isArray(config) ? config : {}) as Record<string, unknown>;
      if (!('type' in c) || !('url' in c)) {
        outcomes.push({ server: serverName, success: false, refusal: new McpServerRefusedError(!('type' in c) ? 'type' : 'url', 'missing', 'Missing required fields (type or url)') });
        continue;
      }
      try {
        checkName(serverName);
        checkServerType(c.type);
        await this.checkUrl(c.url);
        const headers = { ...checkHeaders(c.headers) };
        const variables: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(c)) if (!['type', 'url', 'headers', 'tools', 'name', 'description'].includes(k)) Object.defineProperty(variables, k, { value: v, enumerable: true, writable: true, configurable: true });
        if (typeof c[AUTHORIZATION_TOKEN] === 'string' && c[AUTHORIZATION_TOKEN] !== '' && !Object.keys(headers).some((h) => h.toLowerCase() === 'authorization')) {
          headers.Authorization = `Bearer \${${AUTHORIZATION_TOKEN}}`;
        }
        const name = await this.freeName(tenant, serverName);
        const switches = Object.fromEntries(Object.entries(toolsOf(c.tools)).filter(([, t]) => typeof t?.enabled === 'boolean').map(([n, t]) => [n, t.enabled as boolean]));
        const made = await this.create(tenant, { name, url: c.url, server_type: c.type, description: c.description, headers, variables, tools: switches }, options);
        outcomes.push({
          server: serverName,
          success: true,
          action: 'created',
          id: made.server.id,
          new_name: name,
          ...(name !== serverName ? { message: `Renamed from '${serverName}' to '${name}' avoid duplication` } : {}),
          secrets: made.secrets,
          ...(made.toolsError ? { tools_error: made.toolsError } : {}),
        });
      } catch (error) {
        // what the client can fix is this server's outcome; anything else stops the import
        if (!(error instanceof EaselError) || (error.code !== 'invalid_request' && error.code !== 'payload_too_large')) throw error;
        outcomes.push({ server: serverName, success: false, refusal: error });
      }
    }
    return outcomes;
  }

  /**
   * RAGFlow's test: lists the tools of the server described (its headers' secrets resolved), each
   * `enabled`. When `id` names a server of the tenant at the same URL and type, its switches are
   * kept and the listing is cached in it; its headers and variables are used when none are sent.
   * @throws McpServerRefusedError for a bad URL or type; McpListingError when listing fails
   */
  async test(tenant: string, id: string, input: { url: unknown; server_type: unknown; headers?: unknown; variables?: unknown }, options: ListingOptions = {}): Promise<McpToolMeta[]> {
    // RAGFlow's order: the URL's shape, the type, then the guard
    const shaped = checkUrlShape(input.url);
    const serverType = checkServerType(input.server_type);
    const url = await this.checkUrl(shaped);
    const stored = MCP_SERVER_ID.test(id) ? await findMcpServer(this.deps.store, tenant, id) : undefined;
    const same = stored && stored.record.url === url && stored.record.server_type === serverType ? stored : undefined;
    const { tools: _cached, ...storedVariables } = same?.record.variables ?? {};
    const connection: McpServerConnection = {
      id,
      name: same?.record.name ?? id,
      url,
      server_type: serverType,
      headers: input.headers === undefined && same ? same.record.headers : checkHeaders(input.headers),
      variables: input.variables === undefined && same ? storedVariables : checkVariables(input.variables),
    };
    // values sent with the test are used for it only, and never repeated in an error
    const literals = [...Object.values(connection.headers), ...Object.values(connection.variables).filter((v): v is string => typeof v === 'string')];
    const listing = await this.listTools(tenant, connection, { secrets: new Map(), literals }, options);
    if (!listing.tools) throw new McpListingError(listing.error ?? 'the tools could not be listed');
    if (!same) return listing.tools.map((t) => ({ ...t, enabled: true }));
    const previous = toolsOf(same.record.variables.tools);
    const tools = cacheTools(listing.tools, previous, {});
    await replaceMcpServer(this.deps.store, same, { record: { ...same.record, variables: { ...same.record.variables, tools }, update_time: Math.max(this.now(), same.record.update_time) }, ownedSecrets: same.ownedSecrets });
    return Object.values(tools);
  }

  /** RAGFlow's export of the tenant's servers among `ids` (references, never secret values); null when none is the tenant's. */
  async exportServers(tenant: string, ids: readonly string[]): Promise<McpExport | null> {
    const out: McpExport['mcpServers'] = {};
    for (const id of ids) {
      if (!MCP_SERVER_ID.test(id)) continue;
      const found = await findMcpServer(this.deps.store, tenant, id);
      if (!found) continue;
      const r = found.record;
      out[r.name] = { type: r.server_type, url: r.url, name: r.name, authorization_token: r.variables[AUTHORIZATION_TOKEN] ?? '', tools: r.variables.tools ?? {} };
    }
    return Object.keys(out).length > 0 ? { mcpServers: out } : null;
  }

  /** What one tenant's runs see: its servers by id, and sessions with their headers' secrets resolved. */
  forTenant(tenant: string): RunMcp {
    const secret = this.deps.secretsFor(tenant);
    return {
      server: async (id) => {
        if (!MCP_SERVER_ID.test(id)) return undefined;
        const found = await findMcpServer(this.deps.store, tenant, id);
        return found ? connectionOf(found.record) : undefined;
      },
      open: (server, options) => this.deps.connector.open(server, { secret, ...options }),
    };
  }

  private async stored(tenant: string, id: string): Promise<StoredMcpServer> {
    if (!MCP_SERVER_ID.test(id)) throw new NotFoundError('MCP server');
    return getMcpServer(this.deps.store, tenant, id);
  }

  /** The URL's shape, then the SSRF guard's verdict (named). */
  private async checkUrl(url: unknown): Promise<string> {
    const checked = checkUrlShape(url);
    const refusal = await urlRefusal(this.deps.guard, checked);
    if (refusal) throw new McpServerRefusedError('url', refusal === 'not a valid absolute URL' ? 'url_invalid' : 'url_refused', refusal);
    return checked;
  }

  /** The credential plan; refused when it would need secrets and there are none. */
  private async plan(tenant: string, name: string, headers: Record<string, string>, variables: Record<string, unknown>, owned: readonly string[]) {
    const secrets = this.deps.secrets;
    const taken = new Set<string>(owned);
    if (secrets) for (const s of await secrets.list(tenant)) taken.add(s.name);
    const plan = planCredentials({ name, headers, variables, taken });
    const first = plan.writes[0];
    if (first && !secrets) {
      throw new McpServerRefusedError(first.field, 'secrets_unavailable', 'tenant secrets are not configured on this server: store the credential elsewhere and write {secret.NAME}');
    }
    return plan;
  }

  private async writeSecrets(tenant: string, writes: readonly SecretWrite[]): Promise<string[]> {
    const written: string[] = [];
    try {
      for (const w of writes) {
        await this.deps.secrets?.put(tenant, w.name, w.value);
        written.push(w.name);
      }
      return written;
    } catch (error) {
      await this.deleteSecrets(tenant, written);
      throw error;
    }
  }

  private async deleteSecrets(tenant: string, names: readonly string[]): Promise<void> {
    for (const name of names) await this.deps.secrets?.delete(tenant, name);
  }

  /** `name`, or the first of `name_0`, `name_1`, ... no server of the tenant has (RAGFlow's import). */
  private async freeName(tenant: string, name: string): Promise<string> {
    if (!(await mcpServerNamed(this.deps.store, tenant, name))) return name;
    for (let counter = 0; counter < (this.deps.maxServers ?? MAX_MCP_SERVERS_PER_TENANT) + 1; counter++) {
      const candidate = `${name}_${counter}`;
      if (!(await mcpServerNamed(this.deps.store, tenant, candidate))) return checkName(candidate);
    }
    throw new McpServerNameTakenError(name);
  }

  /**
   * The server's tools, or why they could not be listed. `pending.secrets` are secrets just
   * written (resolved from memory, not read back); every value used, and `pending.literals`, is
   * removed from an error message.
   */
  private async listTools(tenant: string, server: McpServerConnection, pending: Pending, options: ListingOptions): Promise<{ tools?: McpToolMeta[]; error?: string }> {
    const resolve = this.deps.secretsFor(tenant);
    const timeoutMs = options.timeoutMs ?? DEFAULT_MCP_LIST_TIMEOUT_MS;
    const signal = options.signal ? AbortSignal.any([options.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
    const used: string[] = [...pending.secrets.values(), ...pending.literals];
    const secret = async (name: string) => {
      const value = pending.secrets.get(name) ?? (await resolve(name));
      if (value) used.push(value);
      return value;
    };
    try {
      const session = await this.deps.connector.open(connectionOf(server), { secret, signal, timeoutMs });
      try {
        return { tools: await session.listTools() };
      } finally {
        await session.close().catch(() => undefined);
      }
    } catch (error) {
      const message = error instanceof Error && error.message ? error.message : 'the server could not be reached';
      return { error: redactSecrets(message, used) };
    }
  }
}

/** Values a listing needs before they are readable from the store, and literals to keep out of errors. */
interface Pending {
  secrets: ReadonlyMap<string, string>;
  literals: readonly string[];
}

function pendingOf(writes: readonly SecretWrite[]): Pending {
  return { secrets: new Map(writes.map((w) => [w.name, w.value])), literals: [] };
}

/** Listing a server's tools failed (RAGFlow's test answers `Test MCP error: <message>`). */
export class McpListingError extends Error {}

/** The fields a connection needs, without the tool cache. */
export function connectionOf(r: McpServerConnection): McpServerConnection {
  return { id: r.id, name: r.name, url: r.url, server_type: r.server_type, headers: r.headers, variables: r.variables };
}

/** Listed tools by name, each `enabled` as switched now, else as it was, else on. */
export function cacheTools(listed: readonly McpToolMeta[], previous: Readonly<Record<string, McpToolMeta>>, switches: Readonly<Record<string, boolean>>): Record<string, McpToolMeta> {
  const out: Record<string, McpToolMeta> = {};
  for (const tool of listed) {
    if (typeof tool?.name !== 'string') continue;
    const enabled = Object.hasOwn(switches, tool.name) ? switches[tool.name] : Object.hasOwn(previous, tool.name) ? (previous[tool.name]?.enabled ?? true) : true;
    Object.defineProperty(out, tool.name, { value: { ...tool, enabled }, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

function toolsOf(cached: unknown): Record<string, McpToolMeta> {
  return cached !== null && typeof cached === 'object' && !Array.isArray(cached) ? (cached as Record<string, McpToolMeta>) : {};
}

function saved(server: McpServerRecord, writes: readonly SecretWrite[], toolsError: string | undefined): SavedMcpServer {
  return { server, secrets: writes.map((w) => ({ field: w.field, secret: w.name })), ...(toolsError !== undefined ? { toolsError } : {}) };
}

function compare(a: string | number, b: string | number): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
