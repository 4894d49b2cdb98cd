/**
 * The cold-start floor (measurement 4): a Lambda handler that only creates a DynamoDB
 * DocumentClient and does one GetItem. Bundled with serverless.yml's esbuild options, it is
 * the least any of our functions could weigh and take to initialise with the SDK bundled.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';

const doc = DynamoDBDocumentClient.from(new DynamoDBClient({}));

export async function handler(): Promise<unknown> {
  const { Item } = await doc.send(new GetCommand({ TableName: process.env.EASEL_DYNAMODB_TABLE ?? 'easel', Key: { pk: 'floor', sk: 'floor' } }));
  return Item ?? null;
}
