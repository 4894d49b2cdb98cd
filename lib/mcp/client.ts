/**
 * Speaks MCP to tenants' servers with the official SDK (`@modelcontextprotocol/sdk`, loaded on
 * the first session, so runs without MCP never load it): streamable HTTP or SSE per
 * `server_type`, every request through the guarded fetch (lib/outbound/guarded-fetch: each hop
 * checked by the SSRF guard, the socket pinned to the checked address). The SDK's own redirect
 * policy stays on: it follows a redirect only within the server's origin (so headers carrying
 * credentials never reach another host), each hop through the guarded fetch again.
 *
 * Connecting, listing and closing are bounded by `timeoutMs` on the injectable timer; a tool
 * call by its caller's signal (lib/tools/call gives it the tool's timeout), or its own
 * `timeoutMs`. Failures come out as the tool error classes (lib/tools/errors), named after the
 * server, never its URL's path or a header's value: a refused connection, a 5xx, 429 or a
 * timeout is a `ToolTransientError`; a refusal of the guard (code `ssrf_blocked`), a 4xx or a
 * protocol error a `ToolError`. Secret values are redacted from errors and from tool results.
 *
 * @example
 *   const connector = createMcpConnector({ guard });
 *   const session = await connector.open(server, { secret, signal });
 *   try {
 *     const tools = await session.listTools();
 *     const { text } = await session.callTool('add', { a: 1, b: 2 }, { signal });
 *   } finally {
 *     await session.close();
 *   }
 */
import { isTransientStatus } from '../llm/errors';
import { createGuardedFetch, type FetchTimer, type GuardedFetch } from '../outbound/guarded-fetch';
import { OutboundError } from '../outbound/request';
import { SsrfBlockedError, type SsrfGuard } from '../outbound/ssrf';
import { redactSecrets } from '../secrets/redact';
import { ToolError, ToolTransientError } from '../tools/errors';
import { mcpHeaders } from './headers';
import type { McpCallResult, McpConnector, McpServerConnection, McpSession, McpSessionOptions, McpToolMeta, RunMcp } from './types';

export interface McpConnectorDeps {
  guard: SsrfGuard;
  /** Connecting, listing tools, closing. @default DEFAULT_MCP_TIMEOUT_MS (10 s) */
  timeoutMs?: number;
  /** Injectable so tests never wait. @default setTimeout-based */
  timer?: FetchTimer;
  /** @default 16 MiB */
  maxResponseBytes?: number;
}

export const DEFAULT_MCP_TIMEOUT_MS = 10_000;
/** Pages of `tools/list` read at most: a server that pages forever is cut off. */
export const MAX_TOOL_PAGES = 20;
const CLIENT_INFO = { name: 'easel', version: '0.1.0' };
const MAX_TIMER_MS = 2 ** 31 - 1;

type Sdk = typeof import('./sdk');
let sdkLoading: Promise<Sdk> | undefined;
const sdk = () =>
  (sdkLoading ??= import('./sdk').catch((error: unknown) => {
    sdkLoading = undefined; // a failed load is tried again by the next session
    throw error;
  }));

const systemTimer: FetchTimer = (ms, onTimeout) => {
  const timer = setTimeout(onTimeout, Math.min(ms, MAX_TIMER_MS));
  return () => clearTimeout(timer);
};

export function createMcpConnector(deps: McpConnectorDeps): McpConnector {
  const timeoutMs = deps.timeoutMs ?? DEFAULT_MCP_TIMEOUT_MS;
  const timer = deps.timer ?? systemTimer;
  return {
    async open(server, options) {
      const { headers, secrets } = await mcpHeaders(server, options.headers, options.secret);
      const mcp = await sdk();
      const failures = trackFailures(createGuardedFetch({ guard: deps.guard, timer, ...(deps.maxResponseBytes ? { maxResponseBytes: deps.maxResponseBytes } : {}) }));
      const limit = options.timeoutMs ?? timeoutMs;
      const fail = (error: unknown): never => {
        throw classify(error, failures.last, server, secrets, mcp);
      };
      const within = <T>(what: string, ms: number | undefined, signal: AbortSignal | undefined, run: (signal: AbortSignal, ms?: number) => Promise<T>) => {
        failures.last = undefined;
        return bounded(server, what, ms, [options.signal, signal], timer, run).catch(fail);
      };

      let url: URL;
      try {
        url = new URL(server.url.trim());
      } catch {
        throw new ToolError(`MCP server "${server.name}": its URL is not valid`);
      }
      const transportOptions = { fetch: failures.fetch, requestInit: { headers } };
      const transport =
        server.server_type === 'sse'
          ? new mcp.SSEClientTransport(url, transportOptions)
          : // a session lives for one Agent invocation: a dropped listening stream is not reopened
            new mcp.StreamableHTTPClientTransport(url, { ...transportOptions, reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1 } });
      const client = new mcp.Client(CLIENT_INFO, { capabilities: {} });
      // failures of the listening stream surface in the next request; nothing to do here
      client.onerror = () => {};
      const shut = async () => {
        try {
          await client.close();
        } catch {
          // closing is best effort: the sockets go with the transport's abort
        }
      };

      try {
        await within('connecting', limit, undefined, (signal, ms) => client.connect(transport, { signal, ...(ms ? { timeout: ms } : {}) }));
      } catch (error) {
        await shut();
        throw error;
      }

      let closed = false;
      const session: McpSession = {
        async listTools() {
          const cached = cachedTools(server);
          const tools: McpToolMeta[] = [];
          let cursor: string | undefined;
          for (let page = 0; page < MAX_TOOL_PAGES; page++) {
            const result = await within('listing its tools', limit, undefined, (signal, ms) =>
              client.listTools(cursor ? { cursor } : undefined, { signal, ...(ms ? { timeout: ms } : {}) }),
            );
            for (const tool of result.tools) {
              tools.push({ ...tool, inputSchema: tool.inputSchema as Record<string, unknown>, enabled: cached[tool.name]?.enabled !== false });
            }
            cursor = result.nextCursor;
            if (!cursor) break;
          }
          return redactSecrets(tools, secrets);
        },
        async callTool(name, args, callOptions) {
          const result = await within(`calling ${name}`, callOptions.timeoutMs, callOptions.signal, (signal, ms) =>
            client.callTool({ name, arguments: args }, undefined, { signal, ...(ms ? { timeout: ms } : {}) }),
          );
          return redactSecrets(callResult(result as { content?: unknown; isError?: unknown }), secrets);
        },
        async close() {
          if (closed) return;
          closed = true;
          // a streamable HTTP session is ended on the server too, as the spec asks of clients
          if ('terminateSession' in transport && transport.sessionId !== undefined) {
            await bounded(server, 'closing', limit, [], timer, () => transport.terminateSession()).catch(() => {});
          }
          await shut();
        },
      };
      return session;
    },
  };
}

/** RAGFlow's reading of a `tools/call` result: the first text content, or why there is none. */
export function callResult(result: { content?: unknown; isError?: unknown }): McpCallResult {
  const content = Array.isArray(result.content) ? (result.content as unknown[]) : [];
  const isError = result.isError === true;
  if (isError) return { isError, text: `MCP server error: ${content.map(blockText).join('\n')}`, content };
  const first = content[0] as { type?: unknown; text?: unknown } | undefined;
  if (!first) return { isError, text: 'MCP server returned empty content.', content };
  if (first.type === 'text' && typeof first.text === 'string') return { isError, text: first.text, content };
  return { isError, text: `Unsupported content type ${String(first.type)}`, content };
}

function blockText(block: unknown): string {
  const b = block as { type?: unknown; text?: unknown };
  return b?.type === 'text' && typeof b.text === 'string' ? b.text : `[${String(b?.type)}]`;
}

/** The registry's switches per tool, kept with the tools it cached (`variables.tools`). */
function cachedTools(server: McpServerConnection): Record<string, { enabled?: unknown }> {
  const tools = server.variables?.tools;
  return tools && typeof tools === 'object' && !Array.isArray(tools) ? (tools as Record<string, { enabled?: unknown }>) : {};
}

/** The guarded fetch, remembering its last failure: the SDK keeps only a message of some. */
function trackFailures(fetch: GuardedFetch) {
  const tracked = {
    last: undefined as unknown,
    fetch: (async (input: string | URL | Request, init?: RequestInit) => {
      try {
        return await fetch(input, init);
      } catch (error) {
        tracked.last = error;
        throw error;
      }
    }) as GuardedFetch,
  };
  return tracked;
}

/**
 * Runs `run` under a signal that ends at `ms` (on `timer`) or with any of `signals`, and
 * rejects as soon as it does, even if `run` does not listen (the SSE transport's start).
 */
async function bounded<T>(
  server: McpServerConnection,
  what: string,
  ms: number | undefined,
  signals: readonly (AbortSignal | undefined)[],
  timer: FetchTimer,
  run: (signal: AbortSignal, ms?: number) => Promise<T>,
): Promise<T> {
  const controller = new AbortController();
  const cancel = ms ? timer(ms, () => controller.abort(new ToolTransientError(`MCP server "${server.name}": no answer ${what} within ${ms} ms`))) : () => {};
  const signal = AbortSignal.any([controller.signal, ...signals.filter((s): s is AbortSignal => s !== undefined)]);
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([run(signal, ms), aborted]);
  } catch (error) {
    throw signal.aborted ? signal.reason : error;
  } finally {
    cancel();
    signal.removeEventListener('abort', onAbort);
  }
}

/** Any failure of a session as a tool error: transient when trying again may help. */
function classify(error: unknown, fetchFailure: unknown, server: McpServerConnection, secrets: readonly string[], mcp: Sdk): Error {
  // a URL in a message keeps its origin only: a path or query may carry a key
  const named = (message: string) => redactSecrets(`MCP server "${server.name}": ${message.replace(/\b(https?:\/\/[^/\s?#]+)[^\s)]*/g, '$1')}`, secrets);
  // an abort (the call's timeout, the turn's cancel) is already what the caller expects
  if (error instanceof ToolError || error instanceof ToolTransientError) return error;
  const cause = error instanceof SsrfBlockedError || error instanceof OutboundError ? error : (fetchFailure ?? error);
  if (cause instanceof SsrfBlockedError) return new ToolError(named(cause.message), { code: 'ssrf_blocked', cause });
  if (cause instanceof OutboundError) {
    return cause.transient ? new ToolTransientError(named(cause.message), { cause }) : new ToolError(named(cause.message), { cause });
  }
  if (error instanceof mcp.McpError) {
    const transient = error.code === mcp.ErrorCode.RequestTimeout || error.code === mcp.ErrorCode.ConnectionClosed;
    const message = named(error.message);
    return transient ? new ToolTransientError(message, { cause: error }) : new ToolError(message, { cause: error });
  }
  // the SDK follows redirects within the server's origin only
  if (error instanceof Error && /Redirect (?:to .*)?not followed/.test(error.message)) {
    return new ToolError(named('the server redirected to another origin, which is not followed (headers may carry credentials)'), { cause: error });
  }
  const status = httpStatus(error, mcp);
  if (status !== undefined) {
    const message = named(`the server answered ${status}`);
    return isTransientStatus(status) ? new ToolTransientError(message, { cause: error }) : new ToolError(message, { cause: error });
  }
  return new ToolError(named(`the server does not speak MCP as expected (${error instanceof Error ? error.message : String(error)})`), { cause: error });
}

/** The HTTP status a transport failed on, when it says. */
function httpStatus(error: unknown, mcp: Sdk): number | undefined {
  const code = error instanceof mcp.StreamableHTTPError || error instanceof mcp.SseError ? error.code : undefined;
  if (typeof code === 'number' && code >= 100 && code <= 599) return code;
  // the SSE transport's POSTs fail with a plain Error naming the status
  const named = error instanceof Error ? /\(HTTP (\d{3})\)/.exec(error.message)?.[1] : undefined;
  return named ? Number(named) : undefined;
}

export interface RunMcpDeps {
  /** The tenant's server by id, or undefined (deleted, another tenant's). */
  lookup(id: string): Promise<McpServerConnection | undefined>;
  connector: McpConnector;
  /** The tenant's secrets, for `{secret.NAME}` in headers. */
  secret: McpSessionOptions['secret'];
}

/** One tenant's MCP servers as a run sees them (`services({ mcp })`). */
export function createRunMcp(deps: RunMcpDeps): RunMcp {
  return {
    server: (id) => deps.lookup(id),
    open: (server, options) => deps.connector.open(server, { ...options, secret: deps.secret }),
  };
}
