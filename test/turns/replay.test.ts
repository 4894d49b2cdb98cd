/**
 * Replays below the API: one run (lib/turns/replay-run.ts) and the queue worker's pages
 * (lib/turns/replay-worker.ts), on DynamoDB Local with a counting model server.
 *
 * - A run replayed against the version it was recorded on behaves the same and calls nothing:
 *   a form asked again, answered in part, then in full; an Agent whose tool calls were approved
 *   at two pauses (each resumed turn answers its earlier rounds from its own records, marked
 *   replayed: the run's calls are counted once, and every one is answered).
 * - A version that asks its form otherwise: the replay stops where the run's answer no longer fits.
 * - Retrievals (a Retrieval component, an Agent's Retrieval tool) over a counted knowledge
 *   service: answered from their records and the recorded state's chunks when the version
 *   changes something else; live (`differs`) when it changes the query, top_n or the tool's
 *   settings; live (`not_replayable`) for records of chunk ids only, an Iteration's earlier
 *   round, or a tool call whose references were kept by id.
 * - A page whose worker stops midway goes on from its last saved run; a page delivered again, or
 *   twice, counts nothing twice and replays no run twice; near its deadline a worker hands its
 *   page on to the next delivery.
 */
import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileWorkflow } from '../../lib/canvas';
import { type CallRecord } from '../../lib/canvas/calls';
import { withComponents } from '../../lib/components';
import { createAgent } from '../../lib/components/agent';
import { encodeParts, rawParts } from '../../lib/store/codec';
import { keys } from '../../lib/store/item-keys';
import { CALL_RESULT_INLINE_BYTES, getTurn } from '../../lib/store/sessions';
import { addVersion } from '../../lib/store/workflows';
import { executeTurn, type TurnEngine } from '../../lib/turns/execute';
import { migrateRuns } from '../../lib/turns/migrate';
import { readReplay, startReplay } from '../../lib/turns/replay';
import type { ReplayPageMessage } from '../../lib/turns/replay-message';
import { replayRun } from '../../lib/turns/replay-run';
import { processReplayPage } from '../../lib/turns/replay-worker';
import { createToolRegistry } from '../../lib/tools/registry';
import { tavilyTools } from '../../lib/tools/tavily';
import { fixture } from '../helpers/canvas';
import { graph, llmStep } from '../helpers/dsl-builder';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { MemoryKnowledge, townKnowledge } from '../helpers/knowledge';
import { testServices } from '../helpers/services';
import { TAVILY_TEST_KEY, TavilyServer } from '../helpers/tavily-server';
import { OpenAiServer } from '../llm/openai-server';

let model: OpenAiServer;
let tavily: TavilyServer;
let engine: TurnEngine;

beforeAll(async () => {
  [model, tavily] = await Promise.all([OpenAiServer.start(), TavilyServer.start({ pages: [{ url: 'https://history.example/bridge', title: 'Harbour bridge', content: 'The harbour bridge opened in 1932.' }] })]);
  model.respond = (body) => {
    const results = body.messages.filter((m) => m.role === 'tool');
    if (body.tools?.length && results.length < 2) return { kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: { query: `harbour ${results.length}` } }], text: `Searching ${results.length}.` };
    return { kind: 'text', text: `answer to "${body.messages.at(-1)?.content}"`, chunks: 2 };
  };
  engine = testEngine({ openaiUrl: model.url });
});
afterAll(async () => {
  await Promise.all([model.close(), tavily.close()]);
});

async function recordedRun(eng: TurnEngine, tenant: string, workflowId: string, inputs: Record<string, unknown>[]): Promise<string> {
  let runId: string | undefined;
  for (const [i, runInput] of inputs.entries()) {
    const r = await executeTurn(eng, { tenant, workflowId, ...(runId ? { runId, turnNumber: i } : {}), runInput });
    runId = r.response.run_id;
  }
  return runId as string;
}

describe('a run replayed against the version it was recorded on', () => {
  it('behaves the same through a form asked again, answered in part, then in full', async () => {
    const tenant = newTenant();
    const dsl = fixture('form-intake');
    const wf = await newWorkflow(engine, tenant, dsl);
    const runId = await recordedRun(engine, tenant, wf, [
      { query: 'sign me up' },
      { inputs: {} },
      { inputs: { name: 'Ada', age: 36 } },
      { inputs: { plan: 'pro' } },
    ]);
    const result = await replayRun(engine, { tenant, workflowId: wf, runId, workflow: compileWorkflow(dsl, engine.registry), onDiffer: 'refuse' });
    expect(result).toMatchObject({ outcome: 'same', turns: 4, turns_replayed: 4, first_divergence: null, components: [], live_calls: [], calls: { recorded: 0, answered: 0, live: 0 } });
  });

  it('passes over a turn that moved the run onto another version, and goes on from the state before it', async () => {
    const tenant = newTenant();
    const dsl = fixture('form-intake');
    const wf = await newWorkflow(engine, tenant, dsl);
    const runId = await recordedRun(engine, tenant, wf, [{ query: 'sign me up' }]);
    const v2 = await addVersion(engine.store, tenant, wf, dsl, true);
    const moved = JSON.parse((await migrateRuns(engine, { tenant, workflowId: wf, toVersion: v2, target: { runs: [runId] }, dryRun: false }, JSON.stringify)).body);
    expect(moved.items).toEqual([expect.objectContaining({ outcome: 'migrated', turn_number: 2 })]);
    await executeTurn(engine, { tenant, workflowId: wf, runId, turnNumber: 2, runInput: { inputs: { name: 'Ada', age: 36, plan: 'pro' } } });
    const result = await replayRun(engine, { tenant, workflowId: wf, runId, workflow: compileWorkflow(dsl, engine.registry), onDiffer: 'refuse' });
    expect(result).toMatchObject({ outcome: 'same', turns: 3, turns_replayed: 2, turns_passed_over: [2], first_divergence: null });
  });

  it('asks the model what the run asked it, turn after turn, the conversation so far included', async () => {
    const tenant = newTenant();
    const dsl = graph({
      begin: ['Begin', { mode: 'conversational' }, ['Categorize:Kind']],
      'Categorize:Kind': ['Categorize', { llm_id: 'c@Local', message_history_window_size: 2, category_description: { weather: { description: 'about the weather', to: ['LLM:Chat'] }, other: { to: ['LLM:Chat'] } } }, []],
      'LLM:Chat': ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Today is {sys.date}.', prompts: [{ role: 'user', content: '{sys.query}' }] }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{LLM:Chat@content}'] }],
    });
    const wf = await newWorkflow(engine, tenant, dsl);
    const runId = await recordedRun(engine, tenant, wf, [{ query: 'hello' }, { query: 'will it rain?' }, { query: 'and tomorrow?' }, { query: 'thanks' }]);
    const before = model.calls;
    const result = await replayRun(engine, { tenant, workflowId: wf, runId, workflow: compileWorkflow(dsl, engine.registry), onDiffer: 'refuse' });
    expect(result).toMatchObject({ outcome: 'same', turns_replayed: 4, calls: { recorded: 8, answered: 8, live: 0 } });
    expect(model.calls).toBe(before);
  });

  it('answers every call of an Agent approved at two pauses, counting each once', async () => {
    const tools = createToolRegistry(tavilyTools({ baseUrl: `${tavily.url}/` }));
    const withTools: TurnEngine = { ...engine, registry: withComponents(createAgent(tools)), services: { ...testServices({ openaiUrl: model.url, secrets: { TAVILY_API_KEY: TAVILY_TEST_KEY } }), tools } };
    const tenant = newTenant();
    const dsl = graph({
      begin: ['Begin', { mode: 'task' }, ['Agent:Research']],
      'Agent:Research': ['Agent', { llm_id: 'writer@Local', sys_prompt: 'You research.', prompts: [{ role: 'user', content: '{sys.query}' }], max_rounds: 5, approval: 'all', tools: [{ component_name: 'TavilySearch', name: 'TavilySearch', params: { max_results: 1 } }] }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{Agent:Research@content}'] }],
    });
    const wf = await newWorkflow(withTools, tenant, dsl);
    const runId = await recordedRun(withTools, tenant, wf, [{ query: 'the harbour' }, { inputs: { decision: 'approve' } }, { inputs: { decision: 'approve' } }]);
    const records = await Promise.all([1, 2, 3].map(async (n) => ((await getTurn(withTools.store, tenant, runId, n))?.calls.records ?? []) as CallRecord[]));
    const made = records.flat().filter((r) => r.replayed !== true).length;
    // the resumed turns answered their earlier rounds from their own records, and say so
    expect(records.flat().length).toBeGreaterThan(made);
    expect(records[2]?.filter((r) => r.replayed).map((r) => r.kind)).toEqual(['model', 'tool', 'tool', 'model']);

    const before = { model: model.calls, tavily: tavily.requests.length };
    const result = await replayRun(withTools, { tenant, workflowId: wf, runId, workflow: compileWorkflow(dsl, withTools.registry), onDiffer: 'refuse' });
    expect(result).toMatchObject({ outcome: 'same', turns_replayed: 3, live_calls: [], calls: { recorded: made, answered: made, live: 0 } });
    expect({ model: model.calls, tavily: tavily.requests.length }).toEqual(before);
  });
});

describe('a version that asks its form otherwise', () => {
  it('names the form, then what the run\u2019s answer made of it; one that no longer asks stops where the answer no longer fits', async () => {
    const tenant = newTenant();
    const v1 = fixture('form-intake');
    const wf = await newWorkflow(engine, tenant, v1);
    const runId = await recordedRun(engine, tenant, wf, [{ query: 'sign me up' }, { inputs: { name: 'Ada', age: 36, plan: 'pro' } }]);

    const v2 = structuredClone(v1) as any;
    v2.components['UserFillUp:PlumDesksWave'].obj.params.inputs.age.type = 'line';
    delete v2.components['UserFillUp:PlumDesksWave'].obj.params.inputs.plan;
    const asked = await replayRun(engine, { tenant, workflowId: wf, runId, workflow: compileWorkflow(v2, engine.registry), onDiffer: 'live' });
    expect(asked).toMatchObject({ outcome: 'diverged', turns_replayed: 2, first_divergence: { turn: 1, component_id: 'UserFillUp:PlumDesksWave' } });
    expect(asked.components.map((c) => [c.turn, c.component_id, c.change])).toEqual([
      [1, 'UserFillUp:PlumDesksWave', 'form'],
      [2, 'UserFillUp:PlumDesksWave', 'outputs'],
      [2, 'Message:BraveOwlsSing', 'outputs'],
    ]);
    expect(asked.components[2]).toMatchObject({ recorded: { content: 'Welcome Ada (36), plan pro; city .' }, replayed: { content: 'Welcome Ada (36), plan ; city .' } });

    const v3 = structuredClone(v1) as any;
    delete v3.components['UserFillUp:PlumDesksWave'];
    v3.components.begin.downstream = ['Message:BraveOwlsSing'];
    v3.components['Message:BraveOwlsSing'].upstream = ['begin'];
    v3.components['Message:BraveOwlsSing'].obj.params.content = ['Welcome {sys.query}.'];
    const gone = await replayRun(engine, { tenant, workflowId: wf, runId, workflow: compileWorkflow(v3, engine.registry), onDiffer: 'live' });
    expect(gone).toMatchObject({ outcome: 'diverged', turns_replayed: 1, stopped: { turn: 2, code: 'not_waiting_for_input' }, first_divergence: { turn: 1 } });
  });
});

describe('the worker\u2019s pages', () => {
  const dsl = graph({
    begin: ['Begin', { mode: 'conversational' }, ['LLM:A']],
    'LLM:A': llmStep('A', ['Message:Out']),
    'Message:Out': ['Message', { content: ['{LLM:A@content}'] }],
  });
  const v2 = graph({
    begin: ['Begin', { mode: 'conversational' }, ['LLM:A']],
    'LLM:A': ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Answer in one line.', prompts: [{ role: 'user', content: 'step A, v2, of {sys.query}' }], message_history_window_size: 0 }, ['Message:Out']],
    'Message:Out': ['Message', { content: ['{LLM:A@content}'] }],
  });

  async function setup(eng: TurnEngine, runs: number) {
    const tenant = newTenant();
    const wf = await newWorkflow(eng, tenant, dsl);
    const ids: string[] = [];
    for (let i = 0; i < runs; i++) ids.push(await recordedRun(eng, tenant, wf, [{ query: `question ${i}` }]));
    await addVersion(eng.store, tenant, wf, v2, false);
    const queued: ReplayPageMessage[] = [];
    const { view } = await startReplay(eng, { tenant, workflowId: wf, version: 2, runs: ids, pageSize: 3, enqueue: async (m) => void queued.push(m) });
    return { tenant, wf, ids, replayId: view.replay_id, queued };
  }

  it('a page stopped midway goes on from its last saved run; delivered again, or once more when done, it counts nothing twice', async () => {
    const stopping = new AbortController();
    // the worker's lifecycle stops it right after its first run is saved
    const eng: TurnEngine = { ...engine, store: { ...engine.store, onCapacity: (operation, units) => (operation === 'replay' && units.write > 0 ? stopping.abort() : undefined) }, lifecycle: { signal: () => stopping.signal } };
    const { tenant, wf, replayId, queued } = await setup(engine, 5);
    const page0 = queued.shift() as ReplayPageMessage;
    const before = model.calls;
    const next: ReplayPageMessage[] = [];
    const first = await processReplayPage({ engine: eng, requeue: async (m) => void next.push(m) }, page0);
    expect(first.kind).toBe('retry');
    expect(model.calls - before).toBe(1);
    expect((await readReplay(engine, tenant, wf, replayId))).toMatchObject({ runs_done: 1, status: 'running' });

    // delivered again: the other two runs of the page, then the next page is queued
    const second = await processReplayPage({ engine, requeue: async (m) => void next.push(m) }, page0);
    expect(second).toMatchObject({ kind: 'done', page: 0, runs: 2 });
    expect(model.calls - before).toBe(3);
    expect(next).toEqual([{ tenant, workflow_id: wf, replay: { id: replayId, page: 1 } }]);
    // once more, as a duplicate delivery would: nothing is replayed, nothing counted again
    const third = await processReplayPage({ engine, requeue: async (m) => void next.push(m) }, page0);
    expect(third).toMatchObject({ kind: 'done', runs: 0 });
    expect(model.calls - before).toBe(3);
    await processReplayPage({ engine }, next[0]);
    const view = await readReplay(engine, tenant, wf, replayId);
    expect(view).toMatchObject({ status: 'done', runs_done: 5, pages_done: 2, summary: { outcomes: { diverged: 5 }, calls: { recorded: 5, answered: 0, live: 5 } } });
    expect(view.summary.runs).toHaveLength(5);
    expect(model.calls - before).toBe(5);
  });

  it('near its deadline, a worker hands the page on after each run (and what a replay costs the store)', async () => {
    const { tenant, wf, replayId, queued } = await setup(engine, 4);
    const outcomes: string[] = [];
    let message: ReplayPageMessage | undefined = queued.shift();
    const requeued: ReplayPageMessage[] = [];
    const units = { read: 0, write: 0, calls: 0 };
    const metered: TurnEngine = { ...engine, store: { ...engine.store, onCapacity: (_op, u) => {
      units.read += u.read;
      units.write += u.write;
      units.calls++;
    } } };
    while (message) {
      const outcome = await processReplayPage({ engine: metered, requeue: async (m) => void requeued.push(m) }, message, { stopBy: 0 });
      outcomes.push(`${outcome.kind}${'page' in outcome ? outcome.page : ''}`);
      message = requeued.shift();
    }
    expect(outcomes).toEqual(['continued0', 'continued0', 'done0', 'done1']);
    expect(await readReplay(engine, tenant, wf, replayId)).toMatchObject({ status: 'done', runs_done: 4 });
    // per run: a Query of its turns and the page saved (progress and results); a read of each page's results per delivery
    console.log(`replay of 4 one-turn runs in 2 pages, 4 deliveries: ${units.read} RCU, ${units.write} WCU reported (${(units.write / 4).toFixed(1)} WCU a run)`);
    expect(units.write).toBeGreaterThan(0);
  });

  it('refuses a message that is not a page, and drops the page of a replay that is gone', async () => {
    expect(await processReplayPage({ engine }, { tenant: 't', workflow_id: 'w', replay: { id: 'nope', page: 0 } })).toMatchObject({ kind: 'failed', code: 'invalid_request' });
    expect(await processReplayPage({ engine }, { tenant: newTenant(), workflow_id: 'w', replay: { id: '0123456789abcdef0123456789abcdef', page: 0 } })).toMatchObject({ kind: 'failed', code: 'not_found' });
  });
});

describe('retrievals answered from their records', () => {
  const FACTS = 'a5aaec4a819b11f095f1047c16ec874f';
  const WEATHER = '60c53ed89acc11f0bc1e7a2a6d0b2755';
  let rag: OpenAiServer;
  let knowledge: MemoryKnowledge;
  let eng: TurnEngine;

  beforeAll(async () => {
    rag = await OpenAiServer.start();
    // the Agent searches once with the question's words, then answers citing the first chunk it was shown
    rag.respond = (body) => {
      const results = body.messages.filter((m) => m.role === 'tool');
      const question = /Q: (.*)$/.exec(String(body.messages.at(-1)?.content ?? ''))?.[1] ?? '';
      if (body.tools?.length && results.length === 0) return { kind: 'tools', calls: [{ name: 'search_my_dateset_0', arguments: { query: question.replace(/[?]/g, '') } }] };
      const cited = /\nID: (\d+)/.exec(results.map((m) => m.content).join('\n'))?.[1];
      return { kind: 'text', text: `From the notes${cited ? ` [ID:${cited}]` : ''}: ${results.length} search.`, chunks: 2 };
    };
    knowledge = townKnowledge();
    eng = testEngine({ openaiUrl: rag.url, knowledge });
  });
  afterAll(async () => {
    await rag.close();
  });

  /** Begin -> Retrieval over both bases -> Agent with the Retrieval tool over one -> Message. */
  const dsl = (change: { query?: string; top_n?: number; toolTopN?: number; message?: string } = {}) => graph({
    begin: ['Begin', { mode: 'conversational' }, ['Retrieval:Kb']],
    'Retrieval:Kb': ['Retrieval', { query: change.query ?? '{sys.query}', kb_ids: [FACTS, WEATHER], similarity_threshold: 0.05, top_n: change.top_n ?? 3 }, ['Agent:Helper']],
    'Agent:Helper': ['Agent', {
      llm_id: 'writer@Local',
      sys_prompt: 'Answer from the knowledge.',
      prompts: [{ role: 'user', content: 'Knowledge: {Retrieval:Kb@formalized_content}\nQ: {sys.query}' }],
      // without the conversation, so a Message changed is not a prompt changed
      message_history_window_size: 0,
      max_rounds: 3,
      tools: [{ component_name: 'Retrieval', name: 'Town facts', params: { kb_ids: [FACTS], similarity_threshold: 0.05, top_n: change.toolTopN ?? 2 } }],
    }, ['Message:Out']],
    'Message:Out': ['Message', { content: [change.message ?? '{Agent:Helper@content}'] }],
  });
  const QUESTIONS = [{ query: 'When did the old bridge open?' }, { query: 'Are winters in the town cold?' }];

  async function recorded() {
    const tenant = newTenant();
    const wf = await newWorkflow(eng, tenant, dsl());
    const runs = [await recordedRun(eng, tenant, wf, QUESTIONS), await recordedRun(eng, tenant, wf, QUESTIONS.slice().reverse())];
    return { tenant, wf, runs };
  }
  const replayAll = async (tenant: string, wf: string, runs: string[], version: unknown, onDiffer: 'live' | 'refuse') => {
    const results = [];
    for (const runId of runs) results.push(await replayRun(eng, { tenant, workflowId: wf, runId, workflow: compileWorkflow(version, eng.registry), onDiffer }));
    return results;
  };
  const counted = () => ({ searches: knowledge.retrieves, model: rag.calls });

  it('a version that changes something else makes no retrieval and no call live', async () => {
    const { tenant, wf, runs } = await recorded();
    const records = (await Promise.all(runs.flatMap((runId) => [1, 2].map(async (n) => ((await getTurn(eng.store, tenant, runId, n))?.calls.records ?? []) as CallRecord[])))).flat();
    // each turn: the Retrieval, the Agent's two rounds and its Retrieval tool call
    expect(records.map((r) => r.kind).sort()).toEqual(Array.from({ length: 4 }, () => ['model', 'model', 'retrieval', 'tool']).flat().sort());
    const before = counted();

    const same = await replayAll(tenant, wf, runs, dsl(), 'refuse');
    for (const r of same) expect(r).toMatchObject({ outcome: 'same', turns_replayed: 2, live_calls: [], calls: { recorded: 8, answered: 8, live: 0 } });
    const other = await replayAll(tenant, wf, runs, dsl({ message: 'Answer: {Agent:Helper@content}' }), 'refuse');
    for (const r of other) {
      // refusing every live call, it still went through: none was needed
      expect(r).toMatchObject({ outcome: 'diverged', turns_replayed: 2, live_calls: [], calls: { answered: 8, live: 0 } });
      expect(r.components.map((c) => c.component_id)).toEqual(['Message:Out', 'Message:Out']);
    }
    expect(counted()).toEqual(before);
  });

  it('a version that changes the Retrieval’s query or top_n searches again, and says the call differs', async () => {
    const { tenant, wf, runs } = await recorded();
    for (const change of [{ query: 'town: {sys.query}' }, { top_n: 2 }]) {
      const before = counted();
      const results = await replayAll(tenant, wf, runs, dsl(change), 'live');
      for (const r of results) {
        const retrievals = r.live_calls.filter((c) => c.kind === 'retrieval');
        expect(retrievals).toEqual([1, 2].map((turn) => ({ turn, component_id: 'Retrieval:Kb', kind: 'retrieval', name: `${FACTS},${WEATHER}`, ordinal: 0, path: [], reason: 'differs' })));
      }
      // each live retrieval is one search: the component's, and the Agent's tool where it went live too
      const live = results.flatMap((r) => r.live_calls);
      expect(knowledge.retrieves - before.searches).toBe(live.filter((c) => c.kind === 'retrieval' || c.name === 'search_my_dateset_0').length);
      expect(knowledge.retrieves - before.searches).toBeGreaterThanOrEqual(4);
    }
  });

  it('a version that changes the Agent’s Retrieval tool searches again for the tool call alone', async () => {
    const { tenant, wf, runs } = await recorded();
    const before = counted();
    const results = await replayAll(tenant, wf, runs, dsl({ toolTopN: 1 }), 'live');
    for (const r of results) {
      expect(r.live_calls.filter((c) => c.kind !== 'model')).toEqual([1, 2].map((turn) => ({ turn, component_id: 'Agent:Helper', kind: 'tool', name: 'search_my_dateset_0', ordinal: 1, path: [], reason: 'differs' })));
    }
    expect(knowledge.retrieves - before.searches).toBe(4);
  });

  it('records written before the chunks’ documents were kept make the retrieval again, as not replayable', async () => {
    const { tenant, wf, runs } = await recorded();
    // the retrieval records as they were: chunk ids and scores only
    let rewritten = 0;
    for (const runId of runs) await rewriteRecords(eng, tenant, runId, (r) => {
      if (r.kind !== 'retrieval') return;
      expect(r.result).toHaveProperty('doc_aggs');
      delete (r.result as Record<string, unknown>).doc_aggs;
      rewritten++;
    });
    expect(rewritten).toBe(4);
    const before = counted();
    const results = await replayAll(tenant, wf, runs, dsl(), 'live');
    for (const r of results) {
      expect(r).toMatchObject({ outcome: 'same', turns_replayed: 2, calls: { answered: 6, live: 2 } });
      expect(r.live_calls).toEqual([1, 2].map((turn) => ({ turn, component_id: 'Retrieval:Kb', kind: 'retrieval', name: `${FACTS},${WEATHER}`, ordinal: 0, path: [], reason: 'not_replayable' })));
    }
    expect(counted()).toEqual({ searches: before.searches + 4, model: before.model });
  });

  it('an Agent’s Retrieval tool call whose chunks its record keeps by id only searches again, as not replayable', async () => {
    // a chunk over 1 KB: the tool call's record keeps the references by id
    const long = new MemoryKnowledge([{ id: FACTS, name: 'town-facts', documents: [{ name: 'bridge.md', chunks: [`The old bridge opened in 1932. ${'It has carried traffic ever since. '.repeat(40)}`] }] }]);
    const big: TurnEngine = { ...eng, services: testServices({ openaiUrl: rag.url, knowledge: long }) };
    const agentOnly = graph({
      begin: ['Begin', { mode: 'conversational' }, ['Agent:Helper']],
      'Agent:Helper': ['Agent', {
        llm_id: 'writer@Local',
        sys_prompt: 'Answer from the knowledge.',
        prompts: [{ role: 'user', content: 'Q: {sys.query}' }],
        max_rounds: 3,
        tools: [{ component_name: 'Retrieval', name: 'Town facts', params: { kb_ids: [FACTS], similarity_threshold: 0.05 } }],
      }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{Agent:Helper@content}'] }],
    });
    const tenant = newTenant();
    const wf = await newWorkflow(big, tenant, agentOnly);
    const runId = await recordedRun(big, tenant, wf, [{ query: 'When did the old bridge open?' }]);
    const tool = ((await getTurn(big.store, tenant, runId, 1))?.calls.records as CallRecord[]).find((r) => r.kind === 'tool');
    expect((tool?.result as { references: unknown }).references).toEqual([expect.any(String)]);
    const searches = long.retrieves;
    const result = await replayRun(big, { tenant, workflowId: wf, runId, workflow: compileWorkflow(agentOnly, big.registry), onDiffer: 'live' });
    expect(result).toMatchObject({ outcome: 'same', calls: { recorded: 3, answered: 2, live: 1 } });
    expect(result.live_calls).toEqual([{ turn: 1, component_id: 'Agent:Helper', kind: 'tool', name: 'search_my_dateset_0', ordinal: 1, path: [], reason: 'not_replayable' }]);
    expect(long.retrieves - searches).toBe(1);
  });

  it('inside an Iteration, only the round whose chunks the state kept is answered; the other searches again', async () => {
    const iterating = graph({
      begin: ['Begin', { mode: 'conversational' }, ['Iteration:Each']],
      'Iteration:Each': ['Iteration', { items_ref: 'env.topics', outputs: {} }, ['Message:Out']],
      'IterationItem:Start': ['IterationItem', {}, ['Retrieval:Kb'], 'Iteration:Each'],
      'Retrieval:Kb': ['Retrieval', { query: '{item}', kb_ids: [FACTS, WEATHER], similarity_threshold: 0.05, top_n: 2 }, [], 'Iteration:Each'],
      'Message:Out': ['Message', { content: ['{Retrieval:Kb@formalized_content}'] }],
    }, { variables: { topics: { name: 'topics', type: 'array<string>', value: ['old bridge', 'cold winters'] } } });
    const tenant = newTenant();
    const wf = await newWorkflow(eng, tenant, iterating);
    const runId = await recordedRun(eng, tenant, wf, [{ query: 'go' }]);
    const before = counted();
    const result = await replayRun(eng, { tenant, workflowId: wf, runId, workflow: compileWorkflow(iterating, eng.registry), onDiffer: 'live' });
    expect(result).toMatchObject({ outcome: 'same', calls: { recorded: 2, answered: 1, live: 1 } });
    expect(result.live_calls).toEqual([{ turn: 1, component_id: 'Retrieval:Kb', kind: 'retrieval', name: `${FACTS},${WEATHER}`, ordinal: 0, path: ['Iteration:Each'], reason: 'not_replayable' }]);
    expect(knowledge.retrieves - before.searches).toBe(1);
    expect(knowledge.queries.at(-1)?.query.question).toBe('old bridge');
  });
});

/** Rewrites the call records of a run's turns in place, as an older version of Easel wrote them. */
async function rewriteRecords(eng: TurnEngine, tenant: string, runId: string, change: (record: CallRecord) => void): Promise<void> {
  const { Items = [] } = await eng.store.doc.send(new QueryCommand({ TableName: eng.store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.session(tenant, runId) } }));
  for (const item of Items.filter((i) => i.kind === 'turn' && i.z instanceof Uint8Array)) {
    const parts = rawParts(item.z as Uint8Array, 'dict1');
    for (const record of (parts.c as { records: CallRecord[] } | undefined)?.records ?? []) change(record);
    await eng.store.doc.send(new PutCommand({ TableName: eng.store.table, Item: { ...item, z: encodeParts(parts, { c: CALL_RESULT_INLINE_BYTES }).bytes } }));
  }
}
