/** The tool interface: what a tool is, how calls run, and the registry Agents take tools from. */
export * from './call';
export * from './errors';
export * from './params';
export * from './service-names';
export * from './web-service';
export * from './registry';
export { NOTHING_FOUND, RETRIEVAL_FUNCTION, retrievalTool, type RetrievalToolParams } from './retrieval';
export {
  TAVILY_BASE_URL,
  TAVILY_EXTRACT_FUNCTION,
  TAVILY_KEY_SECRET,
  TAVILY_SEARCH_FUNCTION,
  type TavilyExtractParams,
  type TavilyOptions,
  type TavilySearchParams,
  tavilyTools,
} from './tavily';
export { SUB_AGENT_TIMEOUT_MS, subAgentTool, type SubAgentHost } from './sub-agent';
export * from './types';
export { customHeaderSchema, type McpEntry, mcpEntrySchema, McpSessions, modelName, type NamedTool } from './mcp';
