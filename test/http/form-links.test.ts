/**
 * Form links over HTTP: made by an admin key or the run's own token (the same pause and lifetime
 * give the same link), refused for a run that waits for nothing or a form with a file field;
 * the form read and answered without any key; one answer, then `form_link_used` for every later
 * one (100 at once: one commits); expired, tampered, foreign and other-kind tokens refused;
 * the answer's turn record names the link.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { graph } from '../helpers/dsl-builder';

let api: Served;
let now = Date.now();
beforeAll(async () => {
  const engine = testEngine();
  engine.clock = () => now;
  api = await serveApp(engine);
});
afterAll(async () => {
  await api.close();
});

const REVIEW = graph({
  begin: ['Begin', { mode: 'conversational' }, ['UserFillUp:Review']],
  'UserFillUp:Review': [
    'UserFillUp',
    {
      tips: 'Refund this order?',
      inputs: { note: { name: 'Note', type: 'line', optional: false } },
      decisions: [
        { id: 'approve', label: 'Approve refund', to: 'Message:Yes' },
        { id: 'reject', label: 'Reject', to: 'Message:No' },
      ],
    },
    ['Message:Yes', 'Message:No'],
  ],
  'Message:Yes': ['Message', { content: ['Refunded: {UserFillUp:Review@note}'] }],
  'Message:No': ['Message', { content: ['Refused: {UserFillUp:Review@note}'] }],
});

/** A run paused at its form; `executeKey` makes an execute key of the workflow start it. */
async function pausedRun(dsl: unknown = REVIEW, executeKey = false) {
  const created = await api.call('POST', '/workflows/v1/workflows', { body: { name: 'review', dsl } });
  expect(created.status).toBe(201);
  const key = executeKey ? await api.addKey(api.tenant, 'execute', [created.json.id]) : undefined;
  const first = await api.call('POST', `/workflows/v1/workflows/${created.json.id}/execute`, { body: { run_input: { query: 'order 42' } }, ...(key ? { key } : {}) });
  expect(first.json.status).toBe('waiting_for_input');
  return { workflowId: created.json.id as string, runId: first.json.run_id as string, runToken: first.headers.get('easel-run-token'), key };
}

const makeLink = (runId: string, body?: unknown, options: { key?: string | null; headers?: Record<string, string> } = {}) =>
  api.call('POST', `/workflows/v1/workflow-runs/${runId}/form-links`, { ...(body !== undefined ? { body } : {}), ...options });
const readForm = (token: string) => api.call('GET', '/workflows/v1/form-link', { key: null, headers: { 'easel-form-token': token } });
const answer = (token: string, inputs: Record<string, unknown>) => api.call('POST', '/workflows/v1/form-link', { key: null, headers: { 'easel-form-token': token }, body: { inputs } });

describe('form links', () => {
  it('are made for a paused run, the same for the same pause and lifetime, and point at the hosted form page', async () => {
    const { runId } = await pausedRun();
    const made = await makeLink(runId);
    expect(made.status).toBe(201);
    expect(made.json).toMatchObject({ run_id: runId, turn_number: 1, link_id: expect.stringMatching(/^[0-9a-f]{20}$/) });
    expect(made.json.url).toBe(`/playground/form#${made.json.token}`);
    expect(made.json.token).toMatch(/^fl1\./);
    const run = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(Date.parse(made.json.expires_at)).toBe(Math.floor(Date.parse(run.json.updated_at) / 1000) * 1000 + 7 * 86_400_000);
    expect((await makeLink(runId)).json).toEqual(made.json);
    const shorter = await makeLink(runId, { expires_in_seconds: 3600 });
    expect(shorter.json.token).not.toBe(made.json.token);
    expect((await makeLink(runId, { expires_in_seconds: 10 })).json).toMatchObject({ code: 'invalid_request', field: 'expires_in_seconds' });
    expect((await makeLink(runId, { expires_in_seconds: 3600, extra: 1 })).status).toBe(400);
  });

  it('are answered without any key: the form, then the answer as the next turn, whose record names the link', async () => {
    const { runId } = await pausedRun();
    const { token, link_id: linkId } = (await makeLink(runId)).json;
    const form = await readForm(token);
    expect(form.status).toBe(200);
    expect(form.json).toMatchObject({ link_id: linkId, tips: 'Refund this order?', turn_number: 1 });
    expect(Object.keys(form.json.inputs)).toEqual(['note', 'decision']);
    // nothing else of the run is there
    expect(JSON.stringify(form.json)).not.toContain('order 42');

    const bad = await answer(token, { note: 'dented', decision: 'maybe' });
    expect(bad.status).toBe(422);
    expect(bad.json.fields).toEqual([expect.objectContaining({ field: 'decision' })]);
    const answered = await answer(token, { note: 'dented', decision: 'approve' });
    expect(answered.status).toBe(200);
    expect(answered.json).toEqual({ answered: true, status: 'completed', turn_number: 2 });

    const turn = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/2`);
    expect(turn.json.request.actor).toEqual({ kind: 'form_link', id: linkId });
    expect(JSON.stringify(turn.json.response.events)).toContain('Refunded: dented');

    // it worked once: reading or answering again is told so
    expect(await readForm(token)).toMatchObject({ status: 410, json: { code: 'form_link_used' } });
    expect(await answer(token, { note: 'again', decision: 'reject' })).toMatchObject({ status: 410, json: { code: 'form_link_used' } });
  });

  it('stop working once the run moves on by another way', async () => {
    const { workflowId, runId } = await pausedRun();
    const { token } = (await makeLink(runId)).json;
    await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_id: runId, turn_number: 1, run_input: { inputs: { note: 'by API', decision: 'reject' } } } });
    expect((await readForm(token)).json.code).toBe('form_link_used');
    expect((await answer(token, { note: 'late', decision: 'approve' })).json.code).toBe('form_link_used');
  });

  it('take one answer of 100 sent at once; the others are told it was answered', async () => {
    const { runId } = await pausedRun();
    const { token } = (await makeLink(runId)).json;
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => answer(token, { note: `answer ${i}`, decision: i % 2 ? 'approve' : 'reject' })));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    expect(results.filter((r) => r.status !== 200).map((r) => r.json.code)).toEqual(Array(99).fill('form_link_used'));
    const turns = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns`);
    expect(turns.json.items.map((t: { turn_number: number }) => t.turn_number)).toEqual([1, 2]);
  });

  it('expire, and refuse tampered, foreign and other tokens as not found', async () => {
    const { runId, runToken } = await pausedRun();
    const { token } = (await makeLink(runId, { expires_in_seconds: 120 })).json;
    // one character of the MAC changed
    const at = token.length - 2;
    const flipped = `${token.slice(0, at)}${token[at] === 'A' ? 'B' : 'A'}${token.slice(at + 1)}`;
    expect(flipped).not.toBe(token);
    const missing = await readForm(`fl1.${Buffer.from('{}').toString('base64url')}.k.m`);
    expect(missing).toMatchObject({ status: 404, json: { code: 'not_found' } });
    for (const other of [flipped, runToken ?? 'rt1.x.y.z', 'not-a-token']) {
      const res = await readForm(other);
      expect(res.status, other).toBe(404);
      expect(res.json).toEqual(missing.json);
      expect((await answer(other, { note: 'x', decision: 'approve' })).json).toEqual(missing.json);
    }
    expect((await api.call('GET', '/workflows/v1/form-link', { key: null })).json.code).toBe('invalid_request');

    const { expires_at: expiresAt } = (await makeLink(runId, { expires_in_seconds: 120 })).json;
    const before = now;
    now = Date.parse(expiresAt);
    expect(await readForm(token)).toMatchObject({ status: 410, json: { code: 'form_link_expired' } });
    expect(await answer(token, { note: 'x', decision: 'approve' })).toMatchObject({ status: 410, json: { code: 'form_link_expired' } });
    now = before;
    expect((await readForm(token)).status).toBe(200);
  });

  it('are made by the run’s own token, not by a bare execute key or another tenant, nor for a run that waits for nothing or asks for a file', async () => {
    const own = await pausedRun(REVIEW, true);
    expect(own.runToken).toMatch(/^rt1\./);
    expect((await makeLink(own.runId, undefined, { key: own.key!, headers: { 'easel-run-token': own.runToken! } })).status).toBe(201);
    const { runId } = await pausedRun();
    const bare = await makeLink(own.runId, undefined, { key: own.key! });
    const stranger = await makeLink(runId, undefined, { key: await api.addKey(`other-${Date.now()}`, 'admin') });
    const nowhere = await makeLink('0'.repeat(32));
    for (const refused of [bare, stranger]) {
      expect(refused.status).toBe(404);
      expect(refused.json).toEqual(nowhere.json);
    }

    const finished = await pausedRun();
    const wf = await api.call('POST', `/workflows/v1/workflows/${finished.workflowId}/execute`, { body: { run_id: finished.runId, run_input: { inputs: { note: 'n', decision: 'approve' } } } });
    expect(wf.json.status).toBe('completed');
    expect(await makeLink(finished.runId)).toMatchObject({ status: 409, json: { code: 'not_waiting_for_input' } });

    const upload = graph({
      begin: ['Begin', { mode: 'conversational' }, ['UserFillUp:Doc']],
      'UserFillUp:Doc': ['UserFillUp', { inputs: { doc: { name: 'Document', type: 'file', optional: false } } }, ['Message:Done']],
      'Message:Done': ['Message', { content: ['ok'] }],
    });
    const withFile = await pausedRun(upload);
    expect(await makeLink(withFile.runId)).toMatchObject({ status: 400, json: { code: 'invalid_request', field: 'inputs.doc' } });
  });
});
