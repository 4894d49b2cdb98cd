/**
 * Two requests with one Idempotency-Key, sent at once to a continuing turn without
 * turn_number (the key-record path): one runs the turn, the other gets its answer — also when it
 * looked at the run before the first recorded its key and commits after it (the window that
 * once answered 409 not_waiting_for_input). Sixty rounds, so the window is hit.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { executeTurn } from '../../lib/turns/execute';
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
