/**
 * Async turns in the worker: suspension before the invocation ends and continuation by the
 * next message, stops (the cancel flag read between batches, and a stop that lands after the
 * last checkpoint), and two deliveries of one message at once. What must happen while a turn
 * runs happens while the model holds its answer, or while the worker waits at a checkpoint,
 * until the test lets it go on: the tests follow the order of events, not the clock.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInProcessQueue } from '../../lib/local/in-process-queue';
import { SsrfGuard } from '../../lib/outbound/ssrf';
import { requestCancel } from '../../lib/store/checkpoints';
import { keys } from '../../lib/store/item-keys';
import { getHead } from '../../lib/store/sessions';
import { type Outcome, processBatch, type QueueDeps, type QueueMessage } from '../../lib/turns/queue';
import { graph, llmStep, stepOf } from '../helpers/dsl-builder';
import { newWorkflow, testEngine } from '../helpers/engine';
import { type Served, serveApp, sseFrames } from '../helpers/http';
import { sqsRecord } from '../helpers/sqs';
import { gate, type Gate } from '../helpers/gate';
import { OpenAiServer } from '../llm/openai-server';

const fourSteps = graph({
  begin: ['Begin', { mode: 'conversational' }, ['LLM:A']],
  'LLM:A': llmStep('A', ['LLM:B']),
  'LLM:B': llmStep('B', ['LLM:C']),
  'LLM:C': llmStep('C', ['LLM:D']),
  'LLM:D': llmStep('D', ['Message:Out']),
  'Message:Out': ['Message', { content: ['{LLM:A@content} {LLM:B@content} {LLM:C@content} {LLM:D@content}'] }],
});

const LEASE_MS = 60_000;
let model: OpenAiServer;
let api: Served;
const queued: QueueMessage[] = [];
let engine: ReturnType<typeof testEngine>;

/** The answer to step `step`, held by the model until `release` opens. */
const held = (step: string, release: Gate) => ({ kind: 'text' as const, text: `${step}${step}`, chunks: 2, until: release.opened });

beforeAll(async () => {
  model = await OpenAiServer.start();
  model.respond = (body) => {
    const step = stepOf(body.messages) ?? '?';
    return { kind: 'text', text: `${step.toLowerCase()}${step.toLowerCase()}`, chunks: 2 };
  };
  engine = testEngine({ openaiUrl: model.url, leaseMs: LEASE_MS });
  // callbacks go to the test's receivers on loopback
  api = await serveApp(engine, { enqueue: async (message) => void queued.push(message as QueueMessage), guard: new SsrfGuard({ allow: ['127.0.0.1'] }) });
});
afterAll(async () => {
  await api.close();
  await model.close();
});

const stepsCalled = (since: number) => model.requests.slice(since).map((r) => stepOf(r.body.messages));

async function claimAsync(workflowId: string, body: Record<string, unknown> = { run_input: { query: 'q' } }): Promise<QueueMessage> {
  const res = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body, headers: { prefer: 'respond-async' } });
  expect(res.status).toBe(202);
  const message = queued.find((m) => m.run_id === res.json.run_id && m.claim?.turn === res.json.turn_number);
  if (!message) throw new Error('nothing queued');
  return message;
}

describe('async turns in the worker', () => {
  it('suspends at the deadline and is continued by the next message until it commits', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, fourSteps);
    const since = model.calls;
    const message = await claimAsync(workflowId);
    const outcomes: Outcome['kind'][] = [];
    const continuations: QueueMessage[] = [];
    // a deadline already passed: every invocation runs one batch, checkpoints, and hands over
    const deps: QueueDeps = { engine, guard: new SsrfGuard(), count: (o) => outcomes.push(o), requeue: async (m) => void continuations.push(m as QueueMessage) };
    let next: QueueMessage | undefined = message;
    for (let hops = 0; next && hops < 20; hops++) {
      const failures = await processBatch(deps, [sqsRecord(JSON.stringify(next))], { stopBy: 0 });
      expect(failures.batchItemFailures).toEqual([]);
      next = continuations.shift();
      if (next) {
        expect(next.claim).toEqual(message.claim);
        // between invocations the run is still at its previous turn, with the turn in flight
        const run = await api.call('GET', `/workflows/v1/workflow-runs/${message.run_id}`);
        expect(run.json).toMatchObject({ status: 'running', turn_number: 0, turn_in_progress: 1 });
      }
    }
    // batches: Begin, A, B, C, D, Message; a checkpoint (and a hand-over) after each but the last
    expect(outcomes).toEqual(['continued', 'continued', 'continued', 'continued', 'continued', 'done']);
    expect(stepsCalled(since)).toEqual(['A', 'B', 'C', 'D']);
    const turn = await api.call('GET', `/workflows/v1/workflow-runs/${message.run_id}/turns/1`);
    expect(turn.json.response.status).toBe('completed');
    const shown = turn.json.response.events.filter((e: { event: string }) => e.event === 'message').map((e: { data: { content: string } }) => e.data.content).join('');
    expect(shown).toBe('aa bb cc dd');
  });

  it('a turn resumed from checkpoints sees the same conversation as one run without interruption', async () => {
    const chat = graph({
      begin: ['Begin', { mode: 'conversational' }, ['Message:Ack']],
      'Message:Ack': [...['Message', { content: ['noted: {sys.query}'] }] as [string, Record<string, unknown>], ['LLM:Chat']],
      'LLM:Chat': ['LLM', { llm_id: 'writer@Local', sys_prompt: 'Chat.', prompts: [{ role: 'user', content: '{sys.query}' }], message_history_window_size: 6 }, ['Message:Out']],
      'Message:Out': ['Message', { content: ['{LLM:Chat@content}'] }],
    });
    const workflowId = await newWorkflow(engine, api.tenant, chat);
    const prompts = async (asyncLast: boolean) => {
      const execute = `/workflows/v1/workflows/${workflowId}/execute`;
      const first = await api.call('POST', execute, { body: { run_input: { query: 'one' } } });
      const runId = first.json.run_id as string;
      await api.call('POST', execute, { body: { run_id: runId, run_input: { query: 'two' } } });
      const since = model.calls;
      if (!asyncLast) {
        await api.call('POST', execute, { body: { run_id: runId, run_input: { query: 'three' } } });
      } else {
        let next: QueueMessage | undefined = await claimAsync(workflowId, { run_id: runId, run_input: { query: 'three' } });
        const continuations: QueueMessage[] = [];
        const deps: QueueDeps = { engine, guard: new SsrfGuard(), requeue: async (m) => void continuations.push(m as QueueMessage) };
        let hops = 0;
        for (; next; hops++) {
          await processBatch(deps, [sqsRecord(JSON.stringify(next))], { stopBy: 0 });
          next = continuations.shift();
        }
        expect(hops).toBeGreaterThan(2);
      }
      const turn = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/3`);
      return { sent: model.requests.slice(since).map((r) => r.body.messages), events: turn.json.response.events };
    };
    const straight = await prompts(false);
    const resumed = await prompts(true);
    expect(straight.sent[0]?.length).toBeGreaterThan(4); // the history went into the prompt
    expect(resumed.sent).toEqual(straight.sent);
    const shown = (events: { event: string; data: { content?: string } }[]) => events.filter((e) => e.event === 'message').map((e) => e.data.content);
    expect(shown(resumed.events)).toEqual(shown(straight.events));
  });

  it('a stop during the turn answers 202, and the turn commits as cancelled before its next batch', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, fourSteps);
    const since = model.calls;
    const release = gate();
    model.enqueue(held('a', release));
    {
      const message = await claimAsync(workflowId);
      const queue = createInProcessQueue((records) => processBatch({ engine, guard: new SsrfGuard() }, records));
      await queue.enqueue(message);
      await model.arrived(since + 1); // the worker is in A: the model holds its answer

      const stop = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_id: message.run_id, run_input: { command: 'stop' } } });
      expect(stop.status).toBe(202);
      expect(stop.json).toEqual({ run_id: message.run_id, turn_number: 1, status: 'running' });
      // an answer to the form (or a query) meanwhile is still refused: the turn is in flight
      const query = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_id: message.run_id, run_input: { query: 'more' } } });
      expect(query.status).toBe(409);
      expect(query.json.code).toBe('turn_in_progress');

      release.open();
      await queue.idle();
      const run = await api.call('GET', `/workflows/v1/workflow-runs/${message.run_id}`);
      expect(run.json).toMatchObject({ status: 'cancelled', turn_number: 1, is_terminal: true });
      const turn = await api.call('GET', `/workflows/v1/workflow-runs/${message.run_id}/turns/1`);
      const events = turn.json.response.events as { event: string }[];
      expect(events.at(-1)?.event).toBe('workflow_cancelled');
      // the stop came during A: A finished, nothing after it ran
      expect(stepsCalled(since)).toEqual(['A']);
    }
  });

  it('a stop that lands after the last checkpoint still wins: the turn ends cancelled from that checkpoint', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, fourSteps);
    const message = await claimAsync(workflowId);
    const deps: QueueDeps = { engine, guard: new SsrfGuard() };
    const runId = message.run_id as string;
    const failures = await processBatch(deps, [sqsRecord(JSON.stringify(message))], {
      hooks: {
        // checkpoints follow the model calls; 4 (after D, before Message:Out) is the last: the
        // stop arrives just after it
        async afterCheckpoint(seq) {
          if (seq !== 4) return;
          const head = await getHead(engine.store, api.tenant, runId);
          expect(await requestCancel(engine.store, head, message.claim?.token as string)).toBe(true);
        },
      },
    });
    expect(failures.batchItemFailures).toEqual([]);
    const turn = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/1`);
    expect(turn.json.status).toBe('cancelled');
    const events = turn.json.response.events as { event: string; data: { component_id?: string } }[];
    expect(events.at(-1)?.event).toBe('workflow_cancelled');
    // Message:Out ran in the dropped batch: nothing of it was committed
    expect(events.some((e) => e.data.component_id === 'Message:Out')).toBe(false);
    expect(events.filter((e) => e.event === 'node_finished').map((e) => e.data.component_id)).toEqual(['begin', 'LLM:A', 'LLM:B', 'LLM:C', 'LLM:D']);
  });

  it('two deliveries of one message at once: one runs the turn, the other is handed back', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, fourSteps);
    const since = model.calls;
    const release = gate();
    model.enqueue(held('a', release));
    {
      const message = await claimAsync(workflowId);
      const deps: QueueDeps = { engine, guard: new SsrfGuard() };
      const body = JSON.stringify(message);
      const first = processBatch(deps, [sqsRecord(body, 'same-message')]);
      await model.arrived(since + 1); // the first delivery holds the lease, in A
      const second = await processBatch(deps, [sqsRecord(body, 'same-message', 2)]);
      expect(second.batchItemFailures).toEqual([{ itemIdentifier: 'same-message' }]);
      release.open();
      expect((await first).batchItemFailures).toEqual([]);
      // delivered again after the commit: the stored answer, no model call
      const third = await processBatch(deps, [sqsRecord(body, 'same-message', 3)]);
      expect(third.batchItemFailures).toEqual([]);
      expect(stepsCalled(since)).toEqual(['A', 'B', 'C', 'D']);
    }
  });

  it('a stop meeting a sync turn in progress is refused with 409; on a finished run, run_finished', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, graph({
      begin: ['Begin', { mode: 'task' }, ['LLM:A']],
      'LLM:A': llmStep('A', []),
    }));
    const release = gate();
    const since = model.calls;
    model.enqueue(held('a', release));
    {
      const turn = api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'q' } } });
      await model.arrived(since + 1); // the turn holds its claim, the model its answer
      const runs = await api.call('GET', `/workflows/v1/workflow-runs?workflow_id=${workflowId}`);
      const runId = runs.json.items[0].run_id as string;
      const stop = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_id: runId, run_input: { command: 'stop' } } });
      expect(stop.status).toBe(409);
      expect(stop.json.code).toBe('turn_in_progress');
      release.open();
      expect((await turn).json.status).toBe('completed');
      const late = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_id: runId, run_input: { command: 'stop' } } });
      expect(late.status).toBe(409);
      expect(late.json.code).toBe('run_finished');
    }
  });

  it('can be followed from a cursor while it runs: JSON pages and SSE both read exactly the committed events', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, fourSteps);
    {
      const message = await claimAsync(workflowId);
      const runId = message.run_id as string;
      const path = `/workflows/v1/workflow-runs/${runId}/turns/1/events`;
      // the worker waits at each checkpoint (after A, B, C, D) until the test has read a page
      const written = [1, 2, 3, 4].map(() => gate());
      const goOn = [1, 2, 3, 4].map(() => gate());
      const queue = createInProcessQueue((records) => processBatch({ engine, guard: new SsrfGuard() }, records, {
        hooks: {
          async afterCheckpoint(seq) {
            written[seq - 1]?.open();
            await goOn[seq - 1]?.opened;
          },
        },
      }));
      const sse = fetch(`${api.url}${path}?format=sse`, { headers: { authorization: `Bearer ${api.adminKey}` } }).then((r) => r.text());
      await queue.enqueue(message);

      const polled: unknown[] = [];
      let cursor = '';
      let pagesBeforeCommit = 0;
      const page = async () => {
        const read = await api.call('GET', `${path}${cursor ? `?cursor=${cursor}` : ''}`);
        expect(read.status).toBe(200);
        polled.push(...read.json.events);
        cursor = read.json.next_cursor;
        return read.json as { events: unknown[]; committed: boolean };
      };
      for (let k = 0; k < 4; k++) {
        await written[k]?.opened;
        const read = await page();
        expect(read.committed).toBe(false);
        if (read.events.length > 0) pagesBeforeCommit++;
        goOn[k]?.open();
      }
      while (!(await page()).committed);
      await queue.idle();
      const turn = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/1`);
      const committed = turn.json.response.events as unknown[];
      // each checkpoint made new events readable before the commit
      expect(pagesBeforeCommit).toBe(4);
      expect(polled).toEqual(committed);

      const frames = sseFrames(await sse);
      expect(frames.at(-1)?.event).toBe('turn_response');
      expect(frames.at(-1)?.data).toEqual(turn.json.response);
      expect(frames.slice(0, -1).map((f) => ({ event: f.event, data: f.data }))).toEqual(committed);

      // a client that reconnects from any cursor it was given reads the rest, no more, no less
      const ids = [...(await (await fetch(`${api.url}${path}?format=sse`, { headers: { authorization: `Bearer ${api.adminKey}` } })).text()).matchAll(/^id: (.*)$/gm)].map((m) => m[1]);
      const middle = ids[Math.floor(ids.length / 2)] as string;
      const rest = await fetch(`${api.url}${path}?format=sse`, { headers: { authorization: `Bearer ${api.adminKey}`, 'last-event-id': middle } }).then((r) => r.text());
      expect(sseFrames(rest).slice(0, -1).map((f) => ({ event: f.event, data: f.data }))).toEqual(committed.slice(Math.floor(ids.length / 2) + 1));

      const bad = await api.call('GET', `${path}?cursor=nope`);
      expect(bad.status).toBe(400);
      const missing = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/2/events`);
      expect(missing.status).toBe(404);
    }
  });

  it('a follow stream ends at its time limit, and the client goes on from its last cursor', async () => {
    const own = await serveApp(engine, { enqueue: async () => undefined, followMaxMs: 800 }); // the hosting's limit
    try {
      const workflowId = await newWorkflow(engine, own.tenant, fourSteps);
      const accepted = await own.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'q' } }, headers: { prefer: 'respond-async' } });
      const path = `/workflows/v1/workflow-runs/${accepted.json.run_id}/turns/1/events?format=sse`;
      const first = await fetch(`${own.url}${path}`, { headers: { authorization: `Bearer ${own.adminKey}` } });
      expect(await first.text()).toBe(''); // nothing checkpointed yet: the stream just ends
      // the turn runs meanwhile; the reconnecting follower reads it to its end
      await processBatch({ engine, guard: new SsrfGuard() }, [sqsRecord(JSON.stringify({ tenant: own.tenant, workflow_id: workflowId, run_id: accepted.json.run_id, turn_number: 0, run_input: { query: 'q' }, claim: { token: (await getHead(engine.store, own.tenant, accepted.json.run_id)).claim?.token, turn: 1 } }))]);
      const second = await fetch(`${own.url}${path}`, { headers: { authorization: `Bearer ${own.adminKey}` } });
      expect(sseFrames(await second.text()).at(-1)).toMatchObject({ event: 'turn_response', data: { status: 'completed' } });
    } finally {
      await own.close();
    }
  });

  it('a follower that goes away stops costing reads', async () => {
    // two followers of turns nobody runs, each on a server of its own that counts its reads:
    // one leaves, the other stays on as the yardstick of time passing
    const counted = () => {
      let reads = 0;
      const waiters = new Set<{ n: number; resolve: () => void }>();
      const onCapacity = (operation: string) => {
        if (operation !== 'checkpoint') return;
        reads++;
        for (const w of waiters) if (reads >= w.n) (waiters.delete(w), w.resolve());
      };
      return {
        engine: { ...engine, store: { ...engine.store, onCapacity } },
        get reads() {
          return reads;
        },
        /** Resolves once `n` reads were made in all. */
        reached: (n: number) => new Promise<void>((resolve) => (reads >= n ? resolve() : waiters.add({ n, resolve }))),
      };
    };
    const leaver = counted();
    const yardstick = counted();
    const servers = [await serveApp(leaver.engine, { enqueue: async () => undefined }), await serveApp(yardstick.engine, { enqueue: async () => undefined })];
    const follows: AbortController[] = [];
    try {
      for (const own of servers) {
        const workflowId = await newWorkflow(engine, own.tenant, fourSteps);
        const accepted = await own.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'q' } }, headers: { prefer: 'respond-async' } });
        const leave = new AbortController();
        follows.push(leave);
        const res = await fetch(`${own.url}/workflows/v1/workflow-runs/${accepted.json.run_id}/turns/1/events?format=sse`, { headers: { authorization: `Bearer ${own.adminKey}` }, signal: leave.signal });
        expect(res.status).toBe(200);
        void res.body?.getReader().read().catch(() => undefined);
      }
      await leaver.reached(2); // two polls at least while it follows
      follows[0]?.abort();
      const atLeaving = leaver.reads;
      // while the one that stayed polls five times more, the one that left would poll at least
      // three times: it polls once more at most (a poll in flight when it left)
      await yardstick.reached(yardstick.reads + 5);
      expect(leaver.reads - atLeaving).toBeLessThanOrEqual(1);
    } finally {
      for (const leave of follows) leave.abort();
      for (const own of servers) await own.close();
    }
  });

  it('a worker presumed dead and taken over stops at its next checkpoint without committing', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, fourSteps);
    const since = model.calls;
    const message = await claimAsync(workflowId);
    const runId = message.run_id as string;
    const body = JSON.stringify(message);
    const outcomes: Outcome['kind'][] = [];
    const deps: QueueDeps = { engine, guard: new SsrfGuard(), count: (o) => outcomes.push(o) };
    // a worker a lease later, as the stalled worker's lease looks to everyone else by then
    const later = () => Date.now() + LEASE_MS + 1;
    const successorDeps: QueueDeps = { ...deps, engine: { ...engine, clock: later, store: { ...engine.store, now: later } } };
    let successor: Promise<unknown> | undefined;
    const zombie = processBatch(deps, [sqsRecord(body, 'm-zombie')], {
      hooks: {
        async afterCheckpoint(seq) {
          if (seq !== 2 || successor) return; // after A and B
          // the worker stalls here past its lease; another takes the turn over and finishes it
          successor = processBatch(successorDeps, [sqsRecord(body, 'm-successor')]);
          await successor;
        },
      },
    });
    expect((await zombie).batchItemFailures).toEqual([]);
    expect(outcomes.sort()).toEqual(['done', 'superseded']);
    const turn = await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/1`);
    expect(turn.json.response.status).toBe('completed');
    // the successor went on from checkpoint 2 (after B); the stalled worker ran at most the one
    // batch it was in when it woke up (C) before its next checkpoint was refused
    const calls = stepsCalled(since);
    expect(calls.filter((s) => s === 'A')).toHaveLength(1);
    expect(calls.filter((s) => s === 'B')).toHaveLength(1);
    expect(calls.filter((s) => s === 'C').length).toBeLessThanOrEqual(2);
    expect(calls.filter((s) => s === 'D')).toHaveLength(1);
  });

  it('an async turn whose claim was taken by another request before any worker ran it is reported as refused', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, fourSteps);
    const received: { event: string; body: string }[] = [];
    const hookServer = await serveHook(received);
    try {
      const message = await claimAsync(workflowId, { run_input: { query: 'q' }, callback_url: hookServer.url });
      const runId = message.run_id as string;
      // the claim's hold ran out while the message waited (no worker ever took it)
      await engine.store.doc.send(new UpdateCommand({
        TableName: engine.store.table,
        Key: { pk: keys.session(api.tenant, runId), sk: keys.turn(1) },
        UpdateExpression: 'SET claim_expires = :past',
        ExpressionAttributeValues: { ':past': 0 },
      }));
      // turn 1 cannot be claimed by someone else (the run has no turn yet), so stop it instead
      const stop = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_id: runId, run_input: { command: 'stop' } } });
      expect(stop.status, stop.text).toBe(200);
      const outcomes: Outcome[] = [];
      const failures = await processBatch({ engine, guard: new SsrfGuard({ allow: ['127.0.0.1'] }), log: (_m, f) => outcomes.push(f as unknown as Outcome) }, [sqsRecord(JSON.stringify(message))]);
      expect(failures.batchItemFailures).toEqual([]);
      expect(outcomes.at(-1)).toMatchObject({ kind: 'failed', code: 'claim_lost' });
      expect(received.map((r) => r.event)).toEqual(['turn.rejected']);
      expect(JSON.parse(received[0]?.body ?? '{}')).toMatchObject({ event: 'turn.rejected', data: { code: 'claim_lost', run_id: runId } });
    } finally {
      await hookServer.close();
    }
  });
});

async function serveHook(received: { event: string; body: string }[]): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += String(chunk);
    received.push({ event: String(req.headers['easel-event']), body });
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
