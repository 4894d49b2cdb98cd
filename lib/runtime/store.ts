/**
 * The store an entry point works on: the DynamoDB clients for the configured endpoint and the
 * `StoreContext` every lib/store operation takes. Creating the clients opens no connection.
 *
 * @example
 *   const { store, client } = buildStore(readStoreConfig());
 *   await getHead(store, tenant, runId);
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { StoreConfig } from '../config';
import type { StoreContext } from '../store/dynamo';
import { createDynamoClients } from '../store/setup';

export interface RuntimeStore {
  /** What lib/store's operations take. */
  store: StoreContext;
  /** The low-level client, for table setup (lib/store/setup) and `destroy()`. */
  client: DynamoDBClient;
}

export function buildStore(config: Pick<StoreConfig, 'endpoint' | 'table'>): RuntimeStore {
  const { client, doc } = createDynamoClients(config.endpoint ? { endpoint: config.endpoint } : {});
  return { store: { doc, table: config.table }, client };
}
