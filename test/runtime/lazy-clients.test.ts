/**
 * Every entry point initialises without evaluating a heavy client: each functions/*.ts module,
 * and npm start's app (lib/local/app.ts buildLocalApp), is loaded and built in a fresh node
 * process (test/runtime/probe/probe.mjs) that records every module evaluated — ESM loads
 * through a module.register hook, CommonJS through the require cache. Bedrock runtime, SQS,
 * SSM and Powertools Parameters must not be among them: they are loaded on first use. The
 * control builds a runtime and uses each client once, so the probe is seen to catch them.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const PROBE = join(import.meta.dirname, 'probe', 'probe.mjs');
const HEAVY = ['@aws-sdk/client-bedrock-runtime', '@aws-sdk/client-sqs', '@aws-sdk/client-ssm', '@aws-lambda-powertools/parameters'];

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'easel-probe-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The URLs of the modules the entry evaluated. */
async function probe(entry: string, mode?: 'local-app' | 'first-use'): Promise<string[]> {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(AWS_|EASEL_|POWERTOOLS_)/.test(name)) env[name] = value;
  }
  Object.assign(env, {
    // nothing is contacted at initialisation: a port where nothing listens
    EASEL_DYNAMODB_ENDPOINT: 'http://127.0.0.1:9',
    EASEL_DYNAMODB_TABLE: 'easel-probe',
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'probe',
    AWS_SECRET_ACCESS_KEY: 'probe',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  });
  const log = join(dir, `${entry.replace(/\W+/g, '-')}-${mode ?? 'load'}.log`);
  await run(process.execPath, ['--import', 'tsx', PROBE, log, join(root, entry), ...(mode ? [mode] : [])], { cwd: root, env, timeout: 60_000 });
  return (await readFile(log, 'utf8')).split('\n').filter(Boolean);
}

/** What parses documents and searches local knowledge bases: loaded by the first parse or retrieval. */
const KNOWLEDGE = ['minisearch', 'htmlparser2', 'pdfjs-dist', 'gpt-tokenizer'];
const heavyIn = (urls: readonly string[], packages = HEAVY) => packages.filter((pkg) => urls.some((url) => url.includes(`/node_modules/${pkg}/`)));

const functions = (await readdir(join(root, 'functions'))).filter((f) => f.endsWith('.ts')).map((f) => `functions/${f}`);

describe('entry points load no heavy client until first use', () => {
  it.each(functions)('%s', async (entry) => {
    const loaded = await probe(entry);
    // the probe saw the entry and the DynamoDB client (a CommonJS package) it builds
    expect(loaded).toContain(`file://${join(root, entry)}`);
    expect(loaded.some((url) => url.includes('/node_modules/@aws-sdk/client-dynamodb/'))).toBe(true);
    expect(heavyIn(loaded)).toEqual([]);
    expect(heavyIn(loaded, KNOWLEDGE)).toEqual([]);
  });

  it("lib/local/app.ts: npm start's app, built", async () => {
    const loaded = await probe('lib/local/app.ts', 'local-app');
    expect(loaded.some((url) => url.endsWith('/lib/http/app.ts'))).toBe(true);
    expect(heavyIn(loaded)).toEqual([]);
    expect(heavyIn(loaded, KNOWLEDGE)).toEqual([]);
  });

  it('sees each of them once used: an SSM-held master key, a queued turn, a Bedrock call', async () => {
    const loaded = await probe('lib/runtime/index.ts', 'first-use');
    expect(heavyIn(loaded)).toEqual(HEAVY);
  });
});
