/**
 * Fork exactness across real processes: one server process runs a conversation and exits; a
 * second server process, on the same DynamoDB Local, forks the run at a committed turn and
 * continues the fork with the original's answers. The fork's turns give the same events,
 * outputs and statuses as the original's did (its model sees the same conversation: the server
 * answers from what it is sent). The servers are the app as a plain process (the crash test's),
 * bundled once with esbuild.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CanvasEvent } from '../../lib/canvas';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import { createWorkflow } from '../../lib/store/workflows';
import { fixture } from '../helpers/canvas';
import { testTable } from '../helpers/dynamo';
import { newTenant, testStore } from '../helpers/engine';
import { freePort } from '../local/npm-start';
import { OpenAiServer } from '../llm/openai-server';

let model: OpenAiServer;
let bundle: string;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  model = await OpenAiServer.start();
  // an answer that is a function of what the model is sent: the conversation included
  model.respond = (body) => ({ kind: 'text', text: `on "${body.messages.at(-1)?.content}" after ${body.messages.length - 2} earlier messages`, chunks: 3 });
  const dir = mkdtempSync(join(tmpdir(), 'easel-fork-processes-'));
  bundle = join(dir, 'server.cjs');
  await build({ entryPoints: [fileURLToPath(new URL('../reliability/crash-server.ts', import.meta.url))], bundle: true, platform: 'node', format: 'cjs', target: 'node20', outfile: bundle, logLevel: 'error' });
}, 60_000);
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill();
  await model?.close();
  if (bundle) rmSync(dirname(bundle), { recursive: true, force: true });
});

async function startServer(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string; stop: () => Promise<void> }> {
  const port = await freePort();
  const child = spawn(process.execPath, [bundle, '0'], { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => String(d).includes('ready') && resolve());
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    stop: async () => {
      child.kill();
      await exited;
    },
  };
}

/** What two runs of the same conversation share: no times, no ids of the run. */
function comparable(response: { status: string; turn_number: number; events: CanvasEvent[]; outputs: unknown }) {
  const events = response.events.map((e) => {
    const data = { ...(e.data as Record<string, unknown>) };
    delete data.created_at;
    delete data.elapsed_time;
    return { event: e.event, data };
  });
  return { status: response.status, turn_number: response.turn_number, outputs: response.outputs, events };
}

describe('a fork continued in another process', () => {
  it('gives the same events as the original run', async () => {
    const tenant = newTenant();
    const key = `forks-${randomBytes(12).toString('hex')}`;
    await putApiKey(testStore(), { tenant, id: randomBytes(8).toString('hex'), name: 'admin', scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(key) });
    await createWorkflow(testStore(), { tenant, id: 'forked', name: 'forked', dsl: fixture('form-then-llm') });
    const { endpoint, tableName } = testTable();
    const env = {
      ...process.env,
      EASEL_DYNAMODB_ENDPOINT: endpoint,
      EASEL_DYNAMODB_TABLE: tableName,
      EASEL_LLM_BASE_URL: model.url,
      EASEL_LLM_DEFAULT_MODEL: 'openai:forks',
      EASEL_AUTH_CACHE_MS: '0',
      POWERTOOLS_LOG_LEVEL: 'ERROR',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    };
    const post = (url: string, path: string, body: unknown) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }));
    const inputs = [{ query: 'write about the sea' }, { inputs: { topic: 'waves' } }, { query: 'now the sky' }, { inputs: {} }, { inputs: { topic: 'clouds' } }];

    // the parent, all of it in the first process
    const first = await startServer(env);
    const original: any[] = [];
    let runId: string | undefined;
    try {
      for (const [i, runInput] of inputs.entries()) {
        const answer = await post(first.url, '/workflows/v1/workflows/forked/execute', { ...(runId ? { run_id: runId, turn_number: i } : {}), run_input: runInput });
        expect(answer.status).toBe(200);
        runId = answer.json.run_id as string;
        original.push(answer.json);
      }
    } finally {
      await first.stop();
    }
    expect(original.map((r) => r.status)).toEqual(['waiting_for_input', 'completed', 'waiting_for_input', 'waiting_for_input', 'completed']);

    // the fork and its turns, in a second process that never ran the parent
    const second = await startServer(env);
    try {
      const k = 2;
      const fork = await post(second.url, `/workflows/v1/workflow-runs/${runId}/fork`, { turn_number: k });
      expect(fork.status).toBe(201);
      expect(fork.json).toMatchObject({ turn_number: k, forked_from: { run_id: runId, turn_number: k } });
      const continued: any[] = [];
      for (let n = k + 1; n <= inputs.length; n++) {
        const answer = await post(second.url, '/workflows/v1/workflows/forked/execute', { run_id: fork.json.run_id, turn_number: n - 1, run_input: inputs[n - 1] });
        expect(answer.status).toBe(200);
        expect(answer.json.run_id).toBe(fork.json.run_id);
        continued.push(answer.json);
      }
      expect(continued.map(comparable)).toEqual(original.slice(k).map(comparable));
      // the fork's model was shown the conversation the other process's run had before the fork
      expect(JSON.stringify(continued.at(-1).events)).toMatch(/after [1-9]\d* earlier messages/);
    } finally {
      await second.stop();
    }
  }, 120_000);
});
