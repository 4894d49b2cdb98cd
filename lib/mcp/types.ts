/**
 * MCP servers as tools, in RAGFlow's shapes (api/apps/restful_apis/mcp_api.py, common/
 * mcp_tool_call_conn.py): a per-tenant registry of servers, and what a run sees of it.
 *
 * - The registry (lib/store, lib/http) keeps `McpServerRecord`s; header values that carry a
 *   credential are `{secret.NAME}` references to the tenant's secrets, never the value.
 * - `McpConnector` (lib/mcp/client) speaks MCP with the official SDK over streamable HTTP or
 *   SSE, every URL through the SSRF guard.
 * - `RunMcp` is one tenant's view for a run: an Agent's DSL names servers by `mcp_id`, and the
 *   Agent opens at most one session per server per invocation.
 */

export const MCP_SERVER_TYPES = ['sse', 'streamable-http'] as const;
export type McpServerType = (typeof MCP_SERVER_TYPES)[number];

/** One tool a server offers, as MCP lists it, with RAGFlow's `enabled` flag. */
export interface McpToolMeta {
  name: string;
  description?: string;
  /** JSON Schema of the arguments. */
  inputSchema: Record<string, unknown>;
  /** RAGFlow's switch per tool in the registry. @default true */
  enabled?: boolean;
  [extra: string]: unknown;
}

/** What it takes to connect to one server. */
export interface McpServerConnection {
  id: string;
  name: string;
  url: string;
  server_type: McpServerType;
  /**
   * Sent with every request. `${var}` in a name or value is replaced from `variables` (as
   * RAGFlow's `Template.safe_substitute`), `{secret.NAME}` from the tenant's secrets when the
   * session opens.
   */
  headers: Record<string, string>;
  /** RAGFlow's template variables; `tools` holds the tools cached at creation or test. */
  variables: Record<string, unknown>;
}

/** A registry entry, as RAGFlow's `MCPServer.to_dict()` names its fields. */
export interface McpServerRecord extends McpServerConnection {
  tenant_id: string;
  description: string;
  create_time: number;
  update_time: number;
}

/** A tool call's answer: RAGFlow hands the model the first text content. */
export interface McpCallResult {
  isError: boolean;
  /** The text the model reads. */
  text: string;
  /** The content blocks as the server sent them (for traces). */
  content: unknown[];
}

/** How long and under which signal a session works, with the tenant's secrets for headers. */
export interface McpSessionOptions {
  secret: (name: string) => string | undefined | Promise<string | undefined>;
  signal?: AbortSignal;
  /** Connecting, listing tools and closing; a tool call only when its own `timeoutMs` is given. */
  timeoutMs?: number;
  /**
   * The Agent's `custom_header`, sent besides (and over) the server's: `${var}` in them is
   * replaced from these same headers, as RAGFlow does; `{secret.NAME}` as in the server's.
   */
  headers?: Record<string, string>;
}

/** An open connection to one server. */
export interface McpSession {
  /** Every tool the server lists, `enabled` as the registry's cached `variables.tools` says (default true). */
  listTools(): Promise<McpToolMeta[]>;
  callTool(name: string, args: Record<string, unknown>, options: { signal?: AbortSignal; timeoutMs?: number }): Promise<McpCallResult>;
  close(): Promise<void>;
}

/** Speaks MCP to servers (lib/mcp/client). */
export interface McpConnector {
  open(server: McpServerConnection, options: McpSessionOptions): Promise<McpSession>;
}

/** One tenant's MCP servers, as a run sees them (`services.mcp`). */
export interface RunMcp {
  /** The server the DSL's `mcp_id` names, or undefined (deleted, another tenant's). */
  server(id: string): Promise<McpServerConnection | undefined>;
  /** A session with that server, headers' secrets resolved; the caller closes it. */
  open(server: McpServerConnection, options: Omit<McpSessionOptions, 'secret'>): Promise<McpSession>;
}
