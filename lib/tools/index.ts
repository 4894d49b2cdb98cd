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
