import { describe, expect, it } from 'vitest';
import { ConfigError, readConfig, readLocalConfig } from '../lib/config';
import { createModelResolver, parseModelSpec } from '../lib/llm';

describe('readConfig', () => {
  it('defaults to the echo model with nothing set, and treats empty values as unset', () => {
    const config = readConfig({ EASEL_LLM_BASE_URL: '', EASEL_LLM_API_KEY: '', EASEL_LLM_DEFAULT_MODEL: ' ' });
    expect(config.llm.defaultModel).toBe('echo');
    expect(config.llm.openai).toBeUndefined();
    expect(config.ssrfAllow).toEqual([]);
    expect(config.stepBudgetTurn).toBe(1000);
    expect(config.stepBudgetRun).toBe(10_000);
  });

  it('reads an OpenAI-compatible endpoint, models, budgets and the SSRF allow list', () => {
    const config = readConfig({
      EASEL_LLM_BASE_URL: 'http://127.0.0.1:8080/v1',
      EASEL_LLM_API_KEY: 'sk-1',
      EASEL_LLM_DEFAULT_MODEL: 'openai:gpt-4o-mini',
      EASEL_LLM_MODELS: '{"qwen-turbo@Tongyi-Qianwen": "bedrock:anthropic.claude-3-haiku-20240307-v1:0", "fast": "echo"}',
      EASEL_SSRF_ALLOW: '127.0.0.1, localhost,10.0.0.0/8',
      EASEL_STEP_BUDGET_TURN: '50',
      EASEL_LLM_MAX_ATTEMPTS: '5',
    });
    expect(config.llm.openai).toEqual({ baseUrl: 'http://127.0.0.1:8080/v1', apiKey: 'sk-1' });
    expect(config.llm.models.fast).toBe('echo');
    expect(config.llm.retry.attempts).toBe(5);
    expect(config.ssrfAllow).toEqual(['127.0.0.1', 'localhost', '10.0.0.0/8']);
    expect(config.stepBudgetTurn).toBe(50);
  });

  it('keeps an async turn whose worker died 2 min without a queue (npm start), 20 min with SQS; aborts turns 3 s before a deadline', () => {
    const local = readConfig({});
    expect(local.queue.asyncLeaseMs).toBe(120_000);
    expect(local.deadlineMarginMs).toBe(3_000);
    expect(readConfig({ EASEL_TURN_QUEUE_URL: 'https://sqs.us-east-1.amazonaws.com/123456789012/easel-turns' }).queue.asyncLeaseMs).toBe(20 * 60_000);
    expect(readConfig({ EASEL_ASYNC_LEASE_MS: '90000', EASEL_DEADLINE_MARGIN_MS: '5000' })).toMatchObject({ queue: { asyncLeaseMs: 90_000 }, deadlineMarginMs: 5_000 });
    expect(() => readConfig({ EASEL_DEADLINE_MARGIN_MS: '0' })).toThrow(/EASEL_DEADLINE_MARGIN_MS must be an integer from 100 to 600000, got "0"/);
  });

  it('reads the public base URL webhook URLs are built on (EASEL_PUBLIC_URL), without a trailing slash', () => {
    expect(readConfig({}).http.publicUrl).toBeUndefined();
    expect(readConfig({ EASEL_PUBLIC_URL: 'https://abc123.execute-api.us-east-1.amazonaws.com/' }).http.publicUrl).toBe('https://abc123.execute-api.us-east-1.amazonaws.com');
    expect(readConfig({ EASEL_PUBLIC_URL: 'https://api.example.com/easel/' }).http.publicUrl).toBe('https://api.example.com/easel');
    for (const bad of ['ftp://x.example.com', 'https://x.example.com/?a=1', 'https://user:pw@x.example.com', 'not a url']) {
      expect(() => readConfig({ EASEL_PUBLIC_URL: bad }), bad).toThrow(/EASEL_PUBLIC_URL must be the API's http\(s\) base URL/);
    }
  });

  it("reads npm start's grace period for turns in flight at a stop", () => {
    expect(readLocalConfig({}).shutdownGraceMs).toBe(5_000);
    expect(readLocalConfig({ EASEL_SHUTDOWN_GRACE_MS: '0' }).shutdownGraceMs).toBe(0);
    expect(() => readLocalConfig({ EASEL_SHUTDOWN_GRACE_MS: 'soon' })).toThrow(/EASEL_SHUTDOWN_GRACE_MS must be an integer from 0 to 3600000, got "soon"/);
  });

  it('searches Bedrock knowledge bases in the deployment\'s region unless they name one, at an endpoint override if set', () => {
    expect(readConfig({}).bedrockKnowledge).toEqual({ region: 'us-east-1' });
    expect(readConfig({ EASEL_BEDROCK_REGION: 'us-west-2' }).bedrockKnowledge).toEqual({ region: 'us-west-2' });
    expect(readConfig({ AWS_REGION: 'eu-west-1', EASEL_BEDROCK_REGION: 'us-west-2', EASEL_BEDROCK_AGENT_ENDPOINT: 'https://vpce-0abc.bedrock-agent-runtime.eu-west-1.vpce.amazonaws.com' }).bedrockKnowledge).toEqual({
      region: 'eu-west-1',
      endpoint: 'https://vpce-0abc.bedrock-agent-runtime.eu-west-1.vpce.amazonaws.com',
    });
    expect(() => readConfig({ EASEL_BEDROCK_AGENT_ENDPOINT: 'bedrock.local' })).toThrow(/EASEL_BEDROCK_AGENT_ENDPOINT must be an http\(s\) URL/);
  });

  it('sends tool requests to each service’s public API unless EASEL_TOOL_<NAME>_BASE_URL names another endpoint', () => {
    expect(readConfig({}).tools).toEqual({ baseUrls: {} });
    expect(readConfig({ EASEL_TOOL_TAVILY_BASE_URL: 'http://tavily-proxy.internal:8080/v1/', EASEL_TOOL_GITHUB_BASE_URL: 'https://ghe.example.com/api/v3' }).tools).toEqual({
      baseUrls: { TAVILY: 'http://tavily-proxy.internal:8080/v1', GITHUB: 'https://ghe.example.com/api/v3' },
    });
    expect(() => readConfig({ EASEL_TOOL_PUBMED_BASE_URL: 'ftp://eutils' })).toThrow(/EASEL_TOOL_PUBMED_BASE_URL must be an http\(s\) base URL/);
    expect(() => readConfig({ EASEL_TOOL_TAVILY_BASE_URL: 'api.tavily.com' })).toThrow(/EASEL_TOOL_TAVILY_BASE_URL must be an http\(s\) base URL/);
    expect(() => readConfig({ EASEL_TOOL_TAVILY_BASE_URL: 'https://user:pw@api.tavily.com' })).toThrow(/without query, fragment or credentials/);
  });

  it('reports every problem together, naming the variable', () => {
    let error: unknown;
    try {
      readConfig({
        EASEL_LLM_BASE_URL: 'ftp://nope',
        EASEL_LLM_MODELS: '["not a map"]',
        EASEL_STEP_BUDGET_RUN: '-3',
        EASEL_SSRF_ALLOW: '10.0.0.0/33',
      });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    expect(problems).toMatch(/EASEL_LLM_BASE_URL must be an http\(s\) URL/);
    expect(problems).toMatch(/EASEL_LLM_MODELS must be a JSON object/);
    expect(problems).toMatch(/EASEL_STEP_BUDGET_RUN must be an integer/);
    expect(problems).toMatch(/EASEL_SSRF_ALLOW: "10.0.0.0\/33" is not a valid CIDR/);
    expect(problems).toMatch(/EASEL_LLM_DEFAULT_MODEL must name a model/);
  });

  it('reads the secrets settings: operator values, SSM names, the master key and the per-tenant allow list', () => {
    const config = readConfig({
      EASEL_SECRET_SHARED_CRM: 'v1',
      EASEL_SSM_SECRETS: '{"BILLING": "/easel/billing"}',
      EASEL_MASTER_KEY_PARAMETER: '/easel/master-key',
      EASEL_OPERATOR_SECRETS_FOR_TENANTS: '{"acme": ["SHARED_CRM", "BILLING"]}',
    });
    expect(config.secrets).toEqual({
      values: { SHARED_CRM: 'v1' },
      parameters: { BILLING: '/easel/billing' },
      masterKeyParameter: '/easel/master-key',
      operatorForTenants: { acme: ['SHARED_CRM', 'BILLING'] },
    });
    expect(readConfig({}).secrets.operatorForTenants).toEqual({});
    for (const bad of ['["acme"]', '{"acme": "SHARED"}', '{"acme": ["bad-name"]}', 'nope']) {
      expect(() => readConfig({ EASEL_OPERATOR_SECRETS_FOR_TENANTS: bad })).toThrow(/EASEL_OPERATOR_SECRETS_FOR_TENANTS must be a JSON object/);
    }
  });

  it('refuses an openai model without an endpoint, and unknown model names', () => {
    expect(() => readConfig({ EASEL_LLM_DEFAULT_MODEL: 'openai:gpt-4o' })).toThrow(/needs EASEL_LLM_BASE_URL/);
    expect(() => readConfig({ EASEL_LLM_MODELS: '{"x": "mistral:large"}' })).toThrow(/EASEL_LLM_MODELS\["x"\]: "mistral:large" is not a model/);
  });
});

describe('model resolution', () => {
  it.each([
    ['openai:gpt-4o-mini', { provider: 'openai', model: 'gpt-4o-mini' }],
    ['bedrock:anthropic.claude-3-haiku-20240307-v1:0', { provider: 'bedrock', model: 'anthropic.claude-3-haiku-20240307-v1:0' }],
    ['echo', { provider: 'echo', model: 'echo' }],
    ['gpt-4o', undefined],
    ['openai:', undefined],
  ])('parses %j', (spec, expected) => {
    expect(parseModelSpec(spec)).toEqual(expected);
  });

  it('maps known llm_ids and sends empty or unknown ones to the default', () => {
    const resolver = createModelResolver({
      openai: { baseUrl: 'http://127.0.0.1:1/v1' },
      defaultModel: 'openai:default-model',
      models: { 'fast@Local': 'echo', 'big@OpenAI': 'openai:big' },
      timeoutMs: 1000,
      retry: { attempts: 1, baseDelayMs: 1, maxDelayMs: 1 },
    });
    expect(resolver.resolve('fast@Local').id).toBe('echo');
    expect(resolver.resolve('big@OpenAI').id).toBe('openai:big');
    expect(resolver.resolve('qwen-turbo@Tongyi-Qianwen').id).toBe('openai:default-model');
    expect(resolver.resolve('').id).toBe('openai:default-model');
    expect(resolver.resolve(undefined).id).toBe('openai:default-model');
  });
});
