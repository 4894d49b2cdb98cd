/**
 * Tool-call approvals over HTTP. The native API shows the approval in `next_input_hint`; 100
 * approvals sent at once commit one turn and the rest are told the turn was taken; the turn
 * record names who approved with what, and records the decision among its calls. Across real
 * processes: the pause is made by one server process, which then exits, and answered through
 * another; the model server counts each round once. And an Agent with parallel calls, some
 * approved first, and a sub-Agent with approvals of its own, each pause answered by a new server
 * process (approve with an edit, approve, reject): the same events and outputs as one Canvas
 * kept in this process, and the model and Tavily servers count each call once.
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
import { Canvas, type CanvasEvent, compileWorkflow } from '../../lib/canvas';
import { withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { createToolRegistry } from '../../lib/tools/registry';
import { tavilyTools } from '../../lib/tools/tavily';
import { mergeMessageDeltas } from '../../lib/turns/response';
import { collect } from '../helpers/canvas';
import { testServices } from '../helpers/services';
import { TAVILY_TEST_KEY, TavilyServer } from '../helpers/tavily-server';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import { createWorkflow } from '../../lib/store/workflows';
import { testTable } from '../helpers/dynamo';
import { graph } from '../helpers/dsl-builder';
import { newTenant, testEngine, testStore } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

let model: OpenAiServer;
let api: Served;
let tavily: TavilyServer;

beforeAll(async () => {
  [model, tavily] = await Promise.all([
    OpenAiServer.start(),
    TavilyServer.start({
      pages: [
        { url: 'https://history.example/bridge', title: 'Harbour bridge', content: 'The harbour bridge opened in 1932.' },
        { url: 'https://history.example/lighthouse', title: 'Old lighthouse', content: 'The old lighthouse keeper lit it first in 1871.' },
        { url: 'https://history.example/ferry', title: 'Ferry', content: 'The ferry ran until 1955.' },
      ],
    }),
  ]);
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
  await Promise.all([model.close(), tavily.close(), api?.close()]);
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

  it('an Agent with parallel calls and a sub-Agent, each pause answered by a new process: the same as one Canvas, each call made once', async () => {
    const search = { component_name: 'TavilySearch', name: 'TavilySearch', params: { max_results: 1 } };
    const params = (sysPrompt: string, extra: Record<string, unknown>) => ({ llm_id: 'writer@Local', sys_prompt: sysPrompt, max_rounds: 3, cite: false, ...extra });
    const dsl = graph({
      begin: ['Begin', { mode: 'task' }, ['Agent:Main']],
      'Agent:Main': ['Agent', params('You write histories.', {
        prompts: [{ role: 'user', content: '{sys.query}' }],
        approval: { tavily_search: { query: { matches: 'lighthouse' } }, Ferryman: true },
        tools: [search, { component_name: 'Agent', name: 'Ferryman', params: params('You know the ferry.', { prompts: [], user_prompt: '', description: 'Knows the ferry.', approval: ['tavily_search'], tools: [search] }) }],
      }), ['Message:Out']],
      'Message:Out': ['Message', { content: ['{Agent:Main@content}'] }],
    });
    const respond = model.respond;
    // three calls in one round (a search that needs approval, one that does not, the sub-Agent); the sub-Agent searches once
    model.respond = (body) => {
      const results = body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content));
      if (String(body.messages[0]?.content).startsWith('You know the ferry')) {
        return results.length === 0 ? { kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: { query: 'ferry timetable' } }], text: 'Checking the ferry.' } : { kind: 'text', text: `Ferry: ${results.join(' / ')}` };
      }
      return results.length === 0
        ? { kind: 'tools', text: 'Three at once.', calls: [{ name: 'tavily_search_0', arguments: { query: 'old lighthouse' } }, { name: 'tavily_search_0', arguments: { query: 'harbour bridge' } }, { name: 'Ferryman_1', arguments: { user_prompt: 'When did the ferry stop?' } }] }
        : { kind: 'text', text: `History: ${results.map((r) => /\d{4}|rejected/.exec(r)?.[0] ?? r.slice(0, 40)).join(', ')}` };
    };
    const answers = [
      { decision: 'approve', arguments: { query: 'old lighthouse keeper' } },
      { decision: 'approve' },
      { decision: 'reject', reason: 'the timetable is known' },
    ];
    /** Events as both sides give them: message deltas merged, times and tool call ids left out. */
    const comparable = (events: readonly CanvasEvent[]) => JSON.parse(JSON.stringify(mergeMessageDeltas(events)).replace(/call_\d+_\d+/g, 'call'), (key, value: unknown) => (key === 'created_at' || key === 'elapsed_time' ? 0 : value)) as unknown;
    const counts = () => ({ model: model.calls, tavily: tavily.requests.length });
    const since = (from: ReturnType<typeof counts>) => ({ model: model.calls - from.model, tavily: tavily.requests.length - from.tavily });
    try {
      // one Canvas in this process
      const tools = createToolRegistry(tavilyTools({ baseUrl: `${tavily.url}/` }));
      const services = { ...testServices({ openaiUrl: model.url, allow: ['127.0.0.1'], secrets: { TAVILY_API_KEY: TAVILY_TEST_KEY } }), tools };
      const canvas = Canvas.create(compileWorkflow(dsl, withComponents(createAgent(tools))), { seed: 1, clock: () => Date.UTC(2026, 5, 1), services });
      const local = counts();
      const continuous = [await collect(canvas.run({ query: 'Tell the harbour history.' }))];
      for (const inputs of answers) continuous.push(await collect(canvas.run({ inputs })));
      const inProcess = since(local);
      // main: the round and the answer; the sub-Agent: its round and its answer; searches: the bridge and the edited lighthouse one
      expect(inProcess).toEqual({ model: 4, tavily: 2 });
      expect(canvas.serialize().status).toBe('completed');

      // a server process per turn, each exiting once its turn is answered
      const tenant = newTenant();
      const key = `approvals-${randomBytes(12).toString('hex')}`;
      await putApiKey(testStore(), { tenant, id: randomBytes(8).toString('hex'), name: 'admin', scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(key) });
      await createWorkflow(testStore(), { tenant, id: 'histories', name: 'histories', dsl });
      const { endpoint, tableName } = testTable();
      const env = {
        ...process.env,
        EASEL_DYNAMODB_ENDPOINT: endpoint,
        EASEL_DYNAMODB_TABLE: tableName,
        EASEL_LLM_BASE_URL: model.url,
        EASEL_LLM_DEFAULT_MODEL: 'openai:approvals',
        EASEL_TOOL_TAVILY_BASE_URL: `${tavily.url}/`,
        EASEL_SECRET_TAVILY_API_KEY: TAVILY_TEST_KEY,
        EASEL_OPERATOR_SECRETS_FOR_TENANTS: JSON.stringify({ [tenant]: ['TAVILY_API_KEY'] }),
        EASEL_SSRF_ALLOW: '127.0.0.1',
        EASEL_AUTH_CACHE_MS: '0',
        POWERTOOLS_LOG_LEVEL: 'ERROR',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      };
      const post = (url: string, body: unknown) =>
        fetch(`${url}/workflows/v1/workflows/histories/execute`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, json: (await r.json()) as any }));
      const remote = counts();
      const responses: any[] = [];
      for (const [i, inputs] of [undefined, ...answers].entries()) {
        const server = await startServer(env);
        try {
          const body = i === 0 ? { run_input: { query: 'Tell the harbour history.' } } : { run_id: responses[0].run_id, turn_number: i, run_input: { inputs } };
          const answered = await post(server.url, body);
          expect(answered.status, JSON.stringify(answered.json)).toBe(200);
          responses.push(answered.json);
        } finally {
          server.child.kill();
        }
      }
      expect(responses.map((r) => r.status)).toEqual(['waiting_for_input', 'waiting_for_input', 'waiting_for_input', 'completed']);
      expect(responses.map((r) => comparable(r.events))).toEqual(continuous.map(comparable));
      expect(since(remote)).toEqual(inProcess);
      // the pauses came in the order the calls were made, the sub-Agent's own surfacing last
      expect(responses.slice(0, 3).map((r) => /call (\w+) with (\{[^}]*\})/.exec(r.next_input_hint.tips)?.slice(1))).toEqual([
        ['tavily_search', '{"query":"old lighthouse"}'],
        ['Ferryman', '{"user_prompt":"When did the ferry stop?"}'],
        ['tavily_search', '{"query":"ferry timetable"}'],
      ]);
      // the edited search found the keeper, the sub-Agent was told its search was rejected
      expect(responses.at(-1).outputs).toEqual({ content: 'Three at once.History: 1871, 1932, rejected' });
      expect(JSON.stringify(responses.at(-1).events)).toContain('"result":"Checking the ferry.Ferry: The user rejected this tool call: the timetable is known');
    } finally {
      model.respond = respond;
    }
  }, 120_000);
});
