import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from '../helpers/canvas';
import { newTenant, testEngine, testStore } from '../helpers/engine';
import { gate } from '../helpers/gate';
import { type Served, serveApp, sseFrames } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

const LEASE_MS = 60_000;
/** The server's clock: the wall clock, moved ahead by the test when a lease is to run out. */
let ahead = 0;
const clock = () => Date.now() + ahead;

let api: Served;
let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  api = await serveApp({ ...testEngine({ openaiUrl: model.url, leaseMs: LEASE_MS, store: { ...testStore(), now: clock } }), clock });
});
afterAll(async () => {
  await api.close();
  await model.close();
});

async function createWorkflow(dsl: unknown = fixture('form-intake'), key?: string): Promise<string> {
  const res = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'intake', dsl }, ...(key ? { key } : {}) });
  expect(res.status).toBe(201);
  return res.json.id as string;
}

const execute = (workflowId: string, body: unknown, options: { key?: string; headers?: Record<string, string> } = {}) =>
  api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body, ...options });

describe('the native API scenario', () => {
  it('pauses, re-pauses on empty inputs, completes with the values, then refuses stale and finished turns', async () => {
    const wf = await createWorkflow();
    const t1 = await execute(wf, { run_input: { query: 'sign me up' } });
    expect(t1.status).toBe(200);
    expect(t1.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1, is_waiting_for_input: true, is_completed: false, is_terminal: false, has_active_companions: false });
    expect(t1.json.next_input_hint).toMatchObject({ component_id: 'UserFillUp:PlumDesksWave', tips: 'Tell us about yourself (you said: sign me up)' });
    expect(Object.keys(t1.json.next_input_hint.inputs)).toEqual(['name', 'age', 'plan', 'newsletter', 'profile']);
    const runId = t1.json.run_id as string;

    const t2 = await execute(wf, { run_id: runId, turn_number: 1, run_input: { inputs: {} } });
    expect(t2.json).toMatchObject({ status: 'waiting_for_input', turn_number: 2 });

    const t3 = await execute(wf, { run_id: runId, turn_number: 2, run_input: { inputs: { name: 'Ada', age: 36, plan: 'pro', profile: { city: 'London' } } } });
    expect(t3.json).toMatchObject({ status: 'completed', turn_number: 3, is_completed: true, next_input_hint: null });
    const message = t3.json.events.find((e: { event: string }) => e.event === 'message');
    expect(message.data.content).toBe('Welcome Ada (36), plan pro; city London.');

    const stale = await execute(wf, { run_id: runId, turn_number: 2, run_input: { query: 'again' } });
    expect(stale.status).toBe(409);
    expect(stale.json).toMatchObject({ code: 'turn_conflict', current_turn_number: 3, status: 'completed' });

    const fresh = await execute(wf, { run_input: { query: 'hi' } });
    const stop = await execute(wf, { run_id: fresh.json.run_id, run_input: { command: 'stop' } });
    expect(stop.json).toMatchObject({ status: 'cancelled', turn_number: 2, is_terminal: true });
    expect(stop.json.events.map((e: { event: string }) => e.event)).toEqual(['workflow_cancelled']);
    const after = await execute(wf, { run_id: fresh.json.run_id, run_input: { query: 'x' } });
    expect(after.status).toBe(409);
    expect(after.json.code).toBe('run_finished');

    const run = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(run.json).toMatchObject({ run_id: runId, status: 'completed', turn_number: 3, turn_in_progress: null, is_terminal: false });
    const turns = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns`);
    expect(turns.json.items.map((t: { turn_number: number; status: string }) => [t.turn_number, t.status])).toEqual([[1, 'waiting_for_input'], [2, 'waiting_for_input'], [3, 'completed']]);
    expect(turns.json.items[2].request).toMatchObject({ run_input: { inputs: { name: 'Ada' } } });
    expect(turns.json.items[2].response).toEqual(t3.json);
    const replay = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/3?format=sse`);
    const frames = sseFrames(replay.text);
    expect(frames.at(-1)).toEqual({ event: 'turn_response', data: t3.json });
    const listed = await api.call('GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`);
    expect(listed.json.items.map((r: { run_id: string }) => r.run_id)).toEqual([fresh.json.run_id, runId]);
  });

  it('streams events as SSE ending with turn_response, and an Idempotency-Key replays the same body', async () => {
    const wf = await createWorkflow();
    const first = await execute(wf, { run_input: { query: 'stream me' } }, { headers: { accept: 'text/event-stream', 'idempotency-key': 'sse-1' } });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toContain('text/event-stream');
    const frames = sseFrames(first.text);
    expect(frames[0]?.event).toBe('workflow_started');
    const end = frames.at(-1);
    expect(end?.event).toBe('turn_response');
    expect(end?.data).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
    const again = await execute(wf, { run_input: { query: 'stream me' } }, { headers: { 'idempotency-key': 'sse-1' } });
    expect(again.json).toEqual(end?.data);
    const other = await execute(wf, { run_input: { query: 'something else' } }, { headers: { 'idempotency-key': 'sse-1' } });
    expect(other.status).toBe(422);
    expect(other.json.code).toBe('idempotency_mismatch');
  });

  it('ends the stream with turn_error when the turn loses its race after its events went out', async () => {
    const dsl = fixture('llm-stream');
    const wf = await createWorkflow(dsl);
    const t1 = await execute(wf, { run_input: { query: 'first' } });
    const release = gate();
    const since = model.calls;
    model.enqueue({ kind: 'text', text: 'a slow answer that outlives its lease', chunks: 6, until: release.opened });
    const slow = execute(wf, { run_id: t1.json.run_id, turn_number: 1, run_input: { query: 'slow' } }, { headers: { accept: 'text/event-stream' } });
    await model.arrived(since + 1); // the slow turn holds its claim, and the model holds its answer
    ahead += LEASE_MS + 1; // its lease runs out, as every other request sees it
    model.enqueue({ kind: 'text', text: 'quick' });
    const quick = await execute(wf, { run_id: t1.json.run_id, turn_number: 1, run_input: { query: 'quick' } });
    expect(quick.json).toMatchObject({ turn_number: 2, status: 'completed' });
    release.open();
    const frames = sseFrames((await slow).text);
    expect(frames.some((f) => f.event === 'message')).toBe(true);
    expect(frames.at(-1)).toEqual({ event: 'turn_error', data: { code: 'turn_conflict', error: expect.any(String), current_turn_number: 2 } });
    const run = await api.call('GET', `/workflows/v1/workflow-runs/${t1.json.run_id}`);
    expect(run.json.turn_number).toBe(2);
  });
});

describe('a workflow’s view', () => {
  it('says what its active version’s Begin says first, to every key that may read it; nothing when the Begin turns it off', async () => {
    const wf = await createWorkflow();
    const admin = await api.call('GET', `/workflows/v1/workflows/${wf}`);
    expect(admin.json.prologue).toBe("Hello! Let's get you registered.");
    const executeKey = await api.addKey(api.tenant, 'execute', [wf]);
    expect((await api.call('GET', `/workflows/v1/workflows/${wf}`, { key: executeKey })).json.prologue).toBe("Hello! Let's get you registered.");
    // RAGFlow's Begin greets with its default when the DSL sets no prologue
    const dsl = fixture('form-intake') as { components: { begin: { obj: { params: Record<string, unknown> } } } };
    delete dsl.components.begin.obj.params.prologue;
    expect((await api.call('GET', `/workflows/v1/workflows/${await createWorkflow(dsl)}`)).json.prologue).toBe("Hi! I'm your smart assistant. What can I do for you?");
    dsl.components.begin.obj.params.enablePrologue = false;
    expect((await api.call('GET', `/workflows/v1/workflows/${await createWorkflow(dsl)}`)).json.prologue).toBe('');
  });
});

describe('errors', () => {
  it('answers malformed JSON with 400 invalid_request', async () => {
    const wf = await createWorkflow();
    const res = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { raw: '{"run_input": ' });
    expect(res.status).toBe(400);
    expect(res.json).toEqual({ code: 'invalid_request', error: 'the body is not valid JSON' });
    const badShape = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { turn_number: 'two' } });
    expect(badShape.status).toBe(400);
    expect(badShape.json.code).toBe('invalid_request');
    expect(badShape.json.error).toMatch(/^turn_number:/);
  });

  it('answers wrong form value types with 422 invalid_inputs naming the fields, consuming no turn', async () => {
    const wf = await createWorkflow();
    const t1 = await execute(wf, { run_input: { query: 'x' } });
    const bad = await execute(wf, { run_id: t1.json.run_id, run_input: { inputs: { age: 'old', plan: 'gold' } } });
    expect(bad.status).toBe(422);
    expect(bad.json.code).toBe('invalid_inputs');
    expect(bad.json.fields.map((f: { field: string }) => f.field)).toEqual(['age', 'plan']);
    const run = await api.call('GET', `/workflows/v1/workflow-runs/${t1.json.run_id}`);
    expect(run.json.turn_number).toBe(1);
  });

  it('answers another tenant’s ids exactly like missing ones', async () => {
    const wf = await createWorkflow();
    const t1 = await execute(wf, { run_input: { query: 'x' } });
    const strangerKey = await api.addKey(newTenant(), 'admin');
    const missingRun = await api.call('GET', `/workflows/v1/workflow-runs/${'0'.repeat(32)}`, { key: strangerKey });
    const theirRun = await api.call('GET', `/workflows/v1/workflow-runs/${t1.json.run_id}`, { key: strangerKey });
    expect(theirRun.status).toBe(404);
    expect(theirRun.json).toEqual(missingRun.json);
    const missingWf = await api.call('GET', '/workflows/v1/workflows/wf_0000000000000000', { key: strangerKey });
    const theirWf = await api.call('GET', `/workflows/v1/workflows/${wf}`, { key: strangerKey });
    expect(theirWf.status).toBe(404);
    expect(theirWf.json).toEqual(missingWf.json);
    const theirExecute = await execute(wf, { run_id: t1.json.run_id, run_input: {} }, { key: strangerKey });
    expect(theirExecute.status).toBe(404);
  });

  it('refuses an execute key on admin routes (403) and on other workflows (404)', async () => {
    const wf = await createWorkflow();
    const other = await createWorkflow();
    const executeKey = await api.addKey(api.tenant, 'execute', [wf]);
    expect((await api.call('GET', '/workflows/v1/keys', { key: executeKey })).status).toBe(403);
    expect((await api.call('POST', '/workflows/v1/workflows', { key: executeKey, body: { name: 'x', dsl: fixture('form-intake') } })).json.code).toBe('forbidden');
    expect((await execute(wf, { run_input: { query: 'ok' } }, { key: executeKey })).status).toBe(200);
    expect((await execute(other, { run_input: { query: 'no' } }, { key: executeKey })).status).toBe(404);
    expect((await api.call('GET', '/workflows/v1/workflows', { key: executeKey })).json.items.map((w: { id: string }) => w.id)).toEqual([wf]);
  });

  it('answers 401 without a valid key and 413 for a body over the limit', async () => {
    expect((await api.call('GET', '/workflows/v1/workflows', { key: null })).json).toMatchObject({ code: 'unauthorized' });
    expect((await api.call('GET', '/workflows/v1/workflows', { key: 'not-a-real-key-at-all' })).status).toBe(401);
    const wf = await createWorkflow();
    const huge = await execute(wf, { run_input: { query: 'x'.repeat(2 * 1024 * 1024) } });
    expect(huge.status).toBe(413);
    expect(huge.json.code).toBe('payload_too_large');
    const deep = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { raw: `${'['.repeat(100)}${']'.repeat(100)}` });
    expect(deep.json).toMatchObject({ code: 'invalid_request', error: 'the JSON body nests deeper than 64 levels' });
  });

  it('refuses an invalid DSL with every problem listed', async () => {
    const res = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'bad', dsl: { components: { begin: { obj: { component_name: 'Begin', params: {} }, downstream: ['nowhere'] }, 'Tokenizer:X': { obj: { component_name: 'Tokenizer', params: {} } } } } } });
    expect(res.status).toBe(400);
    expect(res.json.code).toBe('invalid_dsl');
    expect(res.json.problems).toEqual(expect.arrayContaining([
      expect.objectContaining({ message: 'unsupported components: Tokenizer' }),
      expect.objectContaining({ component_id: 'begin', field: 'downstream' }),
    ]));
  });

  it('serves its OpenAPI 3.1 document and health', async () => {
    const doc = await api.call('GET', '/openapi.json', { key: null });
    expect(doc.json.openapi).toBe('3.1.0');
    expect(Object.keys(doc.json.paths)).toEqual(expect.arrayContaining(['/workflows/v1/workflows/{id}/execute', '/workflows/v1/workflow-runs/{run_id}/turns']));
    expect((await api.call('GET', '/health', { key: null })).status).toBe(200);
  });
});

describe('workflow versions over HTTP', () => {
  it('adds, lists and activates versions; a run stays on its version', async () => {
    const wf = await createWorkflow();
    const t1 = await execute(wf, { run_input: { query: 'x' } });
    const v2dsl = fixture('form-intake') as { components: Record<string, { obj: { params: Record<string, unknown> } }> };
    (v2dsl.components['Message:BraveOwlsSing'] as { obj: { params: Record<string, unknown> } }).obj.params.content = ['v2 {UserFillUp:PlumDesksWave@name}'];
    const v2 = await api.call('POST', `/workflows/v1/workflows/${wf}/versions`, { body: { dsl: v2dsl } });
    expect(v2.status).toBe(201);
    expect(v2.json).toEqual({ version: 2, active_version: 2, warnings: [] });
    const versions = await api.call('GET', `/workflows/v1/workflows/${wf}/versions`);
    expect(versions.json.items.map((v: { version: number; active: boolean }) => [v.version, v.active])).toEqual([[1, false], [2, true]]);
    const old = await execute(wf, { run_id: t1.json.run_id, run_input: { inputs: { name: 'A', age: 1, plan: 'free' } } });
    expect(old.json.version).toBe(1);
    const rollback = await api.call('POST', `/workflows/v1/workflows/${wf}/versions/1/activate`);
    expect(rollback.json.active_version).toBe(1);
    expect((await api.call('DELETE', `/workflows/v1/workflows/${wf}`)).status).toBe(204);
    expect((await execute(wf, { run_input: { query: 'new' } })).status).toBe(404);
  });
});
