/**
 * DynamoDB Streams consumer: deletes what is left of a session once its head is gone (TTL or
 * an explicit delete). Reports partial batch failures so only failed records are retried.
 */
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { cascadeRemovedHeads } from '../lib/store/cleanup';
import { readStoreConfig } from '../lib/config';
import { createDynamoClients } from '../lib/store/setup';

const config = readStoreConfig();
const { doc } = createDynamoClients(config.endpoint ? { endpoint: config.endpoint } : {});
const table = config.table;

export async function handler(event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> {
  const removed = event.Records.filter((r) => r.eventName === 'REMOVE').map((r) => ({
    id: r.eventID ?? '',
    pk: r.dynamodb?.Keys?.pk?.S ?? '',
    sk: r.dynamodb?.Keys?.sk?.S ?? '',
  }));
  const { failed } = await cascadeRemovedHeads({ doc, table }, removed);
  return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
}
