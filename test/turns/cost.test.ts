/**
 * Write cost per turn does not grow with the conversation: a 200-turn conversation with the
 * same output every turn, consumed capacity as DynamoDB reports it (ReturnConsumedCapacity),
 * cross-checked against the sizes of the items written. Also: a session that accumulates
 * 10 MB of model output keeps working, with no item near DynamoDB's 400 KB limit.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallRecord } from '../../lib/canvas/calls';
import { itemSize } from '../../lib/store/blobs';
import { keys } from '../../lib/store/item-keys';
import { getTurn } from '../../lib/store/sessions';
import type { StoreContext } from '../../lib/store/dynamo';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { executeTurn } from '../../lib/turns/execute';
import { processMessage } from '../../lib/turns/queue';
import { fixture } from '../helpers/canvas';
import { MemoryKnowledge, townKnowledge } from '../helpers/knowledge';
import { newTenant, newWorkflow, testEngine, testStore } from '../helpers/engine';
import { OpenAiServer } from '../llm/openai-server';

let server: OpenAiServer;
beforeAll(async () => {
  server = await OpenAiServer.start();
});
afterAll(async () => {
  await server.close();
});

interface Usage {
  write: number;
  read: number;
  byOperation: Record<string, number>;
}

function metered(): { store: StoreContext; take(): Usage } {
  let current: Usage = { write: 0, read: 0, byOperation: {} };
  const store: StoreContext = {
    ...testStore(),
    onCapacity: (operation, units) => {
      current.write += units.write;
      current.read += units.read;
      current.byOperation[operation] = (current.byOperation[operation] ?? 0) + units.write;
    },
  };
  return {
    store,
    take() {
      const used = current;
      current = { write: 0, read: 0, byOperation: {} };
      return used;
    },
  };
}

async function partitionItems(store: StoreContext, tenant: string, runId: string) {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await store.doc.send(new QueryCommand({ TableName: store.table, KeyConditionExpression: 'pk = :pk', ExpressionAttributeValues: { ':pk': keys.session(tenant, runId) }, ExclusiveStartKey: start }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}

describe('write cost per turn', () => {
  it('is the same at turn 200 as at turn 2', async () => {
    server.respond = () => ({ kind: 'text', text: 'The same answer every time, about seventy characters long, for this test.', chunks: 3 });
    const meter = metered();
    const engine = testEngine({ openaiUrl: server.url, store: meter.store });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('llm-stream'));
    let runId: string | undefined;
    const cost: Record<number, Usage> = {};
    for (let turn = 1; turn <= 200; turn++) {
      meter.take();
      const result = await executeTurn(engine, { tenant, workflowId, ...(runId ? { runId } : {}), runInput: { query: `question number ${String(turn).padStart(3, '0')}` } });
      runId = result.response.run_id;
      cost[turn] = meter.take();
    }
    const items = await partitionItems(meter.store, tenant, runId as string);
    const record = (n: number) => items.find((i) => i.sk === keys.turn(n)) as Record<string, unknown>;
    const head = items.find((i) => i.sk === 'T#~') as Record<string, unknown>;
    const kb = (item: Record<string, unknown>) => Math.ceil(itemSize(item) / 1024);
    const lines = [2, 50, 100, 200].map((n) => {
      const c = cost[n] as Usage;
      // the claim is a placeholder under 1 KB in the turn's slot, the commit is charged on the
      // record that replaces it; the head (and its listing-index entry) only when it was refreshed
      const expected = 1 + kb(record(n)) + (c.byOperation.head !== undefined ? kb(head) + 1 : 0);
      return { n, reported: c.write, expected, recordBytes: itemSize(record(n)), read: c.read, ops: c.byOperation };
    });
    for (const l of lines) {
      console.log(`turn ${l.n}: ${l.reported} WCU reported (${JSON.stringify(l.ops)}), ${l.expected} WCU from item sizes (record ${l.recordBytes} B), ${l.read} RCU read`);
    }
    const at2 = lines[0] as (typeof lines)[number];
    const at200 = lines[3] as (typeof lines)[number];
    expect(at200.reported).toBeLessThanOrEqual(at2.reported * 1.1);
    expect(at200.recordBytes).toBeLessThanOrEqual(at2.recordBytes * 1.1);
    for (const l of lines) expect(l.reported).toBe(l.expected);
  }, 120_000);

  it('keeps a session with 10 MB of model output working, every item under 350 KB', async () => {
    // text that does not compress away: 200 KB of pseudo-random words per answer
    let seed = 12345;
    const word = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed.toString(36);
    };
    const answers = new Map<number, string>();
    const big = (k: number) => {
      let text = answers.get(k);
      if (text === undefined) {
        const words: string[] = [];
        for (let size = 0; size < 200 * 1024; ) {
          const w = word();
          words.push(w);
          size += w.length + 1;
        }
        text = `${k}: ${words.join(' ')}`;
        answers.set(k, text);
      }
      return text;
    };
    let n = 0;
    server.respond = () => ({ kind: 'text', text: big(++n), chunks: 8 });
    const store = testStore();
    const engine = testEngine({ openaiUrl: server.url, store });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('llm-stream'));
    let runId: string | undefined;
    let last;
    for (let turn = 1; turn <= 52; turn++) {
      last = await executeTurn(engine, { tenant, workflowId, ...(runId ? { runId } : {}), runInput: { query: `q${turn}` } });
      runId = last.response.run_id;
    }
    expect(last?.response.outputs?.content).toBe(big(52));
    expect(last?.response.turn_number).toBe(52);
    const items = await partitionItems(store, tenant, runId as string);
    const largest = Math.max(...items.map(itemSize));
    const total = items.reduce((sum, i) => sum + itemSize(i), 0);
    console.log(`10 MB session: ${items.length} items, ${(total / 1024).toFixed(0)} KB stored (compressed), largest item ${(largest / 1024).toFixed(1)} KB`);
    expect(largest).toBeLessThan(350 * 1024);
  }, 120_000);

  it('an async turn: each checkpoint costs the same at turn 40 as at turn 2', async () => {
    server.respond = () => ({ kind: 'text', text: 'The same answer every time, about seventy characters long, for this test.', chunks: 3 });
    const meter = metered();
    const engine = testEngine({ openaiUrl: server.url, store: meter.store });
    const tenant = newTenant();
    // two model calls, so two checkpoints: Begin -> LLM -> LLM -> Message
    const llm = (next: string) => ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Answer.', prompts: [{ role: 'user', content: '{sys.query}' }], message_history_window_size: 4 }, [next]];
    const workflowId = await newWorkflow(engine, tenant, {
      components: {
        begin: { obj: { component_name: 'Begin', params: {} }, downstream: ['LLM:One'], upstream: [] },
        'LLM:One': { obj: { component_name: 'LLM', params: llm('LLM:Two')[1] }, downstream: ['LLM:Two'], upstream: ['begin'] },
        'LLM:Two': { obj: { component_name: 'LLM', params: llm('Message:Out')[1] }, downstream: ['Message:Out'], upstream: ['LLM:One'] },
        'Message:Out': { obj: { component_name: 'Message', params: { content: ['{LLM:Two@content}'] } }, downstream: [], upstream: ['LLM:Two'] },
      },
    });
    const deps = { engine, guard: new SsrfGuard() };
    let runId: string | undefined;
    const measured: Record<number, { before: Usage; whole: Usage; checkpoint: Usage; expected: number; itemBytes: number }> = {};
    for (let turn = 1; turn <= 40; turn++) {
      meter.take();
      let checkpoint: { usage: Usage; expected: number; itemBytes: number } | undefined;
      let before: Usage | undefined;
      const body = JSON.stringify({ tenant, workflow_id: workflowId, ...(runId ? { run_id: runId, turn_number: turn - 1 } : {}), run_input: { query: `question number ${String(turn).padStart(3, '0')}` } });
      const outcome = await processMessage(deps, body, {
        hooks: {
          // checkpoint 2 (after the second model call) is the only write since checkpoint 1: measure it alone
          async afterCheckpoint(seq) {
            if (seq === 1) before = meter.take();
            if (seq !== 2 || !runId) return;
            const usage = meter.take();
            const items = await partitionItems(meter.store, tenant, runId);
            // the checkpoint is an update of the turn's claim, charged on the claim item's size
            const claim = items.find((i) => i.sk === keys.turn(turn)) as Record<string, unknown>;
            const expected = Math.ceil(itemSize(claim) / 1024);
            const itemBytes = itemSize(claim);
            checkpoint = { usage, expected, itemBytes };
            meter.take();
          },
        },
      });
      if (outcome.kind !== 'done') throw new Error(`turn ${turn}: ${JSON.stringify(outcome)}`);
      runId = outcome.runId;
      if (checkpoint && before) measured[turn] = { before, whole: meter.take(), checkpoint: checkpoint.usage, expected: checkpoint.expected, itemBytes: checkpoint.itemBytes };
    }
    for (const n of [2, 20, 40]) {
      const m = measured[n] as (typeof measured)[number];
      console.log(`async turn ${n}: up to checkpoint 1 ${m.before.write} WCU (${JSON.stringify(m.before.byOperation)}) and ${m.before.read} RCU, checkpoint 2 ${m.checkpoint.write} WCU reported, ${m.expected} WCU from item sizes (checkpoint item ${m.itemBytes} B), after it ${m.whole.write} WCU (${JSON.stringify(m.whole.byOperation)})`);
    }
    const at2 = measured[2] as (typeof measured)[number];
    const at40 = measured[40] as (typeof measured)[number];
    // both figures are printed, and both must stay flat
    expect(at40.checkpoint.write).toBe(at2.checkpoint.write);
    expect(at2.checkpoint.write).toBe(at2.expected);
    expect(at40.expected).toBe(at2.expected);
    expect(at2.checkpoint.write).toBeGreaterThan(0);
    expect(at40.itemBytes).toBeLessThanOrEqual(at2.itemBytes * 1.1);
    expect(at40.whole.write).toBe(at2.whole.write);
    expect(at40.before.write).toBe(at2.before.write);
  }, 120_000);

  it('a turn with a retrieval and its references costs the same at turn 60 as at turn 2', async () => {
    // cites the first knowledge block it is shown, so the references sent are narrowed each turn
    server.respond = (body) => {
      const id = /\nID: (\d+)/.exec(body.messages.filter((m) => m.role !== 'system').map((m) => m.content).join('\n'))?.[1];
      return { kind: 'text', text: `It opened in 1932 [ID:${id}].`, chunks: 3 };
    };
    const meter = metered();
    const engine = testEngine({ openaiUrl: server.url, store: meter.store, knowledge: townKnowledge() });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, {
      components: {
        begin: { obj: { component_name: 'Begin', params: {} }, downstream: ['Retrieval:Kb'], upstream: [] },
        'Retrieval:Kb': { obj: { component_name: 'Retrieval', params: { query: '{sys.query}', kb_ids: ['town-facts', 'town-weather'], similarity_threshold: 0.05 } }, downstream: ['LLM:Answer'], upstream: ['begin'] },
        'LLM:Answer': { obj: { component_name: 'LLM', params: { llm_id: 'writer@Local', sys_prompt: 'Answer.', prompts: [{ role: 'user', content: 'Knowledge:{Retrieval:Kb@formalized_content}\nQ: {sys.query}' }], message_history_window_size: 4 } }, downstream: ['Message:Out'], upstream: ['Retrieval:Kb'] },
        'Message:Out': { obj: { component_name: 'Message', params: { content: ['{LLM:Answer@content}'] } }, downstream: [], upstream: ['LLM:Answer'] },
      },
    });
    let runId: string | undefined;
    const cost: Record<number, Usage> = {};
    let last;
    for (let turn = 1; turn <= 60; turn++) {
      meter.take();
      last = await executeTurn(engine, { tenant, workflowId, ...(runId ? { runId } : {}), runInput: { query: `When did the old bridge open? The town is cold in winter. (${String(turn).padStart(3, '0')})` } });
      runId = last.response.run_id;
      cost[turn] = meter.take();
    }
    const end = last?.response.events.find((e) => e.event === 'message_end');
    expect(Object.keys((end?.data as { reference: { chunks: object } }).reference.chunks)).toHaveLength(1);
    const items = await partitionItems(meter.store, tenant, runId as string);
    const record = (n: number) => items.find((i) => i.sk === keys.turn(n)) as Record<string, unknown>;
    for (const n of [2, 30, 60]) {
      const c = cost[n] as Usage;
      console.log(`retrieval turn ${n}: ${c.write} WCU (${JSON.stringify(c.byOperation)}), record ${itemSize(record(n))} B, ${c.read} RCU read`);
    }
    const at2 = cost[2] as Usage;
    const at60 = cost[60] as Usage;
    expect(at60.write).toBeLessThanOrEqual(at2.write);
    expect(itemSize(record(60))).toBeLessThanOrEqual(itemSize(record(2)) * 1.1);
    // no blob: the chunks' text is small, and the references travel in the record's own stream
    expect(items.filter((i) => String(i.sk).startsWith('B#')).length).toBeLessThanOrEqual(1);
  }, 120_000);

  it('a retrieval of chunks over 1 KB adds nothing to its call record but ids, scores and documents: no blob of its own', async () => {
    server.respond = () => ({ kind: 'text', text: 'It opened in 1932.', chunks: 1 });
    const meter = metered();
    // five documents of one long chunk each (a chunk of RAGFlow's 512 tokens is about 2 KB)
    const knowledge = new MemoryKnowledge([{
      id: 'kb-long',
      name: 'long',
      documents: Array.from({ length: 5 }, (_, d) => ({ name: `part-${d}.md`, chunks: [`The old bridge, part ${d}: ${Array.from({ length: 60 }, (_, w) => `w${d}x${w * 7919 % 1000}`).join(' ')}.`.padEnd(1500, ' filler')] })),
    }]);
    const engine = testEngine({ openaiUrl: server.url, store: meter.store, knowledge });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, {
      components: {
        begin: { obj: { component_name: 'Begin', params: {} }, downstream: ['Retrieval:Kb'], upstream: [] },
        'Retrieval:Kb': { obj: { component_name: 'Retrieval', params: { query: '{sys.query}', kb_ids: ['kb-long'], similarity_threshold: 0.05, top_n: 3 } }, downstream: ['LLM:Answer'], upstream: ['begin'] },
        'LLM:Answer': { obj: { component_name: 'LLM', params: { llm_id: 'writer@Local', sys_prompt: 'Answer.', prompts: [{ role: 'user', content: 'Knowledge:{Retrieval:Kb@formalized_content}\nQ: {sys.query}' }], message_history_window_size: 0 } }, downstream: ['Message:Out'], upstream: ['Retrieval:Kb'] },
        'Message:Out': { obj: { component_name: 'Message', params: { content: ['{LLM:Answer@content}'] } }, downstream: [], upstream: ['LLM:Answer'] },
      },
    });
    let runId: string | undefined;
    for (let turn = 1; turn <= 3; turn++) {
      const r = await executeTurn(engine, { tenant, workflowId, ...(runId ? { runId } : {}), runInput: { query: `When did the old bridge open? (${turn})` } });
      runId = r.response.run_id;
      const c = meter.take();
      const record = (await partitionItems(meter.store, tenant, runId)).find((i) => i.sk === keys.turn(turn)) as Record<string, unknown>;
      console.log(`long-chunk retrieval turn ${turn}: ${c.write} WCU (${JSON.stringify(c.byOperation)}), record ${itemSize(record)} B`);
      const retrieval = ((await getTurn(meter.store, tenant, runId, turn))?.calls.records as CallRecord[]).find((x) => x.kind === 'retrieval');
      expect((retrieval?.result as { chunks: unknown[] }).chunks).toHaveLength(3);
      // the call records spilled nothing into blobs: the chunks' text is in the state alone
      expect(record.cb).toBeUndefined();
    }
  }, 120_000);
});
