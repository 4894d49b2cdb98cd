/**
 * Replaying recorded runs against a version, through the API and the queue worker (in this
 * process, as npm start runs it): a workflow with 20 recorded runs of two turns each; version 2
 * changes one prompt (LLM:General) and one branch (Switch:Route also sends "refund" to billing).
 * The replay names exactly the runs and components that diverge, answers every unchanged call
 * from its record (the model server counts every request: only the changed prompt's calls and
 * the new branch's reach it), writes nothing into the recorded runs, and is idempotent by key.
 * `on_differ: "refuse"` makes no live call at all. Workflow deletion takes the replays with it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { keys } from '../../lib/store/item-keys';
import { processBatch } from '../../lib/turns/queue';
import { graph } from '../helpers/dsl-builder';
import { testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

let model: OpenAiServer;
let api: Served;
let queue: ReturnType<typeof createInProcessQueue>;

beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `answer to "${body.messages.at(-1)?.content}"`, chunks: 2 });
  const engine = testEngine({ openaiUrl: model.url });
  queue = createInProcessQueue((records) => processBatch({ engine, guard: new SsrfGuard(), requeue: (m) => queue.enqueue(m) }, records));
  api = await serveApp(engine, { enqueue: queue.enqueue });
});
afterAll(async () => {
  await queue.idle();
  await api.close();
  await model.close();
});

const llm = (prompt: string, next: string): [string, Record<string, unknown>, string[]] => ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Answer in one line.', prompts: [{ role: 'user', content: prompt }], message_history_window_size: 0 }, [next]];

/** Billing questions go to LLM:Billing, the rest to LLM:General; version 2 also sends refunds to billing and asks LLM:General otherwise. */
function support(v2: boolean) {
  const billing = [{ cpn_id: 'sys.query', operator: 'contains', value: 'billing' }];
  return graph({
    begin: ['Begin', { mode: 'conversational' }, ['Switch:Route']],
    'Switch:Route': ['Switch', {
      conditions: [{ logical_operator: 'or', items: v2 ? [...billing, { cpn_id: 'sys.query', operator: 'contains', value: 'refund' }] : billing, to: ['LLM:Billing'] }],
      end_cpn_ids: ['LLM:General'],
    }, ['LLM:Billing', 'LLM:General']],
    'LLM:Billing': llm('Billing help: {sys.query}', 'Message:Billing'),
    'LLM:General': llm(v2 ? 'General help, briefly: {sys.query}' : 'General help: {sys.query}', 'Message:General'),
    'Message:Billing': ['Message', { content: ['{LLM:Billing@content}'] }],
    'Message:General': ['Message', { content: ['{LLM:General@content}'] }],
  });
}

/** Every item of a run's partition, as stored. */
async function partition(runId: string): Promise<unknown[]> {
  const out = await api.engine.store.doc.send(new QueryCommand({ TableName: api.engine.store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.session(api.tenant, runId) }, ConsistentRead: true }));
  return out.Items ?? [];
}

async function replayDone(workflowId: string, replayId: string) {
  await queue.idle();
  const res = await api.call('GET', `/workflows/v1/workflows/${workflowId}/replays/${replayId}`);
  expect(res.status).toBe(200);
  return res.json;
}

async function allResults(workflowId: string, replayId: string): Promise<any[]> {
  const items: any[] = [];
  let cursor: string | null = null;
  do {
    const res = await api.call('GET', `/workflows/v1/workflows/${workflowId}/replays/${replayId}/results${cursor ? `?cursor=${cursor}` : ''}`);
    expect(res.status).toBe(200);
    items.push(...res.json.items);
    cursor = res.json.next_cursor;
  } while (cursor);
  return items;
}

describe('replaying 20 recorded runs against a version that changes one prompt and one branch', () => {
  let wf = '';
  const runs: { id: string; topic: 'billing' | 'general' | 'refund' }[] = [];

  beforeAll(async () => {
    wf = (await api.call('POST', '/workflows/v1/workflows', { body: { name: 'Support', dsl: support(false) } })).json.id;
    const topics = [...Array(8).fill('billing'), ...Array(8).fill('general'), ...Array(4).fill('refund')] as ('billing' | 'general' | 'refund')[];
    for (const [i, topic] of topics.entries()) {
      const query = topic === 'billing' ? `billing question ${i}` : topic === 'general' ? `weather question ${i}` : `refund question ${i}`;
      const first = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_input: { query } } });
      expect(first.json).toMatchObject({ status: 'completed', turn_number: 1 });
      const second = await api.call('POST', `/workflows/v1/workflows/${wf}/execute`, { body: { run_id: first.json.run_id, turn_number: 1, run_input: { query: `my billing is fine now, thanks (${i})` } } });
      expect(second.json).toMatchObject({ status: 'completed', turn_number: 2 });
      runs.push({ id: first.json.run_id, topic });
    }
    const v2 = await api.call('POST', `/workflows/v1/workflows/${wf}/versions`, { body: { dsl: support(true), activate: false } });
    expect(v2.json.version).toBe(2);
  }, 120_000);

  it('names exactly the runs and components that diverge, makes no live model call for what did not change, writes nothing into the runs', async () => {
    const before = await Promise.all(runs.map((r) => partition(r.id)));
    const callsBefore = model.calls;

    const started = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 2, runs: runs.map((r) => r.id), page_size: 6 }, headers: { 'idempotency-key': 'replay-support-v2' } });
    expect(started.status).toBe(202);
    expect(started.json).toMatchObject({ workflow_id: wf, version: 2, on_differ: 'live', runs_total: 20, pages_total: 4 });
    expect(started.headers.get('location')).toBe(`/workflows/v1/workflows/${wf}/replays/${started.json.replay_id}`);

    const view = await replayDone(wf, started.json.replay_id);
    expect(view).toMatchObject({ status: 'done', runs_done: 20, pages_done: 4 });
    expect(view.summary.outcomes).toEqual({ same: 8, diverged: 12, refused: 0, skipped: 0, error: 0 });

    // exactly the general and refund runs, with exactly their components
    const expected = new Map(runs.filter((r) => r.topic !== 'billing').map((r) => [r.id, r.topic === 'general'
      ? ['LLM:General', 'Message:General']
      : ['LLM:Billing', 'LLM:General', 'Message:Billing', 'Message:General', 'Switch:Route']]));
    expect(new Map(view.summary.runs.map((r: any) => [r.run_id, [...r.components].sort()]))).toEqual(expected);

    // the model server saw only the changed prompt's calls and the new branch's, one per diverged run
    const live = model.requests.slice(callsBefore).map((r) => r.body.messages.at(-1)?.content);
    expect(live.sort()).toEqual([
      ...runs.filter((r) => r.topic === 'refund').map((_, i) => `Billing help: refund question ${16 + i}`),
      ...runs.filter((r) => r.topic === 'general').map((_, i) => `General help, briefly: weather question ${8 + i}`),
    ].sort());
    expect(view.summary.calls).toEqual({ recorded: 40, answered: 28, live: 12 });

    const results = await allResults(wf, started.json.replay_id);
    expect(results.map((r) => r.run_id)).toEqual(runs.map((r) => r.id));
    for (const [i, r] of results.entries()) {
      const topic = runs[i]?.topic;
      expect(r).toMatchObject({ recorded_version: 1, turns: 2, turns_replayed: 2 });
      if (topic === 'billing') {
        expect(r).toMatchObject({ outcome: 'same', first_divergence: null, components: [], live_calls: [], calls: { recorded: 2, answered: 2, live: 0 } });
      } else if (topic === 'general') {
        expect(r.live_calls).toEqual([{ turn: 1, component_id: 'LLM:General', kind: 'model', name: 'openai:test-default', ordinal: 0, path: [], reason: 'differs' }]);
        expect(r.first_divergence).toMatchObject({ turn: 1, component_id: 'LLM:General' });
        expect(r.first_divergence.outputs.replayed.content).toContain('General help, briefly');
        // the second turn took the unchanged billing branch: answered from its records, the same
        expect(r.components.every((c: any) => c.turn === 1)).toBe(true);
      } else {
        expect(r.live_calls).toEqual([{ turn: 1, component_id: 'LLM:Billing', kind: 'model', name: 'openai:test-default', ordinal: 0, path: [], reason: 'unrecorded' }]);
        expect(r.first_divergence).toMatchObject({ turn: 1, component_id: 'Switch:Route', outputs: { recorded: { _next: ['LLM:General'] }, replayed: { _next: ['LLM:Billing'] } } });
        expect(r.components.filter((c: any) => c.change === 'recorded_only').map((c: any) => c.component_id).sort()).toEqual(['LLM:General', 'Message:General']);
        expect(r.components.filter((c: any) => c.change === 'replayed_only').map((c: any) => c.component_id).sort()).toEqual(['LLM:Billing', 'Message:Billing']);
      }
    }

    // not one item of the recorded runs changed, and none was added
    expect(await Promise.all(runs.map((r) => partition(r.id)))).toEqual(before);

    // the same key and request: the same replay (200); the same key for another request: refused
    const again = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 2, runs: runs.map((r) => r.id), page_size: 6 }, headers: { 'idempotency-key': 'replay-support-v2' } });
    expect([again.status, again.json.replay_id, again.json.status]).toEqual([200, started.json.replay_id, 'done']);
    const other = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 1, runs: runs.map((r) => r.id) }, headers: { 'idempotency-key': 'replay-support-v2' } });
    expect([other.status, other.json.code]).toEqual([422, 'idempotency_mismatch']);
    await queue.idle();
    expect(model.calls).toBe(callsBefore + 12);
  }, 120_000);

  it('with on_differ "refuse", stops each run at its first call that would go live, and makes none', async () => {
    const callsBefore = model.calls;
    const started = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 2, runs: runs.map((r) => r.id), on_differ: 'refuse' } });
    expect(started.status).toBe(202);
    const view = await replayDone(wf, started.json.replay_id);
    expect(view.summary.outcomes).toEqual({ same: 8, diverged: 0, refused: 12, skipped: 0, error: 0 });
    expect(model.calls).toBe(callsBefore);
    const results = await allResults(wf, started.json.replay_id);
    const general = results.find((r) => r.run_id === runs.find((x) => x.topic === 'general')?.id);
    expect(general).toMatchObject({ outcome: 'refused', turns_replayed: 0, refused: { turn: 1, component_id: 'LLM:General', kind: 'model' }, calls: { live: 0 } });
    const refund = results.find((r) => r.run_id === runs.find((x) => x.topic === 'refund')?.id);
    expect(refund).toMatchObject({ outcome: 'refused', refused: { turn: 1, component_id: 'LLM:Billing', kind: 'model' } });
  }, 60_000);

  it('samples runs started since a time, refuses what the workflow does not have, and answers 404 for what is not there', async () => {
    const sample = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 1, runs: { sample: 5, since: '2000-01-01T00:00:00Z' } } });
    expect(sample.status).toBe(202);
    expect(sample.json).toMatchObject({ runs_total: 5, selection: { sample: 5, since: '2000-01-01T00:00:00.000Z' } });
    const sampled = await replayDone(wf, sample.json.replay_id);
    // against the version they were recorded on, every run replays the same, from records alone
    expect(sampled.summary).toMatchObject({ outcomes: { same: 5 }, calls: { live: 0 } });
    const future = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 1, runs: { sample: 5, since: '2999-01-01T00:00:00Z' } } });
    expect(future.json).toMatchObject({ runs_total: 0, status: 'done' });

    const noVersion = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 9, runs: [runs[0]?.id] } });
    expect(noVersion.json).toMatchObject({ code: 'invalid_request', field: 'version' });
    const stranger = '0123456789abcdef0123456789abcdef';
    const unknown = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 2, runs: [runs[0]?.id, stranger] } });
    expect([unknown.status, unknown.json.field, unknown.json.unknown_run_ids]).toEqual([400, 'runs', [stranger]]);
    const badBody = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 2, runs: { sample: 0 } } });
    expect([badBody.status, badBody.json.code]).toEqual([400, 'invalid_request']);
    const extra = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 2, runs: [runs[0]?.id], mode: 'x' } });
    expect([extra.status, extra.json.field]).toEqual([400, 'mode']);
    const missing = await api.call('GET', `/workflows/v1/workflows/${wf}/replays/${stranger}`);
    expect([missing.status, missing.json.code]).toEqual([404, 'not_found']);

    // an execute key of the workflow may neither start nor read a replay
    const execute = await api.addKey(api.tenant, 'execute', [wf]);
    const byExecute = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { key: execute, body: { version: 2, runs: [runs[0]?.id] } });
    expect([byExecute.status, byExecute.json.code]).toEqual([403, 'forbidden']);
    expect((await api.call('GET', `/workflows/v1/workflows/${wf}/replays/${sample.json.replay_id}`, { key: execute })).status).toBe(403);
  }, 60_000);

  it('go with their workflow when it is deleted', async () => {
    const started = await api.call('POST', `/workflows/v1/workflows/${wf}/replays`, { body: { version: 2, runs: [runs[0]?.id] } });
    await replayDone(wf, started.json.replay_id);
    const stored = () => api.engine.store.doc.send(new QueryCommand({ TableName: api.engine.store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.replays(api.tenant, wf) }, ConsistentRead: true }));
    expect((await stored()).Items?.length).toBeGreaterThan(0);
    expect((await api.call('DELETE', `/workflows/v1/workflows/${wf}`)).status).toBe(204);
    expect((await stored()).Items).toEqual([]);
    expect((await api.call('GET', `/workflows/v1/workflows/${wf}/replays/${started.json.replay_id}`)).status).toBe(404);
  }, 60_000);
});
