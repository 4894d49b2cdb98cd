/**
 * Creating the table and the SDK clients: used by `npm start`, the tests and the benchmarks
 * (Lambda never creates tables). The table comes from table.json, the CloudFormation
 * `Properties` that serverless.yml deploys, translated here to CreateTable's shape.
 *
 * @example
 * const { client, doc } = createDynamoClients({ endpoint: 'http://127.0.0.1:8000' });
 * await ensureTable(client, 'easel-local');
 */
import {
  type CreateTableCommandInput,
  CreateTableCommand,
  DescribeTableCommand,
  DescribeTimeToLiveCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  type TableDescription,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { TABLE_DEFINITION } from './table';

export interface DynamoClientOptions {
  /** DynamoDB endpoint, e.g. DynamoDB Local. @default the AWS endpoint of the region */
  endpoint?: string;
  /** @default 'us-east-1' with an endpoint; otherwise the SDK's own resolution (AWS_REGION) */
  region?: string;
  /** @default static local credentials with an endpoint; otherwise the SDK's default chain */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

export interface DynamoClients {
  client: DynamoDBClient;
  doc: DynamoDBDocumentClient;
}

/** DynamoDB Local accepts any static pair (and with -sharedDb they do not partition data). */
export const LOCAL_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' } as const;

export function createDynamoClients(options: DynamoClientOptions = {}): DynamoClients {
  const config: DynamoDBClientConfig = {};
  if (options.endpoint !== undefined) {
    config.endpoint = options.endpoint;
    config.region = options.region ?? 'us-east-1';
    config.credentials = options.credentials ?? { ...LOCAL_CREDENTIALS };
  } else {
    if (options.region !== undefined) config.region = options.region;
    if (options.credentials !== undefined) config.credentials = options.credentials;
  }
  const client = new DynamoDBClient(config);
  const doc = DynamoDBDocumentClient.from(client, {
    marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
  });
  return { client, doc };
}

export interface EnsureTableOptions {
  /** How long to wait for the table and its indexes to become ACTIVE. @default 300_000 ms */
  timeoutMs?: number;
  /** Delay between DescribeTable polls. @default 250 ms */
  pollMs?: number;
}

/**
 * Creates the table from TABLE_DEFINITION if it does not exist, waits until it and its global
 * secondary indexes are ACTIVE, and makes sure TTL is enabled. Idempotent, and safe to run
 * concurrently with another creator. It does not migrate an existing table's schema.
 */
export async function ensureTable(client: DynamoDBClient, tableName: string, options: EnsureTableOptions = {}): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 300_000;
  const pollMs = options.pollMs ?? 250;
  if ((await describe(client, tableName)) === undefined) {
    try {
      await client.send(new CreateTableCommand(createTableInput(tableName)));
    } catch (error) {
      // Someone else created it between our DescribeTable and CreateTable: wait for theirs.
      if (errorName(error) !== 'ResourceInUseException') throw error;
    }
  }
  await waitUntilActive(client, tableName, timeoutMs, pollMs);
  await ensureTimeToLive(client, tableName);
}

/** CloudFormation `Properties` -> CreateTable input (only the parameters CreateTable knows). */
export function createTableInput(tableName: string): CreateTableCommandInput {
  // table.json is CloudFormation's schema; the SDK's types are narrower string unions.
  const cfn = TABLE_DEFINITION as unknown as CloudFormationTable;
  const input: CreateTableCommandInput = {
    TableName: tableName,
    AttributeDefinitions: cfn.AttributeDefinitions,
    KeySchema: cfn.KeySchema,
  };
  if (cfn.GlobalSecondaryIndexes) {
    // ContributorInsightsSpecification is CloudFormation-only, per index as per table.
    input.GlobalSecondaryIndexes = cfn.GlobalSecondaryIndexes.map(({ ContributorInsightsSpecification: _, ...index }) => index);
  }
  if (cfn.LocalSecondaryIndexes) input.LocalSecondaryIndexes = cfn.LocalSecondaryIndexes;
  if (cfn.BillingMode) input.BillingMode = cfn.BillingMode;
  if (cfn.ProvisionedThroughput) input.ProvisionedThroughput = cfn.ProvisionedThroughput;
  if (cfn.StreamSpecification) {
    input.StreamSpecification = { StreamEnabled: true, StreamViewType: cfn.StreamSpecification.StreamViewType };
  }
  if (cfn.SSESpecification) {
    const { SSEEnabled, SSEType, KMSMasterKeyId } = cfn.SSESpecification;
    input.SSESpecification = { Enabled: SSEEnabled, ...(SSEType ? { SSEType } : {}), ...(KMSMasterKeyId ? { KMSMasterKeyId } : {}) };
  }
  if (cfn.TableClass) input.TableClass = cfn.TableClass;
  if (cfn.DeletionProtectionEnabled !== undefined) input.DeletionProtectionEnabled = cfn.DeletionProtectionEnabled;
  if (cfn.Tags) input.Tags = cfn.Tags;
  // TimeToLiveSpecification is applied afterwards (UpdateTimeToLive); PointInTimeRecovery,
  // ContributorInsights and Kinesis streaming are deployment concerns, not created locally.
  return input;
}

type Input = CreateTableCommandInput;
interface CloudFormationTable {
  AttributeDefinitions: Input['AttributeDefinitions'];
  KeySchema: Input['KeySchema'];
  GlobalSecondaryIndexes?: (NonNullable<Input['GlobalSecondaryIndexes']>[number] & { ContributorInsightsSpecification?: unknown })[];
  LocalSecondaryIndexes?: Input['LocalSecondaryIndexes'];
  BillingMode?: Input['BillingMode'];
  ProvisionedThroughput?: Input['ProvisionedThroughput'];
  StreamSpecification?: { StreamViewType: NonNullable<Input['StreamSpecification']>['StreamViewType'] };
  SSESpecification?: { SSEEnabled: boolean; SSEType?: NonNullable<Input['SSESpecification']>['SSEType']; KMSMasterKeyId?: string };
  TableClass?: Input['TableClass'];
  DeletionProtectionEnabled?: boolean;
  Tags?: Input['Tags'];
  TimeToLiveSpecification?: { AttributeName: string; Enabled: boolean };
}

async function describe(client: DynamoDBClient, tableName: string): Promise<TableDescription | undefined> {
  try {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    return Table;
  } catch (error) {
    if (errorName(error) === 'ResourceNotFoundException') return undefined;
    throw error;
  }
}

async function waitUntilActive(client: DynamoDBClient, tableName: string, timeoutMs: number, pollMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // Right after a concurrent CreateTable, DescribeTable may briefly not find the table yet.
    const table = await describe(client, tableName);
    const ready =
      table?.TableStatus === 'ACTIVE' && (table.GlobalSecondaryIndexes ?? []).every((index) => index.IndexStatus === 'ACTIVE');
    if (ready) return;
    if (Date.now() > deadline) {
      throw new Error(`table ${tableName} is not ACTIVE after ${timeoutMs} ms (status ${table?.TableStatus ?? 'missing'})`);
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

async function ensureTimeToLive(client: DynamoDBClient, tableName: string): Promise<void> {
  const spec = (TABLE_DEFINITION as unknown as CloudFormationTable).TimeToLiveSpecification;
  if (!spec?.Enabled) return;
  const { TimeToLiveDescription: current } = await client.send(new DescribeTimeToLiveCommand({ TableName: tableName }));
  const status = current?.TimeToLiveStatus;
  if ((status === 'ENABLED' || status === 'ENABLING') && current?.AttributeName === spec.AttributeName) return;
  try {
    await client.send(
      new UpdateTimeToLiveCommand({ TableName: tableName, TimeToLiveSpecification: { AttributeName: spec.AttributeName, Enabled: true } }),
    );
  } catch (error) {
    // A concurrent ensureTable enabled it first ("TimeToLive is already enabled").
    if (!(errorName(error) === 'ValidationException' && /already enabled/i.test(String((error as Error).message)))) throw error;
  }
}

function errorName(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'name' in error ? String((error as { name: unknown }).name) : undefined;
}
