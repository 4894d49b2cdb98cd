/**
 * Everything the app needs, built from the configuration: the DynamoDB clients, the model
 * resolver, the SSRF guard, secrets, the turn engine and the authenticator. Used by the Lambda
 * entry points and the local server alike, so both run the same wiring.
 */
import { builtinComponents } from '../components';
import { services } from '../components/services';
import type { EaselConfig } from '../config';
import { createModelResolver } from '../llm/models';
import { SsrfGuard } from '../outbound/ssrf';
import { setupSecrets } from '../secrets';
import { createDynamoClients } from '../store/setup';
import type { TurnEngine } from '../turns/execute';
import type { QueueMessage } from '../turns/queue';
import type { AppDeps, Logger } from './app';
import { createAuthenticator } from './auth';

/** Reads SSM parameters (decrypted, cached five minutes); loaded only when configured. */
async function ssmParameter(name: string): Promise<string | undefined> {
  const { getParameter } = await import('@aws-lambda-powertools/parameters/ssm');
  return getParameter(name, { decrypt: true, maxAge: 300 });
}

/** SQS is loaded only where a queue is configured. */
async function sendToQueue(url: string, message: QueueMessage): Promise<void> {
  const { SQSClient, SendMessageCommand } = await import('@aws-sdk/client-sqs');
  // the queue URL's host is the queue's endpoint (an SQS-compatible server too)
  sqs ??= new SQSClient({ endpoint: new URL(url).origin });
  await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: JSON.stringify(message) }));
}
let sqs: import('@aws-sdk/client-sqs').SQSClient | undefined;

export function buildDeps(config: EaselConfig, options: { logger?: Logger } = {}): AppDeps {
  const { doc } = createDynamoClients(config.store.endpoint ? { endpoint: config.store.endpoint } : {});
  const store = { doc, table: config.store.table };
  const llm = config.llm.openai && config.secrets.llmApiKeyParameter
    ? { ...config.llm, openai: { ...config.llm.openai, apiKey: () => ssmParameter(config.secrets.llmApiKeyParameter as string) } }
    : config.llm;
  // `{secret.NAME}` resolves only in a tenant's run: that tenant's secrets, and the operator's
  // secrets allow-listed for it (read at call time; SSM values cached by Powertools)
  const secrets = setupSecrets(config.secrets, { store, getParameter: ssmParameter });
  const runServices = { models: createModelResolver(llm), guard: new SsrfGuard({ allow: config.ssrfAllow }) };
  const engine: TurnEngine = {
    store,
    registry: builtinComponents,
    services: services(runServices),
    servicesFor: (tenant) => services({ ...runServices, secret: secrets.resolverFor(tenant) }),
    leaseMs: config.store.leaseMs,
    sessionTtlSeconds: config.store.sessionTtlSeconds,
    stepBudgetTurn: config.stepBudgetTurn,
    stepBudgetRun: config.stepBudgetRun,
  };
  const queueUrl = config.queue.url;
  return {
    engine,
    asyncLeaseMs: config.queue.asyncLeaseMs,
    ...(queueUrl ? { enqueue: (message) => sendToQueue(queueUrl, message) } : {}),
    auth: createAuthenticator(store, { cacheMs: config.http.authCacheMs }),
    secrets: secrets.tenantSecrets,
    limits: { maxBodyBytes: config.http.maxBodyBytes, maxResponseBytes: config.http.maxResponseBytes, maxJsonDepth: config.http.maxJsonDepth },
    maxFieldBytes: config.http.maxFieldBytes,
    maxDslNodes: config.http.maxDslNodes,
    maxFileBytes: config.http.maxFileBytes,
    corsOrigins: config.http.corsOrigins,
    frameAncestors: config.http.frameAncestors,
    ...(options.logger ? { logger: options.logger } : {}),
  };
}
