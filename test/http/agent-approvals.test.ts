/**
 * Tool-call approvals over HTTP. The native API shows the approval in `next_input_hint`; 100
 * approvals sent at once commit one turn and the rest are told the turn was taken; the turn
 * record names who approved with what, and records the decision among its calls. Across real
 * processes: the pause is made by one server process, which then exits, and answered through
 * another; the model server counts each round once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import { createWorkflow } from '../../lib/store/workflows';
import { testTable } from '../helpers/dynamo';
import { graph } from '../helpers/dsl-builder';
import { newTenant, testEngine, testStore } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

let model: OpenAiServer;
let api: Served;

beforeAll(async () => {
  model = await OpenAiServer.start();
  // the main Agent asks its researcher once, then answers with what it said
  model.respond = (body) => {
    const isSub = String(body.messages[0]?.content).startsWith('You look things up');
    if (isSub) return { kind: 'text', text: 'The bridge opened in 1932.' };
    const results = body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
    return results.length === 0 ? { kind: 'tools', calls: [{ name: 'Researcher_0', arguments: { user_prompt: 'When did the bridge open?' } }], text: 'Let me ask.' } : { kind: 'text', text: `Report: ${results.join(' | ')}` };
  };
  api = await serveApp(testEngine({ openaiUrl: model.url }));
});
afterAll(async () => {
  await Promise.all([model.close(), api?.close()]);
});

const agentParams = (extra: Record<string, unknown>, sysPrompt: string) => ({ llm_id: 'writer@Local', sys_prompt: sysPrompt, prompts: [{ role: 'user', content: '{sys.query}' }], max_rounds: 3, ...extra });
const DSL = graph({
  begin: ['Begin', { mode: 'conversational' }, ['Agent:Main']],
  'Agent:Main': ['Agent', agentParams({ approval: ['Researcher'], tools: [{ component_name: 'Agent', name: 'Researcher', params: { ...agentParams({ tools: [] }, 'You look things up.'), user_prompt: '', description: 'Looks things up.' } }] }, 'You write reports.'), ['Message:Out']],
  'Message:Out': ['Message', { content: ['{Agent:Main@content}'] }],
});

describe('tool-call approvals over the native API', () => {
  it('show the call in the hint; of 100 approvals at once one commits; the record says who approved what', async () => {
    const created = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'report', dsl: DSL } });
    const execute = `/workflows/v1/workflows/${created.json.id}/execute`;
    const before = model.calls;
    const first = await api.call('POST', execute, { body: { run_input: { query: 'Write about the bridge.' } } });
    expect(first.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
    expect(first.json.next_input_hint).toMatchObject({
      component_id: 'Agent:Main',
      tips: 'The agent wants to call Researcher with {"user_prompt":"When did the bridge open?"}. Approve or reject this call.\n\nIt said: Let me ask.',
      inputs: { decision: { type: 'options', options: ['approve', 'reject'] }, arguments: { type: 'object', value: { user_prompt: 'When did the bridge open?' } }, reason: { type: 'line' } },
    });
    expect(model.calls - before).toBe(1);

    const runId = first.json.run_id as string;
    const answers = await Promise.all(Array.from({ length: 100 }, () => api.call('POST', execute, { body: { run_id: runId, turn_number: 1, run_input: { inputs: { decision: 'approve' } } } })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    // the others are told the turn was taken: answered already, or being answered
    for (const refused of answers.filter((a) => a.status !== 200)) {
      expect(refused.status).toBe(409);
      expect(['turn_conflict', 'turn_in_progress']).toContain(refused.json.code);
    }
    const done = answers.find((a) => a.status === 200)!;
    expect(done.json).toMatchObject({ status: 'completed', turn_number: 2 });
    expect(JSON.stringify(done.json.events)).toContain('Report: The bridge opened in 1932.');
    // main round 1 (turn 1); the researcher's round and main round 2 (turn 2): each once
    expect(model.calls - before).toBe(3);

    const turn = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/2`);
    expect(turn.json.request.actor.kind).toBe('admin_key');
    expect(turn.json.request.run_input.inputs).toEqual({ decision: 'approve' });
  });
});

describe('tool-call approvals across processes', () => {
  let bundle: string;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'easel-approvals-'));
    bundle = join(dir, 'server.cjs');
    await build({ entryPoints: [fileURLToPath(new URL('../reliability/crash-server.ts', import.meta.url))], bundle: true, platform: 'node', format: 'cjs', target: 'node20', outfile: bundle, logLevel: 'error' });
  });
  afterAll(() => {
    if (bundle) rmSync(dirname(bundle), { recursive: true, force: true });
  });

  async function startServer(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string }> {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
    const child = spawn(process.execPath, [bundle, '0'], { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      child.stdout?.on('data', (d: Buffer) => String(d).includes('ready') && resolve());
      child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
    });
    return { child, url: `http://127.0.0.1:${port}` };
  }

  it('pause in one server process, answered in another: no model round made twice', async () => {
    const tenant = newTenant();
    const key = `approvals-${randomBytes(12).toString('hex')}`;
    await putApiKey(testStore(), { tenant, id: randomBytes(8).toString('hex'), name: 'admin', scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(key) });
    await createWorkflow(testStore(), { tenant, id: 'approvals', name: 'approvals', dsl: DSL });
    const { endpoint, tableName } = testTable();
    const env = {
      ...process.env,
      EASEL_DYNAMODB_ENDPOINT: endpoint,
      EASEL_DYNAMODB_TABLE: tableName,
      EASEL_LLM_BASE_URL: model.url,
      EASEL_LLM_DEFAULT_MODEL: 'openai:approvals',
      EASEL_AUTH_CACHE_MS: '0',
      POWERTOOLS_LOG_LEVEL: 'ERROR',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    };
    const post = (url: string, body: unknown) =>
      fetch(`${url}/workflows/v1/workflows/approvals/execute`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }));
    const before = model.calls;
    const one = await startServer(env);
    const first = await post(one.url, { run_input: { query: 'Write about the bridge.' } });
    one.child.kill();
    expect(first.json).toMatchObject({ status: 'waiting_for_input', next_input_hint: { component_id: 'Agent:Main' } });

    const two = await startServer(env);
    try {
      const second = await post(two.url, { run_id: first.json.run_id, turn_number: 1, run_input: { inputs: { decision: 'reject', reason: 'ask nobody' } } });
      expect(second.status).toBe(200);
      expect(JSON.stringify(second.json.events)).toContain('Report: The user rejected this tool call: ask nobody Do not make it again; go on without it.');
      // main round 1 in the first process, main round 2 in the second; the researcher never ran
      expect(model.calls - before).toBe(2);
    } finally {
      two.child.kill();
    }
  });
});
