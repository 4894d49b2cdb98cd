/**
 * The wiring every entry point uses (functions/, lib/local, bench/): the services a turn needs,
 * built from the configuration (lib/config.ts). Nothing here serves HTTP; lib/http builds its
 * app on top of a `Runtime` (lib/http/deps.ts `appDeps`). Heavy clients (Bedrock, SQS, SSM) are
 * loaded on first use, never when a runtime is built.
 *
 * @example
 *   const telemetry = createTelemetry();
 *   const runtime = buildRuntime(readConfig(), { logger: telemetry.logger });
 *   await pumpDueTimers(runtime.engine, 100);
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { EaselConfig } from '../config';
import type { KnowledgeAdmin } from '../knowledge/types';
import type { ModelResolver } from '../llm/models';
import { McpRegistry } from '../mcp/registry';
import type { McpConnector } from '../mcp/types';
import type { SsrfGuard } from '../outbound/ssrf';
import type { StoreContext } from '../store/dynamo';
import type { TurnEngine } from '../turns/execute';
import { formLinkTokens } from '../turns/form-links';
import type { TurnLifecycle } from '../turns/lifecycle';
import { buildEngine, type EngineParts } from './engine';
import { buildGuard } from './guard';
import { buildKnowledge } from './knowledge';
import { buildMcpConnector } from './mcp';
import { buildModels } from './models';
import { type Enqueue, sqsEnqueue } from './queue';
import { setupSecrets, type Secrets } from '../secrets';
import { ssmParameter } from './parameters';
import { buildStore } from './store';
import type { Logger } from './telemetry';

export { buildEngine, type EngineParts } from './engine';
export { buildGuard } from './guard';
export { buildKnowledge, type KnowledgeParts } from './knowledge';
export { createShutdown, type DeadlineTimers, invocationDeadline, type InvocationDeadline, type Shutdown } from './lifecycle';
export { buildMcpConnector } from './mcp';
export { buildModels, llmSettings } from './models';
export { type ParameterReader, ssmParameter } from './parameters';
export { type Enqueue, sqsEnqueue } from './queue';
export { buildStore, type RuntimeStore } from './store';
export { createTelemetry, type Logger, METRICS_NAMESPACE, SERVICE, type Telemetry } from './telemetry';
export { queueDeps } from './worker';

export interface Runtime {
  config: EaselConfig;
  logger?: Logger;
  store: StoreContext;
  /** The low-level DynamoDB client behind `store` (table setup, `destroy()`). */
  dynamo: DynamoDBClient;
  models: ModelResolver;
  guard: SsrfGuard;
  /** Tenant secrets, the master key ring and server keys; `{secret.NAME}` resolves per tenant. */
  secrets: Secrets;
  engine: TurnEngine;
  /** Knowledge bases of every tenant: the APIs manage them, runs search their tenant's (`forTenant`). */
  knowledge: KnowledgeAdmin;
  /** Speaks MCP to tenants' servers through `guard`; a tenant's runs see theirs through `createRunMcp`. */
  mcpConnector: McpConnector;
  /** Sends an async or queued turn to the worker; absent without a queue (EASEL_TURN_QUEUE_URL). */
  enqueue?: Enqueue;
  /** Tenants' MCP servers: the APIs manage them, runs open their tenant's through `mcpConnector`. */
  mcp: McpRegistry;
}

export interface RuntimeOptions {
  logger?: Logger;
  /** The master key source and clock of the caller's (tests); see lib/secrets. */
  secrets?: Pick<Parameters<typeof setupSecrets>[1], 'masterSource' | 'now'>;
  /** What stops the entry point's turns: a shutdown (npm start), an invocation's deadline (Lambda). */
  lifecycle?: TurnLifecycle;
  /** Speaks MCP to tenants' servers. @default the SSRF-guarded connector (lib/runtime/mcp.ts) */
  mcpConnector?: McpConnector;
  /** Work turns leave for after their response (TurnEngine `afterResponse`): entry points that send the response first. */
  afterResponse?: EngineParts['afterResponse'];
}

export function buildRuntime(config: EaselConfig, options: RuntimeOptions = {}): Runtime {
  const { logger } = options;
  const { store, client } = buildStore(config.store);
  // `{secret.NAME}` resolves only in a tenant's run: that tenant's secrets, and the operator's
  // secrets allow-listed for it (read at call time; SSM values cached by Powertools)
  const secrets = setupSecrets(config.secrets, { store, getParameter: ssmParameter, ...options.secrets });
  const models = buildModels(config);
  const guard = buildGuard(config);
  const secretsFor = (tenant: string) => secrets.resolverFor(tenant);
  const knowledge = buildKnowledge(config, { store, guard, secretsFor });
  const mcpConnector = options.mcpConnector ?? buildMcpConnector({ guard });
  const mcp = new McpRegistry({ store, guard, secrets: secrets.tenantSecrets, secretsFor, connector: mcpConnector });
  const engine = buildEngine(config, {
    store,
    models,
    guard,
    secretsFor,
    knowledge,
    mcp,
    ...(options.lifecycle ? { lifecycle: options.lifecycle } : {}),
    ...(options.afterResponse ? { afterResponse: options.afterResponse } : {}),
  });
  // the links committed pauses e-mail (UserFillUp form_link_email), as the API and the worker make them
  const formBaseUrl = config.http.formBaseUrl ?? config.http.publicUrl;
  engine.formLinks = {
    tokens: formLinkTokens((purpose) => secrets.serverKey(purpose)),
    ...(formBaseUrl ? { baseUrl: formBaseUrl } : {}),
    ...(logger ? { log: (message: string, fields: Record<string, unknown>) => logger.info(message, fields) } : {}),
  };
  const queueUrl = config.queue.url;
  const enqueue = queueUrl ? sqsEnqueue(queueUrl) : undefined;
  // a run's queued inputs (double-texting) go to the worker as the turns ahead of them commit
  engine.asyncHoldMs = config.queue.asyncLeaseMs;
  if (enqueue) engine.enqueue = enqueue;
  if (logger) engine.log = (message, fields) => logger.error(message, fields);
  return {
    config,
    ...(logger ? { logger } : {}),
    store,
    dynamo: client,
    models,
    guard,
    secrets,
    engine,
    knowledge,
    mcpConnector,
    ...(enqueue ? { enqueue } : {}),
    mcp,
  };
}
