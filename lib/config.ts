/**
 * Configuration from the environment: the only module that reads `process.env`, used by
 * `functions/` and `lib/local`. Every variable starts with `EASEL_` and is documented in
 * docs/configuration.md; an empty value counts as unset. Problems are reported together,
 * naming the variable.
 */
import { DEFAULT_STEP_BUDGET_RUN, DEFAULT_STEP_BUDGET_TURN } from './canvas/canvas';
import { checkLlmSettings, type LlmSettings } from './llm/models';
import { DEFAULT_RETRY } from './llm/retry';
import { parseAllowList } from './outbound/ssrf';
import { TOOL_SERVICES, type ToolService } from './tools/service-names';
import type { QuotaLimits, QuotaSettings } from './turns/quotas';

export interface QueueConfig {
  /** The SQS queue of async and queued turns (EASEL_TURN_QUEUE_URL); unset: async turns are refused (npm start runs an in-process queue). */
  url?: string;
  /**
   * How long an async turn's claim is kept with no worker alive (EASEL_ASYNC_LEASE_MS): while
   * its message waits, and after a worker died. A live worker pushes it ahead with every
   * heartbeat. @default 20 min with an SQS queue; 2 min without one (npm start's in-process
   * queue dies with its process: nothing would come back for the turn)
   */
  asyncLeaseMs: number;
  /**
   * A worker suspends its async turn at the first checkpoint this close to the end of its
   * invocation, and queues it again for the next one (EASEL_WORKER_MARGIN_MS).
   */
  workerMarginMs: number;
}

export interface StoreConfig {
  /** Unset: the AWS default endpoint (on Lambda) or a launched DynamoDB Local (locally). */
  endpoint?: string;
  table: string;
  sessionTtlSeconds: number;
  /** How long a replay of recorded runs and its results are kept (EASEL_REPLAY_TTL_DAYS). */
  replayTtlSeconds: number;
  /** How long a turn's claim holds before another request may take the turn over. */
  leaseMs: number;
  /** How stale a listing's turn and updated_at may get when nothing listed changed. */
  listingRefreshMs: number;
}

export interface HttpConfig {
  maxBodyBytes: number;
  maxResponseBytes: number;
  maxJsonDepth: number;
  /** Largest value of one form field or query. */
  maxFieldBytes: number;
  /** Components allowed in an uploaded DSL. */
  maxDslNodes: number;
  /** Uploaded files (Lambda's 6 MB request cap and base64 keep this at 4 MB at most there). */
  maxFileBytes: number;
  /** How long a verified API key is trusted without asking the store again (revocation delay). */
  authCacheMs: number;
  /** Browser origins allowed to call the API cross-origin (EASEL_CORS_ORIGINS; `*` for any). */
  corsOrigins: string[];
  /** CSP `frame-ancestors` sources of the playground page (EASEL_FRAME_ANCESTORS). */
  frameAncestors: string[];
  /**
   * Proxies in front of the app that append to X-Forwarded-For (EASEL_QUOTA_TRUSTED_PROXY_HOPS):
   * the client address is the entry this many from the right. 0: the header is ignored.
   */
  trustedProxyHops: number;
  /**
   * The API's public base URL, that webhook URLs are built on (EASEL_PUBLIC_URL): on AWS the
   * HTTP API's URL or the Function URL (or a custom domain in front of either); under npm start
   * the local server's URL unless set. No trailing slash.
   */
  publicUrl?: string;
  /** Where form links point (the hosted form page), EASEL_FORM_BASE_URL; default: `publicUrl`. */
  formBaseUrl?: string;
}

export interface SecretsConfig {
  /** `{secret.NAME}` values given directly (EASEL_SECRET_<NAME>); locally. */
  values: Record<string, string>;
  /** `{secret.NAME}` -> an SSM parameter name (EASEL_SSM_SECRETS), read at run time on AWS. */
  parameters: Record<string, string>;
  /** The SSM parameter holding the LLM API key (EASEL_LLM_API_KEY_PARAMETER). */
  llmApiKeyParameter?: string;
  /** The SSM SecureString holding the master key ring (EASEL_MASTER_KEY_PARAMETER); unset: `.easel/master-key.json`. */
  masterKeyParameter?: string;
  /** Without a parameter: the local key file (EASEL_MASTER_KEY_FILE); unset: `.easel/master-key.json` in the working directory. */
  masterKeyFile?: string;
  /** Tenant id -> the names among `values`/`parameters` its runs may use (EASEL_OPERATOR_SECRETS_FOR_TENANTS); others resolve none. */
  operatorForTenants: Record<string, string[]>;
}

/** Where `bedrock` knowledge bases are searched (lib/knowledge/bedrock.ts). */
export interface BedrockKnowledgeConfig {
  /** The region of knowledge bases whose settings name none: the deployment's (AWS_REGION), else EASEL_BEDROCK_REGION. @default us-east-1 */
  region: string;
  /** A Bedrock Agent Runtime endpoint for every region (EASEL_BEDROCK_AGENT_ENDPOINT): VPC endpoints, proxies, tests. */
  endpoint?: string;
}

/** The services built-in Agent tools call (lib/tools). */
export interface ToolsConfig {
  /**
   * The base URLs the operator set (`EASEL_TOOL_TAVILY_BASE_URL`, ...): a proxy, a stand-in; no
   * trailing slash. A service left out is called at its public address (each tool's default).
   */
  baseUrls: Partial<Record<ToolService, string>>;
}

export interface EaselConfig {
  store: StoreConfig;
  queue: QueueConfig;
  http: HttpConfig;
  secrets: SecretsConfig;
  llm: LlmSettings;
  bedrockKnowledge: BedrockKnowledgeConfig;
  tools: ToolsConfig;
  /** Hosts and CIDRs tenant URLs may reach despite the SSRF guard. */
  ssrfAllow: string[];
  stepBudgetTurn: number;
  stepBudgetRun: number;
  /** Turn and run-start limits (EASEL_QUOTA_*); absent when none is set: no counter is ever read or written. */
  quotas?: QuotaSettings;
  /**
   * A Lambda invocation aborts the turns still running this long before it would time out:
   * they commit nothing and give their claim back (503 to an HTTP client; the worker queues
   * its turn again) (EASEL_DEADLINE_MARGIN_MS). @default 3000
   */
  deadlineMarginMs: number;
}

/** Without an SQS queue (npm start), an async turn whose worker died is free again after this long. */
export const LOCAL_ASYNC_LEASE_MS = 120_000;
/** With one, the claim waits for SQS to deliver the message again (its visibility timeout is 16 min). */
export const QUEUE_ASYNC_LEASE_MS = 20 * 60_000;

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/** Only what the store needs (the stream consumer reads no more than this). */
export function readStoreConfig(env: Env = process.env): StoreConfig {
  const problems: string[] = [];
  const store = storeConfig(reader(env, problems));
  if (problems.length > 0) throw new ConfigError(problems);
  return store;
}

function storeConfig(r: Reader): StoreConfig {
  const endpoint = r.get('EASEL_DYNAMODB_ENDPOINT');
  return {
    ...(endpoint ? { endpoint } : {}),
    table: r.get('EASEL_DYNAMODB_TABLE') ?? 'easel-local',
    sessionTtlSeconds: r.integer('EASEL_SESSION_TTL_DAYS', 30, 1, 3650) * 86_400,
    replayTtlSeconds: r.integer('EASEL_REPLAY_TTL_DAYS', 7, 1, 90) * 86_400,
    leaseMs: r.integer('EASEL_TURN_LEASE_MS', 60_000, 1000, 3_600_000),
    listingRefreshMs: r.integer('EASEL_LISTING_REFRESH_MS', 60_000, 0, 86_400_000),
  };
}

interface Reader {
  get(name: string): string | undefined;
  integer(name: string, fallback: number, min: number, max: number): number;
}

function reader(env: Env, problems: string[]): Reader {
  const get = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value === '' ? undefined : value;
  };
  return {
    get,
    integer(name, fallback, min, max) {
      const raw = get(name);
      if (raw === undefined) return fallback;
      const n = Number(raw);
      if (!Number.isInteger(n) || n < min || n > max) {
        problems.push(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
        return fallback;
      }
      return n;
    },
  };
}

export interface LocalConfig {
  /** The local server's port. */
  port: number;
  /** Registered as an admin key of the tenant `local` (any string of 16+ characters). */
  apiKey?: string;
  /** How often the in-process pump fires due form timers (EASEL_PUMP_INTERVAL_MS). */
  pumpMs: number;
  /**
   * On SIGTERM/SIGINT, how long turns in flight get to finish before they are aborted: those
   * commit nothing, give their claim back and answer 503 (EASEL_SHUTDOWN_GRACE_MS). @default 5000
   */
  shutdownGraceMs: number;
}

/** `npm start`'s own settings: PORT, EASEL_API_KEY, the pump's interval and the shutdown grace period. */
export function readLocalConfig(env: Env = process.env): LocalConfig {
  const problems: string[] = [];
  const r = reader(env, problems);
  const port = r.integer('PORT', 3000, 0, 65_535);
  const apiKey = r.get('EASEL_API_KEY');
  const pumpMs = r.integer('EASEL_PUMP_INTERVAL_MS', 5_000, 200, 600_000);
  const shutdownGraceMs = r.integer('EASEL_SHUTDOWN_GRACE_MS', 5_000, 0, 3_600_000);
  if (problems.length > 0) throw new ConfigError(problems);
  return { port, pumpMs, shutdownGraceMs, ...(apiKey ? { apiKey } : {}) };
}

export interface CliConfig {
  baseUrl: string;
  apiKey?: string;
}

/** The CLI's settings: EASEL_BASE_URL and EASEL_API_KEY. */
export function readCliConfig(env: Env = process.env): CliConfig {
  const r = reader(env, []);
  const baseUrl = (r.get('EASEL_BASE_URL') ?? 'http://127.0.0.1:3000').replace(/\/+$/, '');
  if (!/^https?:\/\/\S+$/.test(baseUrl)) throw new ConfigError([`EASEL_BASE_URL must be an http(s) URL, got "${baseUrl}"`]);
  const apiKey = r.get('EASEL_API_KEY');
  return { baseUrl, ...(apiKey ? { apiKey } : {}) };
}

/** Each limit's variable, and its name in EASEL_QUOTA_TENANTS. */
const QUOTA_LIMITS: readonly [keyof QuotaLimits, string, string][] = [
  ['tenantTurnsPerMinute', 'EASEL_QUOTA_TENANT_TURNS_PER_MINUTE', 'tenant_turns_per_minute'],
  ['tenantTokensPerDay', 'EASEL_QUOTA_TENANT_TOKENS_PER_DAY', 'tenant_tokens_per_day'],
  ['userTurnsPerMinute', 'EASEL_QUOTA_USER_TURNS_PER_MINUTE', 'user_turns_per_minute'],
  ['userTokensPerDay', 'EASEL_QUOTA_USER_TOKENS_PER_DAY', 'user_tokens_per_day'],
  ['runsPerKeyPerMinute', 'EASEL_QUOTA_RUNS_PER_KEY_PER_MINUTE', 'runs_per_key_per_minute'],
  ['runsPerAddressPerMinute', 'EASEL_QUOTA_RUNS_PER_ADDRESS_PER_MINUTE', 'runs_per_address_per_minute'],
];
const MAX_QUOTA = 1e12;

/** EASEL_QUOTA_*: undefined when no limit is set anywhere (quotas off). */
function quotaConfig(r: Reader, problems: string[]): QuotaSettings | undefined {
  const limits: QuotaLimits = {};
  for (const [field, variable] of QUOTA_LIMITS) {
    const n = r.integer(variable, 0, 0, MAX_QUOTA);
    if (n > 0) limits[field] = n;
  }
  const tenants: Record<string, QuotaLimits> = {};
  const raw = r.get('EASEL_QUOTA_TENANTS');
  if (raw !== undefined) {
    const names = QUOTA_LIMITS.map(([, , name]) => name);
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      problems.push(`EASEL_QUOTA_TENANTS must be a JSON object mapping a tenant id to its limits, e.g. {"acme": {"tenant_turns_per_minute": 600, "user_tokens_per_day": 0}} (0 lifts a limit); limits: ${names.join(', ')}`);
    } else {
      for (const [tenant, given] of Object.entries(parsed)) {
        if (typeof given !== 'object' || given === null || Array.isArray(given)) {
          problems.push(`EASEL_QUOTA_TENANTS: the limits of "${tenant}" must be an object, e.g. {"tenant_turns_per_minute": 600}`);
          continue;
        }
        const own: QuotaLimits = {};
        for (const [name, value] of Object.entries(given as Record<string, unknown>)) {
          const field = QUOTA_LIMITS.find(([, , n]) => n === name)?.[0];
          if (!field) problems.push(`EASEL_QUOTA_TENANTS: "${tenant}" names an unknown limit "${name}" (known: ${names.join(', ')})`);
          else if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_QUOTA) problems.push(`EASEL_QUOTA_TENANTS: "${tenant}".${name} must be an integer from 0 to ${MAX_QUOTA}, got ${JSON.stringify(value)}`);
          else own[field] = value;
        }
        tenants[tenant] = own;
      }
    }
  }
  // unset: the default of lib/turns/quotas.ts
  const shards = r.get('EASEL_QUOTA_SHARDS') === undefined ? undefined : r.integer('EASEL_QUOTA_SHARDS', 1, 1, 64);
  const anyLimit = (l: QuotaLimits) => Object.values(l).some((v) => v !== undefined && v > 0);
  if (!anyLimit(limits) && !Object.values(tenants).some(anyLimit)) return undefined;
  return { limits, ...(Object.keys(tenants).length > 0 ? { tenants } : {}), ...(shards !== undefined ? { shards } : {}) };
}

function commaList(raw: string | undefined): string[] {
  return (raw ?? '').split(',').map((s) => s.trim()).filter(Boolean);
}

/** `https://app.example.com`, `http://localhost:8080` (scheme, host, port; no path) or `*`. */
function corsOrigins(raw: string | undefined, problems: string[]): string[] {
  const origins = commaList(raw).map((o) => o.replace(/\/+$/, ''));
  for (const o of origins) {
    if (o !== '*' && !/^https?:\/\/[A-Za-z0-9.-]+(:\d{1,5})?$|^https?:\/\/\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(o)) {
      problems.push(`EASEL_CORS_ORIGINS: "${o}" is not an origin (scheme://host[:port], or *)`);
    }
  }
  return origins;
}

/** `https://abc123.execute-api.eu-west-1.amazonaws.com`, `https://api.example.com/easel`: http(s), no query or fragment. */
function publicUrl(raw: string | undefined, problems: string[]): { publicUrl?: string } {
  const url = baseUrlSetting('EASEL_PUBLIC_URL', raw, problems, { what: "the API's http(s) base URL", example: 'https://abc123.execute-api.us-east-1.amazonaws.com' });
  return url === undefined ? {} : { publicUrl: url };
}

/** Where form links' pages are served (the playground's pages); default: the public URL. */
function formBaseUrl(raw: string | undefined, problems: string[]): { formBaseUrl?: string } {
  const url = baseUrlSetting('EASEL_FORM_BASE_URL', raw, problems, { what: 'the http(s) base URL of the hosted form pages', example: 'https://forms.example.com' });
  return url === undefined ? {} : { formBaseUrl: url };
}

/** An operator's http(s) base URL (no query, fragment or credentials), without a trailing slash. */
function baseUrlSetting(
  name: string,
  raw: string | undefined,
  problems: string[],
  said: { what: string; example: string } = { what: 'an http(s) base URL', example: 'https://proxy.internal/v1' },
): string | undefined {
  if (raw === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol) || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '' || /\s/.test(raw)) {
    problems.push(`${name} must be ${said.what} without query, fragment or credentials (e.g. ${said.example}), got "${raw}"`);
    return undefined;
  }
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '');
}

/** CSP source expressions: 'self', 'none' (alone), https:, https://*.example.com:443, *. */
function frameAncestors(raw: string | undefined, problems: string[]): string[] {
  const sources = commaList(raw).map((s) => (s === 'self' || s === 'none' ? `'${s}'` : s));
  if (sources.length === 0) return ["'self'"];
  for (const s of sources) {
    const ok = s === "'self'" || s === "'none'" || s === '*' || /^https?:$/.test(s)
      || /^(https?:\/\/)?(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:(\d{1,5}|\*))?$/.test(s);
    if (!ok) problems.push(`EASEL_FRAME_ANCESTORS: "${s}" is not a CSP source ('self', 'none', https:, https://host[:port], https://*.example.com)`);
  }
  if (sources.includes("'none'") && sources.length > 1) problems.push("EASEL_FRAME_ANCESTORS: 'none' cannot be combined with other sources");
  return sources;
}

export function readConfig(env: Env = process.env): EaselConfig {
  const problems: string[] = [];
  const r = reader(env, problems);
  const { get, integer } = r;
  const baseUrl = get('EASEL_LLM_BASE_URL');
  if (baseUrl !== undefined && !/^https?:\/\/[^\s]+$/.test(baseUrl)) {
    problems.push('EASEL_LLM_BASE_URL must be an http(s) URL');
  }
  let models: Record<string, string> = {};
  const modelsRaw = get('EASEL_LLM_MODELS');
  if (modelsRaw !== undefined) {
    try {
      const parsed: unknown = JSON.parse(modelsRaw);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || !Object.values(parsed).every((v) => typeof v === 'string')) {
        throw new Error('not a map');
      }
      models = parsed as Record<string, string>;
    } catch {
      problems.push('EASEL_LLM_MODELS must be a JSON object mapping llm_id to a model, e.g. {"gpt-4o@OpenAI": "openai:gpt-4o"}');
    }
  }
  const llm: LlmSettings = {
    ...(baseUrl ? { openai: { baseUrl, ...(get('EASEL_LLM_API_KEY') ? { apiKey: get('EASEL_LLM_API_KEY') } : {}) } } : {}),
    bedrock: {
      region: get('EASEL_BEDROCK_REGION') ?? get('AWS_REGION') ?? 'us-east-1',
      ...(get('EASEL_BEDROCK_ENDPOINT') ? { endpoint: get('EASEL_BEDROCK_ENDPOINT') } : {}),
    },
    defaultModel: get('EASEL_LLM_DEFAULT_MODEL') ?? 'echo',
    models,
    timeoutMs: integer('EASEL_LLM_TIMEOUT_MS', 120_000, 1000, 900_000),
    retry: { ...DEFAULT_RETRY, attempts: integer('EASEL_LLM_MAX_ATTEMPTS', DEFAULT_RETRY.attempts, 1, 10) },
  };
  if (baseUrl && !get('EASEL_LLM_DEFAULT_MODEL')) {
    problems.push('EASEL_LLM_DEFAULT_MODEL must name a model (e.g. openai:gpt-4o-mini) when EASEL_LLM_BASE_URL is set');
  }
  problems.push(...checkLlmSettings(llm));
  const agentEndpoint = get('EASEL_BEDROCK_AGENT_ENDPOINT');
  if (agentEndpoint !== undefined && !/^https?:\/\/[^\s]+$/.test(agentEndpoint)) problems.push('EASEL_BEDROCK_AGENT_ENDPOINT must be an http(s) URL');
  const bedrockKnowledge: BedrockKnowledgeConfig = {
    region: get('AWS_REGION') ?? get('EASEL_BEDROCK_REGION') ?? 'us-east-1',
    ...(agentEndpoint ? { endpoint: agentEndpoint } : {}),
  };

  const tools: ToolsConfig = { baseUrls: {} };
  for (const service of TOOL_SERVICES) {
    const name = `EASEL_TOOL_${service}_BASE_URL`;
    const url = baseUrlSetting(name, get(name), problems);
    if (url !== undefined) tools.baseUrls[service] = url;
  }

  let ssrfAllow: string[] = [];
  try {
    ssrfAllow = parseAllowList(get('EASEL_SSRF_ALLOW'));
  } catch (error) {
    problems.push(`EASEL_SSRF_ALLOW: ${(error as Error).message.replace(/^SSRF allow list:\s*/, '')}`);
  }

  const secrets: SecretsConfig = { values: {}, parameters: {}, operatorForTenants: {} };
  for (const [name, value] of Object.entries(env)) {
    const m = /^EASEL_SECRET_([A-Za-z0-9_]+)$/.exec(name);
    if (m?.[1] && value) secrets.values[m[1]] = value;
  }
  const ssmSecrets = get('EASEL_SSM_SECRETS');
  if (ssmSecrets !== undefined) {
    try {
      const parsed: unknown = JSON.parse(ssmSecrets);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || !Object.values(parsed).every((v) => typeof v === 'string')) throw new Error('not a map');
      secrets.parameters = parsed as Record<string, string>;
    } catch {
      problems.push('EASEL_SSM_SECRETS must be a JSON object mapping secret names to SSM parameter names');
    }
  }
  const keyParameter = get('EASEL_LLM_API_KEY_PARAMETER');
  if (keyParameter) secrets.llmApiKeyParameter = keyParameter;
  const masterKeyParameter = get('EASEL_MASTER_KEY_PARAMETER');
  if (masterKeyParameter) secrets.masterKeyParameter = masterKeyParameter;
  const masterKeyFile = get('EASEL_MASTER_KEY_FILE');
  if (masterKeyFile) secrets.masterKeyFile = masterKeyFile;
  const forTenants = get('EASEL_OPERATOR_SECRETS_FOR_TENANTS');
  if (forTenants !== undefined) {
    try {
      const parsed: unknown = JSON.parse(forTenants);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not a map');
      for (const names of Object.values(parsed)) {
        if (!Array.isArray(names) || !names.every((n) => typeof n === 'string' && /^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(n))) throw new Error('not a list of names');
      }
      secrets.operatorForTenants = parsed as Record<string, string[]>;
    } catch {
      problems.push('EASEL_OPERATOR_SECRETS_FOR_TENANTS must be a JSON object mapping a tenant id to the operator secret names it may use, e.g. {"acme": ["SHARED_CRM_TOKEN"]}');
    }
  }

  const queueUrl = get('EASEL_TURN_QUEUE_URL');
  const config: EaselConfig = {
    store: storeConfig(r),
    queue: {
      ...(queueUrl ? { url: queueUrl } : {}),
      asyncLeaseMs: integer('EASEL_ASYNC_LEASE_MS', queueUrl ? QUEUE_ASYNC_LEASE_MS : LOCAL_ASYNC_LEASE_MS, 10_000, 3 * 3_600_000),
      workerMarginMs: integer('EASEL_WORKER_MARGIN_MS', 120_000, 1_000, 600_000),
    },
    http: {
      maxBodyBytes: integer('EASEL_MAX_BODY_BYTES', 1024 * 1024, 1024, 6 * 1024 * 1024),
      maxResponseBytes: integer('EASEL_MAX_RESPONSE_BYTES', 256 * 1024, 1024, 6 * 1024 * 1024),
      maxJsonDepth: integer('EASEL_MAX_JSON_DEPTH', 64, 4, 512),
      maxFieldBytes: integer('EASEL_MAX_FIELD_BYTES', 64 * 1024, 64, 1024 * 1024),
      maxDslNodes: integer('EASEL_MAX_DSL_NODES', 500, 1, 5000),
      maxFileBytes: integer('EASEL_MAX_FILE_BYTES', 4 * 1024 * 1024, 1024, 4 * 1024 * 1024),
      authCacheMs: integer('EASEL_AUTH_CACHE_MS', 30_000, 0, 60_000),
      corsOrigins: corsOrigins(get('EASEL_CORS_ORIGINS'), problems),
      frameAncestors: frameAncestors(get('EASEL_FRAME_ANCESTORS'), problems),
      trustedProxyHops: integer('EASEL_QUOTA_TRUSTED_PROXY_HOPS', 0, 0, 10),
      ...publicUrl(get('EASEL_PUBLIC_URL'), problems),
      ...formBaseUrl(get('EASEL_FORM_BASE_URL'), problems),
    },
    secrets,
    llm,
    bedrockKnowledge,
    tools,
    ssrfAllow,
    stepBudgetTurn: integer('EASEL_STEP_BUDGET_TURN', DEFAULT_STEP_BUDGET_TURN, 1, 1_000_000),
    stepBudgetRun: integer('EASEL_STEP_BUDGET_RUN', DEFAULT_STEP_BUDGET_RUN, 1, 10_000_000),
    deadlineMarginMs: integer('EASEL_DEADLINE_MARGIN_MS', 3_000, 100, 600_000),
  };
  const quotas = quotaConfig(r, problems);
  if (quotas) config.quotas = quotas;
  if (problems.length > 0) throw new ConfigError([...new Set(problems)]);
  return config;
}
