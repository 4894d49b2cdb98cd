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
export { GITHUB_API_VERSION, GITHUB_BASE_URL, GITHUB_FUNCTION, GITHUB_TOKEN_SECRET, type GitHubOptions, type GitHubParams, githubTool } from './github';
export { GOOGLE_BASE_URL, GOOGLE_FUNCTION, GOOGLE_KEY_SECRET, type GoogleOptions, type GoogleParams, googleTool } from './google';
export { SEARXNG_FUNCTION, type SearxngParams, searxngTool } from './searxng';
export { MAX_WEB_RESULT_CHARS, type WebResult, webChunks, webSearchResult } from './web-results';
export { ARXIV_BASE_URL, ARXIV_FUNCTION, type ArxivOptions, type ArxivParams, arxivTool } from './arxiv';
export { NCBI_KEY_SECRET, PUBMED_BASE_URL, PUBMED_FUNCTION, type PubmedOptions, type PubmedParams, pubmedTool } from './pubmed';
export { WIKIPEDIA_BASE_URL, WIKIPEDIA_FUNCTION, type WikipediaOptions, type WikipediaParams, wikipediaTool } from './wikipedia';
export {
  CRAWLER_DESCRIPTION,
  CRAWLER_FUNCTION,
  CRAWLER_MAX_CONTENT_CHARS,
  CRAWLER_MAX_PAGE_BYTES,
  CRAWLER_TIMEOUT_MS,
  type CrawlerExtractType,
  type CrawlerParams,
  crawlerTool,
} from './crawler';
export {
  EMAIL_DESCRIPTION,
  EMAIL_FUNCTION,
  EMAIL_MAX_RECIPIENTS,
  EMAIL_TIMEOUT_MS,
  type EmailOptions,
  type EmailParams,
  emailTool,
  SMTP_PASSWORD_SECRET,
  SMTP_PORTS,
  type SmtpPortPolicy,
  type SmtpTlsMode,
} from './email';
export { SUB_AGENT_TIMEOUT_MS, subAgentTool, type SubAgentHost } from './sub-agent';
export * from './types';
export { customHeaderSchema, type McpEntry, mcpEntrySchema, McpSessions, modelName, type NamedTool } from './mcp';
