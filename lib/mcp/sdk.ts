/**
 * The parts of the MCP SDK the connector uses, in one module that lib/mcp/client imports on
 * the first session only: runs without MCP never load the SDK.
 */
export { Client } from '@modelcontextprotocol/sdk/client/index.js';
export { SSEClientTransport, SseError } from '@modelcontextprotocol/sdk/client/sse.js';
export { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
export { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
