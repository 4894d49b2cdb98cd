/**
 * Queue-triggered and async turns: the worker's handler fed real SQS record shapes (poison
 * messages, duplicate deliveries, stale turns, a conflict retried), async turns over HTTP with
 * `Prefer: respond-async`, and signed webhooks checked by a receiving server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SIGNATURE_HEADER, verifySignature } from '../../lib/outbound/webhook';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { webhookSecret } from '../../lib/store/tenants';
import { claimNextTurn } from '../../lib/turns/execute';
import { processBatch, type QueueDeps } from '../../lib/turns/queue';
import { fixture } from '../helpers/canvas';
import { gate } from '../helpers/gate';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { sqsRecord } from '../helpers/sqs';
import { OpenAiServer } from '../llm/openai-server';

let model: OpenAiServer;
let hooks: { server: Server; url: string; received: { event: string; body: string; signature: string }[]; failFirst: number };
beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `on ${body.messages.at(-1)?.content}`, chunks: 3, delayMs: 20 });
  hooks = { server: undefined as unknown as Server, url: '', received: [], failFirst: 0 };
  hooks.server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    if (hooks.failFirst > 0) {
      hooks.failFirst--;
      res.writeHead(503).end();
      return;
    }
    hooks.received.push({ event: String(req.headers['easel-event']), body, signature: String(req.headers[SIGNATURE_HEADER]) });
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => hooks.server.listen(0, '127.0.0.1', resolve));
  hooks.url = `http://127.0.0.1:${(hooks.server.address() as AddressInfo).port}/hook`;
});
afterAll(async () => {
  await model.close();
  hooks.server.closeAllConnections();
  await new Promise<void>((resolve) => hooks.server.close(() => resolve()));
});

describe('the queue worker', () => {
  it('starts one run for a first turn sent without a key however often it is delivered; two messages make two', async () => {
    const engine = testEngine({ openaiUrl: model.url });
    const deps: QueueDeps = { engine, guard: new SsrfGuard() };
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('llm-stream'));
    const body = JSON.stringify({ tenant, workflow_id: workflowId, run_input: { query: 'no key' } });
    const delivered = sqsRecord(body, 'msg-1');
    const calls = model.calls;
    expect(await processBatch(deps, [delivered])).toEqual({ batchItemFailures: [] });
    expect(await processBatch(deps, [sqsRecord(body, 'msg-1', 2)])).toEqual({ batchItemFailures: [] });
    expect(model.calls - calls).toBe(1);
    const listed = async () => (await import('../../lib/store/session-listing')).listSessions(engine.store, tenant, workflowId, { limit: 5 });
    expect((await listed()).items).toHaveLength(1);
    // another message with the same body is another request
    expect(await processBatch(deps, [sqsRecord(body, 'msg-2')])).toEqual({ batchItemFailures: [] });
    expect((await listed()).items).toHaveLength(2);
    expect(model.calls - calls).toBe(2);
  });

  it('runs queued turns, absorbs duplicates, drops poison and stale messages, retries conflicts', async () => {
    const engine = testEngine({ openaiUrl: model.url });
    const deps: QueueDeps = { engine, guard: new SsrfGuard({ allow: ['127.0.0.1'] }) };
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    const start = { tenant, workflow_id: workflowId, run_input: { query: 'queued' }, idempotency_key: 'q-1' };

    const first = sqsRecord(JSON.stringify(start));
    const poison = sqsRecord('{not json');
    const invalid = sqsRecord(JSON.stringify({ tenant, workflow_id: workflowId, run_id: 'a'.repeat(32) })); // a resume without turn_number
    expect(await processBatch(deps, [first, poison, invalid])).toEqual({ batchItemFailures: [] });
    const duplicate = sqsRecord(JSON.stringify(start));
    const calls = model.calls;
    expect(await processBatch(deps, [duplicate])).toEqual({ batchItemFailures: [] });
    expect(model.calls).toBe(calls);

    const { items } = await import('../../lib/store/session-listing').then((m) => m.listSessions(engine.store, tenant, workflowId, { limit: 5 }));
    expect(items).toHaveLength(1);
    const runId = items[0]?.id as string;
    const stale = sqsRecord(JSON.stringify({ tenant, workflow_id: workflowId, run_id: runId, turn_number: 0, run_input: { inputs: { topic: 'x' } } }));
    expect(await processBatch(deps, [stale])).toEqual({ batchItemFailures: [] });

    // another request holds the run: the message is handed back for later
    const held = await claimNextTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'mine' } } });
    expect('claim' in held).toBe(true);
    const blocked = sqsRecord(JSON.stringify({ tenant, workflow_id: workflowId, run_id: runId, turn_number: 1, run_input: { inputs: { topic: 'theirs' } } }));
    expect(await processBatch(deps, [blocked])).toEqual({ batchItemFailures: [{ itemIdentifier: blocked.messageId }] });
  });
});

describe('scheduled runs', () => {
  it('starts one run per scheduled time, however often EventBridge Scheduler delivers it', async () => {
    const engine = testEngine({ openaiUrl: model.url });
    const deps: QueueDeps = { engine, guard: new SsrfGuard({ allow: ['127.0.0.1'] }) };
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    // the schedule's input after Scheduler substituted <aws.scheduler.scheduled-time>
    const at = (time: string) => JSON.stringify({ tenant, workflow_id: workflowId, run_input: { query: 'nightly' }, idempotency_key: `nightly:${time}` });
    const nine = at('2026-12-01T09:00:00Z');
    // Scheduler retries a target it could not confirm; SQS may deliver twice as well
    expect(await processBatch(deps, [sqsRecord(nine), sqsRecord(nine)])).toEqual({ batchItemFailures: [] });
    expect(await processBatch(deps, [sqsRecord(nine)])).toEqual({ batchItemFailures: [] });
    const { listSessions } = await import('../../lib/store/session-listing');
    expect((await listSessions(engine.store, tenant, workflowId, { limit: 10 })).items).toHaveLength(1);
    expect(await processBatch(deps, [sqsRecord(at('2026-12-02T09:00:00Z'))])).toEqual({ batchItemFailures: [] });
    expect((await listSessions(engine.store, tenant, workflowId, { limit: 10 })).items).toHaveLength(2);
  });
});

describe('async turns over HTTP', () => {
  let api: Served;
  let queue: ReturnType<typeof createInProcessQueue>;
  beforeAll(async () => {
    const engine = testEngine({ openaiUrl: model.url, allow: ['127.0.0.1'] });
    const guard = new SsrfGuard({ allow: ['127.0.0.1'] });
    queue = createInProcessQueue((records) => processBatch({ engine, guard }, records), { retryDelayMs: 50 });
    api = await serveApp(engine, { enqueue: queue.enqueue, asyncLeaseMs: 60_000, guard });
  });
  afterAll(async () => {
    await api.close();
  });

  it('answers 202 with the turn in flight, runs it in the worker, and signs its webhook', async () => {
    const wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'async', dsl: fixture('llm-stream') } })).json.id;
    hooks.failFirst = 2;
    // the model holds the async turn's answer until the checks of a turn in flight are done
    const release = gate();
    const answer = model.respond;
    model.respond = (body) => ({ ...answer(body), until: release.opened } as ReturnType<typeof answer>);
    const accepted = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, {
      body: { run_input: { query: 'take your time' }, callback_url: hooks.url },
      headers: { prefer: 'respond-async' },
    });
    expect(accepted.status).toBe(202);
    expect(accepted.json).toEqual({ run_id: expect.stringMatching(/^[0-9a-f]{32}$/), turn_number: 1, status: 'running' });
    const runId = accepted.json.run_id;
    const during = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(during.json).toMatchObject({ status: 'running', turn_number: 0, turn_in_progress: 1 });
    const sync = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_id: runId, run_input: { query: 'me too' } } });
    expect([sync.status, sync.json.code]).toEqual([409, 'turn_in_progress']);

    model.respond = answer;
    release.open();
    await queue.idle();
    const after = await api.call('GET', `/workflows/v1/workflow-runs/${runId}`);
    expect(after.json).toMatchObject({ status: 'completed', turn_number: 1, turn_in_progress: null });
    const turn = (await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/1`)).json;
    expect(turn.response.outputs.content).toBe('on take your time');

    expect(hooks.received).toHaveLength(1);
    const hook = hooks.received[0] as { event: string; body: string; signature: string };
    expect(hook.event).toBe('turn.completed');
    const secret = await webhookSecret(api.engine.store, api.tenant);
    expect((await api.call('GET', '/workflows/v1/webhook-secret')).json).toEqual({ secret });
    expect(verifySignature(secret, hook.signature, hook.body)).toBe(true);
    expect(verifySignature(`${secret}x`, hook.signature, hook.body)).toBe(false);
    expect(JSON.parse(hook.body).data).toEqual(turn.response);
    expect(hooks.failFirst).toBe(0); // the two 503s were retried
  });

  it('replays an async request with the same Idempotency-Key', async () => {
    const wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'async2', dsl: fixture('llm-stream') } })).json.id;
    const send = () => api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query: 'once' } }, headers: { prefer: 'respond-async', 'idempotency-key': 'async-1' } });
    const a = await send();
    const b = await send();
    expect(a.status).toBe(202);
    expect(b.json).toEqual(a.json);
    await queue.idle();
    const c = await send();
    expect(c.status).toBe(200);
    expect(c.json).toMatchObject({ run_id: a.json.run_id, turn_number: 1, status: 'completed' });
  });
});
