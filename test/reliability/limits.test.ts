/** Every limit, enforced with its documented error; and a 1 MB model answer commits fine. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from '../helpers/canvas';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

let api: Served;
let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  const engine = { ...testEngine({ openaiUrl: model.url }), stepBudgetTurn: 40, stepBudgetRun: 60 };
  api = await serveApp(engine, {
    limits: { maxBodyBytes: 64 * 1024, maxJsonDepth: 16, maxResponseBytes: 8 * 1024 },
    maxFieldBytes: 1024,
    maxDslNodes: 20,
    maxFileBytes: 16 * 1024,
  });
});
afterAll(async () => {
  await api.close();
  await model.close();
});

const create = (dsl: unknown) => api.call('POST', '/workflows/v1/workflows', { body: { name: 'limits', dsl } });

describe('limits', () => {
  it('refuses oversized and over-deep bodies', async () => {
    const wf = (await create(fixture('form-intake'))).json.id;
    const big = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'x'.repeat(70 * 1024) } } });
    expect([big.status, big.json.code]).toEqual([413, 'payload_too_large']);
    const deep = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { raw: `{"run_input":{"inputs":{"a":${'['.repeat(20)}${']'.repeat(20)}}}}` });
    expect([deep.status, deep.json.error]).toEqual([400, 'the JSON body nests deeper than 16 levels']);
  });

  it('refuses a DSL with too many components, and a form value over the field limit, naming the field', async () => {
    const components: Record<string, [string, Record<string, unknown>, string[]]> = { begin: ['Begin', {}, ['Message:M0']] };
    for (let i = 0; i < 20; i++) components[`Message:M${i}`] = ['Message', { content: [`m${i}`] }, i < 19 ? [`Message:M${i + 1}`] : []];
    const tooMany = await create(graph(components));
    expect([tooMany.status, tooMany.json.code, tooMany.json.problems[0].message]).toEqual([400, 'invalid_dsl', 'at most 20 components are allowed']);

    const wf = (await create(fixture('form-intake'))).json.id;
    const t1 = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'x' } } });
    const long = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_id: t1.json.run_id, run_input: { inputs: { name: 'y'.repeat(2000) } } } });
    expect([long.status, long.json.code, long.json.field]).toEqual([413, 'payload_too_large', 'run_input.inputs.name']);
  });

  it('refuses a file over the file limit', async () => {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(17 * 1024)]), 'big.bin');
    const res = await fetch(`${api.url}/workflows/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${api.adminKey}` }, body: form });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { code: string }).code).toBe('payload_too_large');
  });

  it('aborts a run past its step budgets, per turn and per run', async () => {
    const loop = await create(graph({
      begin: ['Begin', {}, ['Message:Ping']],
      'Message:Ping': ['Message', { content: ['ping'] }, ['Message:Pong']],
      'Message:Pong': ['Message', { content: ['pong'] }, ['Message:Ping']],
    }));
    const spun = await api.call('POST', `/workflows/v1/workflows/${loop.json.id}/execute`, { body: { run_input: { query: 'go' } } });
    expect(spun.json).toMatchObject({ status: 'aborted_looping_risk', is_terminal: true });
    expect(spun.json.events_truncated === true || spun.json.events.at(-1).event === 'workflow_aborted').toBe(true);
    const turn = (await api.call('GET', `/workflows/v1/workflow-runs/${spun.json.run_id}/turns/1`)).json;
    expect(turn.response.events.at(-1)).toMatchObject({ event: 'workflow_aborted', data: { reason: 'step_budget_turn', budget: 40 } });

    const dsl = fixture('loop-with-form') as { components: Record<string, { obj: { params: Record<string, unknown> } }> };
    (dsl.components['Loop:AskThrice'] as { obj: { params: Record<string, unknown> } }).obj.params.maximum_loop_count = 1000;
    const endless = await create(dsl);
    let res = await api.call('POST', `/workflows/v1/workflows/${endless.json.id}/execute`, { body: { run_input: {} } });
    let turns = 1;
    while (res.json.status === 'waiting_for_input' && turns < 100) {
      res = await api.call('POST', `/workflows/v1/workflows/${endless.json.id}/execute`, { body: { run_id: res.json.run_id, run_input: { inputs: { colour: `c${turns}` } } } });
      turns++;
    }
    expect(res.json.status).toBe('aborted_looping_risk');
    console.log(`per-run budget of 60 steps ended a form loop after ${turns} turns`);
  });

  it('caps the response and keeps every event in the turn record; a 1 MB model answer commits', async () => {
    const answer = 'w'.repeat(1024 * 1024);
    model.enqueue({ kind: 'text', text: answer, chunks: 64 });
    const wf = (await create(fixture('llm-stream'))).json.id;
    const res = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'write a lot' } } });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ status: 'completed', turn_number: 1, events: [], events_truncated: true });
    const turn = (await api.call('GET', `/workflows/v1/workflow-runs/${res.json.run_id}/turns/1`)).json;
    const message = turn.response.events.find((e: { event: string }) => e.event === 'message');
    expect(message.data.content.length).toBe(answer.length);
    const next = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_id: res.json.run_id, run_input: { query: 'and now?' } } });
    expect(next.json.turn_number).toBe(2);
  });
});
