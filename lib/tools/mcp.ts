/**
 * An Agent's MCP servers as tools, as RAGFlow binds them (agent/component/agent_with_tools.py):
 * the DSL's `mcp: [{mcp_id, tools: {name: meta}}]` names servers of the tenant's registry, and
 * each tool meta becomes a function for the model, named `<name>_<index>` with the index
 * counting on after the Agent's other tools. A server whose `tools` map is empty (as a stock
 * template leaves it) offers the tools it lists, those the registry has not switched off.
 *
 * One `McpSessions` serves one Agent invocation, its sub-Agents included: it opens at most one
 * session per server — when a listing or a first call needs it, not before — lists each server
 * at most once, and closes them all when the Agent ends (`close()`, also after a failure).
 *
 * @example
 *   const sessions = new McpSessions(() => mcpOf(ctx), { signal: ctx.signal, headers: p.custom_header });
 *   try {
 *     const tools = await sessions.tools(p.mcp, p.tools.length); // [{ name: 'add_1', tool }, ...]
 *   } finally {
 *     await sessions.close();
 *   }
 */
import { z } from 'zod';
import { ComponentError } from '../canvas/errors';
import type { McpServerConnection, McpSession, McpToolMeta, RunMcp } from '../mcp/types';
import { ToolError } from './errors';
import type { Tool } from './types';

/** A tool meta as the DSL keeps it (RAGFlow stores what the server listed). */
const toolMetaSchema = z.lazy(() => z.looseObject({
  name: z.string().nullish(),
  description: z.string().nullish(),
  inputSchema: z.record(z.string(), z.unknown()).nullish(),
}));

/** One `mcp` entry of an Agent's DSL. */
export const mcpEntrySchema = z.lazy(() => z.looseObject({
  mcp_id: z.string().min(1, 'mcp_id names a server of the MCP registry'),
  tools: z
    .record(z.string(), toolMetaSchema)
    .nullish()
    .transform((t) => t ?? {}),
}));
export type McpEntry = z.output<typeof mcpEntrySchema>;

/** The Agent's `custom_header`: names to values, numbers and booleans written as text. */
export const customHeaderSchema = z.lazy(() => z
  .record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String))
  .nullish()
  .transform((h) => h ?? {}));

/** A tool bound for the model: the name it sees, and the tool behind it. */
export interface NamedTool {
  name: string;
  tool: Tool;
}

const EMPTY_PARAMETERS = { type: 'object', properties: {} };

export class McpSessions {
  readonly #mcp: () => RunMcp;
  readonly #options: { signal: AbortSignal; headers: Record<string, string> };
  readonly #servers = new Map<string, Promise<McpServerConnection>>();
  readonly #sessions = new Map<string, Promise<McpSession>>();
  readonly #listings = new Map<string, Promise<McpToolMeta[]>>();

  /** `mcp` is asked for only when an entry needs it, so an Agent without MCP needs no registry. */
  constructor(mcp: () => RunMcp, options: { signal: AbortSignal; headers?: Record<string, string> }) {
    this.#mcp = mcp;
    this.#options = { signal: options.signal, headers: options.headers ?? {} };
  }

  /** The tools of `entries`, named for the model from `firstIndex` on. */
  async tools(entries: readonly McpEntry[], firstIndex: number): Promise<NamedTool[]> {
    const bound: NamedTool[] = [];
    let index = firstIndex;
    for (const entry of entries) {
      const server = await this.#server(entry.mcp_id);
      const given = Object.entries(entry.tools);
      const metas: McpToolMeta[] =
        given.length > 0
          ? given.map(([name, meta]) => ({ ...meta, name, description: meta.description ?? '', inputSchema: meta.inputSchema ?? EMPTY_PARAMETERS }))
          : (await this.#listing(server)).filter((t) => t.enabled !== false);
      for (const meta of metas) bound.push({ name: modelName(meta.name, index++), tool: this.#tool(server, meta) });
    }
    return bound;
  }

  /** Closes every session opened; failures to close are not the run's. */
  async close(): Promise<void> {
    const sessions = [...this.#sessions.values()];
    this.#sessions.clear();
    await Promise.all(sessions.map((s) => s.then((session) => session.close()).catch(() => {})));
  }

  #server(id: string): Promise<McpServerConnection> {
    return memo(this.#servers, id, async () => {
      const server = await this.#mcp().server(id);
      if (!server) throw new ComponentError(`the MCP server "${id}" is not in this tenant's registry`);
      return server;
    });
  }

  #session(server: McpServerConnection): Promise<McpSession> {
    return memo(this.#sessions, server.id, () => this.#mcp().open(server, { signal: this.#options.signal, headers: this.#options.headers }));
  }

  #listing(server: McpServerConnection): Promise<McpToolMeta[]> {
    return memo(this.#listings, server.id, async () => (await this.#session(server)).listTools());
  }

  #tool(server: McpServerConnection, meta: McpToolMeta): Tool {
    return {
      name: meta.name,
      description: meta.description ?? '',
      parameters: meta.inputSchema ?? EMPTY_PARAMETERS,
      invoke: async (args, ctx) => {
        const session = await this.#session(server);
        const result = await session.callTool(meta.name, args, { signal: ctx.signal });
        // the model reads RAGFlow's text either way; an error is recorded as one
        return result.isError ? { kind: 'error', error: new ToolError(result.text) } : { kind: 'result', content: result.text };
      },
    };
  }
}

/** RAGFlow's `<name>_<index>`, in the characters function names allow. */
export function modelName(name: string, index: number): string {
  return `${name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 56)}_${index}`;
}

function memo<T>(cache: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  let found = cache.get(key);
  if (!found) {
    found = make();
    cache.set(key, found);
    found.catch(() => {}); // whoever awaits it sees the failure; an unawaited copy must not crash
  }
  return found;
}
