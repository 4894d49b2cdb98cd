/**
 * The DynamoDB table of the test run, started and created by test/global-setup.ts. One table
 * is shared by every test file running in parallel: give each test its own tenant/ids.
 *
 * @example
 * const { doc, tableName } = testTable();
 * await doc.send(new PutCommand({ TableName: tableName, Item: { pk: `T#${tenant}`, sk: 'x' } }));
 */
import { inject } from 'vitest';
import { createDynamoClients, type DynamoClients } from '../../lib/store/setup';

export interface TestTable extends DynamoClients {
  tableName: string;
  endpoint: string;
}

let cached: TestTable | undefined;

/** Clients on the shared test table (one pair per worker; do not destroy them). */
export function testTable(): TestTable {
  if (cached) return cached;
  const provided = inject('easelDynamoDb') as { endpoint: string; tableName: string } | undefined;
  const endpoint = provided?.endpoint ?? process.env.EASEL_DYNAMODB_ENDPOINT;
  const tableName = provided?.tableName ?? process.env.EASEL_DYNAMODB_TABLE;
  if (!endpoint || !tableName) {
    throw new Error('no test DynamoDB: run the tests through vitest (test/global-setup.ts starts DynamoDB Local)');
  }
  cached = { ...createDynamoClients({ endpoint }), tableName, endpoint };
  return cached;
}
