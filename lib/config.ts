/**
 * Configuration from the environment: the only module that reads `process.env`, used by
 * `functions/` and `lib/local`. Every variable starts with `EASEL_` and is documented in the
 * README; an empty value counts as unset. Problems are reported together, naming the variable.
 */
import { DEFAULT_STEP_BUDGET_RUN, DEFAULT_STEP_BUDGET_TURN } from './canvas/canvas';
import { checkLlmSettings, type LlmSettings } from './llm/models';
import { DEFAULT_RETRY } from './llm/retry';
import { parseAllowList } from './outbound/ssrf';

export interface StoreConfig {
  /** Unset: the AWS default endpoint (on Lambda) or a launched DynamoDB Local (locally). */
  endpoint?: string;
  table: string;
  sessionTtlSeconds: number;
  /** How long a turn's claim holds before another request may take the turn over. */
  leaseMs: number;
}

export interface EaselConfig {
  store: StoreConfig;
  llm: LlmSettings;
  /** Hosts and CIDRs tenant URLs may reach despite the SSRF guard. */
  ssrfAllow: string[];
  stepBudgetTurn: number;
  stepBudgetRun: number;
}

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
    leaseMs: r.integer('EASEL_TURN_LEASE_MS', 60_000, 1000, 3_600_000),
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

  let ssrfAllow: string[] = [];
  try {
    ssrfAllow = parseAllowList(get('EASEL_SSRF_ALLOW'));
  } catch (error) {
    problems.push(`EASEL_SSRF_ALLOW: ${(error as Error).message.replace(/^SSRF allow list:\s*/, '')}`);
  }

  const config: EaselConfig = {
    store: storeConfig(r),
    llm,
    ssrfAllow,
    stepBudgetTurn: integer('EASEL_STEP_BUDGET_TURN', DEFAULT_STEP_BUDGET_TURN, 1, 1_000_000),
    stepBudgetRun: integer('EASEL_STEP_BUDGET_RUN', DEFAULT_STEP_BUDGET_RUN, 1, 10_000_000),
  };
  if (problems.length > 0) throw new ConfigError([...new Set(problems)]);
  return config;
}
