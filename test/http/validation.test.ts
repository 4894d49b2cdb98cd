/**
 * What the native API refuses at the door: a callback URL the worker could never call (not
 * http(s), or refused by the SSRF guard) before anything starts, an execute key for workflows
 * the tenant does not have; a timer fired on a run with none armed, answered with a code of its
 * own and the run's real status; a queue failure answered without the queue's own words.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { listSessions } from '../../lib/store/session-listing';
import type { QueueMessage } from '../../lib/turns/queue';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';

const hello = graph({ begin: ['Begin', {}, ['Message:Hi']], 'Message:Hi': ['Message', { content: ['hi'] }] });
const form = graph({
  begin: ['Begin', { mode: 'conversational' }, ['UserFillUp:Ask']],
  'UserFillUp:Ask': ['UserFillUp', { tips: 'Your name?', inputs: { name: { name: 'Name', type: 'line', optional: false } } }, ['Message:Hi']],
  'Message:Hi': ['Message', { content: ['hi {UserFillUp:Ask@name}'] }],
});

let api: Served;
const queued: QueueMessage[] = [];
beforeAll(async () => {
  // the app's guard lets the test's receiver on 127.0.0.1:8 through, nothing else on loopback
  api = await serveApp(testEngine(), { enqueue: async (m) => void queued.push(m as QueueMessage), guard: new SsrfGuard({ allow: ['127.0.0.8'] }) });
});
afterAll(async () => {
  await api.close();
});

const newWorkflow = async (dsl: unknown = hello) => (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'wf', dsl } })).json.id as string;

describe('callback_url', () => {
  const REFUSED = [
    ['javascript:alert(1)', /must be an http\(s\) URL/],
    ['file:///etc/passwd', /must be an http\(s\) URL/],
    ['not a url', /must be an http\(s\) URL/],
    ['http://169.254.169.254/latest/meta-data/', /link-local/],
    ['http://[::ffff:169.254.169.254]/', /refused/],
    ['http://127.0.0.1:9/hook', /loopback/],
    ['http://10.0.0.1/', /private/],
    ['http://user:pass@example.com/', /credentials/],
  ] as const;

  it.each(REFUSED)('%s is refused with 400 invalid_request naming callback_url, and nothing starts', async (url, why) => {
    const workflowId = await newWorkflow();
    const before = queued.length;
    for (const headers of [{ prefer: 'respond-async' }, {}] as Record<string, string>[]) {
      const res = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'x' }, callback_url: url }, headers });
      expect(res.status, res.text).toBe(400);
      expect(res.json).toMatchObject({ code: 'invalid_request', field: 'callback_url' });
      expect(res.json.error).toMatch(/^callback_url: /);
      expect(res.json.error).toMatch(why);
    }
    expect(queued.length).toBe(before);
    expect((await listSessions(api.engine.store, api.tenant, workflowId, { limit: 5 })).items).toEqual([]);
  });

  it('an http(s) URL the guard lets through is taken, and travels with the queued turn', async () => {
    const workflowId = await newWorkflow();
    const res = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, {
      body: { run_input: { query: 'x' }, callback_url: 'http://127.0.0.8:9/hook' },
      headers: { prefer: 'respond-async' },
    });
    expect(res.status, res.text).toBe(202);
    expect(queued.at(-1)).toMatchObject({ run_id: res.json.run_id, callback_url: 'http://127.0.0.8:9/hook' });
  });
});

describe('an execute body with a field it does not take', () => {
  it('is refused naming the field, and where a run_input field goes; nothing starts', async () => {
    const workflowId = await newWorkflow(form);
    const misplaced = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { inputs: { name: 'Ada' } } });
    expect(misplaced.status).toBe(400);
    expect(misplaced.json).toMatchObject({ code: 'invalid_request', field: 'inputs', error: 'inputs: unknown field; it goes inside run_input: {"run_input": {"inputs": ...}}' });
    const stray = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'x' }, runId: 'abc' } });
    expect(stray.json).toMatchObject({ code: 'invalid_request', field: 'runId', error: 'runId: unknown field; the body takes run_id, turn_number, run_input, callback_url' });
    expect((await listSessions(api.engine.store, api.tenant, workflowId, { limit: 5 })).items).toEqual([]);
  });
});

describe('pump-companions on a run with no timer armed', () => {
  it('answers 409 no_timer_armed, with the run status in `status`', async () => {
    const workflowId = await newWorkflow(form);
    const t1 = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'x' } } });
    expect(t1.json.status).toBe('waiting_for_input');
    const pumped = await api.call('POST', `/workflows/v1/workflows/${workflowId}/runs/${t1.json.run_id}/pump-companions`);
    expect(pumped.status).toBe(409);
    expect(pumped.json).toEqual({ code: 'no_timer_armed', error: 'the run is waiting_for_input with no form timer armed', status: 'waiting_for_input' });
    // nothing was committed
    expect((await api.call('GET', `/workflows/v1/workflow-runs/${t1.json.run_id}`)).json).toMatchObject({ turn_number: 1, status: 'waiting_for_input' });
  });
});

describe('a queue that refuses an async turn', () => {
  it('answers 503 without what the queue said (it is logged), and gives the claim back', async () => {
    const logged: string[] = [];
    const failing = await serveApp(testEngine(), {
      enqueue: async () => {
        throw new Error('AccessDenied: arn:aws:sqs:eu-west-1:123456789012:TurnQueue');
      },
      logger: { info() {}, error: (message, fields) => void logged.push(`${message} ${JSON.stringify(fields)}`) },
    });
    try {
      const workflowId = (await failing.call('POST', '/workflows/v1/workflows', { body: { name: 'wf', dsl: form } })).json.id as string;
      const path = `/workflows/v1/workflows/${workflowId}/execute`;
      const runId = (await failing.call('POST', path, { body: { run_input: { query: 'x' } } })).json.run_id as string;
      const res = await failing.call('POST', path, { body: { run_id: runId, run_input: { inputs: { name: 'Ada' } } }, headers: { prefer: 'respond-async' } });
      expect(res.status).toBe(503);
      expect(res.json).toEqual({ code: 'unavailable', error: 'the turn could not be queued; nothing was started' });
      expect(logged.join('\n')).toContain('AccessDenied');
      // the turn is free again at once
      const sync = await failing.call('POST', path, { body: { run_id: runId, run_input: { inputs: { name: 'Ada' } } } });
      expect(sync.json).toMatchObject({ status: 'completed', turn_number: 2 });
    } finally {
      await failing.close();
    }
  });
});

describe('key creation', () => {
  it('refuses workflow ids the tenant does not have: another tenant’s, deleted, or none at all', async () => {
    const own = await newWorkflow();
    const gone = await newWorkflow();
    expect((await api.call('DELETE', `/workflows/v1/workflows/${gone}`)).status).toBe(204);
    const other = await serveApp(api.engine);
    try {
      const theirs = (await other.call('POST', '/workflows/v1/workflows', { body: { name: 'theirs', dsl: hello } })).json.id as string;
      const res = await api.call('POST', '/workflows/v1/keys', { body: { name: 'embed', scope: 'execute', workflow_ids: [own, theirs, 'nope', gone, theirs] } });
      expect(res.status, res.text).toBe(400);
      expect(res.json).toEqual({
        code: 'invalid_request',
        error: `workflow_ids: this tenant has no workflow ${theirs}, nope, ${gone}`,
        field: 'workflow_ids',
        unknown_workflow_ids: [theirs, 'nope', gone],
      });
      // the other tenant's own key may name it
      expect((await other.call('POST', '/workflows/v1/keys', { body: { name: 'embed', scope: 'execute', workflow_ids: [theirs] } })).status).toBe(201);
    } finally {
      await other.close();
    }
    const ok = await api.call('POST', '/workflows/v1/keys', { body: { name: 'embed', scope: 'execute', workflow_ids: [own] } });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.json).toMatchObject({ scope: 'execute', workflow_ids: [own] });
    expect((await api.call('GET', `/workflows/v1/workflows/${own}`, { key: ok.json.key })).status).toBe(200);
  });
});
