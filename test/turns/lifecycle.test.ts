/**
 * Turns stopped from outside (lib/turns/lifecycle.ts): a server that is stopping, an invocation
 * about to time out. An aborted turn commits nothing, gives its claim back, and a retry with
 * the same Idempotency-Key takes the turn at once; an aborted async turn keeps its claim and
 * last checkpoint for the next worker. The model server holds its answers until the test has
 * aborted: every step follows the one before, whatever the machine's load.
 */
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { readConfig } from '../../lib/config';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { createShutdown, invocationDeadline, type DeadlineTimers } from '../../lib/runtime';
import { acquireLease, renewLease } from '../../lib/store/checkpoints';
import { TurnInProgressError } from '../../lib/store/errors';
import { keys } from '../../lib/store/item-keys';
import { getHead, listTurns } from '../../lib/store/sessions';
import { heartbeatMs } from '../../lib/turns/async-turn';
import { claimNextTurn, executeTurn, type TurnEngine } from '../../lib/turns/execute';
import { TurnAbortedError } from '../../lib/turns/lifecycle';
import { processBatch, type QueueMessage } from '../../lib/turns/queue';
import { fixture } from '../helpers/canvas';
import { graph, llmStep, stepOf } from '../helpers/dsl-builder';
import { newTenant, newWorkflow, testEngine, testStore } from '../helpers/engine';
import { sqsRecord } from '../helpers/sqs';
import { OpenAiServer } from '../llm/openai-server';

let model: OpenAiServer;
beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => ({ kind: 'text', text: `about ${stepOf(body.messages) ?? body.messages.at(-1)?.content}` });
});
afterAll(async () => {
  await model.close();
});

/** An engine whose turns the test stops (as a stopping server would), with slow-machine-proof model timeouts. */
function stoppable(extra: Partial<TurnEngine> = {}) {
  const shutdown = createShutdown();
  const engine: TurnEngine = { ...testEngine({ openaiUrl: model.url, leaseMs: 60_000 }), lifecycle: shutdown.lifecycle, ...extra };
  return { engine, shutdown };
}

/** The claims (placeholders of turns not committed) in a run's partition. */
async function claimsOf(tenant: string, runId: string): Promise<Record<string, unknown>[]> {
  const store = testStore();
  const { Items = [] } = await store.doc.send(new QueryCommand({
    TableName: store.table,
    KeyConditionExpression: 'pk = :pk',
    FilterExpression: 'kind = :claim',
    ExpressionAttributeValues: { ':pk': keys.session(tenant, runId), ':claim': 'claim' },
    ConsistentRead: true,
  }));
  return Items;
}

const twoSteps = graph({
  begin: ['Begin', { mode: 'task' }, ['LLM:A']],
  'LLM:A': llmStep('A', ['LLM:B']),
  'LLM:B': llmStep('B', ['Message:Out']),
  'Message:Out': ['Message', { content: ['{LLM:A@content} / {LLM:B@content}'] }],
});

describe('a turn aborted from outside', () => {
  it('while the model answers: nothing committed, the claim given back, the same key then runs the turn at once', async () => {
    const { engine, shutdown } = stoppable();
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'story' } });
    const runId = first.response.run_id;
    const since = model.calls;

    model.enqueue({ kind: 'stall' });
    const turn = executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'moon' } }, idempotencyKey: 'k-abort' });
    await model.arrived(since + 1); // the turn holds its claim and waits for the model
    expect(await claimsOf(tenant, runId)).toHaveLength(1);
    shutdown.abort('the server is stopping');
    const error = await turn.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(TurnAbortedError);
    expect(error).toMatchObject({ code: 'unavailable', message: expect.stringMatching(/^the server is stopping: /) });

    expect(await claimsOf(tenant, runId)).toEqual([]);
    expect(await getHead(testStore(), tenant, runId)).toMatchObject({ turn: 1, status: 'waiting_for_input', claim: null });
    // the next process: a retry with the same key meets no claim, and runs the turn
    const next = { ...testEngine({ openaiUrl: model.url, leaseMs: 60_000 }), idempotencyWaitMs: 0 };
    const retry = await executeTurn(next, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'moon' } }, idempotencyKey: 'k-abort' });
    expect(retry.response).toMatchObject({ turn_number: 2, status: 'completed', outputs: { content: 'about Topic: moon' } });
    expect(model.calls - since).toBe(2);
  });

  it('between two batches: the turn the canvas ended as cancelled is not committed either', async () => {
    const { engine, shutdown } = stoppable();
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, twoSteps);
    const since = model.calls;
    const error = await executeTurn(engine, {
      tenant,
      workflowId,
      runInput: { query: 'q' },
      idempotencyKey: 'k-between',
      hooks: {
        afterEvent(event) {
          if (event.event === 'node_finished' && event.data.component_id === 'LLM:A') shutdown.abort('the server is stopping');
        },
      },
    }).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(TurnAbortedError);
    expect(model.calls - since).toBe(1); // B never started

    const retry = await executeTurn(testEngine({ openaiUrl: model.url, leaseMs: 60_000 }), { tenant, workflowId, runInput: { query: 'q' }, idempotencyKey: 'k-between' });
    expect(retry.response).toMatchObject({ turn_number: 1, status: 'completed' });
    expect((await listTurns(testStore(), tenant, retry.response.run_id, 0, 10)).turns.map((t) => t.status)).toEqual(['completed']);
  });

  it('a turn starting after the abort is refused before it claims anything', async () => {
    const { engine, shutdown } = stoppable();
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, twoSteps);
    shutdown.abort('the server is stopping');
    const since = model.calls;
    await expect(executeTurn(engine, { tenant, workflowId, runInput: { query: 'q' } })).rejects.toBeInstanceOf(TurnAbortedError);
    expect(model.calls).toBe(since);
  });

  it('a continuing turn keyed without turn_number: its key is let go with the claim, so the retry need not wait', async () => {
    const { engine, shutdown } = stoppable();
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('llm-stream'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'one' } });
    const runId = first.response.run_id;
    const since = model.calls;
    model.enqueue({ kind: 'stall' });
    const turn = executeTurn(engine, { tenant, workflowId, runId, runInput: { query: 'two' }, idempotencyKey: 'k-record' });
    await model.arrived(since + 1);
    shutdown.abort('the server is stopping');
    await expect(turn).rejects.toBeInstanceOf(TurnAbortedError);
    // waiting for a same-key attempt is not allowed here: a leftover would answer 409 at once
    const next = { ...testEngine({ openaiUrl: model.url, leaseMs: 60_000 }), idempotencyWaitMs: 0 };
    const retry = await executeTurn(next, { tenant, workflowId, runId, runInput: { query: 'two' }, idempotencyKey: 'k-record' });
    expect(retry.response).toMatchObject({ turn_number: 2, status: 'completed' });
  });
});

describe('an async turn aborted in its worker', () => {
  it('keeps its claim and last checkpoint, lets go of its lease, and is continued from there', async () => {
    const { engine, shutdown } = stoppable();
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, twoSteps);
    const begun = await claimNextTurn(engine, { tenant, workflowId, runInput: { query: 'q' } }, { leaseMs: 120_000, async: true });
    if (!('claim' in begun)) throw new Error('not claimed');
    const runId = begun.prepared.head.id;
    const message: QueueMessage = { tenant, workflow_id: workflowId, run_id: runId, turn_number: 0, run_input: { query: 'q' }, claim: { token: begun.claim.token, turn: 1 } };
    const since = model.calls;

    const continued: QueueMessage[] = [];
    const outcomes: unknown[] = [];
    model.respond = (body) => (stepOf(body.messages) === 'B' && model.calls === since + 2 ? { kind: 'stall' } : { kind: 'text', text: `answer-${stepOf(body.messages)}` });
    try {
      const worker = processBatch({ engine, guard: new SsrfGuard(), requeue: async (m) => void continued.push(m as QueueMessage), log: (_m, f) => outcomes.push(f) }, [sqsRecord(JSON.stringify(message))]);
      await model.arrived(since + 2); // A answered and checkpointed; B held by the model
      shutdown.abort('the invocation was about to time out');
      expect((await worker).batchItemFailures).toEqual([]);
    } finally {
      model.respond = (body) => ({ kind: 'text', text: `about ${stepOf(body.messages) ?? body.messages.at(-1)?.content}` });
    }
    expect(outcomes).toEqual([expect.objectContaining({ kind: 'continued', aborted: true, checkpoints_written: 1 })]);
    expect(continued).toEqual([expect.objectContaining({ run_id: runId, claim: message.claim })]);
    const [claim] = await claimsOf(tenant, runId);
    expect(claim).toMatchObject({ claim_token: begun.claim.token, cseq: 1 });
    expect(claim?.claim_owner).toBeUndefined(); // the next worker takes it at once

    const next = testEngine({ openaiUrl: model.url, leaseMs: 60_000 });
    const done = await processBatch({ engine: next, guard: new SsrfGuard() }, [sqsRecord(JSON.stringify(continued[0]))]);
    expect(done.batchItemFailures).toEqual([]);
    const calls = model.requests.slice(since).map((r) => `${stepOf(r.body.messages)}:${r.completed ? 'answered' : 'held'}`);
    expect(calls).toEqual(['A:answered', 'B:held', 'B:answered']);
    expect(await getHead(testStore(), tenant, runId)).toMatchObject({ turn: 1, status: 'completed', claim: null });
  });

  it('in a worker whose queue dies with its process, gives the turn back instead', async () => {
    const { engine, shutdown } = stoppable();
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, twoSteps);
    const begun = await claimNextTurn(engine, { tenant, workflowId, runInput: { query: 'q' } }, { leaseMs: 120_000, async: true });
    if (!('claim' in begun)) throw new Error('not claimed');
    const runId = begun.prepared.head.id;
    const message: QueueMessage = { tenant, workflow_id: workflowId, run_id: runId, turn_number: 0, run_input: { query: 'q' }, claim: { token: begun.claim.token, turn: 1 } };
    const since = model.calls;
    model.enqueue({ kind: 'stall' });
    const outcomes: unknown[] = [];
    const continued: QueueMessage[] = [];
    const worker = processBatch({ engine, guard: new SsrfGuard(), onAbort: 'release', requeue: async (m) => void continued.push(m as QueueMessage), log: (_m, f) => outcomes.push(f) }, [sqsRecord(JSON.stringify(message))]);
    await model.arrived(since + 1);
    shutdown.abort('the server is stopping');
    expect((await worker).batchItemFailures).toEqual([]);
    expect(outcomes).toEqual([expect.objectContaining({ kind: 'released', run_id: runId, turn: 1 })]);
    expect(continued).toEqual([]);
    expect(await claimsOf(tenant, runId)).toEqual([]);
    expect(await getHead(testStore(), tenant, runId)).toMatchObject({ turn: 0, claim: null });
  });

  it('renews its lease and its claim often enough for the shorter of the two', () => {
    expect(heartbeatMs({ leaseMs: 60_000, holdMs: 20 * 60_000 })).toBe(20_000);
    // a local hold shorter than the lease: the claim must not run out between two beats
    expect(heartbeatMs({ leaseMs: 600_000, holdMs: 120_000 })).toBe(40_000);
  });
});

describe('an async turn under npm start (no turn queue: the worker is in-process)', () => {
  it('is free again two minutes after its worker died, and kept while a live worker beats', async () => {
    const hold = readConfig({}).queue.asyncLeaseMs;
    expect(hold).toBe(120_000);
    const t0 = Date.now();
    let now = t0;
    const store = { ...testStore(), now: () => now };
    const engine: TurnEngine = { ...testEngine({ openaiUrl: model.url, leaseMs: 60_000, store }), clock: () => now };
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, twoSteps);
    const claimed = async () => {
      const begun = await claimNextTurn(engine, { tenant, workflowId, runInput: { query: 'q' } }, { leaseMs: hold, async: true });
      if (!('claim' in begun)) throw new Error('not claimed');
      const lease = { tenant, id: begun.prepared.head.id, turn: 1, token: begun.claim.token, owner: `worker-${begun.claim.token}` };
      await acquireLease(store, lease, { leaseMs: 60_000, holdMs: hold }); // a worker takes it...
      return lease;
    };
    const sync = (runId: string) => executeTurn(engine, { tenant, workflowId, runId, turnNumber: 0, runInput: { query: 'q' } });

    // ...and dies: its claim holds for the hold, not a moment longer
    const dead = await claimed();
    now = t0 + hold - 1;
    await expect(sync(dead.id)).rejects.toBeInstanceOf(TurnInProgressError);
    now = t0 + hold + 1;
    expect((await sync(dead.id)).response).toMatchObject({ turn_number: 1, status: 'completed' });

    // a live worker's heartbeat pushes the claim ahead: a long turn keeps it
    now = t0;
    const live = await claimed();
    now = t0 + hold - 1;
    await renewLease(store, live, { leaseMs: 60_000, holdMs: hold });
    now = t0 + 2 * hold - 10;
    await expect(sync(live.id)).rejects.toBeInstanceOf(TurnInProgressError);
  });
});

describe('the lifecycles of the entry points', () => {
  /** Timers the test fires itself. */
  function manualTimers() {
    const set: { run: () => void; ms: number; cleared: boolean }[] = [];
    const timers: DeadlineTimers = {
      set: (run, ms) => {
        const t = { run, ms, cleared: false };
        set.push(t);
        return t;
      },
      clear: (handle) => void ((handle as { cleared: boolean }).cleared = true),
    };
    return { timers, set };
  }

  it('an invocation deadline aborts its turns the margin before the end, and the next invocation starts afresh', () => {
    const { timers, set } = manualTimers();
    const deadline = invocationDeadline(3_000, timers);
    expect(deadline.lifecycle.signal()).toBeUndefined(); // between invocations
    deadline.arm({ getRemainingTimeInMillis: () => 29_000 });
    const signal = deadline.lifecycle.signal();
    expect(set.map((t) => t.ms)).toEqual([26_000]);
    expect(signal?.aborted).toBe(false);
    set[0]?.run();
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(TurnAbortedError);
    deadline.disarm();
    expect(set[0]?.cleared).toBe(true);

    // less than the margin left: aborted from the start
    deadline.arm({ getRemainingTimeInMillis: () => 2_000 });
    expect(deadline.lifecycle.signal()?.aborted).toBe(true);
    deadline.disarm();
    deadline.arm({ getRemainingTimeInMillis: () => 900_000 });
    expect(deadline.lifecycle.signal()?.aborted).toBe(false);
    deadline.disarm();
  });

  it('a shutdown counts the turns it runs, waits for them, and aborts those that start later too', async () => {
    const shutdown = createShutdown();
    let finish: () => void = () => undefined;
    shutdown.lifecycle.started?.(new Promise<void>((resolve) => (finish = resolve)));
    expect(shutdown.running).toBe(1);
    const settled = shutdown.settled().then(() => 'settled');
    finish();
    expect(await settled).toBe('settled');
    expect(shutdown.running).toBe(0);
    shutdown.abort('the server is stopping');
    expect(shutdown.lifecycle.signal()?.aborted).toBe(true);
  });

  it('the in-process queue, once closed, refuses new messages and hands those it holds to its drop', async () => {
    let fail = true;
    const ran: string[] = [];
    const queue = createInProcessQueue(async (records) => {
      ran.push(records[0]?.body ?? '');
      // the first delivery asks to be retried: it waits for its retry when the queue closes
      return { batchItemFailures: fail ? [{ itemIdentifier: records[0]?.messageId ?? '' }] : [] };
    }, { retryDelayMs: 3_600_000 });
    queue.sendRaw('first');
    await queue.idle();
    expect(ran).toEqual(['first']);
    const dropped: string[] = [];
    queue.close(async (body) => void dropped.push(body));
    fail = false;
    expect(() => queue.sendRaw('second')).toThrow(expect.objectContaining({ code: 'unavailable' }));
    await queue.idle();
    expect(ran).toEqual(['first']);
    expect(dropped).toEqual(['first']);
  });
});
