/**
 * Fork exactness: for generated workflows and conversations (test/helpers/workflow-generator),
 * a fork of the run at turn k, given the original answers from turn k + 1 on, gives the same
 * events, outputs and statuses as the original did from there. Every turn goes through the turn
 * engine and DynamoDB Local, so each turn of the fork is run from its stored state in a fresh
 * Canvas; the parent is deleted before the fork goes on, so nothing of it is read. (The
 * generated workflows' models see no history: test/http/forks.test.ts checks that a fork keeps
 * the conversation the model is shown.)
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CanvasEvent, RunInput } from '../../lib/canvas';
import { withComponents } from '../../lib/components';
import { createWorkflow } from '../../lib/store/workflows';
import { executeTurn, type TurnEngine } from '../../lib/turns/execute';
import { forkRun } from '../../lib/turns/forks';
import { deleteRun } from '../../lib/turns/runs';
import { newTenant, testEngine } from '../helpers/engine';
import { streamer } from '../helpers/streamer';
import { answerFor, buildDsl, generatedKnowledge, workflowSpecArb } from '../helpers/workflow-generator';
import { OpenAiServer, type RecordedRequest, type Reply } from '../llm/openai-server';

/** A model whose answer depends only on what it is sent. */
function deterministicModel(body: RecordedRequest['body']): Reply {
  let hash = 0;
  for (const ch of body.messages.map((m) => m.content).join('|')) hash = (hash * 31 + ch.charCodeAt(0)) | 0;
  if (body.messages[0]?.content.startsWith('You sort user messages')) return { kind: 'text', text: hash % 2 === 0 ? 'alpha' : 'beta' };
  return { kind: 'text', text: `answer ${Math.abs(hash) % 1000} to ${body.messages.length} messages`, chunks: 1 + (Math.abs(hash) % 3) };
}

let server: OpenAiServer;
let engine: TurnEngine;
beforeAll(async () => {
  server = await OpenAiServer.start();
  server.respond = deterministicModel;
  engine = { ...testEngine({ openaiUrl: server.url, knowledge: generatedKnowledge() }), registry: withComponents(streamer), clock: () => Date.UTC(2026, 5, 1) };
});
afterAll(async () => {
  await server.close();
});

const MAX_TURNS = 12;

/** The next input of a user who answers every form in full, then asks one more question. */
function nextInput(previous: { status: string; events: CanvasEvent[] } | undefined, k: number, asked: { more: boolean }): RunInput | undefined {
  if (!previous) return { query: 'start', inputs: {} };
  const end = previous.events.at(-1);
  if (end?.event === 'user_inputs') {
    return { inputs: Object.fromEntries(Object.entries(end.data.inputs).map(([key, f], i) => [key, answerFor(f.type, k + i, f.options)])) };
  }
  if (previous.status === 'completed' && !asked.more) {
    asked.more = true;
    return { query: `again ${k}` };
  }
  return undefined;
}

/** What two runs of the same conversation share: no times, no ids of the run. */
function comparable(response: { status: string; events: CanvasEvent[]; outputs: unknown }) {
  const events = response.events.map((e) => {
    const data = { ...(e.data as Record<string, unknown>) };
    delete data.created_at;
    delete data.elapsed_time;
    return { event: e.event, data };
  });
  return { status: response.status, outputs: response.outputs, events };
}

describe('forks', () => {
  it('given the original answers from the forked turn on, repeat the original run exactly', async () => {
    let forked = 0;
    await fc.assert(
      fc.asyncProperty(workflowSpecArb, fc.nat(100), async (spec, at) => {
        const tenant = newTenant();
        const workflowId = `wf${randomBytes(4).toString('hex')}`;
        await createWorkflow(engine.store, { tenant, id: workflowId, name: workflowId, dsl: buildDsl(spec) });
        const inputs: RunInput[] = [];
        const original: ReturnType<typeof comparable>[] = [];
        let runId: string | undefined;
        let previous: { status: string; events: CanvasEvent[] } | undefined;
        const asked = { more: false };
        for (let k = 1; k <= MAX_TURNS; k++) {
          const input = nextInput(previous, k, asked);
          if (!input) break;
          const { response } = await executeTurn(engine, { tenant, workflowId, ...(runId ? { runId, turnNumber: k - 1 } : {}), runInput: input });
          runId = response.run_id;
          inputs.push(input);
          original.push(comparable(response));
          previous = response;
          if (response.is_terminal) break;
        }
        if (!runId || original.length < 2) return;
        const k = 1 + (at % (original.length - 1));
        const { run } = await forkRun(engine, { tenant, runId, turn: k });
        forked++;
        expect(run.turn_number).toBe(k);
        await deleteRun(engine, tenant, runId);
        for (let n = k + 1; n <= original.length; n++) {
          const { response } = await executeTurn(engine, { tenant, workflowId, runId: run.run_id, turnNumber: n - 1, runInput: inputs[n - 1]! });
          expect(response.turn_number).toBe(n);
          expect(comparable(response)).toEqual(original[n - 1]);
        }
      }),
      { seed: 20261202, numRuns: 25 },
    );
    // the property was about forks: most generated conversations had one
    expect(forked).toBeGreaterThan(10);
  }, 300_000);
});
