/**
 * Double-texting over HTTP: for every on_busy strategy, a scripted race — a turn whose model the
 * test holds, a second message while it runs, then the model let go — on synchronous and async
 * turns, ends in the documented state: the turns the run committed, their statuses, what the
 * model was asked, and the run's conversation, with no message lost or doubled. The tests follow
 * the order of events (the model holds its answer until the test opens its gate; the in-process
 * queue is waited on until it has nothing in hand), never the clock.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { getHead, loadSession } from '../../lib/store/sessions';
import { processBatch } from '../../lib/turns/queue';
import { graph } from '../helpers/dsl-builder';
import { newWorkflow, testEngine } from '../helpers/engine';
import { gate } from '../helpers/gate';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

/** Two model calls a turn: a thought (no history), then the answer (with the conversation). */
const CHAT = graph({
  begin: ['Begin', { mode: 'conversational' }, ['LLM:Think']],
  'LLM:Think': ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Think.', prompts: [{ role: 'user', content: 'think about {sys.query}' }], message_history_window_size: 0 }, ['LLM:Answer']],
  'LLM:Answer': ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Answer.', prompts: [{ role: 'user', content: '{sys.query}' }], message_history_window_size: 10 }, ['Message:Out']],
  'Message:Out': ['Message', { content: ['{LLM:Answer@content}'] }],
});

let model: OpenAiServer;
let api: Served;
let queue: ReturnType<typeof createInProcessQueue>;
let engine: ReturnType<typeof testEngine>;

beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => {
    const last = body.messages.at(-1)?.content ?? '';
    const thought = /^think about (.*)$/.exec(last);
    return { kind: 'text', text: thought ? `thought ${thought[1]}` : `answer to ${last}`, chunks: 2 };
  };
  engine = testEngine({ openaiUrl: model.url });
  queue = createInProcessQueue((records) => processBatch({ engine, guard: new SsrfGuard() }, records));
  engine.enqueue = queue.enqueue;
  api = await serveApp(engine, { enqueue: queue.enqueue });
});
afterAll(async () => {
  await api.close();
  await model.close();
});

type Mode = 'sync' | 'async';
type Turn = { turn_number: number; status: string; request: { run_input: { query?: string }; actor?: { kind: string; id: string } }; response: { events: { event: string; data: Record<string, unknown> }[]; side_effects?: unknown[]; error?: unknown } };

const execute = (workflowId: string, body: Record<string, unknown>, mode: Mode = 'sync', key?: string) =>
  api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body, headers: { ...(mode === 'async' ? { prefer: 'respond-async' } : {}), ...(key ? { 'idempotency-key': key } : {}) } });

/** Turns of the run, in order. */
async function turnsOf(runId: string): Promise<Turn[]> {
  return (await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns?limit=100`)).json.items as Turn[];
}

/** The run's conversation as its committed turns hold it (what the next model call is given). */
async function historyOf(runId: string): Promise<string[]> {
  const loaded = await loadSession(engine.store, api.tenant, runId, 50);
  return (loaded.history as [string, string][]).map(([role, content]) => `${role}: ${content}`);
}

/** The model calls made since `since`, by what they asked. */
const asked = (since: number) => model.requests.slice(since).map((r) => r.body.messages.at(-1)?.content);

/**
 * A run with one exchange (`zero`), then turn 2 (`one`, sync or async) held in its first model
 * call, and `two` sent meanwhile with `onBusy`; then the model let go and every queued turn run.
 */
async function race(mode: Mode, onBusy: unknown, key?: string) {
  const workflowId = await newWorkflow(engine, api.tenant, CHAT);
  const first = await execute(workflowId, { run_input: { query: 'zero' } });
  expect(first.status, first.text).toBe(200);
  const runId = first.json.run_id as string;
  const since = model.calls;
  const release = gate();
  model.enqueue({ kind: 'text', text: 'thought one', chunks: 2, until: release.opened });
  const one = execute(workflowId, { run_id: runId, turn_number: 1, run_input: { query: 'one' } }, mode);
  await model.arrived(since + 1);
  const twoBody = { run_id: runId, turn_number: 1, run_input: { query: 'two' }, ...(onBusy === undefined ? {} : { on_busy: onBusy }) };
  const two = await execute(workflowId, twoBody, 'sync', key);
  // a retry with the request's key while its input waits: the same answer, nothing queued twice
  const retried = key ? await execute(workflowId, twoBody, 'sync', key) : undefined;
  const meanwhile = (await api.call('GET', `/workflows/v1/workflow-runs/${runId}`)).json;
  release.open();
  const oneAnswer = await one;
  await queue.idle();
  const retriedAfter = key ? await execute(workflowId, twoBody, 'sync', key) : undefined;
  return { runId, since, one: oneAnswer, two, retried, retriedAfter, meanwhile, turns: await turnsOf(runId), history: await historyOf(runId) };
}

const BEFORE = ['user: zero', 'assistant: answer to zero'];

/** Resolves once `count` inputs wait in the run's inbox (the store is asked again as soon as it answers). */
async function untilQueued(runId: string, count: number): Promise<void> {
  while (((await getHead(engine.store, api.tenant, runId)).claim?.inbox?.length ?? 0) < count) await new Promise((resolve) => setImmediate(resolve));
}

describe('on_busy: a second message while a turn runs', () => {
  it.each<Mode>(['sync', 'async'])('reject (the default) against a %s turn: 409, and the second message is nowhere', async (mode) => {
    const r = await race(mode, undefined);
    expect([r.two.status, r.two.json.code, r.two.json.current_turn_number]).toEqual([409, 'turn_in_progress', 1]);
    expect(r.turns.map((t) => [t.turn_number, t.status, t.request.run_input.query])).toEqual([[1, 'completed', 'zero'], [2, 'completed', 'one']]);
    expect(r.history).toEqual([...BEFORE, 'user: one', 'assistant: answer to one']);
    expect(asked(r.since)).toEqual(['think about one', 'one']);
  });

  it.each<Mode>(['sync', 'async'])('enqueue against a %s turn: 202 with the turn it becomes, which runs on top once the turn ahead commits', async (mode) => {
    const r = await race(mode, 'enqueue');
    expect(r.two.status, r.two.text).toBe(202);
    expect(r.two.json).toEqual({ run_id: r.runId, turn_number: 3, status: 'queued' });
    expect(r.two.headers.get('location')).toBe(`/workflows/v1/workflow-runs/${r.runId}`);
    expect(r.meanwhile).toMatchObject({ status: 'running', turn_number: 1, turn_in_progress: 2, queued_turns: 1 });
    expect(r.turns.map((t) => [t.turn_number, t.status, t.request.run_input.query])).toEqual([[1, 'completed', 'zero'], [2, 'completed', 'one'], [3, 'completed', 'two']]);
    expect(r.history).toEqual([...BEFORE, 'user: one', 'assistant: answer to one', 'user: two', 'assistant: answer to two']);
    expect(asked(r.since)).toEqual(['think about one', 'one', 'think about two', 'two']);
    // the queued turn saw the conversation with the turn ahead of it in it
    const answerTwo = model.requests.at(-1)?.body.messages.map((m) => m.content);
    expect(answerTwo).toEqual(expect.arrayContaining(['one', 'answer to one', 'two']));
    const run = (await api.call('GET', `/workflows/v1/workflow-runs/${r.runId}`)).json;
    expect(run).toMatchObject({ status: 'completed', turn_number: 3, turn_in_progress: null, queued_turns: 0 });
    // who acted: the queued turn names the key that sent it, as the turns sent directly do
    const actors = r.turns.map((t) => t.request.actor);
    expect(actors[2]).toEqual(actors[0]);
    expect(actors[2]?.kind).toBe('admin_key');
  });

  it('interrupt against an async turn: it stops at its next checkpoint as interrupted, and the new input runs on top', async () => {
    const r = await race('async', 'interrupt', randomUUID());
    expect(r.two.status, r.two.text).toBe(202);
    expect([r.retried?.status, r.retried?.text]).toEqual([202, r.two.text]);
    expect(r.meanwhile).toMatchObject({ queued_turns: 1 });
    expect(r.two.json).toEqual({ run_id: r.runId, turn_number: 3, status: 'queued' });
    expect(r.turns.map((t) => [t.turn_number, t.status, t.request.run_input.query])).toEqual([[1, 'completed', 'zero'], [2, 'interrupted', 'one'], [3, 'completed', 'two']]);
    const interrupted = r.turns[1] as Turn;
    expect(interrupted.response.events.at(-1)?.event).toBe('workflow_interrupted');
    // the batch in flight (Think) finished; nothing after it ran
    expect(interrupted.response.events.filter((e) => e.event === 'node_finished').map((e) => e.data.component_id)).toEqual(['begin', 'LLM:Think']);
    expect(asked(r.since)).toEqual(['think about one', 'think about two', 'two']);
    // the interrupted input is in the conversation, unanswered; the new one after it
    expect(r.history).toEqual([...BEFORE, 'user: one', 'user: two', 'assistant: answer to two']);
    expect((await api.call('GET', `/workflows/v1/workflow-runs/${r.runId}`)).json).toMatchObject({ status: 'completed', is_terminal: false });
    // once run, a retry gets the queued input's own turn, as stored
    const stored = await api.call('GET', `/workflows/v1/workflow-runs/${r.runId}/turns/3`);
    expect([r.retriedAfter?.status, r.retriedAfter?.json]).toEqual([200, stored.json.response]);
  });

  it('rollback against an async turn: it is discarded as rolled_back, listing the calls it made, and the new input runs on the state before it', async () => {
    const r = await race('async', 'rollback', randomUUID());
    expect(r.two.status, r.two.text).toBe(202);
    expect([r.retried?.status, r.retried?.text]).toEqual([202, r.two.text]);
    expect(r.meanwhile).toMatchObject({ queued_turns: 1 });
    expect(r.two.json).toEqual({ run_id: r.runId, turn_number: 3, status: 'queued' });
    expect(r.turns.map((t) => [t.turn_number, t.status, t.request.run_input.query])).toEqual([[1, 'completed', 'zero'], [2, 'rolled_back', 'one'], [3, 'completed', 'two']]);
    const rolledBack = r.turns[1] as Turn;
    expect(rolledBack.response.events).toEqual([]);
    expect(rolledBack.response.side_effects).toEqual([{ component_id: 'LLM:Think', kind: 'model', name: expect.any(String), ordinal: 0, path: [], status: 'ok' }]);
    // its call records are kept with it
    const calls = (await api.call('GET', `/workflows/v1/workflow-runs/${r.runId}/turns/2`)).json.calls;
    expect(calls.records.map((c: { component_id: string }) => c.component_id)).toEqual(['LLM:Think']);
    expect(asked(r.since)).toEqual(['think about one', 'think about two', 'two']);
    // neither the rolled-back input nor any answer to it: the new input ran on the state before it
    expect(r.history).toEqual([...BEFORE, 'user: two', 'assistant: answer to two']);
    const answerTwo = model.requests.at(-1)?.body.messages.map((m) => m.content) ?? [];
    expect(answerTwo).not.toContain('one');
    expect(answerTwo).toEqual(expect.arrayContaining(['zero', 'answer to zero', 'two']));
    expect(r.retriedAfter?.status).toBe(200);
    expect(r.retriedAfter?.json).toMatchObject({ turn_number: 3, status: 'completed' });
  });

  it.each([['interrupt'], ['rollback']])('%s against a sync turn answers as reject does, or queues with if_sync: enqueue', async (strategy) => {
    const refused = await race('sync', strategy);
    expect([refused.two.status, refused.two.json.code]).toEqual([409, 'turn_in_progress']);
    expect(refused.turns.map((t) => [t.turn_number, t.status])).toEqual([[1, 'completed'], [2, 'completed']]);
    expect(refused.history).toEqual([...BEFORE, 'user: one', 'assistant: answer to one']);

    const queued = await race('sync', { strategy, if_sync: 'enqueue' });
    expect(queued.two.status, queued.two.text).toBe(202);
    expect(queued.two.json).toEqual({ run_id: queued.runId, turn_number: 3, status: 'queued' });
    // the sync turn kept its round trip: it committed whole, and the input ran after it
    expect(queued.one.json).toMatchObject({ status: 'completed', turn_number: 2 });
    expect(queued.turns.map((t) => [t.turn_number, t.status])).toEqual([[1, 'completed'], [2, 'completed'], [3, 'completed']]);
    expect(queued.history).toEqual([...BEFORE, 'user: one', 'assistant: answer to one', 'user: two', 'assistant: answer to two']);
  });
});

describe('the workflow setting', () => {
  const create = (onBusy?: unknown) => api.call('POST', '/workflows/v1/workflows', { body: { name: 'chat', dsl: CHAT, ...(onBusy === undefined ? {} : { on_busy: onBusy }) } });

  it('is set at creation and by PATCH, shown with the workflow, refused when malformed, and not part of the DSL', async () => {
    const plain = await create();
    expect(plain.json.on_busy).toEqual({ strategy: 'reject', if_sync: 'reject' });
    const created = await create('enqueue');
    expect(created.status, created.text).toBe(201);
    const id = created.json.id as string;
    expect(created.json.on_busy).toEqual({ strategy: 'enqueue', if_sync: 'reject' });
    const patched = await api.call('PATCH', `/workflows/v1/workflows/${id}`, { body: { on_busy: { strategy: 'interrupt', if_sync: 'enqueue' } } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json).toMatchObject({ id, name: 'chat', version: 1, on_busy: { strategy: 'interrupt', if_sync: 'enqueue' } });
    expect((await api.call('GET', `/workflows/v1/workflows/${id}`)).json.on_busy).toEqual({ strategy: 'interrupt', if_sync: 'enqueue' });
    const renamed = await api.call('PATCH', `/workflows/v1/workflows/${id}`, { body: { name: 'renamed' } });
    expect(renamed.json).toMatchObject({ name: 'renamed', on_busy: { strategy: 'interrupt', if_sync: 'enqueue' } });

    const wrong = await api.call('PATCH', `/workflows/v1/workflows/${id}`, { body: { on_busy: 'later' } });
    expect([wrong.status, wrong.json.code, wrong.json.field]).toEqual([400, 'invalid_request', 'on_busy']);
    const unknown = await api.call('PATCH', `/workflows/v1/workflows/${id}`, { body: { on_busy: { strategy: 'enqueue', when: 'never' } } });
    expect([unknown.status, unknown.json.code]).toEqual([400, 'invalid_request']);
    expect(unknown.json.field).toMatch(/^on_busy/);
    const execute = await api.call('POST', `/workflows/v1/workflows/${id}/execute`, { body: { run_input: { query: 'x' }, on_busy: { strategy: 'rollback', if_sync: 'sometimes' } } });
    expect([execute.status, execute.json.code]).toEqual([400, 'invalid_request']);
    expect(execute.json.field).toMatch(/^on_busy/);
    // RAGFlow's view of the agent: the DSL as imported, without the setting
    const agent = await api.call('GET', `/api/v1/agents/${id}`);
    expect(JSON.stringify(agent.json.data.dsl)).not.toContain('on_busy');
  });

  it('decides when the request says nothing, and a request overrides it', async () => {
    const id = (await create('enqueue')).json.id as string;
    const first = await execute(id, { run_input: { query: 'zero' } });
    const runId = first.json.run_id as string;
    const since = model.calls;
    const release = gate();
    model.enqueue({ kind: 'text', text: 'thought one', until: release.opened });
    const one = execute(id, { run_id: runId, run_input: { query: 'one' } });
    await model.arrived(since + 1);
    const overridden = await execute(id, { run_id: runId, run_input: { query: 'not now' }, on_busy: 'reject' });
    expect([overridden.status, overridden.json.code]).toEqual([409, 'turn_in_progress']);
    const queued = await execute(id, { run_id: runId, run_input: { query: 'two' } });
    expect([queued.status, queued.json.turn_number]).toEqual([202, 3]);
    release.open();
    await one;
    await queue.idle();
    expect(await historyOf(runId)).toEqual([...BEFORE, 'user: one', 'assistant: answer to one', 'user: two', 'assistant: answer to two']);
  });

  it("RAGFlow's completions take the workflow's setting: a message queued behind the turn in flight is answered once its own turn ran", async () => {
    const id = (await create('enqueue')).json.id as string;
    const session = (await api.call('POST', `/api/v1/agents/${id}/sessions`, { body: {} })).json.data.id as string;
    const complete = (question: string, stream = false) => api.call('POST', `/api/v1/agents/${id}/completions`, { body: { question, session_id: session, stream } });
    const openai = (content: string) => api.call('POST', `/api/v1/agents_openai/${id}/chat/completions`, { body: { messages: [{ role: 'user', content }], session_id: session } });
    const zero = await complete('zero');
    expect(zero.json.data?.data?.content, zero.text).toBe('answer to zero');
    for (const [second, answerOf] of [
      [() => complete('two'), (r: Awaited<ReturnType<typeof complete>>) => r.json.data.data.content],
      [() => complete('two', true), (r: Awaited<ReturnType<typeof complete>>) => r.text.split('\n\n').filter((f) => f.startsWith('data:{')).map((f) => JSON.parse(f.slice(5))).filter((f) => f.event === 'message').map((f) => f.data.content).join('')],
      [() => openai('two'), (r: Awaited<ReturnType<typeof complete>>) => r.json.choices[0].message.content],
    ] as const) {
      const since = model.calls;
      const release = gate();
      model.enqueue({ kind: 'text', text: 'thought one', until: release.opened });
      const one = complete('one');
      await model.arrived(since + 1);
      const two = second();
      // the second message is queued behind the held turn, and its request waits for its own turn
      await untilQueued(session, 1);
      release.open();
      expect((await one).json.data.data.content).toBe('answer to one');
      const answered = await two;
      expect(answered.status, answered.text).toBe(200);
      expect(answerOf(answered)).toBe('answer to two');
      expect(asked(since)).toEqual(['think about one', 'one', 'think about two', 'two']);
    }
    const history = await historyOf(session);
    expect(history).toEqual(['user: zero', 'assistant: answer to zero', ...Array.from({ length: 3 }, () => ['user: one', 'assistant: answer to one', 'user: two', 'assistant: answer to two']).flat()]);
  });
});
