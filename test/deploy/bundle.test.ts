/**
 * The Lambda packages `npm run bundle` builds (scripts/bundle-functions.ts): each zip holds
 * exactly the files its function can load, nothing heavy is evaluated when a handler module
 * loads, the HTTP packages carry the OpenAPI document the app would generate, and the packaged
 * http handler, unzipped and imported in a fresh node process as Lambda does, runs a two-turn
 * workflow against DynamoDB Local. One bundling (some 15 s of CPU) serves every test here.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import type { Metafile } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readZip, type ZipEntry } from '../../bench/lib/zip';
import { openapiDocumentFor } from '../../lib/http/app';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import { type BundledFunction, bundleFunctions, FUNCTION_ENTRIES, type FunctionName, inertDeps, openapiDocument, reachable } from '../../scripts/bundle-functions';
import formIntake from '../fixtures/form-intake.json';
import { newTenant, testStore } from '../helpers/engine';
import { httpApiEvent } from '../functions/lambda-events';

/** Packages (and our modules) no function may evaluate before it first needs them. */
const LAZY = [
  'pdfjs-dist',
  'gpt-tokenizer',
  'nodemailer',
  'minisearch',
  'htmlparser2',
  '@modelcontextprotocol/sdk',
  '@aws-sdk/client-ssm',
  '@aws-sdk/client-sqs',
  '@aws-sdk/client-bedrock-runtime',
  '@aws-sdk/client-bedrock-agent-runtime',
  '@aws-lambda-powertools/parameters',
  'lib/http/playground/assets.generated.ts',
  'lib/http/ragflow/openapi.ts',
  // the admin route groups (lib/http/route-groups.ts)
  'lib/http/routes/knowledge-bases.ts',
  'lib/http/routes/knowledge-schemas.ts',
  'lib/http/routes/mcp-servers.ts',
];

let dir: string;
let functions: Record<FunctionName, BundledFunction>;
let metafile: Metafile;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'easel-bundle-'));
  const bundled = await bundleFunctions(join(dir, 'out'), openapiDocument);
  functions = Object.fromEntries(bundled.map((f) => [f.name, f])) as Record<FunctionName, BundledFunction>;
  metafile = JSON.parse(await readFile(join(dir, 'out', 'metafile.json'), 'utf8')) as Metafile;
}, 120_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const NAMES = Object.keys(FUNCTION_ENTRIES) as FunctionName[];
const outputOf = (name: FunctionName) => Object.entries(metafile.outputs).find(([, o]) => o.entryPoint === FUNCTION_ENTRIES[name])![0];
/** An output file's path inside a zip (the build directory is the zip's root). */
const inZip = (output: string) => output.slice(output.indexOf('/build/') + '/build/'.length);
const handlerFile = (name: FunctionName) => `functions/${FUNCTION_ENTRIES[name].slice('functions/'.length, -'.ts'.length)}.mjs`;

describe('the Lambda packages', () => {
  it.each(NAMES)('%s: its zip holds its handler, the chunks it can import and their maps, and nothing else', (name) => {
    const entries = readZip(functions[name].zip).map((e) => e.name).sort();
    const js = reachable(metafile, outputOf(name), true).map(inZip);
    const expected = [...js, ...js.map((f) => `${f}.map`), ...(name === 'http' || name === 'httpStream' ? ['openapi.json'] : [])].sort();
    expect(entries).toEqual(expected);
    expect(entries).toContain(handlerFile(name));
    expect(entries.some((e) => e.includes('node_modules'))).toBe(false);
  });

  it('shares chunks between functions instead of copying code into each', () => {
    const chunksOf = (name: FunctionName) => new Set(readZip(functions[name].zip).map((e) => e.name).filter((e) => e.startsWith('chunks/')));
    const http = chunksOf('http');
    const worker = chunksOf('queueWorker');
    expect([...worker].filter((c) => http.has(c)).length).toBeGreaterThan(5);
  });

  it.each(NAMES)('%s: evaluates none of the heavy or rarely used modules when its handler loads', (name) => {
    const atInit = reachable(metafile, outputOf(name), false);
    const inputs = atInit.flatMap((file) => Object.keys(metafile.outputs[file]!.inputs));
    expect(inputs.length).toBeGreaterThan(50); // the walk reached the function's code
    for (const lazy of LAZY) expect(inputs.filter((input) => input.includes(`node_modules/${lazy}/`) || input === lazy), lazy).toEqual([]);
    // and what it does load is counted
    expect(functions[name].initBytes).toBe(atInit.reduce((sum, file) => sum + metafile.outputs[file]!.bytes, 0));
  });

  it('keeps the lazy modules in the packages that use them, as chunks of their own', () => {
    const all = reachable(metafile, outputOf('http'), true).flatMap((file) => Object.keys(metafile.outputs[file]!.inputs));
    for (const lazy of ['pdfjs-dist', 'gpt-tokenizer', 'nodemailer', '@aws-sdk/client-ssm']) expect(all.some((input) => input.includes(`node_modules/${lazy}/`)), lazy).toBe(true);
    expect(all).toContain('lib/http/playground/assets.generated.ts');
    expect(all).toContain('lib/http/routes/knowledge-bases.ts');
    expect(all).toContain('lib/http/routes/mcp-servers.ts');
  });

  it('ships the OpenAPI document the app generates from its routes in both HTTP packages', async () => {
    const generated = await openapiDocumentFor(inertDeps());
    for (const name of ['http', 'httpStream'] as const) {
      const document = readZip(functions[name].zip).find((e) => e.name === 'openapi.json')!;
      expect(JSON.parse(document.data().toString('utf8'))).toEqual(generated);
    }
    expect((generated as { paths: Record<string, unknown> }).paths['/workflows/v1/workflows/{id}/execute']).toBeDefined();
    expect((generated as { paths: Record<string, unknown> }).paths['/api/v1/agents/{id}/completions']).toBeDefined();
  });
});

describe('the packaged http handler, run as Lambda runs it', () => {
  const tenant = newTenant();
  const secret = `easel-test-${randomBytes(16).toString('hex')}`;
  let child: ChildProcessWithoutNullStreams;
  let lines: Interface;
  let ready: { ready: boolean; initMs: number };
  const next = () => new Promise<string>((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`the packaged handler exited (${code})`)));
  });

  beforeAll(async () => {
    await putApiKey(testStore(), { tenant, id: randomBytes(8).toString('hex'), name: 'admin', scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(secret) });
    const root = join(dir, 'task');
    for (const entry of readZip(functions.http.zip)) await unpack(root, entry);
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH };
    for (const [name, value] of Object.entries(process.env)) if (name.startsWith('EASEL_DYNAMODB_')) env[name] = value;
    Object.assign(env, {
      LAMBDA_TASK_ROOT: root,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      POWERTOOLS_SERVICE_NAME: 'easel',
    });
    child = spawn(process.execPath, [join(import.meta.dirname, 'packaged-handler.mjs'), root, handlerFile('http')], { env });
    child.stderr.resume(); // its log lines
    lines = createInterface({ input: child.stdout });
    ready = JSON.parse(await next()) as typeof ready;
  }, 60_000);

  afterAll(() => {
    child?.kill();
  });

  async function invoke(method: string, path: string, body?: unknown) {
    const event = httpApiEvent(method, path, { key: secret, ...(body !== undefined ? { body } : {}) });
    child.stdin.write(`${JSON.stringify({ event, functionName: 'easel-test-http' })}\n`);
    const answer = JSON.parse(await next()) as { result?: { statusCode: number; body?: string; isBase64Encoded?: boolean }; error?: string };
    expect(answer.error).toBeUndefined();
    const text = answer.result!.isBase64Encoded ? Buffer.from(answer.result!.body ?? '', 'base64').toString('utf8') : (answer.result!.body ?? '');
    return { status: answer.result!.statusCode, json: JSON.parse(text) as any };
  }

  it('loads as an ES module and exports the handler', () => {
    expect(ready.ready).toBe(true);
    expect(ready.initMs).toBeGreaterThan(0);
  });

  it('serves the packaged OpenAPI document', async () => {
    const doc = await invoke('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    const packaged = JSON.parse(readZip(functions.http.zip).find((e) => e.name === 'openapi.json')!.data().toString('utf8'));
    expect(doc.json).toEqual(packaged);
  });

  it('runs a form workflow over two turns', async () => {
    const created = await invoke('POST', '/workflows/v1/workflows', { name: 'intake', dsl: formIntake });
    expect(created.status).toBe(201);
    const execute = `/workflows/v1/workflows/${created.json.id}/execute`;
    const first = await invoke('POST', execute, { run_input: { query: 'hello' } });
    expect(first.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
    const second = await invoke('POST', execute, { run_id: first.json.run_id, turn_number: 1, run_input: { inputs: { name: 'Ada', age: 36, plan: 'pro', profile: { city: 'London' } } } });
    expect(second.json).toMatchObject({ status: 'completed', turn_number: 2 });
    expect(JSON.stringify(second.json.events)).toContain('Welcome Ada (36), plan pro; city London.');
  });

  it('loads a lazy chunk when first needed: the playground page', async () => {
    const event = httpApiEvent('GET', '/playground');
    child.stdin.write(`${JSON.stringify({ event, functionName: 'easel-test-http' })}\n`);
    const answer = JSON.parse(await next()) as { result: { statusCode: number; body: string; isBase64Encoded?: boolean } };
    expect(answer.result.statusCode).toBe(200);
    const html = answer.result.isBase64Encoded ? Buffer.from(answer.result.body, 'base64').toString('utf8') : answer.result.body;
    expect(html).toContain('<!doctype html>');
  });
});

async function unpack(root: string, entry: ZipEntry): Promise<void> {
  const target = join(root, entry.name);
  await mkdir(dirname(target), { recursive: true });
  await writeFile(target, entry.data());
}
