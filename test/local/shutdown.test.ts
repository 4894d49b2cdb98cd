/**
 * `npm start` stopped with SIGTERM while turns are in flight, for real (a child process on the
 * test DynamoDB). The turns are held by the test's model server, which answers only when the
 * test says so: each step waits for the one before (the model saw the requests, then SIGTERM,
 * then the answers), never for the clock.
 *
 * - Past the grace period (EASEL_SHUTDOWN_GRACE_MS) the turns are aborted: the JSON client gets
 *   503 `unavailable`, the SSE client a final `turn_error`, the in-process worker's turn is given
 *   back; nothing is committed and no claim is left, so after a restart the same
 *   Idempotency-Keys run the turns at once.
 * - Within it, the turns commit, while new connections are already refused.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_TENANT } from '../../lib/local/bootstrap';
import { getHead } from '../../lib/store/sessions';
import { testTable } from '../helpers/dynamo';
import { gate } from '../helpers/gate';
import { sseFrames } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';
import { api, type Running, startServer, stopLeftovers, stopServer } from './npm-start';

const KEY = `local-stop-key-${Math.random().toString(36).slice(2)}`;
const slow = {
  components: {
    begin: { obj: { component_name: 'Begin', params: { mode: 'task' } }, downstream: ['LLM:Slow'], upstream: [] },
    'LLM:Slow': { obj: { component_name: 'LLM', params: { llm_id: 'openai:slow', sys_prompt: 'Be slow.', prompts: [{ role: 'user', content: '{sys.query}' }] } }, downstream: [], upstream: ['begin'] },
  },
};

let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
});
afterAll(async () => {
  await stopLeftovers();
  await model.close();
});

function env(table: string, extra: Record<string, string>): Record<string, string> {
  return {
    EASEL_DYNAMODB_ENDPOINT: testTable().endpoint,
    EASEL_DYNAMODB_TABLE: table,
    EASEL_LLM_BASE_URL: model.url,
    EASEL_LLM_DEFAULT_MODEL: 'openai:slow',
    EASEL_LLM_API_KEY: 'sk-local-test',
    ...extra,
  };
}

/** The claims left in the table (placeholders of turns not committed) of the local tenant's runs. */
async function claimsIn(table: string, runIds: readonly string[]): Promise<unknown[]> {
  const { doc } = testTable();
  const found: unknown[] = [];
  for (const id of runIds) {
    const { Items = [] } = await doc.send(new QueryCommand({
      TableName: table,
      KeyConditionExpression: 'pk = :pk',
      FilterExpression: 'kind = :claim',
      ExpressionAttributeValues: { ':pk': `T#${LOCAL_TENANT}#S#${id}`, ':claim': 'claim' },
      ConsistentRead: true,
    }));
    found.push(...Items);
  }
  return found;
}

const execute = (server: Running, wf: string, query: string, headers: Record<string, string>) =>
  fetch(`${server.url}/workflows/v1/workflows/${wf}/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ run_input: { query } }),
  });

describe('npm start stopped with SIGTERM', () => {
  it('aborts the turns that outlive the grace period: 503, turn_error, claims given back; after a restart the same keys run them at once', async () => {
    const table = `easel-local-stop-${Date.now().toString(36)}`;
    const first = await startServer(KEY, env(table, { EASEL_SHUTDOWN_GRACE_MS: '100' }));
    const wf = (await api(first.url, KEY, 'POST', '/workflows/v1/workflows', { name: 'slow', dsl: slow })).json.id as string;
    const events: string[] = [];
    model.respond = () => ({ kind: 'stall' }); // held until the process that asked is gone
    const since = model.calls;

    const plain = execute(first, wf, 'plain', { 'idempotency-key': 'stop-plain' }).then(async (r) => {
      events.push(`plain answered ${r.status}`);
      return { status: r.status, json: (await r.json()) as { code: string; error: string } };
    });
    const streamed = await execute(first, wf, 'streamed', { 'idempotency-key': 'stop-streamed', accept: 'text/event-stream' });
    expect(streamed.status).toBe(200); // its events flow: the outcome comes in the last frame
    const streamedText = streamed.text().then((t) => (events.push('stream ended'), t));
    const accepted = await api(first.url, KEY, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'queued' } }, { 'idempotency-key': 'stop-async', prefer: 'respond-async' });
    expect(accepted.status).toBe(202);
    const asyncRun = accepted.json.run_id as string;

    await model.arrived(since + 3);
    events.push('the model holds all three');
    first.child.kill('SIGTERM');
    events.push('SIGTERM');

    const refused = await plain;
    expect(refused).toMatchObject({ status: 503, json: { code: 'unavailable', error: expect.stringMatching(/^the server is stopping: .*nothing was written/) } });
    const frames = sseFrames(await streamedText);
    expect(frames[0]?.event).toBe('workflow_started');
    expect(frames.at(-1)).toEqual({ event: 'turn_error', data: { code: 'unavailable', error: expect.stringMatching(/^the server is stopping/), current_turn_number: null } });
    expect(await stopServer(first, null)).toBe(0);
    expect(events.slice(0, 2)).toEqual(['the model holds all three', 'SIGTERM']);
    expect(events.slice(2).sort()).toEqual(['plain answered 503', 'stream ended']);
    // the answers came while the model still held every call: the turns were aborted
    expect(model.requests.slice(since).map((r) => r.completed ?? false)).toEqual([false, false, false]);
    expect(first.stdout()).toContain('SIGTERM: stopping...\n3 turns in flight: up to 100 ms to finish (EASEL_SHUTDOWN_GRACE_MS)\naborted 3 turns still running after 100 ms');
    // the in-process worker gave its turn back: no worker would ever come for it
    expect(first.stderr()).toMatch(/queued turn released .*"kind":"released"/);

    // nothing was committed and no claim is left: every run is where it was before its turn
    const second = await startServer(KEY, env(table, {}));
    try {
      const runs = (await api(second.url, KEY, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`)).json.items as { run_id: string; status: string; turn_number: number }[];
      expect(runs.map((r) => [r.status, r.turn_number])).toEqual([['not_started', 0], ['not_started', 0], ['not_started', 0]]);
      expect(await claimsIn(table, runs.map((r) => r.run_id))).toEqual([]);
      expect(await getHead({ doc: testTable().doc, table }, LOCAL_TENANT, asyncRun)).toMatchObject({ turn: 0, claim: null });

      model.respond = () => ({ kind: 'text', text: 'done now' });
      const retried = model.calls;
      const again = await api(second.url, KEY, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'plain' } }, { 'idempotency-key': 'stop-plain' });
      expect(again.status).toBe(200);
      expect(again.json).toMatchObject({ status: 'completed', turn_number: 1 });
      const restreamed = sseFrames(await (await execute(second, wf, 'streamed', { 'idempotency-key': 'stop-streamed', accept: 'text/event-stream' })).text());
      expect(restreamed.at(-1)).toMatchObject({ event: 'turn_response', data: { status: 'completed', turn_number: 1 } });
      const queued = await api(second.url, KEY, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'queued' } }, { 'idempotency-key': 'stop-async' });
      expect(queued.json).toMatchObject({ run_id: asyncRun, status: 'completed', turn_number: 1 });
      // the retries ran their turns (one model call each), in the runs the first attempts made
      expect(model.calls - retried).toBe(3);
      const after = (await api(second.url, KEY, 'GET', `/workflows/v1/workflow-runs?workflow_id=${wf}`)).json.items as { status: string }[];
      expect(after.map((r) => r.status)).toEqual(['completed', 'completed', 'completed']);
    } finally {
      expect(await stopServer(second)).toBe(0);
    }
  }, 120_000);

  it('lets the turns that finish within the grace period commit, refusing new connections meanwhile', async () => {
    const table = `easel-local-drain-${Date.now().toString(36)}`;
    // the grace period is long: the turns end when the test lets the model answer
    const server = await startServer(KEY, env(table, { EASEL_SHUTDOWN_GRACE_MS: '3600000' }));
    const wf = (await api(server.url, KEY, 'POST', '/workflows/v1/workflows', { name: 'slow', dsl: slow })).json.id as string;
    const release = gate();
    model.respond = () => ({ kind: 'text', text: 'slow but sure', chunks: 3, until: release.opened });
    const since = model.calls;

    const plain = api(server.url, KEY, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'plain' } });
    const accepted = await api(server.url, KEY, 'POST', `/workflows/v1/workflows/${wf}/execute`, { run_input: { query: 'queued' } }, { prefer: 'respond-async' });
    expect(accepted.status).toBe(202);
    await model.arrived(since + 2);

    server.child.kill('SIGTERM');
    await server.printed('2 turns in flight: up to 3600000 ms to finish');
    // the listener is closed before that line is printed
    await expect(fetch(`${server.url}/health`)).rejects.toThrow();
    release.open();

    expect(await plain).toMatchObject({ status: 200, json: { status: 'completed', turn_number: 1 } });
    expect(await stopServer(server, null)).toBe(0);
    expect(server.stdout()).not.toContain('aborted');
    const head = await getHead({ doc: testTable().doc, table }, LOCAL_TENANT, accepted.json.run_id as string);
    expect(head).toMatchObject({ turn: 1, status: 'completed', claim: null });
  }, 120_000);
});
