/**
 * DynamoDB Streams consumer: deletes what is left of a session once its head is gone (TTL or
 * an explicit delete). Reports partial batch failures so only failed records are retried.
 */
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { readStoreConfig } from '../lib/config';
import { buildStore } from '../lib/runtime/store';
import { cascadeRemovedHeads } from '../lib/store/cleanup';

// only the store: this function runs no turn, so it builds no engine, models or secrets
const { store } = buildStore(readStoreConfig());

export async function handler(event: DynamoDBStreamEvent): Promise<DynamoDBBatchResponse> {
  const removed = event.Records.filter((r) => r.eventName === 'REMOVE').map((r) => ({
    id: r.eventID ?? '',
    pk: r.dynamodb?.Keys?.pk?.S ?? '',
    sk: r.dynamodb?.Keys?.sk?.S ?? '',
  }));
  const { failed } = await cascadeRemovedHeads(store, removed);
  return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
}
