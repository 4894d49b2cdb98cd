/**
 * What the native API refuses at the door: a callback URL the worker could never call (not
 * http(s), or refused by the SSRF guard) before anything starts, an execute key for workflows
 * the tenant does not have; a timer fired on a run with none armed, answered with a code of its
 * own and the run's real status; a queue failure answered without the queue's own words; an
 * execute body with a field it does not take, refused naming the field and the one meant.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExecuteBody, RunInput } from '../../lib/http/schemas';
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
  // the fields the schemas take, whatever is added to them
  const TAKES = `The body takes ${Object.keys(ExecuteBody.shape).join(', ')}`;
  const RUN_INPUT_TAKES = `run_input takes ${Object.keys(RunInput.shape).join(', ')}`;
  it.each([
    ['inputs at the top: the field meant is run_input.inputs', { inputs: { name: 'Ada' } }, 'inputs', `inputs: unknown field; did you mean run_input.inputs ({"run_input": {"inputs": ...}})? ${TAKES}`],
    ['query at the top', { query: 'hello' }, 'query', `query: unknown field; did you mean run_input.query ({"run_input": {"query": ...}})? ${TAKES}`],
    ['another case', { run_input: { query: 'x' }, runId: 'abc' }, 'runId', `runId: unknown field; did you mean run_id? ${TAKES}`],
    ['a misspelling', { callbak_url: 'https://example.com/' }, 'callbak_url', `callbak_url: unknown field; did you mean callback_url? ${TAKES}`],
    ["RAGFlow's name", { session_id: 'abc', question: 'hi' }, 'session_id', `session_id: unknown field; did you mean run_id? ${TAKES}; also unknown: question`],
    ['nothing plausible', { colour: 'blue' }, 'colour', `colour: unknown field. ${TAKES}`],
    ['inside run_input, misspelt', { run_input: { input: { name: 'Ada' } } }, 'run_input.input', `run_input.input: unknown field; did you mean run_input.inputs? ${RUN_INPUT_TAKES}`],
    ['inside run_input, nothing plausible', { run_input: { webhook_payload: { body: {} } } }, 'run_input.webhook_payload', `run_input.webhook_payload: unknown field. ${RUN_INPUT_TAKES}`],
  ])('%s: 400 invalid_request naming it and the field meant; nothing starts', async (_, body, field, error) => {
    const workflowId = await newWorkflow(form);
    const refused = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body });
    expect(refused.status).toBe(400);
    expect(refused.json).toMatchObject({ code: 'invalid_request', field, error });
    expect((await listSessions(api.engine.store, api.tenant, workflowId, { limit: 5 })).items).toEqual([]);
  });

  it('refuses inputs at the top of a turn on a waiting run: the form is not asked again, the run stays at its turn', async () => {
    const workflowId = await newWorkflow(form);
    const execute = `/workflows/v1/workflows/${workflowId}/execute`;
    const first = await api.call('POST', execute, { body: { run_input: { query: 'hi' } } });
    expect(first.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
    const misplaced = await api.call('POST', execute, { body: { run_id: first.json.run_id, turn_number: 1, inputs: { name: 'Ada' } } });
    expect(misplaced.status).toBe(400);
    expect(misplaced.json).toMatchObject({ code: 'invalid_request', field: 'inputs' });
    expect((await api.call('GET', `/workflows/v1/workflow-runs/${first.json.run_id}`)).json).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
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
