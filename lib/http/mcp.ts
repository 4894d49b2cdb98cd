/** What the native MCP server routes and RAGFlow's share: the registry (503 when the server has none). */
import { EaselError } from '../errors';
import type { McpRegistry } from '../mcp/registry';
import type { AppDeps } from './app';

export function mcpRegistryOf(deps: AppDeps): McpRegistry {
  if (!deps.mcp) throw new EaselError('unavailable', 'MCP servers are not configured on this server');
  return deps.mcp;
}
