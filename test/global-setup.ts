/**
 * Vitest global setup: one DynamoDB Local for the whole run (in memory), unless
 * EASEL_DYNAMODB_ENDPOINT names an existing DynamoDB. Either way the table
 * (EASEL_DYNAMODB_TABLE, default `easel-test`) is created if missing. Test files get the
 * endpoint and table through `inject('easelDynamoDb')` and the same two env variables (set
 * here, before the workers start, so they inherit them); test/helpers/dynamo.ts reads them.
 */
import type { TestProject } from 'vitest/node';
import { startDynamoDbLocal, type DynamoDbLocal } from '../lib/local/dynamodb-local';
import { createDynamoClients, ensureTable } from '../lib/store/setup';

declare module 'vitest' {
  export interface ProvidedContext {
    easelDynamoDb: { endpoint: string; tableName: string; launched: boolean; startMs: number };
  }
}

/**
 * How long DynamoDB Local may take to answer before the run gives up: a JVM starting on a busy
 * two-core machine can take longer than the 60 s `npm start` waits, and giving up here
 * fails every suite at once.
 */
const STARTUP_LIMIT_MS = 120_000;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The AWS SDK warns about Node 20 on every client; the deploy runtime is nodejs22.x.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const started = Date.now();
  const external = process.env.EASEL_DYNAMODB_ENDPOINT?.trim() || undefined;
  const tableName = process.env.EASEL_DYNAMODB_TABLE?.trim() || 'easel-test';
  let local: DynamoDbLocal | undefined;
  const endpoint = external ?? (local = await startDynamoDbLocal({ inMemory: true, readyTimeoutMs: STARTUP_LIMIT_MS })).endpoint;
  const { client } = createDynamoClients({ endpoint });
  try {
    await ensureTable(client, tableName);
  } catch (error) {
    await local?.stop();
    throw error;
  } finally {
    client.destroy();
  }
  const startMs = Date.now() - started;
  const previous = { endpoint: process.env.EASEL_DYNAMODB_ENDPOINT, table: process.env.EASEL_DYNAMODB_TABLE };
  process.env.EASEL_DYNAMODB_ENDPOINT = endpoint;
  process.env.EASEL_DYNAMODB_TABLE = tableName;
  project.provide('easelDynamoDb', { endpoint, tableName, launched: local !== undefined, startMs });

  return async () => {
    // Restore, so that a setup run again in this process (watch mode) launches afresh.
    restore('EASEL_DYNAMODB_ENDPOINT', previous.endpoint);
    restore('EASEL_DYNAMODB_TABLE', previous.table);
    await local?.stop();
  };
}

function restore(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}
