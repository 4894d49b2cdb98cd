/**
 * Forking runs over the native API: the fork starts from the parent's state after turn k,
 * numbered on from k, linked to its parent; answering the fork's pause as the parent's was
 * answered gives the same events and outputs as the parent's turn k + 1, a different answer
 * takes another way, and the parent is unchanged. The fork is its own: deleting the parent
 * leaves it whole, and it keeps the conversation (the model sees the parent's history). An
 * Idempotency-Key makes a retry the same fork; a turn the run has not committed is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { graph } from '../helpers/dsl-builder';
import { OpenAiServer } from '../llm/openai-server';

let api: Served;
let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  // answers with what it was shown of the conversation
  model.respond = (body) => ({ kind: 'text', text: `seen: ${body.messages.filter((m) => m.role !== 'system').map((m) => m.content).join(' / ')}` });
  api = await serveApp(testEngine({ openaiUrl: model.url }));
});
afterAll(async () => {
  await Promise.all([api.close(), model.close()]);
});

/** A conversation: each query is answered by the model, then a form asks to go on or stop. */
const DSL = graph({
  begin: ['Begin', { mode: 'conversational' }, ['LLM:Chat']],
  'LLM:Chat': ['LLM', { llm_id: 'chat@Local', sys_prompt: 'Be brief.', prompts: [{ role: 'user', content: '{sys.query}' }], message_history_window_size: 6 }, ['Message:Said']],
  'Message:Said': ['Message', { content: ['{LLM:Chat@content}'] }, ['UserFillUp:Next']],
  'UserFillUp:Next': ['UserFillUp', { tips: 'More?', decisions: [{ id: 'more', label: 'More', to: 'Message:More' }, { id: 'stop', label: 'Stop', to: 'Message:Stop' }] }, ['Message:More', 'Message:Stop']],
  'Message:More': ['Message', { content: ['going on'] }],
  'Message:Stop': ['Message', { content: ['stopping'] }],
});

const comparable = (events: unknown[]) => JSON.parse(JSON.stringify(events), (key, value: unknown) => (key === 'created_at' || key === 'elapsed_time' ? 0 : value)) as unknown;

async function conversation() {
  const created = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'chat', dsl: DSL } });
  const execute = `/workflows/v1/workflows/${created.json.id}/execute`;
  const t1 = await api.call('POST', execute, { body: { run_input: { query: 'first question' } } });
  const runId = t1.json.run_id as string;
  const t2 = await api.call('POST', execute, { body: { run_id: runId, turn_number: 1, run_input: { inputs: { decision: 'more' } } } });
  return { execute, runId, t1, t2 };
}

describe('forking a run', () => {
  it('starts from the state after the turn, linked to its parent, numbered on; the same answer gives the same turn', async () => {
    const { execute, runId, t2 } = await conversation();
    const fork = await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 1 } });
    expect(fork.status).toBe(201);
    expect(fork.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1, forked_from: { run_id: runId, turn_number: 1 }, next_input_hint: { component_id: 'UserFillUp:Next' } });
    const forkId = fork.json.run_id as string;
    expect(forkId).not.toBe(runId);

    const again = await api.call('POST', execute, { body: { run_id: forkId, turn_number: 1, run_input: { inputs: { decision: 'more' } } } });
    expect(again.json.turn_number).toBe(2);
    expect(comparable(again.json.events)).toEqual(comparable(t2.json.events));
    expect(again.json.outputs).toEqual(t2.json.outputs);

    const parent = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(parent.json).toMatchObject({ turn_number: 2, forked_from: null });
    // RAGFlow's routes see one more session of the agent
    const workflowId = execute.split('/')[4];
    const sessions = await api.call('GET', `/api/v1/agents/${workflowId}/sessions`);
    expect(sessions.json.data.map((x: { id: string }) => x.id).sort()).toEqual([runId, forkId].sort());
  });

  it('may be answered differently, and keeps the conversation for the model; the parent stays as it was', async () => {
    const { execute, runId } = await conversation();
    const after = await api.call('POST', execute, { body: { run_id: runId, turn_number: 2, run_input: { query: 'second question' } } });
    expect(after.json.turn_number).toBe(3);
    const fork = (await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 2 } })).json;
    expect(fork).toMatchObject({ turn_number: 2, status: 'completed' });
    const other = await api.call('POST', execute, { body: { run_id: fork.run_id, turn_number: 2, run_input: { query: 'another question' } } });
    // the model was shown the parent's conversation up to turn 2 (not its turn 3), then the fork's own question
    const said = other.json.events.filter((e: { event: string }) => e.event === 'message').map((e: { data: { content: string } }) => e.data.content);
    expect(said).toEqual(['seen: first question / seen: first question / going on / another question']);
    const parentTurns = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns`);
    expect(parentTurns.json.items.map((t: { turn_number: number }) => t.turn_number)).toEqual([1, 2, 3]);
    const forkTurns = await api.call('GET', `/workflows/v1/workflow-runs/${fork.run_id}/turns`);
    expect(forkTurns.json.items.map((t: { turn_number: number }) => t.turn_number)).toEqual([2, 3]);
  });

  it('is whole once its parent is deleted', async () => {
    const { execute, runId } = await conversation();
    const fork = (await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 1 } })).json;
    expect((await api.call('DELETE', `/workflows/v1/workflow-runs/${runId}`)).status).toBe(204);
    expect((await api.call('GET', `/workflows/v1/workflow-runs/${runId}`)).status).toBe(404);
    const answered = await api.call('POST', execute, { body: { run_id: fork.run_id, turn_number: 1, run_input: { inputs: { decision: 'stop' } } } });
    expect(answered.status).toBe(200);
    expect(JSON.stringify(answered.json.events)).toContain('stopping');
  });

  it('is the same fork for a retried Idempotency-Key, and refuses the key for another fork, a turn not committed and another tenant’s run', async () => {
    const { runId } = await conversation();
    const headers = { 'idempotency-key': `fork-${runId}` };
    const first = await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 1 }, headers });
    const retry = await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 1 }, headers });
    expect([first.status, retry.status]).toEqual([201, 200]);
    expect(retry.json.run_id).toBe(first.json.run_id);
    expect((await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 2 }, headers })).json.code).toBe('idempotency_mismatch');
    expect(await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 9 } })).toMatchObject({ status: 400, json: { code: 'invalid_request', field: 'turn_number' } });
    expect((await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { body: { turn_number: 0 } })).status).toBe(400);
    const stranger = await api.addKey(`other-${Date.now()}`, 'admin');
    const theirs = await api.call('POST', `/workflows/v1/workflow-runs/${runId}/fork`, { key: stranger, body: { turn_number: 1 } });
    const missing = await api.call('POST', `/workflows/v1/workflow-runs/${'0'.repeat(32)}/fork`, { key: stranger, body: { turn_number: 1 } });
    expect(theirs.status).toBe(404);
    expect(theirs.json).toEqual(missing.json);
  });
});
