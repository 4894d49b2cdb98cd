/**
 * UserFillUp decisions through the HTTP dialects: the native execute answers the pause with the
 * decision field in `next_input_hint`, refuses an undeclared decision with 422 naming it and
 * consuming no turn, and runs the chosen branch; RAGFlow's completions take the decision in
 * RAGFlow's `{type, value}` form; an import with a broken decision is refused naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { graph } from '../helpers/dsl-builder';

let api: Served;
beforeAll(async () => {
  api = await serveApp(testEngine());
});
afterAll(async () => {
  await api.close();
});

function review(decisions: unknown = [
  { id: 'approve', label: 'Approve refund', to: 'Message:Yes' },
  { id: 'reject', label: 'Reject', to: 'Message:No' },
]) {
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['UserFillUp:Review']],
    'UserFillUp:Review': ['UserFillUp', { tips: 'Refund this order?', decisions }, ['Message:Yes', 'Message:No']],
    'Message:Yes': ['Message', { content: ['Refunded.'] }],
    'Message:No': ['Message', { content: ['Refused ({UserFillUp:Review@decision_label}).'] }],
  });
}

const text = (events: { event: string; data: { content?: string } }[]) => events.filter((e) => e.event === 'message').map((e) => e.data.content).join('');

describe('decisions over HTTP', () => {
  it('native: the hint names the decisions, an undeclared one is refused with no turn used, the chosen branch runs', async () => {
    const created = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'review', dsl: review() } });
    expect(created.status).toBe(201);
    const execute = `/workflows/v1/workflows/${created.json.id}/execute`;
    const first = await api.call('POST', execute, { body: { run_input: { query: 'order 42' } } });
    expect(first.json.next_input_hint).toEqual({
      component_id: 'UserFillUp:Review',
      tips: 'Refund this order?',
      inputs: {
        decision: {
          name: 'Decision',
          type: 'options',
          optional: false,
          options: ['approve', 'reject'],
          decisions: [
            { id: 'approve', label: 'Approve refund' },
            { id: 'reject', label: 'Reject' },
          ],
          value: null,
        },
      },
    });
    const runId = first.json.run_id as string;
    const bad = await api.call('POST', execute, { body: { run_id: runId, turn_number: 1, run_input: { inputs: { decision: 'Approve refund' } } } });
    expect(bad.status).toBe(422);
    expect(bad.json).toMatchObject({ code: 'invalid_inputs', fields: [{ component_id: 'UserFillUp:Review', field: 'decision', message: 'expected one of: approve, reject' }] });
    expect((await api.call('GET', `/workflows/v1/workflow-runs/${runId}`)).json.turn_number).toBe(1);

    const chosen = await api.call('POST', execute, { body: { run_id: runId, turn_number: 1, run_input: { inputs: { decision: 'reject' } } } });
    expect(chosen.json).toMatchObject({ status: 'completed', turn_number: 2 });
    expect(text(chosen.json.events)).toBe('Refused (Reject).');
  });

  it('RAGFlow: the decision is answered in RAGFlow’s {type, value} form', async () => {
    const created = await api.call('POST', '/api/v1/agents', { body: { title: `Review ${Date.now()}`, dsl: review() } });
    const agentId = created.json.data.id as string;
    const first = await api.call('POST', `/api/v1/agents/${agentId}/completions`, { body: { question: 'order 7', stream: false } });
    expect(first.json.data).toMatchObject({ event: 'user_inputs', data: { inputs: { decision: { type: 'options', options: ['approve', 'reject'] } } } });
    const second = await api.call('POST', `/api/v1/agents/${agentId}/completions`, {
      body: { question: '', stream: false, session_id: first.json.data.session_id, inputs: { decision: { type: 'options', value: 'approve' } } },
    });
    expect(second.json.data).toMatchObject({ event: 'workflow_finished', data: { content: 'Refunded.' } });
  });

  it('refuses to import a decision declared twice, naming the field', async () => {
    const twice = [
      { id: 'go', to: 'Message:Yes' },
      { id: 'go', to: 'Message:No' },
    ];
    const res = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'review', dsl: review(twice) } });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.json)).toContain('obj.params.decisions.1.id');
    expect(JSON.stringify(res.json)).toContain('the decision \\"go\\" is declared twice');
  });
});
