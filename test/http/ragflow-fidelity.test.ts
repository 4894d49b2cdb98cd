/**
 * The RAGFlow side as RAGFlow behaves (infiniflow/ragflow b1b8cd6): the events of each session
 * path against a table read from its code, Begin's rules, Idempotency-Key on every completion
 * route, and a stock template classifying plain questions through a local model server.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newTenant, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer, type RecordedRequest } from '../llm/openai-server';

let api: Served;
let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: classify(body) });
  api = await serveApp(testEngine({ openaiUrl: model.url }));
});
afterAll(async () => {
  await api.close();
  await model.close();
});

const rf = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  api.call(method, `/api/v1${path}`, { ...(body !== undefined ? { body } : {}), ...(headers ? { headers } : {}) });

type Frame = { event: string; task_id: string; session_id: string; data: Record<string, unknown> };

/** Event names, a Message's deltas counted once (RAGFlow streams a Message as deltas too). */
const names = (got: Frame[]) => got.map((f) => f.event).filter((e, i, all) => !(e === 'message' && all[i - 1] === 'message'));

function frames(text: string): Frame[] {
  const all = text.split('\n\n').filter((f) => f.trim() !== '').map((f) => f.slice(5).trim());
  expect(all.at(-1)).toBe('[DONE]');
  return all.slice(0, -1).map((f) => JSON.parse(f) as Frame);
}

async function newAgent(dsl: unknown, title = `Agent ${Math.random().toString(16).slice(2)}`): Promise<string> {
  const created = await rf('POST', '/agents', { title, dsl });
  expect(created.json.code).toBe(0);
  return created.json.data.id as string;
}

const node = (name: string, params: Record<string, unknown>, downstream: string[]) => ({ obj: { component_name: name, params }, downstream, upstream: [] });

/** Begin (one field) → Message: no model, so every event is the engine's own. */
const oneField = {
  components: {
    begin: node('Begin', { mode: 'conversational', inputs: { topic: { name: 'Topic', type: 'line', optional: false } } }, ['Message:Say']),
    'Message:Say': node('Message', { content: ['About {begin@topic}.'] }, []),
  },
};

/** Begin (two fields) → Message. */
const twoFields = {
  components: {
    begin: node('Begin', { mode: 'conversational', prologue: 'Two things, please.', inputs: { a: { name: 'A', type: 'line', optional: false }, b: { name: 'B', type: 'line', optional: false } } }, ['Message:Say']),
    'Message:Say': node('Message', { content: ['a={begin@a} b={begin@b}'] }, []),
  },
};

/**
 * The events RAGFlow sends for Begin → Message, by session path (agent_api.py): the `workflow`
 * path (a new session from /agents/chat/completions, or one it started) forwards every canvas
 * event, node_started before each batch, message_end then node_finished after a Message; the
 * `agent` path (a session from POST /agents/{id}/sessions) forwards node_finished, message,
 * message_end, user_inputs and workflow_finished reduced to its usage.
 */
const EVENT_TABLE = {
  workflow: ['workflow_started', 'node_started', 'node_finished', 'node_started', 'message', 'message_end', 'node_finished', 'workflow_finished'],
  agent: ['node_finished', 'message', 'message_end', 'node_finished', 'workflow_finished'],
} as const;

describe('events as RAGFlow sends them, by path', () => {
  it.each([false, true])('a new session (workflow path), return_trace %s', async (trace) => {
    const agentId = await newAgent(oneField);
    const res = await rf('POST', '/agents/chat/completions', { agent_id: agentId, query: 'tides', stream: true, return_trace: trace });
    const got = frames(res.text);
    expect(names(got)).toEqual(EVENT_TABLE.workflow);
    const sessionId = got[0]?.session_id as string;
    expect(got.every((f) => f.task_id === sessionId && f.session_id === sessionId)).toBe(true);
    expect(got.filter((f) => f.event === 'message').map((f) => f.data.content).join('')).toBe('About tides.');
    // the workflow path sends workflow_finished whole
    expect(got.at(-1)?.data).toMatchObject({ outputs: expect.any(Object), usage: expect.any(Object) });

    const again = await rf('POST', '/agents/chat/completions', { agent_id: agentId, session_id: sessionId, query: 'waves', stream: true, return_trace: trace });
    expect(names(frames(again.text))).toEqual(EVENT_TABLE.workflow);

    const whole = await rf('POST', '/agents/chat/completions', { agent_id: agentId, query: 'reefs', return_trace: trace });
    // no `stream`: RAGFlow answers once, with the last event and the content joined
    expect(whole.json.data).toMatchObject({ event: 'workflow_finished', data: { content: 'About reefs.', reference: {} } });
    if (trace) expect((whole.json.data.data.trace as { component_id: string }[]).map((t) => t.component_id)).toEqual(['begin', 'Message:Say']);
    else expect(whole.json.data.data.trace).toBeUndefined();
  });

  it.each([false, true])('a created session (agent path), return_trace %s', async (trace) => {
    const agentId = await newAgent(oneField);
    const session = (await rf('POST', `/agents/${agentId}/sessions`, {})).json.data.id as string;
    const res = await rf('POST', '/agents/chat/completions', { agent_id: agentId, session_id: session, query: 'tides', stream: true, return_trace: trace });
    const got = frames(res.text);
    expect(names(got)).toEqual(EVENT_TABLE.agent);
    expect(got.every((f) => f.task_id === session)).toBe(true);
    expect(Object.keys(got.at(-1)?.data ?? {})).toEqual(['usage']);
    const finished = got.filter((f) => f.event === 'node_finished');
    if (trace) expect(finished.map((f) => (f.data.trace as unknown[]).length)).toEqual([1, 2]);
    else expect(finished.every((f) => f.data.trace === undefined)).toBe(true);

    const whole = await rf('POST', '/agents/chat/completions', { agent_id: agentId, session_id: session, query: 'reefs', stream: false, return_trace: trace });
    // the session path answers with message_end, the content joined, and the run's usage
    expect(whole.json.data).toMatchObject({ event: 'message_end', task_id: session, data: { content: 'About reefs.', reference: {}, usage: { calls: 0 } } });
    if (trace) expect((whole.json.data.data.trace as { component_id: string }[]).map((t) => t.component_id)).toEqual(['begin', 'Message:Say']);
    else expect(whole.json.data.data.trace).toBeUndefined();
  });
});

describe('Begin as RAGFlow', () => {
  it('fills a Begin with one field from the query; explicit inputs win; a dict query maps its keys', async () => {
    const one = await newAgent(oneField);
    const said = async (body: Record<string, unknown>) => (await rf('POST', `/agents/${one}/completions`, body)).json.data.data.content;
    expect(await said({ question: 'tides' })).toBe('About tides.');
    expect(await said({ question: 'tides', inputs: { topic: { type: 'line', value: 'moons' } } })).toBe('About moons.');
    const two = await newAgent(twoFields);
    const twoSaid = async (body: Record<string, unknown>) => (await rf('POST', `/agents/${two}/completions`, body)).json.data.data.content;
    expect(await twoSaid({ query: { a: 'x', b: { value: 'y' } } })).toBe('a=x b=y');
    // two fields and a plain query: nothing filled, and Begin does not ask (RAGFlow never pauses there)
    expect(await twoSaid({ query: 'hello' })).toBe('a= b=');
    // nor in a session created first
    const session = (await rf('POST', `/agents/${two}/sessions`, {})).json.data.id as string;
    expect(await twoSaid({ query: 'hello', session_id: session })).toBe('a= b=');
  });

  it('keeps the Begin form on the native API, and each run keeps the rules of the API that started it', async () => {
    const workflow = (await api.call('POST', '/workflows/v1/workflows', { body: { name: `native ${Date.now()}`, dsl: twoFields } })).json.id as string;
    const native = await api.call('POST', `/workflows/v1/workflows/${workflow}/execute`, { body: { run_input: { query: 'hello' } } });
    expect(native.json).toMatchObject({ status: 'waiting_for_input', next_input_hint: { component_id: 'begin' } });
    // the native run, continued through RAGFlow's route, still asks for its form
    const continued = await rf('POST', `/agents/${workflow}/completions`, { session_id: native.json.run_id, question: 'again' });
    expect(continued.json.data.event).toBe('user_inputs');
    // one field: the native API fills it from the query too
    const single = (await api.call('POST', '/workflows/v1/workflows', { body: { name: `single ${Date.now()}`, dsl: oneField } })).json.id as string;
    const filled = await api.call('POST', `/workflows/v1/workflows/${single}/execute`, { body: { run_input: { query: 'tides' } } });
    expect(filled.json).toMatchObject({ status: 'completed', outputs: { content: 'About tides.' } });
  });

  it('gives a Begin without a prologue RAGFlow’s default one', async () => {
    const agentId = await newAgent(oneField);
    const session = (await rf('POST', `/agents/${agentId}/sessions`, {})).json.data;
    expect(session.messages[0]).toEqual({ role: 'assistant', content: "Hi! I'm your smart assistant. What can I do for you?" });
    const other = await newAgent(twoFields);
    expect((await rf('POST', `/agents/${other}/sessions`, {})).json.data.messages[0].content).toBe('Two things, please.');
  });
});

/** A workflow whose answer comes from the model: every turn calls it once. */
const modelled = {
  components: {
    begin: node('Begin', { mode: 'conversational' }, ['LLM:Answer']),
    'LLM:Answer': node('LLM', { llm_id: '', sys_prompt: 'Be brief.', prompts: [{ role: 'user', content: '{sys.query}' }] }, ['Message:Say']),
    'Message:Say': node('Message', { content: ['{LLM:Answer@content}'] }, []),
  },
};

describe('Idempotency-Key on the RAGFlow-side completion routes', () => {
  const routes = [
    { name: '/agents/chat/completions', call: (agent: string, q: string, key: string, extra: Record<string, unknown> = {}) => rf('POST', '/agents/chat/completions', { agent_id: agent, query: q, ...extra }, { 'idempotency-key': key }) },
    { name: '/agents/{id}/completions', call: (agent: string, q: string, key: string, extra: Record<string, unknown> = {}) => rf('POST', `/agents/${agent}/completions`, { question: q, ...extra }, { 'idempotency-key': key }) },
    {
      name: '/agents_openai/{id}/chat/completions',
      call: (agent: string, q: string, key: string, extra: Record<string, unknown> = {}) =>
        rf('POST', `/agents_openai/${agent}/chat/completions`, { messages: [{ role: 'user', content: q }], ...extra }, { 'idempotency-key': key }),
    },
  ];

  it.each(routes)('$name: a retry calls nothing and answers the stored answer; another body is refused', async (route) => {
    const agentId = await newAgent(modelled);
    const key = `k-${Math.random().toString(16).slice(2)}`;
    const before = model.calls;
    const first = await route.call(agentId, 'what is a tide', key);
    expect(model.calls).toBe(before + 1);
    const retry = await route.call(agentId, 'what is a tide', key);
    expect(model.calls).toBe(before + 1);
    const content = (r: typeof first) => (r.json.choices ? r.json.choices[0].message.content : r.json.data.data.content) as string;
    const session = (r: typeof first) => (r.json.choices ? r.json.id : r.json.data.session_id) as string;
    expect(content(first)).toBe('answer: what is a tide');
    expect(content(retry)).toBe(content(first));
    expect(session(retry)).toBe(session(first));
    const other = await route.call(agentId, 'something else', key);
    expect(other.json).toMatchObject({ code: 101 });
    expect(model.calls).toBe(before + 1);

    // a continuing turn too, streamed: the retry replays the stored events
    const next = `${key}-2`;
    const sessionId = session(first);
    const continued = await route.call(agentId, 'and a wave', next, { session_id: sessionId, stream: true });
    expect(model.calls).toBe(before + 2);
    const replayed = await route.call(agentId, 'and a wave', next, { session_id: sessionId, stream: true });
    expect(model.calls).toBe(before + 2);
    expect(streamedText(replayed.text)).toBe(streamedText(continued.text));
    expect(streamedText(continued.text)).toBe('answer: and a wave');
  });

  it('refuses a malformed key in RAGFlow’s envelope', async () => {
    const agentId = await newAgent(modelled);
    const res = await rf('POST', `/agents/${agentId}/completions`, { question: 'x' }, { 'idempotency-key': 'not a key!' });
    expect(res.json).toEqual({ code: 101, message: 'Idempotency-Key must be 1-255 characters of A-Z a-z 0-9 _ . : -' });
  });
});

/** The text a streamed answer shows, RAGFlow's frames or OpenAI's chunks. */
function streamedText(text: string): string {
  return text
    .split('\n\n')
    .map((f) => f.replace(/^data: ?/, '').trim())
    .filter((f) => f !== '' && f !== '[DONE]')
    .map((f) => JSON.parse(f) as { event?: string; data?: { content?: string }; choices?: { delta: { content?: string } }[] })
    .map((f) => (f.choices ? (f.choices[0]?.delta.content ?? '') : f.event === 'message' ? (f.data?.content ?? '') : ''))
    .join('');
}

// ---- a stock template, asked as RAGFlow users ask it ------------------------------------------

const CORPUS = resolve(process.env.EASEL_RAGFLOW_CORPUS ?? resolve(__dirname, '../../../shared/ragflow'));
const DISPATCHER = resolve(CORPUS, 'agent/templates/customer_feedback_dispatcher.json');

/**
 * The model server's answer: what a model asked to categorize would say — the category whose
 * name the prompt offers and the review's words point to — else an echo of the question.
 */
function classify(body: RecordedRequest['body']): string {
  const prompt = body.messages.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content))).join('\n');
  // the conversation comes as `USER: "..." | ASSISTANT: "..." | USER: "<latest>"`: judge the latest
  const last = String(body.messages.at(-1)?.content ?? '');
  const review = ([...last.matchAll(/USER: "([^"]*)"/g)].at(-1)?.[1] ?? last).toLowerCase();
  if (prompt.includes('Positive review') && prompt.includes('Negative review')) {
    return /love|great|excellent|perfect/.test(review) ? 'Positive review' : 'Negative review';
  }
  if (prompt.includes('After-sales issues') && prompt.includes('Transportation issue')) {
    return /deliver|shipping|courier|arrived|transport/.test(review) ? 'Transportation issue' : 'After-sales issues';
  }
  return `answer: ${String(body.messages.at(-1)?.content ?? '')}`;
}

describe.skipIf(!existsSync(DISPATCHER))('customer_feedback_dispatcher, asked plain questions', () => {
  const reviews = [
    { review: 'I love this blender, it works perfectly.', category: 'Positive review' },
    { review: 'The parcel was never delivered and the courier lost it.', category: 'Transportation issue' },
    { review: 'It broke after a week and the warranty service ignores me.', category: 'After-sales issues' },
  ];

  it('classifies each review through the RAGFlow route and the OpenAI-compatible route', async () => {
    const template = JSON.parse(readFileSync(DISPATCHER, 'utf8')) as { dsl: unknown };
    const agentId = await newAgent(template.dsl, `Dispatcher ${Date.now()}`);
    const openai = new OpenAI({ apiKey: api.adminKey, baseURL: `${api.url}/api/v1/agents_openai/${agentId}`, maxRetries: 0 });
    for (const { review, category } of reviews) {
      const viaRagflow = await rf('POST', '/agents/chat/completions', { agent_id: agentId, query: review, stream: false });
      expect(viaRagflow.json.data.event).toBe('workflow_finished');
      expect(viaRagflow.json.data.data.content).toContain(`Customer's original review: ${review}`);
      expect(viaRagflow.json.data.data.content).toMatch(new RegExp(`Final review category is: \\s*${category}`));
      const viaOpenai = await openai.chat.completions.create({ model: 'any', messages: [{ role: 'user', content: review }] });
      expect(viaOpenai.choices[0]?.message.content).toMatch(new RegExp(`Final review category is: \\s*${category}`));
    }
    // a task-mode agent takes another review in the same session, as RAGFlow runs every message from Begin
    const session = (await rf('POST', `/agents/${agentId}/sessions`, {})).json.data.id as string;
    for (const { review, category } of reviews) {
      const asked = await rf('POST', '/agents/chat/completions', { agent_id: agentId, session_id: session, query: review, stream: true });
      const text = streamedText(asked.text);
      expect(text).toContain(`Customer's original review: ${review}`);
      expect(text).toMatch(new RegExp(`Final review category is: \\s*${category}`));
    }
    // a stranger's key reaches none of it
    const stranger = await api.addKey(newTenant(), 'admin');
    expect((await api.call('POST', '/api/v1/agents/chat/completions', { key: stranger, body: { agent_id: agentId, query: 'x' } })).json.code).toBe(102);
  });
});
