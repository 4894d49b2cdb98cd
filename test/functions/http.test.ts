/**
 * functions/http.ts as API Gateway's HTTP API invokes it: payload 2.0 events against DynamoDB
 * Local, the Powertools log lines and EMF metrics it prints.
 */
import { randomBytes } from 'node:crypto';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { beforeAll, describe, expect, it } from 'vitest';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import formIntake from '../fixtures/form-intake.json';
import { newTenant, testStore } from '../helpers/engine';
import { captureOutput, emfMetrics, httpApiEvent, invocationContext, sseFrames, type RequestOptions } from './lambda-events';

type Handler = (event: APIGatewayProxyEventV2, context: ReturnType<typeof invocationContext>) => Promise<APIGatewayProxyStructuredResultV2>;

let handler: Handler;
const tenant = newTenant();
const secret = `easel-test-${randomBytes(16).toString('hex')}`;

beforeAll(async () => {
  // EASEL_DYNAMODB_ENDPOINT/TABLE come from the global setup; no LLM endpoint: the echo model
  for (const name of Object.keys(process.env)) if (name.startsWith('EASEL_LLM_') || name.startsWith('POWERTOOLS_')) delete process.env[name];
  await putApiKey(testStore(), { tenant, id: randomBytes(8).toString('hex'), name: 'admin', scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(secret) });
  ({ handler } = (await import('../../functions/http')) as unknown as { handler: Handler });
});

async function invoke(method: string, path: string, options: RequestOptions & { remainingMs?: number } = {}) {
  const { remainingMs, ...request } = options;
  const event = httpApiEvent(method, path, { key: secret, ...request });
  const context = invocationContext('easel-test-http', remainingMs);
  const { result, lines, raw } = await captureOutput(() => handler(event, context));
  const text = result.isBase64Encoded ? Buffer.from(result.body ?? '', 'base64').toString('utf8') : (result.body ?? '');
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  const log = lines.find((l) => l.message === 'request');
  return { status: result.statusCode, headers: result.headers ?? {}, text, json, log, metrics: emfMetrics(lines), raw, event, context, result };
}

async function createWorkflow(): Promise<string> {
  const created = await invoke('POST', '/workflows/v1/workflows', { body: { name: 'intake', dsl: formIntake } });
  expect(created.status, created.raw).toBe(201);
  return created.json.id as string;
}

describe('functions/http: API Gateway HTTP API (payload 2.0)', () => {
  it('runs a form workflow over two turns', async () => {
    const workflowId = await createWorkflow();
    const execute = `/workflows/v1/workflows/${workflowId}/execute`;

    const first = await invoke('POST', execute, { body: { run_input: { query: 'hello' } } });
    expect(first.status, first.raw).toBe(200);
    expect(first.headers['content-type']).toContain('application/json');
    expect(first.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1, is_waiting_for_input: true });
    expect(first.json.next_input_hint).toMatchObject({ component_id: 'UserFillUp:PlumDesksWave' });
    expect(Object.keys(first.json.next_input_hint.inputs)).toEqual(expect.arrayContaining(['name', 'age', 'plan']));

    const second = await invoke('POST', execute, {
      body: { run_id: first.json.run_id, turn_number: 1, run_input: { inputs: { name: 'Ada', age: 36, plan: 'pro', profile: { city: 'London' } } } },
    });
    expect(second.status, second.raw).toBe(200);
    expect(second.json).toMatchObject({ status: 'completed', turn_number: 2, is_completed: true, next_input_hint: null });
    expect(JSON.stringify(second.json.events)).toContain('Welcome Ada (36), plan pro; city London.');

    const run = await invoke('GET', `/workflows/v1/workflow-runs/${first.json.run_id}`);
    expect(run.json).toMatchObject({ run_id: first.json.run_id, status: 'completed', turn_number: 2 });
  });

  it('logs one JSON line per request with the route pattern, tenant and correlation id, and no secrets', async () => {
    const workflowId = await createWorkflow();
    const call = await invoke('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'private words' } } });
    expect(call.log).toMatchObject({
      level: 'INFO',
      service: 'easel',
      message: 'request',
      method: 'POST',
      route: '/workflows/v1/workflows/:id/execute',
      status: 200,
      tenant,
      correlation_id: call.event.requestContext.requestId,
      lambda_request_id: call.context.awsRequestId,
    });
    expect(call.log?.latency_ms).toEqual(expect.any(Number));
    expect(call.raw).not.toContain(secret);
    expect(call.raw.toLowerCase()).not.toContain('bearer');
    expect(call.raw).not.toContain('private words');
    expect(call.metrics).toMatchObject({ Requests: [1], Latency: [expect.any(Number)] });
    expect(call.metrics.Conflicts).toBeUndefined();
    const emf = call.raw.split('\n').find((l) => l.includes('"_aws"'));
    expect(JSON.parse(emf ?? '{}')).toMatchObject({ service: 'easel', _aws: { CloudWatchMetrics: [{ Namespace: 'Easel', Dimensions: [['service']] }] } });
  });

  it("redacts secret-looking fields the app's logger is given", async () => {
    const { createTelemetry } = await import('../../lib/runtime/telemetry');
    const { logger } = createTelemetry();
    const { lines } = await captureOutput(async () => {
      logger.error('unhandled error', { authorization: `Bearer ${secret}`, request: { headers: { 'x-api-key': secret }, body: '{"a":1}' }, usage: { total_tokens: 7 } });
    });
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'ERROR',
        service: 'easel',
        message: 'unhandled error',
        authorization: '[redacted]',
        request: { headers: { 'x-api-key': '[redacted]' }, body: '[redacted]' },
        usage: { total_tokens: 7 },
      }),
    ]);
  });

  it('counts a 409 as a conflict', async () => {
    const workflowId = await createWorkflow();
    const execute = `/workflows/v1/workflows/${workflowId}/execute`;
    const first = await invoke('POST', execute, { body: { run_input: { query: 'hi' } } });
    const stale = await invoke('POST', execute, { body: { run_id: first.json.run_id, turn_number: 0, run_input: { query: 'again' } } });
    expect(stale.status).toBe(409);
    expect(stale.json).toMatchObject({ code: 'turn_conflict', current_turn_number: 1 });
    expect(stale.metrics).toMatchObject({ Requests: [1], Conflicts: [1] });
    expect(stale.metrics.Errors5xx).toBeUndefined();
  });

  it('answers 401 without a key', async () => {
    const call = await invoke('GET', '/workflows/v1/workflows', { key: '' });
    expect(call.status).toBe(401);
    expect(call.json).toMatchObject({ code: 'unauthorized' });
    expect(call.log).toMatchObject({ status: 401, route: '/workflows/v1/workflows' });
    expect(call.log).not.toHaveProperty('tenant');
  });

  it('answers 404 with a JSON body for unknown routes', async () => {
    for (const path of ['/no-such-route', '/workflows/v1/no-such-route']) {
      const call = await invoke('GET', path);
      expect(call.status).toBe(404);
      expect(call.headers['content-type']).toContain('application/json');
      expect(call.json).toEqual({ code: 'not_found', error: 'no such route' });
      expect(call.log).toMatchObject({ status: 404, route: 'unmatched' });
    }
  });

  it('passes the query string and serves the health check', async () => {
    const health = await invoke('GET', '/health', { key: '' });
    expect(health).toMatchObject({ status: 200, json: { status: 'ok' } });
    const bad = await invoke('GET', '/workflows/v1/workflows', { query: 'limit=0' });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ code: 'invalid_request' });
  });

  it('aborts a turn its invocation has no time left for (EASEL_DEADLINE_MARGIN_MS): 503, nothing committed, the same key then runs it', async () => {
    const workflowId = await createWorkflow();
    const execute = `/workflows/v1/workflows/${workflowId}/execute`;
    const first = await invoke('POST', execute, { body: { run_input: { query: 'hello' } } });
    const answer = { run_id: first.json.run_id, turn_number: 1, run_input: { inputs: { name: 'Ada', age: 36, plan: 'pro', profile: { city: 'London' } } } };
    // 2 s left, under the 3 s margin: the turn is aborted before it starts
    const late = await invoke('POST', execute, { body: answer, headers: { 'idempotency-key': 'deadline-1' }, remainingMs: 2_000 });
    expect(late.status, late.raw).toBe(503);
    expect(late.json).toMatchObject({ code: 'unavailable', error: expect.stringMatching(/^the invocation was about to time out: /) });
    const run = await invoke('GET', `/workflows/v1/workflow-runs/${first.json.run_id}`);
    expect(run.json).toMatchObject({ turn_number: 1, status: 'waiting_for_input', turn_in_progress: null });

    const retry = await invoke('POST', execute, { body: answer, headers: { 'idempotency-key': 'deadline-1' } });
    expect(retry.status, retry.raw).toBe(200);
    expect(retry.json).toMatchObject({ status: 'completed', turn_number: 2 });
  });

  it('buffers a streamed execute: the whole SSE body at once, ending with turn_response', async () => {
    const workflowId = await createWorkflow();
    const call = await invoke('POST', `/workflows/v1/workflows/${workflowId}/execute`, {
      body: { run_input: { query: 'stream me' } },
      headers: { accept: 'text/event-stream' },
    });
    expect(call.status, call.raw).toBe(200);
    expect(call.headers['content-type']).toContain('text/event-stream');
    expect(call.result.isBase64Encoded).toBe(false);
    const frames = sseFrames(call.text);
    expect(frames[0]?.event).toBe('workflow_started');
    expect(frames.map((f) => f.event)).toContain('node_started');
    expect(frames.at(-1)).toMatchObject({ event: 'turn_response', data: { status: 'waiting_for_input', turn_number: 1 } });
    expect(call.text.endsWith('\n\n')).toBe(true);
    // measured to the end of the body, not to its headers
    expect(call.log).toMatchObject({ status: 200, stream: 'complete', route: '/workflows/v1/workflows/:id/execute' });
  });
});
