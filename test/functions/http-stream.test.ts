/**
 * functions/http-stream.ts as a Function URL in RESPONSE_STREAM mode invokes it. The runtime's
 * `awslambda` global is replaced by a shim (as DESIGN §6 describes): `streamifyResponse`
 * returns the handler, `HttpResponseStream.from` records the metadata and returns the stream.
 * The LLM is a local OpenAI-compatible server that sends its answer in timed chunks.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context, LambdaFunctionURLEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { hashSecret, putApiKey } from '../../lib/store/api-keys';
import formIntake from '../fixtures/form-intake.json';
import llmStream from '../fixtures/llm-stream.json';
import { newTenant, testStore } from '../helpers/engine';
import { OpenAiServer } from '../llm/openai-server';
import { captureOutput, emfMetrics, functionUrlEvent, httpApiEvent, invocationContext, sseFrames, type RequestOptions } from './lambda-events';

type StreamHandler = (event: LambdaFunctionURLEvent, stream: Writable, context: Context) => Promise<void>;
type HttpHandler = (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyStructuredResultV2>;

const metadata = new WeakMap<Writable, { statusCode: number; headers: Record<string, string>; cookies: string[] }>();
const shim = {
  streamifyResponse: <T>(fn: T) => fn,
  HttpResponseStream: {
    from(stream: Writable, meta: { statusCode: number; headers: Record<string, string>; cookies: string[] }) {
      metadata.set(stream, meta);
      return stream;
    },
  },
};

const CHUNK_DELAY_MS = 150;
let llm: OpenAiServer;
let streamHandler: StreamHandler;
let httpHandler: HttpHandler;
const tenant = newTenant();
const secret = `easel-test-${randomBytes(16).toString('hex')}`;

beforeAll(async () => {
  llm = await OpenAiServer.start();
  for (const name of Object.keys(process.env)) if (name.startsWith('EASEL_LLM_') || name.startsWith('POWERTOOLS_')) delete process.env[name];
  process.env.EASEL_LLM_BASE_URL = llm.url;
  process.env.EASEL_LLM_DEFAULT_MODEL = 'openai:test-model';
  (globalThis as { awslambda?: unknown }).awslambda = shim;
  await putApiKey(testStore(), { tenant, id: randomBytes(8).toString('hex'), name: 'admin', scope: 'admin', workflowIds: [], createdAt: new Date().toISOString(), secretHash: hashSecret(secret) });
  ({ handler: streamHandler } = (await import('../../functions/http-stream')) as unknown as { handler: StreamHandler });
  ({ handler: httpHandler } = (await import('../../functions/http')) as unknown as { handler: HttpHandler });
});

afterAll(async () => {
  await llm?.close();
  delete (globalThis as { awslambda?: unknown }).awslambda;
});

/** A response stream that notes when each chunk arrived. */
function collector() {
  const chunks: { at: number; text: string }[] = [];
  let endedAt: number | undefined;
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push({ at: performance.now(), text: chunk.toString('utf8') });
      callback();
    },
    final(callback) {
      endedAt = performance.now();
      callback();
    },
  });
  return { stream, chunks, text: () => chunks.map((c) => c.text).join(''), endedAt: () => endedAt };
}

async function invokeStream(method: string, path: string, options: RequestOptions = {}) {
  const out = collector();
  const event = functionUrlEvent(method, path, { key: secret, ...options });
  const context = invocationContext('easel-test-http-stream', 900_000);
  const captured = await captureOutput(async () => {
    await streamHandler(event, out.stream, context);
    return performance.now();
  });
  return { ...out, resolvedAt: captured.result, meta: metadata.get(out.stream), lines: captured.lines, log: captured.lines.find((l) => l.message === 'request'), event };
}

async function invokeHttp(method: string, path: string, options: RequestOptions = {}) {
  const { result } = await captureOutput(() => httpHandler(httpApiEvent(method, path, { key: secret, ...options }), invocationContext('easel-test-http')));
  return { status: result.statusCode, json: JSON.parse(result.body ?? 'null') as any };
}

describe('functions/http-stream: Function URL in RESPONSE_STREAM mode', () => {
  it('streams the turn live: message frames arrive while the model is still answering', async () => {
    const created = await invokeHttp('POST', '/workflows/v1/workflows', { body: { name: 'chat', dsl: llmStream } });
    expect(created.status).toBe(201);
    llm.enqueue({ kind: 'text', text: 'one two three four', chunks: 4, delayMs: CHUNK_DELAY_MS });

    const call = await invokeStream('POST', `/workflows/v1/workflows/${created.json.id}/execute`, {
      body: { run_input: { query: 'count to four' } },
      headers: { accept: 'text/event-stream' },
    });

    expect(call.meta).toMatchObject({ statusCode: 200, headers: { 'content-type': expect.stringContaining('text/event-stream') } });
    const frames = sseFrames(call.text());
    const names = frames.map((f) => f.event);
    expect(names[0]).toBe('workflow_started');
    expect(names.indexOf('node_started')).toBeGreaterThan(0);
    expect(names.filter((n) => n === 'message').length).toBeGreaterThanOrEqual(2);
    expect(names.at(-1)).toBe('turn_response');
    expect(frames.at(-1)?.data).toMatchObject({ status: 'completed', turn_number: 1 });
    expect(JSON.stringify(frames.at(-1)?.data.events)).toContain('one two three four');

    // incremental: the first message frame was written well before the last frame
    const firstMessage = call.chunks.find((c) => c.text.includes('event: message'));
    const last = call.chunks.findLast((c) => c.text.includes('event: turn_response'));
    expect(firstMessage && last).toBeTruthy();
    expect(last!.at - firstMessage!.at).toBeGreaterThanOrEqual(2 * CHUNK_DELAY_MS);
    expect(call.endedAt()).toBeDefined();
    expect(call.log).toMatchObject({ status: 200, stream: 'complete', tenant, correlation_id: call.event.requestContext.requestId, route: '/workflows/v1/workflows/:id/execute' });
    expect(emfMetrics(call.lines)).toMatchObject({ Requests: [1] });
  });

  it('resolves only once the turn is committed', async () => {
    const created = await invokeHttp('POST', '/workflows/v1/workflows', { body: { name: 'intake', dsl: formIntake } });
    const call = await invokeStream('POST', `/workflows/v1/workflows/${created.json.id}/execute`, {
      body: { run_input: { query: 'hello' } },
      headers: { accept: 'text/event-stream' },
    });
    const frames = sseFrames(call.text());
    expect(frames.map((f) => f.event)).toEqual(expect.arrayContaining(['workflow_started', 'node_started', 'turn_response']));
    const response = frames.at(-1)?.data;
    expect(response).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });

    const run = await invokeHttp('GET', `/workflows/v1/workflow-runs/${response.run_id}`);
    expect(run).toMatchObject({ status: 200, json: { run_id: response.run_id, turn_number: 1, status: 'waiting_for_input' } });
  });

  it('writes the run’s listing after the response, before the invocation ends', async () => {
    const created = await invokeHttp('POST', '/workflows/v1/workflows', { body: { name: 'intake', dsl: formIntake } });
    const first = await invokeStream('POST', `/workflows/v1/workflows/${created.json.id}/execute`, { body: { run_input: { query: 'hello' } } });
    const runId = JSON.parse(first.text()).run_id as string;
    const second = await invokeStream('POST', `/workflows/v1/workflows/${created.json.id}/execute`, {
      body: { run_id: runId, run_input: { inputs: { name: 'Ada', age: 36, plan: 'pro' } } },
    });
    expect(JSON.parse(second.text())).toMatchObject({ status: 'completed', turn_number: 2 });
    const listed = await invokeHttp('GET', `/workflows/v1/workflow-runs?workflow_id=${created.json.id}`);
    expect(listed.json.items).toEqual([expect.objectContaining({ run_id: runId, status: 'completed', turn_number: 2 })]);
  });

  it('serves plain JSON routes and errors through the same stream', async () => {
    const unauthorized = await invokeStream('GET', '/workflows/v1/workflows', { key: '' });
    expect(unauthorized.meta).toMatchObject({ statusCode: 401 });
    expect(JSON.parse(unauthorized.text())).toMatchObject({ code: 'unauthorized' });

    const missing = await invokeStream('GET', '/no-such-route');
    expect(missing.meta).toMatchObject({ statusCode: 404, headers: { 'content-type': expect.stringContaining('application/json') } });
    expect(JSON.parse(missing.text())).toEqual({ code: 'not_found', error: 'no such route' });
  });

  it('keeps the invocation open for a turn whose client went away', async () => {
    const created = await invokeHttp('POST', '/workflows/v1/workflows', { body: { name: 'chat', dsl: llmStream } });
    llm.enqueue({ kind: 'text', text: 'slow answer for nobody', chunks: 4, delayMs: CHUNK_DELAY_MS });
    // a client that leaves after the first bytes: the stream fails every later write
    const chunks: string[] = [];
    const gone = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk.toString('utf8'));
        callback(chunks.length > 1 ? new Error('client went away') : null);
      },
    });
    gone.on('error', () => undefined);
    const honoError = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const started = performance.now();
    const { lines } = await captureOutput(() =>
      streamHandler(
        functionUrlEvent('POST', `/workflows/v1/workflows/${created.json.id}/execute`, { key: secret, body: { run_input: { query: 'anyone?' } }, headers: { accept: 'text/event-stream' } }),
        gone,
        invocationContext('easel-test-http-stream', 900_000),
      ),
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(3 * CHUNK_DELAY_MS);
    expect(honoError).toHaveBeenCalledWith('Error processing request:', expect.objectContaining({ message: 'client went away' }));
    honoError.mockRestore();
    expect(lines.find((l) => l.message === 'request')).toMatchObject({ status: 200, stream: expect.stringMatching(/^(abandoned|cancelled|failed)$/) });
    expect(emfMetrics(lines)).toMatchObject({ Requests: [1] });
    const runId = /"run_id":"([^"]+)"/.exec(chunks.join(''))?.[1];
    const runs = await invokeHttp('GET', '/workflows/v1/workflow-runs', { query: `workflow_id=${created.json.id}` });
    const id = runId ?? runs.json.items?.[0]?.run_id;
    expect(id).toBeDefined();
    const run = await invokeHttp('GET', `/workflows/v1/workflow-runs/${id}`);
    expect(run.json).toMatchObject({ status: 'completed', turn_number: 1 });
  });

  it('ends the invocation when a stalled stream never drains, after the turn committed', async () => {
    const created = await invokeHttp('POST', '/workflows/v1/workflows', { body: { name: 'chat', dsl: llmStream } });
    // the first write goes through, the next never completes (a dead connection that blocks)
    const chunks: string[] = [];
    const stuck = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        chunks.push(chunk.toString('utf8'));
        if (chunks.length === 1) callback();
      },
    });
    // the invocation's clock is the test's: plenty of time while the turn runs, then (once the
    // turn has settled) a second left, all of which the drain would need: it gets none
    let remaining = 900_000;
    const context = { ...invocationContext('easel-test-http-stream'), getRemainingTimeInMillis: () => remaining };
    llm.enqueue({ kind: 'text', text: 'nobody reads this', chunks: 3, until: llm.arrived(llm.calls + 1).then(() => void (remaining = 1000)) });
    const { lines } = await captureOutput(() =>
      streamHandler(
        functionUrlEvent('POST', `/workflows/v1/workflows/${created.json.id}/execute`, { key: secret, body: { run_input: { query: 'hello?' } }, headers: { accept: 'text/event-stream' } }),
        stuck,
        context,
      ),
    );
    // the handler returned although the writer never drained: it did not wait for it
    expect(stuck.writableNeedDrain || stuck.writableLength > 0).toBe(true);
    expect(lines.map((l) => l.message)).toContain('response stream stalled after its turns settled; ending the invocation');
    // the body was read to its end (into the writer's buffer); it is the writer that never drains
    expect(lines.find((l) => l.message === 'request')).toMatchObject({ status: 200, stream: 'complete' });
    expect(emfMetrics(lines)).toMatchObject({ Requests: [1] });
    const runs = await invokeHttp('GET', '/workflows/v1/workflow-runs', { query: `workflow_id=${created.json.id}` });
    expect(runs.json.items).toEqual([expect.objectContaining({ status: 'completed', turn_number: 1 })]);
  });
});
