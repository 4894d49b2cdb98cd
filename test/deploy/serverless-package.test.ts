/**
 * `serverless package` (osls, offline, no AWS credentials) and the CloudFormation it writes:
 * the table as lib/store/table.json defines it, both HTTP entry points, and IAM limited to
 * what the code calls: one role per function, each granted the DynamoDB actions of the store
 * modules bundled into that function (read from esbuild's metafile), and models, SSM and the
 * turn queue only where the function uses them. Each package takes a few seconds. The functions'
 * packages are `npm run bundle`'s (test/deploy/bundle.test.ts checks them): here each artifact
 * path holds an empty zip, as the template only names the files.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build, type Metafile } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import tableJson from '../../lib/store/table.json';
import { LISTING_INDEX, TIMER_INDEX, TTL_ATTRIBUTE } from '../../lib/store/table';
import { writeZip } from '../../scripts/zip';

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
  state: { service: { functions: Record<string, { package?: { artifact?: string } }> } };
}

/** Packages into a fresh directory with a clean environment: no credentials, no EASEL_* settings. */
async function packageService(params: Record<string, string> = {}): Promise<Packaged> {
  const dir = await mkdtemp(join(tmpdir(), 'easel-package-'));
  const artifacts = join(dir, 'artifacts');
  await mkdir(artifacts);
  for (const name of NAMES) await writeZip(join(artifacts, `${name}.zip`), []);
  // the bundler's work directories go inside it too, so removing it leaves nothing behind
  const scratch = join(dir, 'tmp');
  await mkdir(scratch);
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(AWS_|EASEL_|POWERTOOLS_)/.test(name)) env[name] = value;
  }
  Object.assign(env, {
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    AWS_CONFIG_FILE: join(dir, 'no-aws-config'),
    AWS_SHARED_CREDENTIALS_FILE: join(dir, 'no-aws-credentials'),
    SLS_TELEMETRY_DISABLED: '1',
    TMPDIR: scratch,
    EASEL_BUNDLE_DIR: artifacts,
  });
  const args = ['serverless', 'package', '--package', dir, ...Object.entries(params).map(([k, v]) => `--param=${k}=${v}`)];
  await run('npx', args, { cwd: root, env, timeout: 60_000, maxBuffer: 10 * 1024 * 1024 });
  const template = JSON.parse(await readFile(join(dir, 'cloudformation-template-update-stack.json'), 'utf8')) as Template;
  const state = JSON.parse(await readFile(join(dir, 'serverless-state.json'), 'utf8')) as Packaged['state'];
  return { dir, template, state };
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

const active = (t: Template, conditions: string[]) => conditions.every((c) => evaluate(t, { Condition: c }));

const TABLE_ARN = { 'Fn::GetAtt': ['Table', 'Arn'] };
const INDEX_ARN = { 'Fn::Join': ['/', [TABLE_ARN, 'index', '*']] };
const STREAM_ARN = { 'Fn::GetAtt': ['Table', 'StreamArn'] };

/** What esbuild bundles into an entry point, our modules repository-relative and packages left external. */
async function metafileOf(entry: string): Promise<Metafile> {
  const { metafile } = await build({
    entryPoints: [join(root, entry)],
    absWorkingDir: root,
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    outdir: join(root, '.probe-out'),
    logLevel: 'silent',
  });
  return metafile as Metafile;
}

/** Our modules bundled into an entry point (every import, static or dynamic). */
const modulesOf = (metafile: Metafile): string[] => Object.keys(metafile.inputs).sort();

/** Our modules that loading `entry` evaluates: reached from it by static imports only (not `import()`). */
function loadedAtInit(metafile: Metafile, entry: string): string[] {
  const seen = new Set([entry]);
  for (const module of seen) {
    for (const i of metafile.inputs[module]?.imports ?? []) if (!i.external && i.kind !== 'dynamic-import') seen.add(i.path);
  }
  return [...seen];
}

const importsPackage = (metafile: Metafile, module: string, pkg: string) =>
  (metafile.inputs[module]?.imports ?? []).some((i) => i.path === pkg || i.path.startsWith(`${pkg}/`));

/** SDK clients a turn rarely needs: imported when first used, so no cold start initialises them. */
const LAZY_PACKAGES = ['@aws-sdk/client-bedrock-agent-runtime', '@modelcontextprotocol/sdk'];

/**
 * The DynamoDB IAM actions lib/store sends, from its `new XCommand(` calls (only in `files`
 * when given: the store modules of one function's bundle). A transaction is authorized per item
 * operation, so TransactWrite adds the operations its items use. setup.ts (table creation) runs
 * locally and in tests only: Lambda never creates tables.
 */
async function actionsTheCodeUses(files?: readonly string[]): Promise<string[]> {
  const direct: Record<string, string[]> = {
    Get: ['GetItem'], Put: ['PutItem'], Update: ['UpdateItem'], Delete: ['DeleteItem'], Query: ['Query'], Scan: ['Scan'],
    BatchGet: ['BatchGetItem'], BatchWrite: ['BatchWriteItem'],
  };
  const transactItem: Record<string, string> = { Put: 'PutItem', Update: 'UpdateItem', Delete: 'DeleteItem', ConditionCheck: 'ConditionCheckItem', Get: 'GetItem' };
  const dir = join(root, 'lib/store');
  const actions = new Set<string>();
  const inStore = (await readdir(dir)).filter((f) => f.endsWith('.ts') && f !== 'setup.ts');
  for (const file of inStore.filter((f) => files === undefined || files.includes(`lib/store/${f}`))) {
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

/** The functions of serverless.yml: their CloudFormation ids, entry points and log groups' names. */
const FUNCTIONS = {
  http: { id: 'HttpLambdaFunction', entry: 'functions/http.ts' },
  httpStream: { id: 'HttpStreamLambdaFunction', entry: 'functions/http-stream.ts' },
  queueWorker: { id: 'QueueWorkerLambdaFunction', entry: 'functions/queue-worker.ts' },
  pump: { id: 'PumpLambdaFunction', entry: 'functions/pump.ts' },
  sessionCleanup: { id: 'SessionCleanupLambdaFunction', entry: 'functions/session-cleanup.ts' },
} as const;
type FunctionName = keyof typeof FUNCTIONS;
const NAMES = Object.keys(FUNCTIONS) as FunctionName[];

/** The role a function runs with: the id of the AWS::IAM::Role its `Role` points to. */
function roleOf(t: Template, name: FunctionName): string {
  const role = t.Resources[FUNCTIONS[name].id]?.Properties.Role as { 'Fn::GetAtt'?: [string, string] } | undefined;
  const id = role?.['Fn::GetAtt']?.[0];
  if (!id || role?.['Fn::GetAtt']?.[1] !== 'Arn') throw new Error(`${name}: its role is not a role of this template: ${JSON.stringify(role)}`);
  return id;
}

/** Every statement a role is granted (its inline policies, and AWS::IAM::Policy attached to it) with its conditions. */
function grantsOf(t: Template, roleId: string): { statement: any; conditions: string[] }[] {
  const out: { statement: any; conditions: string[] }[] = [];
  const add = (s: any, conditions: string[]) => {
    if ('Fn::If' in s) {
      const [condition, then] = s['Fn::If'] as [string, any, any];
      add(then, [...conditions, condition]); // the else branches here are AWS::NoValue
    } else out.push({ statement: s, conditions });
  };
  for (const policy of t.Resources[roleId]?.Properties.Policies ?? []) for (const s of policy.PolicyDocument.Statement) add(s, []);
  for (const [, policy] of ofType(t, 'AWS::IAM::Policy')) {
    if (!(policy.Properties.Roles as unknown[]).some((r) => JSON.stringify(r) === JSON.stringify({ Ref: roleId }))) continue;
    for (const s of policy.Properties.PolicyDocument.Statement) add(s, policy.Condition ? [policy.Condition] : []);
  }
  return out;
}

/** The statements of a function's role that are in force in `t`, granting an action with `prefix`. */
function granted(t: Template, name: FunctionName, prefix: string): any[] {
  return grantsOf(t, roleOf(t, name))
    .filter(({ statement, conditions }) => active(t, conditions) && [statement.Action].flat().some((a: string) => a.startsWith(prefix)))
    .map(({ statement }) => statement);
}

const actionsIn = (statements: any[]) => [...new Set(statements.flatMap((s) => [s.Action].flat() as string[]))].sort();

let plain: Packaged;
let withSsm: Packaged;
const bundled = {} as Record<FunctionName, string[]>;
const metafiles = {} as Record<FunctionName, Metafile>;

beforeAll(async () => {
  plain = await packageService();
  withSsm = await packageService({ EASEL_LLM_API_KEY_PARAMETER: '/easel/llm-api-key', SSM_KMS_KEY_ARN: 'arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab' });
  for (const name of NAMES) {
    metafiles[name] = await metafileOf(FUNCTIONS[name].entry);
    bundled[name] = modulesOf(metafiles[name]);
  }
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

  it('gives every function a role of its own, which only Lambda can assume and nothing else shares', () => {
    const roles = NAMES.map((name) => roleOf(plain.template, name));
    expect(new Set(roles).size).toBe(NAMES.length);
    // serverless's shared role is not made at all
    expect(plain.template.Resources.IamRoleLambdaExecution).toBeUndefined();
    for (const role of roles) {
      const { Properties } = plain.template.Resources[role]!;
      expect(Properties.AssumeRolePolicyDocument.Statement).toEqual([{ Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' }, Action: 'sts:AssumeRole' }]);
      expect(Properties.ManagedPolicyArns).toBeUndefined();
      expect(Properties.Policies).toHaveLength(1);
    }
    // no other policy is attached to a function's role but the SSM one
    for (const [id, policy] of ofType(withSsm.template, 'AWS::IAM::Policy')) {
      expect(id).toBe('SsmParameterAccess');
      expect(policy.Condition).toBe('UsesSsm');
    }
  });

  it('grants no wildcard action and no resource "*"', () => {
    for (const t of [plain.template, withSsm.template]) {
      for (const name of NAMES) {
        for (const { statement } of grantsOf(t, roleOf(t, name))) {
          expect(statement.Effect).toBe('Allow');
          for (const action of [statement.Action].flat() as string[]) expect(action).toMatch(/^[a-z0-9-]+:[A-Za-z]+$/);
          expect([statement.Resource].flat()).not.toContain('*');
        }
      }
    }
  });

  it('lets each function write logs to its own log group only', () => {
    for (const name of NAMES) {
      const logs = granted(plain.template, name, 'logs:');
      expect(actionsIn(logs)).toEqual(['logs:CreateLogStream', 'logs:PutLogEvents']);
      const group = ofType(plain.template, 'AWS::Logs::LogGroup').map(([, g]) => g.Properties.LogGroupName as string).find((n) => n === `/aws/lambda/easel-dev-${name}`);
      expect(group, name).toBeDefined();
      expect(logs.flatMap((s) => s.Resource)).toEqual([{ 'Fn::Sub': `arn:\${AWS::Partition}:logs:\${AWS::Region}:\${AWS::AccountId}:log-group:${group}:*` }]);
    }
  });

  it.each(NAMES)('grants %s exactly the DynamoDB actions of the store modules bundled into it, on the table and its indexes only', async (name) => {
    const expected = await actionsTheCodeUses(bundled[name]);
    expect(expected).toContain('dynamodb:Query');
    const dynamo = granted(plain.template, name, 'dynamodb:');
    const onStream = dynamo.filter((s) => JSON.stringify(s.Resource) === JSON.stringify([STREAM_ARN]));
    const onTable = dynamo.filter((s) => !onStream.includes(s));
    expect(actionsIn(onTable)).toEqual(expected);
    for (const s of onTable) expect(s.Resource).toEqual([TABLE_ARN, INDEX_ARN]);
    // only the stream consumer reads the stream, as its event source mapping does
    if (name === 'sessionCleanup') {
      expect(actionsIn(onStream)).toEqual(['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator', 'dynamodb:ListStreams']);
    } else expect(onStream).toEqual([]);
  });

  it('grants models, knowledge bases and SSM only to the functions that run turns, and SSM (and KMS) only when parameters are configured', () => {
    const runsTurns = NAMES.filter((name) => bundled[name].includes('lib/turns/execute.ts'));
    // the pump runs a timer's turn: the form's timeout branch may call a model
    expect(runsTurns).toEqual(['http', 'httpStream', 'queueWorker', 'pump']);
    for (const name of NAMES) {
      const bedrock = granted(plain.template, name, 'bedrock:');
      if (runsTurns.includes(name)) {
        expect(bedrock).toEqual([
          {
            Effect: 'Allow',
            Action: ['bedrock:InvokeModelWithResponseStream'],
            Resource: [
              { 'Fn::Sub': 'arn:${AWS::Partition}:bedrock:*::foundation-model/*' },
              { 'Fn::Sub': 'arn:${AWS::Partition}:bedrock:*:${AWS::AccountId}:inference-profile/*' },
            ],
          },
          // the account's knowledge bases only (the `bedrock` knowledge backend), never another's
          { Effect: 'Allow', Action: ['bedrock:Retrieve'], Resource: [{ 'Fn::Sub': 'arn:${AWS::Partition}:bedrock:*:${AWS::AccountId}:knowledge-base/*' }] },
          // Titan embedding models only (a `local` knowledge base's embedding model)
          { Effect: 'Allow', Action: ['bedrock:InvokeModel'], Resource: [{ 'Fn::Sub': 'arn:${AWS::Partition}:bedrock:*::foundation-model/amazon.titan-embed-*' }] },
        ]);
      } else expect(bedrock).toEqual([]);
      expect(granted(plain.template, name, 'ssm:')).toEqual([]);
      expect(granted(plain.template, name, 'kms:')).toEqual([]);
      const ssm = granted(withSsm.template, name, 'ssm:');
      const kms = granted(withSsm.template, name, 'kms:');
      if (!runsTurns.includes(name)) {
        expect([...ssm, ...kms]).toEqual([]);
        continue;
      }
      expect(ssm).toEqual([
        { Effect: 'Allow', Action: ['ssm:GetParameter'], Resource: { 'Fn::Sub': 'arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/easel/*' } },
      ]);
      expect(kms).toEqual([
        {
          Effect: 'Allow',
          Action: ['kms:Decrypt'],
          Resource: 'arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab',
          Condition: { StringEquals: { 'kms:ViaService': { 'Fn::Sub': 'ssm.${AWS::Region}.amazonaws.com' } } },
        },
      ]);
    }
  });

  it('lets only the API and the worker send to the turn queue, only the worker receive from it, and the cleanup reach its own dead-letter queue only', () => {
    const queue = { 'Fn::GetAtt': ['TurnQueue', 'Arn'] };
    const sqs = Object.fromEntries(NAMES.map((name) => [name, granted(plain.template, name, 'sqs:').map((s) => ({ actions: [s.Action].flat().sort(), resource: s.Resource }))]));
    expect(sqs).toEqual({
      http: [{ actions: ['sqs:SendMessage'], resource: [queue] }],
      httpStream: [{ actions: ['sqs:SendMessage'], resource: [queue] }],
      queueWorker: [
        { actions: ['sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:ReceiveMessage'], resource: [queue] },
        { actions: ['sqs:SendMessage'], resource: [queue] },
      ],
      pump: [],
      sessionCleanup: [{ actions: ['sqs:SendMessage'], resource: [{ 'Fn::GetAtt': ['SessionCleanupDeadLetters', 'Arn'] }] }],
    });
  });

  it('deploys each function from its own package, built by npm run bundle', () => {
    for (const name of NAMES) {
      expect(plain.state.service.functions[name]?.package?.artifact, name).toBe(join(plain.dir, 'artifacts', `${name}.zip`));
      expect(plain.template.Resources[FUNCTIONS[name].id]!.Properties.Code.S3Key).toMatch(new RegExp(`/${name}\\.zip$`));
    }
    // source maps stay in the packages but off unless NODE_OPTIONS asks for them
    for (const name of NAMES) expect(plain.template.Resources[FUNCTIONS[name].id]!.Properties.Environment.Variables.NODE_OPTIONS).toBe('');
  });

  it.each(NAMES)('imports the SDK clients a turn rarely needs only on first use in %s', (name) => {
    const atInit = loadedAtInit(metafiles[name], FUNCTIONS[name].entry);
    expect(atInit.length).toBeGreaterThan(10); // the walk reached the function's modules
    for (const pkg of LAZY_PACKAGES) expect(atInit.filter((module) => importsPackage(metafiles[name], module, pkg)), pkg).toEqual([]);
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
