/**
 * Text sent while a form waits (DESIGN §7: recorded, and the form asked again) is reported as
 * not used, through every entry point: the native execute (`notice`, JSON and the SSE
 * `turn_response`, kept in the turn record), RAGFlow's completions (`data.notice`, a `notice`
 * frame before `[DONE]`) and the OpenAI-compatible route (`easel.notice`). Turns that use what
 * they were sent carry none.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUERY_NOT_USED_MESSAGE } from '../../lib/turns/response';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp, sseFrames } from '../helpers/http';

const form = graph({
  begin: ['Begin', { mode: 'conversational' }, ['UserFillUp:Ask']],
  'UserFillUp:Ask': ['UserFillUp', { tips: 'Your name?', inputs: { name: { name: 'Name', type: 'line', optional: false } } }, ['Message:Hi']],
  'Message:Hi': ['Message', { content: ['hi {UserFillUp:Ask@name} ({sys.query})'] }],
});
const NOTICE = { code: 'query_not_used', message: QUERY_NOT_USED_MESSAGE };

let api: Served;
let workflowId: string;
beforeAll(async () => {
  api = await serveApp(testEngine());
  workflowId = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'form', dsl: form } })).json.id as string;
});
afterAll(async () => {
  await api.close();
});

const execute = (body: unknown, headers: Record<string, string> = {}) => api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body, headers });

describe('the native execute', () => {
  it('says a query to a waiting run was not used; the form is asked again and the query recorded', async () => {
    const first = await execute({ run_input: { query: 'hello' } });
    expect(first.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
    expect(first.json).not.toHaveProperty('notice');
    const runId = first.json.run_id as string;

    const text = await execute({ run_id: runId, turn_number: 1, run_input: { query: 'what is this form for?' } });
    expect(text.json).toMatchObject({ status: 'waiting_for_input', turn_number: 2, notice: NOTICE, next_input_hint: { component_id: 'UserFillUp:Ask' } });
    // kept with the turn: read back, it says the same
    expect((await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/2`)).json).toMatchObject({ request: { run_input: { query: 'what is this form for?' } }, response: { notice: NOTICE } });

    // with empty inputs too (they clear the form, and answer nothing)
    const emptied = await execute({ run_id: runId, turn_number: 2, run_input: { query: 'still here', inputs: {} } });
    expect(emptied.json).toMatchObject({ status: 'waiting_for_input', turn_number: 3, notice: NOTICE });

    // inputs beside the query answer the form: nothing to say; the recorded query is sys.query
    const answered = await execute({ run_id: runId, turn_number: 3, run_input: { query: 'here you go', inputs: { name: 'Ada' } } });
    expect(answered.json).toMatchObject({ status: 'completed', turn_number: 4 });
    expect(answered.json).not.toHaveProperty('notice');
    expect(JSON.stringify(answered.json.events)).toContain('hi Ada (here you go)');
    // a query on a finished pass starts a new one: used
    const again = await execute({ run_id: runId, turn_number: 4, run_input: { query: 'again' } });
    expect(again.json).toMatchObject({ status: 'waiting_for_input', turn_number: 5 });
    expect(again.json).not.toHaveProperty('notice');
  });

  it('says so in the streamed turn_response, and a replay says it again', async () => {
    const runId = (await execute({ run_input: { query: 'hello' } })).json.run_id as string;
    const key = 'a1b2c3d4-notice-replay-0001';
    const streamed = await execute({ run_id: runId, turn_number: 1, run_input: { query: 'hm?' } }, { accept: 'text/event-stream', 'idempotency-key': key });
    const end = sseFrames(streamed.text).at(-1);
    expect(end).toMatchObject({ event: 'turn_response', data: { turn_number: 2, notice: NOTICE } });
    const replayed = await execute({ run_id: runId, turn_number: 1, run_input: { query: 'hm?' } }, { 'idempotency-key': key });
    expect(replayed.json).toMatchObject({ turn_number: 2, notice: NOTICE });
  });
});

describe("RAGFlow's completions", () => {
  const complete = (body: Record<string, unknown>) => api.call('POST', `/api/v1/agents/${workflowId}/completions`, { body });

  it('answer data.notice beside the answer, without streaming', async () => {
    const first = await complete({ question: 'hello' });
    const sessionId = first.json.data.session_id as string;
    expect(first.json.data).toMatchObject({ event: 'user_inputs' });
    expect(first.json.data).not.toHaveProperty('notice');
    const text = await complete({ question: 'what is this?', session_id: sessionId });
    expect(text.json).toMatchObject({ code: 0, data: { event: 'user_inputs', session_id: sessionId, notice: NOTICE } });
    const answered = await complete({ question: '', session_id: sessionId, inputs: { name: { type: 'line', value: 'Ada' } } });
    expect(answered.json.data.notice).toBeUndefined();
    expect(answered.json.data.data.content).toContain('hi Ada');
  });

  it('stream a notice frame before [DONE]', async () => {
    const sessionId = (await complete({ question: 'hello' })).json.data.session_id as string;
    const streamed = await complete({ question: 'what is this?', session_id: sessionId, stream: true });
    const frames = streamed.text.split('\n\n').filter((f) => f.startsWith('data:')).map((f) => f.slice('data:'.length));
    expect(frames.at(-1)).toBe('[DONE]');
    const notice = JSON.parse(frames.at(-2) as string) as Record<string, unknown>;
    expect(notice).toMatchObject({ event: 'notice', session_id: sessionId, task_id: sessionId, data: NOTICE });
    expect(frames.slice(0, -2).map((f) => (JSON.parse(f) as { event: string }).event)).toContain('user_inputs');
  });
});

describe('the OpenAI-compatible route', () => {
  const chat = (body: Record<string, unknown>) => api.call('POST', `/api/v1/agents_openai/${workflowId}/chat/completions`, { body: { model: 'any', ...body } });

  it('carries easel.notice (null when there is none), streamed or not', async () => {
    const first = await chat({ messages: [{ role: 'user', content: 'hello' }] });
    expect(first.json.easel).toMatchObject({ status: 'waiting_for_input', notice: null });
    const sessionId = first.json.id as string;
    const text = await chat({ session_id: sessionId, messages: [{ role: 'user', content: 'what is this?' }] });
    expect(text.json.easel).toMatchObject({ status: 'waiting_for_input', notice: NOTICE });
    expect(text.json.choices[0].message.content).toBe('Your name?');

    const streamed = await chat({ session_id: sessionId, stream: true, messages: [{ role: 'user', content: 'and now?' }] });
    const chunks = streamed.text.split('\n\n').filter((f) => f.startsWith('data: ') && !f.includes('[DONE]')).map((f) => JSON.parse(f.slice('data: '.length)) as { easel: { notice: unknown }; choices: { finish_reason: string | null }[] });
    const last = chunks.at(-1);
    expect(last?.choices[0]?.finish_reason).toBe('stop');
    expect(last?.easel.notice).toEqual(NOTICE);
  });
});
