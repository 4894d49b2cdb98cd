/**
 * Exact tool loops: an async turn whose worker dies inside an Agent's tool loop is finished by
 * the next worker, which runs the interrupted Agent again with the model rounds and tool calls
 * it had completed answered from their records. The model server and the Tavily stand-in
 * count every request: the rounds before the crash are not asked again, and the turn commits
 * the same events and outputs as a run that was never interrupted.
 *
 * The same for retrievals, the knowledge service counting searches: a Retrieval alone in its
 * batch (kept by the checkpoint after it), one beside an Agent whose checkpoint inside the batch
 * came after it, and an Agent's Retrieval tool call: none is searched again.
 *
 * The worker "dies" at the checkpoint hook: its store becomes unreachable (so it cannot even
 * let go of its lease) and it throws. Time is the test's: the canvas clock stands still at T0
 * for every worker, and the successor's store sees a clock a lease later, so the dead worker's
 * lease has run out for it, however long the machine took.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallRecord } from '../../lib/canvas/calls';
import { createAgent } from '../../lib/components/agent';
import { withComponents } from '../../lib/components';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import type { StoreContext } from '../../lib/store/dynamo';
import { getTurn } from '../../lib/store/sessions';
import { createDynamoClients } from '../../lib/store/setup';
import { createToolRegistry } from '../../lib/tools/registry';
import { retrievalTool } from '../../lib/tools/retrieval';
import { tavilyTools } from '../../lib/tools/tavily';
import type { CheckpointInfo } from '../../lib/turns/async-turn';
import { executeTurn, type TurnEngine } from '../../lib/turns/execute';
import { type Outcome, processMessage, type QueueDeps } from '../../lib/turns/queue';
import { graph } from '../helpers/dsl-builder';
import { newTenant, newWorkflow, testStore } from '../helpers/engine';
import { townKnowledge } from '../helpers/knowledge';
import { testServices } from '../helpers/services';
import { TAVILY_TEST_KEY, TavilyServer } from '../helpers/tavily-server';
import { OpenAiServer } from '../llm/openai-server';

const LEASE_MS = 60_000;
const T0 = Date.now();
const TOPICS = ['harbour bridge', 'old lighthouse', 'town hall'];

const PAGES = [
  { url: 'https://history.example/bridge', title: 'Harbour bridge history', content: 'The harbour bridge opened in 1932 after six years of work.' },
  { url: 'https://history.example/lighthouse', title: 'Old lighthouse history', content: 'The old lighthouse was first lit in 1871.' },
  { url: 'https://history.example/hall', title: 'Town hall history', content: 'The town hall was finished in 1904.' },
];

class Crash extends Error {}

let model: OpenAiServer;
let tavily: TavilyServer;
/** The knowledge every worker's runs search: each search is counted. */
const knowledge = townKnowledge();

/** Which assistant a request is for: the main Agent or its sub-Agent (by the system prompt). */
const whose = (body: OpenAiServer['requests'][number]['body']) => (String(body.messages[0]?.content).startsWith('You look things up') ? 'sub' : 'main');

beforeAll(async () => {
  [model, tavily] = await Promise.all([OpenAiServer.start(), TavilyServer.start({ pages: PAGES })]);
  // a research loop decided by the conversation alone: one search per round, three rounds, then the answer
  model.respond = (body) => {
    const results = body.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    // an Agent with the Retrieval tool searches once, then answers from what it found
    if (body.tools?.some((t) => t.function.name === 'search_my_dateset_0')) {
      return results.length === 0 ? { kind: 'tools', calls: [{ name: 'search_my_dateset_0', arguments: { query: 'old bridge' } }] } : { kind: 'text', text: `From the notes: ${results.join(' | ')}`, chunks: 2 };
    }
    if (String(body.messages[0]?.content).startsWith('You summarise')) return { kind: 'text', text: `Summary of ${String(body.messages.at(-1)?.content).length} characters.`, chunks: 2 };
    if (whose(body) === 'main' && body.tools?.some((t) => t.function.name.startsWith('Researcher'))) {
      return results.length === 0
        ? { kind: 'tools', calls: [{ name: 'Researcher_0', arguments: { user_prompt: 'the town’s history' } }] }
        : { kind: 'text', text: `Report: ${results.join(' | ')}`, chunks: 3 };
    }
    const done = results.length;
    if (done < TOPICS.length) return { kind: 'tools', calls: [{ name: 'tavily_search_0', arguments: { query: TOPICS[done] } }], text: `Looking up ${TOPICS[done]}. ` };
    return { kind: 'text', text: `Found ${done} sources: ${results.map((r) => /opened in \d+|lit in \d+|finished in \d+/.exec(r)?.[0]).join(', ')}.`, chunks: 4 };
  };
});
afterAll(async () => {
  await Promise.all([model.close(), tavily.close()]);
});

const searchTool = { component_name: 'TavilySearch', name: 'TavilySearch', params: { max_results: 1 } };
const agentParams = (tools: unknown[], sysPrompt = 'You research.') => ({ llm_id: 'writer@Local', sys_prompt: sysPrompt, prompts: [{ role: 'user', content: '{sys.query}' }], max_rounds: 5, tools });

/** Begin -> Agent (TavilySearch) -> Message. */
const researcher = () => graph({
  begin: ['Begin', { mode: 'task' }, ['Agent:Research']],
  'Agent:Research': ['Agent', agentParams([searchTool]), ['Message:Out']],
  'Message:Out': ['Message', { content: ['{Agent:Research@content}'] }],
});

/** Begin -> Agent whose one tool is a sub-Agent that searches -> Message. */
const delegating = () => graph({
  begin: ['Begin', { mode: 'task' }, ['Agent:Main']],
  'Agent:Main': ['Agent', agentParams([{ component_name: 'Agent', name: 'Researcher', params: { ...agentParams([searchTool], 'You look things up.'), user_prompt: '', description: 'Looks things up.' } }]), ['Message:Out']],
  'Message:Out': ['Message', { content: ['{Agent:Main@content}'] }],
});

interface Worker {
  deps: QueueDeps;
  /** The worker's store: `kill` makes it unreachable. */
  store: StoreContext;
}

/** A worker whose store sees `storeNow` and whose runs see the test's standing clock. */
function worker(options: { storeNow?: number; onCapacity?: StoreContext['onCapacity']; defaultModel?: string; log?: Outcome[] } = {}): Worker {
  const tools = createToolRegistry([...tavilyTools({ baseUrl: `${tavily.url}/` }), retrievalTool]);
  const storeNow = options.storeNow ?? T0;
  const store: StoreContext = { ...testStore(), now: () => storeNow, ...(options.onCapacity ? { onCapacity: options.onCapacity } : {}) };
  const engine: TurnEngine = {
    store,
    clock: () => T0,
    registry: withComponents(createAgent(tools)),
    services: { ...testServices({ openaiUrl: model.url, secrets: { TAVILY_API_KEY: TAVILY_TEST_KEY }, knowledge, ...(options.defaultModel ? { defaultModel: options.defaultModel } : {}) }), tools },
    leaseMs: LEASE_MS,
  };
  const log = options.log;
  return { store, deps: { engine, guard: new SsrfGuard(), ...(log ? { log: (_m: string, fields: Record<string, unknown>) => void log.push(fields as unknown as Outcome) } : {}) } };
}

/** The worker dies: nothing it sends reaches the table any more, and it stops where it is. */
function kill(w: Worker): never {
  w.store.doc = createDynamoClients({ endpoint: 'http://127.0.0.1:9' }).doc;
  throw new Crash('killed');
}

const counts = (since: { model: number; tavily: number }) => ({ model: model.calls - since.model, tavily: tavily.requests.length - since.tavily });
const mark = () => ({ model: model.calls, tavily: tavily.requests.length });
/** Model calls and knowledge searches since `since`. */
const searched = (since: { model: number; searches: number }) => ({ model: model.calls - since.model, searches: knowledge.retrieves - since.searches });
const searchMark = () => ({ model: model.calls, searches: knowledge.retrieves });

async function committed(tenant: string, runId: string) {
  const turn = await getTurn(testStore(), tenant, runId, 1);
  if (!turn) throw new Error('turn 1 was not committed');
  return {
    response: JSON.parse(turn.response) as { status: string; events: unknown[]; outputs?: unknown },
    calls: turn.calls as { records: CallRecord[]; dropped: number },
  };
}

/** A call record as another run of the same turn would make it: tool call ids (the model server's) left out. */
const comparable = (records: CallRecord[]) => records.map((r) => ({ component_id: r.component_id, kind: r.kind, name: r.name, ordinal: r.ordinal, status: r.status, result: JSON.parse(JSON.stringify(r.result ?? null).replace(/"call_\d+_\d+"/g, '"id"')) as unknown }));

/**
 * A queued first turn (a scheduled run), keyed so that a redelivery of its message finds its
 * own claim and checkpoint rather than start another run.
 */
const queued = (tenant: string, workflowId: string, key: string) =>
  JSON.stringify({ tenant, workflow_id: workflowId, run_input: { query: 'the town’s history' }, idempotency_key: key });

/** Runs the queued turn of `workflowId` to its commit in one worker; returns the run. */
async function uninterrupted(tenant: string, workflowId: string, messageId: string) {
  const outcome = await processMessage(worker().deps, queued(tenant, workflowId, messageId), { messageId });
  if (outcome.kind !== 'done') throw new Error(JSON.stringify(outcome));
  return committed(tenant, outcome.runId);
}

describe('an async turn killed inside an Agent’s tool loop', () => {
  it('is finished by the next worker without calling the model or the tool of the completed rounds again, committing what an uninterrupted run commits', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(worker().deps.engine, tenant, researcher());

    let since = mark();
    const reference = await uninterrupted(tenant, workflowId, 'reference-run');
    // four rounds: three searches, then the answer
    expect(counts(since)).toEqual({ model: 4, tavily: 3 });
    expect(reference.response.status).toBe('completed');

    // killed once tool call 2 of 3 is checkpointed: records model 0, tool 1, model 1, tool 2
    const messageId = 'killed-run';
    const body = queued(tenant, workflowId, messageId);
    const first = worker();
    const seen: CheckpointInfo[] = [];
    since = mark();
    const died = await processMessage(first.deps, body, {
      messageId,
      hooks: {
        afterCheckpoint(_seq, info) {
          seen.push(info);
          if (info.inBatch && info.calls === 4) kill(first);
        },
      },
    });
    expect(died).toMatchObject({ kind: 'retry', reason: 'killed' });
    expect(counts(since)).toEqual({ model: 2, tavily: 2 });
    // a checkpoint after every completed call of the loop, none between (Begin reached nothing outside)
    expect(seen).toEqual([1, 2, 3, 4].map((calls) => ({ inBatch: true, calls })));

    // redelivered at once: the dead worker's lease still runs, nothing is run
    since = mark();
    expect(await processMessage(worker().deps, body, { messageId })).toMatchObject({ kind: 'retry' });
    expect(counts(since)).toEqual({ model: 0, tavily: 0 });

    // a lease later the next worker takes the turn over and finishes it
    const logged: Outcome[] = [];
    since = mark();
    const done = await processMessage(worker({ storeNow: T0 + LEASE_MS + 1, log: logged }).deps, body, { messageId });
    if (done.kind !== 'done') throw new Error(JSON.stringify(done));
    // the completed rounds are not asked again: model round 3 (the third search) and the answer, one search
    expect(counts(since)).toEqual({ model: 2, tavily: 1 });
    expect(tavily.requests.slice(-1).map((r) => r.body.query)).toEqual(['town hall']);
    expect(logged.at(-1)).toMatchObject({ kind: 'done', calls_replayed: 4 });
    expect(logged.at(-1)).not.toHaveProperty('calls_diverged');

    const resumed = await committed(tenant, done.runId);
    expect(resumed.response.events).toEqual(reference.response.events);
    expect(resumed.response.outputs).toEqual(reference.response.outputs);
    expect(comparable(resumed.calls.records)).toEqual(comparable(reference.calls.records));
    const shown = (resumed.response.events as { event: string; data: { content?: string } }[]).filter((e) => e.event === 'message').map((e) => e.data.content);
    expect(shown).toEqual(['Looking up harbour bridge. Looking up old lighthouse. Looking up town hall. Found 3 sources: opened in 1932, lit in 1871, finished in 1904.']);
  }, 120_000);

  it('a tool call that failed for good is told to the model again, not made again', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(worker().deps.engine, tenant, researcher());
    const messageId = 'failed-search';
    const body = queued(tenant, workflowId, messageId);
    // the first search is refused (a permanent failure the model reads); killed after the second
    tavily.enqueue({ kind: 'status', status: 400, body: '{"detail":{"error":"Invalid query."}}' });
    const first = worker();
    let since = mark();
    await processMessage(first.deps, body, { messageId, hooks: { afterCheckpoint: (_seq, info) => void (info.inBatch && info.calls === 4 && kill(first)) } });
    expect(counts(since)).toEqual({ model: 2, tavily: 2 });

    since = mark();
    const done = await processMessage(worker({ storeNow: T0 + LEASE_MS + 1 }).deps, body, { messageId });
    if (done.kind !== 'done') throw new Error(JSON.stringify(done));
    expect(counts(since)).toEqual({ model: 2, tavily: 1 });
    const resumed = await committed(tenant, done.runId);
    const searches = resumed.calls.records.filter((r) => r.kind === 'tool').map((r) => r.status);
    expect(searches).toEqual(['error', 'ok', 'ok']);
    const asked = model.requests.at(-1)?.body.messages.filter((m) => m.role === 'tool').map((m) => m.content.slice(0, 6));
    expect(asked?.[0]).toBe('error:');
  }, 120_000);

  it('inside a sub-Agent: the sub-Agent runs again with its completed rounds answered from their records', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(worker().deps.engine, tenant, delegating());
    const byWhom = (from: number) => {
      const out = { main: 0, sub: 0 };
      for (const r of model.requests.slice(from)) out[whose(r.body)]++;
      return out;
    };

    let since = mark();
    const reference = await uninterrupted(tenant, workflowId, 'reference-delegating');
    expect(byWhom(since.model)).toEqual({ main: 2, sub: 4 });

    // records: main 0, then the sub-Agent's model 0, tool 1, model 1, tool 2: killed there
    const messageId = 'killed-delegating';
    const body = queued(tenant, workflowId, messageId);
    const first = worker();
    since = mark();
    await processMessage(first.deps, body, { messageId, hooks: { afterCheckpoint: (_seq, info) => void (info.inBatch && info.calls === 5 && kill(first)) } });
    expect(byWhom(since.model)).toEqual({ main: 1, sub: 2 });
    expect(counts(since).tavily).toBe(2);

    since = mark();
    const logged: Outcome[] = [];
    const done = await processMessage(worker({ storeNow: T0 + LEASE_MS + 1, log: logged }).deps, body, { messageId });
    if (done.kind !== 'done') throw new Error(JSON.stringify(done));
    // the sub-Agent's third round and answer, the main Agent's answer; one search
    expect(byWhom(since.model)).toEqual({ main: 1, sub: 2 });
    expect(counts(since).tavily).toBe(1);
    expect(logged.at(-1)).toMatchObject({ kind: 'done', calls_replayed: 5 });
    expect(logged.at(-1)).not.toHaveProperty('calls_diverged');
    const resumed = await committed(tenant, done.runId);
    expect(resumed.response.events).toEqual(reference.response.events);
    expect(comparable(resumed.calls.records)).toEqual(comparable(reference.calls.records));
  }, 120_000);

  it('a request that differs from its record goes live, a request that matches one is still answered from it, and the log says where it went another way', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(worker().deps.engine, tenant, researcher());
    const messageId = 'diverging-run';
    const body = queued(tenant, workflowId, messageId);
    const first = worker();
    await processMessage(first.deps, body, { messageId, hooks: { afterCheckpoint: (_seq, info) => void (info.inBatch && info.calls === 2 && kill(first)) } });

    // the deployment now maps the Agent to another model: the first round's request differs
    const logged: Outcome[] = [];
    const since = mark();
    const done = await processMessage(worker({ storeNow: T0 + LEASE_MS + 1, defaultModel: 'openai:another-model', log: logged }).deps, body, { messageId });
    expect(done).toMatchObject({ kind: 'done', status: 'completed' });
    // every round goes live; the new first round asks the same search as before, which its record answers
    expect(counts(since)).toEqual({ model: 4, tavily: 2 });
    expect(logged.at(-1)).toMatchObject({ calls_diverged: [{ component_id: 'Agent:Research', kind: 'model', ordinal: 0 }], calls_replayed: 1 });
  }, 120_000);
});

describe('an async turn killed after a retrieval', () => {
  const FACTS = 'a5aaec4a819b11f095f1047c16ec874f';
  const retrievalParams = { query: 'old bridge {sys.query}', kb_ids: [FACTS], similarity_threshold: 0.05, top_n: 2 };
  const summariser = { llm_id: 'writer@Local', sys_prompt: 'You summarise.', prompts: [{ role: 'user', content: '{sys.query}' }], max_rounds: 1, tools: [] };

  /** Kills the first worker at the checkpoint `at` picks, then finishes the turn in the next; compares it with an uninterrupted run. */
  async function killedAt(dsl: unknown, name: string, at: (info: CheckpointInfo) => boolean) {
    const tenant = newTenant();
    const workflowId = await newWorkflow(worker().deps.engine, tenant, dsl);
    let since = searchMark();
    const reference = await uninterrupted(tenant, workflowId, `reference-${name}`);
    const whole = searched(since);

    const messageId = `killed-${name}`;
    const body = queued(tenant, workflowId, messageId);
    const first = worker();
    const seen: CheckpointInfo[] = [];
    since = searchMark();
    const died = await processMessage(first.deps, body, { messageId, hooks: { afterCheckpoint: (_seq, info) => void (seen.push(info), at(info) && kill(first)) } });
    expect(died).toMatchObject({ kind: 'retry', reason: 'killed' });
    const before = searched(since);

    since = searchMark();
    const done = await processMessage(worker({ storeNow: T0 + LEASE_MS + 1 }).deps, body, { messageId });
    if (done.kind !== 'done') throw new Error(JSON.stringify(done));
    const resumed = await committed(tenant, done.runId);
    expect(resumed.response.events).toEqual(reference.response.events);
    expect(comparable(resumed.calls.records)).toEqual(comparable(reference.calls.records));
    return { whole, before, after: searched(since), seen, records: resumed.calls.records };
  }

  it('with the Retrieval alone in its batch, the checkpoint after the batch keeps it: it is not made again', async () => {
    const dsl = graph({
      begin: ['Begin', { mode: 'task' }, ['Retrieval:Kb']],
      'Retrieval:Kb': ['Retrieval', retrievalParams, ['Agent:Sum']],
      'Agent:Sum': ['Agent', { ...summariser, prompts: [{ role: 'user', content: '{Retrieval:Kb@formalized_content}' }] }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{Agent:Sum@content}'] }],
    });
    const { whole, before, after, seen } = await killedAt(dsl, 'retrieval-alone', (info) => !info.inBatch && info.calls === 1);
    expect(whole).toEqual({ model: 1, searches: 1 });
    expect(seen).toEqual([{ inBatch: false, calls: 1 }]);
    expect(before).toEqual({ model: 0, searches: 1 });
    expect(after).toEqual({ model: 1, searches: 0 });
  }, 120_000);

  it('beside an Agent that checkpointed inside the batch, the batch runs again and the retrieval is answered from the checkpoint', async () => {
    const dsl = graph({
      begin: ['Begin', { mode: 'task' }, ['Retrieval:Kb', 'Agent:Sum']],
      'Retrieval:Kb': ['Retrieval', retrievalParams, ['Message:Out']],
      'Agent:Sum': ['Agent', summariser, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{Retrieval:Kb@formalized_content} / {Agent:Sum@content}'] }],
    });
    const { whole, before, after, seen, records } = await killedAt(dsl, 'retrieval-beside', (info) => info.inBatch && info.calls === 2);
    expect(whole).toEqual({ model: 1, searches: 1 });
    // the search completed first: the Agent's checkpoint holds it with the model round
    expect(seen).toEqual([{ inBatch: true, calls: 2 }]);
    expect(before).toEqual({ model: 1, searches: 1 });
    expect(after).toEqual({ model: 0, searches: 0 });
    expect(records.map((r) => [r.kind, r.replayed ?? false])).toEqual([['retrieval', true], ['model', true]]);
  }, 120_000);

  it('an Agent’s Retrieval tool call checkpointed inside its loop is answered from its record, not searched again', async () => {
    const dsl = graph({
      begin: ['Begin', { mode: 'task' }, ['Agent:Kb']],
      'Agent:Kb': ['Agent', { ...agentParams([{ component_name: 'Retrieval', name: 'Town facts', params: { kb_ids: [FACTS], similarity_threshold: 0.05, top_n: 2 } }]), max_rounds: 3 }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{Agent:Kb@content}'] }],
    });
    // killed once the tool call (after model round 0) is checkpointed
    const { whole, before, after, seen } = await killedAt(dsl, 'retrieval-tool', (info) => info.inBatch && info.calls === 2);
    expect(whole).toEqual({ model: 2, searches: 1 });
    expect(seen).toEqual([1, 2].map((calls) => ({ inBatch: true, calls })));
    expect(before).toEqual({ model: 1, searches: 1 });
    expect(after).toEqual({ model: 1, searches: 0 });
  }, 120_000);
});

describe('what checkpoints inside a tool loop cost', () => {
  it('an async turn writes one checkpoint per completed call; a synchronous turn writes none', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(worker().deps.engine, tenant, researcher());
    const units: { operation: string; write: number }[] = [];
    const meter: StoreContext['onCapacity'] = (operation, u) => void units.push({ operation, write: u.write });

    const perCall: number[][] = [];
    let sinceLast = 0;
    const outcome = await processMessage(worker({ onCapacity: meter }).deps, queued(tenant, workflowId, 'metered-async'), {
      messageId: 'metered-async',
      hooks: {
        afterCheckpoint(_seq, info) {
          if (!info.inBatch) return;
          // what was written since the previous checkpoint: this checkpoint and the blobs it needed
          perCall.push(units.slice(sinceLast).filter((u) => u.operation === 'checkpoint' || u.operation === 'blobs').map((u) => u.write));
          sinceLast = units.length;
        },
      },
    });
    expect(outcome.kind).toBe('done');
    const asyncTotal = units.reduce((sum, u) => sum + u.write, 0);
    const byOperation = (list: typeof units) => list.reduce<Record<string, number>>((acc, u) => ({ ...acc, [u.operation]: (acc[u.operation] ?? 0) + u.write }), {});
    console.log(`async Agent turn (4 model rounds, 3 tool calls): ${asyncTotal} WCU ${JSON.stringify(byOperation(units))}; per completed call (checkpoint + new blobs): ${JSON.stringify(perCall)}`);
    expect(perCall).toHaveLength(7);
    for (const written of perCall) expect(written.length).toBeGreaterThanOrEqual(1);

    units.length = 0;
    const sync = await executeTurn(worker({ onCapacity: meter }).deps.engine, { tenant, workflowId, runInput: { query: 'the town’s history' } });
    expect(sync.response.status).toBe('completed');
    console.log(`sync Agent turn (same loop): ${units.reduce((sum, u) => sum + u.write, 0)} WCU ${JSON.stringify(byOperation(units))}`);
    expect(units.filter((u) => u.operation === 'checkpoint')).toEqual([]);
  }, 120_000);
});
