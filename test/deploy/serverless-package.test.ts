/**
 * `serverless package` (osls, offline, no AWS credentials) and the CloudFormation it writes:
 * the table as lib/store/table.json defines it, both HTTP entry points, and IAM limited to
 * what the code calls. Each package takes a few seconds (esbuild bundles every function).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import tableJson from '../../lib/store/table.json';
import { LISTING_INDEX, TIMER_INDEX, TTL_ATTRIBUTE } from '../../lib/store/table';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');

type Resource = { Type: string; Condition?: string; Properties: any; DependsOn?: unknown };
interface Template {
  Conditions?: Record<string, unknown>;
  Resources: Record<string, Resource>;
  Outputs?: Record<string, unknown>;
}
interface Packaged {
  dir: string;
  template: Template;
}

/** Packages into a fresh directory with a clean environment: no credentials, no EASEL_* settings. */
async function packageService(params: Record<string, string> = {}): Promise<Packaged> {
  const dir = await mkdtemp(join(tmpdir(), 'easel-package-'));
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(AWS_|EASEL_|POWERTOOLS_)/.test(name)) env[name] = value;
  }
  Object.assign(env, {
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    AWS_CONFIG_FILE: join(dir, 'no-aws-config'),
    AWS_SHARED_CREDENTIALS_FILE: join(dir, 'no-aws-credentials'),
    SLS_TELEMETRY_DISABLED: '1',
  });
  const args = ['serverless', 'package', '--package', dir, ...Object.entries(params).map(([k, v]) => `--param=${k}=${v}`)];
  await run('npx', args, { cwd: root, env, timeout: 60_000, maxBuffer: 10 * 1024 * 1024 });
  const template = JSON.parse(await readFile(join(dir, 'cloudformation-template-update-stack.json'), 'utf8')) as Template;
  return { dir, template };
}

const ofType = (t: Template, type: string) => Object.entries(t.Resources).filter(([, r]) => r.Type === type);

/** CloudFormation condition functions, for the literal values `serverless package` bakes in. */
function evaluate(t: Template, expr: any): boolean {
  if (typeof expr !== 'object' || expr === null) return Boolean(expr);
  if ('Condition' in expr) return evaluate(t, t.Conditions?.[expr.Condition]);
  if ('Fn::Equals' in expr) return expr['Fn::Equals'][0] === expr['Fn::Equals'][1];
  if ('Fn::Not' in expr) return !evaluate(t, expr['Fn::Not'][0]);
  if ('Fn::Or' in expr) return (expr['Fn::Or'] as unknown[]).some((e) => evaluate(t, e));
  if ('Fn::And' in expr) return (expr['Fn::And'] as unknown[]).every((e) => evaluate(t, e));
  throw new Error(`unknown condition ${JSON.stringify(expr)}`);
}

/**
 * IAM statements of every policy in the template (the role's inline ones and AWS::IAM::Policy),
 * each with the conditions it depends on (the policy's, an `Fn::If` around the statement).
 */
function statements(t: Template): { statement: any; conditions: string[] }[] {
  const out: { statement: any; conditions: string[] }[] = [];
  const add = (s: any, conditions: string[]) => {
    if ('Fn::If' in s) {
      const [condition, then] = s['Fn::If'] as [string, any, any];
      add(then, [...conditions, condition]); // the else branches here are AWS::NoValue
    } else out.push({ statement: s, conditions });
  };
  for (const [, role] of ofType(t, 'AWS::IAM::Role')) {
    for (const policy of role.Properties.Policies ?? []) for (const s of policy.PolicyDocument.Statement) add(s, []);
  }
  for (const [, policy] of ofType(t, 'AWS::IAM::Policy')) {
    for (const s of policy.Properties.PolicyDocument.Statement) add(s, policy.Condition ? [policy.Condition] : []);
  }
  return out;
}

const active = (t: Template, conditions: string[]) => conditions.every((c) => evaluate(t, { Condition: c }));

const TABLE_ARN = { 'Fn::GetAtt': ['Table', 'Arn'] };
const INDEX_ARN = { 'Fn::Join': ['/', [TABLE_ARN, 'index', '*']] };
const STREAM_ARN = { 'Fn::GetAtt': ['Table', 'StreamArn'] };

/**
 * The DynamoDB IAM actions lib/store sends, from its `new XCommand(` calls. A transaction is
 * authorized per item operation, so TransactWrite adds the operations its items use.
 * setup.ts (table creation) runs locally and in tests only: Lambda never creates tables.
 */
async function actionsTheCodeUses(): Promise<string[]> {
  const direct: Record<string, string[]> = {
    Get: ['GetItem'], Put: ['PutItem'], Update: ['UpdateItem'], Delete: ['DeleteItem'], Query: ['Query'], Scan: ['Scan'],
    BatchGet: ['BatchGetItem'], BatchWrite: ['BatchWriteItem'],
  };
  const transactItem: Record<string, string> = { Put: 'PutItem', Update: 'UpdateItem', Delete: 'DeleteItem', ConditionCheck: 'ConditionCheckItem', Get: 'GetItem' };
  const dir = join(root, 'lib/store');
  const actions = new Set<string>();
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.ts') && f !== 'setup.ts')) {
    const source = await readFile(join(dir, file), 'utf8');
    for (const [, name] of source.matchAll(/new (\w+)Command\(/g)) {
      if (name === 'TransactWrite' || name === 'TransactGet') {
        for (const [, item] of source.matchAll(/\b(Put|Update|Delete|ConditionCheck|Get):\s*\{/g)) actions.add(transactItem[item!]!);
        continue;
      }
      const mapped = direct[name!];
      if (!mapped) throw new Error(`lib/store/${file}: no IAM mapping for ${name}Command; add it here and to serverless.yml`);
      for (const a of mapped) actions.add(a);
    }
  }
  return [...actions].map((a) => `dynamodb:${a}`).sort();
}

let plain: Packaged;
let withSsm: Packaged;

beforeAll(async () => {
  plain = await packageService();
  withSsm = await packageService({ EASEL_LLM_API_KEY_PARAMETER: '/easel/llm-api-key', SSM_KMS_KEY_ARN: 'arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab' });
}, 120_000);

afterAll(async () => {
  for (const p of [plain, withSsm]) if (p) await rm(p.dir, { recursive: true, force: true });
});

describe('serverless package', () => {
  it('defines the table exactly as lib/store/table.json, with TTL, PITR and the stream', () => {
    const table = plain.template.Resources.Table!;
    expect(table.Type).toBe('AWS::DynamoDB::Table');
    expect(table.Properties.KeySchema).toEqual(tableJson.KeySchema);
    expect(table.Properties.AttributeDefinitions).toEqual(tableJson.AttributeDefinitions);
    expect(table.Properties.GlobalSecondaryIndexes).toEqual(tableJson.GlobalSecondaryIndexes);
    expect(table.Properties.GlobalSecondaryIndexes.map((i: { IndexName: string }) => i.IndexName)).toEqual([LISTING_INDEX, TIMER_INDEX]);
    expect(table.Properties.TimeToLiveSpecification).toEqual({ AttributeName: TTL_ATTRIBUTE, Enabled: true });
    expect(TTL_ATTRIBUTE).toBe('ttl');
    expect(table.Properties.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
    expect(table.Properties.StreamSpecification).toEqual({ StreamViewType: 'KEYS_ONLY' });
    expect(table.Properties.BillingMode).toBe('PAY_PER_REQUEST');
    const [, mapping] = ofType(plain.template, 'AWS::Lambda::EventSourceMapping')[0]!;
    expect(mapping.Properties.EventSourceArn).toEqual(STREAM_ARN);
  });

  it('deploys the API twice: HTTP API (buffered) and a streaming Function URL', () => {
    const fn = (id: string) => plain.template.Resources[id]!.Properties;
    expect(fn('HttpLambdaFunction')).toMatchObject({ Handler: 'functions/http.handler', Runtime: 'nodejs22.x', Architectures: ['arm64'], Timeout: 29 });
    expect(fn('HttpStreamLambdaFunction')).toMatchObject({ Handler: 'functions/http-stream.handler', Runtime: 'nodejs22.x', Architectures: ['arm64'], Timeout: 900 });

    const urls = ofType(plain.template, 'AWS::Lambda::Url');
    expect(urls).toHaveLength(1);
    expect(urls[0]![1].Properties).toMatchObject({ InvokeMode: 'RESPONSE_STREAM', AuthType: 'NONE', TargetFunctionArn: { 'Fn::GetAtt': ['HttpStreamLambdaFunction', 'Arn'] } });

    const routes = ofType(plain.template, 'AWS::ApiGatewayV2::Route').map(([, r]) => r.Properties.RouteKey).sort();
    expect(routes).toEqual(['ANY /', 'ANY /{proxy+}']);
    const integrations = ofType(plain.template, 'AWS::ApiGatewayV2::Integration');
    expect(integrations).toHaveLength(1);
    expect(integrations[0]![1].Properties).toMatchObject({ IntegrationType: 'AWS_PROXY', PayloadFormatVersion: '2.0' });
    expect(JSON.stringify(integrations[0]![1].Properties.IntegrationUri)).toContain('HttpLambdaFunction');
  });

  it('configures the functions from the environment with no secrets in it', () => {
    for (const id of ['HttpLambdaFunction', 'HttpStreamLambdaFunction']) {
      const vars = plain.template.Resources[id]!.Properties.Environment.Variables;
      expect(vars).toMatchObject({ EASEL_DYNAMODB_TABLE: { Ref: 'Table' }, POWERTOOLS_SERVICE_NAME: 'easel', POWERTOOLS_LOG_LEVEL: 'INFO', EASEL_LLM_BASE_URL: '' });
      expect(Object.keys(vars)).not.toContain('EASEL_LLM_API_KEY');
      expect(Object.keys(vars)).not.toContain('EASEL_DYNAMODB_ENDPOINT');
      expect(withSsm.template.Resources[id]!.Properties.Environment.Variables.EASEL_LLM_API_KEY_PARAMETER).toBe('/easel/llm-api-key');
    }
    for (const [, group] of ofType(plain.template, 'AWS::Logs::LogGroup')) expect(group.Properties.RetentionInDays).toBe(30);
  });

  it('grants exactly the DynamoDB actions the code uses, on the table and its index only', async () => {
    const expected = await actionsTheCodeUses();
    expect(expected).toContain('dynamodb:GetItem');
    const dynamo = statements(plain.template)
      .map(({ statement }) => statement)
      .filter((s) => [s.Action].flat().some((a: string) => a.startsWith('dynamodb:')));
    const onStream = dynamo.filter((s) => JSON.stringify(s.Resource) === JSON.stringify([STREAM_ARN]));
    const onTable = dynamo.filter((s) => !onStream.includes(s));
    // the stream consumer's read access, generated by serverless for the stream event
    expect(onStream.flatMap((s) => s.Action).sort()).toEqual(['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams']);
    expect(onTable.flatMap((s) => s.Action).sort()).toEqual(expected);
    for (const s of onTable) {
      expect(s.Effect).toBe('Allow');
      expect(s.Resource).toEqual([TABLE_ARN, INDEX_ARN]);
    }
  });

  it('grants Bedrock streaming, and SSM (and KMS) only when parameters are configured', () => {
    const bedrock = statements(plain.template).filter(({ statement }) => [statement.Action].flat().some((a: string) => a.startsWith('bedrock:')));
    expect(bedrock.every(({ conditions }) => conditions.length === 0)).toBe(true);
    expect(bedrock.map(({ statement }) => statement.Action)).toEqual([['bedrock:InvokeModelWithResponseStream']]);

    const granted = (t: Template, prefix: string) =>
      statements(t).filter(({ statement, conditions }) => active(t, conditions) && [statement.Action].flat().some((a: string) => a.startsWith(prefix)));
    expect(granted(plain.template, 'ssm:')).toEqual([]);
    expect(granted(plain.template, 'kms:')).toEqual([]);
    expect(granted(withSsm.template, 'ssm:').map(({ statement }) => statement)).toEqual([
      { Effect: 'Allow', Action: ['ssm:GetParameter'], Resource: { 'Fn::Sub': 'arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/easel/*' } },
    ]);
    expect(granted(withSsm.template, 'kms:').map(({ statement }) => statement)).toEqual([
      {
        Effect: 'Allow',
        Action: ['kms:Decrypt'],
        Resource: 'arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
        Condition: { StringEquals: { 'kms:ViaService': { 'Fn::Sub': 'ssm.${AWS::Region}.amazonaws.com' } } },
      },
    ]);
  });

  it('bundles each function on its own, SDK included', async () => {
    const zips = (await readdir(plain.dir)).filter((f) => f.endsWith('.zip')).sort();
    expect(zips).toEqual(['http.zip', 'httpStream.zip', 'pump.zip', 'queueWorker.zip', 'sessionCleanup.zip']);
    const sizes: Record<string, string> = {};
    for (const zip of zips) {
      const bytes = await readFile(join(plain.dir, zip));
      sizes[zip] = `${((await stat(join(plain.dir, zip))).size / 1024).toFixed(0)} KiB`;
      // file names are stored uncompressed in a zip's headers
      expect(bytes.includes('node_modules/')).toBe(false);
    }
    console.info('zipped bundles:', sizes);
    expect((await readFile(join(plain.dir, 'http.zip'))).includes('functions/http.js')).toBe(true);
    expect((await readFile(join(plain.dir, 'httpStream.zip'))).includes('functions/http-stream.js')).toBe(true);
    expect((await readFile(join(plain.dir, 'queueWorker.zip'))).includes('functions/queue-worker.js')).toBe(true);
  });

  it('wires the turn queue: a dead-letter queue after five deliveries, an alarm, the worker with partial batch failures', () => {
    const resources = plain.template.Resources as Record<string, { Type: string; Properties: Record<string, any> }>;
    expect(resources.TurnQueue?.Properties.RedrivePolicy).toEqual({ deadLetterTargetArn: { 'Fn::GetAtt': ['TurnDeadLetters', 'Arn'] }, maxReceiveCount: 5 });
    expect(resources.TurnQueue?.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(900);
    expect(resources.TurnDeadLettersAlarm?.Type).toBe('AWS::CloudWatch::Alarm');
    const mapping = Object.values(resources).find((r) => r.Type === 'AWS::Lambda::EventSourceMapping' && JSON.stringify(r.Properties.EventSourceArn).includes('TurnQueue'));
    expect(mapping?.Properties.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
  });

  it('lets EventBridge Scheduler send scheduled runs to the turn queue, and nothing else', () => {
    const resources = plain.template.Resources as Record<string, { Type: string; Properties: Record<string, any> }>;
    const role = resources.TurnSchedulerRole;
    expect(role?.Type).toBe('AWS::IAM::Role');
    expect(role?.Properties.AssumeRolePolicyDocument.Statement).toEqual([
      expect.objectContaining({ Effect: 'Allow', Principal: { Service: 'scheduler.amazonaws.com' }, Action: 'sts:AssumeRole' }),
    ]);
    const statements = role?.Properties.Policies.flatMap((p: any) => p.PolicyDocument.Statement);
    expect(statements).toEqual([{ Effect: 'Allow', Action: ['sqs:SendMessage'], Resource: { 'Fn::GetAtt': ['TurnQueue', 'Arn'] } }]);
    const outputs = plain.template.Outputs as Record<string, { Value: unknown }>;
    expect(outputs.TurnQueueArn?.Value).toEqual({ 'Fn::GetAtt': ['TurnQueue', 'Arn'] });
    expect(outputs.TurnSchedulerRoleArn?.Value).toEqual({ 'Fn::GetAtt': ['TurnSchedulerRole', 'Arn'] });
  });
});
