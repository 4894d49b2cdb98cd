/**
 * Background work while waiting: a form with a timer. The pump fires it when due and the run
 * takes the timeout branch; a user's answer racing the timer is ordered by the claim, so exactly
 * one outcome is committed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listDueRuns } from '../../lib/store/session-listing';
import { listTurns } from '../../lib/store/sessions';
import { executeTurn } from '../../lib/turns/execute';
import { fireTimer, pumpDueTimers } from '../../lib/turns/timers';
import { graph } from '../helpers/dsl-builder';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

const timed = graph({
  begin: ['Begin', {}, ['UserFillUp:Confirm']],
  'UserFillUp:Confirm': [
    'UserFillUp',
    { tips: 'Confirm within a minute', inputs: { ok: { name: 'OK?', type: 'boolean', optional: false } }, timeout_seconds: 60, timeout_goto: ['Message:TooLate'] },
    ['Message:Thanks', 'Message:TooLate'],
  ],
  'Message:Thanks': ['Message', { content: ['Confirmed: {UserFillUp:Confirm@ok}'] }],
  'Message:TooLate': ['Message', { content: ['No answer in time (timed out: {UserFillUp:Confirm@timed_out})'] }],
});

describe('form timers', () => {
  let clock = Date.now();
  const engine = { ...testEngine(), clock: () => clock };

  it('arms a timer while waiting, fires it through the pump when due, and takes the timeout branch', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, timed);
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'start' } });
    expect(first.response).toMatchObject({ status: 'waiting_for_input', has_background_work: true });
    const runId = first.response.run_id;
    // an empty answer asks again, keeping the deadline
    const again = await executeTurn(engine, { tenant, workflowId, runId, runInput: { inputs: {} } });
    expect(again.response.has_background_work).toBe(true);

    // not due yet: the pump leaves it (other tests' due runs share the table, so count ours only)
    expect((await listDueRuns(engine.store, clock, 100)).some((r) => r.id === runId)).toBe(false);
    await pumpDueTimers(engine);
    expect((await listTurns(engine.store, tenant, runId, 0, 10)).turns).toHaveLength(2);
    clock += 61_000;
    expect((await listDueRuns(engine.store, clock, 100)).some((r) => r.id === runId)).toBe(true);
    const report = await pumpDueTimers(engine);
    expect(report.fired).toBeGreaterThanOrEqual(1);
    expect((await listDueRuns(engine.store, clock, 100)).some((r) => r.id === runId)).toBe(false);

    const { turns } = await listTurns(engine.store, tenant, runId, 0, 10);
    const last = JSON.parse(turns.at(-1)?.response ?? '{}');
    expect(last).toMatchObject({ turn_number: 3, status: 'completed', has_background_work: false, outputs: { content: 'No answer in time (timed out: true)' } });
  });

  it('orders a user answer and the timer racing each other: exactly one outcome commits', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, timed);
    for (let round = 0; round < 5; round++) {
      const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: `race ${round}` } });
      const runId = first.response.run_id;
      const results = await Promise.allSettled([
        executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { ok: true } } }),
        fireTimer(engine, tenant, runId),
      ]);
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
        const { turns } = await listTurns(engine.store, tenant, runId, 0, 10);
      expect(turns.map((t) => t.turn)).toEqual([1, 2]);
      const content = JSON.parse(turns[1]?.response ?? '{}').outputs.content as string;
      expect(['Confirmed: true', 'No answer in time (timed out: true)']).toContain(content);
    }
  });
});

describe('pump-companions over HTTP', () => {
  let api: Served;
  beforeAll(async () => {
    api = await serveApp(testEngine());
  });
  afterAll(async () => {
    await api.close();
  });

  it('fires the armed timer on demand and answers the turn; without a timer it is a 409 no_timer_armed', async () => {
    const wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'timed', dsl: timed } })).json.id;
    const t1 = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'x' } } });
    const run = await api.call('GET', `/workflows/v1/workflow-runs/${t1.json.run_id}`);
    expect(run.json).toMatchObject({ has_background_work: true, timer_due_at: expect.any(String) });
    const pumped = await api.call('POST', `/workflows/v1/workflows/${wf}/runs/${t1.json.run_id}/pump-companions`);
    expect(pumped.json).toMatchObject({ turn_number: 2, status: 'completed', has_background_work: false });
    const none = await api.call('POST', `/workflows/v1/workflows/${wf}/runs/${t1.json.run_id}/pump-companions`);
    expect([none.status, none.json.code, none.json.status]).toEqual([409, 'no_timer_armed', 'completed']);
  });
});
