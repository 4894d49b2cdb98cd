/**
 * Double-texting at the turn protocol: Idempotency-Key on queued inputs (a retried enqueue never
 * queues twice), the inbox's bound and order, a pure turn that claimed nothing (every strategy
 * waits for its commit and acts on the new head), a claim given back with inputs behind it, a
 * committer that died before sending for the queued turn (the next request sends for it), a
 * queued input the run no longer takes (`rejected`), and what all of it costs. Model answers
 * are held by the test and released when it says; the clock is the test's where leases run out.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import type { StoreContext } from '../../lib/store/dynamo';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { itemSize } from '../../lib/store/blobs';
import { DEFAULT_INBOX_LIMITS } from '../../lib/store/inbox';
import { keys } from '../../lib/store/item-keys';
import { createDynamoClients } from '../../lib/store/setup';
import { getHead, loadSession } from '../../lib/store/sessions';
import { executeTurn, type TurnEngine, type TurnRequest } from '../../lib/turns/execute';
import { parseOnBusy, type OnBusyStrategy } from '../../lib/turns/on-busy';
import { processBatch, type QueueMessage } from '../../lib/turns/queue';
import { TurnQueued } from '../../lib/turns/turn-queued';
import { fixture } from '../helpers/canvas';
import { testTable } from '../helpers/dynamo';
import { graph } from '../helpers/dsl-builder';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { gate } from '../helpers/gate';
import { OpenAiServer } from '../llm/openai-server';

const CHAT = graph({
  begin: ['Begin', { mode: 'conversational' }, ['LLM:Answer']],
  'LLM:Answer': ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Answer.', prompts: [{ role: 'user', content: '{sys.query}' }], message_history_window_size: 30 }, ['Message:Out']],
  'Message:Out': ['Message', { content: ['{LLM:Answer@content}'] }],
});

/** Begin -> Message: a turn that reaches nothing outside the run, and so claims nothing. */
const PURE = graph({
  begin: ['Begin', { mode: 'conversational' }, ['Message:Echo']],
  'Message:Echo': ['Message', { content: ['echo {sys.query}'] }],
});

let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `answer to ${body.messages.at(-1)?.content}` });
});
afterAll(async () => {
  await model.close();
});

/** An engine whose queued turns run in this process (as npm start runs them). */
function engineWithQueue(overrides: Partial<TurnEngine> = {}): { engine: TurnEngine; queue: ReturnType<typeof createInProcessQueue>; sent: QueueMessage[] } {
  const engine: TurnEngine = { ...testEngine({ openaiUrl: model.url }), ...overrides };
  const sent: QueueMessage[] = [];
  const queue = createInProcessQueue((records) => processBatch({ engine, guard: new SsrfGuard() }, records));
  engine.enqueue ??= async (message) => {
    sent.push(message);
    await queue.enqueue(message);
  };
  return { engine, queue, sent };
}

/** Turn `turn` of a run held in its model call until the returned gate opens; resolves once the model has it. */
async function heldTurn(engine: TurnEngine, request: TurnRequest) {
  const release = gate();
  const since = model.calls;
  model.enqueue({ kind: 'text', text: `answer to ${request.runInput?.query}`, until: release.opened });
  const running = executeTurn(engine, request);
  await model.arrived(since + 1);
  return { release, running };
}

/** What a double-text answers: TurnQueued is the 202. */
async function doubleText(engine: TurnEngine, request: TurnRequest): Promise<TurnQueued | { body: string }> {
  try {
    return await executeTurn(engine, request);
  } catch (error) {
    if (error instanceof TurnQueued) return error;
    throw error;
  }
}

async function historyOf(engine: TurnEngine, tenant: string, runId: string): Promise<string[]> {
  return ((await loadSession(engine.store, tenant, runId, 100)).history as [string, string][]).map(([role, content]) => `${role}: ${content}`);
}

async function started(engine: TurnEngine, dsl: unknown = CHAT) {
  const tenant = newTenant();
  const workflowId = await newWorkflow(engine, tenant, dsl);
  const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'zero' } });
  return { tenant, workflowId, runId: first.response.run_id };
}

describe('Idempotency-Key on a queued input', () => {
  it.each([['with turn_number', true], ['without turn_number', false]])('a retry %s answers the same 202 while queued and the stored turn once run; it never queues twice', async (_label, numbered) => {
    const { engine, queue } = engineWithQueue();
    const { tenant, workflowId, runId } = await started(engine);
    const held = await heldTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { query: 'one' } });
    const key = randomBytes(16).toString('hex');
    const request: TurnRequest = { tenant, workflowId, runId, principal: 'key-a', idempotencyKey: key, runInput: { query: 'two' }, onBusy: parseOnBusy('enqueue'), ...(numbered ? { turnNumber: 1 } : {}) };
    // two at once, and a third after them: one input queued
    const [a, b] = await Promise.all([doubleText(engine, request), doubleText(engine, request)]);
    const c = await doubleText(engine, request);
    for (const answer of [a, b, c]) {
      expect(answer).toBeInstanceOf(TurnQueued);
      expect((answer as TurnQueued).body()).toEqual({ run_id: runId, turn_number: 3, status: 'queued' });
    }
    expect((await getHead(engine.store, tenant, runId)).claim?.inbox).toHaveLength(1);
    // the same key with another request
    await expect(doubleText(engine, { ...request, runInput: { query: 'other' } })).rejects.toMatchObject({ code: 'idempotency_mismatch' });

    held.release.open();
    await held.running;
    await queue.idle();
    const calls = model.calls;
    const first = await doubleText(engine, request);
    const second = await doubleText(engine, request);
    expect('body' in first && 'body' in second).toBe(true);
    const body = JSON.parse((first as { body: string }).body);
    expect(body).toMatchObject({ run_id: runId, turn_number: 3, status: 'completed' });
    expect((second as { body: string }).body).toBe((first as { body: string }).body);
    expect(model.calls).toBe(calls);
    expect(await historyOf(engine, tenant, runId)).toEqual(['user: zero', 'assistant: answer to zero', 'user: one', 'assistant: answer to one', 'user: two', 'assistant: answer to two']);
  });
});

describe('the inbox', () => {
  it(`holds ${DEFAULT_INBOX_LIMITS.entries} inputs; the next is refused 409 inbox_full; the queued ones become turns in the order they came`, async () => {
    const { engine, queue } = engineWithQueue();
    const { tenant, workflowId, runId } = await started(engine);
    const held = await heldTurn(engine, { tenant, workflowId, runId, runInput: { query: 'one' } });
    const queued: number[] = [];
    for (let i = 0; i < DEFAULT_INBOX_LIMITS.entries; i++) {
      const answer = await doubleText(engine, { tenant, workflowId, runId, runInput: { query: `q${i}` }, onBusy: parseOnBusy('enqueue') });
      queued.push((answer as TurnQueued).turn);
    }
    expect(queued).toEqual(Array.from({ length: DEFAULT_INBOX_LIMITS.entries }, (_, i) => 3 + i));
    await expect(doubleText(engine, { tenant, workflowId, runId, runInput: { query: 'too many' }, onBusy: parseOnBusy('enqueue') }))
      .rejects.toMatchObject({ code: 'inbox_full', currentTurn: 1, limit: DEFAULT_INBOX_LIMITS });
    held.release.open();
    await held.running;
    await queue.idle();
    const loaded = await loadSession(engine.store, tenant, runId, 0);
    expect(loaded.head.turn).toBe(2 + DEFAULT_INBOX_LIMITS.entries);
    const history = await historyOf(engine, tenant, runId);
    expect(history.filter((h) => h.startsWith('user:'))).toEqual(['user: zero', 'user: one', ...Array.from({ length: DEFAULT_INBOX_LIMITS.entries }, (_, i) => `user: q${i}`)]);
    expect(history).not.toContain('user: too many');
  });

  it('a queued input the run no longer takes when its turn comes commits as rejected, the run as it was', async () => {
    const { engine, queue } = engineWithQueue();
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'go' } });
    const runId = first.response.run_id;
    const held = await heldTurn(engine, { tenant, workflowId, runId, runInput: { inputs: { topic: 'owls' } } });
    const queued = await doubleText(engine, { tenant, workflowId, runId, runInput: { inputs: { topic: 'cats' } }, onBusy: parseOnBusy('enqueue') });
    expect(queued).toBeInstanceOf(TurnQueued);
    held.release.open();
    expect((await held.running).response).toMatchObject({ status: 'completed', turn_number: 2 });
    await queue.idle();
    const loaded = await loadSession(engine.store, tenant, runId, 10);
    expect(loaded.head).toMatchObject({ turn: 3, status: 'completed' });
    const { listTurns } = await import('../../lib/store/sessions');
    const turn3 = (await listTurns(engine.store, tenant, runId, 2, 10)).turns[0];
    expect(turn3).toMatchObject({ turn: 3, status: 'rejected', runStatus: 'completed' });
    expect(JSON.parse(turn3?.response ?? '{}')).toMatchObject({ status: 'rejected', error: { code: 'not_waiting_for_input' }, events: [] });
    expect((turn3?.request as { run_input: unknown }).run_input).toEqual({ inputs: { topic: 'cats' } });
  });
});

describe('a stop meeting a queued turn', () => {
  it('before its worker came: the turn ends cancelled, even when the run no longer takes its input', async () => {
    const held: QueueMessage[] = [];
    const { engine, queue } = engineWithQueue({ enqueue: async (message) => void held.push(message) });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    const runId = (await executeTurn(engine, { tenant, workflowId, runInput: { query: 'go' } })).response.run_id;
    const answering = await heldTurn(engine, { tenant, workflowId, runId, runInput: { inputs: { topic: 'owls' } } });
    expect(await doubleText(engine, { tenant, workflowId, runId, runInput: { inputs: { topic: 'cats' } }, onBusy: parseOnBusy('enqueue') })).toBeInstanceOf(TurnQueued);
    answering.release.open();
    await answering.running;
    // turn 3 is claimed for the queued answer, its message not delivered yet: a stop flags it
    await expect(executeTurn(engine, { tenant, workflowId, runId, command: 'stop' })).rejects.toMatchObject({ code: 'stop_accepted', turn: 3 });
    for (const message of held) await queue.enqueue(message);
    await queue.idle();
    const loaded = await loadSession(engine.store, tenant, runId, 0);
    expect(loaded.head).toMatchObject({ turn: 3, status: 'cancelled', claim: null });
    const { getTurn } = await import('../../lib/store/sessions');
    const turn3 = await getTurn(engine.store, tenant, runId, 3);
    expect(JSON.parse(turn3?.response ?? '{}')).toMatchObject({ status: 'cancelled', is_terminal: true });
    // the turn is the queued input's, as it was sent
    expect((turn3?.request as { run_input: unknown }).run_input).toEqual({ inputs: { topic: 'cats' } });
  });
});

describe('a pure turn still unclaimed', () => {
  it.each<OnBusyStrategy>(['reject', 'enqueue', 'interrupt', 'rollback'])('with on_busy %s: beaten to its commit, it runs again on the new head (or, sent with a stale turn_number, is refused)', async (strategy) => {
    const engine = testEngine();
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, PURE);
    const runId = (await executeTurn(engine, { tenant, workflowId, runInput: { query: 'zero' } })).response.run_id;
    for (const numbered of [false, true]) {
      const current = (await getHead(engine.store, tenant, runId)).turn;
      const hold = gate();
      let computed: () => void = () => undefined;
      const ready = new Promise<void>((resolve) => (computed = resolve));
      let held = true;
      // A has run and waits at its commit; B commits first; then A goes on
      const a = executeTurn(engine, {
        tenant, workflowId, runId, runInput: { query: `a${current}` }, onBusy: parseOnBusy(strategy),
        ...(numbered ? { turnNumber: current } : {}),
        hooks: {
          beforeCommit: async () => {
            if (!held) return;
            held = false;
            computed();
            await hold.opened;
          },
        },
      });
      await ready;
      const b = await executeTurn(engine, { tenant, workflowId, runId, runInput: { query: `b${current}` } });
      expect(b.response.turn_number).toBe(current + 1);
      hold.open();
      if (numbered) {
        await expect(a).rejects.toMatchObject({ code: 'turn_conflict', currentTurn: current + 1 });
      } else {
        expect((await a).response).toMatchObject({ turn_number: current + 2, outputs: { content: `echo a${current}` } });
      }
    }
    expect(await historyOf(engine, tenant, runId)).toEqual(['user: zero', 'assistant: echo zero', 'user: b1', 'assistant: echo b1', 'user: a1', 'assistant: echo a1', 'user: b3', 'assistant: echo b3']);
  });
});

describe('queued inputs survive the turn ahead of them', () => {
  it('a turn that fails without committing hands its slot to the first queued input', async () => {
    const { engine, queue } = engineWithQueue();
    const { tenant, workflowId, runId } = await started(engine);
    const release = gate();
    const since = model.calls;
    // the model holds the turn, then fails it for good: 503 on every attempt
    model.enqueue({ kind: 'status', status: 503 }, { kind: 'status', status: 503 }, { kind: 'status', status: 503 });
    const failing = executeTurn(engine, { tenant, workflowId, runId, runInput: { query: 'one' }, hooks: { afterClaim: () => release.opened } });
    const queued = await (async () => {
      // the claim is taken: the turn is in flight
      for (;;) {
        const head = await getHead(engine.store, tenant, runId);
        if (head.claim) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
      return doubleText(engine, { tenant, workflowId, runId, runInput: { query: 'two' }, onBusy: parseOnBusy('enqueue') });
    })();
    expect((queued as TurnQueued).turn).toBe(3);
    release.open();
    await expect(failing).rejects.toMatchObject({ code: 'unavailable' });
    await queue.idle();
    expect(model.calls - since).toBe(4);
    const loaded = await loadSession(engine.store, tenant, runId, 10);
    // it came sooner than queued: the turn ahead committed nothing
    expect(loaded.head).toMatchObject({ turn: 2, status: 'completed', claim: null });
    expect(await historyOf(engine, tenant, runId)).toEqual(['user: zero', 'assistant: answer to zero', 'user: two', 'assistant: answer to two']);
  });

  it('a committer that died before sending for the queued turn: the next request on the run sends for it, once its claim has run out', async () => {
    let clock = Date.now();
    const base = testEngine({ openaiUrl: model.url });
    const store: StoreContext = { ...base.store, now: () => clock };
    let lose = true;
    const { engine, queue, sent } = engineWithQueue({ store, clock: () => clock, asyncHoldMs: 60_000 });
    const deliver = engine.enqueue as NonNullable<TurnEngine['enqueue']>;
    // the first send for a queued turn is lost (its sender died)
    engine.enqueue = async (message) => {
      if (lose) {
        lose = false;
        return;
      }
      await deliver(message);
    };
    const { tenant, workflowId, runId } = await started(engine);
    const held = await heldTurn(engine, { tenant, workflowId, runId, runInput: { query: 'one' } });
    expect(await doubleText(engine, { tenant, workflowId, runId, runInput: { query: 'two' }, onBusy: parseOnBusy('enqueue') })).toBeInstanceOf(TurnQueued);
    held.release.open();
    await held.running;
    await queue.idle();
    // turn 3 is claimed for the queued input, and nobody runs it
    const stranded = await getHead(engine.store, tenant, runId);
    expect(stranded).toMatchObject({ turn: 2, claim: { turn: 3, queued: true } });
    expect(sent).toEqual([]);
    // meanwhile the run is busy: a request is refused as ever
    await expect(executeTurn(engine, { tenant, workflowId, runId, runInput: { query: 'three' } })).rejects.toMatchObject({ code: 'turn_in_progress' });
    clock += 60_001;
    // the claim ran out: a request finds it stranded, sends for it, and queues behind it
    const three = await doubleText(engine, { tenant, workflowId, runId, runInput: { query: 'three' }, onBusy: parseOnBusy('enqueue') });
    expect((three as TurnQueued).body()).toMatchObject({ turn_number: 4, status: 'queued' });
    expect(sent.map((m) => [m.claim?.turn, m.run_input.query])).toEqual([[3, 'two']]);
    await queue.idle();
    expect(await historyOf(engine, tenant, runId)).toEqual(['user: zero', 'assistant: answer to zero', 'user: one', 'assistant: answer to one', 'user: two', 'assistant: answer to two', 'user: three', 'assistant: answer to three']);
  });
});

describe('what double-texting costs', () => {
  it('an ordinary turn pays nothing for it; a queued input one conditional update, its drain one transaction', async () => {
    const { endpoint, tableName } = testTable();
    const { doc } = createDynamoClients({ endpoint });
    let trips = 0;
    let wru = 0;
    const ops: string[] = [];
    doc.middlewareStack.add((next, context) => async (args) => {
      trips++;
      ops.push(String(context.commandName).replace(/Command$/, ''));
      return next(args);
    }, { step: 'initialize', name: 'countRoundTrips' });
    const store: StoreContext = { doc, table: tableName, onCapacity: (_op, units) => void (wru += units.write) };
    const held: QueueMessage[] = [];
    // the drain message is held here, so that the claim it names can be weighed before it runs
    const { engine, queue } = engineWithQueue({ store, enqueue: async (message) => void held.push(message) });
    const take = () => {
      const out = { trips, wru, ops: ops.splice(0) };
      trips = 0;
      wru = 0;
      return out;
    };
    const { tenant, workflowId, runId } = await started(engine);
    await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { query: 'warm' } });
    take();
    const plain = await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 2, runInput: { query: 'plain' } });
    const ordinary = take();
    expect(plain.response.turn_number).toBe(3);
    expect(ordinary.ops).toEqual(['Query', 'PutItem', 'PutItem']);

    const running = await heldTurn(engine, { tenant, workflowId, runId, runInput: { query: 'one' } });
    take();
    await doubleText(engine, { tenant, workflowId, runId, runInput: { query: 'two' }, onBusy: parseOnBusy('enqueue') });
    const enqueue = take();
    running.release.open();
    await running.running;
    const drained = take();
    // AWS's arithmetic: a transaction writes each item twice; a Put is charged on the larger of
    // the item it writes and the one it replaces; the Put refused for the inbox is charged too
    const item = async (turn: number) => (await doc.send(new GetCommand({ TableName: tableName, Key: { pk: keys.session(tenant, runId), sk: keys.turn(turn) }, ConsistentRead: true }))).Item as Record<string, unknown>;
    const kb = (bytes: number) => Math.max(1, Math.ceil(bytes / 1024));
    const [record, claim] = [itemSize(await item(4)), itemSize(await item(5))];
    const arithmetic = kb(record) + 2 * (kb(record) + kb(claim));
    console.log(`ordinary turn: ${ordinary.trips} round trips (${ordinary.ops.join(', ')}), ${ordinary.wru} WRU; a queued input: ${enqueue.trips} round trips (${enqueue.ops.join(', ')}), ${enqueue.wru} WRU; the commit ahead of it: ${drained.trips} round trips (${drained.ops.join(', ')}), ${drained.wru} WRU reported by DynamoDB Local for the transaction, ${arithmetic} WRU by AWS's arithmetic (record ${record} B, queued input's claim ${claim} B, and the refused Put)`);
    // the busy request read the run, then queued with one update
    expect(enqueue.ops).toEqual(['Query', 'UpdateItem']);
    // the commit was refused once for its inbox, then went in with the queued input's claim
    expect(drained.ops.filter((op) => op === 'PutItem' || op === 'TransactWriteItems')).toEqual(['PutItem', 'TransactWriteItems']);
    expect(held.map((m) => [m.claim?.turn, m.run_input.query])).toEqual([[5, 'two']]);
    for (const message of held) await queue.enqueue(message);
    await queue.idle();
    expect((await getHead(engine.store, tenant, runId)).turn).toBe(5);
  });
});
