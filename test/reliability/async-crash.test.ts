/**
 * An async turn whose worker process is killed (SIGKILL) mid-turn is finished by another
 * worker process from its last checkpoint. The model server counts every call: the calls made
 * before the checkpoint are not made again.
 *
 * Each worker is a process of its own (test/turns/async-worker.ts, bundled once with esbuild)
 * running the real queue handler on an SQS record; the turn is claimed over HTTP with
 * `Prefer: respond-async`. Time is the test's: every worker gets its clock from the test, so a
 * killed worker's lease is still running for a worker started at the same instant and has run
 * out for one started a lease later, however long the machine takes between the two. The test
 * waits for what the workers print, never for a fixed time.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueueMessage } from '../../lib/turns/queue';
import { graph, llmStep, stepOf } from '../helpers/dsl-builder';
import { testTable } from '../helpers/dynamo';
import { newWorkflow, testEngine } from '../helpers/engine';
import { type Served, serveApp } from '../helpers/http';
import { OpenAiServer } from '../llm/openai-server';

const WORKER = fileURLToPath(new URL('../turns/async-worker.ts', import.meta.url));
const LEASE_MS = 60_000;
/** The workers' clock: it stands still at T0 unless the test moves a worker past a lease. */
const T0 = Date.now();
const AFTER_THE_LEASE = T0 + LEASE_MS + 1;
let bundle: string;

const threeSteps = graph({
  begin: ['Begin', { mode: 'task' }, ['LLM:A']],
  'LLM:A': llmStep('A', ['LLM:B']),
  'LLM:B': llmStep('B', ['LLM:C']),
  'LLM:C': llmStep('C', ['Message:Out']),
  'Message:Out': ['Message', { content: ['{LLM:A@content} / {LLM:B@content} / {LLM:C@content}'] }],
});

let model: OpenAiServer;
let stallFirstB = false;
/** Told when the model server received the call to B it holds (the test kills the worker then). */
let onStalledB: (() => void) | undefined;
let api: Served;
const queued: QueueMessage[] = [];
let engine: ReturnType<typeof testEngine>;

beforeAll(async () => {
  bundle = join(mkdtempSync(join(tmpdir(), 'easel-async-worker-')), 'worker.cjs');
  await build({ entryPoints: [WORKER], bundle: true, platform: 'node', format: 'cjs', target: 'node20', outfile: bundle, logLevel: 'error' });
  model = await OpenAiServer.start();
  engine = testEngine({ leaseMs: LEASE_MS, openaiUrl: model.url });
  model.respond = (body) => {
    const step = stepOf(body.messages) ?? '?';
    if (step === 'B' && stallFirstB) {
      stallFirstB = false;
      onStalledB?.();
      return { kind: 'stall' };
    }
    return { kind: 'text', text: `answer-${step}`, chunks: 2 };
  };
  api = await serveApp(engine, { enqueue: async (message) => void queued.push(message as QueueMessage) });
});
afterAll(async () => {
  if (bundle) rmSync(dirname(bundle), { recursive: true, force: true });
  await api.close();
  await model.close();
});

/** Requests the model server received for each step, and how many of them were answered. */
function callsByStep(since: number): Record<string, { made: number; answered: number }> {
  const out: Record<string, { made: number; answered: number }> = {};
  for (const r of model.requests.slice(since)) {
    const step = stepOf(r.body.messages) ?? '?';
    out[step] ??= { made: 0, answered: 0 };
    out[step].made++;
    if (r.completed) out[step].answered++;
  }
  return out;
}

interface Worker {
  child: ChildProcess;
  lines: string[];
  /** Resolves with the first line matching, rejects if the process exits first. */
  waitFor(pattern: RegExp): Promise<string>;
  exited: Promise<number | null>;
}

function startWorker(body: string, receiveCount: number, options: { pauseAfterCheckpoint?: number; messageId?: string; now?: number } = {}): Worker {
  const { endpoint, tableName } = testTable();
  const child = spawn(process.execPath, [bundle, JSON.stringify({
    endpoint,
    table: tableName,
    openaiUrl: model.url,
    body,
    messageId: options.messageId ?? 'message-of-the-async-turn',
    receiveCount,
    leaseMs: LEASE_MS,
    now: options.now ?? T0,
    ...(options.pauseAfterCheckpoint !== undefined ? { pauseAfterCheckpoint: options.pauseAfterCheckpoint } : {}),
  })], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' } });
  const lines: string[] = [];
  const waiters: { pattern: RegExp; resolve: (line: string) => void }[] = [];
  let buffer = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      lines.push(line);
      for (const w of [...waiters]) if (w.pattern.test(line)) w.resolve(line);
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    lines,
    exited,
    waitFor(pattern) {
      const seen = lines.find((l) => pattern.test(l));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ pattern, resolve });
        // every line it printed has been read by the time 'exit' is handled
        void exited.then(() => {
          const line = lines.find((l) => pattern.test(l));
          if (line) resolve(line);
          else reject(new Error(`the worker exited without ${pattern}: ${lines.join(' | ')}`));
        });
      });
    },
  };
}

async function kill(worker: Worker): Promise<void> {
  worker.child.kill('SIGKILL');
  expect(await worker.exited).toBeNull(); // killed by the signal, not exited
}

/** Claims an async turn over HTTP; returns the queue message body the worker gets. */
async function startAsyncTurn(workflowId: string): Promise<{ body: string; runId: string }> {
  const res = await api.call('POST', `/workflows/v1/workflows/${workflowId}/execute`, { body: { run_input: { query: 'the report' } }, headers: { prefer: 'respond-async' } });
  expect(res.status).toBe(202);
  const accepted = res.json as { run_id: string; turn_number: number; status: string };
  expect(accepted).toMatchObject({ turn_number: 1, status: 'running' });
  const message = queued.find((m) => m.run_id === accepted.run_id);
  if (!message) throw new Error('nothing was queued');
  return { body: JSON.stringify(message), runId: accepted.run_id };
}

async function readRun(runId: string) {
  return (await api.call('GET', `/workflows/v1/workflow-runs/${runId}`)).json as { status: string; turn_number: number; turn_in_progress: number | null };
}

async function readTurn(runId: string, turn: number) {
  return (await api.call('GET', `/workflows/v1/workflow-runs/${runId}/turns/${turn}`)).json as {
    status: string;
    response: { status: string; events: { event: string; data: Record<string, unknown> }[] };
  };
}

/** Claims of the run that hold a checkpoint (an async turn's checkpoint lives in its claim). */
async function checkpointItems(runId: string): Promise<number> {
  const tenant = api.tenant;
  const { doc, tableName } = testTable();
  const out = await doc.send(new QueryCommand({
    TableName: tableName,
    KeyConditionExpression: 'pk = :pk AND begins_with(sk, :p)',
    FilterExpression: 'kind = :claim AND attribute_exists(ck)',
    ExpressionAttributeValues: { ':pk': `T#${tenant}#S#${runId}`, ':p': 'T#', ':claim': 'claim' },
  }));
  return out.Count ?? 0;
}


describe('an async turn whose worker is killed mid-turn', () => {
  it('is finished by a second worker from its checkpoint, each model call made exactly once', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, threeSteps);
    const since = model.calls;
    const { body, runId } = await startAsyncTurn(workflowId);

    // checkpoints follow the model calls: 1 after LLM:A, 2 after LLM:B; the worker hangs after 2
    const first = startWorker(body, 1, { pauseAfterCheckpoint: 2 });
    await first.waitFor(/^checkpoint 2$/);
    await kill(first);
    expect(callsByStep(since)).toEqual({ A: { made: 1, answered: 1 }, B: { made: 1, answered: 1 } });
    // for everyone else the run is still before the turn, with the turn in flight
    expect(await readRun(runId)).toMatchObject({ status: 'running', turn_number: 0, turn_in_progress: 1 });
    expect(await checkpointItems(runId)).toBeGreaterThan(0);

    // redelivered at the instant the worker died, its lease still running: handed back, nothing run
    const early = startWorker(body, 2);
    expect(await early.waitFor(/^result /)).toBe('result {"batchItemFailures":[{"itemIdentifier":"message-of-the-async-turn"}]}');
    await early.exited;
    expect(model.calls - since).toBe(2);

    // redelivered a lease later: the dead worker's lease has run out, the turn is taken over
    const second = startWorker(body, 3, { now: AFTER_THE_LEASE });
    expect(await second.waitFor(/^result /)).toBe('result {"batchItemFailures":[]}');
    expect(await second.exited).toBe(0);
    // its log says where it took the turn up: at checkpoint 2, then one checkpoint (after C)
    const done = JSON.parse((await second.waitFor(/^log .*"kind":"done"/)).slice(4)) as Record<string, unknown>;
    expect(done).toMatchObject({ message: 'queued turn done', status: 'completed', resumed_from_checkpoint: 2, checkpoints_written: 1 });

    expect(callsByStep(since)).toEqual({ A: { made: 1, answered: 1 }, B: { made: 1, answered: 1 }, C: { made: 1, answered: 1 } });
    expect(await readRun(runId)).toMatchObject({ status: 'completed', turn_number: 1, turn_in_progress: null });
    const turn = await readTurn(runId, 1);
    expect(turn.status).toBe('completed');
    const started = turn.response.events.filter((e) => e.event === 'node_started').map((e) => e.data.component_id);
    expect(started).toEqual(['begin', 'LLM:A', 'LLM:B', 'LLM:C', 'Message:Out']);
    const shown = turn.response.events.filter((e) => e.event === 'message').map((e) => e.data.content).join('');
    expect(shown).toBe('answer-A / answer-B / answer-C');
    expect(await checkpointItems(runId)).toBe(0);
  }, 180_000);

  it('killed while the model is answering: only the unanswered call is made again', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, threeSteps);
    const since = model.calls;
    const { body, runId } = await startAsyncTurn(workflowId);

    stallFirstB = true;
    const stalled = new Promise<void>((resolve) => (onStalledB = resolve));
    const first = startWorker(body, 1);
    await first.waitFor(/^checkpoint 1$/);
    await stalled; // the call to B has reached the model, which holds it
    await kill(first);
    expect(callsByStep(since)).toEqual({ A: { made: 1, answered: 1 }, B: { made: 1, answered: 0 } });

    const second = startWorker(body, 2, { now: AFTER_THE_LEASE });
    expect(await second.waitFor(/^result /)).toBe('result {"batchItemFailures":[]}');
    await second.exited;

    expect(callsByStep(since)).toEqual({ A: { made: 1, answered: 1 }, B: { made: 2, answered: 1 }, C: { made: 1, answered: 1 } });
    const turn = await readTurn(runId, 1);
    expect(turn.response.status).toBe('completed');
    expect(turn.response.events.filter((e) => e.event === 'node_finished' && e.data.component_id === 'LLM:B')).toHaveLength(1);
    expect(await checkpointItems(runId)).toBe(0);
  }, 180_000);

  it('a queued turn without a claim (a scheduled run) resumes the same way on redelivery of its message', async () => {
    const workflowId = await newWorkflow(engine, api.tenant, threeSteps);
    const since = model.calls;
    const body = JSON.stringify({ tenant: api.tenant, workflow_id: workflowId, run_input: { query: 'the digest' }, idempotency_key: 'digest:2026-11-30T09:00:00Z' });
    const messageId = 'scheduled-message-1';

    const first = startWorker(body, 1, { pauseAfterCheckpoint: 2, messageId });
    await first.waitFor(/^checkpoint 2$/);
    await kill(first);
    expect(callsByStep(since)).toEqual({ A: { made: 1, answered: 1 }, B: { made: 1, answered: 1 } });

    // the run was made by the claim, before the turn ran
    const listed = await api.call('GET', `/workflows/v1/workflow-runs?workflow_id=${workflowId}`);
    expect(listed.json.items).toHaveLength(1);
    const second = startWorker(body, 2, { messageId, now: AFTER_THE_LEASE });
    expect(await second.waitFor(/^result /)).toBe('result {"batchItemFailures":[]}');
    await second.exited;
    expect(callsByStep(since)).toEqual({ A: { made: 1, answered: 1 }, B: { made: 1, answered: 1 }, C: { made: 1, answered: 1 } });

    // one run, committed once
    const runs = await api.call('GET', `/workflows/v1/workflow-runs?workflow_id=${workflowId}`);
    expect(runs.json.items).toHaveLength(1);
    const runId = runs.json.items[0].run_id as string;
    expect(await readRun(runId)).toMatchObject({ status: 'completed', turn_number: 1 });
    expect(await checkpointItems(runId)).toBe(0);
  }, 180_000);
});
