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
import type { ModelResolver } from '../llm/models';
import type { SsrfGuard } from '../outbound/ssrf';
import type { StoreContext } from '../store/dynamo';
import type { TurnEngine } from '../turns/execute';
import { buildEngine } from './engine';
import { buildGuard } from './guard';
import { buildModels } from './models';
import { type Enqueue, sqsEnqueue } from './queue';
import { operatorSecrets, type SecretLookup } from './secrets';
import { buildStore } from './store';
import type { Logger } from './telemetry';

export { buildEngine, type EngineParts } from './engine';
export { buildGuard } from './guard';
export { buildModels } from './models';
export { type ParameterReader, ssmParameter } from './parameters';
export { type Enqueue, sqsEnqueue } from './queue';
export { operatorSecrets, type OperatorSecretsOptions, type SecretLookup } from './secrets';
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
  /** `{secret.NAME}` as components resolve it. */
  secret: SecretLookup;
  engine: TurnEngine;
  /** Sends an async or queued turn to the worker; absent without a queue (EASEL_TURN_QUEUE_URL). */
  enqueue?: Enqueue;
}

/** What a secrets resolver other than the operator's is built from. */
export interface SecretsSource {
  store: StoreContext;
  /** The operator's secrets (EASEL_SECRET_<NAME>, EASEL_SSM_SECRETS). */
  operator: SecretLookup;
}

export interface RuntimeOptions {
  logger?: Logger;
  /**
   * The secrets components see. The seam for tenant secrets (lib/secrets): a resolver built
   * from the store and the operator's secrets. @default the operator's secrets alone
   */
  secrets?: (source: SecretsSource) => SecretLookup;
}

export function buildRuntime(config: EaselConfig, options: RuntimeOptions = {}): Runtime {
  const { logger } = options;
  const { store, client } = buildStore(config.store);
  const operator = operatorSecrets(config.secrets, { onError: (error) => logger?.error('could not read secrets', { error: String(error) }) });
  const secret = options.secrets ? options.secrets({ store, operator }) : operator;
  const models = buildModels(config);
  const guard = buildGuard(config);
  const engine = buildEngine(config, { store, models, guard, secret });
  const queueUrl = config.queue.url;
  return {
    config,
    ...(logger ? { logger } : {}),
    store,
    dynamo: client,
    models,
    guard,
    secret,
    engine,
    ...(queueUrl ? { enqueue: sqsEnqueue(queueUrl) } : {}),
  };
}
