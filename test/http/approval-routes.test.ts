/**
 * Tool-call approvals on every route that answers forms — the native execute, RAGFlow's
 * completions, the OpenAI-compatible chat (the official `openai` client), a form link and the
 * `easel chat` command: each shows the approval, refuses an edit that does not fit the tool's
 * parameters (422 `invalid_inputs` natively, RAGFlow's argument error, code 101, on its routes) naming the
 * field and what is wrong and consuming no turn, and runs the call with an edit that fits. The
 * model server counts the calls: a refused answer makes none.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

let model: OpenAiServer;
let api: Served;

beforeAll(async () => {
  model = await OpenAiServer.start();
  // the main Agent asks its researcher once, then reports what it said; the researcher repeats its query
  model.respond = (body) => {
    const system = String(body.messages[0]?.content);
    if (system.startsWith('You look things up')) return { kind: 'text', text: `Looked up: ${/QUERY:\n(.*)/.exec(String(body.messages.at(-1)?.content))?.[1] ?? '?'}` };
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

/** An edit the researcher's parameters refuse (`user_prompt` must be text), and what is said of it. */
const BAD_EDIT = { user_prompt: 1932 };
const BAD_MESSAGE = 'does not fit its JSON Schema: user_prompt: expected string, got number 1932';
const GOOD_EDIT = { user_prompt: 'When did the harbour bridge open?', context: 'the harbour of the old town' };
// the Agent's answer is the text of all its rounds, the one before the pause included
const ANSWER = 'Let me ask.Report: Looked up: When did the harbour bridge open?';

const text = (events: { event: string; data: { content?: string } }[]) => events.filter((e) => e.event === 'message').map((e) => e.data.content).join('');

describe('tool-call approvals on every route', () => {
  it('native execute: the hint shows the schema; a bad edit is 422 naming `arguments`, no turn used; a good one runs', async () => {
    const created = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'report', dsl: DSL } });
    const execute = `/workflows/v1/workflows/${created.json.id}/execute`;
    const first = await api.call('POST', execute, { body: { run_input: { query: 'Write about the bridge.' } } });
    expect(first.json.next_input_hint.inputs.arguments).toMatchObject({ type: 'object', value: { user_prompt: 'When did the bridge open?' }, schema: { required: ['user_prompt'] } });
    const runId = first.json.run_id as string;
    const calls = model.calls;

    const bad = await api.call('POST', execute, { body: { run_id: runId, turn_number: 1, run_input: { inputs: { decision: 'approve', arguments: BAD_EDIT } } } });
    expect(bad.status).toBe(422);
    expect(bad.json).toMatchObject({ code: 'invalid_inputs', fields: [{ component_id: 'Agent:Main', field: 'arguments', message: BAD_MESSAGE }] });
    expect((await api.call('GET', `/workflows/v1/workflow-runs/${runId}`)).json).toMatchObject({ turn_number: 1, status: 'waiting_for_input' });
    expect(model.calls).toBe(calls);

    const good = await api.call('POST', execute, { body: { run_id: runId, turn_number: 1, run_input: { inputs: { decision: 'approve', arguments: GOOD_EDIT } } } });
    expect(good.json).toMatchObject({ status: 'completed', turn_number: 2 });
    expect(text(good.json.events)).toBe(ANSWER);
    // the researcher's round and the main Agent's second round
    expect(model.calls).toBe(calls + 2);
  });

  it("RAGFlow completions: the approval is a user_inputs event; a bad edit is RAGFlow's argument error; {type, value} answers run", async () => {
    const created = await api.call('POST', '/api/v1/agents', { body: { title: `Report ${Date.now()}`, dsl: DSL } });
    const completions = `/api/v1/agents/${created.json.data.id}/completions`;
    const first = await api.call('POST', completions, { body: { question: 'Write about the bridge.', stream: false } });
    expect(first.json.data).toMatchObject({ event: 'user_inputs', data: { inputs: { decision: { type: 'options', options: ['approve', 'reject'] }, arguments: { type: 'object' } } } });
    const session = first.json.data.session_id as string;

    const bad = await api.call('POST', completions, { body: { question: '', stream: false, session_id: session, inputs: { decision: { type: 'options', value: 'approve' }, arguments: { type: 'object', value: BAD_EDIT } } } });
    expect(bad.json.code).toBe(101);
    expect(bad.json.message).toContain(`arguments (${BAD_MESSAGE})`);

    const good = await api.call('POST', completions, { body: { question: '', stream: false, session_id: session, inputs: { decision: { type: 'options', value: 'approve' }, arguments: { type: 'object', value: GOOD_EDIT } } } });
    expect(good.json.data).toMatchObject({ event: 'workflow_finished', data: { content: ANSWER } });
  });

  it('OpenAI-compatible chat: the pause is the tips with the fields in `easel`; a bad edit in metadata is refused; a good one streams the answer', async () => {
    const created = await api.call('POST', '/api/v1/agents', { body: { title: `Report OpenAI ${Date.now()}`, dsl: DSL } });
    const openai = new OpenAI({ apiKey: api.adminKey, baseURL: `${api.url}/api/v1/agents_openai/${created.json.data.id}`, maxRetries: 0 });
    const paused = await openai.chat.completions.create({ model: 'any', messages: [{ role: 'user', content: 'Write about the bridge.' }] });
    expect(paused.choices[0]?.message.content).toContain('The agent wants to call Researcher with {"user_prompt":"When did the bridge open?"}');
    const easel = (paused as unknown as { easel: { status: string; next_input_hint: { inputs: Record<string, unknown> } } }).easel;
    expect(easel.status).toBe('waiting_for_input');
    expect(Object.keys(easel.next_input_hint.inputs)).toEqual(['decision', 'arguments', 'reason']);

    // as RAGFlow answers this route's errors: its envelope, which the client hands back as it came
    const refused = (await openai.chat.completions.create({ model: 'any', messages: [{ role: 'user', content: 'approved' }], metadata: { session_id: paused.id, inputs: JSON.stringify({ decision: 'approve', arguments: BAD_EDIT }) } })) as unknown as { code: number; message: string };
    expect(refused.code).toBe(101);
    expect(refused.message).toContain(`arguments (${BAD_MESSAGE})`);

    const answered = await openai.chat.completions.create({
      model: 'any',
      stream: true,
      messages: [{ role: 'user', content: 'approved' }],
      metadata: { session_id: paused.id, inputs: JSON.stringify({ decision: 'approve', arguments: GOOD_EDIT }) },
    });
    let content = '';
    let final: { status: string; turn_number: number } | undefined;
    for await (const chunk of answered) {
      content += chunk.choices[0]?.delta.content ?? '';
      final = (chunk as unknown as { easel: typeof final }).easel;
    }
    expect(content).toBe(ANSWER);
    expect(final).toMatchObject({ status: 'completed', turn_number: 2 });
  });

  it('a form link: the page shows the approval; a bad edit is 422 naming `arguments`; the link still answers with a good one', async () => {
    const created = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'report', dsl: DSL } });
    const first = await api.call('POST', `/workflows/v1/workflows/${created.json.id}/execute`, { body: { run_input: { query: 'Write about the bridge.' } } });
    const { token } = (await api.call('POST', `/workflows/v1/workflow-runs/${first.json.run_id}/form-links`)).json;
    const answer = (inputs: Record<string, unknown>) => api.call('POST', '/workflows/v1/form-link', { key: null, headers: { 'easel-form-token': token }, body: { inputs } });
    const form = await api.call('GET', '/workflows/v1/form-link', { key: null, headers: { 'easel-form-token': token } });
    expect(form.json.inputs.arguments).toMatchObject({ type: 'object', schema: { required: ['user_prompt'] } });

    const bad = await answer({ decision: 'approve', arguments: BAD_EDIT });
    expect(bad.status).toBe(422);
    expect(bad.json).toMatchObject({ code: 'invalid_inputs', fields: [{ field: 'arguments', message: BAD_MESSAGE }] });
    expect(await answer({ decision: 'approve', arguments: GOOD_EDIT })).toMatchObject({ status: 200, json: { answered: true, status: 'completed', turn_number: 2 } });
    const turn = await api.call('GET', `/workflows/v1/workflow-runs/${first.json.run_id}/turns/2`);
    expect(text(turn.json.response.events)).toBe(ANSWER);
  });

  it('easel chat: the approval asked in the terminal; a bad edit is told and the form asked again; a good one runs', async () => {
    const created = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'report', dsl: DSL } });
    // the query; decision 1 (Approve), a bad edit, no reason; again with a good edit
    const answers = ['Write about the bridge.', '1', JSON.stringify(BAD_EDIT), '', '1', JSON.stringify(GOOD_EDIT), '', '/quit'];
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(process.execPath, [fileURLToPath(new URL('../../bin/easel.js', import.meta.url)), 'chat', created.json.id], {
        env: { ...process.env, EASEL_BASE_URL: api.url, EASEL_API_KEY: api.adminKey },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.on('error', reject);
      child.on('close', (exit) => resolve({ code: exit, stdout: out, stderr: err }));
      child.stdin.end(`${answers.join('\n')}\n`);
    });
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toContain('The agent wants to call Researcher with {"user_prompt":"When did the bridge open?"}');
    expect(stdout).toContain('1) Approve');
    expect(stdout).toContain(BAD_MESSAGE);
    expect(stdout).toContain(ANSWER);
    expect(stdout).toContain('turn 2: completed');
  }, 60_000);
});
