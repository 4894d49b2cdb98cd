/**
 * Call records: every call a turn makes outside the run is kept with its turn, in order — the
 * component, the kind, an ordinal, a hash of the request as built before secrets are filled in,
 * and what came back — including an Agent's rounds and tool calls, across the checkpoints of an
 * async turn, and bounded per turn.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Canvas, type CanvasEvent, compileWorkflow } from '../../lib/canvas';
import { CallLog, type CallRecord, CallReplay } from '../../lib/canvas/calls';
import { builtinComponents } from '../../lib/components';
import { referencesForRecord } from '../../lib/components/recorded-references';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { getTurn } from '../../lib/store/sessions';
import { executeTurn, type TurnEngine } from '../../lib/turns/execute';
import { processMessage, type QueueMessage, type WorkerMessage } from '../../lib/turns/queue';
import { graph, llmStep } from '../helpers/dsl-builder';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { testServices } from '../helpers/services';
import { startTarget, type TargetServer } from '../helpers/target-server';
import { OpenAiServer } from '../llm/openai-server';

const SECRET = 'sk-call-record-secret-9d0c1b';
let model: OpenAiServer;
let target: TargetServer;
let engine: TurnEngine;

beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `answer to ${body.messages.at(-1)?.content}`, chunks: 2 });
  target = await startTarget();
  engine = { ...testEngine({ openaiUrl: model.url }), services: testServices({ openaiUrl: model.url, allow: ['127.0.0.1'], secrets: { LOG_KEY: SECRET } }) };
});
afterAll(async () => {
  await model.close();
  await target.close();
});

const modelThenInvoke = () => graph({
  begin: ['Begin', { mode: 'conversational' }, ['LLM:A']],
  'LLM:A': llmStep('A', ['Invoke:Log']),
  'Invoke:Log': ['Invoke', {
    url: `${target.url}/log`,
    method: 'post',
    headers: '{"x-log-key": "{secret.LOG_KEY}"}',
    variables: [{ key: 'answer', ref: 'LLM:A@content' }],
    datatype: 'json',
    timeout: 5,
  }, ['Message:Out']],
  'Message:Out': ['Message', { content: ['{LLM:A@content}'] }],
});

async function callsOf(tenant: string, runId: string, turn: number): Promise<{ records: CallRecord[]; dropped: number }> {
  const t = await getTurn(engine.store, tenant, runId, turn);
  return t?.calls as { records: CallRecord[]; dropped: number };
}

describe('call records', () => {
  it('keep each model call and HTTP request of a turn, with the request as built before secrets', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, modelThenInvoke());
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'the weather' } });
    const runId = first.response.run_id;
    const calls = await callsOf(tenant, runId, 1);
    expect(calls.dropped).toBe(0);
    expect(calls.records.map((r) => [r.component_id, r.kind, r.ordinal, r.status])).toEqual([
      ['LLM:A', 'model', 0, 'ok'],
      ['Invoke:Log', 'invoke', 0, 'ok'],
    ]);
    const [llm, invoke] = calls.records as [CallRecord, CallRecord];
    expect(llm.result).toMatchObject({ text: 'answer to step A of the weather' });
    expect(invoke.result).toMatchObject({ status: 200 });
    expect(target.requests.at(-1)?.body).toContain('answer to step A of the weather');
    // nothing of the turn's records holds the secret's value
    expect(JSON.stringify(calls)).not.toContain(SECRET);

    // the same request hashes the same in another run; another query does not
    const again = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'the weather' } });
    const other = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'the tides' } });
    const hashes = async (id: string) => (await callsOf(tenant, id, 1)).records.map((r) => r.request_hash);
    expect(await hashes(again.response.run_id)).toEqual(await hashes(runId));
    expect((await hashes(other.response.run_id))[0]).not.toBe(llm.request_hash);
  });

  it('keep an Agent’s rounds and its tool calls in the order they were made', async () => {
    const tenant = newTenant();
    const subAgent = { component_name: 'Agent', name: 'Researcher', params: { llm_id: 'r@Local', sys_prompt: 'Research.', user_prompt: '', max_rounds: 1, tools: [] } };
    const workflowId = await newWorkflow(engine, tenant, graph({
      begin: ['Begin', { mode: 'conversational' }, ['Agent:Main']],
      'Agent:Main': ['Agent', { llm_id: 'main@Local', sys_prompt: 'Help.', prompts: [{ role: 'user', content: '{sys.query}' }], max_rounds: 3, tools: [subAgent] }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{Agent:Main@content}'] }],
    }));
    model.enqueue(
      { kind: 'tools', calls: [{ name: 'Researcher_0', arguments: { user_prompt: 'find it' } }] },
      { kind: 'text', text: 'researched' },
      { kind: 'text', text: 'final answer' },
    );
    const result = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'help me' } });
    expect(result.response.status).toBe('completed');
    const { records } = await callsOf(tenant, result.response.run_id, 1);
    expect(records.map((r) => [r.kind, r.ordinal])).toEqual([['model', 0], ['model', 1], ['tool', 2], ['model', 3]]);
    expect(records[0]?.result).toMatchObject({ tool_calls: [{ name: 'Researcher_0' }] });
    expect(records[2]).toMatchObject({ name: 'Researcher_0', status: 'ok', result: { content: 'researched' } });
    expect(records[3]?.result).toMatchObject({ text: 'final answer' });
  });

  it('survive the checkpoints of an async turn that several invocations finish', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, graph({
      begin: ['Begin', { mode: 'task' }, ['LLM:A']],
      'LLM:A': llmStep('A', ['LLM:B']),
      'LLM:B': llmStep('B', ['Message:Out']),
      'Message:Out': ['Message', { content: ['{LLM:A@content} / {LLM:B@content}'] }],
    }));
    const queue: QueueMessage[] = [];
    const deps = { engine, guard: new SsrfGuard(), requeue: async (m: WorkerMessage) => void queue.push(m as QueueMessage) };
    // every invocation is past its deadline: the turn is suspended at each checkpoint and continued
    let outcome = await processMessage(deps, JSON.stringify({ tenant, workflow_id: workflowId, run_input: { query: 'long' } }), { stopBy: 0 });
    let invocations = 1;
    while (outcome.kind === 'continued') {
      outcome = await processMessage(deps, JSON.stringify(queue.shift()), { stopBy: 0 });
      invocations++;
    }
    if (outcome.kind !== 'done') throw new Error(JSON.stringify(outcome));
    expect(invocations).toBeGreaterThan(1);
    const { records } = await callsOf(tenant, outcome.runId, 1);
    expect(records.map((r) => [r.component_id, (r.result as { text: string }).text])).toEqual([
      ['LLM:A', 'answer to step A of long'],
      ['LLM:B', 'answer to step B of long'],
    ]);
  });

  it('answer a resumed batch by component, path, kind and request hash in the order made; a request no record matches goes live, the records staying for the rest', () => {
    const log = new CallLog();
    log.add('Agent:A', [], { kind: 'model', name: 'm', request: { round: 0 }, result: { text: 'a' } });
    // two calls made in parallel, the second completed first
    log.add('Agent:A', [], { kind: 'tool', name: 't_0', request: { q: 2 }, result: { content: 'two' } });
    log.add('Agent:A', [], { kind: 'tool', name: 't_0', request: { q: 1 }, result: { content: 'one' } });
    log.add('Agent:A', [], { kind: 'tool', name: 't_0', request: { q: 3 }, error: 'the service answered 500' });
    log.add('Agent:B', ['Loop:L'], { kind: 'model', name: 'm', request: { round: 0 }, result: { text: 'b' }, replay: { chunks: ['c1'] } });
    // what replaying needs stays beside the records, never in them
    expect(log.records[4]).not.toHaveProperty('replay');
    expect(log.completedSince(4)).toEqual([{ record: log.records[4], replay: { chunks: ['c1'] } }]);

    const replay = new CallReplay(log.completedSince(0));
    expect(replay.take('Agent:A', [], { kind: 'model', name: 'm', request: { round: 0 } })?.record.result).toEqual({ text: 'a' });
    expect(replay.take('Agent:A', [], { kind: 'tool', name: 't_0', request: { q: 1 } })?.record.result).toEqual({ content: 'one' });
    expect(replay.take('Agent:A', [], { kind: 'tool', name: 't_0', request: { q: 2 } })?.record.result).toEqual({ content: 'two' });
    // a failed call's record too: the component knows whether that failure was final
    expect(replay.take('Agent:A', [], { kind: 'tool', name: 't_0', request: { q: 3 } })?.record).toMatchObject({ status: 'error', error: 'the service answered 500' });
    // nothing recorded at that path: a call in flight, not a divergence
    expect(replay.take('Agent:B', [], { kind: 'model', name: 'm', request: { round: 0 } })).toBeUndefined();
    // a request no record matches goes live (a call the earlier run never made, one made in
    // parallel, or one that differs); the records stay for the requests that match them
    expect(replay.take('Agent:B', ['Loop:L'], { kind: 'model', name: 'm', request: { round: 0, changed: true } })).toBeUndefined();
    expect(replay.take('Agent:A', [], { kind: 'tool', name: 't_0', request: { q: 4 } })).toBeUndefined();
    expect(replay.diverged).toEqual([{ component_id: 'Agent:B', kind: 'model', ordinal: 0 }]);
    expect(replay.take('Agent:B', ['Loop:L'], { kind: 'model', name: 'm', request: { round: 0 } })?.record.result).toEqual({ text: 'b' });
    // every record answered: nothing went another way
    expect(replay.diverged).toEqual([]);
    expect(replay.replayed).toBe(5);
  });

  it('answer a turn from another turn\u2019s records where the same calls are made: an LLM, a streaming LLM, a Categorize, an Invoke, each marked replayed; the rest goes live', async () => {
    const dsl = (prompt: string) => graph({
      begin: ['Begin', { mode: 'conversational' }, ['Categorize:Kind']],
      'Categorize:Kind': ['Categorize', { llm_id: 'c@Local', category_description: { weather: { description: 'about the weather', to: ['LLM:A'] }, other: { to: ['LLM:A'] } } }, []],
      'LLM:A': llmStep('A', ['Invoke:Log']),
      'Invoke:Log': ['Invoke', { url: `${target.url}/log`, method: 'post', variables: [{ key: 'answer', ref: 'LLM:A@content' }], datatype: 'json', timeout: 5 }, ['LLM:B']],
      'LLM:B': ['LLM', { llm_id: 'writer@Local', sys_prompt: '', prompts: [{ role: 'user', content: prompt }], message_history_window_size: 0 }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{LLM:B@content}'] }],
    });
    const options = { seed: 3, clock: () => Date.UTC(2026, 0, 2), services: engine.services };
    const first = Canvas.create(compileWorkflow(dsl('step B of {sys.query}'), builtinComponents), options);
    const recordedEvents = await collectEvents(first.run({ query: 'rain' }));
    const records = [...first.lastTurnCalls.records];
    expect(records.map((r) => [r.component_id, r.kind, r.replayed ?? false])).toEqual([
      ['Categorize:Kind', 'model', false], ['LLM:A', 'model', false], ['Invoke:Log', 'invoke', false], ['LLM:B', 'model', false],
    ]);
    const modelCalls = model.calls;
    const posts = target.requests.length;

    // the same workflow: every call is answered from its record, none is made
    const same = Canvas.create(compileWorkflow(dsl('step B of {sys.query}'), builtinComponents), options);
    const sameEvents = await collectEvents(same.run({ query: 'rain' }, { recorded: new CallReplay(records.map((record) => ({ record }))) }));
    expect([model.calls, target.requests.length]).toEqual([modelCalls, posts]);
    expect(same.lastTurnCalls.records.map((r) => [r.component_id, r.replayed])).toEqual([['Categorize:Kind', true], ['LLM:A', true], ['Invoke:Log', true], ['LLM:B', true]]);
    expect(same.lastTurnCalls.records.map((r) => r.result)).toEqual(records.map((r) => r.result));
    expect(messagesOf(sameEvents)).toEqual(messagesOf(recordedEvents));

    // LLM:B asks otherwise: its call goes live (unmarked), the others are still answered
    const changed = Canvas.create(compileWorkflow(dsl('step B, in short, of {sys.query}'), builtinComponents), options);
    const source = new CallReplay(records.map((record) => ({ record })));
    await collectEvents(changed.run({ query: 'rain' }, { recorded: source }));
    expect(model.calls).toBe(modelCalls + 1);
    expect(target.requests.length).toBe(posts);
    expect(changed.lastTurnCalls.records.map((r) => [r.component_id, r.replayed ?? false])).toEqual([['Categorize:Kind', true], ['LLM:A', true], ['Invoke:Log', true], ['LLM:B', false]]);
    expect(source.diverged).toEqual([{ component_id: 'LLM:B', kind: 'model', ordinal: 0 }]);
  });

  it('keep a tool call\u2019s references in full when they are small, else by chunk id', () => {
    const chunk = (id: string, content: string) => ({ id, content, document_id: 'd', document_name: 'doc.md', dataset_id: 'kb', image_id: '', positions: [], url: null, similarity: 0.5, vector_similarity: 0, term_similarity: 0.5, row_id: null, doc_type: '', document_metadata: null });
    const small = { chunks: [chunk('c1', 'The bridge opened in 1932.'), chunk('c2', 'It was painted red.')], doc_aggs: [{ doc_name: 'doc.md', doc_id: 'd', count: 2 }] };
    expect(referencesForRecord(small)).toBe(small);
    // one string past what a record keeps inline would add a blob to the turn
    expect(referencesForRecord({ ...small, chunks: [chunk('c1', 'x'.repeat(1025))] })).toEqual(['c1']);
    // many small ones past 4 KB in all would grow the record
    const many = { ...small, chunks: Array.from({ length: 12 }, (_, i) => chunk(`c${i}`, 'y'.repeat(300))) };
    expect(referencesForRecord(many)).toEqual(many.chunks.map((c) => c.id));
  });

  it('are bounded per turn: later calls are counted, not recorded, and ordinals go on', () => {
    const log = new CallLog({}, 3);
    for (let i = 0; i < 5; i++) log.add('LLM:A', [], { kind: 'model', request: { i } });
    log.add('LLM:B', ['Loop:L'], { kind: 'model', request: {} });
    expect(log.records.map((r) => r.ordinal)).toEqual([0, 1, 2]);
    expect(log.dropped).toBe(3);
    // a log rebuilt from a checkpoint numbers on from where it was
    const resumed = new CallLog({ records: log.records, dropped: log.dropped }, 10);
    resumed.add('LLM:A', [], { kind: 'model', request: {} });
    expect(resumed.records.at(-1)).toMatchObject({ component_id: 'LLM:A', ordinal: 3, path: [] });
  });
});

async function collectEvents(events: AsyncIterable<CanvasEvent>): Promise<CanvasEvent[]> {
  const out: CanvasEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

/** What was shown: the message deltas joined (a call answered from its record streams its text in one piece). */
function messagesOf(events: readonly CanvasEvent[]): string {
  return events.filter((e) => e.event === 'message').map((e) => (e.data as { content: string }).content).join('');
}
