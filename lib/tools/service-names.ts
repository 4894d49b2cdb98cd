/**
 * The public services built-in Agent tools call, by the name of their setting
 * (`EASEL_TOOL_<NAME>_BASE_URL`, read by lib/config). Services whose address is the tenant's
 * (SearXNG, SMTP, a crawled page, MCP servers) are in the workflow or the tenant's registry.
 * Its own module so the configuration reads no tool code.
 */
export const TOOL_SERVICES = ['TAVILY', 'WIKIPEDIA', 'GOOGLE', 'ARXIV', 'PUBMED', 'GITHUB'] as const;
export type ToolService = (typeof TOOL_SERVICES)[number];
