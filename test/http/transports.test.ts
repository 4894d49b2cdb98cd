/**
 * The same scenarios through every way the app is served: the Node server `npm start` runs,
 * and the API Gateway (HTTP API v2) Lambda entry point with real event payloads.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from '../helpers/canvas';
import { newTenant, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { captureOutput, httpApiEvent, invocationContext } from '../functions/lambda-events';

interface Reply {
  status: number;
  json: any;
}
interface Transport {
  call(method: string, path: string, options?: { key?: string | null; body?: unknown; raw?: string }): Promise<Reply>;
  adminKey: string;
  addKey(tenant: string, scope: 'admin' | 'execute', workflowIds?: string[]): Promise<string>;
}

let node: Served;
let lambda: Transport;
beforeAll(async () => {
  node = await serveApp(testEngine());
  const { handler } = (await import('../../functions/http')) as unknown as {
    handler: (e: APIGatewayProxyEventV2, c: unknown) => Promise<APIGatewayProxyStructuredResultV2>;
  };
  lambda = {
    adminKey: node.adminKey,
    addKey: node.addKey,
    async call(method, path, options = {}) {
      const [rawPath, query] = path.split('?') as [string, string | undefined];
      const key = options.key === undefined ? node.adminKey : options.key;
      const event = httpApiEvent(method, rawPath, { ...(key ? { key } : {}), ...(options.body !== undefined ? { body: options.body } : {}), ...(query ? { query } : {}) });
      if (options.raw !== undefined) {
        event.body = options.raw;
        event.headers['content-type'] = 'application/json';
        event.headers['content-length'] = String(Buffer.byteLength(options.raw));
      }
      const { result } = await captureOutput(() => handler(event, invocationContext('http')));
      const body = result.isBase64Encoded ? Buffer.from(result.body ?? '', 'base64').toString('utf8') : (result.body ?? '');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      return { status: result.statusCode ?? 0, json };
    },
  };
});
afterAll(async () => {
  await node.close();
});

const transports: Record<string, () => Transport> = {
  'the Node server': () => node as unknown as Transport,
  'the API Gateway Lambda': () => lambda,
};

describe.each(Object.keys(transports))('through %s', (name) => {
  const api = () => (transports[name] as () => Transport)();
  const execute = (wf: string, body: unknown, key?: string) => api().call('POST', `/workflows/v1/workflows/${wf}/execute`, { body, ...(key ? { key } : {}) });

  it('runs the scenario: pause, re-pause, completion, stale turn, stop, finished run', async () => {
    const wf = (await api().call('POST', '/workflows/v1/workflows', { body: { name: 'intake', dsl: fixture('form-intake') } })).json.id as string;
    const t1 = await execute(wf, { run_input: { query: 'hi' } });
    expect(t1.json).toMatchObject({ status: 'waiting_for_input', turn_number: 1, next_input_hint: { component_id: 'UserFillUp:PlumDesksWave' } });
    const runId = t1.json.run_id as string;
    expect((await execute(wf, { run_id: runId, turn_number: 1, run_input: { inputs: {} } })).json).toMatchObject({ status: 'waiting_for_input', turn_number: 2 });
    const t3 = await execute(wf, { run_id: runId, turn_number: 2, run_input: { inputs: { name: 'Ada', age: 36, plan: 'pro' } } });
    expect(t3.json).toMatchObject({ status: 'completed', turn_number: 3, outputs: { content: 'Welcome Ada (36), plan pro; city .' } });
    const stale = await execute(wf, { run_id: runId, turn_number: 2, run_input: {} });
    expect([stale.status, stale.json.code, stale.json.current_turn_number]).toEqual([409, 'turn_conflict', 3]);
    const fresh = (await execute(wf, { run_input: { query: 'x' } })).json.run_id;
    expect((await execute(wf, { run_id: fresh, run_input: { command: 'stop' } })).json).toMatchObject({ status: 'cancelled', is_terminal: true });
    const finished = await execute(wf, { run_id: fresh, run_input: { query: 'y' } });
    expect([finished.status, finished.json.code]).toEqual([409, 'run_finished']);
  });

  it('answers bad requests, wrong types, foreign ids and the wrong scope as documented', async () => {
    const wf = (await api().call('POST', '/workflows/v1/workflows', { body: { name: 'intake', dsl: fixture('form-intake') } })).json.id as string;
    const malformed = await api().call('POST', `/workflows/v1/workflows/${wf}/execute`, { raw: '{"run_input":' });
    expect([malformed.status, malformed.json.code]).toEqual([400, 'invalid_request']);
    const t1 = await execute(wf, { run_input: { query: 'x' } });
    const wrong = await execute(wf, { run_id: t1.json.run_id, run_input: { inputs: { age: 'very', plan: 'gold' } } });
    expect([wrong.status, wrong.json.code, wrong.json.fields.map((f: { field: string }) => f.field)]).toEqual([422, 'invalid_inputs', ['age', 'plan']]);
    expect((await api().call('GET', `/workflows/v1/workflow-runs/${t1.json.run_id}`)).json.turn_number).toBe(1);
    const stranger = await api().addKey(newTenant(), 'admin');
    const foreign = await api().call('GET', `/workflows/v1/workflow-runs/${t1.json.run_id}`, { key: stranger });
    const missing = await api().call('GET', `/workflows/v1/workflow-runs/${'0'.repeat(32)}`, { key: stranger });
    // status and body: the Node server's headers carry a Date, which may tick between the two
    expect({ status: foreign.status, json: foreign.json }).toEqual({ status: missing.status, json: missing.json });
    expect(foreign.status).toBe(404);
    const executeKey = await api().addKey(node.tenant, 'execute', [wf]);
    expect((await api().call('GET', '/workflows/v1/keys', { key: executeKey })).status).toBe(403);
  });
});
