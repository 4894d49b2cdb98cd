/**
 * The MCP connector every tenant's runs share: the SDK (loaded on a run's first MCP session)
 * behind the SSRF guard with the operator's allow list (EASEL_SSRF_ALLOW). A tenant's `RunMcp`
 * is `createRunMcp({ lookup, connector, secret })` with that tenant's registry and secrets,
 * handed to the engine as `EngineParts.mcp`.
 */
import { createMcpConnector } from '../mcp/client';
import type { McpConnector } from '../mcp/types';
import type { SsrfGuard } from '../outbound/ssrf';

export function buildMcpConnector(parts: { guard: SsrfGuard }): McpConnector {
  return createMcpConnector({ guard: parts.guard });
}
