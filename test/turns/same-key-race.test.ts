/**
 * Two requests with one Idempotency-Key, sent at once to a continuing turn without
 * turn_number (the key-record path): one runs the turn, the other gets its answer — also when it
 * looked at the run before the first recorded its key and commits after it (the window that
 * once answered 409 not_waiting_for_input). Sixty rounds, so the window is hit. And, forced:
 * the first attempt commits between the second request's reads of the run's head and turn.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDynamoClients } from '../../lib/store/setup';
import { executeTurn, type TurnEngine, type TurnRequest } from '../../lib/turns/execute';
import { fingerprintOf, keyHashOf, resolveKey } from '../../lib/turns/turn-keys';
import { testTable } from '../helpers/dynamo';
import { fixture } from '../helpers/canvas';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { OpenAiServer } from '../llm/openai-server';
let server: OpenAiServer;
beforeAll(async () => { server = await OpenAiServer.start(); server.respond = () => ({ kind: 'text', text: 'x' }); });
afterAll(async () => { await server.close(); });
it('answers both with the one committed turn, 60 rounds in a row', async () => {
  const engine = testEngine({ openaiUrl: server.url });
  const tenant = newTenant();
  const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
  for (let i = 0; i < 60; i++) {
    const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'hi' } });
    const request = { tenant, workflowId, runId: first.response.run_id, runInput: { inputs: { topic: 'twins' } }, idempotencyKey: `same-${i}` };
    const [a, b] = await Promise.all([executeTurn(engine, request), executeTurn(engine, request)]);
    expect(a.body).toBe(b.body);
  }
}, 120_000);

it('answers a same-key request whose attempt commits between its two reads of the run with that turn', async () => {
  const engine = testEngine({ openaiUrl: server.url });
  const tenant = newTenant();
  const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));
  const first = await executeTurn(engine, { tenant, workflowId, runInput: { query: 'hi' } });
  const request: TurnRequest = { tenant, workflowId, runId: first.response.run_id, runInput: { inputs: { topic: 'twins' } }, idempotencyKey: 'between-reads' };
  // the first attempt records the key, claims, runs, and waits at its commit until let go
  const atCommit = gate();
  const letGo = gate();
  const attempt = executeTurn(engine, { ...request, hooks: { beforeCommit: async () => { atCommit.open(); await letGo.promise; } } });
  await atCommit.promise;
  // the second request's store: once it has read the key record and one more item of the run,
  // the first attempt commits before its next read goes out
  const { endpoint } = testTable();
  const seen = createDynamoClients({ endpoint });
  let reads = 0;
  seen.doc.middlewareStack.add((next) => async (args) => {
    const out = await next(args);
    if (++reads === 2) {
      letGo.open();
      await attempt;
    }
    return out;
  }, { step: 'initialize', name: 'commitBetweenReads' });
  const watcher: TurnEngine = { ...engine, store: { ...engine.store, doc: seen.doc } };
  const known = await resolveKey(watcher, request, keyHashOf(request), fingerprintOf(request), false, 60_000);
  expect(reads).toBeGreaterThanOrEqual(3);
  expect('replay' in known && known.replay.body).toBe((await attempt).body);
  seen.client.destroy();
});

function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
