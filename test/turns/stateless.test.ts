/**
 * Statelessness: a conversation whose every turn runs in a fresh process (new module state,
 * the same table) gives the same events and outputs as one process running all its turns.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executeTurn, type TurnRequest } from '../../lib/turns/execute';
import type { TurnResponse } from '../../lib/turns/response';
import { fixture } from '../helpers/canvas';
import { testTable } from '../helpers/dynamo';
import { newTenant, newWorkflow, testEngine } from '../helpers/engine';
import { OpenAiServer } from '../llm/openai-server';

const run = promisify(execFile);
const WORKER = fileURLToPath(new URL('./turn-worker.ts', import.meta.url));
const TSX = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));

let server: OpenAiServer;
beforeAll(async () => {
  server = await OpenAiServer.start();
  server.respond = (body) => ({ kind: 'text', text: `on "${body.messages.at(-1)?.content}" after ${body.messages.length - 2} earlier messages`, chunks: 3 });
});
afterAll(async () => {
  await server.close();
});

const inputs: TurnRequest['runInput'][] = [
  { query: 'write about the sea' },
  { inputs: { topic: 'waves' } },
  { query: 'now the sky' },
  { inputs: {} },
  { inputs: { topic: 'clouds' } },
];

function comparable(response: TurnResponse): unknown {
  const { run_id: _id, created_at: _at, ...rest } = response;
  return {
    ...rest,
    events: rest.events.map((e) => {
      const data = { ...(e.data as Record<string, unknown>) };
      delete data.created_at;
      delete data.elapsed_time;
      return { event: e.event, data };
    }),
  };
}

describe('statelessness', () => {
  it('gives the same events and outputs with every turn in its own process', async () => {
    const engine = testEngine({ openaiUrl: server.url });
    const tenant = newTenant();
    const workflowId = await newWorkflow(engine, tenant, fixture('form-then-llm'));

    const inOne: TurnResponse[] = [];
    for (const runInput of inputs) {
      const runId = inOne.at(-1)?.run_id;
      inOne.push((await executeTurn(engine, { tenant, workflowId, ...(runId ? { runId } : {}), runInput })).response);
    }

    const { endpoint, tableName } = testTable();
    const inMany: TurnResponse[] = [];
    for (const runInput of inputs) {
      const runId = inMany.at(-1)?.run_id;
      const request: TurnRequest = { tenant, workflowId, ...(runId ? { runId } : {}), runInput };
      const { stdout } = await run(TSX, [WORKER, JSON.stringify({ request, endpoint, table: tableName, openaiUrl: server.url })], {
        env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      });
      inMany.push(JSON.parse(stdout) as TurnResponse);
    }
    expect(inMany.map((r) => r.turn_number)).toEqual([1, 2, 3, 4, 5]);
    expect(inMany.map((r) => r.status)).toEqual(['waiting_for_input', 'completed', 'waiting_for_input', 'waiting_for_input', 'completed']);
    expect(inMany.map(comparable)).toEqual(inOne.map(comparable));
  }, 60_000);
});
