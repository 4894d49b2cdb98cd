import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdempotencyMismatchError, NotFoundError, TurnConflictError, TurnInProgressError } from '../../lib/store/errors';
import { listTurns, loadSession } from '../../lib/store/sessions';
import { addVersion } from '../../lib/store/workflows';
import { createRun, executeTurn, type TurnEngine } from '../../lib/turns/execute';
import { RunFinishedError } from '../../lib/canvas';
import { fixture } from '../helpers/canvas';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { OpenAiServer } from '../llm/openai-server';

let server: OpenAiServer;
let engine: TurnEngine;
beforeAll(async () => {
  server = await OpenAiServer.start();
  server.respond = (body) => ({ kind: 'text', text: `line about ${body.messages.at(-1)?.content}`, chunks: 2 });
  engine = testEngine({ openaiUrl: server.url });
});
afterAll(async () => {
  await server.close();
});

async function pausedRun(tenant: string) {
  const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
  const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'a poem' } });
  expect(first.response).toMatchObject({ status: 'waiting_for_input', turn_number: 1 });
  return { workflowId, runId: first.response.run_id };
}

describe('turns', () => {
  it('runs a conversation: pause, answer, next pass; responses carry status and turn numbers', async () => {
    const tenant = newTenant();
    const { workflowId, runId } = await pausedRun(tenant);
    expect(runId).toMatch(/^[0-9a-f]{32}$/);
    const second = await executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'sea' } } });
    expect(second.response).toMatchObject({ status: 'completed', turn_number: 2, is_completed: true, is_terminal: false, version: 1 });
    expect(second.response.outputs).toEqual({ content: 'line about Topic: sea' });
    // message deltas are merged in the stored response
    expect(second.response.events.filter((e) => e.event === 'message')).toEqual([{ event: 'message', data: { content: 'line about Topic: sea' } }]);
    const third = await executeTurn(engine, { tenant, workflowId, runId, runInput: { query: 'another' } });
    expect(third.response).toMatchObject({ status: 'waiting_for_input', turn_number: 3 });
    const { turns } = await listTurns(engine.store, tenant, runId, 0, 10);
    expect(turns.map((t) => [t.turn, t.status])).toEqual([[1, 'waiting_for_input'], [2, 'completed'], [3, 'waiting_for_input']]);
    expect(JSON.parse(turns[1]?.response ?? '{}')).toEqual(second.response);
  });

  it('checks the run, the turn number, a finished run and the inputs before claiming anything', async () => {
    const tenant = newTenant();
    const { workflowId, runId } = await pausedRun(tenant);
    await expect(executeTurn(engine, { tenant, workflowId, runId: 'f'.repeat(32), runInput: {} })).rejects.toBeInstanceOf(NotFoundError);
    await expect(executeTurn(engine, { tenant: newTenant(), workflowId, runId, runInput: {} })).rejects.toBeInstanceOf(NotFoundError);
    await expect(executeTurn(engine, { tenant, workflowId, runId, turnNumber: 0, runInput: {} })).rejects.toMatchObject({ code: 'turn_conflict', currentTurn: 1 });
    await expect(executeTurn(engine, { tenant, workflowId, runId, runInput: { inputs: { topic: { not: 'text' } } } })).rejects.toMatchObject({ code: 'invalid_inputs' });
    const loaded = await loadSession(engine.store, tenant, runId, 0);
    expect(loaded.head.claim).toBeNull();
    const stopped = await executeTurn(engine, { tenant, workflowId, runId, command: 'stop' });
    expect(stopped.response).toMatchObject({ status: 'cancelled', turn_number: 2, is_terminal: true });
    await expect(executeTurn(engine, { tenant, workflowId, runId, runInput: { query: 'x' } })).rejects.toBeInstanceOf(RunFinishedError);
  });

  it('lets exactly one of 50 concurrent answers to the same pause commit, the rest failing before any model call', async () => {
    const tenant = newTenant();
    const { workflowId, runId } = await pausedRun(tenant);
    const calls = server.calls;
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, (_, i) => executeTurn(engine, { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: `t${i}` } } })),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as unknown);
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(49);
    for (const reason of refused) expect(reason instanceof TurnInProgressError || reason instanceof TurnConflictError).toBe(true);
    expect(server.calls - calls).toBe(1);
    const { turns } = await listTurns(engine.store, tenant, runId, 0, 10);
    expect(turns.map((t) => t.turn)).toEqual([1, 2]);
    const winner = (ok[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof executeTurn>>>).value;
    expect(JSON.parse(turns[1]?.response ?? '{}')).toEqual(winner.response);
    console.log(`50 concurrent answers: 1 committed, ${refused.filter((r) => r instanceof TurnInProgressError).length} turn_in_progress, ${refused.filter((r) => r instanceof TurnConflictError).length} turn_conflict, ${server.calls - calls} model call`);
  });

  it('pins a run to the version it started on', async () => {
    const tenant = newTenant();
    const { workflowId, runId } = await pausedRun(tenant);
    const v2 = fixture('form-then-llm') as { components: Record<string, { obj: { params: Record<string, unknown> } }> };
    (v2.components['Message:Out'] as { obj: { params: Record<string, unknown> } }).obj.params.content = ['v2: {LLM:Writer@content}'];
    expect(await addVersion(engine.store, tenant, workflowId, v2, true)).toBe(2);
    const old = await executeTurn(engine, { tenant, workflowId, runId, runInput: { inputs: { topic: 'x' } } });
    expect(old.response.version).toBe(1);
    expect(old.response.outputs?.content).toBe('line about Topic: x');
    const fresh = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'y' } });
    expect(fresh.response.version).toBe(2);
    const done = await executeTurn(engine, { tenant, workflowId, runId: fresh.response.run_id, runInput: { inputs: { topic: 'z' } } });
    expect(done.response.outputs?.content).toBe('v2: line about Topic: z');
  });

  it('creates a run without a turn (turn 0, not_started) with the prologue', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    const { head, prologue } = await createRun(engine, { tenant, workflowId, userId: 'u1' });
    expect(head).toMatchObject({ turn: 0, status: 'not_started', userId: 'u1', version: 1 });
    expect(prologue).toBe('Hi! What shall we write about?');
    const first = await executeTurn(engine, { tenant, workflowId, runId: head.id, turnNumber: 0, runInput: { query: 'go' } });
    expect(first.response).toMatchObject({ run_id: head.id, turn_number: 1, status: 'waiting_for_input' });
  });
});

describe('idempotency', () => {
  it('returns the stored response byte for byte on a retry, without running again', async () => {
    const tenant = newTenant();
    const { workflowId, runId } = await pausedRun(tenant);
    const request = { tenant, workflowId, runId, turnNumber: 1, runInput: { inputs: { topic: 'owls' } }, idempotencyKey: 'answer-1' };
    const first = await executeTurn(engine, request);
    const calls = server.calls;
    const again = await executeTurn(engine, { ...request, runInput: { inputs: { topic: 'owls' } } });
    expect(again.replayed).toBe(true);
    expect(again.body).toBe(first.body);
    expect(server.calls).toBe(calls);
    await expect(executeTurn(engine, { ...request, runInput: { inputs: { topic: 'cats' } } })).rejects.toBeInstanceOf(IdempotencyMismatchError);
  });

  it('returns the same run for a retried first turn, and one result for two concurrent requests with one key', async () => {
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'hi' }, idempotencyKey: 'start-1' });
    const retry = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'hi' }, idempotencyKey: 'start-1' });
    expect(retry.response.run_id).toBe(first.response.run_id);
    expect(retry.body).toBe(first.body);

    const calls = server.calls;
    const request = { tenant, workflowId, runId: first.response.run_id, runInput: { inputs: { topic: 'twins' } }, idempotencyKey: 'same' };
    const [a, b] = await Promise.all([executeTurn(engine, request), executeTurn(engine, request)]);
    expect(a.body).toBe(b.body);
    expect([a.replayed, b.replayed].sort()).toEqual([false, true]);
    expect(server.calls - calls).toBe(1);
  });
});
